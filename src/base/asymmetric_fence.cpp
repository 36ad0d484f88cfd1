#include "base/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ordo {

namespace {

bool register_membarrier() {
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

}  // namespace

std::atomic<bool> AsymmetricFence::fast_{false};

// Decided once, by the first engine creation (a static initializer: two at once register once);
// every push of an engine comes after its creation, so it sees the flag as set there.
void AsymmetricFence::prepare() {
  static const bool registered = register_membarrier();
  if (registered) fast_.store(true, std::memory_order_relaxed);
}

// Until the flag is set every light() is a full fence, which pairs with either branch here.
void AsymmetricFence::heavy() {
  if (fast_.load(std::memory_order_relaxed) &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
    return;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace ordo
