// The exported ordo_pipeline_* and ordo_pipeflow_* functions: handle look-up, argument checks,
// the one-run-at-a-time rule, and a call into the Pipeline (src/pipeline/). Everything here
// runs inside guarded(): no C++ exception crosses the C ABI.
#include <condition_variable>
#include <memory>
#include <mutex>

#include "api/engine_registry.h"
#include "api/entry.h"
#include "api/graph_entry.h"
#include "api/pipeline_registry.h"
#include "base/foreign_exception.h"
#include "base/last_error.h"
#include "ordo/ordo.h"
#include "pipeline/pipeflow.h"
#include "pipeline/pipeline.h"
#include "pipeline/token_source.h"

using namespace ordo;

namespace {

// ordo_pipeline_run's caller sleeps here until the run's end wakes it. Notified under the lock,
// so the caller cannot return (and free this) before the notifying thread has let go of it.
struct RunWaiter {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;

  static void on_end(void* ctx) {
    auto* w = static_cast<RunWaiter*>(ctx);
    std::lock_guard<std::mutex> g(w->m);
    w->done = true;
    w->cv.notify_one();
  }
  void wait() {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [this] { return done; });
  }
};

// A pin on an engine's memory, let go unless kept (a create that fails half-way).
class EnginePin {
 public:
  explicit EnginePin(EngineSlot* s) : slot_(s && pin_engine(s) ? s : nullptr) {}
  ~EnginePin() {
    if (slot_) unpin_engine(slot_);
  }
  EnginePin(const EnginePin&) = delete;
  EnginePin& operator=(const EnginePin&) = delete;
  bool pinned() const { return slot_ != nullptr; }
  EngineSlot* slot() const { return slot_; }
  void keep() { slot_ = nullptr; }

 private:
  EngineSlot* slot_;
};

ordo_status refuse_busy(const char* api) {
  return fail(ORDO_ERR_INVALID_STATE,
              "%s: a run of this pipeline is in flight (ordo_pipeline_run, or a pushed run whose "
              "op has not finished); wait for it first",
              api);
}

// What ordo_pipeline_run and ordo_pipeline_push check before a run: with the table locked.
ordo_status check_startable(const char* api, Pipeline* p) {
  if (capturing(p->engine())) return refuse_in_capture(api);  // a run is not captured
  if (p->engine()->shutting_down()) {
    return fail(ORDO_ERR_SHUTDOWN, "%s: the pipeline's engine is shut down (destroyed)", api);
  }
  if (p->busy()) return refuse_busy(api);
  if (p->needs_reset()) {
    return fail(ORDO_ERR_INVALID_STATE,
                "%s: the last run failed; call ordo_pipeline_reset before running again", api);
  }
  return ORDO_OK;
}

ordo_status pipeflow_for_first_pipe(const char* api, ordo_pipeflow* handle, Pipeflow** out) {
  if (!handle) return null_arg(api, "pf");
  Pipeflow* pf = pipeflow_of(handle);
  if (!pf) {
    return fail(ORDO_ERR_INVALID_STATE,
                "%s: pf is not the pipeflow of the pipe callback running on this thread (a "
                "pipeflow is valid only inside its own callback)",
                api);
  }
  if (pf->pipe != 0) {
    return fail(ORDO_ERR_INVALID_STATE,
                "%s: called in pipe %u; only the first pipe (pipe 0) may stop or defer tokens "
                "(the run goes on)",
                api, static_cast<unsigned>(pf->pipe));
  }
  *out = pf;
  return ORDO_OK;
}

}  // namespace

extern "C" {

ORDO_API ordo_status ordo_pipeline_create(ordo_engine* e, uint32_t num_lines,
                                          const ordo_pipe* pipes, size_t num_pipes,
                                          ordo_pipeline** out) {
  if (out) *out = nullptr;  // on every failure, the engine's included
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    if (ordo_status s = Pipeline::check(api, num_lines, pipes, num_pipes)) return s;
    if (engine->shutting_down()) {
      return fail(ORDO_ERR_SHUTDOWN, "%s: the engine is shut down (destroyed)", api);
    }
    EnginePin pin(slot_for_tag(engine->tag()));
    if (!pin.pinned()) return bad_engine_handle(e);
    auto pipeline = std::make_unique<Pipeline>(engine);
    pipeline->set_pipes(num_lines, pipes, num_pipes);
    if (ordo_status s = add_pipeline(pipeline.get(), pin.slot(), out)) return s;
    pin.keep();  // the table's slot holds the pipeline and the pin from here
    pipeline.release();
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_pipeline_run(ordo_pipeline* p) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    Pipeline* pipeline = nullptr;
    {
      std::lock_guard<std::mutex> g(pipeline_table_lock());
      PipelineSlot* slot = nullptr;
      if (ordo_status s = find_pipeline(api, p, &slot)) return s;
      pipeline = slot->pipeline;
      if (pipeline->engine()->called_from_inside()) {
        return fail(ORDO_ERR_WOULD_DEADLOCK,
                    "%s: called from inside a pipe callback or op of the pipeline's engine, it "
                    "would wait for work that cannot run meanwhile; push the run instead "
                    "(ordo_pipeline_push)",
                    api);
      }
      if (ordo_status s = check_startable(api, pipeline)) return s;
      pipeline->claim();
    }
    RunWaiter waiter;
    ordo_status started;
    try {
      started = pipeline->start(RunEnd{&RunWaiter::on_end, &waiter}, 0);
    } catch (...) {
      if (foreign_exception_in_flight()) {
        // A pipe callback ran on this thread (the naive engine runs the steps inside start())
        // and ended it: the run has ended (or ends once the other threads' steps have; the
        // waiter lives on this stack until then). This thread does not return the status: the
        // pipeline is free again, and needs a reset.
        waiter.wait();
        pipeline->release();
      }
      throw;
    }
    if (started != ORDO_OK) {
      pipeline->release();
      return started;  // nothing ran; the engine said why
    }
    // A wait on the engine, as ordo_wait_for_all is: a worker thread that a pipe callback ended
    // gets a successor at once (the run's steps may need it).
    Engine* const engine = pipeline->engine();
    engine->begin_waiting();
    waiter.wait();
    engine->end_waiting();
    const ordo_status s = pipeline->status();
    if (s != ORDO_OK) fail(s, "%s: %s", api, pipeline->message());
    pipeline->release();
    return s;
  });
}

ORDO_API ordo_status ordo_pipeline_push(ordo_pipeline* p, const ordo_var* const_vars,
                                        size_t num_const, const ordo_var* mutable_vars,
                                        size_t num_mutable, const ordo_push_opts* opts) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    Pipeline* pipeline = nullptr;
    OpSpec spec;
    {
      std::lock_guard<std::mutex> g(pipeline_table_lock());
      PipelineSlot* slot = nullptr;
      if (ordo_status s = find_pipeline(api, p, &slot)) return s;
      pipeline = slot->pipeline;
      if (ordo_status s = make_spec(api, &Pipeline::run_op, pipeline, const_vars, num_const,
                                    mutable_vars, num_mutable, opts, &spec)) {
        return s;
      }
      if (spec.free_fn) {
        return fail(ORDO_ERR_INVALID_ARGUMENT,
                    "%s: opts->free_fn must be NULL (a pushed run has no user_data)", api);
      }
      if (ordo_status s = check_startable(api, pipeline)) return s;
      pipeline->claim();
      pipeline->prepare_push(spec.priority);
    }
    // The op's free_fn releases the pipeline once the op has finished: ran, failed or skipped.
    spec.free_fn = &Pipeline::run_op_finished;
    if (!spec.name) spec.name = "ordo_pipeline_run";
    const ordo_status s =
        pipeline->engine()->push(spec, const_vars, num_const, mutable_vars, num_mutable);
    if (s != ORDO_OK) pipeline->release();  // nothing was pushed: free_fn will not run
    return s;
  });
}

ORDO_API ordo_status ordo_pipeline_reset(ordo_pipeline* p) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    std::lock_guard<std::mutex> g(pipeline_table_lock());
    PipelineSlot* slot = nullptr;
    if (ordo_status s = find_pipeline(api, p, &slot)) return s;
    if (slot->pipeline->busy()) return refuse_busy(api);
    slot->pipeline->reset();
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_pipeline_reset_pipes(ordo_pipeline* p, uint32_t num_lines,
                                               const ordo_pipe* pipes, size_t num_pipes) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    std::lock_guard<std::mutex> g(pipeline_table_lock());
    PipelineSlot* slot = nullptr;
    if (ordo_status s = find_pipeline(api, p, &slot)) return s;
    if (slot->pipeline->busy()) return refuse_busy(api);
    const uint32_t lines = num_lines != 0 ? num_lines : slot->pipeline->num_lines();  // 0: keep
    if (ordo_status s = Pipeline::check(api, lines, pipes, num_pipes)) return s;
    slot->pipeline->set_pipes(lines, pipes, num_pipes);  // unchanged if it throws
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_pipeline_num_tokens(const ordo_pipeline* p, uint64_t* out) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    std::lock_guard<std::mutex> g(pipeline_table_lock());
    PipelineSlot* slot = nullptr;
    if (ordo_status s = find_pipeline(api, p, &slot)) return s;
    *out = slot->pipeline->num_tokens();
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_pipeline_dropped(const ordo_pipeline* p, uint64_t* count, uint64_t* ids,
                                           size_t cap) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    if (!count) return null_arg(api, "count");
    if (!ids && cap != 0) {
      return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: ids is NULL but cap is %zu", api, cap);
    }
    std::lock_guard<std::mutex> g(pipeline_table_lock());
    PipelineSlot* slot = nullptr;
    if (ordo_status s = find_pipeline(api, p, &slot)) return s;
    const Pipeline& pipeline = *slot->pipeline;
    if (pipeline.busy()) return refuse_busy(api);
    *count = pipeline.dropped_count();
    const std::vector<uint64_t>& dropped = pipeline.dropped_ids();
    for (size_t i = 0; i < cap && i < dropped.size(); ++i) ids[i] = dropped[i];
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_pipeline_destroy(ordo_pipeline* p) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    Pipeline* pipeline = nullptr;
    EngineSlot* engine = nullptr;
    {
      std::lock_guard<std::mutex> g(pipeline_table_lock());
      PipelineSlot* slot = nullptr;
      if (ordo_status s = find_pipeline(api, p, &slot, /*inherited_ok=*/true)) return s;
      if (slot->engine && !made_here(slot->engine)) {
        // In a child of fork(): the pipeline and its engine are the parent's (their threads
        // stayed there). The handle goes; their memory stays as the fork left it.
        slot->pipeline = nullptr;
        slot->engine = nullptr;
        return ORDO_OK;
      }
      if (slot->pipeline->busy()) return refuse_busy(api);
      pipeline = slot->pipeline;
      engine = slot->engine;
      slot->pipeline = nullptr;
      slot->engine = nullptr;
    }
    delete pipeline;
    if (engine) unpin_engine(engine);  // may free the engine, if it is gone otherwise
    return ORDO_OK;
  });
}

// ---- inside a pipe callback --------------------------------------------------------------------

ORDO_API uint64_t ordo_pipeflow_token(const ordo_pipeflow* pf) {
  const Pipeflow* f = pipeflow_of(pf);
  return f ? f->token : UINT64_MAX;
}

ORDO_API uint32_t ordo_pipeflow_line(const ordo_pipeflow* pf) {
  const Pipeflow* f = pipeflow_of(pf);
  return f ? f->line : UINT32_MAX;
}

ORDO_API uint32_t ordo_pipeflow_pipe(const ordo_pipeflow* pf) {
  const Pipeflow* f = pipeflow_of(pf);
  return f ? f->pipe : UINT32_MAX;
}

ORDO_API uint32_t ordo_pipeflow_num_deferrals(const ordo_pipeflow* pf) {
  const Pipeflow* f = pipeflow_of(pf);
  if (!f) return UINT32_MAX;
  return f->deferrals < UINT32_MAX ? static_cast<uint32_t>(f->deferrals) : UINT32_MAX;
}

ORDO_API ordo_status ordo_pipeflow_stop(ordo_pipeflow* pf) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    Pipeflow* f = nullptr;
    if (ordo_status s = pipeflow_for_first_pipe(api, pf, &f)) return s;
    f->stop = true;
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_pipeflow_defer(ordo_pipeflow* pf, uint64_t token) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    Pipeflow* f = nullptr;
    if (ordo_status s = pipeflow_for_first_pipe(api, pf, &f)) return s;
    f->source->add_target(token);  // std::bad_alloc: NO_MEMORY, from guarded()
    return ORDO_OK;
  });
}

}  // extern "C"
