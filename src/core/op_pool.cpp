#include "core/op_pool.h"

#include <new>

namespace ordo {

OpPool::OpPool() : chunks_(new std::atomic<OpBlock*>[kMaxChunks]) {
  for (uint32_t i = 0; i < kMaxChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

OpPool::~OpPool() {
  for (uint32_t i = 0; i < num_chunks_; ++i) {
    OpBlock* chunk = chunks_[i].load(std::memory_order_relaxed);
    for (uint32_t j = 0; j < kChunkSize; ++j) delete[] chunk[j].overflow_links;
    delete[] chunk;
  }
}

OpBlock* OpPool::pop(OpCache* c) {
  OpBlock* op = c->head;
  if (op) {
    c->head = op->next;
    --c->count;
  }
  return op;
}

void OpPool::push(OpCache* c, OpBlock* op) {
  op->next = c->head;
  c->head = op;
  ++c->count;
}

OpPool::Shard& OpPool::my_shard() {
  static std::atomic<uint32_t> next_thread{0};
  thread_local uint32_t mine = next_thread.fetch_add(1, std::memory_order_relaxed);
  return shards_[mine % kShards];
}

OpBlock* OpPool::acquire(OpCache* worker_cache) {
  if (worker_cache) {
    if (worker_cache->count == 0 && !refill(worker_cache)) return nullptr;
    return pop(worker_cache);
  }
  Shard& s = my_shard();
  SpinGuard g(s.lock);
  if (s.cache.count == 0 && !refill(&s.cache)) return nullptr;
  return pop(&s.cache);
}

void OpPool::release(OpBlock* op, OpCache* worker_cache) {
  // A new generation makes any completion handle of the previous use stale.
  op->gen = (op->gen + 1) & ((1u << 24) - 1);
  if (op->gen == 0) op->gen = 1;
  if (worker_cache) {
    push(worker_cache, op);
    if (worker_cache->count > 2 * kBatch) spill(worker_cache);
    return;
  }
  Shard& s = my_shard();
  SpinGuard g(s.lock);
  push(&s.cache, op);
  if (s.cache.count > 2 * kBatch) spill(&s.cache);
}

OpBlock* OpPool::find(uint32_t index) const {
  if (index >= kMaxBlocks) return nullptr;
  OpBlock* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
  return chunk ? &chunk[index & (kChunkSize - 1)] : nullptr;
}

bool OpPool::refill(OpCache* cache) {
  SpinGuard g(shared_lock_);
  if (shared_.count == 0 && !grow_locked()) return false;
  for (uint32_t i = 0; i < kBatch && shared_.count != 0; ++i) push(cache, pop(&shared_));
  return true;
}

void OpPool::spill(OpCache* cache) {
  SpinGuard g(shared_lock_);
  for (uint32_t i = 0; i < kBatch; ++i) push(&shared_, pop(cache));
}

bool OpPool::grow_locked() {
  if (num_chunks_ == kMaxChunks) return false;
  OpBlock* chunk = new (std::nothrow) OpBlock[kChunkSize];
  if (!chunk) return false;
  uint32_t base = num_chunks_ << kChunkBits;
  for (uint32_t j = kChunkSize; j-- > 0;) {
    OpBlock& op = chunk[j];
    op.index = base + j;
    op.gen = 1;
    op.completion_gen.store(0, std::memory_order_relaxed);
    op.overflow_links = nullptr;
    op.overflow_capacity = 0;
    push(&shared_, &op);
  }
  chunks_[num_chunks_].store(chunk, std::memory_order_release);
  ++num_chunks_;
  return true;
}

}  // namespace ordo
