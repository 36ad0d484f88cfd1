// ordo_wait_for_var_async: a wait that blocks nobody. It is an internal op queued on the var as
// a writer with no callback (as ordo_var_clear_error's is), so it runs once every access pushed
// before it has completed; it reads the var's error, releases the var, then calls the caller's
// fn with the result on the thread that ran it. The record below is its OpBlock's `internal`.
#pragma once

#include "engine/deferred_calls.h"
#include "ordo/ordo.h"

namespace ordo {

struct AsyncWait : DeferredCall {
  ordo_wait_fn fn = nullptr;
  void* user_data = nullptr;
  ordo_status status = ORDO_OK;  // set when the wait has run
};

// Calls the record's fn with `status` and frees the record, exactly once: here, or (on a thread
// inside a forced unwind, which may run no caller code) queued on the deferred calls.
void deliver_async_wait(AsyncWait* w, ordo_status status);

}  // namespace ordo
