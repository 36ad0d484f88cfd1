#include "engine/push_path.h"

#include <algorithm>
#include <new>

#include "base/asymmetric_fence.h"
#include "base/last_error.h"
#include "base/spin_lock.h"
#include "engine/bulk_bundle.h"
#include "engine/lane_cache.h"
#include "engine/push_recorder.h"
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

// A delete's arrival invalidates the var's handle at once, under its push lock, so that no later
// push can slip in behind the delete.
void retire_handle(VarSlot* v) {
  v->live = false;
  v->gen = next_generation(v->gen);
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

ordo_status PushPath::push_resolved(const OpSpec& spec, WorkerGroup* group, VarRef* refs,
                                    size_t n) {
  // Once shutdown has begun, refuse without counting: a push rejected after counting is pending
  // for a moment, and a pusher that keeps pushing could keep the drain from ever seeing none.
  // The same test catches a thread that captures this engine's pushes (engine/push_recorder.h):
  // while any capture of it is open, every push looks whether its own thread is the one.
  if (__builtin_expect(gate_.load(std::memory_order_relaxed) != 0, 0)) {
    if (closed()) return refuse_push(ORDO_ERR_SHUTDOWN);
    PushRecorder* r = spec.kind <= OpKind::kLastCallers ? recording() : nullptr;
    if (r) return r->record(spec, group, refs, n);
  }
  Worker* self = runner_.current_worker();
  PushLane* lane = self ? self->lane : claim_lane(engine_);
  const bool shared = lane == nullptr;
  if (shared) lane = counts_.lock_shared_lane();
  // Count first, then look at kClosed: the light half of the fence shutdown's heavy one pairs
  // with, so every push either counted itself before shutdown looked (and is drained) or sees
  // kClosed and backs out.
  lane->count_push();
  AsymmetricFence::light();
  OpCache* cache = self ? &self->cache : &lane->cache;
  OpBlock* op = nullptr;
  ordo_status status = ORDO_OK;
  if (gate_.load(std::memory_order_relaxed) & kClosed) {
    status = ORDO_ERR_SHUTDOWN;
  } else if (!(op = pool_.acquire(cache)) || !attach_links(op, n)) {
    status = ORDO_ERR_NO_MEMORY;
  }
  if (status != ORDO_OK) {
    if (op) pool_.release(op, cache);
    lane->uncount_push();
    if (shared) counts_.unlock_shared_lane();
    counts_.push_backed_out();
    return refuse_push(status);  // the message after the count is back: keep the window short
  }
  // Counted here, under the shared lane's lock when the lane is shared. Only the caller's own
  // pushes are throttled: the internal ops of ordo_var_delete, ordo_var_clear_error and
  // ordo_wait_for_var must neither wait nor run callbacks on the calling thread.
  const bool user_op = spec.kind <= OpKind::kLastCallers;
  const bool check_window = user_op && lane->throttle_check_due(throttle_check_every_);
  if (shared) counts_.unlock_shared_lane();
  fill(op, spec, group);
  // For diagnostics: the push time, as the engine last read it (reading the cycle counter on
  // every push costs too much: docs/PERFORMANCE.md, "The pending-op record"), and the lane's
  // push count. A lane refreshes the reading each time the count's low 8 bits (kept in the
  // stamp) wrap, so that within one reading a lane's stamps still sort in push order.
  const uint64_t seq = static_cast<uint64_t>(lane->pushed.load(std::memory_order_relaxed));
  if ((seq & 0xFF) == 0) refresh_ticks();
  op->life().store(OpLife::pending_at(recent_ticks_.load(std::memory_order_relaxed), seq),
                   std::memory_order_release);
  bool ready = false;
  if (ordo_status s = enqueue_on_vars(op, refs, n, &ready)) {
    pool_.release(op, nullptr);  // through the pool's locked shards: the lane may be shared
    counts_.count_rejected();    // the count stays; this balances it
    return s;
  }
  // Not kept by this worker even if it could: the pusher may be an op that waits for it.
  // The lane's position picks the ready ring: two pushing threads do not share one.
  if (ready && !(lane->runs_ready_ops && run_on_pusher(op, lane))) {
    if (WorkerGroup* g = op->group) {  // what dispatch() does with no worker to keep it
      // Woke a sleeping worker (a system call): an idle spell ended, so the engine's last
      // reading of the clock is old; the next ops are stamped with a new one.
      if (g->enqueue(op, shared ? 0 : counts_.lane_index(lane))) refresh_ticks();
    } else {
      run_inline_on_pusher(op, shared ? nullptr : lane);
    }
  }
  if (check_window) check_throttle(lane, shared);
  return ORDO_OK;
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

void PushPath::fill(OpBlock* op, const OpSpec& spec, WorkerGroup* group) {
  op->fn = spec.fn;
  op->user_data = spec.user_data;
  op->free_fn = spec.free_fn;
  op->group = group;
  op->internal = spec.internal;
  op->priority = spec.priority;
  op->prop = static_cast<uint8_t>(spec.prop);
  op->device_type = static_cast<uint8_t>(spec.device_type);
  op->device_id = static_cast<uint8_t>(spec.device_id);
  op->kind = spec.kind;
  op->deferred = false;
  op->has_name = spec.name != nullptr && spec.name[0] != '\0';
  if (op->has_name) copy_name(op->name, spec.name);  // the cold name line: named ops only
}

bool PushPath::attach_links(OpBlock* op, size_t n) {
  op->num_links = static_cast<uint16_t>(n);
  if (n <= OpBlock::kInlineLinks) return true;
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
  if (n == 1) return enqueue_on_var(op, refs[0], ready);
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

// enqueue_on_vars() for the common op of one var: the same steps without the loops, the link
// cursor and the partial-grant arithmetic (about 25 instructions of every such push).
ordo_status PushPath::enqueue_on_var(OpBlock* op, const VarRef& ref, bool* ready) {
  VarSlot* v = ref.slot;
  SpinGuard guard(v->push_lock);
  if (!v->named_by(ref.gen)) return stale_var(tag_, ref);  // reads the generation: under the lock
  // Read before the arrival: an op that waits may be granted, run and recycled by a worker at
  // once, and the pusher must not touch it again (as in enqueue_on_vars).
  const bool deleting = op->kind == OpKind::kDeleteVar;
  op->wait.store(1, std::memory_order_relaxed);  // a worker's grant may come right after arrival
  VarLink& l = op->inline_lines[0].link[0];
  l.set(v, ref.access);
  *ready = v->arrive(&l);
  if (deleting) retire_handle(v);
  return ORDO_OK;
}

}  // namespace ordo
