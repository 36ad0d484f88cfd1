// Which thread runs which cell of a run. A line task (an op of the engine, user_data the
// Pipeline) takes the oldest runnable cell from the run's stash and runs it, then goes on with
// one of the cells that step made runnable, putting the other in the stash, until its chain
// ends; then it takes another from the stash, and returns when the stash is empty. A line task
// is pushed only when a cell waits in the stash and no line task pushed earlier is still waiting
// to start, so short steps run on the threads already running, with no push per token (a push
// and the pop on another worker cost more than an empty step), while a cell never waits behind
// a thread's long callback: any worker that starts a line task takes it (docs/ARCHITECTURE.md).
#include "pipeline/pipeline.h"

namespace ordo {

int32_t line_task(ordo_exec*, void* pipeline) {
  auto* p = static_cast<Pipeline*>(pipeline);
  p->waiting_tasks_.fetch_sub(1, std::memory_order_relaxed);
  p->work();
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
    const int n = execute(*c, ready);
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

}  // namespace ordo
