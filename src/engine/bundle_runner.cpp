// OpRunner's part that runs a graph launch's bundle (engine/bulk_bundle.h): a worker that takes
// the carrier claims members and runs them one after another, each under the rules the dynamic
// path applies to an op (SPEC §3): skipped when its var carries an error, its failure left on
// its var when it mutates it, released as soon as it finishes. While members are left that this
// worker has not started, the carrier goes back to the ready queue, so that an idle worker takes
// it and steals some: a member that waits for another never waits for this worker to finish.
#include <atomic>

#include "core/error_record.h"
#include "core/exec_token.h"
#include "core/var_slot.h"
#include "engine/bulk_bundle.h"
#include "engine/call_callback.h"
#include "engine/op_runner.h"
#include "engine/thread_state.h"

namespace ordo {

namespace {

const char* name_of(const BundleMember& m) {
  return m.name ? m.name : "";
}

BundleRun* run_of(const OpBlock* carrier) {
  return static_cast<BundleRun*>(carrier->internal);
}

}  // namespace

void OpRunner::run_bundle(OpBlock* carrier, Worker* self) {
  BundleRun* run = run_of(carrier);
  run->taken();
  carrier->set_state(OpState::kRunning);
  const int32_t w = (self && self->group == carrier->group) ? self->index : -1;
  OpBlock* block = nullptr;  // what members run under, borrowed from the pool
  int64_t finished = 0;      // members finished here (their references, dropped at the end)
  for (;;) {
    if (!block && !(block = member_block(carrier, self))) {
      // No memory for a block: another run of the carrier tries again (a worker that frees
      // blocks meanwhile makes it work).
      post_bundle(carrier, self);
      break;
    }
    bool more = false;
    const uint32_t k = run->next(w, &more);
    if (k == BundleRun::kNone) break;
    if (more) post_bundle(carrier, self);
    if (run_member(carrier, k, &block, self, &finished)) ++finished;
    // A thread that is not one of the group's workers (a pusher helping while throttled) runs
    // one member per take, as it runs one op: it looks at the window again between two.
    if (w < 0) break;
  }
  if (block) pool_.release(block, completion_site(self).cache);
  drop_bundle(carrier, finished + 1, self);
}

// A block for members to run under: the carrier's placement, with no links of its own (the
// member's link is in its run). Stamped with the carrier's push time for diagnostics.
OpBlock* OpRunner::member_block(const OpBlock* carrier, Worker* self) {
  OpBlock* b = pool_.acquire_out_of_line(self ? &self->cache : nullptr);
  if (!b) return nullptr;
  set_bundle_block(b, OpKind::kMember, nullptr, carrier->group);  // internal: set per member
  const uint64_t stamp = const_cast<OpBlock*>(carrier)->life().load(std::memory_order_relaxed);
  b->life().store(OpLife::with_state(stamp, OpState::kRunning), std::memory_order_release);
  return b;
}

// Queues the carrier again, unless it is queued already.
void OpRunner::post_bundle(OpBlock* carrier, Worker* self) {
  if (run_of(carrier)->try_post()) {
    carrier->group->enqueue(carrier, self ? static_cast<size_t>(self->index) : 0);
  }
}

// Runs the run's k-th member under *block. True when it finished here; false when
// it deferred and is not complete yet (it keeps the block: *block is then nullptr) or completed
// while its callback ran (finalize_member finished it, and the block is gone too). Always
// inlined into run_bundle, its one caller: once run_user_op's inline instance had a one-var
// finalize of its own, gcc made it a call (a replayed bundle member 284.7 -> 319.5 instructions).
__attribute__((always_inline)) inline bool OpRunner::run_member(OpBlock* carrier, uint32_t k,
                                                                OpBlock** block, Worker* self,
                                                                int64_t* finished) {
  BundleRun* run = run_of(carrier);
  const BundleMember& m = run->member(k);
  VarLink& link = run->link(k);
  const uint64_t start_ns = tracer_ ? tracer_->now_ns() : 0;
  if (ErrorRecord* inherited = link.var()->current_error()) {
    outcomes_.skipped();
    if (tracer_) trace_named(name_of(m), carrier, self, start_ns, TraceOutcome::kSkipped);
    end_member(carrier, link, ErrorRecord::retain(inherited));  // skipped: passes it on
    return true;
  }
  OpBlock* b = *block;
  b->fn = m.fn;
  b->user_data = m.user_data;
  b->internal = &link;
  b->has_name = m.name != nullptr;
  if (m.name) copy_name(b->name, m.name);
  ErrorRecord* failure;
  try {
    failure = call_callback(b, m.fn, m.user_data, [&m] { return name_of(m); });
  } catch (...) {  // only a forced unwind gets out of call_callback
    member_unwound(carrier, b, *finished, self);
    throw;
  }
  if (tracer_) {
    trace_named(name_of(m), b, self, start_ns, ran_outcome(b->deferred, failure != nullptr));
  }
  if (b->deferred) {
    *block = nullptr;  // the member's now, until it completes
    // Whichever of "callback returned" and "ordo_complete" comes second finishes it.
    if (b->finish_refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      finalize_member(b, b->async_error, self);
    }
    return false;
  }
  end_member(carrier, link, failure);
  return true;
}

// finalize()'s per-op half, for one member: its failure is counted and left on its var if it
// mutates it, the graph is told it finished, its var is released, and what that made ready is
// handed on (never kept by this worker: it may have more members to run first).
void OpRunner::end_member(OpBlock* carrier, VarLink& link, ErrorRecord* failure) {
  VarSlot* v = link.var();
  if (failure) {
    outcomes_.failed(failure);
    if (link.write()) v->set_error(failure);
  }
  OpHook* hook = run_of(carrier)->hook;
  hook->finished(hook);  // before the release: whoever sees the var released finds it finished
  const VarSlot::Completion done = v->complete(link);
  ErrorRecord::release(failure);
  OpBlock* ready = nullptr;
  settle_grants(done.granted, [&ready](OpBlock* r) {
    r->next = ready;
    ready = r;
  });
  if (__builtin_expect(done.fired != nullptr, 0)) {
    OpBlock* r = done.fired->op();
    r->next = ready;
    ready = r;
  }
  dispatch_chain(ready);
}

// A member that deferred is complete (its callback returned and ordo_complete was called), on
// whichever thread came second; `failure` is what ordo_complete passed.
void OpRunner::finalize_member(OpBlock* block, ErrorRecord* failure, Worker* self) {
  auto* link = static_cast<VarLink*>(block->internal);
  OpBlock* carrier = link->op();  // its line's
  end_member(carrier, *link, failure);
  pool_.release(block, completion_site(self).cache);  // deferred: a new generation
  drop_bundle(carrier, 1, self);
}

// A member's callback ended its thread (forced_unwind.cpp, for a bundle): it fails (or, if it
// deferred, its completion finishes it), the members this worker claimed and did not start go
// to another worker, and the carrier's references held here are dropped.
void OpRunner::member_unwound(OpBlock* carrier, OpBlock* block, int64_t finished, Worker* self) {
  ErrorRecord* failure = nullptr;
  bool ours = true;
  if (block->deferred) {
    ours = block->finish_refs.fetch_sub(1, std::memory_order_acq_rel) == 1;
    failure = ours ? block->async_error : nullptr;
  } else {
    failure = ErrorRecord::make(ORDO_ERR_OP_FAILED, block->op_name(),
                                "the callback's thread exited before it returned (a forced "
                                "unwind: pthread_exit or thread cancellation)");
  }
  if (ours) finalize_unwinding(block, failure, self);  // finish() -> finalize_member
  if (run_of(carrier)->untaken()) post_bundle(carrier, self);
  drop_bundle(carrier, finished + 1, self);
}

void OpRunner::drop_bundle(OpBlock* carrier, int64_t n, Worker* self) {
  BundleRun* run = run_of(carrier);
  if (!run->drop(n)) return;
  // Before the carrier counts itself: whoever sees it completed sees every member counted.
  counts_.count_bulk_completed(static_cast<int64_t>(run->count()) - 1);
  finalize(carrier, nullptr, self);  // no links; release_internal retires the run
}

}  // namespace ordo
