// ReadyQueue: ops whose dependencies are met, waiting for a worker of one group.
//
// Priority 0 (nearly every op) goes through a lock-free bounded MPMC ring (one CAS to push, one
// to pop). When the ring is full, ops spill into a mutex-guarded overflow list, so a push never
// fails. Ops with a non-zero priority go to a mutex-guarded heap: positive priorities are taken
// before the ring, negative ones after it; equal priorities keep push order.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/op_block.h"

namespace ordo {

class ReadyQueue {
 public:
  explicit ReadyQueue(size_t ring_capacity = 16384);

  void push(OpBlock* op);
  OpBlock* pop();
  // True when a positive-priority op waits: a worker then must not keep a ready op for itself.
  bool has_urgent() const { return urgent_.load(std::memory_order_relaxed) != 0; }
  // Whether anything was pushed and not yet popped, including an op whose ring cell is still
  // being written. Reads only what pushes change with seq_cst RMWs (see EventCount).
  bool maybe_nonempty() const;
  // Ops pushed and not yet popped (approximate while others push and pop).
  size_t approx_size() const;

 private:
  struct Cell {
    std::atomic<size_t> seq;
    OpBlock* op;
  };
  // Consecutive positions map to different cache lines (four cells share a line): the pusher
  // writing position p and a worker popping p-1 would otherwise bounce one line per op.
  Cell& cell(size_t pos) { return cells_[((pos & line_mask_) << 2) | ((pos >> line_shift_) & 3)]; }
  bool ring_push(OpBlock* op);
  OpBlock* ring_pop();
  void overflow_push(OpBlock* op);
  OpBlock* overflow_pop();
  void heap_push(OpBlock* op);
  OpBlock* heap_pop(bool positive_only);

  std::unique_ptr<Cell[]> cells_;
  size_t mask_;
  size_t line_mask_;  // cells per line = 4, lines = capacity / 4
  unsigned line_shift_;
  alignas(64) std::atomic<size_t> enqueue_pos_{0};
  alignas(64) std::atomic<size_t> dequeue_pos_{0};

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
