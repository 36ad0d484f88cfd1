// Calling a caller's callback as an op: the one place that sets up the exec token the callback
// sees, restores the thread's running op after it, and turns its outcome into a failure record.
// Used for a pushed op (op_runner.cpp) and for each node of a graph's chain (chain_runner.cpp).
#pragma once

#include "base/foreign_exception.h"
#include "core/error_record.h"
#include "core/exec_token.h"
#include "core/op_block.h"
#include "engine/thread_state.h"

namespace ordo {

// Runs fn(exec, user_data) as op; returns the failure it caused (nullptr when it succeeded or
// deferred). `name_of()` gives the op's name and is called only on a failure. A forced unwind
// (pthread_exit, cancellation) passes through with the thread's running op restored; the
// caller finishes the op. Always inlined: as a call, the untraced instance of run_user_op would
// pay for the traced one existing (docs/PERFORMANCE.md, "Tracing off costs nothing").
template <typename NameOf>
__attribute__((always_inline)) inline ErrorRecord* call_callback(OpBlock* op, ordo_fn fn,
                                                                 void* user_data, NameOf name_of) {
  using this_thread::running;
  const this_thread::RunningCallback outer = running;
  const uint64_t token = next_exec_token(this_thread::exec_tokens);
  running = {op, token};
  int32_t code = 0;
  bool threw = false;
  try {
    code = fn(exec_of_token(token), user_data);
  } catch (...) {
    if (foreign_exception_in_flight()) {
      running = outer;
      throw;
    }
    threw = true;  // a C++ exception from a C++ caller's callback: the op fails, the worker lives
  }
  running = outer;
  if (op->deferred) return nullptr;
  if (threw) return ErrorRecord::make(ORDO_ERR_OP_FAILED, name_of(), "the callback threw");
  return code == 0 ? nullptr : ErrorRecord::make(code, name_of(), nullptr);
}

}  // namespace ordo
