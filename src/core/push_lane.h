// PushLane: what one pushing thread owns inside one engine, so that a push needs no atomic
// read-modify-write of its own: a private magazine of op blocks, and its count of pushes (a
// plain store by its single writer; waits add up the counts of every lane used so far). A
// worker's lane also counts the ops that worker completes, the same way.
//
// Workers own a lane each for the pushes their ops make. Other threads claim a free lane on
// their first push to an engine (remembered in a small thread-local cache keyed by the engine's
// unique id) and give it back when they exit or when the cache evicts it (never while an op of
// that engine runs on the thread: a frame below may still use the lane); the blocks in its
// magazine stay with the lane for its next owner. When all lanes are taken, pushes fall back to
// a shared lane behind a spin lock.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/spin_lock.h"
#include "core/op_pool.h"

namespace ordo {

struct alignas(64) PushLane {
  std::atomic<uint64_t> owner{0};  // the owning thread's token; 0: free
  std::atomic<int64_t> pushed{0};  // ops pushed through this lane (written by the owner only)
  // A worker's lane: the ops this worker completed (written by the worker only). Counted per op
  // with a plain store, so a waiter woken by an op's completion always sees it counted.
  std::atomic<int64_t> completed{0};
  // 1 while this worker releases the vars of an op it has already counted as completed (see
  // OpRunner::finalize); waits for all work wait for it to drop.
  std::atomic<uint32_t> releasing{0};
  int64_t since_throttle_check = 0;  // pushes since the throttle was last checked
  // ORDO_ENGINE_FLAG_PUSHERS_HELP: set by a throttle check that found the engine over its
  // window, cleared by one that found it under half of it; while set, an op this lane pushes
  // that is ready at once runs on the pushing thread (PushPath::push_resolved).
  bool runs_ready_ops = false;
  OpCache cache;  // free op blocks, used by the owner only

  void count_push() {
    pushed.store(pushed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void count_completion() {
    completed.store(completed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  void uncount_push() {
    pushed.store(pushed.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  // Counts a push toward the next throttle check; true (and the count restarts) when it is due.
  bool throttle_check_due(int64_t every) {
    if (++since_throttle_check < every) return false;
    since_throttle_check = 0;
    return true;
  }
};

}  // namespace ordo
