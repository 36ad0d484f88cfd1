// Prepared ops (MXNet's NewOperator idea): the callback, options and normalized var list are
// stored once; each push copies them into a pooled OpBlock without resolving or sorting again.
//
// Lifetime without a lock: `state` packs the generation (high 24 bits) and a reference count
// (low 40 bits): one reference for the live handle plus one per push in flight. Delete bumps
// the generation and drops the handle's reference; whoever drops the last one runs free_fn and
// recycles the slot. A push takes its reference with a CAS that also checks the generation, so
// it can never revive a deleted op.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/var_refs.h"
#include "ordo/ordo.h"

namespace ordo {

class WorkerGroup;

struct PreparedOp {
  // state: [63..40] generation, [39] live (the handle has not been deleted), [38..0] references
  // (the handle's own while live, plus one per push in flight). Deleting clears `live` and keeps
  // the generation: the next generation becomes valid only when the slot is reused, so a handle
  // one generation ahead never names an op whose pushes are still running.
  static constexpr uint64_t kLive = uint64_t{1} << 39;
  static constexpr uint64_t kRefMask = kLive - 1;

  std::atomic<uint64_t> state{0};
  uint32_t index = 0;
  ordo_fn fn = nullptr;
  void* user_data = nullptr;
  ordo_free_fn free_fn = nullptr;
  WorkerGroup* group = nullptr;
  int32_t prop = 0;
  int32_t device_type = 0;
  int32_t device_id = 0;
  char name[ORDO_NAME_MAX + 1] = {};
  std::vector<VarRef> refs;

  uint32_t gen() const { return static_cast<uint32_t>(state.load() >> 40); }
  // Takes a push reference if the op is live at generation `gen`.
  bool try_acquire(uint32_t gen);
  // Takes another reference; the caller already holds one.
  void retain() { state.fetch_add(1, std::memory_order_relaxed); }
  // Drops a reference; true when it was the last (the caller then finishes the op).
  bool release();
  // Invalidates generation `gen` and drops the handle's reference. *last tells whether that was
  // the last reference. False when `gen` is not the live generation.
  bool retire(uint32_t gen, bool* last);
};

class PreparedTable {
 public:
  static constexpr uint32_t kChunkBits = 8;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = 1024;
  static constexpr uint32_t kMaxOps = kMaxChunks * kChunkSize;  // 262,144 alive at once

  PreparedTable();
  ~PreparedTable();

  // A slot to fill; its state is set live (generation, one reference) by publish().
  PreparedOp* allocate();
  uint32_t publish(PreparedOp* p);  // returns the live generation
  PreparedOp* find(uint32_t index) const;
  // Runs free_fn and puts the slot back for reuse. Inside a forced unwind (deferred_calls.h) the
  // free_fn is queued instead.
  void finish(PreparedOp* p);
  // Engine teardown: finish every prepared op still holding its handle reference.
  void finish_all_live();

 private:
  // Puts a finished slot back for reuse (its free_fn has run or is queued).
  void recycle(PreparedOp* p);

  std::unique_ptr<std::atomic<PreparedOp*>[]> chunks_;
  std::mutex mutex_;
  uint32_t next_index_ = 0;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> gens_;  // next generation per index
};

}  // namespace ordo
