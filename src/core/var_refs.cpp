#include "core/var_refs.h"

#include <algorithm>
#include <cinttypes>

#include "core/handle_bits.h"
#include "core/last_error.h"

namespace ordo {

ordo_status VarRefs::collect(const VarTable& table, uint32_t engine_tag, const ordo_var* const_vars,
                             size_t num_const, const ordo_var* mutable_vars, size_t num_mutable) {
  size_ = 0;
  heap_.clear();
  if (num_const + num_mutable > kInline) heap_.resize(num_const + num_mutable);
  for (size_t i = 0; i < num_const; ++i) {
    if (ordo_status s = add(table, engine_tag, const_vars[i], false)) return s;
  }
  for (size_t i = 0; i < num_mutable; ++i) {
    if (ordo_status s = add(table, engine_tag, mutable_vars[i], true)) return s;
  }
  sort_and_merge();
  if (size_ > OpBlock::kMaxLinks) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "an op uses %zu distinct vars; at most %u are allowed",
                size_, OpBlock::kMaxLinks);
  }
  return ORDO_OK;
}

ordo_status stale_var(const VarRef& r) {
  return fail(ORDO_ERR_INVALID_HANDLE,
              "var handle 0x%016" PRIx64 " is stale: the variable was deleted", r.handle);
}

ordo_status VarRefs::add(const VarTable& table, uint32_t engine_tag, ordo_var h, bool write) {
  if (h == 0) return fail(ORDO_ERR_INVALID_HANDLE, "var handle 0 is never a valid variable");
  HandleBits b = HandleBits::decode(h);
  if (b.tag != engine_tag) {
    return fail(ORDO_ERR_INVALID_HANDLE,
                "var handle 0x%016" PRIx64 " was not issued by this engine (foreign or made up)",
                h);
  }
  VarSlot* slot = b.gen ? table.find(b.index) : nullptr;
  if (!slot) {
    return fail(ORDO_ERR_INVALID_HANDLE,
                "var handle 0x%016" PRIx64 " names no variable of this engine (made up)", h);
  }
  __builtin_prefetch(slot, 1);  // locked shortly: overlap the likely cross-core miss
  data()[size_++] = VarRef{slot, b.index, b.gen, h, write};
  return ORDO_OK;
}

void VarRefs::sort_and_merge() {
  if (size_ < 2) return;  // the common single-var op: nothing to order or merge
  VarRef* r = data();
  auto by_index = [](const VarRef& a, const VarRef& b) { return a.index < b.index; };
  if (size_ <= kInline) {
    for (size_t i = 1; i < size_; ++i) {  // insertion sort: lists are short
      VarRef x = r[i];
      size_t j = i;
      for (; j > 0 && by_index(x, r[j - 1]); --j) r[j] = r[j - 1];
      r[j] = x;
    }
  } else {
    std::sort(r, r + size_, by_index);
  }
  size_t out = 0;
  for (size_t i = 0; i < size_; ++i) {
    if (out > 0 && r[out - 1].slot == r[i].slot && r[out - 1].gen == r[i].gen) {
      r[out - 1].write = r[out - 1].write || r[i].write;
    } else {
      r[out++] = r[i];  // same slot, other generation: one is stale, caught under the lock
    }
  }
  size_ = out;
}

void lock_all(const VarRef* refs, size_t n) {
  VarSlot* last = nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (refs[i].slot != last) refs[i].slot->push_lock.lock();
    last = refs[i].slot;
  }
}

void unlock_all(const VarRef* refs, size_t n) {
  VarSlot* last = nullptr;
  for (size_t i = n; i-- > 0;) {
    if (refs[i].slot != last) refs[i].slot->push_lock.unlock();
    last = refs[i].slot;
  }
}

}  // namespace ordo
