#include "engine/deferred_calls.h"

#include <cxxabi.h>

#include <mutex>
#include <new>

#include "base/fork_guard.h"
#include "base/hot_tls.h"

namespace ordo {

namespace {

ORDO_HOT_TLS bool tls_in_forced_unwind = false;

std::mutex g_mutex;
DeferredCall* g_head = nullptr;  // under g_mutex; run oldest first
DeferredCall* g_tail = nullptr;

// Held across fork(); in the child, the parent's queued calls are dropped: they belong to
// engines whose threads stayed behind, and their caller code is the parent's to run.
const bool g_fork_handlers = on_fork([] { g_mutex.lock(); }, [] { g_mutex.unlock(); },
                                     [] {
                                       g_head = g_tail = nullptr;
                                       g_deferred_calls_pending.store(false);
                                       g_mutex.unlock();
                                     });

struct DeferredFree : DeferredCall {
  ordo_free_fn fn;
  void* user_data;
};

void run_free(DeferredCall* c) {
  auto* f = static_cast<DeferredFree*>(c);
  ordo_free_fn fn = f->fn;
  void* user_data = f->user_data;
  delete f;
  try {
    fn(user_data);
  } catch (abi::__forced_unwind&) {
    throw;  // this thread exits too; what is still queued waits for the next one
  } catch (...) {
    // As for a free_fn run in place: a C++ caller's throw is ignored.
  }
}

}  // namespace

std::atomic<bool> g_deferred_calls_pending{false};

bool in_forced_unwind() {
  return tls_in_forced_unwind;
}

ForcedUnwindScope::ForcedUnwindScope() : outer_(tls_in_forced_unwind) {
  tls_in_forced_unwind = true;
}

ForcedUnwindScope::~ForcedUnwindScope() {
  tls_in_forced_unwind = outer_;
}

void defer_call(DeferredCall* call) {
  call->next = nullptr;
  std::lock_guard<std::mutex> g(g_mutex);
  if (g_tail) {
    g_tail->next = call;
  } else {
    g_head = call;
  }
  g_tail = call;
  g_deferred_calls_pending.store(true, std::memory_order_release);
}

void defer_free_fn(ordo_free_fn free_fn, void* user_data) {
  if (!free_fn) return;
  auto* f = new (std::nothrow) DeferredFree();
  if (!f) return;
  f->run = run_free;
  f->fn = free_fn;
  f->user_data = user_data;
  defer_call(f);
}

void run_deferred_calls_slow() {
  if (tls_in_forced_unwind) return;
  for (;;) {
    DeferredCall* c;
    {
      std::lock_guard<std::mutex> g(g_mutex);
      c = g_head;
      if (!c) {
        g_deferred_calls_pending.store(false, std::memory_order_relaxed);
        return;
      }
      g_head = c->next;
      if (!g_head) g_tail = nullptr;
    }
    c->run(c);  // one at a time, outside the lock: a call may queue more, or exit the thread
  }
}

}  // namespace ordo
