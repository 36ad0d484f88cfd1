// A tiny test-and-test-and-set lock for per-variable queues and pool shards.
// Why not std::mutex: the critical sections are a handful of pointer moves, and an uncontended
// spin lock is one atomic exchange; under contention it yields so that a preempted holder (2
// cores, more threads than cores) gets the CPU back quickly.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

namespace ordo {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class SpinLock {
 public:
  void lock() noexcept {
    while (locked_.exchange(1, std::memory_order_acquire) != 0) wait_until_free();
  }
  // One exchange, no waiting: false when another thread holds it.
  bool try_lock() noexcept { return locked_.exchange(1, std::memory_order_acquire) == 0; }
  void unlock() noexcept { locked_.store(0, std::memory_order_release); }

 private:
  void wait_until_free() noexcept {
    int spins = 0;
    while (locked_.load(std::memory_order_relaxed) != 0) {
      if (++spins < 64) {
        cpu_relax();
      } else {
        sched_yield();
      }
    }
  }
  std::atomic<uint8_t> locked_{0};
};

class SpinGuard {
 public:
  explicit SpinGuard(SpinLock& l) noexcept : lock_(l) { lock_.lock(); }
  ~SpinGuard() { lock_.unlock(); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  SpinLock& lock_;
};

}  // namespace ordo
