#include "core/var_table.h"

#include <new>

#include "base/last_error.h"

namespace ordo {

VarTable::VarTable() : chunks_(new std::atomic<VarSlot*>[kMaxChunks]) {
  for (uint32_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

VarTable::~VarTable() {
  for (uint32_t i = 0; i < kMaxChunks; ++i) {
    VarSlot* chunk = chunks_[i].load(std::memory_order_relaxed);
    if (!chunk) continue;
    for (uint32_t j = 0; j < kChunkSize; ++j) ErrorRecord::release(chunk[j].current_error());
    delete[] chunk;
  }
}

ordo_status VarTable::allocate(VarSlot** out) {
  std::lock_guard<std::mutex> g(mutex_);
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    if (next_index_ == kMaxVars) {
      return fail(ORDO_ERR_NO_MEMORY, "ordo_var_new: %u variables alive, the most one engine holds",
                  kMaxVars);
    }
    index = next_index_;
    if (!chunks_[index >> kChunkBits].load(std::memory_order_relaxed)) {
      VarSlot* chunk = new (std::nothrow) VarSlot[kChunkSize];
      if (!chunk) return fail(ORDO_ERR_NO_MEMORY, "ordo_var_new: out of memory");
      for (uint32_t j = 0; j < kChunkSize; ++j) chunk[j].index = index + j;
      chunks_[index >> kChunkBits].store(chunk, std::memory_order_release);
    }
    ++next_index_;
  }
  VarSlot* v = find(index);
  {
    SpinGuard lock(v->push_lock);
    v->live = true;
  }
  *out = v;
  return ORDO_OK;
}

void VarTable::reclaim(VarSlot* v) {
  v->set_error(nullptr);
  {
    SpinGuard lock(v->push_lock);
    if (v->gen == 0) return;  // retired: its generations are spent
  }
  std::lock_guard<std::mutex> g(mutex_);
  try {
    free_.push_back(v->index);
  } catch (const std::bad_alloc&) {
    // Out of memory while recycling: the slot is simply not reused. Nothing else is lost.
  }
}

}  // namespace ordo
