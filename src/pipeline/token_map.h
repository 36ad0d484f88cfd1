// TokenMap: a hash map from token ids (any uint64_t, UINT64_MAX included) to a small value, for
// the deferral bookkeeping of a pipeline's first pipe. Open addressing with linear probing and
// backward-shift deletion (no tombstones), so that a run which defers and resolves tokens
// forever reuses the same slots: after the table has grown to the most tokens ever deferred at
// once, inserting and erasing allocate nothing (std::unordered_map allocates a node per insert).
// Not thread-safe: only pipe-0 steps, which never overlap, touch it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ordo {

template <class V>
class TokenMap {
 public:
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

  V* find(uint64_t key) {
    if (count_ == 0) return nullptr;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }

  // The value of `key`, inserted as V{} when absent. Throws std::bad_alloc when the table must
  // grow and cannot (the map is then unchanged).
  V& insert(uint64_t key) {
    if ((count_ + 1) * 4 > slots_.size() * 3) grow();
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = key;
        s.value = V{};
        ++count_;
        return s.value;
      }
      if (s.key == key) return s.value;
    }
  }

  // Removes `key` if present. Later entries of its probe run move back into the hole, so that
  // every entry stays reachable from its home slot without tombstones.
  void erase(uint64_t key) {
    if (count_ == 0) return;
    size_t hole = home(key);
    for (;; hole = (hole + 1) & mask_) {
      if (!slots_[hole].used) return;
      if (slots_[hole].key == key) break;
    }
    for (size_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
      Slot& s = slots_[j];
      if (!s.used) break;
      const size_t h = home(s.key);
      // s may fill the hole only if its home is not in (hole, j] (cyclically).
      const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (stays) continue;
      slots_[hole] = s;
      hole = j;
    }
    slots_[hole].used = false;
    --count_;
  }

  // Calls f(key, value) for every entry, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    if (count_ == 0) return;
    for (const Slot& s : slots_) {
      if (s.used) f(s.key, s.value);
    }
  }

  // Empties the map; keeps its capacity.
  void clear() {
    if (count_ == 0) return;
    for (Slot& s : slots_) s.used = false;
    count_ = 0;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    V value{};
    bool used = false;
  };

  size_t home(uint64_t key) const {
    // splitmix64's finalizer: consecutive ids (the common case) spread over the table.
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return static_cast<size_t>(key) & mask_;
  }

  void grow() {
    std::vector<Slot> old(slots_.empty() ? 16 : slots_.size() * 2);  // may throw: nothing changed
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    count_ = 0;
    for (const Slot& s : old) {
      if (s.used) insert(s.key) = s.value;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

}  // namespace ordo
