// WorkDeque: a worker's own queue of ready ops (Chase-Lev, in the C11 formulation of Le et al.,
// PPoPP'13). The owner pushes and pops at the bottom with plain stores (a fence on pop only);
// other workers of the group steal from the top with one CAS. Ops a worker makes ready stay on
// its core unless another worker is idle, instead of crossing one shared ring. Fixed capacity: a
// full deque makes the caller use the group's shared queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/op_block.h"

// ThreadSanitizer builds (gcc defines __SANITIZE_THREAD__, clang has the feature test).
#if defined(__SANITIZE_THREAD__)
#define ORDO_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ORDO_UNDER_TSAN 1
#endif
#endif
#ifndef ORDO_UNDER_TSAN
#define ORDO_UNDER_TSAN 0
#endif

namespace ordo {

class WorkDeque {
 public:
  static constexpr int64_t kCapacity = 1024;

  WorkDeque() : buf_(new std::atomic<OpBlock*>[kCapacity]) {}

  bool push(OpBlock* op) {  // owner only
    int64_t b = bottom_.load(std::memory_order_relaxed);
    int64_t t = top_.load(std::memory_order_acquire);
    if (b - t >= kCapacity) return false;
    buf_[b & (kCapacity - 1)].store(op, std::memory_order_relaxed);
#if ORDO_UNDER_TSAN
    // TSan does not model fences: it would miss this release and report every field of a stolen
    // op as a race with its pusher. For a thief that reads bottom_ with acquire, a release store
    // gives the same ordering, and TSan sees it (tests/sanitizers/README.md).
    bottom_.store(b + 1, std::memory_order_release);
#else
    std::atomic_thread_fence(std::memory_order_release);
    bottom_.store(b + 1, std::memory_order_relaxed);
#endif
    return true;
  }

  OpBlock* pop() {  // owner only
    int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    if (b < top_.load(std::memory_order_relaxed)) return nullptr;  // cheap empty check
    bottom_.store(b, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    int64_t t = top_.load(std::memory_order_relaxed);
    OpBlock* op = nullptr;
    if (t <= b) {
      op = buf_[b & (kCapacity - 1)].load(std::memory_order_relaxed);
      if (t == b) {  // the last one: race the thieves for it
        if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
          op = nullptr;
        }
        bottom_.store(b + 1, std::memory_order_relaxed);
      }
    } else {
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return op;
  }

  OpBlock* steal() {  // any thread
    int64_t t = top_.load(std::memory_order_acquire);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    int64_t b = bottom_.load(std::memory_order_acquire);
    if (t >= b) return nullptr;
    OpBlock* op = buf_[t & (kCapacity - 1)].load(std::memory_order_relaxed);
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed)) {
      return nullptr;  // another thief, or the owner, took it
    }
    return op;
  }

  // Ops in the deque (approximate while the owner and thieves work).
  size_t approx_size() const {
    int64_t n = bottom_.load(std::memory_order_acquire) - top_.load(std::memory_order_acquire);
    return n > 0 ? static_cast<size_t>(n) : 0;
  }

  bool maybe_nonempty() const {
    return bottom_.load(std::memory_order_seq_cst) > top_.load(std::memory_order_seq_cst);
  }

 private:
  alignas(64) std::atomic<int64_t> top_{0};
  alignas(64) std::atomic<int64_t> bottom_{0};
  std::unique_ptr<std::atomic<OpBlock*>[]> buf_;
};

}  // namespace ordo
