// VarTable: the engine's variables, in chunks that never move (so a VarSlot* stays valid for the
// engine's life) and are found without a lock. Deleted slots are reused with a new generation;
// a slot whose generation space is spent is retired for good.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/var_slot.h"
#include "ordo/ordo.h"

namespace ordo {

class VarTable {
 public:
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxVars = 1u << 24;
  static constexpr uint32_t kMaxChunks = kMaxVars / kChunkSize;

  VarTable();
  ~VarTable();

  // A fresh live slot. ORDO_OK, or ORDO_ERR_NO_MEMORY (message set).
  ordo_status allocate(VarSlot** out);
  // Puts an idle, deleted slot back for reuse (unless retired).
  void reclaim(VarSlot* v);
  // The slot at `index`, or nullptr when it was never created.
  VarSlot* find(uint32_t index) const {
    if (index >= kMaxVars) return nullptr;
    VarSlot* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
    return chunk ? &chunk[index & (kChunkSize - 1)] : nullptr;
  }
  // Calls f(slot) for every slot made so far, live or not (diagnostics: ordo_engine_dump).
  template <class F>
  void for_each_slot(F&& f) const {
    for (uint32_t c = 0; c < kMaxChunks; ++c) {
      VarSlot* chunk = chunks_[c].load(std::memory_order_acquire);
      if (!chunk) return;
      for (uint32_t j = 0; j < kChunkSize; ++j) f(&chunk[j]);
    }
  }

 private:
  std::unique_ptr<std::atomic<VarSlot*>[]> chunks_;
  std::mutex mutex_;  // var_new/var_delete only, never the push path
  uint32_t next_index_ = 0;
  std::vector<uint32_t> free_;
};

}  // namespace ordo
