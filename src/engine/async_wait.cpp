#include "engine/async_wait.h"

#include <new>

#include "base/foreign_exception.h"
#include "base/last_error.h"
#include "core/var_slot.h"
#include "engine/engine.h"

namespace ordo {

namespace {

void call_and_free(AsyncWait* w) {
  ordo_wait_fn fn = w->fn;
  void* user_data = w->user_data;
  const ordo_status status = w->status;
  delete w;
  try {
    fn(user_data, status);
  } catch (...) {
    // The wait is over and the record gone: a forced unwind leaves nothing half done. A C++
    // exception has nowhere to go (fn returns nothing).
    if (foreign_exception_in_flight()) throw;
  }
}

void run_deferred(DeferredCall* c) {
  call_and_free(static_cast<AsyncWait*>(c));
}

}  // namespace

void deliver_async_wait(AsyncWait* w, ordo_status status) {
  w->status = status;
  if (__builtin_expect(in_forced_unwind(), 0)) {
    w->run = run_deferred;
    defer_call(w);
    return;
  }
  call_and_free(w);
}

ordo_status Engine::wait_for_var_async(ordo_var v, ordo_wait_fn fn, void* user_data) {
  auto* w = new (std::nothrow) AsyncWait();
  if (!w) return fail(ORDO_ERR_NO_MEMORY, "out of memory for the wait; fn will not be called");
  w->fn = fn;
  w->user_data = user_data;
  // A pending async wait counts as a wait: a worker thread that caller code ends meanwhile is
  // replaced at once, since nobody may call into the engine before fn runs.
  w->waiting = &waiting_;
  begin_waiting();
  // May run the wait (and fn) before it returns, when nothing before it is pending on v.
  if (ordo_status s = push_.push_internal(OpKind::kAsyncWait, v, VarLink::kWriteBit, w)) {
    end_waiting();
    delete w;
    return s;
  }
  return ORDO_OK;
}

// The wait's turn has come: every op pushed on the var before it has completed, and no later
// one has started (it holds the var as a writer), so the var's error is settled.
void OpRunner::run_async_wait(OpBlock* op, Worker* self) {
  auto* w = static_cast<AsyncWait*>(op->internal);
  const ordo_status status = first_error_of(op) ? ORDO_ERR_OP_FAILED : ORDO_OK;
  w->waiting->fetch_sub(1, std::memory_order_relaxed);  // Engine::end_waiting
  counts_.count_internal_completion();
  finalize(op, nullptr, self);  // releases the var first: fn may push on it
  deliver_async_wait(w, status);
}

}  // namespace ordo
