// Which side of a fork() this process is on. An engine's worker threads do not survive fork():
// in the child only the forking thread exists, so an engine created before the fork would take
// pushes that never run and waits that never return. Each engine records the fork generation it
// was created in; a child's generation is its parent's plus one (a pthread_atfork child handler,
// installed when the library loads), and calls naming an engine of another generation are
// refused. The check on every call is one relaxed load of the generation, compared with 0: a
// process that never forked (the usual case) has generation 0 and its engines too.
#pragma once

#include <atomic>
#include <cstdint>

namespace ordo {

extern std::atomic<uint32_t> g_fork_generation;

inline uint32_t fork_generation() {
  return g_fork_generation.load(std::memory_order_relaxed);
}

// Runs `child` (after the generation was bumped) in the child of every fork(), and `prepare` and
// `parent` around it, as pthread_atfork does; for state that must be reset in the child (a lock
// another thread may have held at the fork, a list of the parent's work). Call from a static
// initializer, before any thread can fork. Returns true (so that it can initialize a constant).
bool on_fork(void (*prepare)(), void (*parent)(), void (*child)());

}  // namespace ordo
