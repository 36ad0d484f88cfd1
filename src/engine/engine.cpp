#include "engine/engine.h"

#include <cstring>

#include "base/asymmetric_fence.h"
#include "base/last_error.h"
#include "core/handle_bits.h"
#include "engine/deferred_calls.h"
#include "engine/engine_stats.h"
#include "engine/pending_report.h"
#include "engine/timeouts.h"
#include "trace/trace_file.h"

namespace ordo {

namespace {

uint64_t new_engine_uid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// One lane per worker thread the config asks for (PendingCounts), the GPUs' included
// (DeviceTable::start_gpus).
uint32_t worker_count(const EngineConfig& cfg) {
  if (cfg.kind == ORDO_ENGINE_NAIVE) return 0;
  if (cfg.kind == ORDO_ENGINE_POOLED) return static_cast<uint32_t>(cfg.cpu_threads);
  const uint32_t per_gpu = static_cast<uint32_t>(gpu_compute_threads(cfg) + 2 * cfg.copy_threads);
  return static_cast<uint32_t>(cfg.cpu_threads + cfg.cpu_priority_threads + 2 * cfg.copy_threads) +
         static_cast<uint32_t>(device_count()) * per_gpu;
}

}  // namespace

Engine::Engine(uint32_t tag, const EngineConfig& cfg)
    : tag_(tag),
      uid_(new_engine_uid()),
      cfg_(cfg),
      // ORDO_TRACE's path is numbered in start(), once the create has succeeded.
      tracer_(cfg.trace_path ? std::make_unique<Tracer>(cfg.trace_path) : nullptr),
      counts_(worker_count(cfg), cfg.max_pending),
      prepared_(this, tag, vars_, push_),
      runner_({this, tag, pool_, vars_, prepared_.table(), waits_, counts_, outcomes_,
               tracer_.get(), devices_, cfg.gpu_stream_waits}),
      push_({this, this, tag, uid_, cfg_, vars_, pool_, counts_, devices_, runner_}) {
  cfg_.trace_path = tracer_ ? tracer_->path().c_str() : nullptr;  // the caller's copy may go
}

Engine::~Engine() {
  shutdown();
  prepared_.finish_all_live();
}

ordo_status Engine::start() {
  // Registers the process for membarrier now (once per process): the kernel takes milliseconds
  // for it (docs/PERFORMANCE.md), which the first push used to pay instead.
  AsymmetricFence::prepare();
  if (ordo_status s = devices_.start(cfg_, &OpRunner::gpu_done, &runner_)) return s;
  return finish_start();
}

// The create has succeeded: only now does ORDO_TRACE's path take the process's next number, so
// that a failed create leaves no gap in them.
ordo_status Engine::finish_start() {
  push_.refresh_ticks();  // the first pushes' stamp: now, not when the constructor ran
  if (tracer_ && cfg_.trace_from_env) {
    tracer_->set_path(next_env_trace_path(tracer_->path().c_str()));
    cfg_.trace_path = tracer_->path().c_str();
  }
  started_ = true;
  return ORDO_OK;
}

void Engine::shutdown() {
  std::lock_guard<std::mutex> g(shutdown_mutex_);
  if (drained_) return;
  push_.close();
  // Pairs with the light fence in PushPath::push_resolved: every push either counted itself
  // before this point (and is waited for below) or sees the path closed and backs out.
  AsymmetricFence::heavy();
  begin_waiting();
  counts_.wait_idle(nullptr);
  end_waiting();
  devices_.stop_and_join();
  drained_ = true;
  // An engine whose create failed never existed for the caller: it must not replace the file.
  if (tracer_ && started_) {
    KeepLastError keep;  // destroy returns ORDO_OK: the caller's message must survive it
    if (tracer_->write(tracer_->path().c_str()) != ORDO_OK) {
      // Destroy cannot fail for this, and the caller asked for the file: say so rather than lose
      // the trace silently.
      std::fprintf(stderr, "ordo: %s\n", ordo_last_error_message());
    }
  }
}

void Engine::enter_worker(Worker* w) {
  this_thread::worker = w;
  if (w->entered) {
    // The worker replaces one whose thread a callback ended (WorkerGroup::run): it keeps the
    // lane and trace row, and first runs the caller code that thread could not.
    run_deferred_calls();
    return;
  }
  w->entered = true;
  // A worker without a lane of its own (more started than the config counted) counts through
  // the shared paths.
  w->lane = counts_.claim_worker_lane();
  if (tracer_) w->trace = tracer_->add_worker_row(w->group->role(), w->index);
}

// ---------------------------------------------------------------------------------------------
// Variables

ordo_status Engine::var_new(ordo_var* out) {
  if (shutting_down()) return fail(ORDO_ERR_SHUTDOWN, "ordo_var_new: the engine is shut down");
  VarSlot* v;
  if (ordo_status s = vars_.allocate(&v)) return s;
  *out = HandleBits::encode(tag_, HandleKind::kVar, v->gen, v->index);
  return ORDO_OK;
}

ordo_status Engine::var_delete(ordo_var v) {
  return push_.push_internal(OpKind::kDeleteVar, v, VarLink::kWriteBit, nullptr);
}

ordo_status Engine::var_clear_error(ordo_var v) {
  return push_.push_internal(OpKind::kClearError, v, VarLink::kWriteBit, nullptr);
}

ordo_status Engine::var_get_error(ordo_var h, int32_t* code, char* buf, size_t cap) {
  VarRefs refs;
  if (ordo_status s = refs.collect(vars_, tag_, &h, 1, nullptr, 0)) return s;
  VarSlot* v = refs[0].slot;
  SpinGuard g(v->push_lock);
  if (!v->named_by(refs[0].gen)) return stale_var(tag_, refs[0]);
  SpinGuard e(v->error_lock);
  ErrorRecord* err = v->current_error();
  *code = err ? err->code : 0;
  if (buf && cap) {
    const char* text = err ? err->text : "";
    size_t n = std::strlen(text);
    if (n >= cap) n = cap - 1;
    std::memcpy(buf, text, n);
    buf[n] = '\0';
  }
  return ORDO_OK;
}

// ---------------------------------------------------------------------------------------------
// Observability

void Engine::stats(ordo_stats* out) const {
  collect_stats(counts_, outcomes_, devices_, tracer_.get(), out);
}

ordo_status Engine::write_trace(const char* path) const {
  if (!tracer_) {
    return fail(ORDO_ERR_INVALID_STATE,
                "ordo_engine_write_trace: tracing is off for this engine (set "
                "ordo_engine_config.trace_path or ORDO_TRACE)");
  }
  return tracer_->write(path);
}

// ---------------------------------------------------------------------------------------------
// Waiting

ordo_status Engine::wait_for_all(const uint64_t* timeout_ns) {
  push_.refresh_ticks();  // ops pushed after an idle spell are stamped with a recent reading
  if (shutting_down()) return fail(ORDO_ERR_SHUTDOWN, "ordo_wait_for_all: the engine is shut down");
  if (called_from_inside()) {
    return fail(ORDO_ERR_WOULD_DEADLOCK,
                "ordo_wait_for_all called from inside an op of the same engine would wait for "
                "itself; push a follow-up op instead");
  }
  begin_waiting();
  const ordo_status idle = counts_.wait_idle(timeout_ns);
  end_waiting();
  if (idle != ORDO_OK) {
    return fail(ORDO_ERR_TIMEOUT, "ordo_wait_for_all: timed out with ops still pending%s",
                worth_a_report(timeout_ns) ? oldest_pending(nullptr).c_str() : "");
  }
  ErrorRecord* first = outcomes_.take_first_failure();
  if (!first) return ORDO_OK;
  ordo_status s = fail(ORDO_ERR_OP_FAILED, "%s", first->text);
  ErrorRecord::release(first);
  return s;
}

ordo_status Engine::wait_for_var(ordo_var v, const uint64_t* timeout_ns) {
  push_.refresh_ticks();
  begin_waiting();
  const ordo_status s = waits_.wait(v, timeout_ns);
  end_waiting();
  return s;
}

// ---------------------------------------------------------------------------------------------
// Diagnostics

void Engine::dump(std::FILE* out) const {
  PendingReport(pool_, vars_, life_clock_, tag_).write(out);
  std::fflush(out);
}

std::string Engine::oldest_pending(const VarSlot* only) const {
  return PendingReport(pool_, vars_, life_clock_, tag_).oldest(only, 3);
}

}  // namespace ordo
