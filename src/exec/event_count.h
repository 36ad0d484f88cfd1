// An event count: lets idle workers sleep on a futex without lost wake-ups, while producers pay
// only a fence and a load when nobody sleeps (the common case under load).
//
// Protocol. Consumer: key = prepare_wait(); re-check for work; then cancel_wait() or wait(key).
// Producer: publish work; notify_one(). The seq_cst fence in notify and the seq_cst RMW in
// prepare_wait form a Dekker pair: either the producer sees the waiter, or the waiter's re-check
// sees the work.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace ordo {

class EventCount {
 public:
  uint32_t prepare_wait() noexcept {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    return epoch_.load(std::memory_order_seq_cst);
  }
  void cancel_wait() noexcept { waiters_.fetch_sub(1, std::memory_order_relaxed); }
  void wait(uint32_t key) noexcept {
    if (epoch_.load(std::memory_order_acquire) == key) futex(FUTEX_WAIT_PRIVATE, key);
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  void notify_one() noexcept { notify(1); }
  void notify_all() noexcept { notify(INT_MAX); }

 private:
  void notify(int count) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_relaxed) == 0) return;
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    futex(FUTEX_WAKE_PRIVATE, static_cast<uint32_t>(count));
  }
  void futex(int op, uint32_t val) noexcept {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&epoch_), op, val, nullptr, nullptr, 0);
  }

  std::atomic<uint32_t> epoch_{0};
  std::atomic<int32_t> waiters_{0};
};

}  // namespace ordo
