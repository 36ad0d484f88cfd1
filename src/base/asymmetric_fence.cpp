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

// Decided once, at first use (engine creation calls heavy() nowhere else before): registration
// must precede any light() that relies on it, so it happens in a static initializer.
std::atomic<bool>& AsymmetricFence::available() {
  static std::atomic<bool> ok{register_membarrier()};
  return ok;
}

void AsymmetricFence::heavy() {
  if (fast() && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace ordo
