#include "core/op_pool.h"

#include <cstdio>
#include <cstdlib>
#include <new>

#include "base/hot_tls.h"
#include "base/prefetch.h"
#include "core/handle_bits.h"

namespace ordo {

OpPool::OpPool(Engine* owner) : owner_(owner), chunks_(new std::atomic<OpBlock*>[kMaxChunks]) {
  for (uint32_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

OpPool::~OpPool() {
  for (uint32_t i = 0; i < num_chunks_; ++i) {
    OpBlock* chunk = chunks_[i].load(std::memory_order_relaxed);
    for (uint32_t j = 0; j < kChunkSize; ++j) delete[] chunk[j].overflow_lines;
    delete[] chunk;
  }
}

// Always inlined, into acquire() and acquire_out_of_line(): a call cost every push 28
// instructions (callgrind).
__attribute__((always_inline)) inline OpBlock* OpPool::take(OpCache* c, OpPool* pool) {
  if (c->loaded.count == 0) {
    if (c->spare.count != 0) {
      c->loaded = c->spare;
      c->spare = OpBatch{};
    } else if (!pool->depot_get(&c->loaded)) {
      return nullptr;
    }
  }
  OpBlock* op = c->loaded.head;
  c->loaded.head = op->next;
  --c->loaded.count;
#ifdef ORDO_CHECK_INVARIANTS
  // A block still in use sitting in a free list: released twice, or while it ran. Two pushes
  // would share it, and one op's completion would be lost (issue #21 suspected this).
  if (OpLife::state(op->life().load(std::memory_order_acquire)) != OpState::kFree) {
    std::fprintf(stderr, "ordo: invariant broken: op block %u handed out while still in use\n",
                 op->index);
    std::abort();
  }
#endif
  // The next push writes the next block's first two lines, which a worker on another core
  // probably touched last: start fetching them now so the miss overlaps this push's work.
  if (OpBlock* next = c->loaded.head) {
    prefetch_for_write(next);
    prefetch_for_write(reinterpret_cast<char*>(next) + 64);
  }
  return op;
}

void OpPool::give(OpCache* c, OpBlock* op, OpPool* pool) {
  if (c->loaded.count == kBatch) {
    if (c->spare.count != 0) pool->depot_put(c->spare);
    c->spare = c->loaded;
    c->loaded = OpBatch{};
  }
  op->next = c->loaded.head;
  c->loaded.head = op;
  ++c->loaded.count;
}

// The thread's number (from 1) is set at first use, not by a dynamic initializer: its guard
// word would take static TLS (tests/check_so_limits.sh) and be tested on every call.
OpPool::Shard& OpPool::my_shard() {
  static std::atomic<uint32_t> next_thread{1};
  static ORDO_HOT_TLS uint32_t mine = 0;
  if (__builtin_expect(mine == 0, 0)) mine = next_thread.fetch_add(1, std::memory_order_relaxed);
  return shards_[(mine - 1) % kShards];
}

OpBlock* OpPool::acquire(OpCache* worker_cache) {
  if (worker_cache) return take(worker_cache, this);
  Shard& s = my_shard();
  SpinGuard g(s.lock);
  return take(&s.cache, this);
}

// acquire()'s body again, not a call of it: a second caller is what makes the compiler stop
// inlining acquire() into the push path.
OpBlock* OpPool::acquire_out_of_line(OpCache* worker_cache) {
  if (worker_cache) return take(worker_cache, this);
  Shard& s = my_shard();
  SpinGuard g(s.lock);
  return take(&s.cache, this);
}

void OpPool::release_slow(OpBlock* op, OpCache* worker_cache) {
  // A new generation makes the completion handle of this use stale. Only an op that deferred
  // was ever given one, and `gen` sits on the block's cold line: bumping it for every op cost a
  // cache miss per op (docs/PERFORMANCE.md, "Measurements behind the code").
  if (op->deferred) {
    op->gen = next_generation(op->gen);
    // Every generation used: retire the block (it stays in its chunk until the engine goes),
    // since wrapping would make an old, already used completion handle valid again. One block
    // per 4 million deferred uses of it.
    if (op->gen == 0) return;
  }
  if (worker_cache) {
    give(worker_cache, op, this);
    return;
  }
  Shard& s = my_shard();
  SpinGuard g(s.lock);
  give(&s.cache, op, this);
}

OpBlock* OpPool::find(uint32_t index) const {
  if (index >= kMaxBlocks) return nullptr;
  OpBlock* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
  return chunk ? &chunk[index & (kChunkSize - 1)] : nullptr;
}

bool OpPool::depot_get(OpBatch* out) {
  SpinGuard g(depot_lock_);
  if (!depot_ && !grow_locked()) return false;
  out->head = depot_;
  out->count = kBatch;
  depot_ = depot_->batch_next;
  return true;
}

void OpPool::depot_put(const OpBatch& b) {
  SpinGuard g(depot_lock_);
  b.head->batch_next = depot_;
  depot_ = b.head;
}

bool OpPool::grow_locked() {
  if (num_chunks_ == kMaxChunks) return false;
  OpBlock* chunk = new (std::nothrow) OpBlock[kChunkSize];
  if (!chunk) return false;
  uint32_t base = num_chunks_ << kChunkBits;
  for (uint32_t j = 0; j < kChunkSize; ++j) {
    OpBlock& op = chunk[j];
    op.engine = owner_;
    op.index = base + j;
    op.gen = 1;
    op.deferred = false;  // read by release(), which a failed push reaches before fill()
    op.completion_gen.store(0, std::memory_order_relaxed);
    op.bind_link_lines();  // permanent: links find their op there
    op.overflow_lines = nullptr;
    op.life().store(0, std::memory_order_relaxed);  // OpState::kFree
    // No var yet: a diagnostic scan (engine/pending_report.cpp) may read a link before the first
    // push of the block has set it, and must find no var there rather than garbage.
    for (LinkLine& line : op.inline_lines) {
      for (VarLink& l : line.link) l.var_bits = 0;
    }
    op.overflow_capacity = 0;
    // Chunks split into whole batches (kChunkSize is a multiple of kBatch).
    bool batch_head = j % kBatch == 0;
    op.next = (j + 1) % kBatch == 0 ? nullptr : &chunk[j + 1];
    if (batch_head) {
      op.batch_next = depot_;
      depot_ = &op;
    }
  }
  chunks_[num_chunks_].store(chunk, std::memory_order_release);
  ++num_chunks_;
  return true;
}

}  // namespace ordo
