// Pipeline: one ordo_pipeline. It keeps the pipes, the grid of cells (grid.h) and the token
// source (token_source.h), and turns a run into engine work: runnable cells are run by "line
// tasks", ordinary ops of the engine pushed with no vars, each of which runs cells until none
// is left to take (docs/ARCHITECTURE.md, "How a pipeline run becomes engine work"). The files:
// pipeline.cpp (configuration, starting and ending runs, pushed runs), steps.cpp (what a cell
// does), line_tasks.cpp (which thread runs which cell). The API layer (src/api/pipeline_api.cpp)
// makes sure that at most one run is in flight and that nothing else changes the pipeline
// meanwhile.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "ordo/ordo.h"
#include "pipeline/cell_stash.h"
#include "pipeline/grid.h"
#include "pipeline/token_source.h"

namespace ordo {

// How the end of a run is announced: fn(ctx) is the last thing the run does with the pipeline,
// so that the one it wakes may destroy it at once.
struct RunEnd {
  void (*fn)(void* ctx) = nullptr;
  void* ctx = nullptr;
};

class Pipeline {
 public:
  static constexpr uint32_t kMaxLines = 1u << 16;
  static constexpr size_t kMaxPipes = size_t{1} << 16;
  static constexpr size_t kMaxCells = size_t{1} << 20;

  explicit Pipeline(Engine* engine) : engine_(engine) {}
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Checks what ordo_pipeline_create and ordo_pipeline_reset_pipes take; INVALID_ARGUMENT with
  // the message naming `api`.
  static ordo_status check(const char* api, uint32_t num_lines, const ordo_pipe* pipes,
                           size_t num_pipes);
  // Replaces the pipes and the lines (checked), then resets. Throws std::bad_alloc, in which
  // case nothing changed.
  void set_pipes(uint32_t num_lines, const ordo_pipe* pipes, size_t num_pipes);
  // Ids and lines start at 0 again; the dropped list and a failure are forgotten.
  void reset();

  Engine* engine() const { return engine_; }
  uint32_t num_lines() const { return grid_.num_lines(); }
  uint64_t num_tokens() const { return tokens_.num_tokens(); }
  uint64_t dropped_count() const { return dropped_count_; }
  const std::vector<uint64_t>& dropped_ids() const { return dropped_; }
  bool needs_reset() const { return needs_reset_; }

  // One run in flight at a time: the API layer claims it (false: one is in flight already) and
  // releases it when the run, pushed or not, is over.
  bool claim() { return !busy_.exchange(true, std::memory_order_acq_rel); }
  void release() { busy_.store(false, std::memory_order_release); }
  bool busy() const { return busy_.load(std::memory_order_acquire); }

  // Starts a run by pushing its first step; `end` is called once when it is over (on whichever
  // thread ends it). Returns the push's error when it was refused: then nothing ran and `end`
  // is never called.
  ordo_status start(const RunEnd& end, int32_t priority);
  // After `end` was called: the run's status (ORDO_OK, TOKENS_DROPPED, OP_FAILED, NO_MEMORY) and
  // its message ("" for ORDO_OK).
  ordo_status status() const { return status_; }
  const char* message() const { return message_; }

  // ordo_pipeline_push: the op that starts a run and completes when it ends, and its free_fn,
  // which releases the pipeline. user_data is the Pipeline.
  void prepare_push(int32_t priority) { push_priority_ = priority; }
  static int32_t run_op(ordo_exec* exec, void* user_data);
  static void run_op_finished(void* user_data);

 private:
  friend int32_t line_task(ordo_exec* exec, void* pipeline);

  // How a failing callback ended: it returned a non-zero code, threw a C++ exception, or ended
  // its thread (a forced unwind: pthread_exit, cancellation).
  enum class Ended : uint8_t { kReturned, kThrew, kExited };
  struct Failure {
    int32_t code = 0;
    uint32_t pipe = 0;
    uint32_t line = 0;
    uint64_t token = 0;
    Ended how = Ended::kReturned;
  };

  bool serial(uint32_t pipe) const { return types_[pipe] == ORDO_PIPE_SERIAL; }
  // line_tasks.cpp
  void work();
  void drive(Cell* c);
  void offer();
  ordo_status push_task();
  void release_hold();
  // A pipe callback ended this thread (a forced unwind): the line task that ran it finishes
  // its share of the run before the unwind goes on (see line_tasks.cpp).
  void task_unwound(bool tasks_run_inline);
  void drain_unwinding();
  // steps.cpp
  int execute(Cell& c, Cell** ready);
  int count_down(uint32_t line, uint32_t pipe, Cell** ready);
  void step_unwound(Cell& c);
  bool first_pipe(uint32_t line);
  void later_pipe(uint32_t line, uint32_t pipe);
  void stop_generating(uint32_t line);
  int pass_stop(uint32_t line, Cell** ready);
  void fail_pipe(uint32_t pipe, uint32_t line, uint64_t token, int32_t code, Ended how);
  void fail_run(ordo_status status);
  // pipeline.cpp
  void finish();
  void describe_end();
  static void complete_pushed(void* pipeline);

  Engine* const engine_;
  std::vector<ordo_pipe> pipes_;
  std::vector<int32_t> types_;  // pipes_[f].type, contiguous for Grid::arm
  Grid grid_;
  TokenSource tokens_;
  uint64_t accepted_ = 0;  // tokens pipe 0 accepted since the reset: the line ring's position
  std::atomic<bool> busy_{false};
  bool needs_reset_ = false;
  std::vector<uint64_t> dropped_;  // the last run's, ascending
  uint64_t dropped_count_ = 0;

  // The run in flight.
  RunEnd end_;
  int32_t priority_ = 0;
  int32_t push_priority_ = 0;
  ordo_completion completion_ = 0;  // a pushed run's op
  // Pipe 0 has stopped on stop_line_: its pipe-0 cells now only pass the stop on, each once its
  // line's last token has left, and the one before stop_line_ ends the run. Written by the
  // stopping pipe-0 step, read by later pipe-0 cells (ordered by their counters).
  bool stopping_ = false;
  uint32_t stop_line_ = 0;
  // Runnable cells no thread has taken yet; line tasks pushed and not yet started; and the
  // holds on the run: its own (until the stop has gone round every line) and one per line task
  // pushed and not yet returned. The run ends when the last hold goes.
  CellStash stash_;
  std::atomic<int32_t> waiting_tasks_{0};
  std::atomic<int64_t> holds_{0};
  // A callback failed (or ended its thread): no further callback starts; the cells pass their
  // tokens on untouched so that every token leaves and the run ends.
  std::atomic<bool> aborting_{false};
  std::atomic<bool> failure_claimed_{false};
  Failure failure_;
  ordo_status run_error_ = ORDO_OK;  // not a callback's failure: NO_MEMORY, SHUTDOWN
  ordo_status status_ = ORDO_OK;
  int32_t op_code_ = 0;  // what a pushed run's op completes with
  char message_[512] = "";
};

}  // namespace ordo
