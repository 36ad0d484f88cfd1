// Caller code that a thread being torn down by a forced unwind (pthread_exit, cancellation)
// must not run itself. While such a thread finishes the engine's bookkeeping inside the
// unwind's handler (ForcedUnwindScope), running a free_fn or an ordo_wait_fn there could start a
// second forced unwind (Python exits a thread that asks for the GIL during finalization, and
// frees every op's user_data under the GIL), and glibc aborts the process when one forced unwind
// replaces another ("FATAL: exception not rethrown"). Those calls are queued here instead and run
// later, by the next thread that enters an ordo wait, destroy or release, or by the worker that
// replaces an exited one.
#pragma once

#include <atomic>

#include "ordo/ordo.h"

namespace ordo {

// One queued call. Embedded in whatever owns the call (an async wait's record), or allocated
// for a free_fn; `run` runs it and then frees it.
struct DeferredCall {
  DeferredCall* next = nullptr;
  void (*run)(DeferredCall* self) = nullptr;
};

// True while the calling thread finishes ordo's work inside a forced unwind's handler: no caller
// code may run on it then.
bool in_forced_unwind();

// Marks the calling thread as finishing work inside a forced unwind's handler, for its scope.
class ForcedUnwindScope {
 public:
  ForcedUnwindScope();
  ~ForcedUnwindScope();
  ForcedUnwindScope(const ForcedUnwindScope&) = delete;
  ForcedUnwindScope& operator=(const ForcedUnwindScope&) = delete;

 private:
  bool outer_;
};

// Queues a call to run later (see above). Never throws, never runs caller code.
void defer_call(DeferredCall* call);
// Queues free_fn(user_data); allocates (nothrow): without memory the call is lost (user_data
// leaks), which is all that can be done on a thread that may not run it.
void defer_free_fn(ordo_free_fn free_fn, void* user_data);

extern std::atomic<bool> g_deferred_calls_pending;
void run_deferred_calls_slow();
// Runs every queued call on the calling thread (not inside a forced unwind: then nothing).
// One relaxed load when none is queued.
inline void run_deferred_calls() {
  if (__builtin_expect(g_deferred_calls_pending.load(std::memory_order_relaxed), 0)) {
    run_deferred_calls_slow();
  }
}

}  // namespace ordo
