// ReadyQueue: ops whose dependencies are met, waiting for a worker of one group.
//
// Priority 0 (nearly every op) goes through lock-free bounded MPMC rings (one CAS to push, one
// to pop; exec/mpmc_ring.h), one per pushing thread where there are enough. When the ring is full,
// ops spill into a mutex-guarded overflow list, so a push never fails. Ops with a non-zero priority
// go to a mutex-guarded heap: positive priorities are taken before the ring, negative ones after
// it; equal priorities keep push order.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/op_block.h"
#include "exec/mpmc_ring.h"

namespace ordo {

class ReadyQueue {
 public:
  // Pushing threads are spread over kRings rings by a hint (their push lane), so that two of
  // them do not CAS one enqueue position, a cache line that would cross cores on every push.
  static constexpr size_t kRings = 2;

  explicit ReadyQueue(size_t ring_capacity = 16384);

  // `hint` picks the ring (any number; the caller's lane or worker index).
  void push(OpBlock* op, size_t hint);
  // Positive priorities first, then priority 0 from the rings (starting at the one `hint`
  // picks); never a negative priority.
  OpBlock* pop(size_t hint);
  // A negative-priority op, or nullptr: taken only once nothing of a higher priority is ready
  // anywhere (a worker steals first, since other workers' deques hold priority-0 ops).
  OpBlock* pop_negative();
  // True when a positive-priority op waits: a worker then must not keep a ready op for itself.
  bool has_urgent() const { return urgent_.load(std::memory_order_relaxed) != 0; }
  // Whether anything was pushed and not yet popped, including an op whose ring cell is still
  // being written. Reads only what pushes change with seq_cst RMWs (see EventCount).
  bool maybe_nonempty() const;
  // Ops pushed and not yet popped (approximate while others push and pop).
  size_t approx_size() const;

 private:
  OpBlock* ring_pop(size_t hint);
  void overflow_push(OpBlock* op);
  OpBlock* overflow_pop();
  void heap_push(OpBlock* op);
  OpBlock* heap_pop(bool positive_only);

  // Each ring on lines of its own (MpmcRing aligns its positions).
  MpmcRing rings_[kRings];

  alignas(64) std::mutex side_mutex_;  // overflow list and heap
  OpBlock* overflow_head_ = nullptr;
  OpBlock* overflow_tail_ = nullptr;
  std::vector<OpBlock*> heap_;
  uint64_t heap_seq_ = 0;
  std::atomic<size_t> overflow_count_{0};
  std::atomic<size_t> urgent_{0};    // heap ops with priority > 0
  std::atomic<size_t> deferred_{0};  // heap ops with priority < 0
};

}  // namespace ordo
