#include "core/var_refs.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "base/last_error.h"

namespace ordo {

ordo_status VarRefs::bad_handle(uint32_t engine_tag, ordo_var h) {
  if (h == 0) return fail(ORDO_ERR_INVALID_HANDLE, "var handle 0 is never a valid variable");
  if (ordo_status s = check_handle_kind(h, HandleKind::kVar)) return s;
  HandleBits b = HandleBits::decode(h);
  if (b.tag != engine_tag) {
    return fail(ORDO_ERR_INVALID_HANDLE,
                "var handle 0x%016" PRIx64 " was not issued by this engine (foreign or made up)",
                h);
  }
  // Generation 0, or an index beyond every chunk: never issued.
  return fail(ORDO_ERR_INVALID_HANDLE,
              "var handle 0x%016" PRIx64 " names no variable of this engine (made up)", h);
}

namespace {

// Orders a and b by slot address without a branch: var lists come in random order, and a
// mispredicted compare costs more than the whole swap.
inline void order_pair(VarRef& a, VarRef& b) {
  static_assert(sizeof(VarRef) == 16, "a VarRef swaps as two words");
  uint64_t aw[2], bw[2];
  std::memcpy(aw, &a, sizeof aw);
  std::memcpy(bw, &b, sizeof bw);
  // All ones when b's slot comes first: the words are exchanged by masks, not a branch.
  uint64_t mask = uint64_t{0} - static_cast<uint64_t>(bw[0] < aw[0]);
  uint64_t d0 = (aw[0] ^ bw[0]) & mask;
  uint64_t d1 = (aw[1] ^ bw[1]) & mask;
  aw[0] ^= d0;
  bw[0] ^= d0;
  aw[1] ^= d1;
  bw[1] ^= d1;
  std::memcpy(&a, aw, sizeof aw);
  std::memcpy(&b, bw, sizeof bw);
}

}  // namespace

void sort_by_slot(VarRef* r, size_t n) {
  auto before = [](const VarRef& a, const VarRef& b) { return a.slot < b.slot; };
  if (n <= 4) {  // sorting networks for the common short lists
    if (n == 4) {
      order_pair(r[0], r[1]);
      order_pair(r[2], r[3]);
      order_pair(r[0], r[2]);
      order_pair(r[1], r[3]);
      order_pair(r[1], r[2]);
    } else if (n >= 2) {
      order_pair(r[0], r[1]);
      if (n == 3) {
        order_pair(r[1], r[2]);
        order_pair(r[0], r[1]);
      }
    }
  } else if (n <= VarRefs::kInline) {
    for (size_t i = 1; i < n; ++i) {  // insertion sort: lists are short
      VarRef x = r[i];
      size_t j = i;
      for (; j > 0 && before(x, r[j - 1]); --j) r[j] = r[j - 1];
      r[j] = x;
    }
  } else {
    std::sort(r, r + n, before);
  }
}

ordo_status VarRefs::sort_and_merge() {
  VarRef* r = data_;
  sort_by_slot(r, size_);
  // Lists rarely name a var twice: merging starts at the first repeated slot, if any.
  size_t out = 1;
  while (out < size_ && r[out].slot != r[out - 1].slot) ++out;
  for (size_t i = out; i < size_; ++i) {
    if (r[out - 1].slot == r[i].slot && r[out - 1].gen == r[i].gen) {
      r[out - 1].access |= r[i].access;  // a write in either makes it a write
    } else {
      r[out++] = r[i];  // same slot, other generation: one is stale, caught under the lock
    }
  }
  size_ = out;
  if (size_ > OpBlock::kMaxLinks) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "an op uses %zu distinct vars; at most %u are allowed",
                size_, OpBlock::kMaxLinks);
  }
  return ORDO_OK;
}

ordo_status stale_var(uint32_t engine_tag, const VarRef& r) {
  uint64_t handle = HandleBits::encode(engine_tag, HandleKind::kVar, r.gen, r.slot->index);
  // A slot's generation only grows (a delete bumps it; 0 = retired after the last one), and the
  // generation a free slot is at has never been handed out: a handle at or past it is made up.
  const uint32_t now = r.slot->gen;
  if (now != 0 && r.gen >= now) {
    return fail(ORDO_ERR_INVALID_HANDLE,
                "var handle 0x%016" PRIx64 " names no variable of this engine (made up)", handle);
  }
  return fail(ORDO_ERR_INVALID_HANDLE,
              "var handle 0x%016" PRIx64 " is stale: the variable was deleted", handle);
}

namespace {
void lock_in_order(const VarRef* refs, size_t n) {
  VarSlot* last = nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (refs[i].slot != last) refs[i].slot->push_lock.lock();
    last = refs[i].slot;
  }
}
}  // namespace

void lock_several(const VarRef* refs, size_t n) {
  size_t taken = 0;
  VarSlot* last = nullptr;
  for (; taken < n; ++taken) {  // a slot listed twice (other generations) sits next to itself
    if (refs[taken].slot != last && !refs[taken].slot->push_lock.try_lock()) break;
    last = refs[taken].slot;
  }
  if (taken == n) return;
  unlock_all(refs, taken);  // contended: let go, then wait for each lock in address order
  if (n > VarRefs::kUnsortedMax) {
    lock_in_order(refs, n);  // longer lists are sorted already
    return;
  }
  // A copy: the refs may be a prepared op's, which other threads push at the same time.
  VarRef sorted[VarRefs::kUnsortedMax];
  std::copy(refs, refs + n, sorted);
  sort_by_slot(sorted, n);
  lock_in_order(sorted, n);
}

void unlock_all(const VarRef* refs, size_t n) {
  VarSlot* last = nullptr;
  for (size_t i = n; i-- > 0;) {
    if (refs[i].slot != last) refs[i].slot->push_lock.unlock();
    last = refs[i].slot;
  }
}

}  // namespace ordo
