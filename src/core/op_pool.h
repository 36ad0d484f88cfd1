// OpPool: the engine's OpBlocks, allocated in chunks that live as long as the engine and
// recycled through free lists, so steady-state pushes allocate nothing.
//
// Each block has a permanent index (completion handles carry it, so ordo_complete can find the
// block from the handle alone). Free blocks sit in three tiers, cheapest first:
//   - a worker's private cache (no synchronization; workers free most blocks),
//   - a few shards for threads that are not workers (one uncontended spin lock each),
//   - a shared list that the others exchange batches with (one lock per batch).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/op_block.h"
#include "exec/spin_lock.h"

namespace ordo {

struct OpCache {
  OpBlock* head = nullptr;
  uint32_t count = 0;
};

class OpPool {
 public:
  static constexpr uint32_t kIndexBits = 24;
  static constexpr uint32_t kMaxBlocks = 1u << kIndexBits;

  OpPool();
  ~OpPool();

  // Returns nullptr only when memory or the index space is exhausted.
  OpBlock* acquire(OpCache* worker_cache);
  void release(OpBlock* op, OpCache* worker_cache);
  // The block with this index, or nullptr when no such block was ever made.
  OpBlock* find(uint32_t index) const;

 private:
  static constexpr uint32_t kChunkBits = 10;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = kMaxBlocks / kChunkSize;
  static constexpr uint32_t kBatch = 128;
  static constexpr uint32_t kShards = 8;

  struct alignas(64) Shard {
    SpinLock lock;
    OpCache cache;
  };

  bool refill(OpCache* cache);  // moves a batch from the shared list (or a new chunk)
  void spill(OpCache* cache);   // moves a batch to the shared list
  bool grow_locked();
  static OpBlock* pop(OpCache* c);
  static void push(OpCache* c, OpBlock* op);
  Shard& my_shard();

  std::unique_ptr<std::atomic<OpBlock*>[]> chunks_;
  uint32_t num_chunks_ = 0;
  SpinLock shared_lock_;
  OpCache shared_;
  Shard shards_[kShards];
};

}  // namespace ordo
