// Forced unwinds through caller code. pthread_exit and pthread_cancel end a thread by unwinding
// its stack with a "forced unwind", which C++ code may see (catch (...), then
// base/foreign_exception.h tells it from a C++ exception) but must let go on: swallowed, glibc
// aborts the process ("FATAL: exception not rethrown"). Python does this to a thread that asks for
// the GIL while the interpreter exits, so a callback of a Python program that exits with ops
// pending ends its engine thread this way.
//
// When caller code (a callback, a free_fn) ends its thread so, the engine finishes the op before
// the unwind leaves it: the op fails (or, for a free_fn, completes), its vars are released, what
// it made ready is handed on, and waiters wake; nothing hangs. All of that runs inside the
// unwind's handler, where caller code must not run (a second forced unwind there aborts the
// process): under a ForcedUnwindScope, ops this thread would have run inline fail without being
// called, and free_fns and ordo_wait_fns are queued (deferred_calls.h). A worker thread so ended
// is replaced (WorkerGroup::run). longjmp out of caller code is not handled: it skips all of
// this, and the header forbids it.
#include "core/error_record.h"
#include "core/var_slot.h"
#include "engine/deferred_calls.h"
#include "engine/op_runner.h"

namespace ordo {

namespace {

// Queues a plain op's free_fn instead of running it (a prepared op's is queued by
// PreparedTable::finish, which sees the ForcedUnwindScope).
void defer_free_of(OpBlock* op) {
  if (op->kind == OpKind::kUser && op->free_fn) {
    defer_free_fn(op->free_fn, op->user_data);
    op->free_fn = nullptr;
  }
}

}  // namespace

// The op's callback ended its thread.
void OpRunner::op_unwound(OpBlock* op, Worker* self) {
  ErrorRecord* failure;
  if (op->deferred) {
    // It deferred first: its completion finishes it, or finished it already, as when a
    // deferring callback returns (run_user_op).
    if (op->finish_refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    failure = op->async_error;
  } else {
    failure = ErrorRecord::make(ORDO_ERR_OP_FAILED, op->op_name(),
                                "the callback's thread exited before it returned (a forced "
                                "unwind: pthread_exit or thread cancellation)");
  }
  defer_free_of(op);
  finalize_unwinding(op, failure, self);
}

// A free_fn ended its thread, inside finalize(), which had counted the op's failure and not yet
// released its vars. finalize() again, from the top, as a plain op with nothing left to release
// (a prepared op's reference is already dropped): the failure is not counted twice, and
// OpOutcomes::failed() keeps a record offered twice once (unless an ordo_wait_for_all took it in
// between: it then reports it again, once). OpOutcomes keeps that record.
void OpRunner::free_fn_unwound(OpBlock* op, ErrorRecord* failure, Worker* self) {
  op->kind = OpKind::kUser;  // reset by the block's next push
  op->free_fn = nullptr;
  if (failure) outcomes_.uncount_failure();
  finalize_unwinding(op, failure, self);
}

// An op that this thread would have run inline, now that a forced unwind is ending it (called
// under a ForcedUnwindScope, with the engine's inline ops queued): the caller's ops fail
// without being called (skipped as usual when a var carries an error); the internal ops run,
// since they run no caller code (an async wait's fn is queued).
void OpRunner::skip_unwound(OpBlock* op) {
  Worker* self = current_worker();
  if (op->kind != OpKind::kUser && op->kind != OpKind::kPrepared && op->kind != OpKind::kGraph) {
    execute(op, self);
    return;
  }
  op->set_state(OpState::kRunning);
  ErrorRecord* failure;
  if (ErrorRecord* inherited = first_error_of(op)) {
    outcomes_.skipped();
    failure = ErrorRecord::retain(inherited);
  } else {
    failure = ErrorRecord::make(ORDO_ERR_OP_FAILED, op->op_name(),
                                "not run: the thread that was to run it inline exited (a forced "
                                "unwind: pthread_exit or thread cancellation)");
  }
  defer_free_of(op);
  finish(op, failure, self);
}

}  // namespace ordo
