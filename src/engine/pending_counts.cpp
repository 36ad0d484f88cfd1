#include "engine/pending_counts.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include "engine/timeouts.h"

namespace ordo {

namespace {
constexpr uint32_t kExternalLanes = 64;

int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

PendingCounts::PendingCounts(uint32_t worker_lanes, int32_t max_pending)
    : max_pending_(max_pending),
      num_lanes_(worker_lanes + kExternalLanes),
      first_external_lane_(worker_lanes) {
  lanes_.reset(new PushLane[num_lanes_]);
  lanes_used_.store(first_external_lane_, std::memory_order_relaxed);
}

PushLane* PendingCounts::claim_external_lane(uint64_t token) {
  for (uint32_t i = first_external_lane_; i < num_lanes_; ++i) {
    uint64_t free = 0;
    if (lanes_[i].owner.load(std::memory_order_relaxed) == 0 &&
        lanes_[i].owner.compare_exchange_strong(free, token, std::memory_order_acquire)) {
      lanes_[i].runs_ready_ops = false;  // the last owner's throttle state is not this thread's
      uint32_t used = lanes_used_.load(std::memory_order_relaxed);
      while (used < i + 1 &&
             !lanes_used_.compare_exchange_weak(used, i + 1, std::memory_order_release)) {
      }
      return &lanes_[i];
    }
  }
  return nullptr;
}

PushLane* PendingCounts::claim_worker_lane() {
  const uint32_t i = next_worker_lane_.fetch_add(1, std::memory_order_relaxed);
  return i < first_external_lane_ ? &lanes_[i] : nullptr;
}

void PendingCounts::push_backed_out() {
  // A waiter (destroy's drain, ordo_wait_for_all) may have added up the counts while the push
  // was counted, seen it pending, and gone to sleep: nothing else would wake it. The fence
  // orders the uncount before announce_completions() looks for waiters.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  announce_completions();
}

// Every op counted as completed was counted by its lane as pushed before, so reading the
// completions first and the pushes second never undercounts what is pending.
int64_t PendingCounts::completed_now() const {
  int64_t done = completed_.load(std::memory_order_seq_cst);
  const uint32_t n = lanes_in_use();
  for (uint32_t i = 0; i < n; ++i)  // workers' lanes, and those of helping pushers
    done += lanes_[i].completed.load(std::memory_order_acquire);
  return done;
}

int64_t PendingCounts::pushed_now() const {
  int64_t pushed = shared_lane_.pushed.load(std::memory_order_acquire);
  const uint32_t n = lanes_in_use();
  for (uint32_t i = 0; i < n; ++i) pushed += lanes_[i].pushed.load(std::memory_order_acquire);
  return pushed;
}

int64_t PendingCounts::pending_now() const {
  const int64_t done = completed_now();
  return pushed_now() - done;
}

// Internal ops (var deletes, clear_error, waits' marks, and a timed-out wait's mark left behind
// an op that has not finished) are not the caller's pushes and hold no push back. The three
// counts are read one after another, so an internal op pushed or completed meanwhile can make
// the result off by the few internal ops in flight (never below 0): the throttle only compares
// it with half a window.
int64_t PendingCounts::user_pending_now() const {
  const int64_t internal_done = internal_completed_.load(std::memory_order_seq_cst);
  const int64_t pending = pending_now();
  const int64_t internal_pushed = internal_pushed_.load(std::memory_order_seq_cst);
  return std::max<int64_t>(0, pending - (internal_pushed - internal_done));
}

void PendingCounts::user_totals(int64_t* pushed, int64_t* completed) const {
  // Completions first: every op they count was pushed before, so pending is never negative.
  // A push rejected after its lane counted it is counted as completed too; neither shows it.
  const int64_t rejected = rejected_.load(std::memory_order_seq_cst);
  int64_t done = completed_now() - internal_completed_.load(std::memory_order_seq_cst) - rejected +
                 bulk_completed_.load(std::memory_order_seq_cst);
  int64_t in = pushed_now() - internal_pushed_.load(std::memory_order_seq_cst) - rejected +
               bulk_pushed_.load(std::memory_order_seq_cst);
  if (done < 0) done = 0;
  if (in < done) in = done;  // a snapshot taken while an internal op was in flight
  *pushed = in;
  *completed = done;
}

void PendingCounts::add_completed(int64_t n) {
  completed_.fetch_add(n, std::memory_order_seq_cst);
  announce_completions();
}

// Wakes a waiter only once what it waits for holds: a throttled pusher waits for half the
// window to drain, and a wait for all work for nothing to be pending. Waking it on every batch
// instead cost a futex wake on a worker and a futex wait on the pusher per batch (see
// docs/PERFORMANCE.md, "Throttle wake-ups"). Adding up the lanes' counts costs a few hundred
// cycles, paid only while someone waits. A crossing this check misses is not lost: the
// completion that made it is announced later by its own worker (every batch, and when it runs
// out of work), after a fence, and that announcement sees it.
void PendingCounts::announce_completions() {
  const bool throttled = throttle_wake_.has_waiters();
  const bool idle_waited = idle_waiters_.load(std::memory_order_seq_cst) != 0;
  if (!throttled && !idle_waited) return;
  // Every announcer stored its count before coming here; with a fence between that store and
  // these loads on each side, of two announcers racing on the last completions at least one
  // sees both counts, so the wake that makes a waiter's condition true is never skipped.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (throttled && user_pending_now() <= throttle_low()) throttle_wake_.notify_all();
  if (idle_waited && pending_now() == 0) {
    std::lock_guard<std::mutex> g(idle_mutex_);
    idle_cv_.notify_all();
  }
}

// Sleeps until at most throttle_low() of the caller's ops are pending, or until the pending
// count has not fallen for a while (ThrottlePace's limit: 1 ms to 100 ms, adapted at each
// give-up). While it falls the pusher keeps waiting, so ops slower than the pusher cannot grow
// the window without bound; when it stalls, an op may be waiting for this very thread to do
// something after its push, so the wait gives up rather than deadlock. (It is the count that
// must fall, not merely ops that complete: ops other threads keep pushing and completing would
// otherwise hold this pusher for as long as they come.)
void PendingCounts::wait_for_window() {
  const int64_t low = throttle_low();
  int64_t now = monotonic_ns();
  int64_t deadline = now + pace_.stall_ns();
  int64_t pending_before = INT64_MAX;
  for (;;) {
    uint32_t key = throttle_wake_.prepare_wait();
    std::atomic_thread_fence(std::memory_order_seq_cst);  // as in wait_idle
    const int64_t pending = user_pending_now();
    if (pending <= low) {
      throttle_wake_.cancel_wait();
      return;
    }
    if (pending_before == INT64_MAX) pending_before = pending;
    now = monotonic_ns();
    if (now >= deadline) {
      if (pending >= pending_before) {
        throttle_wake_.cancel_wait();
        pace_.gave_up(now, completed_now());
        return;
      }
      pending_before = pending;
      deadline = now + pace_.stall_ns();
    }
    throttle_wake_.wait_for(key, static_cast<uint64_t>(deadline - now));
  }
}

ordo_status PendingCounts::wait_idle(const uint64_t* timeout_ns) {
  timeout_ns = finite_or_null(timeout_ns);
  if (timeout_ns && *timeout_ns == 0) {  // a poll: look, never sleep (no futex, no timer)
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (pending_now() != 0) return ORDO_ERR_TIMEOUT;
    wait_for_releases();
    return ORDO_OK;
  }
  idle_waiters_.fetch_add(1, std::memory_order_seq_cst);
  // The waiter's half of a store-buffering handshake with announce_batch (completion count
  // stored, fence, idle_waiters_ loaded): the lane counts are read with acquire loads, which
  // alone may be ordered before the RMW above by the C++ model.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bool idle;
  {
    std::unique_lock<std::mutex> lock(idle_mutex_);
    auto is_idle = [this] { return pending_now() == 0; };
    if (timeout_ns) {
      idle = idle_cv_.wait_for(lock, std::chrono::nanoseconds(*timeout_ns), is_idle);
    } else {
      idle_cv_.wait(lock, is_idle);
      idle = true;
    }
  }
  idle_waiters_.fetch_sub(1, std::memory_order_relaxed);
  if (!idle) return ORDO_ERR_TIMEOUT;
  wait_for_releases();
  return ORDO_OK;
}

// Ops are counted as completed just before their vars are released (OpRunner::finalize): once
// nothing is pending, the last releases are at most a few hundred instructions away.
void PendingCounts::wait_for_releases() const {
  const uint32_t n = lanes_in_use();
  for (uint32_t i = 0; i < n; ++i) {  // workers' lanes, and those of helping pushers
    while (lanes_[i].releasing.load(std::memory_order_acquire) != 0) sched_yield();
  }
  while (external_releasing_.load(std::memory_order_acquire) != 0) sched_yield();
}

}  // namespace ordo
