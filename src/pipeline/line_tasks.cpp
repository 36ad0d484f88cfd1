// Which thread runs which cell of a run. A line task (an op of the engine, user_data the
// Pipeline) takes the oldest runnable cell from the run's stash and runs it, then goes on with
// one of the cells that step made runnable, putting the other in the stash, until its chain
// ends; then it takes another from the stash, and returns when the stash is empty. A line task
// is pushed only when a cell waits in the stash and no line task pushed earlier is still waiting
// to start, so short steps run on the threads already running, with no push per token (a push
// and the pop on another worker cost more than an empty step), while a cell never waits behind
// a thread's long callback: any worker that starts a line task takes it (docs/ARCHITECTURE.md).
//
// A pipe callback that ends its thread (pthread_exit, cancellation: a forced unwind, which must
// go on) fails the run as a failing callback does (steps.cpp), and the unwind stops twice on its
// way out: in drive, which ends the cell as after a failure, and in line_task, which drains
// the stash on this thread (no callback runs once the run aborts: a callback here could start
// a second forced unwind, which aborts the process) and lets go of this task's hold, so that
// the run ends. On the naive engine the line tasks pushed and not started are queued behind
// this one on this thread, and the unwind fails them uncalled (OpRunner::run_inline): this
// thread takes their holds over. A worker's line tasks stay on its deque and run on its
// successor. The handlers cost nothing until a callback ends its thread.
#include "base/foreign_exception.h"
#include "engine/deferred_calls.h"
#include "engine/thread_state.h"
#include "pipeline/pipeline.h"

namespace ordo {

int32_t line_task(ordo_exec* exec, void* pipeline) {
  auto* p = static_cast<Pipeline*>(pipeline);
  p->waiting_tasks_.fetch_sub(1, std::memory_order_relaxed);
  try {
    p->work();
  } catch (...) {
    if (foreign_exception_in_flight()) {  // a pipe callback ended this thread
      const OpBlock* op = op_of_exec(exec);
      p->task_unwound(op && op->group == nullptr);  // the last touch: the run may end there
    }
    throw;
  }
  p->release_hold();  // the last touch: the run may end here
  return 0;
}

void Pipeline::work() {
  for (;;) {
    bool more = false;
    Cell* c = stash_.take(&more);
    if (!c) return;
    if (more) offer();  // others wait too: another worker may start on them
    drive(c);
  }
}

// Runs `c` and the chain of cells it leads to on this thread: of the cells a step makes
// runnable, the first (the next pipe-0 step, or the token's next step) is run here next, the
// other goes to the stash. The whole run holds the pipeline meanwhile (this task's hold).
void Pipeline::drive(Cell* c) {
  for (;;) {
    Cell* ready[2];
    int n;
    try {
      n = execute(*c, ready);
    } catch (...) {
      if (foreign_exception_in_flight()) step_unwound(*c);  // a callback ended this thread
      throw;
    }
    if (n == 2 && stash_.put(ready[1])) offer();
    if (n == 0) return;
    c = ready[0];
  }
}

// A cell waits in the stash: push a line task, unless one pushed earlier has not started yet
// (then no worker is free to take it sooner, and a second would only cost its push).
void Pipeline::offer() {
  if (waiting_tasks_.load(std::memory_order_relaxed) == 0) push_task();
}

// A push the engine refuses (shutting down, out of memory) loses nothing: the cells stay in the
// stash, and the line task that offered them takes them itself before it returns.
ordo_status Pipeline::push_task() {
  holds_.fetch_add(1, std::memory_order_relaxed);  // under the pusher's own hold
  waiting_tasks_.fetch_add(1, std::memory_order_relaxed);
  OpSpec spec;
  spec.fn = line_task;
  spec.user_data = this;
  spec.priority = priority_;
  spec.name = "ordo_pipeline";
  const ordo_status s = engine_->push(spec, nullptr, 0, nullptr, 0);
  if (s != ORDO_OK) {
    waiting_tasks_.fetch_sub(1, std::memory_order_relaxed);
    holds_.fetch_sub(1, std::memory_order_relaxed);
  }
  return s;
}

void Pipeline::release_hold() {
  if (holds_.fetch_sub(1, std::memory_order_acq_rel) == 1) finish();
}

// A pipe callback ended this thread, inside the line task that runs this (see the top): the
// run is aborting, and the cell whose callback it was has been counted down (step_unwound).
// Runs no caller code; pushes nothing.
void Pipeline::task_unwound(bool tasks_run_inline) {
  ForcedUnwindScope no_caller_code;  // finish() then completes a pushed run as it should
  drain_unwinding();
  if (tasks_run_inline) {
    // Pushed by this thread and queued behind this task: they will never run. This task's hold
    // remains, so this is not the last.
    const int32_t queued = waiting_tasks_.exchange(0, std::memory_order_relaxed);
    if (queued > 0) holds_.fetch_sub(queued, std::memory_order_relaxed);
  }
  release_hold();  // the last touch: the run may end here
}

// work() without pushing line tasks: the cells this thread makes runnable it runs itself, with
// no callback (aborting_ is set); the cells other threads make runnable they hand on as usual.
void Pipeline::drain_unwinding() {
  bool more = false;
  while (Cell* c = stash_.take(&more)) {
    for (;;) {
      Cell* ready[2];
      const int n = execute(*c, ready);
      if (n == 2) stash_.put(ready[1]);
      if (n == 0) break;
      c = ready[0];
    }
  }
}

}  // namespace ordo
