// Test seams: a few points on the wait paths where an internal test (tests/internal/) runs code
// of its own, to force an interleaving that timing alone hits once in a million runs: a var
// deleted between a wait reserving it for its mark and pushing that mark; a wait mark firing
// between a joined wait's timeout and its leaving the mark's list. Unset (always, outside those
// tests), a seam costs one relaxed load and a branch, on wait paths only, never on a push or a
// completion.
#pragma once

#include <atomic>

namespace ordo {

enum class Seam {
  kWaitReserved,  // ordo_wait_for_var reserved the var for its mark and is about to push it
  kWaitTimedOut,  // a wait's sleep ran out; it has not yet left the list of the mark it joined
};

using SeamFn = void (*)(Seam seam, void* arg);

struct TestSeams {
  std::atomic<SeamFn> fn{nullptr};
  std::atomic<void*> arg{nullptr};
};
extern TestSeams g_test_seams;

// For tests only: every seam calls fn(seam, arg) from now on (nullptr: none).
inline void set_test_seam(SeamFn fn, void* arg) {
  g_test_seams.arg.store(arg, std::memory_order_relaxed);
  g_test_seams.fn.store(fn, std::memory_order_release);
}

inline void hit_seam(Seam seam) {
  if (SeamFn fn = g_test_seams.fn.load(std::memory_order_acquire)) {
    fn(seam, g_test_seams.arg.load(std::memory_order_relaxed));
  }
}

}  // namespace ordo
