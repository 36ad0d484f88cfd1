#include "engine/prepared_ops.h"

#include <algorithm>
#include <cinttypes>
#include <vector>

#include "base/last_error.h"
#include "core/handle_bits.h"
#include "engine/deferred_calls.h"
#include "engine/thread_state.h"

namespace ordo {

namespace {
// Var lists up to this long are copied for each prepared push (a few cache lines); longer ones
// cost an extra atomic on the prepared op instead.
constexpr size_t kPreparedCopyMax = 16;

ordo_status no_such_prepared(ordo_opr opr) {
  return fail(ORDO_ERR_INVALID_HANDLE,
              "prepared op handle 0x%016" PRIx64 " is deleted, foreign or made up", opr);
}
}  // namespace

ordo_status PreparedOps::create(const OpSpec& spec, const ordo_var* const_vars, size_t num_const,
                                const ordo_var* mutable_vars, size_t num_mutable, ordo_opr* out) {
  WorkerGroup* group;
  if (ordo_status s = push_.route(spec.prop, spec.device_type, spec.device_id, &group)) return s;
  VarRefs refs;
  if (ordo_status s = refs.collect(vars_, tag_, const_vars, num_const, mutable_vars, num_mutable)) {
    return s;
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    SpinGuard g(refs[i].slot->push_lock);
    if (!refs[i].slot->named_by(refs[i].gen)) return stale_var(tag_, refs[i]);
  }
  std::vector<VarRef> stored(refs.data(), refs.data() + refs.size());
  PreparedOp* p = table_.allocate();
  if (!p) {
    return fail(ORDO_ERR_NO_MEMORY,
                "ordo_opr_new: no room for another prepared op (%u alive is the most one engine "
                "holds; or memory ran out)",
                PreparedTable::kMaxOps);
  }
  p->fn = spec.fn;
  p->user_data = spec.user_data;
  p->free_fn = spec.free_fn;
  p->group = group;
  p->prop = spec.prop;
  p->device_type = spec.device_type;
  p->device_id = spec.device_id;
  copy_name(p->name, spec.name ? spec.name : "");
  p->refs.swap(stored);
  uint32_t gen = table_.publish(p);
  *out = HandleBits::encode(tag_, HandleKind::kPrepared, gen, p->index);
  return ORDO_OK;
}

PreparedOp* PreparedOps::find_live(ordo_opr opr, HandleBits* bits) {
  *bits = HandleBits::decode(opr);
  return (bits->kind == HandleKind::kPrepared && bits->tag == tag_) ? table_.find(bits->index)
                                                                    : nullptr;
}

ordo_status PreparedOps::push(ordo_opr opr, int32_t priority) {
  if (ordo_status s = check_handle_kind(opr, HandleKind::kPrepared)) return s;
  HandleBits b;
  PreparedOp* p = find_live(opr, &b);
  if (!p || !p->try_acquire(b.gen)) return no_such_prepared(opr);
  OpSpec spec;
  spec.fn = p->fn;
  spec.user_data = p->user_data;
  spec.priority = priority;
  spec.prop = p->prop;
  spec.device_type = p->device_type;
  spec.device_id = p->device_id;
  spec.name = p->name;
  spec.kind = OpKind::kPrepared;
  spec.internal = p;
  // The push may not read p->refs once its op can have run: the op's completion drops this
  // push's reference, which may be the last (the handle deleted meanwhile); the slot is then
  // reused and a new ordo_opr_new frees the list, while the push still unlocks through it.
  // Short lists are copied to the stack; a long one is kept by a second reference.
  const size_t n = p->refs.size();
  const bool copied = n <= kPreparedCopyMax;
  VarRef copy[kPreparedCopyMax];
  if (copied) {
    std::copy(p->refs.begin(), p->refs.end(), copy);
  } else {
    p->retain();
  }
  ordo_status s;
  try {
    s = push_.push_resolved_any_device(spec, p->group, copied ? copy : p->refs.data(), n);
  } catch (...) {
    // Only a forced unwind gets out of a push: the op ran inline (the naive engine, an
    // ORDO_PROP_ASYNC op) and its callback ended the thread. The op has been finished (its
    // reference dropped); this push's own goes too, or the free_fn would never run. The thread
    // runs no caller code now: a free_fn due here is queued (deferred_calls.h).
    if (!copied && p->release()) {
      ForcedUnwindScope no_caller_code;
      finish(p);
    }
    throw;
  }
  if (s != ORDO_OK && p->release()) finish(p);  // the op's reference: never pushed
  if (!copied && p->release()) finish(p);       // this push's own
  return s;
}

ordo_status PreparedOps::destroy(ordo_opr opr) {
  if (ordo_status s = check_handle_kind(opr, HandleKind::kPrepared)) return s;
  HandleBits b;
  PreparedOp* p = find_live(opr, &b);
  bool last = false;
  if (!p || !p->retire(b.gen, &last)) return no_such_prepared(opr);
  if (last) finish(p);
  return ORDO_OK;
}

// Runs the prepared op's free_fn and recycles its slot, on a thread that may hold no op of this
// engine (ordo_opr_delete's caller, a failed push): marked busy meanwhile, as under execute(),
// so that the free_fn cannot release or destroy the engine that finish() goes on using.
void PreparedOps::finish(PreparedOp* p) {
  this_thread::BusyScope busy(engine_);
  table_.finish(p);
}

}  // namespace ordo
