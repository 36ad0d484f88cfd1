// OpBlock: everything the engine knows about one pushed op, pooled and reused (no heap
// allocation per push). A callback's ordo_exec* is a token that names the running block
// (core/exec_token.h), never the block's address.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/utf8.h"
#include "core/op_life.h"
#include "ordo/ordo.h"

namespace ordo {

class Engine;
class WorkerGroup;
struct OpBlock;
struct VarSlot;
struct ErrorRecord;
struct EarlyWaits;

// One access of one op to one var. It is the node of that var's FIFO while the access waits.
// 16 bytes, so that three share a cache line with the pointer to their op (LinkLine): a push of
// an op with up to three vars writes one line of links, which a worker on another core then reads
// and the next push of the block takes back. 16-byte aligned: the var's state word keeps flags in
// a link address's low four bits.
struct alignas(16) VarLink {
  // Flags in var_bits, below the VarSlot* (var slots are 64-byte aligned).
  static constexpr uintptr_t kWriteBit = 1;  // a mutable access
  static constexpr uintptr_t kEpochBit = 2;  // a read: the var's read epoch when it arrived
  static constexpr uintptr_t kMarkBit = 4;   // a read that is ordo_wait_for_var's mark
  // Granted early (engine/early_release.*): the op started on this access before the var granted
  // it. Set while the link waits, never cleared until the next push rewrites the link; the
  // var's real grant then completes the op's early references instead of its wait counter.
  static constexpr uintptr_t kEarlyBit = 8;
  static constexpr uintptr_t kFlagBits = 63;

  // While waiting: the next (younger) access in the var's queue, written by the pusher of that
  // access, possibly just after the processor has started looking (it then waits for it).
  // Once granted: the chain of grants that complete() returns.
  std::atomic<VarLink*> next;
  uintptr_t var_bits;  // the VarSlot*, with the flags above

  VarSlot* var() const { return reinterpret_cast<VarSlot*>(var_bits & ~kFlagBits); }
  bool write() const { return (var_bits & kWriteBit) != 0; }
  bool mark() const { return (var_bits & kMarkBit) != 0; }
  bool early() const { return (var_bits & kEarlyBit) != 0; }
  uintptr_t epoch() const { return var_bits & kEpochBit; }
  // `access`: kWriteBit for a mutable access (a bool converts), kMarkBit for a wait mark.
  void set(VarSlot* v, uintptr_t access) { var_bits = reinterpret_cast<uintptr_t>(v) | access; }
  inline OpBlock* op() const;  // from the LinkLine that holds the link
};

// A cache line of links with the op they belong to (set once, when the line is made): a link
// finds its op without a pointer of its own. `life` is used on a block's first inline line only:
// the op's OpLife word (core/op_life.h), on a line every push writes anyway.
struct alignas(64) LinkLine {
  static constexpr uint32_t kLinks = 3;
  OpBlock* op;
  std::atomic<uint64_t> life;
  VarLink link[kLinks];
};
static_assert(sizeof(LinkLine) == 64, "a LinkLine is one cache line");

inline OpBlock* VarLink::op() const {
  auto line = reinterpret_cast<uintptr_t>(this) & ~uintptr_t{alignof(LinkLine) - 1};
  return reinterpret_cast<const LinkLine*>(line)->op;
}

// The caller's kinds come first: `kind <= kLastCallers` tells them with one compare.
enum class OpKind : uint8_t {
  kUser,        // a pushed callback
  kPrepared,    // a push of a prepared op (user_data/free_fn belong to the prepared op)
  kGraph,       // a caller's op replayed by a graph launch (src/graph/): a kUser with no free_fn,
                // whose `internal` is an OpHook told when the op has finished
  kChain,       // a graph launch's chain of the caller's ops run back to back: `internal` is a
                // BulkChain (engine/bulk_chain.h)
  kBundle,      // a graph launch's independent ops run by the workers together (the carrier):
                // `internal` is a BundleRun (engine/bulk_bundle.h); it has no links of its own
  kMember,      // the block a bundle's member runs under (never pushed): `internal` is the
                // member's VarLink in its BundleRun, whose line's `op` is the carrier
  kWaitSignal,  // ordo_wait_for_var: its wait mark (var_slot.h), a read; wakes the waiter
  kClearError,  // ordo_var_clear_error: a writer that clears the var's error
  kDeleteVar,   // ordo_var_delete: a writer after which the var slot is reclaimed
  kAsyncWait,   // ordo_wait_for_var_async: a writer with no callback; then calls the caller's fn
  kLastCallers = kMember,
};

// What a kGraph op tells when it has finished (before waiters on its vars wake, where a free_fn
// would run). A plain function pointer: the layer that pushes such ops implements it.
struct OpHook {
  void (*finished)(OpHook* self);
};

// Laid out by who touches what, because a block is written by the pushing thread and read by a
// worker on another core, then recycled back: every cache line a push writes is a line that
// crosses cores twice. Line 0 holds everything a push writes and a run reads; lines 1-2 hold up
// to six var links, three a line (an op with up to three vars touches line 1 only); the rest is
// cold (set once per block, or used only by deferred ops, named ops, priority heaps and ops with
// more than six vars).
struct alignas(64) OpBlock {
  static constexpr uint32_t kInlineLines = 2;
  static constexpr uint32_t kInlineLinks = kInlineLines * LinkLine::kLinks;
  static constexpr uint32_t kMaxLinks = 65535;  // num_links is 16 bits
  static constexpr uint32_t kArmed = 1u << 31;  // completion_gen: a defer handle is live

  // --- line 0: written by every push ---
  ordo_fn fn;
  void* user_data;
  ordo_free_fn free_fn;
  WorkerGroup* group;  // nullptr: runs inline on the thread that makes it ready
  void* internal;      // Waiter* (kWaitSignal), AsyncWait* (kAsyncWait), PreparedOp* (kPrepared),
                       // OpHook* (kGraph), BulkChain* (kChain), BundleRun* (kBundle),
                       // VarLink* (kMember)
  OpBlock* next;       // pool free list, ready chain, or a ready queue's overflow list
  std::atomic<int32_t> wait;  // var grants still missing
  int32_t priority;
  uint16_t num_links;
  uint8_t prop;
  OpKind kind;
  uint8_t device_type;
  uint8_t device_id;
  bool deferred;  // set by ordo_exec_defer
  bool has_name;

  // --- lines 1-2: the var links of ops with up to kInlineLinks vars ---
  LinkLine inline_lines[kInlineLines];

  // --- cold ---
  Engine* engine;  // the owning engine, set when the block is made
  uint32_t index;  // position in the engine's op table (completion handles carry it)
  uint32_t gen;    // bumped when a use that deferred ends; completion handles carry it
  std::atomic<int32_t> finish_refs;  // deferred ops: callback return + ordo_complete
  std::atomic<uint32_t> completion_gen;
  ErrorRecord* async_error;      // the failure passed to ordo_complete
  void* stream;                  // a GPU op's stream (set when it runs; ordo_exec_get_info)
  uint64_t ready_seq;            // FIFO order among equal priorities in the priority heap
  OpBlock* batch_next;           // the pool's depot: next full batch (on a batch's head block)
  LinkLine* overflow_lines;      // more vars: all links here; kept across reuses, so big ops stop
  uint32_t overflow_capacity;    // allocating once warm (in links)
  char name[ORDO_NAME_MAX + 1];  // valid when has_name
  // Early release of a GPU op (engine/early_release.*), all 0 for every other op: the accesses
  // granted early and not yet granted by their var, plus one for the op's own completion (0:
  // none granted early); the failure its completion brought, kept until the last real grant;
  // the producers' events its stream waits for before its callback runs.
  std::atomic<int32_t> early_refs{0};
  ErrorRecord* early_failure = nullptr;
  EarlyWaits* early_waits = nullptr;
  // A kChain op: the node running, or deferred (0 between uses: reset when the chain ends).
  uint32_t chain_at = 0;

  // Points the inline link lines at this block (once, when the block is made).
  void bind_link_lines() {
    for (LinkLine& line : inline_lines) line.op = this;
  }
  // The op's OpLife word (core/op_life.h): its state and push time, read by diagnostics.
  std::atomic<uint64_t>& life() { return inline_lines[0].life; }
  void set_state(OpState s) {
    std::atomic<uint64_t>& w = life();
    w.store(OpLife::with_state(w.load(std::memory_order_relaxed), s), std::memory_order_release);
  }
  LinkLine* link_lines() { return num_links <= kInlineLinks ? inline_lines : overflow_lines; }
  // The i-th var link (i < num_links).
  VarLink& link(uint32_t i) {
    return link_lines()[i / LinkLine::kLinks].link[i % LinkLine::kLinks];
  }
  const char* op_name() const { return has_name ? name : ""; }
};

// Walks an op's links in order, three to a line, without dividing by three on every step: one
// pointer, which steps over a line's header (its op and life words, one link's size) when it
// reaches the next line's start (lines are 64-byte aligned).
class LinkCursor {
 public:
  explicit LinkCursor(OpBlock* op) : next_(op->link_lines()->link) {}
  VarLink& next() {
    VarLink* l = next_++;
    if ((reinterpret_cast<uintptr_t>(next_) & (alignof(LinkLine) - 1)) == 0) ++next_;
    return *l;
  }

 private:
  static_assert(sizeof(VarLink) == offsetof(LinkLine, link), "a line's header is one link long");
  VarLink* next_;
};

// Calls f(link) for each of the op's links, in order, until f returns true; returns whether it
// did. An op of at most kLinks vars (nearly every op) has them all in its first inline line: a
// plain loop over that array, without the cursor's line test (callgrind: through the cursor,
// the worker's two walks cost D, an op of three vars, about 30 instructions more).
template <class F>
__attribute__((always_inline)) inline bool for_each_link(OpBlock* op, F&& f) {
  const uint32_t n = op->num_links;
  if (__builtin_expect(n <= LinkLine::kLinks, 1)) {
    VarLink* line = op->inline_lines[0].link;
    for (uint32_t i = 0; i < n; ++i) {
      if (f(line[i])) return true;
    }
    return false;
  }
  LinkCursor links(op);
  for (uint32_t i = 0; i < n; ++i) {
    if (f(links.next())) return true;
  }
  return false;
}

// Copies an op name, truncated to ORDO_NAME_MAX bytes without splitting a UTF-8 character, and
// NUL-terminated.
inline void copy_name(char (&dst)[ORDO_NAME_MAX + 1], const char* src) {
  size_t len = strnlen(src, ORDO_NAME_MAX);
  if (len == ORDO_NAME_MAX) len = whole_utf8_prefix(src, len);  // src[len] exists: NUL or more
  std::memcpy(dst, src, len);
  dst[len] = '\0';
}

}  // namespace ordo
