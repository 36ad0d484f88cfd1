// OpBlock: everything the engine knows about one pushed op, pooled and reused (no heap
// allocation per push). The public ordo_exec* handed to a callback is the OpBlock itself.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ordo/ordo.h"

namespace ordo {

class Engine;
class WorkerGroup;
struct OpBlock;
struct VarSlot;
struct ErrorRecord;

// One access of one op to one var. It is the node of that var's FIFO while the access waits.
// 32-byte aligned: the var's state word keeps flags in a link address's low five bits.
struct alignas(32) VarLink {
  // While waiting: the next (younger) access in the var's queue, written by the pusher of that
  // access, possibly just after the processor has started looking (it then waits for it).
  // Once granted: the chain of grants that complete() returns.
  std::atomic<VarLink*> next;
  OpBlock* op;
  VarSlot* var;
  bool write;
};

enum class OpKind : uint8_t {
  kUser,        // a pushed callback
  kPrepared,    // a push of a prepared op (user_data/free_fn belong to the prepared op)
  kWaitSignal,  // ordo_wait_for_var: ordered like a writer; wakes the waiting thread
  kClearError,  // ordo_var_clear_error: a writer that clears the var's error
  kDeleteVar,   // ordo_var_delete: a writer after which the var slot is reclaimed
};

// Laid out by who touches what, because a block is written by the pushing thread and read by a
// worker on another core, then recycled back: every cache line a push writes is a line that
// crosses cores twice. Line 0 holds everything a push writes and a run reads; lines 1-2 hold up
// to four var links; the rest is cold (set once per block, or used only by deferred ops, named
// ops, priority heaps and ops with many vars).
struct alignas(64) OpBlock {
  static constexpr uint32_t kInlineLinks = 4;
  static constexpr uint32_t kMaxLinks = 65535;  // num_links is 16 bits
  static constexpr uint32_t kArmed = 1u << 31;  // completion_gen: a defer handle is live

  // --- line 0: written by every push ---
  ordo_fn fn;
  void* user_data;
  ordo_free_fn free_fn;
  WorkerGroup* group;         // nullptr: runs inline on the thread that makes it ready
  void* internal;             // Waiter* (kWaitSignal) or PreparedOp* (kPrepared)
  OpBlock* next;              // pool free list, ready chain, or a ready queue's overflow list
  std::atomic<int32_t> wait;  // var grants still missing
  int32_t priority;
  uint16_t num_links;
  uint8_t prop;
  OpKind kind;
  uint8_t device_type;
  uint8_t device_id;
  bool deferred;  // set by ordo_exec_defer
  bool has_name;

  // --- lines 1-2: the first var links ---
  VarLink inline_links[kInlineLinks];

  // --- cold ---
  Engine* engine;  // the owning engine, set when the block is made
  uint32_t index;  // position in the engine's op table (completion handles carry it)
  uint32_t gen;    // bumped when a use that deferred ends; completion handles carry it
  std::atomic<int32_t> finish_refs;  // deferred ops: callback return + ordo_complete
  std::atomic<uint32_t> completion_gen;
  ErrorRecord* async_error;  // the failure passed to ordo_complete
  uint64_t ready_seq;        // FIFO order among equal priorities in the priority heap
  OpBlock* batch_next;       // the pool's depot: next full batch (on a batch's head block)
  VarLink* overflow_links;   // kept across reuses, so big ops stop allocating once warm
  uint32_t overflow_capacity;
  char name[ORDO_NAME_MAX + 1];  // valid when has_name

  VarLink* links() { return num_links <= kInlineLinks ? inline_links : overflow_links; }
  const char* op_name() const { return has_name ? name : ""; }
  ordo_exec* as_exec() { return reinterpret_cast<ordo_exec*>(this); }
  static OpBlock* from_exec(const ordo_exec* e) {
    return reinterpret_cast<OpBlock*>(const_cast<ordo_exec*>(e));
  }
};

// Copies an op name, truncated to ORDO_NAME_MAX bytes and NUL-terminated.
inline void copy_name(char (&dst)[ORDO_NAME_MAX + 1], const char* src) {
  size_t len = strnlen(src, ORDO_NAME_MAX);
  std::memcpy(dst, src, len);
  dst[len] = '\0';
}

}  // namespace ordo
