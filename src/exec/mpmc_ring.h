// MpmcRing: Dmitry Vyukov's bounded multi-producer multi-consumer queue of ready ops. Each cell
// carries a sequence number that says whose turn it is: one CAS to push, one to pop, no lock.
// The ReadyQueue keeps a few of them so that pushing threads do not all CAS one position.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/prefetch.h"
#include "core/op_block.h"

namespace ordo {

class MpmcRing {
 public:
  // `capacity` is a power of two, at least 4.
  explicit MpmcRing(size_t capacity)
      : cells_(new Cell[capacity]),
        mask_(capacity - 1),
        line_mask_(capacity / 4 - 1),
        line_shift_(static_cast<unsigned>(__builtin_ctzll(capacity / 4))) {
    for (size_t i = 0; i < capacity; ++i) cell(i).seq.store(i, std::memory_order_relaxed);
  }

  // False when full. The successful CAS is seq_cst: it is the producer's half of the wake-up
  // handshake (see EventCount).
  bool push(OpBlock* op) {
    size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cell(pos);
      size_t seq = c.seq.load(std::memory_order_acquire);
      intptr_t dif = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (dif == 0) {
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                               std::memory_order_relaxed)) {
          c.op = op;
          c.seq.store(pos + 1, std::memory_order_release);
          prefetch_for_write(&cell(pos + 1));  // the next push's cell
          return true;
        }
      } else if (dif < 0) {
        return false;
      } else {
        pos = enqueue_pos_.load(std::memory_order_relaxed);
      }
    }
  }

  // nullptr when empty.
  OpBlock* pop() {
    size_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cell(pos);
      size_t seq = c.seq.load(std::memory_order_acquire);
      intptr_t dif = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos + 1);
      if (dif == 0) {
        if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          OpBlock* op = c.op;
          c.seq.store(pos + mask_ + 1, std::memory_order_release);
          return op;
        }
      } else if (dif < 0) {
        return nullptr;
      } else {
        pos = dequeue_pos_.load(std::memory_order_relaxed);
      }
    }
  }

  // Whether a push has claimed a position not yet popped (seq_cst: the consumer's re-check).
  bool maybe_nonempty() const {
    return enqueue_pos_.load(std::memory_order_seq_cst) !=
           dequeue_pos_.load(std::memory_order_seq_cst);
  }

  size_t approx_size() const {
    size_t in = enqueue_pos_.load(std::memory_order_acquire);
    size_t out = dequeue_pos_.load(std::memory_order_acquire);
    return in > out ? in - out : 0;  // a pop may have moved past our read of enqueue_pos_
  }

 private:
  struct Cell {
    std::atomic<size_t> seq;
    OpBlock* op;
  };
  // Consecutive positions map to different cache lines (four cells share a line): the pusher
  // writing position p and a worker popping p-1 would otherwise bounce one line per op.
  Cell& cell(size_t pos) { return cells_[((pos & line_mask_) << 2) | ((pos >> line_shift_) & 3)]; }

  std::unique_ptr<Cell[]> cells_;
  size_t mask_;
  size_t line_mask_;  // cells per line = 4, lines = capacity / 4
  unsigned line_shift_;
  alignas(64) std::atomic<size_t> enqueue_pos_{0};
  alignas(64) std::atomic<size_t> dequeue_pos_{0};
};

}  // namespace ordo
