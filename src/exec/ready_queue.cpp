#include "exec/ready_queue.h"

#include <algorithm>
#include <new>

namespace ordo {

namespace {
// Heap order: higher priority first; among equals, earlier push first.
bool runs_later(const OpBlock* a, const OpBlock* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->ready_seq > b->ready_seq;
}
}  // namespace

ReadyQueue::ReadyQueue(size_t ring_capacity)
    : rings_{MpmcRing(ring_capacity), MpmcRing(ring_capacity)} {
  static_assert(kRings == 2, "the constructor builds each ring");
}

void ReadyQueue::push(OpBlock* op, size_t hint) {
  if (op->priority != 0) {
    heap_push(op);
  } else if (overflow_count_.load(std::memory_order_relaxed) != 0 ||
             !rings_[hint % kRings].push(op)) {
    overflow_push(op);
  }
}

OpBlock* ReadyQueue::pop(size_t hint) {
  if (urgent_.load(std::memory_order_relaxed) != 0) {
    if (OpBlock* op = heap_pop(true)) return op;
  }
  if (OpBlock* op = ring_pop(hint)) return op;
  if (overflow_count_.load(std::memory_order_relaxed) != 0) {
    if (OpBlock* op = overflow_pop()) return op;
  }
  return nullptr;
}

OpBlock* ReadyQueue::pop_negative() {
  if (deferred_.load(std::memory_order_relaxed) == 0) return nullptr;
  return heap_pop(false);
}

OpBlock* ReadyQueue::ring_pop(size_t hint) {
  for (size_t i = 0; i < kRings; ++i) {
    if (OpBlock* op = rings_[(hint + i) % kRings].pop()) return op;
  }
  return nullptr;
}

bool ReadyQueue::maybe_nonempty() const {
  for (const MpmcRing& r : rings_) {
    if (r.maybe_nonempty()) return true;
  }
  return overflow_count_.load(std::memory_order_seq_cst) != 0 ||
         urgent_.load(std::memory_order_seq_cst) != 0 ||
         deferred_.load(std::memory_order_seq_cst) != 0;
}

size_t ReadyQueue::approx_size() const {
  size_t ring = 0;
  for (const MpmcRing& r : rings_) ring += r.approx_size();
  return ring + overflow_count_.load(std::memory_order_relaxed) +
         urgent_.load(std::memory_order_relaxed) + deferred_.load(std::memory_order_relaxed);
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
