// Engine: the dependency engine behind one ordo_engine handle. It ties together the parts that
// each do one job (docs/ARCHITECTURE.md shows how a push flows through them):
//   PushPath       an op gets in: routing, var handles, counting, the var queues, the window
//   OpRunner       a ready op runs and completes, and hands on what it made ready
//   PendingCounts  how many ops are pending, and the waits on that number
//   VarWaits       ordo_wait_for_var and the waits on deletes (the wait-mark protocol)
//   PreparedOps    ordo_opr_new / push_prepared / delete
//   DeviceTable    the worker groups, found by device and property
// and owns the var table, the op pool, the tracer, and the lifecycle (start, shutdown). It is
// the WorkerHost its worker groups call.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "core/op_life.h"
#include "core/op_pool.h"
#include "core/var_table.h"
#include "engine/bulk_bundle.h"
#include "engine/device_table.h"
#include "engine/engine_config.h"
#include "engine/op_outcomes.h"
#include "engine/op_runner.h"
#include "engine/pending_counts.h"
#include "engine/prepared_ops.h"
#include "engine/push_path.h"
#include "engine/thread_state.h"
#include "engine/var_waits.h"
#include "exec/worker_host.h"
#include "ordo/ordo.h"
#include "trace/tracer.h"

namespace ordo {

class Engine final : public WorkerHost {
  friend class VarWaits;  // the wait-mark protocol pushes marks and finalizes their ops

 public:
  Engine(uint32_t tag, const EngineConfig& cfg);
  ~Engine();
  // Creates the worker groups and starts the CPU workers.
  ordo_status start();
  // Rejects new pushes, drains everything pushed, stops and joins the workers. Idempotent.
  void shutdown();
  // Runs the free_fn of every prepared op never deleted. Called by the thread that lets the
  // last reference go, after the drain: from then on no caller can name the engine. Idempotent.
  void free_prepared_ops() { prepared_.finish_all_live(); }

  const EngineConfig& config() const { return cfg_; }
  uint32_t tag() const { return tag_; }
  uint64_t uid() const { return uid_; }  // unique for the life of the process
  // A free lane for a thread that is not a worker (see push_lane.h), or nullptr.
  PushLane* claim_external_lane(uint64_t token) { return counts_.claim_external_lane(token); }
  bool shutting_down() const { return push_.closed(); }
  // True when the calling thread is running an op (or its free_fn) of this engine: blocking on
  // this engine from there could wait for itself.
  bool called_from_inside() const { return this_thread::busy_with(this); }

  // --- variables ---
  ordo_status var_new(ordo_var* out);
  ordo_status var_delete(ordo_var v);
  ordo_status var_clear_error(ordo_var v);
  ordo_status var_get_error(ordo_var v, int32_t* code, char* buf, size_t cap);

  // --- ops ---
  // Always inlined, as PushPath::push is: a call here costs every push (docs/PERFORMANCE.md).
  [[gnu::always_inline]] ordo_status push(const OpSpec& spec, const ordo_var* const_vars,
                                          size_t num_const, const ordo_var* mutable_vars,
                                          size_t num_mutable) {
    return push_.push(spec, const_vars, num_const, mutable_vars, num_mutable);
  }
  // ordo_opr_push with no options and one var (fn checked): PushPath::push_plain, inlined.
  [[gnu::always_inline]] ordo_status push_plain(ordo_fn fn, void* user_data, ordo_var v,
                                                bool write) {
    return push_.push_plain(fn, user_data, v, write);
  }
  ordo_status prepared_new(const OpSpec& spec, const ordo_var* const_vars, size_t num_const,
                           const ordo_var* mutable_vars, size_t num_mutable, ordo_opr* out) {
    return prepared_.create(spec, const_vars, num_const, mutable_vars, num_mutable, out);
  }
  ordo_status prepared_push(ordo_opr opr, int32_t priority) {
    return prepared_.push(opr, priority);
  }
  ordo_status prepared_delete(ordo_opr opr) { return prepared_.destroy(opr); }

  // --- seams for capture and replay (src/graph/) ---
  // Pushes an op routed and resolved before (a capture's record, engine/push_recorder.h). A
  // var deleted since is INVALID_HANDLE here, under its lock, as for any push.
  // A GPU op may start at once (early release: PushPath::push_resolved_any_device).
  ordo_status push_resolved(const OpSpec& spec, WorkerGroup* group, VarRef* refs, size_t n) {
    return push_.push_resolved_any_device(spec, group, refs, n);
  }
  // Pushes a chain op (spec.kind kChain, engine/bulk_chain.h) standing for `count` ops: counted
  // in ordo_engine_stats as that many pushes, before it can complete.
  ordo_status push_chain(const OpSpec& spec, WorkerGroup* group, VarRef* refs, size_t n,
                         uint32_t count) {
    counts_.count_bulk_pushed(count - 1);
    const ordo_status s = push_.push_resolved(spec, group, refs, n);
    if (s != ORDO_OK) counts_.count_bulk_pushed(-static_cast<int64_t>(count - 1));
    return s;
  }
  // A graph launch's bundle (engine/bulk_bundle.h): its carrier is made (counted as a push),
  // members join it and are published, the carrier is queued as they are (post_bundle: unless
  // it is queued already), the join ends, and the launching thread drops its reference.
  ordo_status begin_bundle(BundleRun* run, WorkerGroup* group, OpBlock** carrier) {
    return push_.begin_bundle(run, group, carrier);
  }
  void post_bundle(OpBlock* carrier) { runner_.post_bundle(carrier, nullptr); }
  // `joined` members joined: the carrier stands for that many pushes in ordo_engine_stats.
  void end_bundle(OpBlock* carrier, BundleRun* run, uint32_t joined) {
    counts_.count_bulk_pushed(static_cast<int64_t>(joined) - 1);  // before it can complete
    run->end_join(joined);
    if (joined != 0) runner_.post_bundle(carrier, nullptr);
  }
  void drop_bundle(OpBlock* carrier) { runner_.drop_bundle(carrier, 1, runner_.current_worker()); }
  // A thread's capture of this engine's pushes begins or ends (engine/push_recorder.h).
  void capture_opened() { push_.capture_opened(); }
  void capture_closed() { push_.capture_closed(); }
  // Drops a prepared op's reference that a capture kept from a recorded push.
  void prepared_release(PreparedOp* p) { prepared_.release_captured(p); }

  // --- async completion ---
  ordo_status defer(OpBlock* op, ordo_completion* out) { return runner_.defer(op, out); }
  ordo_status complete(uint32_t gen, uint32_t index, int32_t code, const char* message) {
    return runner_.complete(gen, index, code, message);
  }
  // complete() inside a forced unwind's handler, for ordo's own deferred ops only (see
  // OpRunner::complete_unwinding): a pushed pipeline run whose pipe callback ended the thread.
  ordo_status complete_unwinding(uint32_t gen, uint32_t index, int32_t code, const char* message) {
    return runner_.complete_unwinding(gen, index, code, message);
  }

  // --- observability (SPEC §9) ---
  void stats(ordo_stats* out) const;
  // The engine's ready queues (one per worker group, device by device), for
  // ordo_engine_queue_stats: how many, and the index-th one (false: no such index).
  uint32_t queue_count() const { return devices_.queue_count(); }
  bool queue_stats(uint32_t index, ordo_queue_stats* out) const {
    return devices_.queue_stats(index, out);
  }
  ordo_status write_trace(const char* path) const;

  // --- waiting ---
  ordo_status wait_for_var(ordo_var v, const uint64_t* timeout_ns);
  ordo_status wait_for_all(const uint64_t* timeout_ns);
  // ordo_wait_for_var_async (engine/async_wait.cpp).
  ordo_status wait_for_var_async(ordo_var v, ordo_wait_fn fn, void* user_data);

  // --- diagnostics ---
  // Writes every pending op (oldest first: state, how long, vars) and every var that waits hang
  // on (ordo_engine_dump).
  void dump(std::FILE* out) const;
  // For a timed wait that ran out: names up to 3 of the caller's oldest pending ops (on `only`
  // when given), as "; oldest: ..."; "" when none.
  std::string oldest_pending(const VarSlot* only) const;

  // --- called by workers (WorkerHost) ---
  void enter_worker(Worker* w) override;
  void execute(OpBlock* op, Worker* self) override { runner_.execute(op, self); }
  void flush_completions(Worker* w) override { counts_.announce_batch(&w->unflushed); }
  // An idle spell ended: the ops pushed after it are stamped with a new clock reading.
  void worker_woke(Worker*) override { push_.refresh_ticks(); }
  // A worker thread that caller code ended is replaced at once while a thread waits on the
  // engine (a wait, destroy's drain) or an async wait is pending; else at the next of those
  // (WorkerGroup::worker_ended says why not always at once).
  bool replace_ended_workers_now() override { return waiting_.load(std::memory_order_seq_cst) > 0; }
  // Counts a wait (see above) and gives every vacant worker a thread: the wait may need them.
  void begin_waiting() {
    waiting_.fetch_add(1, std::memory_order_seq_cst);
    devices_.refill_workers();
  }
  void end_waiting() { waiting_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  ordo_status finish_start();  // the create succeeded: records it (ORDO_TRACE numbering)

  const uint32_t tag_;
  const uint64_t uid_;
  LifeClock life_clock_;  // converts the op blocks' push times (OpLife) for diagnostics
  EngineConfig cfg_;      // set in the constructor; trace_path then points into tracer_
  bool started_ = false;  // start() succeeded: ordo_engine_create returned it
  const std::unique_ptr<Tracer> tracer_;  // nullptr: tracing off
  VarTable vars_;
  OpPool pool_{this};
  OpOutcomes outcomes_;
  PendingCounts counts_;
  DeviceTable devices_{this};
  VarWaits waits_{*this};
  PreparedOps prepared_;
  OpRunner runner_;
  PushPath push_;
  std::mutex shutdown_mutex_;
  bool drained_ = false;             // shutdown() has drained and joined (under shutdown_mutex_)
  std::atomic<int32_t> waiting_{0};  // threads in a wait or drain, and async waits pending
};

}  // namespace ordo
