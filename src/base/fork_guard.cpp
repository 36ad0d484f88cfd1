#include "base/fork_guard.h"

#include <pthread.h>

namespace ordo {

std::atomic<uint32_t> g_fork_generation{0};

namespace {

void bump_generation_in_child() {
  g_fork_generation.store(g_fork_generation.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
}

// Installed when libordo.so loads, or by the first on_fork() if that comes first (static
// initializers of other files run in no set order): before every other fork handler of this
// library, so that the child's handlers already see the new generation (child handlers run in
// the order they were registered).
bool install_generation_handler() {
  static const bool done = pthread_atfork(nullptr, nullptr, bump_generation_in_child) == 0;
  return done;
}

const bool g_installed = install_generation_handler();

}  // namespace

bool on_fork(void (*prepare)(), void (*parent)(), void (*child)()) {
  install_generation_handler();
  pthread_atfork(prepare, parent, child);
  return true;
}

}  // namespace ordo
