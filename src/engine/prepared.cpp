#include "engine/prepared.h"

#include <cxxabi.h>

#include <new>

#include "core/handle_bits.h"
#include "engine/deferred_calls.h"

namespace ordo {

bool PreparedOp::try_acquire(uint32_t g) {
  uint64_t s = state.load(std::memory_order_acquire);
  for (;;) {
    if ((s >> 40) != g || (s & kLive) == 0) return false;
    if (state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) return true;
  }
}

bool PreparedOp::release() {
  return (state.fetch_sub(1, std::memory_order_acq_rel) & kRefMask) == 1;
}

bool PreparedOp::retire(uint32_t g, bool* last) {
  uint64_t s = state.load(std::memory_order_acquire);
  for (;;) {
    if ((s >> 40) != g || (s & kLive) == 0) return false;
    uint64_t refs = (s & kRefMask) - 1;
    uint64_t next = (static_cast<uint64_t>(g) << 40) | refs;  // not live; same generation
    if (state.compare_exchange_weak(s, next, std::memory_order_acq_rel)) {
      *last = refs == 0;
      return true;
    }
  }
}

PreparedTable::PreparedTable() : chunks_(new std::atomic<PreparedOp*>[kMaxChunks]) {
  for (uint32_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

PreparedTable::~PreparedTable() {
  for (uint32_t i = 0; i < kMaxChunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
}

PreparedOp* PreparedTable::allocate() {
  std::lock_guard<std::mutex> g(mutex_);
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    if (next_index_ == kMaxOps) return nullptr;
    index = next_index_;
    if (!chunks_[index >> kChunkBits].load(std::memory_order_relaxed)) {
      auto* chunk = new (std::nothrow) PreparedOp[kChunkSize];
      if (!chunk) return nullptr;
      for (uint32_t j = 0; j < kChunkSize; ++j) chunk[j].index = index + j;
      chunks_[index >> kChunkBits].store(chunk, std::memory_order_release);
    }
    gens_.push_back(1);
    ++next_index_;
  }
  return find(index);
}

uint32_t PreparedTable::publish(PreparedOp* p) {
  uint32_t g;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    g = gens_[p->index];
  }
  p->state.store((static_cast<uint64_t>(g) << 40) | PreparedOp::kLive | 1,
                 std::memory_order_release);
  return g;
}

PreparedOp* PreparedTable::find(uint32_t index) const {
  if (index >= kMaxChunks * kChunkSize) return nullptr;
  PreparedOp* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
  return chunk ? &chunk[index & (kChunkSize - 1)] : nullptr;
}

void PreparedTable::finish(PreparedOp* p) {
  ordo_free_fn free_fn = p->free_fn;
  p->free_fn = nullptr;
  if (free_fn && __builtin_expect(in_forced_unwind(), 0)) {
    defer_free_fn(free_fn, p->user_data);  // this thread may run no caller code now
  } else if (free_fn) {
    try {
      free_fn(p->user_data);
    } catch (abi::__forced_unwind&) {
      // The free_fn ended its thread: recycle the slot all the same, then let the unwind go on.
      recycle(p);
      throw;
    } catch (...) {
      // As for a plain op's free_fn: a C++ caller's throw must not take a worker (or
      // ordo_opr_delete's caller, or destroy) down; the slot is recycled all the same.
    }
  }
  recycle(p);
}

void PreparedTable::recycle(PreparedOp* p) {
  p->refs.clear();
  std::lock_guard<std::mutex> g(mutex_);
  uint32_t next =
      next_generation(static_cast<uint32_t>(p->state.load(std::memory_order_relaxed) >> 40));
  gens_[p->index] = next;
  if (next == 0) return;  // generations spent: retire the slot
  try {
    free_.push_back(p->index);
  } catch (const std::bad_alloc&) {
    // The slot is not reused; nothing else is lost.
  }
}

void PreparedTable::finish_all_live() {
  uint32_t i = 0;
  auto finish_from_i = [&] {
    for (; i < next_index_; ++i) {
      PreparedOp* p = find(i);
      uint64_t s = p->state.load(std::memory_order_acquire);
      if ((s & PreparedOp::kLive) == 0) continue;
      bool last = false;
      if (p->retire(static_cast<uint32_t>(s >> 40), &last) && last) finish(p);
    }
  };
  try {
    finish_from_i();
  } catch (abi::__forced_unwind&) {
    // A free_fn ended this thread (the one releasing the engine): the others are queued to run
    // on the next thread that waits, destroys or releases (engine/deferred_calls.h).
    ForcedUnwindScope no_caller_code;
    ++i;
    finish_from_i();
    throw;
  }
}

}  // namespace ordo
