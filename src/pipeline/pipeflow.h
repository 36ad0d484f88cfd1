// Pipeflow: what a pipe callback is told about the token it runs, and how the ordo_pipeflow*
// it receives is checked. The handle is not the object's address: it is a number no other
// callback in the process is ever given (an exec token, core/exec_token.h), accepted only while
// it is the handle of the callback running on the calling thread. A pipeflow kept past its
// callback therefore never stands for a later one, even if the later one lives at the same
// stack address.
#pragma once

#include <cstdint>

#include "ordo/ordo.h"

namespace ordo {

class TokenSource;

struct Pipeflow {
  TokenSource* source;  // pipe 0: where ordo_pipeflow_defer files targets; nullptr elsewhere
  uint64_t token;
  uint64_t deferrals;
  uint32_t line;
  uint32_t pipe;
  bool stop;  // pipe 0 called ordo_pipeflow_stop
};

// The pipeflow `handle` names, or nullptr when it is not the one of the callback running on this
// thread (kept from an earlier callback, from another thread, made up).
Pipeflow* pipeflow_of(const ordo_pipeflow* handle);

// Calls a pipe's callback with `pf` as the running pipeflow of this thread (restoring the
// enclosing one after: a callback may run another pipeline inline, on the naive engine).
// Returns the callback's result; a C++ exception escaping it is *threw = true and
// ORDO_ERR_OP_FAILED.
int32_t call_pipe(ordo_pipe_fn fn, void* user_data, Pipeflow* pf, bool* threw);

}  // namespace ordo
