// The submission window (ordo_engine_config.max_pending) and pushing threads that run ops
// (ORDO_ENGINE_FLAG_PUSHERS_HELP, and every op without a group, which runs inside its push). The
// piece every push of an op without a group runs, run_inline_on_pusher, is in push_resolved.h,
// inlined into both instances of the push.
//
// A pusher far ahead of the workers fills memory with op blocks that have gone cold by the time
// they run, and on a machine with more threads than cores it takes CPU from the workers; waiting
// at the window fixes both. The wait is bounded (PendingCounts::wait_for_window), so a pusher
// that must itself complete pending work is slowed, never stopped.
#include <algorithm>

#include "engine/push_path.h"
#include "engine/thread_state.h"

namespace ordo {

namespace {
// Completions a helping pusher runs between two looks at the pending count.
constexpr uint32_t kHelpCheckEvery = 64;
}  // namespace

// Applies the window every throttle_check_every_ pushes of a lane. Threads that found every lane
// taken share one lane (and its count of pushes), but never help: a helper counts completions on
// a lane of its own; a full window makes them wait like any pusher.
void PushPath::check_throttle(PushLane* lane, bool shared) {
  if (max_pending_ <= 0 || this_thread::busy_with(host_)) return;
  const int64_t pending = counts_.user_pending_now();
  if (shared) {
    if (pending > max_pending_) counts_.wait_for_window();
    return;
  }
  if (pushers_help_) {
    if (pending > max_pending_) {
      lane->runs_ready_ops = true;
    } else if (pending < counts_.throttle_low()) {
      lane->runs_ready_ops = false;
    }
  }
  if (pending > max_pending_) throttle(lane);  // "more than max_pending", as documented
}

void PushPath::throttle(PushLane* lane) {
  if (pushers_help_ && !this_thread::on_an_op_stack() && help_while_throttled(lane)) return;
  counts_.wait_for_window();
}

// Runs `run` (which executes ops) as a helper on this pushing thread: meanwhile finalize counts
// the completions on `lane` and returns the blocks to its magazine, as a worker's go to its own
// (OpRunner::completion_site), so helping costs no shared atomic per op. What was completed is
// announced at the end: this thread may not push again, and a waiter must not miss the last op.
// Never nested: helping starts only from a push made outside any op (check_throttle,
// run_on_pusher; an inline op's push helps the same way in OpRunner::run_inline_helping), and a
// helped op runs inside one.
template <class F>
void PushPath::as_helper(PushLane* lane, F&& run) {
  this_thread::Helper helper{host_, lane, 0};
  this_thread::Helper* const outer = this_thread::helper;
  this_thread::helper = &helper;
  try {
    run();
  } catch (...) {
    // A callback ended the thread (a forced unwind, the only exception that gets out of an op's
    // run): its completions must still be announced.
    this_thread::helper = outer;
    counts_.announce_batch(&helper.unflushed);
    throw;
  }
  this_thread::helper = outer;
  counts_.announce_batch(&helper.unflushed);
}

// A throttled pusher runs ready ops of the normal CPU group itself instead of sleeping while the
// workers catch up, as an OpenMP thread runs tasks once too many are queued. The ops it pushed
// are still in its core's cache, and the CPU it would have given up does the work. True when the
// pending count fell to the window's low mark; false when nothing was ready to run (the caller
// then waits as usual).
bool PushPath::help_while_throttled(PushLane* lane) {
  WorkerGroup* group = devices_.cpu_group();
  if (!group) return false;
  const size_t ring_hint = counts_.lane_index(lane);
  const int64_t low = counts_.throttle_low();
  // Looks at the count as often as a pusher does (max_pending / 8), so that a small window is
  // not run down far below its half; at most every kHelpCheckEvery ops, as the look sums lanes.
  const int64_t check_every = std::min<int64_t>(throttle_check_every_, kHelpCheckEvery);
  bool done = false;
  as_helper(lane, [&] {
    for (int64_t n = 0;; ++n) {
      if (n % check_every == 0 && counts_.user_pending_now() <= low) {
        done = true;
        return;
      }
      OpBlock* op = group->take_ready(ring_hint);
      if (!op) return;
      runner_.execute(op, nullptr);
    }
  });
  return done;
}

// While the lane is over the window: an op that was ready at push runs here, on the pushing
// thread, instead of crossing a ready ring to a worker (what libgomp does with a task once too
// many are queued). Only plain ops (normal CPU property, priority 0) of the normal CPU group,
// never an inline op (the naive kind: it has its own queue, which keeps an op pushed from an op
// after it), and never from inside an op (its pushes would recurse). False: dispatch it as usual.
bool PushPath::run_on_pusher(OpBlock* op, PushLane* lane) {
  if (!op->group || op->group != devices_.cpu_group() || op->prop != ORDO_PROP_NORMAL ||
      op->priority != 0 || this_thread::on_an_op_stack()) {
    return false;
  }
  as_helper(lane, [&] { runner_.execute(op, nullptr); });
  return true;
}

}  // namespace ordo
