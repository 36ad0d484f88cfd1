#include "pipeline/pipeline.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

#include "base/last_error.h"
#include "core/handle_bits.h"
#include "engine/deferred_calls.h"

namespace ordo {

ordo_status Pipeline::check(const char* api, uint32_t num_lines, const ordo_pipe* pipes,
                            size_t num_pipes) {
  if (num_lines == 0) {
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
  if (num_pipes > kMaxPipes || size_t{num_lines} * num_pipes > kMaxCells) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "%s: %u lines x %zu pipes; at most %zu pipes and %zu lines x pipes are allowed",
                api, static_cast<unsigned>(num_lines), num_pipes, kMaxPipes, kMaxCells);
  }
  for (size_t f = 0; f < num_pipes; ++f) {
    const int64_t type = pipes[f].type;  // 64 bits (no hole in ordo_pipe): checked whole
    if (type != ORDO_PIPE_SERIAL && type != ORDO_PIPE_PARALLEL) {
      return fail(ORDO_ERR_INVALID_ARGUMENT,
                  "%s: pipes[%zu].type is %lld; it must be ORDO_PIPE_SERIAL (%d) or "
                  "ORDO_PIPE_PARALLEL (%d)",
                  api, f, static_cast<long long>(type), ORDO_PIPE_SERIAL, ORDO_PIPE_PARALLEL);
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
  std::vector<ordo_pipe> new_pipes(pipes, pipes + num_pipes);
  std::vector<int32_t> new_types(num_pipes);
  for (size_t f = 0; f < num_pipes; ++f) new_types[f] = static_cast<int32_t>(pipes[f].type);
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
  stopping_ = false;
  stop_line_ = 0;
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
  holds_.store(1, std::memory_order_relaxed);  // the run's own, until the stop has gone round
  waiting_tasks_.store(0, std::memory_order_relaxed);
  bool more;
  stash_.put(&grid_.at(first_line, 0));
  const ordo_status s = push_task();
  if (s != ORDO_OK) stash_.take(&more);  // nothing ran: leave the stash empty for the next run
  return s;
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
    const char* how = f.how == Ended::kThrew ? "threw a C++ exception"
                      : f.how == Ended::kExited
                          ? "ended its thread (the callback's thread exited: a forced unwind, "
                            "pthread_exit or thread cancellation)"
                          : "failed";
    std::snprintf(message_, sizeof message_,
                  "pipe %u %s on token %" PRIu64
                  " (line %u); the run was abandoned and the pipeline needs "
                  "ordo_pipeline_reset%s%s",
                  static_cast<unsigned>(f.pipe), how, f.token, static_cast<unsigned>(f.line),
                  dropped[0] ? "; " : "", dropped);
    if (f.how == Ended::kReturned) {
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
  const char* message = code != 0 ? p->message_ : nullptr;
  // The op's free_fn releases the pipeline, and whoever waits for its vars may then destroy it:
  // this is the last touch. A pipe callback that ended this thread ends the run inside the
  // unwind's handler: the ops the completion makes ready to run inline here fail uncalled.
  if (__builtin_expect(in_forced_unwind(), 0)) {
    engine->complete_unwinding(h.gen, h.index, code, message);
  } else {
    engine->complete(h.gen, h.index, code, message);
  }
}

void Pipeline::run_op_finished(void* user_data) {
  static_cast<Pipeline*>(user_data)->release();
}

}  // namespace ordo
