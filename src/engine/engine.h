// Engine: the dependency engine behind one ordo_engine handle. It owns the var table, the op
// pool, the prepared-op table and the worker groups, and implements push -> dependency
// resolution -> execution -> completion. See docs/ARCHITECTURE.md for the flow.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "core/op_pool.h"
#include "core/push_lane.h"
#include "core/var_refs.h"
#include "core/var_table.h"
#include "engine/engine_config.h"
#include "engine/prepared.h"
#include "engine/throttle_pace.h"
#include "engine/var_waits.h"
#include "exec/worker_group.h"
#include "ordo/ordo.h"
#include "trace/tracer.h"

namespace ordo {

struct ErrorRecord;

// Where a thread that finishes an op counts it and returns its block (Engine::completion_site).
struct CompletionSite {
  PushLane* lane;       // nullptr: the engine's shared completion counter
  uint32_t* unflushed;  // with `lane`: completions not yet announced to waiters
  OpCache* cache;       // nullptr: the pool's locked shards
};

// What a push asks for, before it becomes an OpBlock.
struct OpSpec {
  ordo_fn fn = nullptr;
  void* user_data = nullptr;
  ordo_free_fn free_fn = nullptr;
  int32_t priority = 0;
  int32_t prop = ORDO_PROP_NORMAL;
  int32_t device_type = ORDO_DEVICE_CPU;
  int32_t device_id = 0;
  const char* name = nullptr;
  OpKind kind = OpKind::kUser;
  void* internal = nullptr;
};

// The op whose callback runs on this thread when `exec` is the exec that callback was given
// (nullptr for any other exec: a kept one, another thread's, a made-up one); and the worker this
// thread is (nullptr when none).
OpBlock* op_of_exec(const ordo_exec* exec);
Worker* running_worker();

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
  PushLane* claim_external_lane(uint64_t token);
  bool shutting_down() const { return shutting_down_.load(std::memory_order_acquire); }
  // True when the calling thread is running an op (or its free_fn) of this engine: blocking on
  // this engine from there could wait for itself.
  bool called_from_inside() const;

  // --- variables ---
  ordo_status var_new(ordo_var* out);
  ordo_status var_delete(ordo_var v);
  ordo_status var_clear_error(ordo_var v);
  ordo_status var_get_error(ordo_var v, int32_t* code, char* buf, size_t cap);

  // --- ops ---
  // Checks the op's placement (property, device) and returns the group that runs it (nullptr:
  // inline), starting its threads if needed.
  ordo_status route(int32_t prop, int32_t device_type, int32_t device_id, WorkerGroup** out);
  ordo_status push(const OpSpec& spec, const ordo_var* const_vars, size_t num_const,
                   const ordo_var* mutable_vars, size_t num_mutable);
  ordo_status prepared_new(const OpSpec& spec, const ordo_var* const_vars, size_t num_const,
                           const ordo_var* mutable_vars, size_t num_mutable, ordo_opr* out);
  ordo_status prepared_push(ordo_opr opr, int32_t priority);
  ordo_status prepared_delete(ordo_opr opr);

  // --- async completion ---
  ordo_status defer(OpBlock* op, ordo_completion* out);
  ordo_status complete(uint32_t gen, uint32_t index, int32_t code, const char* message);

  // --- observability (SPEC §9) ---
  void stats(ordo_stats* out) const;
  // The engine's ready queues (one per worker group, device by device), for
  // ordo_engine_queue_stats: how many, and the index-th one (false: no such index).
  uint32_t queue_count() const;
  bool queue_stats(uint32_t index, ordo_queue_stats* out) const;
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
  void execute(OpBlock* op, Worker* self) override;
  void flush_completions(Worker* w) override;
  void worker_woke(Worker* w) override;

 private:
  enum GroupIndex { kCpu, kCpuPriority, kCopyTo, kCopyFrom, kNumGroups };

  ordo_status enqueue_on_vars(OpBlock* op, VarRef* refs, size_t n, bool* ready);
  ordo_status push_resolved(const OpSpec& spec, WorkerGroup* group, VarRef* refs, size_t n);
  // `access`: VarLink::kWriteBit, or kMarkBit for ordo_wait_for_var's mark.
  ordo_status push_internal(OpKind kind, ordo_var v, uintptr_t access, void* internal);
  void throttle(PushLane* lane);
  void finish_prepared(PreparedOp* p);
  void wait_for_window(int64_t low);
  template <class F>
  void as_helper(PushLane* lane, F&& run);
  bool help_while_throttled(PushLane* lane, int64_t low);
  bool run_on_pusher(OpBlock* op, PushLane* lane);
  void run_inline_on_pusher(OpBlock* op, PushLane* lane);
  void check_throttle(PushLane* lane, bool shared);
  int64_t pending_now() const;
  ordo_status finish_start();  // the create succeeded: records it (ORDO_TRACE numbering)
  int64_t user_pending_now() const;
  // A throttled pusher waits until at most this many ops are pending.
  int64_t throttle_low() const { return cfg_.max_pending / 2; }
  int64_t completed_now() const;
  void add_completed(int64_t n);
  void announce_completions();
  ordo_status refuse_push(ordo_status status);
  void wait_for_releases() const;
  void begin_release(PushLane* lane);
  void end_release(PushLane* lane);
  void announce_batch(uint32_t* unflushed);
  void fill(OpBlock* op, const OpSpec& spec, WorkerGroup* group);
  bool attach_links(OpBlock* op, size_t n);
  void finalize(OpBlock* op, ErrorRecord* failure, Worker* self);
  // finalize() after the user data is released: the vars, the block, the ops made ready.
  void release_vars(OpBlock* op, ErrorRecord* failure, Worker* self);
  void release_user_data(OpBlock* op);
  // Forced unwinds through caller code (engine/forced_unwind.cpp): a callback's thread ended
  // (pthread_exit, cancellation) and the op fails; a free_fn ended it and the op is finished;
  // an op this thread was to run inline fails without being called.
  void op_unwound(OpBlock* op, Worker* self);
  void release_vars_unwound(OpBlock* op, ErrorRecord* failure, Worker* self);
  void skip_unwound(OpBlock* op);
  // Hands a ready op on: kept by `self`, put on its deque, or queued on its group's ready
  // rings (`ring_hint` picks one), or run inline.
  void dispatch(OpBlock* op, Worker* self, size_t ring_hint);
  void run_inline(OpBlock* op);
  // An ordo_wait_for_var_async's op has its turn (engine/async_wait.cpp).
  void run_async_wait(OpBlock* op, Worker* self);
  void record_failure(ErrorRecord* r);
  CompletionSite completion_site(Worker* self) const;
  void note_completed(const CompletionSite& at);
  template <bool kTraced>
  void run_user_op(OpBlock* op, Worker* self);
  void trace_op(const OpBlock* op, Worker* self, uint64_t start_ns, TraceOutcome outcome);
  ordo_status wait_idle(const uint64_t* timeout_ns);
  Worker* current_worker() const;

  const uint32_t tag_;
  const uint64_t uid_;
  LifeClock life_clock_;  // converts the op blocks' push times (OpLife) for diagnostics
  // The cycle counter as last read (core/op_life.h): what a push stamps its op with. Written
  // rarely, on a line of its own, so pushes read it from their cache.
  alignas(64) std::atomic<uint64_t> recent_ticks_{life_ticks()};
  void refresh_ticks() { recent_ticks_.store(life_ticks(), std::memory_order_relaxed); }
  EngineConfig cfg_;  // set in the constructor; trace_path then points into tracer_
  const int64_t throttle_check_every_;  // pushes of one lane between two looks at the window
  bool started_ = false;                // start() succeeded: ordo_engine_create returned it
  std::unique_ptr<Tracer> tracer_;      // nullptr: tracing off
  VarTable vars_;
  OpPool pool_{this};
  PreparedTable prepared_;
  VarWaits waits_{*this};  // ordo_wait_for_var and the waits on deletes
  std::unique_ptr<WorkerGroup> groups_[kNumGroups];
  // Worker groups per device, found by device type and id (find_device): the CPU's today; each
  // GPU's compute and copy groups will be entries of their own. by_prop[p] is the group that
  // runs ORDO_PROP_* p there; several entries may share a group (pooled); nullptr: inline
  // (naive). groups_ above owns them.
  struct DeviceGroups {
    int32_t device_type;
    int32_t device_id;
    WorkerGroup* by_prop[kNumGroups];
  };
  static constexpr uint32_t kMaxDevices = 1;  // the CPU; GPUs raise it
  DeviceGroups devices_[kMaxDevices] = {{ORDO_DEVICE_CPU, 0, {}}};
  uint32_t num_devices_ = 1;
  const DeviceGroups* find_device(int32_t device_type, int32_t device_id) const;

  // Pending ops = all lanes' push counts - (completed_ + the worker lanes' completion counts).
  // Each lane is written by one thread, so neither a push nor a worker's completion costs an
  // atomic read-modify-write; waits add the lanes up (completions first). completed_ counts
  // completions on threads that are not workers.
  std::unique_ptr<PushLane[]> lanes_;
  uint32_t num_lanes_ = 0;
  uint32_t first_external_lane_ = 0;  // lanes below this belong to workers
  // Lanes [0, lanes_used_) have had an owner; every count of the others is still 0, so the sums
  // stop there (a pushing thread raises it, release, before its first count on a new lane).
  std::atomic<uint32_t> lanes_used_{0};
  uint32_t lanes_in_use() const { return lanes_used_.load(std::memory_order_acquire); }
  std::atomic<uint32_t> next_worker_lane_{0};
  SpinLock shared_lane_lock_;  // for threads that found every lane taken
  PushLane shared_lane_;
  alignas(64) std::atomic<int64_t> completed_{0};
  alignas(64) std::atomic<bool> shutting_down_{false};
  std::atomic<int32_t> idle_waiters_{0};
  // Threads that are not workers releasing the vars of an op already counted as completed.
  std::atomic<int32_t> external_releasing_{0};
  EventCount throttle_wake_;  // pushers waiting for pending ops to fall to max_pending / 2
  ThrottlePace pace_;         // how long a throttled pusher waits for the count to fall
  std::mutex idle_mutex_;
  std::condition_variable idle_cv_;
  std::mutex shutdown_mutex_;
  bool drained_ = false;  // shutdown() has drained and joined (under shutdown_mutex_)

  // Counters for ordo_engine_stats that the hot path does not need: internal ops (so that the
  // caller's ops can be told apart) and the failure paths.
  std::atomic<int64_t> internal_pushed_{0};
  std::atomic<int64_t> internal_completed_{0};
  std::atomic<int64_t> failures_{0};  // failed, skipped ones included (SPEC 3)
  std::atomic<int64_t> skipped_{0};
  std::atomic<int64_t> rejected_{0};  // pushes that failed after their lane counted them

  std::mutex failure_mutex_;              // failure path only
  ErrorRecord* first_failure_ = nullptr;  // since the last ordo_wait_for_all
};

}  // namespace ordo
