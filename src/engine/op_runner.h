// OpRunner: running a ready op and completing it. execute() runs the op's callback (or an
// internal op's work) and finalize() publishes its outcome on each of its vars, releases its
// grants, counts it, recycles its block, and hands on whatever became ready: kept by the worker,
// put on its deque or its group's ready rings, or run inline on this thread. An op that deferred
// is finished by whichever of "callback returned" and ordo_complete comes second.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/error_record.h"
#include "core/op_block.h"
#include "core/op_pool.h"
#include "core/var_table.h"
#include "engine/device_table.h"
#include "engine/early_release.h"
#include "engine/op_outcomes.h"
#include "engine/pending_counts.h"
#include "engine/prepared.h"
#include "exec/worker_group.h"
#include "ordo/ordo.h"
#include "trace/tracer.h"

namespace ordo {

class VarWaits;
struct BulkNode;

class OpRunner {
 public:
  // Everything is the engine's: `engine` names it in this thread's state (busy scopes, the
  // worker's host); `tracer` is nullptr when tracing is off.
  struct Parts {
    const WorkerHost* engine;
    uint32_t tag;
    OpPool& pool;
    VarTable& vars;
    PreparedTable& prepared;
    VarWaits& waits;
    PendingCounts& counts;
    OpOutcomes& outcomes;
    Tracer* tracer;
    const DeviceTable& devices;
    bool gpu_stream_waits;  // early release of same-GPU successors (engine/early_release.h)
  };
  explicit OpRunner(const Parts& parts);
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;

  // Runs a ready op on worker `self` (nullptr: a thread that is not one of this engine's
  // workers: a helping pusher, an inline run, a completing thread).
  void execute(OpBlock* op, Worker* self);
  // The op is done (ran, failed, was skipped, or is an internal op). Not for a GPU op: finish().
  void finalize(OpBlock* op, ErrorRecord* failure, Worker* self);
  // Any op is done: finalize(), or for a GPU op under early release finalize_gpu() once the
  // accesses it was granted early have been granted by their vars.
  void finish(OpBlock* op, ErrorRecord* failure, Worker* self);
  // Drops n of a bundle's references (engine/bulk_bundle.h): the last finishes its carrier.
  void drop_bundle(OpBlock* carrier, int64_t n, Worker* self);
  // Queues a bundle's carrier, unless it is queued already.
  void post_bundle(OpBlock* carrier, Worker* self);
  // A GPU op was pushed and waits on these vars: early release may start it (push path).
  void early_pushed(const VarRef* refs, size_t n);
  // Runs an op with no group on this thread; queued behind the one running when nested.
  void run_inline(OpBlock* op);
  // run_inline() on a pushing thread outside every op (this_thread::on_an_op_stack() false),
  // as a helper on its own `lane` (not nullptr): the op and the inline ops it makes ready count
  // their completions on the lane and return their blocks to its magazine, as a worker's do,
  // and what they completed is announced at the end (PushPath::run_inline_on_pusher;
  // docs/PERFORMANCE.md, "Naive pushers on their own lanes").
  void run_inline_helping(OpBlock* op, PushLane* lane);
  // ordo_exec_defer and ordo_complete.
  ordo_status defer(OpBlock* op, ordo_completion* out);
  ordo_status complete(uint32_t gen, uint32_t index, int32_t code, const char* message);
  // ordo_complete inside a forced unwind's handler (under a ForcedUnwindScope): the op is
  // finalized as by finalize_unwinding, so that the ops it makes ready to run inline on this
  // thread fail uncalled. Its free_fn runs here: only for ordo's own ops (a pushed pipeline run
  // whose pipe callback ended the thread), whose free_fn is no caller code.
  ordo_status complete_unwinding(uint32_t gen, uint32_t index, int32_t code, const char* message);
  // This engine's worker that the calling thread is, or nullptr.
  Worker* current_worker() const;
  // A GPU's StreamManager reports the event of a GPU op (`token`: its gen and index): the op
  // completes, failed with the device's message when `error` is not 0.
  static void gpu_done(void* ctx, uint64_t token, int error, const char* message);

 private:
  // kGpu: the op runs on a GPU (device_type ORDO_DEVICE_GPU): current device and stream set
  // before its callback, an event recorded after it, completed when the event fires.
  // kOnWorker: `self` is not nullptr, and the op is untraced, on the CPU: finalize_one_var
  // may hand back a successor, which this call then runs too.
  template <bool kTraced, bool kGpu, bool kOnWorker = false>
  void run_user_op(OpBlock* op, Worker* self);
  template <bool kTraced, bool kGpu, bool kOnWorker, bool kHelping>
  void run_user_op_body(OpBlock* op, Worker* self, const CompletionSite* at);
  // After a GPU op's callback returned: defers the op and records its event (a failed record
  // completes it at once, failed with the device's message).
  void track_gpu(OpBlock* op, StreamManager* gpu);
  // finalize() for a GPU op under early release: its accesses complete through EarlyRelease,
  // and so do the ops that their vars' grants finish; it inherits an early producer's failure.
  void finalize_gpu(OpBlock* op, ErrorRecord* failure, Worker* self);
  template <bool kGpu>
  OpBlock* finalize_as(OpBlock* op, ErrorRecord* failure, Worker* self);
  // finalize() of a caller's CPU op of one var that succeeded, on worker `self`: returns the op
  // its completion made ready when `self` may run it next (run_user_op runs it at once), else
  // nullptr, with whatever became ready handed on (hand_on for the rare cases).
  OpBlock* finalize_one_var(OpBlock* op, Worker* self);
  // The same off a worker's untraced loop (an op run inline, by a helping pusher, or traced),
  // counted at `at`: what the completion makes ready is handed on as finalize's end would.
  // kAnnouncedByCaller: see complete_one_var.
  template <bool kAnnouncedByCaller>
  [[gnu::always_inline]] void finalize_one_var_off_worker(OpBlock* op, const CompletionSite& at,
                                                          Worker* self);
  // The steps both share: the user data released, the completion counted at `at`, the var's
  // access completed, the block back to the pool. Returns what the var's completion granted.
  // kAnnouncedByCaller: counted on at.lane alone, not in a batch (at.unflushed is nullptr):
  // the caller announces it (run_inline_helping).
  template <bool kAnnouncedByCaller>
  [[gnu::always_inline]] VarSlot::Completion complete_one_var(OpBlock* op, const CompletionSite& at,
                                                              Worker* self);
  void hand_on(const VarSlot::Completion& done, Worker* self);
  // Dispatches the ready ops chained from `ready`, letting `self` keep one (finalize's end).
  void dispatch_ready(OpBlock* ready, Worker* self);
  // Runs or queues the ops EarlyRelease made ready.
  void dispatch_chain(OpBlock* ready);
  template <bool kUnwinding>
  ordo_status complete_as(uint32_t gen, uint32_t index, int32_t code, const char* message);
  // `failure` and `self`: finalize's, for a free_fn that ends the thread (free_fn_unwound).
  void release_user_data(OpBlock* op, ErrorRecord* failure, Worker* self);
  void release_internal(OpBlock* op, ErrorRecord* failure, Worker* self);
  // A graph launch's chain op (engine/bulk_chain.h, chain_runner.cpp): runs its nodes from
  // op->chain_at on, back to back, each under the dynamic path's skip and error rules; stops
  // where a node defers, and goes on once that node is complete (chain_resumable).
  void run_chain(OpBlock* op, Worker* self);
  // Runs node `k` of the chain; false when it deferred and is not complete yet.
  bool run_node(OpBlock* op, uint32_t k, Worker* self);
  // What a node came to (nullptr: it ran and succeeded): counted, left on the vars it mutates.
  void end_node(const BulkNode& node, ErrorRecord* failure);
  // The deferred node of a chain op is complete: its next run picks the chain up after it.
  void chain_resumable(OpBlock* op);
  // A node's callback ended its thread (forced_unwind.cpp's op_unwound, for a chain).
  void node_unwound(OpBlock* op, uint32_t k);
  void trace_named(const char* name, const OpBlock* op, Worker* self, uint64_t start_ns,
                   TraceOutcome outcome);
  // A graph launch's bundle (engine/bulk_bundle.h, bundle_runner.cpp): claims members and runs
  // them back to back, queuing the carrier again while members are left for idle workers.
  void run_bundle(OpBlock* carrier, Worker* self);
  OpBlock* member_block(const OpBlock* carrier, Worker* self);
  bool run_member(OpBlock* carrier, uint32_t k, OpBlock** block, Worker* self, int64_t* finished);
  void end_member(OpBlock* carrier, VarLink& link, ErrorRecord* failure);
  // A member that deferred is complete (finish() of a kMember block).
  void finalize_member(OpBlock* block, ErrorRecord* failure, Worker* self);
  void member_unwound(OpBlock* carrier, OpBlock* block, int64_t finished, Worker* self);
  // An ordo_wait_for_var_async's op has its turn (engine/async_wait.cpp).
  void run_async_wait(OpBlock* op, Worker* self);
  // Forced unwinds through caller code (engine/forced_unwind.cpp): a callback's thread ended
  // (pthread_exit, cancellation) and the op fails; a free_fn ended it and the op is finished;
  // an op this thread was to run inline fails without being called. finalize_unwinding is
  // finalize() inside the unwind's handler, with the inline ops it makes ready queued.
  void op_unwound(OpBlock* op, Worker* self);
  void free_fn_unwound(OpBlock* op, ErrorRecord* failure, Worker* self);
  void skip_unwound(OpBlock* op);
  void finalize_unwinding(OpBlock* op, ErrorRecord* failure, Worker* self);
  // Hands a ready op on: kept by `self`, put on its deque, or queued on its group's ready
  // rings (`ring_hint` picks one), or run inline.
  void dispatch(OpBlock* op, Worker* self, size_t ring_hint);
  CompletionSite completion_site(Worker* self) const;
  void trace_op(const OpBlock* op, Worker* self, uint64_t start_ns, TraceOutcome outcome);

  const WorkerHost* const engine_;
  const uint32_t tag_;
  OpPool& pool_;
  VarTable& vars_;
  PreparedTable& prepared_;
  VarWaits& waits_;
  PendingCounts& counts_;
  OpOutcomes& outcomes_;
  Tracer* const tracer_;
  const DeviceTable& devices_;
  const std::unique_ptr<EarlyRelease> early_;  // nullptr: gpu_stream_waits off
};

}  // namespace ordo
