// OpRunner: running a ready op and completing it. execute() runs the op's callback (or an
// internal op's work) and finalize() publishes its outcome on each of its vars, releases its
// grants, counts it, recycles its block, and hands on whatever became ready: kept by the worker,
// put on its deque or its group's ready rings, or run inline on this thread. An op that deferred
// is finished by whichever of "callback returned" and ordo_complete comes second.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error_record.h"
#include "core/op_block.h"
#include "core/op_pool.h"
#include "core/var_table.h"
#include "engine/op_outcomes.h"
#include "engine/pending_counts.h"
#include "engine/prepared.h"
#include "exec/worker_group.h"
#include "ordo/ordo.h"
#include "trace/tracer.h"

namespace ordo {

class VarWaits;

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
  };
  explicit OpRunner(const Parts& parts);
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;

  // Runs a ready op on worker `self` (nullptr: a thread that is not one of this engine's
  // workers: a helping pusher, an inline run, a completing thread).
  void execute(OpBlock* op, Worker* self);
  // The op is done (ran, failed, was skipped, or is an internal op).
  void finalize(OpBlock* op, ErrorRecord* failure, Worker* self);
  // Runs an op with no group on this thread; queued behind the one running when nested.
  void run_inline(OpBlock* op);
  // ordo_exec_defer and ordo_complete.
  ordo_status defer(OpBlock* op, ordo_completion* out);
  ordo_status complete(uint32_t gen, uint32_t index, int32_t code, const char* message);
  // This engine's worker that the calling thread is, or nullptr.
  Worker* current_worker() const;

 private:
  template <bool kTraced>
  void run_user_op(OpBlock* op, Worker* self);
  void release_user_data(OpBlock* op);
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
};

}  // namespace ordo
