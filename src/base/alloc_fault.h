// AllocFault: a test seam that makes the allocations of one subsystem fail, to check that it
// handles std::bad_alloc where it must not throw (a worker, the GPU event poller). Each subsystem
// that needs one owns an instance (separate, so a test can starve one and not the others); unset
// (always, outside tests), a check costs one relaxed load and a branch, off the CPU hot path.
#pragma once

#include <atomic>
#include <new>

namespace ordo {

struct AllocFault {
  // For tests: called before each checked allocation; true makes it fail.
  std::atomic<bool (*)()> fails{nullptr};

  // Throws std::bad_alloc when the test says this allocation fails; call it right before one.
  void check() const {
    if (bool (*f)() = fails.load(std::memory_order_relaxed)) {
      if (f()) throw std::bad_alloc();
    }
  }
};

}  // namespace ordo
