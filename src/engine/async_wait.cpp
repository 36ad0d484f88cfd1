#include "engine/async_wait.h"

#include <cxxabi.h>

#include <new>

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
  } catch (abi::__forced_unwind&) {
    throw;  // the wait is over and the record gone: nothing is left half done
  } catch (...) {
    // fn returns nothing: a C++ exception from it has nowhere to go.
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
  // May run the wait (and fn) before it returns, when nothing before it is pending on v.
  if (ordo_status s = push_internal(OpKind::kAsyncWait, v, VarLink::kWriteBit, w)) {
    delete w;
    return s;
  }
  return ORDO_OK;
}

// The wait's turn has come: every op pushed on the var before it has completed, and no later
// one has started (it holds the var as a writer), so the var's error is settled.
void Engine::run_async_wait(OpBlock* op, Worker* self) {
  auto* w = static_cast<AsyncWait*>(op->internal);
  const ordo_status status = first_error_of(op) ? ORDO_ERR_OP_FAILED : ORDO_OK;
  internal_completed_.fetch_add(1, std::memory_order_relaxed);
  finalize(op, nullptr, self);  // releases the var first: fn may push on it
  deliver_async_wait(w, status);
}

}  // namespace ordo
