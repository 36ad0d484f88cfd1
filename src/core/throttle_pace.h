// ThrottlePace: how long a throttled pusher waits for the pending count to fall before it gives
// up (Engine::wait_for_window gives up so that an op waiting for the pusher cannot deadlock it).
// A fixed 1 ms let ops that finish more than about 1 ms apart overrun the window: the pusher gave
// up at every check and pushed max_pending / 8 more. So the pace of completions that throttled
// pushers observe sets the limit: 4 intervals between completions, between 1 ms and 100 ms.
// Only throttled pushers touch it, off the hot path; racing updates only blur the estimate.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace ordo {

class ThrottlePace {
 public:
  static constexpr int64_t kMinStallNs = 1'000'000;
  static constexpr int64_t kMaxStallNs = 100'000'000;

  int64_t stall_ns() const { return stall_ns_.load(std::memory_order_relaxed); }

  // A throttled pusher saw `completed` completions in all at `now_ns` (steady clock).
  void observe(int64_t now_ns, int64_t completed) {
    const int64_t since = since_ns_.load(std::memory_order_relaxed);
    const int64_t base = since_completed_.load(std::memory_order_relaxed);
    // No mark yet, or one so old that the engine may have idled since: start measuring anew.
    if (since == 0 || now_ns - since > kHorizonNs || completed < base) {
      mark(now_ns, completed);
      return;
    }
    const int64_t done = completed - base;
    if (done < kCompletionsPerEstimate) return;
    const int64_t interval = (now_ns - since) / done;
    stall_ns_.store(std::clamp(4 * interval, kMinStallNs, kMaxStallNs), std::memory_order_relaxed);
    mark(now_ns, completed);
  }

 private:
  static constexpr int64_t kHorizonNs = 1'000'000'000;
  static constexpr int64_t kCompletionsPerEstimate = 2;

  void mark(int64_t now_ns, int64_t completed) {
    since_ns_.store(now_ns, std::memory_order_relaxed);
    since_completed_.store(completed, std::memory_order_relaxed);
  }

  std::atomic<int64_t> stall_ns_{kMinStallNs};
  std::atomic<int64_t> since_ns_{0};
  std::atomic<int64_t> since_completed_{0};
};

}  // namespace ordo
