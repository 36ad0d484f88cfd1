// OpBlock: everything the engine knows about one pushed op, pooled and reused (no heap
// allocation per push). The public ordo_exec* handed to a callback is the OpBlock itself.
#pragma once

#include <atomic>
#include <cstdint>

#include "ordo/ordo.h"

namespace ordo {

class Engine;
class WorkerGroup;
struct OpBlock;
struct VarSlot;
struct ErrorRecord;

// One access of one op to one var. It is the node of that var's FIFO while the access waits.
struct VarLink {
  VarLink* next;
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

struct OpBlock {
  static constexpr uint32_t kInlineLinks = 6;
  static constexpr uint32_t kArmed = 1u << 31;  // completion_gen: a defer handle is live

  // --- set at push ---
  ordo_fn fn;
  void* user_data;
  ordo_free_fn free_fn;
  Engine* engine;
  WorkerGroup* group;  // nullptr: runs inline on the thread that makes it ready
  void* internal;      // Waiter* (kWaitSignal) or PreparedOp* (kPrepared)
  int32_t priority;
  int32_t prop;
  int32_t device_type;
  int32_t device_id;
  OpKind kind;
  bool deferred;  // set by ordo_exec_defer
  uint32_t num_links;
  VarLink* links;  // inline_links, or overflow_links when num_links > kInlineLinks

  // --- scheduling state ---
  std::atomic<int32_t> wait;         // var grants still missing
  std::atomic<int32_t> finish_refs;  // deferred ops: callback return + ordo_complete
  std::atomic<uint32_t> completion_gen;
  uint32_t gen;    // bumped every reuse; completion handles carry it
  uint32_t index;  // position in the engine's op table (completion handles carry it)
  uint64_t ready_seq;  // FIFO order among equal priorities in the priority heap
  OpBlock* next;       // free list / overflow ready list

  // --- result of an async completion ---
  int32_t async_code;
  ErrorRecord* async_error;

  VarLink* overflow_links;
  uint32_t overflow_capacity;
  VarLink inline_links[kInlineLinks];
  char name[ORDO_NAME_MAX + 1];

  ordo_exec* as_exec() { return reinterpret_cast<ordo_exec*>(this); }
  static OpBlock* from_exec(const ordo_exec* e) {
    return reinterpret_cast<OpBlock*>(const_cast<ordo_exec*>(e));
  }
};

}  // namespace ordo
