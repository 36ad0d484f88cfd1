#include "pipeline/pipeflow.h"

#include "base/foreign_exception.h"
#include "base/hot_tls.h"
#include "core/exec_token.h"

namespace ordo {

namespace {

struct RunningPipe {
  Pipeflow* pf;
  uint64_t handle;
};
// Read by every ordo_pipeflow_* call, set around every pipe callback.
ORDO_HOT_TLS RunningPipe tls_pipe = {nullptr, 0};
ORDO_HOT_TLS ExecTokens tls_pipe_handles;

}  // namespace

Pipeflow* pipeflow_of(const ordo_pipeflow* handle) {
  const uint64_t h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
  return tls_pipe.pf && h == tls_pipe.handle ? tls_pipe.pf : nullptr;
}

int32_t call_pipe(ordo_pipe_fn fn, void* user_data, Pipeflow* pf, bool* threw) {
  const RunningPipe outer = tls_pipe;
  const uint64_t handle = next_exec_token(tls_pipe_handles);
  tls_pipe = {pf, handle};
  int32_t code;
  try {
    code = fn(reinterpret_cast<ordo_pipeflow*>(static_cast<uintptr_t>(handle)), user_data);
    *threw = false;
  } catch (...) {
    if (foreign_exception_in_flight()) {
      // A forced unwind (pthread_exit, cancellation) must go on, or glibc aborts the process.
      // The step and the line task fail the run on its way out (steps.cpp, line_tasks.cpp).
      tls_pipe = outer;
      throw;
    }
    code = ORDO_ERR_OP_FAILED;
    *threw = true;
  }
  tls_pipe = outer;
  return code;
}

}  // namespace ordo
