#include "engine/push_path.h"

#include <algorithm>
#include <new>

#include "base/asymmetric_fence.h"
#include "base/last_error.h"
#include "base/spin_lock.h"
#include "engine/bulk_bundle.h"
#include "engine/lane_cache.h"
#include "engine/push_recorder.h"
#include "engine/push_resolved.h"
#include "engine/thread_state.h"

namespace ordo {

namespace {
// A lane checks the window every so many of its pushes (the check sums every lane): an eighth of
// the window, at most 256, so that the window holds within an eighth at every size.
constexpr int64_t kThrottleCheckMax = 256;
int64_t throttle_check_interval(int32_t max_pending) {
  return max_pending <= 0
             ? kThrottleCheckMax
             : std::max<int64_t>(1, std::min<int64_t>(kThrottleCheckMax, max_pending / 8));
}
}  // namespace

ordo_status refuse_push(ordo_status status) {
  if (status == ORDO_ERR_SHUTDOWN) {
    return fail(status,
                "the engine is shutting down (ordo_engine_destroy was called); nothing "
                "was done");
  }
  return fail(status, "out of memory for a new op; nothing was done");
}

PushPath::PushPath(const Parts& parts)
    : engine_(parts.engine),
      host_(parts.host),
      tag_(parts.tag),
      uid_(parts.uid),
      max_pending_(parts.cfg.max_pending),
      pushers_help_(parts.cfg.pushers_help),
      throttle_check_every_(throttle_check_interval(parts.cfg.max_pending)),
      vars_(parts.vars),
      pool_(parts.pool),
      counts_(parts.counts),
      devices_(parts.devices),
      runner_(parts.runner) {}

ordo_status PushPath::push_internal(OpKind kind, ordo_var v, uintptr_t access, void* internal) {
  VarRefs refs;
  ordo_status s = refs.collect(vars_, tag_, nullptr, 0, &v, 1);
  if (s) return s;
  refs[0].access = static_cast<uint8_t>(access);
  OpSpec spec;
  spec.kind = kind;
  spec.internal = internal;
  // Counted before the push, so that the op's completion can never be seen first.
  counts_.count_internal_push();
  s = push_resolved(spec, nullptr, refs.data(), refs.size());
  if (s != ORDO_OK) counts_.uncount_internal_push();
  return s;
}

ordo_status PushPath::push_slow(const OpSpec& spec, const ordo_var* const_vars, size_t num_const,
                                const ordo_var* mutable_vars, size_t num_mutable) {
  WorkerGroup* group;
  if (ordo_status s = route(spec.prop, spec.device_type, spec.device_id, &group)) return s;
  VarRefs refs;
  if (ordo_status s = refs.collect(vars_, tag_, const_vars, num_const, mutable_vars, num_mutable)) {
    return s;
  }
  return push_resolved_any_device(spec, group, refs.data(), refs.size());
}

// The general instance (every kind of op and placement); ordo_opr_push's plain case has its own,
// inlined into it (push_plain).
ordo_status PushPath::push_resolved(const OpSpec& spec, WorkerGroup* group, VarRef* refs,
                                    size_t n) {
  return push_resolved_as(spec, group, refs, n);
}

// Counted on the shared lane and taken from the pool's shards, once per launch: the helpers a
// push inlines (its lane, its pool cache, fill) keep that one caller, which they need to stay
// inlined into it (each costs the dynamic path 20-36 instructions per op as a call: callgrind).
ordo_status PushPath::begin_bundle(BundleRun* run, WorkerGroup* group, OpBlock** out) {
  // push_resolved's handshake with shutdown: counted, then kClosed looked at. A launch from a
  // thread that captures is refused before it gets here (api/graph_entry.h).
  if (closed()) return refuse_push(ORDO_ERR_SHUTDOWN);
  PushLane* lane = counts_.lock_shared_lane();
  lane->count_push();
  AsymmetricFence::light();
  OpBlock* op = nullptr;
  ordo_status status = ORDO_OK;
  if (gate_.load(std::memory_order_relaxed) & kClosed) {
    status = ORDO_ERR_SHUTDOWN;
  } else if (!(op = pool_.acquire_out_of_line(nullptr))) {
    status = ORDO_ERR_NO_MEMORY;
  }
  if (status != ORDO_OK) {
    lane->uncount_push();
    counts_.unlock_shared_lane();
    counts_.push_backed_out();
    return refuse_push(status);
  }
  const uint64_t seq = static_cast<uint64_t>(lane->pushed.load(std::memory_order_relaxed));
  counts_.unlock_shared_lane();
  set_bundle_block(op, OpKind::kBundle, run, group);
  op->life().store(OpLife::pending_at(recent_ticks_.load(std::memory_order_relaxed), seq),
                   std::memory_order_release);
  *out = op;
  return ORDO_OK;
}

// Out of line: the thread-local is read only while the gate word is set (a capture open).
PushRecorder* PushPath::recording() const {
  return recorder_for(host_);
}

// attach_links() for an op of more vars than a block holds inline.
bool PushPath::attach_overflow_lines(OpBlock* op, size_t n) {
  if (op->overflow_capacity < n) {  // kept with the block, so reuse allocates nothing
    const size_t num_lines = (n + LinkLine::kLinks - 1) / LinkLine::kLinks;
    auto* lines = new (std::nothrow) LinkLine[num_lines];
    if (!lines) return false;
    for (size_t i = 0; i < num_lines; ++i) lines[i].op = op;
    delete[] op->overflow_lines;
    op->overflow_lines = lines;
    op->overflow_capacity = static_cast<uint32_t>(num_lines * LinkLine::kLinks);
  }
  return true;
}

// Two-phase locking over the var list: every var's push lock is taken (lock_all waits only in
// slot address order, so concurrent pushes cannot deadlock) before the op arrives at any of
// them, which makes pushes linearizable: all vars see all ops in one global order. A thread
// completing an op takes a push lock only as a wait mark fires or a var's delete completes (for a
// few instructions, waiting for nothing while it holds it), so no pusher waits on a waiting one.
ordo_status PushPath::enqueue_on_vars(OpBlock* op, VarRef* refs, size_t n, bool* ready) {
  lock_all(refs, n);
  for (size_t i = 0; i < n; ++i) {
    if (!refs[i].slot->named_by(refs[i].gen)) {
      ordo_status s = stale_var(tag_, refs[i]);  // reads the generation: under the lock
      unlock_all(refs, n);
      return s;
    }
  }
  // The counter starts at n. Workers decrement it for accesses that wait; the pusher subtracts
  // the g it was granted at arrival. With g >= 1 the workers cannot reach zero before the pusher
  // has subtracted; with g == 0 the pusher never touches it again (nor the op, which a worker may
  // run and recycle at once), so a push whose accesses all wait costs no atomic on the op.
  const bool deleting = op->kind == OpKind::kDeleteVar;
  op->wait.store(static_cast<int32_t>(n), std::memory_order_relaxed);
  uint32_t granted = 0;
  LinkCursor links(op);
  for (size_t i = 0; i < n; ++i) {
    VarLink& l = links.next();
    l.set(refs[i].slot, refs[i].access);
    if (refs[i].slot->arrive(&l)) ++granted;
  }
  if (deleting) retire_handle(refs[0].slot);
  unlock_all(refs, n);
  if (granted == n) {
    *ready = true;  // no access of it waits anywhere, so nobody else touches its counter
  } else if (granted == 0) {
    *ready = false;
  } else {
    *ready = op->wait.fetch_sub(static_cast<int32_t>(granted), std::memory_order_acq_rel) ==
             static_cast<int32_t>(granted);
  }
  return ORDO_OK;
}

}  // namespace ordo
