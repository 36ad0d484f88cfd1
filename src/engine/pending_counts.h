// PendingCounts: how many ops are pending, and the waits that hang on that number: waits for all
// work (ordo_wait_for_all, destroy's drain) and a throttled pusher's wait for the window to fall.
//
// Pending ops = every lane's pushes - (completed_ + the lanes' completions). A lane is written by
// one thread (a worker, or a pushing thread that claimed it: core/push_lane.h), so neither a push
// nor a worker's completion costs an atomic read-modify-write; a wait adds the lanes up,
// completions first. completed_ counts the completions of threads without a lane of their own.
// Completions are counted as they happen; telling waiters about them is batched
// (announce_batch), and a waiter is woken only once what it waits for holds.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "base/event_count.h"
#include "base/spin_lock.h"
#include "core/push_lane.h"
#include "engine/throttle_pace.h"
#include "ordo/ordo.h"

namespace ordo {

// Where a thread that finishes an op counts it and returns its block (OpRunner::completion_site).
struct CompletionSite {
  PushLane* lane;       // nullptr: the shared completion counter
  uint32_t* unflushed;  // with `lane`: completions not yet announced to waiters
  OpCache* cache;       // nullptr: the pool's locked shards
};

class PendingCounts {
 public:
  // `worker_lanes`: one lane per worker thread the config asks for; `max_pending`: the window.
  PendingCounts(uint32_t worker_lanes, int32_t max_pending);
  PendingCounts(const PendingCounts&) = delete;
  PendingCounts& operator=(const PendingCounts&) = delete;

  // --- lanes ---
  // A free lane for a thread that is not a worker (see push_lane.h), or nullptr.
  PushLane* claim_external_lane(uint64_t token);
  // The next worker's lane, or nullptr when more workers started than the config counted.
  PushLane* claim_worker_lane();
  // A lane's position: it picks the ready ring a lane's pushes go to.
  size_t lane_index(const PushLane* lane) const { return static_cast<size_t>(lane - lanes_.get()); }
  // For threads that found every lane taken: one lane behind a spin lock.
  PushLane* lock_shared_lane() {
    shared_lane_lock_.lock();
    return &shared_lane_;
  }
  void unlock_shared_lane() { shared_lane_lock_.unlock(); }

  // --- counting ---
  // One op finished at `at` (a worker's or helper's lane, else the shared counter).
  void note_completed(const CompletionSite& at) {
    if (!at.lane) {
      add_completed(1);
      return;
    }
    at.lane->count_completion();
    if (++*at.unflushed >= 64) announce_batch(at.unflushed);
  }
  void add_completed(int64_t n);
  // A push that counted itself and then backed out (shutdown, no memory): its lane's count is
  // back, and a waiter that saw it pending must be told.
  void push_backed_out();
  // Tells waiters about the completions a lane counted since the last time (`*unflushed`).
  // Inline up to the look for waiters: a pusher that runs its ops inline (the naive engine)
  // announces after every push, and with nobody waiting that is a fence and two loads.
  void announce_batch(uint32_t* unflushed) {
    if (*unflushed == 0) return;
    *unflushed = 0;
    announce_lane();
  }
  // The lane owner's half of the handshake with a waiter: its counts were stored, then it looks
  // for waiters; a waiter registers, then reads the counts (one of the two sees the other).
  // announce_batch's end; called alone by a pusher that counted an op it ran inline without
  // `unflushed` (OpRunner::run_inline_helping).
  void announce_lane() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (throttle_wake_.has_waiters() || idle_waiters_.load(std::memory_order_seq_cst) != 0) {
      announce_completions();
    }
  }
  // The span between counting an op completed and releasing its vars, which waits for all work
  // wait out (wait_for_releases): a worker or a helping pusher marks it on its lane, other
  // threads on a shared count.
  void begin_release(PushLane* lane) {
    if (lane) {
      lane->releasing.store(1, std::memory_order_relaxed);
    } else {
      external_releasing_.fetch_add(1, std::memory_order_seq_cst);
    }
  }
  void end_release(PushLane* lane) {
    if (lane) {
      lane->releasing.store(0, std::memory_order_release);
    } else {
      external_releasing_.fetch_sub(1, std::memory_order_release);
    }
  }
  // Internal ops (var deletes, clear_error, wait marks) are pushed and completed like the
  // caller's but are not the caller's: the window and ordo_engine_stats leave them out.
  void count_internal_push() { internal_pushed_.fetch_add(1, std::memory_order_relaxed); }
  void uncount_internal_push() { internal_pushed_.fetch_sub(1, std::memory_order_relaxed); }
  void count_internal_completion() { internal_completed_.fetch_add(1, std::memory_order_relaxed); }
  // A graph launch's chain op (engine/bulk_chain.h) is one push and one completion standing for
  // `n` + 1 of the caller's ops: ordo_engine_stats counts the n others here (the window and the
  // waits count the op as one).
  void count_bulk_pushed(int64_t n) { bulk_pushed_.fetch_add(n, std::memory_order_seq_cst); }
  void count_bulk_completed(int64_t n) { bulk_completed_.fetch_add(n, std::memory_order_seq_cst); }
  // A push refused after its lane counted it (a stale var): counted as completed to keep the
  // pending count right, and left out of the caller's numbers.
  void count_rejected() {
    rejected_.fetch_add(1, std::memory_order_relaxed);  // before: stats never see it completed
    add_completed(1);
  }

  // --- reading ---
  int64_t completed_now() const;
  int64_t pending_now() const;
  // The caller's ops among those pending: what the window (max_pending) counts.
  int64_t user_pending_now() const;
  // The caller's ops pushed and completed (ordo_engine_stats), pending = pushed - completed >= 0.
  void user_totals(int64_t* pushed, int64_t* completed) const;

  // --- waits ---
  // Waits until nothing is pending (timeout_ns nullptr: no limit; 0: a poll). ORDO_ERR_TIMEOUT
  // when the time ran out; sets no message.
  ordo_status wait_idle(const uint64_t* timeout_ns);
  // A throttled pusher: sleeps until at most throttle_low() of the caller's ops are pending, or
  // the count stops falling for a while (ThrottlePace).
  void wait_for_window();
  int64_t throttle_low() const { return max_pending_ / 2; }

 private:
  uint32_t lanes_in_use() const { return lanes_used_.load(std::memory_order_acquire); }
  int64_t pushed_now() const;
  void announce_completions();
  void wait_for_releases() const;

  const int64_t max_pending_;
  std::unique_ptr<PushLane[]> lanes_;
  uint32_t num_lanes_ = 0;
  uint32_t first_external_lane_ = 0;  // lanes below this belong to workers
  // Lanes [0, lanes_used_) have had an owner; every count of the others is still 0, so the sums
  // stop there (a pushing thread raises it, release, before its first count on a new lane).
  std::atomic<uint32_t> lanes_used_{0};
  std::atomic<uint32_t> next_worker_lane_{0};
  SpinLock shared_lane_lock_;
  PushLane shared_lane_;
  alignas(64) std::atomic<int64_t> completed_{0};
  alignas(64) std::atomic<int32_t> idle_waiters_{0};
  // Threads that are not workers releasing the vars of an op already counted as completed.
  std::atomic<int32_t> external_releasing_{0};
  EventCount throttle_wake_;  // pushers waiting for pending ops to fall to throttle_low()
  ThrottlePace pace_;         // how long a throttled pusher waits for the count to fall
  std::mutex idle_mutex_;
  std::condition_variable idle_cv_;
  std::atomic<int64_t> internal_pushed_{0};
  std::atomic<int64_t> internal_completed_{0};
  std::atomic<int64_t> rejected_{0};
  alignas(64) std::atomic<int64_t> bulk_pushed_{0};
  std::atomic<int64_t> bulk_completed_{0};
};

}  // namespace ordo
