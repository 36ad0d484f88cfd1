// BulkBundle: a graph launch's independent ops pushed as ONE engine op (OpKind::kBundle, the
// "carrier") instead of one op each, and run by the workers together (issue #26, workload A and
// E). The layer that launches (src/graph/) picks the members once, when the capture ends: captured
// ops of one var whose var no earlier op of the graph uses, plain CPU ops of one worker group at
// priority 0, not in a chain. At each launch, a member whose var would grant it now arrives on
// the var with a link in this launch's BundleRun (three to a cache line, no pool block);
// the others are pushed the ordinary way. The launch publishes members as they join and queues
// the carrier (once at a time); workers claim members in chunks and run them
// (OpRunner::run_bundle, engine/bundle_runner.cpp) while the launch joins the next ones.
//
// What each member keeps of an op of its own (docs/ARCHITECTURE.md section 10, the four
// constraints): it starts once its own var is granted (it only joins when granted at arrival);
// its var is released when it finishes, not when the bundle does; members run at the same time
// on every idle worker (a claimed chunk is a slice other workers steal from, so one member that
// waits for another never holds it up while a worker is idle); and each member has its own exec
// token, deferral and completion handle, name, trace record, error and skip (it runs under a
// pool block borrowed by the worker, which a member that defers keeps until it completes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/op_block.h"
#include "core/var_refs.h"
#include "core/var_slot.h"
#include "ordo/ordo.h"

namespace ordo {

// What a member runs (fixed when the capture ends).
struct BundleMember {
  ordo_fn fn;
  void* user_data;
  const char* name;  // nullptr: none
};

// A bundle's block that no push fills (the carrier, the block a member runs under): a plain CPU
// op of `group` at priority 0, with no links of its own and no callback of its own yet.
inline void set_bundle_block(OpBlock* b, OpKind kind, void* internal, WorkerGroup* group) {
  b->fn = nullptr;
  b->user_data = nullptr;
  b->free_fn = nullptr;
  b->group = group;
  b->internal = internal;
  b->priority = 0;
  b->num_links = 0;
  b->prop = ORDO_PROP_NORMAL;
  b->kind = kind;
  b->device_type = ORDO_DEVICE_CPU;
  b->device_id = 0;
  b->deferred = false;
  b->has_name = false;
  b->wait.store(0, std::memory_order_relaxed);
}

// How a member's arrival went (join_member).
enum class Join { kJoined, kBusy, kStale };

// One launch's bundle while it runs. Made by the graph and reused by its later launches once the
// carrier has finished (`retire`); nothing here is allocated per launch.
class BundleRun {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr int64_t kJoining = int64_t{1} << 40;

  // `capacity`: the graph's members; `workers`: the group's threads (one slice each).
  // Throws std::bad_alloc.
  BundleRun(uint32_t capacity, uint32_t workers)
      : lines_(new LinkLine[(capacity + LinkLine::kLinks - 1) / LinkLine::kLinks]),
        which_(new uint32_t[capacity]),
        busy_(new uint32_t[capacity]),
        slices_(new Slice[workers]),
        workers_(workers),
        chunk_(chunk_for(capacity, workers)) {}

  // --- what the graph sets once ---
  const BundleMember* members = nullptr;
  OpHook* hook = nullptr;                // told as each member finishes (before its release)
  void (*retire)(BundleRun*) = nullptr;  // the carrier has finished: the run is free again
  void* owner = nullptr;                 // retire's
  BundleRun* next_free = nullptr;        // the owner's free list

  // --- the launch ---
  // The link of the k-th member to join (it sits in the var's state while the member runs),
  // three to a line whose `op` is the carrier, as an op block's links are; and which of the
  // graph's members it is.
  VarLink& link(uint32_t k) { return lines_[k / LinkLine::kLinks].link[k % LinkLine::kLinks]; }
  LinkLine& line_of(uint32_t k) { return lines_[k / LinkLine::kLinks]; }
  uint32_t& which(uint32_t k) { return which_[k]; }
  // Members that could not join (their var would not grant them now), pushed after the join.
  uint32_t& busy(uint32_t k) { return busy_[k]; }
  // Before the carrier is made: no member to claim yet. References: the launching thread's, and
  // kJoining while members still join, so that no drop finishes the carrier before they have.
  void begin() {
    count_ = 0;
    published_.store(0, std::memory_order_relaxed);
    cursor_.store(0, std::memory_order_relaxed);
    for (uint32_t w = 0; w < workers_; ++w) slices_[w].range.store(0, std::memory_order_relaxed);
    posted_.store(false, std::memory_order_relaxed);
    refs_.store(kJoining + 1, std::memory_order_relaxed);
  }
  // The first n members joined may be claimed (their lines are written): the workers start on
  // them while the launch joins the next ones.
  void publish(uint32_t n) { published_.store(n, std::memory_order_release); }
  // Joining has ended with `count` members, all published; each holds a reference until it
  // finishes.
  void end_join(uint32_t count) {
    count_ = count;
    publish(count);
    refs_.fetch_sub(kJoining - int64_t{count}, std::memory_order_acq_rel);
  }
  uint32_t count() const { return count_; }
  const BundleMember& member(uint32_t k) const { return members[which_[k]]; }

  // --- the workers ---
  // The carrier left the ready queue: it may be queued again (at most once at a time: a block
  // in a queue's overflow list is linked through its `next`).
  void taken() { posted_.store(false, std::memory_order_release); }
  // Whether the caller should queue the carrier again (it then holds one more reference).
  bool try_post() {
    if (posted_.load(std::memory_order_relaxed) || posted_.exchange(true)) return false;
    refs_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  // The next member for worker `w` (w < 0: a thread that is not one of the group's workers,
  // which takes one member at a time), or kNone when every member has been taken. `more`: some
  // member may still be untaken, so an idle worker could help (the caller then posts).
  uint32_t next(int32_t w, bool* more);
  // Some member is not taken yet.
  bool untaken() const;
  // Drops n references; true for the last one: every member has finished, nobody runs the
  // carrier, and it is in no queue. The caller then finishes the carrier.
  bool drop(int64_t n) { return refs_.fetch_sub(n, std::memory_order_acq_rel) == n; }

 private:
  // A worker's claimed members not yet started, [begin, end): begin in the low half, end in the
  // high half. The owner takes from the front, a thief from the back, both by CAS on the word.
  struct alignas(64) Slice {
    std::atomic<uint64_t> range{0};
  };
  static uint64_t pack(uint32_t begin, uint32_t end) { return (uint64_t{end} << 32) | begin; }
  static uint32_t begin_of(uint64_t r) { return static_cast<uint32_t>(r); }
  static uint32_t end_of(uint64_t r) { return static_cast<uint32_t>(r >> 32); }
  // Members a worker claims at once: big enough that the shared cursor's line moves between
  // cores once per chunk (bench/bundle_floor.c: one at a time cost up to 10x), small enough that
  // a small bundle still spreads over the workers.
  static uint32_t chunk_for(uint32_t count, uint32_t workers) {
    const uint32_t c = count / (4 * (workers ? workers : 1));
    return c < 1 ? 1 : (c > 64 ? 64 : c);
  }
  uint32_t take_own(uint32_t w, bool* more);
  uint32_t steal(int32_t w);

  std::unique_ptr<LinkLine[]> lines_;
  std::unique_ptr<uint32_t[]> which_;
  std::unique_ptr<uint32_t[]> busy_;
  std::unique_ptr<Slice[]> slices_;
  const uint32_t workers_;
  const uint32_t chunk_;
  uint32_t count_ = 0;                              // members joined, once the join has ended
  alignas(64) std::atomic<uint32_t> published_{0};  // members that may be claimed (the launch)
  alignas(64) std::atomic<uint32_t> cursor_{0};     // the first member no worker has claimed
  std::atomic<bool> posted_{false};
  alignas(64) std::atomic<int64_t> refs_{0};
};

inline uint32_t BundleRun::take_own(uint32_t w, bool* more) {
  std::atomic<uint64_t>& r = slices_[w].range;
  uint64_t cur = r.load(std::memory_order_relaxed);
  while (begin_of(cur) < end_of(cur)) {
    if (r.compare_exchange_weak(cur, pack(begin_of(cur) + 1, end_of(cur)),
                                std::memory_order_acq_rel, std::memory_order_relaxed)) {
      *more = begin_of(cur) + 1 < end_of(cur);
      return begin_of(cur);
    }
  }
  return kNone;
}

// Half of another worker's slice (rounded up: a slice of one is taken whole); a thread that is
// not a worker takes one member. Every member in a slice is still unstarted (the owner takes a
// member out of its slice before running it), so any of them may move.
inline uint32_t BundleRun::steal(int32_t w) {
  for (uint32_t i = 1; i <= workers_; ++i) {
    const uint32_t v = (static_cast<uint32_t>(w < 0 ? 0 : w) + i) % workers_;
    if (static_cast<int32_t>(v) == w) continue;
    std::atomic<uint64_t>& r = slices_[v].range;
    uint64_t cur = r.load(std::memory_order_relaxed);
    while (begin_of(cur) < end_of(cur)) {
      const uint32_t b = begin_of(cur), e = end_of(cur);
      const uint32_t cut = w < 0 ? e - 1 : b + (e - b) / 2;
      if (r.compare_exchange_weak(cur, pack(b, cut), std::memory_order_acq_rel,
                                  std::memory_order_relaxed)) {
        // Our slice is empty (we looked), and a thief never writes an empty slice.
        if (w >= 0 && cut + 1 < e) {
          slices_[w].range.store(pack(cut + 1, e), std::memory_order_release);
        }
        return cut;
      }
    }
  }
  return kNone;
}

// `more` is worked out from what the caller just saw (its own slice, the cursor), never by
// reading the other workers' slices, whose lines their owners write for every member: a thief
// says "more" always. What it misses another worker's take saw, and posted.
inline uint32_t BundleRun::next(int32_t w, bool* more) {
  uint32_t k = w >= 0 ? take_own(static_cast<uint32_t>(w), more) : kNone;
  if (k != kNone) {
    if (!*more) {
      *more = cursor_.load(std::memory_order_relaxed) < published_.load(std::memory_order_relaxed);
    }
    return k;
  }
  // Acquire: the lines of the members published are written.
  const uint32_t avail = published_.load(std::memory_order_acquire);
  const uint32_t want = w >= 0 ? chunk_ : 1;
  uint32_t first = cursor_.load(std::memory_order_relaxed);
  while (first < avail) {
    const uint32_t end = avail - first < want ? avail : first + want;
    if (cursor_.compare_exchange_weak(first, end, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      // Our slice is empty (take_own found it so), and a thief never writes an empty slice.
      if (w >= 0 && first + 1 < end) {
        slices_[w].range.store(pack(first + 1, end), std::memory_order_release);
      }
      *more = first + 1 < end || end < avail;
      return first;
    }
  }
  k = steal(w);
  *more = true;
  return k;
}

inline bool BundleRun::untaken() const {
  if (cursor_.load(std::memory_order_relaxed) < published_.load(std::memory_order_relaxed)) {
    return true;
  }
  for (uint32_t v = 0; v < workers_; ++v) {
    const uint64_t r = slices_[v].range.load(std::memory_order_relaxed);
    if (begin_of(r) < end_of(r)) return true;
  }
  return false;
}

// A member arrives on its var (the launch, in capture order) as the run's k-th member: joined,
// and granted, when the var would grant it now; kBusy when it would wait (it is then pushed the
// ordinary way); kStale when the var was deleted since the capture (`*stale` says so, under the
// var's lock).
inline Join join_member(BundleRun* run, uint32_t k, OpBlock* carrier, const VarRef& ref,
                        uint32_t member, uint32_t engine_tag, ordo_status* stale) {
  VarSlot* v = ref.slot;
  SpinGuard g(v->push_lock);
  if (!v->named_by(ref.gen)) {
    *stale = stale_var(engine_tag, ref);
    return Join::kStale;
  }
  if (!v->grants_now((ref.access & VarLink::kWriteBit) != 0)) return Join::kBusy;
  run->line_of(k).op = carrier;
  run->which(k) = member;
  VarLink& l = run->link(k);
  l.set(v, ref.access);
  v->arrive(&l);  // granted: nothing else arrives meanwhile (the push lock)
  return Join::kJoined;
}

}  // namespace ordo
