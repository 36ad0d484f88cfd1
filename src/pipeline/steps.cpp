// What a cell does when it runs (pipeline.md §2-§3): pipe-0 steps with token deferral, later
// pipes' steps, the join counters each step counts down, failures, and the stop passed around
// the lines at the end of a run. Which thread runs a cell is line_tasks.cpp's business.
#include <new>
#include <utility>

#include "pipeline/pipeflow.h"
#include "pipeline/pipeline.h"

namespace ordo {

// Counts the step of `pipe` on `line` done for the cells that wait for it; puts those it made
// runnable in ready[] (the one for this thread to run next first) and returns how many.
__attribute__((always_inline)) inline int Pipeline::count_down(uint32_t line, uint32_t pipe,
                                                               Cell** ready) {
  const uint32_t num_pipes = grid_.num_pipes();
  const uint32_t num_lines = grid_.num_lines();
  // A cell whose counter a step brings to 0 is this step's to run or hand on; nobody waits.
  Cell* next_line = nullptr;
  if (serial(pipe)) {
    Cell& down = grid_.at(line + 1 == num_lines ? 0 : line + 1, pipe);
    if (Grid::signal(down)) next_line = &down;
  }
  const uint32_t next_pipe = pipe + 1 == num_pipes ? 0 : pipe + 1;
  Cell& forward = grid_.at(line, next_pipe);
  // A parallel cell waits for nothing but this one: no count to keep.
  Cell* same_line = !serial(next_pipe) || Grid::signal(forward) ? &forward : nullptr;
  // Pipe 0 first: this thread goes on generating, and the token's next step waits in the stash
  // for any worker; whatever that step does, and however long, the tokens behind it are
  // generated meanwhile (pipeline.md T7b). Otherwise the token's own next step first, while its
  // data is in this core's cache.
  if (pipe == 0 && next_line) std::swap(same_line, next_line);
  int n = 0;
  if (same_line) ready[n++] = same_line;
  if (next_line) ready[n++] = next_line;
  return n;
}

// Runs one cell and counts it done for the cells that wait for it; puts those it made runnable
// in ready[] (the one for this thread to run next first) and returns how many.
int Pipeline::execute(Cell& c, Cell** ready) {
  const uint32_t line = c.line;
  const uint32_t pipe = c.pipe;
  if (pipe == 0) {
    c.join.store(ORDO_PIPE_SERIAL, std::memory_order_relaxed);  // re-armed for its next use
    if (stopping_) return pass_stop(line, ready);
    if (!first_pipe(line)) {
      stop_generating(line);
      return pass_stop(line, ready);
    }
  } else {
    if (serial(pipe)) c.join.store(ORDO_PIPE_SERIAL, std::memory_order_relaxed);
    if (!aborting_.load(std::memory_order_relaxed)) later_pipe(line, pipe);
  }
  return count_down(line, pipe, ready);
}

// The callback of cell `c` ended this thread (a forced unwind; fail_pipe has recorded it and
// set aborting_): the cell ends as after a failing callback, and the cells that makes runnable
// go to the stash, where this thread's line task drains them (task_unwound) without calling
// any callback.
void Pipeline::step_unwound(Cell& c) {
  Cell* ready[2];
  int n;
  if (c.pipe == 0) {
    stop_generating(c.line);
    n = pass_stop(c.line, ready);
  } else {
    n = count_down(c.line, c.pipe, ready);
  }
  for (int i = 0; i < n; ++i) stash_.put(ready[i]);
}

// One pipe-0 step on `line` (pipeline.md §3.2): invocations until a token is accepted (true) or
// generation ends (false: stop, a failure, or a failure elsewhere).
bool Pipeline::first_pipe(uint32_t line) {
  const ordo_pipe& p = pipes_[0];
  for (;;) {
    // A failure elsewhere ends generation between two tokens (not between two invocations of
    // one token: the token in hand would be lost to the dropped report).
    if (aborting_.load(std::memory_order_relaxed)) return false;
    Draw d = tokens_.next();
    for (;;) {
      tokens_.begin_invocation();
      Pipeflow pf{&tokens_, d.token, d.deferrals, line, 0, false};
      bool threw = false;
      int32_t code;
      try {
        code = call_pipe(p.fn, p.user_data, &pf, &threw);
      } catch (...) {  // only a forced unwind gets out of a callback: it ended this thread
        // Named in the failure as a failing token is (below).
        fail_pipe(0, line, d.token, ORDO_ERR_OP_FAILED, Ended::kExited);
        throw;  // Pipeline::drive ends the step, the line task the run's share of this thread
      }
      if (code != 0) {
        // Like a stop, a failing fresh token is not counted, and a resumed one is named in the
        // failure rather than in the dropped list.
        fail_pipe(0, line, d.token, code, threw ? Ended::kThrew : Ended::kReturned);
        return false;
      }
      if (pf.stop) {
        tokens_.begin_invocation();  // TF-BUG 2: targets named before stop() are forgotten
        // A resumed token was generated and will never be accepted: it is reported with the
        // dropped ones rather than lost (a fresh one was never generated). The queue has room:
        // the token was just drawn from it.
        if (d.token != tokens_.num_tokens()) tokens_.requeue(d);
        return false;
      }
      TokenSource::Outcome o = TokenSource::Outcome::kAgain;
      try {
        o = tokens_.settle(&d);
      } catch (const std::bad_alloc&) {
        fail_run(ORDO_ERR_NO_MEMORY);
        return false;
      }
      if (o == TokenSource::Outcome::kAccepted) {
        LineToken& t = grid_.token_of(line);
        t.token = d.token;
        t.deferrals = d.deferrals;
        ++accepted_;
        return true;
      }
      if (o == TokenSource::Outcome::kDeferred) break;  // this line takes the next token
    }
  }
}

void Pipeline::later_pipe(uint32_t line, uint32_t pipe) {
  const LineToken& t = grid_.token_of(line);
  Pipeflow pf{nullptr, t.token, t.deferrals, line, pipe, false};
  const ordo_pipe& p = pipes_[pipe];
  bool threw = false;
  int32_t code;
  try {
    code = call_pipe(p.fn, p.user_data, &pf, &threw);
  } catch (...) {  // only a forced unwind gets out of a callback: it ended this thread
    fail_pipe(pipe, line, t.token, ORDO_ERR_OP_FAILED, Ended::kExited);
    throw;  // Pipeline::drive ends the step, the line task the run's share of this thread
  }
  if (code != 0) fail_pipe(pipe, line, t.token, code, threw ? Ended::kThrew : Ended::kReturned);
}

// Pipe 0 will not run again in this run. What is still deferred or ready is dropped (TF-BUG
// 1: a later run must not replay it). The run is over once the tokens in flight have left: the
// stop is passed from line to line (pass_stop), each pipe-0 cell waiting as usual for its
// line's last token to leave the last pipe.
void Pipeline::stop_generating(uint32_t line) {
  dropped_count_ = tokens_.end_run(&dropped_);
  stopping_ = true;
  stop_line_ = line;
}

// A pipe-0 cell after the stop: its line is empty. The cell of the line just before the one
// that stopped is the last: every line has then been passed, and every token has left.
int Pipeline::pass_stop(uint32_t line, Cell** ready) {
  const uint32_t next = line + 1 == grid_.num_lines() ? 0 : line + 1;
  if (next == stop_line_) {
    release_hold();  // the run's own: it ends once the line tasks still running have returned
    return 0;
  }
  Cell& c = grid_.at(next, 0);
  if (!Grid::signal(c)) return 0;
  ready[0] = &c;
  return 1;
}

// The first failure of the run is the one reported; it stops every later callback. Each
// failing thread sets aborting_ itself, even when another claimed the failure first (and may not
// have set it yet): a thread whose callback ended it must see it set, since it then drains
// cells and may call no callback.
void Pipeline::fail_pipe(uint32_t pipe, uint32_t line, uint64_t token, int32_t code, Ended how) {
  if (!failure_claimed_.exchange(true, std::memory_order_acq_rel)) {
    failure_ = Failure{code, pipe, line, token, how};
  }
  aborting_.store(true, std::memory_order_release);
}

void Pipeline::fail_run(ordo_status status) {
  if (run_error_ == ORDO_OK) run_error_ = status;  // pipe-0 steps only: no race
  aborting_.store(true, std::memory_order_release);
}

}  // namespace ordo
