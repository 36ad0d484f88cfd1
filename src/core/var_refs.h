// VarRefs: the vars of one op, resolved from handles and deduplicated ("listed twice counts
// once", "both lists counts as mutable"). Lists longer than kUnsortedMax, or with a var listed
// twice, are sorted by slot address, which gives every push the same lock order. Short lists of
// distinct vars keep their list order: lock_all() only tries their locks, and waits in address
// order (from a sorted copy) only when one is taken, so the common push skips the sort (a chain
// of dependent compares).
//
// This runs on every push, so it is kept small: a VarRef is 16 bytes, the order is the slots'
// addresses (slots never move, and comparing pointers needs no load of the slot), and the
// common short lists never touch the heap.
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/prefetch.h"
#include "core/handle_bits.h"
#include "core/var_slot.h"
#include "core/var_table.h"
#include "ordo/ordo.h"

namespace ordo {

struct VarRef {
  VarSlot* slot;
  uint32_t gen;    // from the handle; checked against the slot under its push lock
  uint8_t access;  // the VarLink flags of the access: kWriteBit, or kMarkBit for a wait mark
};

class VarRefs {
 public:
  static constexpr size_t kInline = 16;
  static constexpr size_t kUnsortedMax = 4;  // distinct lists up to this long stay unsorted

  VarRefs() = default;
  VarRefs(const VarRefs&) = delete;
  VarRefs& operator=(const VarRefs&) = delete;

  // Resolves and normalizes both lists. ORDO_ERR_INVALID_HANDLE (message set) when a handle is
  // 0, made up, foreign or names no variable; a stale generation is caught later, under the
  // var's lock, where it cannot race with ordo_var_delete (see stale_var()).
  // ORDO_ERR_INVALID_ARGUMENT when more than OpBlock::kMaxLinks distinct vars remain.
  ordo_status collect(const VarTable& table, uint32_t engine_tag, const ordo_var* const_vars,
                      size_t num_const, const ordo_var* mutable_vars, size_t num_mutable) {
    size_ = 0;
    VarRef* out = inline_;
    if (num_const + num_mutable > kInline) {
      heap_.resize(num_const + num_mutable);
      out = heap_.data();
    }
    data_ = out;
    for (size_t i = 0; i < num_const; ++i) {
      if (!resolve(table, engine_tag, const_vars[i], false, &out[size_++])) {
        return bad_handle(engine_tag, const_vars[i]);
      }
    }
    for (size_t i = 0; i < num_mutable; ++i) {
      if (!resolve(table, engine_tag, mutable_vars[i], true, &out[size_++])) {
        return bad_handle(engine_tag, mutable_vars[i]);
      }
    }
    if (size_ > 1 && !(size_ <= kUnsortedMax && distinct())) return sort_and_merge();
    return ORDO_OK;
  }

  // collect() for an op of one var, without the list machinery (no merging or ordering to do):
  // most pushes have one var, and a VarRefs costs them ~50 instructions (docs/PERFORMANCE.md).
  static ordo_status collect_one(const VarTable& table, uint32_t engine_tag, ordo_var h, bool write,
                                 VarRef* out) {
    return resolve(table, engine_tag, h, write, out) ? ORDO_OK : bad_handle(engine_tag, h);
  }

  size_t size() const { return size_; }
  VarRef* data() { return data_; }
  const VarRef* data() const { return data_; }
  VarRef& operator[](size_t i) { return data_[i]; }

 private:
  // Fills `r` from handle `h`; false when the handle names no var of this engine.
  static bool resolve(const VarTable& table, uint32_t engine_tag, ordo_var h, bool write,
                      VarRef* r) {
    HandleBits b = HandleBits::decode(h);
    VarSlot* slot = (b.tag == engine_tag && b.kind == HandleKind::kVar && b.gen != 0)
                        ? table.find(b.index)
                        : nullptr;
    if (!slot) return false;
    prefetch_for_write(slot);  // locked shortly: overlap the likely cross-core miss
    store(r, slot, b.gen, write);
    return true;
  }
  // Writes a VarRef with one 16-byte store where the CPU has them: sort_and_merge() reads each
  // ref back at once as 16 bytes, and a load that spans several smaller stores cannot be
  // forwarded from the store buffer (a stall per ref: docs/PERFORMANCE.md, "Measurements behind
  // the code").
  static void store(VarRef* r, VarSlot* slot, uint32_t gen, bool write) {
#if defined(__SSE2__)
    static_assert(offsetof(VarRef, gen) == 8 && offsetof(VarRef, access) == 12, "VarRef layout");
    static_assert(VarLink::kWriteBit == 1, "a write's access is the bool");
    uint64_t meta = gen | (uint64_t{write} << 32);  // gen at byte 8, access at byte 12
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r),
                     _mm_set_epi64x(static_cast<long long>(meta),
                                    static_cast<long long>(reinterpret_cast<uintptr_t>(slot))));
#else
    *r = VarRef{slot, gen, static_cast<uint8_t>(write)};
#endif
  }
  // Whether no slot appears twice (for short lists: every pair compared).
  bool distinct() const {
    for (size_t i = 1; i < size_; ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (data_[i].slot == data_[j].slot) return false;
      }
    }
    return true;
  }
  // The message for a handle resolve() refused (cold).
  static ordo_status bad_handle(uint32_t engine_tag, ordo_var h);
  ordo_status sort_and_merge();

  VarRef* data_ = inline_;
  size_t size_ = 0;
  VarRef inline_[kInline];
  std::vector<VarRef> heap_;
};

// The error for a handle that names no live var of its slot: deleted, or never issued (made
// up). Call it with the slot's push lock held: it reads the slot's generation.
ordo_status stale_var(uint32_t engine_tag, const VarRef& r);

// Sorts refs by slot address (the one lock order every pusher follows).
void sort_by_slot(VarRef* refs, size_t n);
// Takes every var's push lock. The locks are first only tried, in the order given; if one is
// taken, those held are let go and all are taken in slot address order (a sorted copy for a
// short list), waiting as needed. So a pusher never waits while it holds a lock out of address
// order, and concurrent pushes cannot deadlock. unlock_all releases them (any order).
void lock_several(const VarRef* refs, size_t n);
inline void lock_all(const VarRef* refs, size_t n) {
  if (n == 1) {
    refs[0].slot->push_lock.lock();  // most pushes: one var, no order to keep
  } else {
    lock_several(refs, n);
  }
}
void unlock_all(const VarRef* refs, size_t n);

}  // namespace ordo
