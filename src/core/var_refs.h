// VarRefs: the vars of one op, resolved from handles, sorted by slot address and deduplicated.
// Sorting gives every push the same lock order (no deadlock between concurrent pushes);
// deduplicating makes "listed twice counts once" and "both lists counts as mutable" hold.
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

#include "core/handle_bits.h"
#include "core/var_slot.h"
#include "core/var_table.h"
#include "exec/prefetch.h"
#include "ordo/ordo.h"

namespace ordo {

struct VarRef {
  VarSlot* slot;
  uint32_t gen;  // from the handle; checked against the slot under its push lock
  bool write;
};

class VarRefs {
 public:
  static constexpr size_t kInline = 16;

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
    if (size_ > 1) return sort_and_merge();
    return ORDO_OK;
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
    VarSlot* slot = (b.tag == engine_tag && b.gen != 0) ? table.find(b.index) : nullptr;
    if (!slot) return false;
    prefetch_for_write(slot);  // locked shortly: overlap the likely cross-core miss
    store(r, slot, b.gen, write);
    return true;
  }
  // Writes a VarRef with one 16-byte store where the CPU has them: sort_and_merge() reads each
  // ref back at once as 16 bytes, and a load that spans several smaller stores cannot be
  // forwarded from the store buffer (perf: a ~12-cycle stall per ref, 22% of collect()).
  static void store(VarRef* r, VarSlot* slot, uint32_t gen, bool write) {
#if defined(__SSE2__)
    static_assert(offsetof(VarRef, gen) == 8 && offsetof(VarRef, write) == 12, "VarRef layout");
    uint64_t meta = gen | (uint64_t{write} << 32);  // gen at byte 8, write at byte 12
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r),
                     _mm_set_epi64x(static_cast<long long>(meta),
                                    static_cast<long long>(reinterpret_cast<uintptr_t>(slot))));
#else
    *r = VarRef{slot, gen, write};
#endif
  }
  // The message for a handle resolve() refused (cold).
  static ordo_status bad_handle(uint32_t engine_tag, ordo_var h);
  ordo_status sort_and_merge();

  VarRef* data_ = inline_;
  size_t size_ = 0;
  VarRef inline_[kInline];
  std::vector<VarRef> heap_;
};

// The error for a var whose generation no longer matches its handle (it was deleted).
ordo_status stale_var(uint32_t engine_tag, const VarRef& r);

// Takes every var's push lock in address order (the order VarRefs keeps); unlocks in reverse.
void lock_all(const VarRef* refs, size_t n);
void unlock_all(const VarRef* refs, size_t n);

}  // namespace ordo
