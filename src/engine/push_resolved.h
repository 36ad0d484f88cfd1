// PushPath::push_resolved's body, a template over where the op's fields come from: an OpSpec
// (push_path.cpp's push_resolved, every kind of op) or a PlainSpec (push_plain, ordo_opr_push
// with no options, inlined into it: its constant fields fold away). One body, so the two pushes
// cannot drift apart.
#pragma once

#include "base/asymmetric_fence.h"
#include "base/spin_lock.h"
#include "engine/lane_cache.h"
#include "engine/push_path.h"
#include "engine/push_recorder.h"
#include "engine/thread_state.h"

namespace ordo {

// A delete's arrival invalidates the var's handle at once, under its push lock, so that no later
// push can slip in behind the delete.
inline void retire_handle(VarSlot* v) {
  v->live = false;
  v->gen = next_generation(v->gen);
}

template <class Spec>
inline ordo_status PushPath::push_resolved_as(const Spec& spec, WorkerGroup* group, VarRef* refs,
                                              size_t n) {
  // Once shutdown has begun, refuse without counting: a push rejected after counting is pending
  // for a moment, and a pusher that keeps pushing could keep the drain from ever seeing none.
  // The same test catches a thread that captures this engine's pushes (engine/push_recorder.h):
  // while any capture of it is open, every push looks whether its own thread is the one.
  if (__builtin_expect(gate_.load(std::memory_order_relaxed) != 0, 0)) {
    if (closed()) return refuse_push(ORDO_ERR_SHUTDOWN);
    PushRecorder* r = spec.kind <= OpKind::kLastCallers ? recording() : nullptr;
    if (r) return r->record(full_spec(spec), group, refs, n);
  }
  Worker* self = runner_.current_worker();
  PushLane* lane = self ? self->lane : claim_lane(engine_, uid_);
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
  if (ordo_status s =
          n == 1 ? enqueue_on_var(op, refs[0], &ready) : enqueue_on_vars(op, refs, n, &ready)) {
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

template <class Spec>
inline void PushPath::fill(OpBlock* op, const Spec& spec, WorkerGroup* group) {
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

// enqueue_on_vars() for the common op of one var: the same steps without the loops, the link
// cursor and the partial-grant arithmetic (about 25 instructions of every such push).
inline ordo_status PushPath::enqueue_on_var(OpBlock* op, const VarRef& ref, bool* ready) {
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

// An op with no group (every op of the naive engine, an ORDO_PROP_ASYNC op, the internal ops
// of deletes, clears and waits) runs inside its push. Run as a helper, it and the inline ops it
// makes ready count their completions on the pushing thread's lane and return their blocks to
// its magazine, as a worker's do: pushers on two threads then share no counter and no pool
// shard (docs/PERFORMANCE.md, "Naive pushers on their own lanes"); OpRunner::run_inline_helping
// runs it so, with the first op's run cut short (docs/PERFORMANCE.md, "The naive pusher's own
// run"). Not as a helper from inside an op (helping never nests; the op is queued behind the
// running one) nor on the shared lane (nullptr: a helper needs a lane of its own). Inlined into
// both instances of push_resolved_as: it is on every push of the naive engine, and a call costs
// one 14 instructions (callgrind).
inline void PushPath::run_inline_on_pusher(OpBlock* op, PushLane* lane) {
  if (lane && !this_thread::on_an_op_stack()) {
    runner_.run_inline_helping(op, lane);
  } else {
    runner_.run_inline(op);
  }
}

}  // namespace ordo
