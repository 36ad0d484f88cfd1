// An event count: lets idle workers sleep on a futex without lost wake-ups, while producers pay
// only a fence and a load when nobody sleeps (the common case under load).
//
// Protocol. Consumer: key = prepare_wait(); re-check for work; then cancel_wait() or wait(key).
// Producer: publish work with a seq_cst read-modify-write; notify_one(). That RMW and the
// seq_cst RMW in prepare_wait form a Dekker pair (both sit in the single total order of seq_cst
// operations): either the producer's load sees the waiter, or the waiter's re-check (a seq_cst
// load of what the producer modified) sees the work. No fence is needed on the producer side.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
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
  // As wait(), but gives up after timeout_ns.
  void wait_for(uint32_t key, uint64_t timeout_ns) noexcept {
    if (epoch_.load(std::memory_order_acquire) == key) {
      timespec ts;
      ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000u);
      ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000u);
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&epoch_), FUTEX_WAIT_PRIVATE, key, &ts,
              nullptr, 0);
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  // Whether anyone is between prepare_wait() and the end of its wait (seq_cst, as in notify()):
  // a producer that must compute whether a waiter's condition holds can skip that when false.
  bool has_waiters() const noexcept { return waiters_.load(std::memory_order_seq_cst) != 0; }
  // True when someone was waiting (and was woken).
  bool notify_one() noexcept { return notify(1); }
  bool notify_all() noexcept { return notify(INT_MAX); }

 private:
  bool notify(int count) noexcept {
    if (waiters_.load(std::memory_order_seq_cst) == 0) return false;
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    futex(FUTEX_WAKE_PRIVATE, static_cast<uint32_t>(count));
    return true;
  }
  void futex(int op, uint32_t val) noexcept {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&epoch_), op, val, nullptr, nullptr, 0);
  }

  std::atomic<uint32_t> epoch_{0};
  std::atomic<int32_t> waiters_{0};
};

}  // namespace ordo
