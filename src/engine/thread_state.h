// What the calling thread is doing for the engines, kept in thread-locals in one place so that
// every part of the engine asks the same questions the same way: which worker it is, whose
// callback is on its stack (and the exec token that callback was given), which engines' ops are
// on its stack, and which engine it helps as a pushing thread that runs ops.
#pragma once

#include <cstdint>

#include "base/hot_tls.h"
#include "core/exec_token.h"

namespace ordo {

class WorkerHost;
struct OpBlock;
struct PushLane;
struct Worker;

namespace this_thread {

// The worker this thread is (nullptr on other threads).
extern ORDO_HOT_TLS_SHARED Worker* worker;

// The op whose callback is on this thread's stack, and the exec token that callback was given
// (an exec is valid only while it is that token: core/exec_token.h).
struct RunningCallback {
  OpBlock* op;
  uint64_t token;
};
extern ORDO_HOT_TLS_SHARED RunningCallback running;
extern ORDO_HOT_TLS_SHARED ExecTokens exec_tokens;

// Engines (by their WorkerHost) whose ops or free_fns are on this thread's stack: blocking on
// one of them from here could mean waiting for ourselves. Deeper than kBusyMax, the frames not
// recorded count as every engine's (busy_with says yes).
constexpr int kBusyMax = 8;
extern ORDO_HOT_TLS_SHARED const WorkerHost* busy[kBusyMax];
extern ORDO_HOT_TLS_SHARED int busy_depth;

// Marks `engine` busy on this thread for the scope. `self`: the thread's worker of that engine,
// if the scope runs on one; a worker needs no entry, since busy_with() and on_an_op_stack()
// know its engine by the worker (saves each op a worker runs the push and pop: about 12
// instructions, callgrind).
class BusyScope {
 public:
  explicit BusyScope(const WorkerHost* engine, const Worker* self = nullptr)
      : entered_(self == nullptr) {
    if (entered_) {
      if (busy_depth < kBusyMax) busy[busy_depth] = engine;
      ++busy_depth;
    }
  }
  ~BusyScope() {
    if (entered_) --busy_depth;
  }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  const bool entered_;
};

// BusyScope on a thread known to be outside every op (on_an_op_stack() is false, so
// busy_depth is 0): the first frame, without the bound test (PushPath's inline run of a pushed
// op, OpRunner::run_inline_helping).
class OutermostBusyScope {
 public:
  explicit OutermostBusyScope(const WorkerHost* engine) {
    busy[0] = engine;
    busy_depth = 1;
  }
  ~OutermostBusyScope() { busy_depth = 0; }
  OutermostBusyScope(const OutermostBusyScope&) = delete;
  OutermostBusyScope& operator=(const OutermostBusyScope&) = delete;
};

// True when an op (or free_fn) of `engine` runs on this thread, or this thread is its worker.
bool busy_with(const WorkerHost* engine);

// Whether an op (or free_fn) of any engine runs on this thread. ORDO_ENGINE_FLAG_PUSHERS_HELP
// runs ops only on a thread that pushes from outside every op: an op of this engine run inside
// another's could wait for what the outer op does after its push returns, and never see it.
inline bool on_an_op_stack() {
  return worker != nullptr || busy_depth > 0;
}

// A pushing thread that runs ops for the workers (ORDO_ENGINE_FLAG_PUSHERS_HELP, see
// PushPath::as_helper): its completions are counted on its lane, as a worker's are.
struct Helper {
  const WorkerHost* engine;
  PushLane* lane;
  uint32_t unflushed;  // completions not yet announced to waiters (PendingCounts::announce_batch)
};
extern ORDO_HOT_TLS_SHARED Helper* helper;

}  // namespace this_thread

// The op whose callback runs on this thread when `exec` is the exec that callback was given
// (nullptr for any other exec: a kept one, another thread's, a made-up one); and the worker this
// thread is (nullptr when none).
OpBlock* op_of_exec(const ordo_exec* exec);
inline Worker* running_worker() {
  return this_thread::worker;
}

}  // namespace ordo
