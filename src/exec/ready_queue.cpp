#include "exec/ready_queue.h"

#include <algorithm>
#include <new>

#include "exec/prefetch.h"

namespace ordo {

namespace {
// Heap order: higher priority first; among equals, earlier push first.
bool runs_later(const OpBlock* a, const OpBlock* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->ready_seq > b->ready_seq;
}
}  // namespace

ReadyQueue::ReadyQueue(size_t ring_capacity) : cells_(new Cell[ring_capacity]) {
  mask_ = ring_capacity - 1;  // capacity is a power of two, at least 4
  line_mask_ = ring_capacity / 4 - 1;
  line_shift_ = static_cast<unsigned>(__builtin_ctzll(ring_capacity / 4));
  for (size_t i = 0; i < ring_capacity; ++i) cell(i).seq.store(i, std::memory_order_relaxed);
}

void ReadyQueue::push(OpBlock* op) {
  if (op->priority != 0) {
    heap_push(op);
  } else if (overflow_count_.load(std::memory_order_relaxed) != 0 || !ring_push(op)) {
    overflow_push(op);
  }
}

OpBlock* ReadyQueue::pop() {
  if (urgent_.load(std::memory_order_relaxed) != 0) {
    if (OpBlock* op = heap_pop(true)) return op;
  }
  if (OpBlock* op = ring_pop()) return op;
  if (overflow_count_.load(std::memory_order_relaxed) != 0) {
    if (OpBlock* op = overflow_pop()) return op;
  }
  if (deferred_.load(std::memory_order_relaxed) != 0) return heap_pop(false);
  return nullptr;
}

bool ReadyQueue::maybe_nonempty() const {
  return enqueue_pos_.load(std::memory_order_seq_cst) !=
             dequeue_pos_.load(std::memory_order_seq_cst) ||
         overflow_count_.load(std::memory_order_seq_cst) != 0 ||
         urgent_.load(std::memory_order_seq_cst) != 0 ||
         deferred_.load(std::memory_order_seq_cst) != 0;
}

size_t ReadyQueue::approx_size() const {
  size_t in = enqueue_pos_.load(std::memory_order_acquire);
  size_t out = dequeue_pos_.load(std::memory_order_acquire);
  size_t ring = in > out ? in - out : 0;  // a pop may have moved past our read of enqueue_pos_
  return ring + overflow_count_.load(std::memory_order_relaxed) +
         urgent_.load(std::memory_order_relaxed) + deferred_.load(std::memory_order_relaxed);
}

// Dmitry Vyukov's bounded MPMC queue: each cell's sequence number says whose turn it is.
bool ReadyQueue::ring_push(OpBlock* op) {
  size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& c = cell(pos);
    size_t seq = c.seq.load(std::memory_order_acquire);
    intptr_t dif = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
    if (dif == 0) {
      // seq_cst: this RMW is the producer half of the wake-up handshake (EventCount).
      if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst,
                                             std::memory_order_relaxed)) {
        c.op = op;
        c.seq.store(pos + 1, std::memory_order_release);
        prefetch_for_write(&cell(pos + 1));  // the next push's cell
        return true;
      }
    } else if (dif < 0) {
      return false;  // full
    } else {
      pos = enqueue_pos_.load(std::memory_order_relaxed);
    }
  }
}

OpBlock* ReadyQueue::ring_pop() {
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
      return nullptr;  // empty
    } else {
      pos = dequeue_pos_.load(std::memory_order_relaxed);
    }
  }
}

void ReadyQueue::overflow_push(OpBlock* op) {
  std::lock_guard<std::mutex> g(side_mutex_);
  op->next = nullptr;
  if (overflow_tail_) {
    overflow_tail_->next = op;
  } else {
    overflow_head_ = op;
  }
  overflow_tail_ = op;
  overflow_count_.fetch_add(1, std::memory_order_seq_cst);
}

OpBlock* ReadyQueue::overflow_pop() {
  std::lock_guard<std::mutex> g(side_mutex_);
  OpBlock* op = overflow_head_;
  if (!op) return nullptr;
  overflow_head_ = op->next;
  if (!overflow_head_) overflow_tail_ = nullptr;
  overflow_count_.fetch_sub(1, std::memory_order_relaxed);
  return op;
}

void ReadyQueue::heap_push(OpBlock* op) {
  std::unique_lock<std::mutex> g(side_mutex_);
  op->ready_seq = heap_seq_++;
  try {
    heap_.push_back(op);
  } catch (const std::bad_alloc&) {
    // Out of memory growing the heap (this may run on a worker, where an exception would end
    // the process): the op still runs, in FIFO order, only its priority is lost.
    g.unlock();
    overflow_push(op);
    return;
  }
  std::push_heap(heap_.begin(), heap_.end(), runs_later);
  (op->priority > 0 ? urgent_ : deferred_).fetch_add(1, std::memory_order_seq_cst);
}

OpBlock* ReadyQueue::heap_pop(bool positive_only) {
  std::lock_guard<std::mutex> g(side_mutex_);
  if (heap_.empty()) return nullptr;
  OpBlock* top = heap_.front();
  if (positive_only && top->priority <= 0) return nullptr;
  std::pop_heap(heap_.begin(), heap_.end(), runs_later);
  heap_.pop_back();
  (top->priority > 0 ? urgent_ : deferred_).fetch_sub(1, std::memory_order_relaxed);
  return top;
}

}  // namespace ordo
