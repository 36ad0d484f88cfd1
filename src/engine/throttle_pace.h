// ThrottlePace: how long a throttled pusher waits for the pending count to fall before it gives
// up (PendingCounts::wait_for_window gives up so that an op waiting for the pusher cannot deadlock
// it). A fixed 1 ms let ops that finish more than about 1 ms apart overrun the window: the pusher
// gave up at every check and pushed max_pending / 8 more. An average of the intervals between
// completions is no better: many workers running ops of one length finish them in bursts, and a
// few average intervals end the wait between two bursts.
//
// So the limit adapts at each give-up. A give-up that finds ops completed since the previous one
// measures the gap since the last such give-up (the spell in which the count did not move, a
// burst's period included) and sets the limit to 1.5 times it. A give-up that finds none
// completed for longer than the limit halves it: the engine is likely stuck on an op that waits
// for a pusher, and a limit learned from slow ops must not hold a blocked pusher for long. The
// limit stays within 1 ms and 100 ms, and after a second without a give-up starts again at 1 ms.
// Only throttled pushers touch it, off the hot path; racing updates only blur it.
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

  // A throttled pusher gave up at `now_ns` (steady clock), with `completed` completions in all.
  void gave_up(int64_t now_ns, int64_t completed) {
    const int64_t last_ns = last_give_up_ns_.load(std::memory_order_relaxed);
    const int64_t last_completed = last_completed_.load(std::memory_order_relaxed);
    const int64_t progress_ns = progress_ns_.load(std::memory_order_relaxed);
    int64_t stall = stall_ns_.load(std::memory_order_relaxed);
    if (last_ns == 0 || now_ns - last_ns > kFreshAfterNs) {
      stall = kMinStallNs;
      progress_ns_.store(now_ns, std::memory_order_relaxed);
    } else if (completed != last_completed) {
      stall = std::clamp((now_ns - progress_ns) * 3 / 2, kMinStallNs, kMaxStallNs);
      progress_ns_.store(now_ns, std::memory_order_relaxed);
    } else if (now_ns - progress_ns > stall) {
      stall = std::max(stall / 2, kMinStallNs);
    }
    stall_ns_.store(stall, std::memory_order_relaxed);
    last_give_up_ns_.store(now_ns, std::memory_order_relaxed);
    last_completed_.store(completed, std::memory_order_relaxed);
  }

 private:
  static constexpr int64_t kFreshAfterNs = 1'000'000'000;

  std::atomic<int64_t> stall_ns_{kMinStallNs};
  std::atomic<int64_t> last_give_up_ns_{0};
  std::atomic<int64_t> last_completed_{0};
  std::atomic<int64_t> progress_ns_{0};  // the last give-up that found ops completed
};

}  // namespace ordo
