// InFlight: a graph's launches in progress and its launched ops not yet finished, counted so
// that finishing an op costs an atomic on a cache line its worker mostly has to itself: one
// counter per shard, a worker's shard picked from its index. Launches add to shard 0
// and finished ops subtract from their own shard, so a shard may go negative; only the sum
// means something.
//
// idle() is exact once no launch is in progress (holds == 0, checked first, and no new launch
// can begin meanwhile: both happen under the graph table's lock): from then on the shards only
// fall, so a sum read shard by shard is at least the true sum at the end of the reading, which
// is never below 0; a sum of 0 read means every op had finished.
#pragma once

#include <atomic>
#include <cstdint>

#include "engine/thread_state.h"
#include "exec/worker_group.h"

namespace ordo {

class InFlight {
 public:
  void begin_launch() { holds_.fetch_add(1, std::memory_order_relaxed); }
  void end_launch() { holds_.fetch_sub(1, std::memory_order_release); }
  void add_ops(int64_t n) { shard_[0].n.fetch_add(n, std::memory_order_relaxed); }
  // An op finished (or a push was refused: the count it was given back).
  void done(int64_t n = 1) { shard_[mine()].n.fetch_sub(n, std::memory_order_release); }

  bool idle() const {
    if (holds_.load(std::memory_order_acquire) != 0) return false;
    int64_t sum = 0;
    for (const Shard& s : shard_) sum += s.n.load(std::memory_order_acquire);
    return sum == 0;
  }

 private:
  static constexpr unsigned kShards = 8;
  struct alignas(64) Shard {
    std::atomic<int64_t> n{0};
  };
  // Shard 0 for threads that are not workers (and the launches), a worker's from its index.
  static unsigned mine() {
    const Worker* w = this_thread::worker;
    return w ? 1 + static_cast<unsigned>(w->index) % (kShards - 1) : 0;
  }

  std::atomic<int64_t> holds_{0};
  Shard shard_[kShards];
};

}  // namespace ordo
