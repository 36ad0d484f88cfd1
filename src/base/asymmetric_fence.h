// Asymmetric fences: a store-then-load handshake between a hot path that runs millions of
// times (a push) and a rare one (engine shutdown), without a full fence on the hot path.
//
// light(): a compiler barrier only, when the kernel offers membarrier(PRIVATE_EXPEDITED);
// heavy(): that membarrier, which makes every running thread of the process execute a full
// barrier. Together they order "hot store; light(); hot load" against "rare store; heavy();
// rare load": one of the two loads sees the other side's store (the technique of liburcu and
// folly::asymmetric_thread_fence). Without membarrier both sides use a seq_cst fence.
#pragma once

#include <atomic>

namespace ordo {

class AsymmetricFence {
 public:
  static void light() {
    if (fast_.load(std::memory_order_relaxed)) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
  }
  static void heavy();
  // Registers the process for membarrier if it is not yet (the kernel may take tens of
  // milliseconds): call it where a delay is expected (creating an engine, before any light()
  // of that engine), not on a push.
  static void prepare();

 private:
  // Set once registration is done, never cleared: a light() that sees it relies on a
  // registration that has happened. A plain flag, not a function-local static, whose guard
  // cost every push two more loads and branches.
  static std::atomic<bool> fast_;
};

}  // namespace ordo
