// OpPool: the engine's OpBlocks, allocated in chunks that live as long as the engine and
// recycled through free lists, so steady-state pushes allocate nothing.
//
// Each block has a permanent index (completion handles carry it, so ordo_complete can find the
// block from the handle alone). Free blocks sit in three tiers, cheapest first:
//   - a worker's private cache (no synchronization; workers free most blocks),
//   - a few shards for threads that are not workers (one uncontended spin lock each),
//   - a shared depot of full batches that caches exchange in O(1) (one short lock per batch).
// Caches are "magazines" (Bonwick's slab allocator): a loaded list plus one full spare batch,
// so a thread that only frees (a worker) or only allocates (a pusher) crosses the depot once per
// kBatch blocks and never walks a list while holding the depot lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "base/spin_lock.h"
#include "core/op_block.h"

namespace ordo {

struct OpBatch {
  OpBlock* head = nullptr;
  uint32_t count = 0;
};

struct OpCache {
  OpBatch loaded;  // blocks are taken from and returned to this one
  OpBatch spare;   // a full batch (kBatch blocks), or empty
};

class OpPool {
 public:
  static constexpr uint32_t kIndexBits = 24;
  static constexpr uint32_t kMaxBlocks = 1u << kIndexBits;

  explicit OpPool(Engine* owner);
  ~OpPool();

  // Returns nullptr only when memory or the index space is exhausted.
  OpBlock* acquire(OpCache* worker_cache);
  // acquire() for rare callers (a graph launch's bundle): a call of its own, so that acquire()
  // keeps the one caller with which the compiler inlines it into the push path.
  __attribute__((noinline)) OpBlock* acquire_out_of_line(OpCache* worker_cache);
  // Inline (the common case is four stores): finalize() paid a call for it on every op.
  inline void release(OpBlock* op, OpCache* worker_cache);
  // The block with this index, or nullptr when no such block was ever made.
  OpBlock* find(uint32_t index) const;
  // Calls f(block) for every block made so far, free or not (diagnostics: ordo_engine_dump).
  template <class F>
  void for_each_block(F&& f) const {
    for (uint32_t c = 0; c < kMaxChunks; ++c) {
      OpBlock* chunk = chunks_[c].load(std::memory_order_acquire);
      if (!chunk) return;
      for (uint32_t j = 0; j < kChunkSize; ++j) f(&chunk[j]);
    }
  }

 private:
  static constexpr uint32_t kChunkBits = 10;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = kMaxBlocks / kChunkSize;
  static constexpr uint32_t kBatch = 128;
  static_assert(kChunkSize % kBatch == 0, "chunks split into whole batches");
  static constexpr uint32_t kShards = 8;

  struct alignas(64) Shard {
    SpinLock lock;
    OpCache cache;
  };

  // release() of a block that deferred, or into a full or shared cache.
  __attribute__((noinline)) void release_slow(OpBlock* op, OpCache* worker_cache);
  static OpBlock* take(OpCache* c, OpPool* pool);
  static void give(OpCache* c, OpBlock* op, OpPool* pool);
  bool depot_get(OpBatch* out);  // a full batch from the depot, or from a new chunk
  void depot_put(const OpBatch& b);
  bool grow_locked();
  Shard& my_shard();

  Engine* owner_;
  std::unique_ptr<std::atomic<OpBlock*>[]> chunks_;
  uint32_t num_chunks_ = 0;
  SpinLock depot_lock_;
  OpBlock* depot_ = nullptr;  // full batches, linked through their head's batch_next
  Shard shards_[kShards];
};

inline void OpPool::release(OpBlock* op, OpCache* worker_cache) {
  // Free before the block can be handed out again (the push time no longer matters: one store).
  op->life().store(static_cast<uint64_t>(OpState::kFree), std::memory_order_release);
  // The common case (a worker's cache with room, an op that never deferred) in four stores and
  // no saved registers: with the rare cases inline, gcc saved six registers on every call
  // (callgrind: 17 of release's 31 instructions per op).
  if (__builtin_expect(
          worker_cache != nullptr && !op->deferred && worker_cache->loaded.count != kBatch, 1)) {
    op->next = worker_cache->loaded.head;
    worker_cache->loaded.head = op;
    ++worker_cache->loaded.count;
    return;
  }
  release_slow(op, worker_cache);
}

}  // namespace ordo
