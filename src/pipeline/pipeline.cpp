#include "pipeline/pipeline.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

#include "base/last_error.h"
#include "core/handle_bits.h"
#include "pipeline/pipeflow.h"

namespace ordo {

// The op that runs cells: the one it was pushed for, then whatever that made runnable.
int32_t line_task(ordo_exec*, void* cell) {
  Cell* c = static_cast<Cell*>(cell);
  c->owner->drive(c);
  return 0;
}

ordo_status Pipeline::check(const char* api, uint32_t num_lines, bool keep_allowed,
                            const ordo_pipe* pipes, size_t num_pipes) {
  if (num_lines == 0 && !keep_allowed) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: num_lines is 0; a pipeline needs at least one line",
                api);
  }
  if (num_lines > kMaxLines) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: num_lines is %u; at most %u are allowed", api,
                static_cast<unsigned>(num_lines), static_cast<unsigned>(kMaxLines));
  }
  if (!pipes) return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: pipes is NULL", api);
  if (num_pipes == 0) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: num_pipes is 0; a pipeline needs at least one pipe",
                api);
  }
  if (num_pipes > kMaxPipes || (num_lines != 0 && size_t{num_lines} * num_pipes > kMaxCells)) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "%s: %u lines x %zu pipes; at most %zu pipes and %zu lines x pipes are allowed",
                api, static_cast<unsigned>(num_lines), num_pipes, kMaxPipes, kMaxCells);
  }
  for (size_t f = 0; f < num_pipes; ++f) {
    const int32_t type = pipes[f].type;
    if (type != ORDO_PIPE_SERIAL && type != ORDO_PIPE_PARALLEL) {
      return fail(ORDO_ERR_INVALID_ARGUMENT,
                  "%s: pipes[%zu].type is %d; it must be ORDO_PIPE_SERIAL (%d) or "
                  "ORDO_PIPE_PARALLEL (%d)",
                  api, f, static_cast<int>(type), ORDO_PIPE_SERIAL, ORDO_PIPE_PARALLEL);
    }
    if (!pipes[f].fn) return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: pipes[%zu].fn is NULL", api, f);
  }
  if (pipes[0].type != ORDO_PIPE_SERIAL) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "%s: the first pipe is ORDO_PIPE_PARALLEL; it must be ORDO_PIPE_SERIAL (it "
                "generates the tokens one at a time)",
                api);
  }
  return ORDO_OK;
}

void Pipeline::set_pipes(uint32_t num_lines, const ordo_pipe* pipes, size_t num_pipes) {
  if (num_lines == 0) num_lines = grid_.num_lines();
  if (num_lines != 0 && size_t{num_lines} * num_pipes > kMaxCells) throw std::bad_alloc();
  std::vector<ordo_pipe> new_pipes(pipes, pipes + num_pipes);
  std::vector<int32_t> new_types(num_pipes);
  for (size_t f = 0; f < num_pipes; ++f) new_types[f] = pipes[f].type;
  grid_.build(this, num_lines, static_cast<uint32_t>(num_pipes));  // the last that may throw
  pipes_.swap(new_pipes);
  types_.swap(new_types);
  reset();
}

void Pipeline::reset() {
  tokens_.reset();
  accepted_ = 0;
  needs_reset_ = false;
  dropped_.clear();
  dropped_count_ = 0;
}

// ---------------------------------------------------------------------------------------------
// Starting and ending a run

ordo_status Pipeline::start(const RunEnd& end, int32_t priority) {
  end_ = end;
  priority_ = priority;
  accepted_run_ = 0;
  exits_.store(0, std::memory_order_relaxed);
  aborting_.store(false, std::memory_order_relaxed);
  failure_claimed_.store(false, std::memory_order_relaxed);
  failure_ = Failure{};
  run_error_ = ORDO_OK;
  status_ = ORDO_OK;
  op_code_ = 0;
  message_[0] = '\0';
  dropped_.clear();
  dropped_count_ = 0;
  // TF-BUG 3: the next token is the accepted_-th since the reset, so it goes on that line, even
  // when an earlier run dropped tokens (its ids then run ahead of the acceptances).
  const uint32_t first_line = static_cast<uint32_t>(accepted_ % grid_.num_lines());
  grid_.arm(first_line, types_.data());
  OpSpec spec;
  spec.fn = line_task;
  spec.user_data = &grid_.at(first_line, 0);
  spec.priority = priority;
  spec.name = "ordo_pipeline";
  return engine_->push(spec, nullptr, 0, nullptr, 0);
}

// The last step of a run: what the caller reads, then the announcement. Nothing of the
// pipeline may be touched once end.fn has been called.
void Pipeline::finish() {
  describe_end();
  const RunEnd end = end_;
  end.fn(end.ctx);
}

void Pipeline::describe_end() {
  char dropped[192] = "";
  if (dropped_count_ != 0) {
    int n = std::snprintf(dropped, sizeof dropped, "%" PRIu64 " token%s dropped (", dropped_count_,
                          dropped_count_ == 1 ? "" : "s");
    const size_t shown = dropped_.size() < 8 ? dropped_.size() : 8;
    for (size_t i = 0; i < shown && n > 0 && static_cast<size_t>(n) < sizeof dropped; ++i) {
      n += std::snprintf(dropped + n, sizeof dropped - static_cast<size_t>(n), "%s%" PRIu64,
                         i ? ", " : "ids ", dropped_[i]);
    }
    if (n > 0 && static_cast<size_t>(n) < sizeof dropped) {
      std::snprintf(dropped + n, sizeof dropped - static_cast<size_t>(n), "%s)",
                    dropped_.size() > shown ? ", ..."
                    : dropped_.empty()      ? "their ids could not be kept: out of memory"
                                            : "");
    }
  }
  if (failure_claimed_.load(std::memory_order_acquire)) {
    const Failure& f = failure_;
    needs_reset_ = true;
    status_ = ORDO_ERR_OP_FAILED;
    op_code_ = f.code;
    std::snprintf(message_, sizeof message_,
                  "pipe %u %s on token %" PRIu64
                  " (line %u); the run was abandoned and the pipeline needs "
                  "ordo_pipeline_reset%s%s",
                  static_cast<unsigned>(f.pipe), f.threw ? "threw a C++ exception" : "failed",
                  f.token, static_cast<unsigned>(f.line), dropped[0] ? "; " : "", dropped);
    if (!f.threw) {
      const size_t len = std::strlen(message_);
      std::snprintf(message_ + len, sizeof message_ - len, " (code %d)", static_cast<int>(f.code));
    }
  } else if (run_error_ != ORDO_OK) {
    needs_reset_ = true;
    status_ = run_error_;
    op_code_ = run_error_;
    std::snprintf(message_, sizeof message_,
                  "out of memory for the deferral tables; the run was abandoned and the pipeline "
                  "needs ordo_pipeline_reset%s%s",
                  dropped[0] ? "; " : "", dropped);
  } else if (dropped_count_ != 0) {
    status_ = ORDO_ERR_TOKENS_DROPPED;
    op_code_ = ORDO_ERR_TOKENS_DROPPED;
    std::snprintf(message_, sizeof message_,
                  "%s: deferred to tokens that were never accepted (never generated, or deferred "
                  "themselves in a cycle), or still waiting when pipe 0 stopped",
                  dropped);
  }
}

// ---------------------------------------------------------------------------------------------
// Line tasks

// Runs `c` and then, on this thread, one of the cells each step makes runnable, handing the
// other (the next line's) to the engine. A push the engine refuses (it is shutting down, or out
// of memory) does not lose the cell: this thread runs it too, later.
void Pipeline::drive(Cell* c) {
  Cell* mine = nullptr;
  for (;;) {
    Cell* ready[2];
    const int n = execute(*c, ready);
    if (n == 2 && !push_cell(ready[1])) {
      ready[1]->next_local = mine;
      mine = ready[1];
    }
    if (n != 0) {
      c = ready[0];
    } else if (mine) {
      c = mine;
      mine = mine->next_local;
    } else {
      return;  // the run may be over and the pipeline gone: touch nothing
    }
  }
}

bool Pipeline::push_cell(Cell* c) {
  OpSpec spec;
  spec.fn = line_task;
  spec.user_data = c;
  spec.priority = priority_;
  spec.name = "ordo_pipeline";
  return engine_->push(spec, nullptr, 0, nullptr, 0) == ORDO_OK;
}

// Runs one cell and counts it done for the cells that wait for it; puts those it made runnable
// in ready[] (the same line's next pipe first) and returns how many. A cell whose token leaves
// the last pipe, or a pipe-0 step that stops, may end the run: it returns 0 and touches nothing
// after that.
int Pipeline::execute(Cell& c, Cell** ready) {
  const uint32_t line = c.line;
  const uint32_t pipe = c.pipe;
  c.join.store(types_[pipe], std::memory_order_relaxed);  // re-armed for its next use
  if (pipe == 0) {
    if (!first_pipe(line)) {
      stop_generating();
      return 0;
    }
  } else if (!aborting_.load(std::memory_order_relaxed)) {
    later_pipe(line, pipe);
  }
  const uint32_t num_pipes = grid_.num_pipes();
  const uint32_t num_lines = grid_.num_lines();
  // The next line's cell first, this token's next cell last: once this token can go on
  // without us, the run may end and the pipeline go, and a signal to a cell no token will use
  // any more (the next line's, after the last token) must already have been made. Each
  // signal's release is then covered by the one after it.
  Cell* next_line = nullptr;
  if (serial(pipe)) {
    Cell& down = grid_.at(line + 1 == num_lines ? 0 : line + 1, pipe);
    if (Grid::signal(down)) next_line = &down;
  }
  int n = 0;
  Cell& forward = grid_.at(line, pipe + 1 == num_pipes ? 0 : pipe + 1);
  if (Grid::signal(forward)) ready[n++] = &forward;
  if (next_line) ready[n++] = next_line;
  if (pipe + 1 == num_pipes && exits_.fetch_add(1, std::memory_order_acq_rel) == -1) {
    // Nothing can be runnable here: a runnable cell would belong to a token still in flight,
    // or to pipe 0 before it stopped.
    finish();
    return 0;
  }
  return n;
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
      const int32_t code = call_pipe(p.fn, p.user_data, &pf, &threw);
      if (code != 0) {
        // Like a stop, a failing fresh token is not counted, and a resumed one is named in the
        // failure rather than in the dropped list.
        fail_pipe(0, line, d.token, code, threw);
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
        ++accepted_run_;
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
  const int32_t code = call_pipe(p.fn, p.user_data, &pf, &threw);
  if (code != 0) fail_pipe(pipe, line, t.token, code, threw);
}

// Pipe 0 will not run again in this run. What is still deferred or ready is dropped (TF-BUG
// 1: a later run must not replay it), and the run is over once the tokens accepted have left.
void Pipeline::stop_generating() {
  dropped_count_ = tokens_.end_run(&dropped_);
  const int64_t accepted = static_cast<int64_t>(accepted_run_);
  if (exits_.fetch_sub(accepted, std::memory_order_acq_rel) == accepted) finish();
}

// The first failure of the run is the one reported; it stops every later callback.
void Pipeline::fail_pipe(uint32_t pipe, uint32_t line, uint64_t token, int32_t code, bool threw) {
  if (failure_claimed_.exchange(true, std::memory_order_acq_rel)) return;
  failure_ = Failure{code, pipe, line, token, threw};
  aborting_.store(true, std::memory_order_release);
}

void Pipeline::fail_run(ordo_status status) {
  if (run_error_ == ORDO_OK) run_error_ = status;  // pipe-0 steps only: no race
  aborting_.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// Pushed runs: an op that defers, starts the run, and is completed by the run's end.

int32_t Pipeline::run_op(ordo_exec* exec, void* user_data) {
  auto* p = static_cast<Pipeline*>(user_data);
  OpBlock* op = op_of_exec(exec);
  if (!op || p->engine_->defer(op, &p->completion_) != ORDO_OK) return ORDO_ERR_INTERNAL;
  const ordo_status s = p->start(RunEnd{&Pipeline::complete_pushed, p}, p->push_priority_);
  if (s != ORDO_OK) {  // nothing ran: the op fails with the refusal
    p->status_ = s;
    p->op_code_ = s;
    std::snprintf(p->message_, sizeof p->message_, "the run's first step could not be pushed: %s",
                  last_error());
    complete_pushed(p);
  }
  return 0;
}

void Pipeline::complete_pushed(void* pipeline) {
  auto* p = static_cast<Pipeline*>(pipeline);
  Engine* const engine = p->engine_;
  const HandleBits h = HandleBits::decode(p->completion_);
  const int32_t code = p->op_code_;
  // The op's free_fn releases the pipeline, and whoever waits for its vars may then destroy it:
  // this is the last touch.
  engine->complete(h.gen, h.index, code, code != 0 ? p->message_ : nullptr);
}

void Pipeline::run_op_finished(void* user_data) {
  static_cast<Pipeline*>(user_data)->release();
}

}  // namespace ordo
