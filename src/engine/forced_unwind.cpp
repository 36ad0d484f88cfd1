// Forced unwinds through caller code. pthread_exit and pthread_cancel end a thread by unwinding
// its stack with a "forced unwind", which C++ code may see (catch abi::__forced_unwind) but must
// let go on: swallowed, glibc aborts the process ("FATAL: exception not rethrown"). Python does
// this to a thread that asks for the GIL while the interpreter exits, so a callback of a
// Python program that exits with ops pending ends its engine thread this way.
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
#include "engine/engine.h"

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
void Engine::op_unwound(OpBlock* op, Worker* self) {
  ForcedUnwindScope no_caller_code;
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
  finalize(op, failure, self);
}

// A free_fn ended its thread, inside finalize(): the rest of finalize.
void Engine::release_vars_unwound(OpBlock* op, ErrorRecord* failure, Worker* self) {
  ForcedUnwindScope no_caller_code;
  release_vars(op, failure, self);
}

// An op that this thread would have run inline, now that a forced unwind is ending it: the
// caller's ops fail without being called (skipped as usual when a var carries an error); the
// internal ops run, since they run no caller code (an async wait's fn is queued).
void Engine::skip_unwound(OpBlock* op) {
  Worker* self = current_worker();
  if (op->kind != OpKind::kUser && op->kind != OpKind::kPrepared) {
    execute(op, self);
    return;
  }
  op->set_state(OpState::kRunning);
  ErrorRecord* failure;
  if (ErrorRecord* inherited = first_error_of(op)) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    failure = ErrorRecord::retain(inherited);
  } else {
    failure = ErrorRecord::make(ORDO_ERR_OP_FAILED, op->op_name(),
                                "not run: the thread that was to run it inline exited (a forced "
                                "unwind: pthread_exit or thread cancellation)");
  }
  defer_free_of(op);
  finalize(op, failure, self);
}

}  // namespace ordo
