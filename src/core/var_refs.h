// VarRefs: the vars of one op, resolved from handles, sorted by slot index and deduplicated.
// Sorting gives every push the same lock order (no deadlock between concurrent pushes);
// deduplicating makes "listed twice counts once" and "both lists counts as mutable" hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/var_slot.h"
#include "core/var_table.h"
#include "ordo/ordo.h"

namespace ordo {

struct VarRef {
  VarSlot* slot;
  uint32_t index;  // from the handle: sorting by it does not touch the slot's cache line
  uint32_t gen;
  uint64_t handle;  // for error messages
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
                      size_t num_const, const ordo_var* mutable_vars, size_t num_mutable);

  size_t size() const { return size_; }
  VarRef* data() { return heap_.empty() ? inline_ : heap_.data(); }
  const VarRef* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  VarRef& operator[](size_t i) { return data()[i]; }

 private:
  ordo_status add(const VarTable& table, uint32_t engine_tag, ordo_var h, bool write);
  void sort_and_merge();

  VarRef inline_[kInline];
  std::vector<VarRef> heap_;
  size_t size_ = 0;
};

// The error for a var whose generation no longer matches its handle (it was deleted).
ordo_status stale_var(const VarRef& r);

// Takes every var's push lock in index order (the order VarRefs keeps); unlocks in reverse.
void lock_all(const VarRef* refs, size_t n);
void unlock_all(const VarRef* refs, size_t n);

}  // namespace ordo
