#include "engine/engine.h"

#include <cxxabi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

#include "base/asymmetric_fence.h"
#include "base/hot_tls.h"
#include "base/last_error.h"
#include "base/prefetch.h"
#include "core/error_record.h"
#include "core/exec_token.h"
#include "core/handle_bits.h"
#include "engine/deferred_calls.h"
#include "engine/lane_cache.h"
#include "engine/pending_report.h"
#include "engine/test_seams.h"
#include "engine/timeouts.h"
#include "trace/trace_file.h"

namespace ordo {

namespace {

// The worker this thread is (nullptr on other threads).
ORDO_HOT_TLS Worker* tls_worker = nullptr;
// The op whose callback is on this thread's stack, and the exec token that callback was given
// (an exec is valid only while it is that token: core/exec_token.h).
struct RunningCallback {
  OpBlock* op;
  uint64_t token;
};
ORDO_HOT_TLS RunningCallback tls_running = {nullptr, 0};
ORDO_HOT_TLS ExecTokens tls_exec_tokens;

// Engines whose ops (or free_fns) are on this thread's stack: blocking on one of them from here
// could mean waiting for ourselves.
constexpr int kBusyMax = 8;
ORDO_HOT_TLS Engine* tls_busy[kBusyMax];
ORDO_HOT_TLS int tls_busy_depth = 0;

struct BusyScope {
  explicit BusyScope(Engine* e) {
    if (tls_busy_depth < kBusyMax) tls_busy[tls_busy_depth] = e;
    ++tls_busy_depth;
  }
  ~BusyScope() { --tls_busy_depth; }
};

// Whether an op (or free_fn) of any engine runs on this thread. ORDO_ENGINE_FLAG_PUSHERS_HELP
// runs ops only on a thread that pushes from outside every op: an op of this engine run inside
// another's could wait for what the outer op does after its push returns, and never see it.
bool on_an_op_stack() {
  return tls_worker != nullptr || tls_busy_depth > 0;
}

// Ops that run inline are queued here while another inline op of the same engine runs on this
// thread, so nested readiness (an inline op making another ready) loops instead of recursing.
// An op of another engine gets a nested loop: queuing it behind this engine's op could leave a
// wait on that other engine blocked forever.
struct InlineQueue {
  Engine* engine = nullptr;
  OpBlock* head = nullptr;
  OpBlock* tail = nullptr;
};
ORDO_HOT_TLS InlineQueue* tls_inline = nullptr;

// A pushing thread that runs ops for the workers (ORDO_ENGINE_FLAG_PUSHERS_HELP, see
// Engine::as_helper).
struct Helper {
  const Engine* engine;
  PushLane* lane;
  uint32_t unflushed;  // completions not yet announced to waiters (see announce_batch)
};
ORDO_HOT_TLS Helper* tls_helper = nullptr;

// Completions a helping pusher runs between two looks at the pending count.
constexpr uint32_t kHelpCheckEvery = 64;

// Runs the user's callback; returns the failure it caused (nullptr when it succeeded or
// deferred). Always inlined: with two instances of run_user_op (traced and not) the compiler
// would otherwise make it a call, and the untraced op would pay ~18 instructions for tracing
// existing (callgrind, workload B: 826 against 808 per op).
__attribute__((always_inline)) inline ErrorRecord* call_user(OpBlock* op) {
  const RunningCallback outer = tls_running;
  const uint64_t token = next_exec_token(tls_exec_tokens);
  tls_running = {op, token};
  int32_t code = 0;
  bool threw = false;
  try {
    code = op->fn(exec_of_token(token), op->user_data);
  } catch (abi::__forced_unwind&) {
    tls_running = outer;
    throw;  // the thread is ending (pthread_exit, cancellation): run_user_op finishes the op
  } catch (...) {
    threw = true;
  }
  tls_running = outer;
  if (op->deferred) return nullptr;
  if (threw) return ErrorRecord::make(ORDO_ERR_OP_FAILED, op->op_name(), "the callback threw");
  return code == 0 ? nullptr : ErrorRecord::make(code, op->op_name(), nullptr);
}

constexpr uint32_t kExternalLanes = 64;
// A lane checks the window every so many of its pushes (the check sums every lane): an eighth of
// the window, at most 256, so that the window holds within an eighth at every size.
constexpr int64_t kThrottleCheckMax = 256;
int64_t throttle_check_interval(int32_t max_pending) {
  return max_pending <= 0
             ? kThrottleCheckMax
             : std::max<int64_t>(1, std::min<int64_t>(kThrottleCheckMax, max_pending / 8));
}

uint64_t new_engine_uid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

uint32_t worker_count(const EngineConfig& cfg) {
  if (cfg.kind == ORDO_ENGINE_NAIVE) return 0;
  if (cfg.kind == ORDO_ENGINE_POOLED) return static_cast<uint32_t>(cfg.cpu_threads);
  return static_cast<uint32_t>(cfg.cpu_threads + cfg.cpu_priority_threads + 2 * cfg.copy_threads);
}

}  // namespace

OpBlock* op_of_exec(const ordo_exec* exec) {
  return tls_running.op && token_of_exec(exec) == tls_running.token ? tls_running.op : nullptr;
}
Worker* running_worker() {
  return tls_worker;
}

Engine::Engine(uint32_t tag, const EngineConfig& cfg)
    : tag_(tag),
      uid_(new_engine_uid()),
      cfg_(cfg),
      throttle_check_every_(throttle_check_interval(cfg.max_pending)) {
  // ORDO_TRACE's path is numbered in start(), once the create has succeeded.
  if (cfg.trace_path) tracer_ = std::make_unique<Tracer>(cfg.trace_path);
  cfg_.trace_path = tracer_ ? tracer_->path().c_str() : nullptr;  // the caller's copy may go
  first_external_lane_ = worker_count(cfg);
  num_lanes_ = first_external_lane_ + kExternalLanes;
  lanes_.reset(new PushLane[num_lanes_]);
  lanes_used_.store(first_external_lane_, std::memory_order_relaxed);
}

PushLane* Engine::claim_external_lane(uint64_t token) {
  for (uint32_t i = first_external_lane_; i < num_lanes_; ++i) {
    uint64_t free = 0;
    if (lanes_[i].owner.load(std::memory_order_relaxed) == 0 &&
        lanes_[i].owner.compare_exchange_strong(free, token, std::memory_order_acquire)) {
      lanes_[i].runs_ready_ops = false;  // the last owner's throttle state is not this thread's
      uint32_t used = lanes_used_.load(std::memory_order_relaxed);
      while (used < i + 1 &&
             !lanes_used_.compare_exchange_weak(used, i + 1, std::memory_order_release)) {
      }
      return &lanes_[i];
    }
  }
  return nullptr;
}

Engine::~Engine() {
  shutdown();
  for (auto& g : groups_) g.reset();
  prepared_.finish_all_live();
  ErrorRecord::release(first_failure_);
}

ordo_status Engine::start() {
  // Registers the process for membarrier now (once per process): the kernel takes 10-25 ms for it
  // here, which the first push used to pay instead (a first push of 10-25 ms, then ~0.1 us).
  AsymmetricFence::prepare();
  if (cfg_.kind == ORDO_ENGINE_NAIVE) return finish_start();  // every route stays inline
  groups_[kCpu] = std::make_unique<WorkerGroup>(this, "cpu", cfg_.cpu_threads);
  DeviceGroups& cpu = devices_[0];
  if (cfg_.kind == ORDO_ENGINE_POOLED) {
    for (auto& r : cpu.by_prop) r = groups_[kCpu].get();
  } else {
    groups_[kCpuPriority] = std::make_unique<WorkerGroup>(this, "prio", cfg_.cpu_priority_threads);
    groups_[kCopyTo] = std::make_unique<WorkerGroup>(this, "h2d", cfg_.copy_threads);
    groups_[kCopyFrom] = std::make_unique<WorkerGroup>(this, "d2h", cfg_.copy_threads);
    for (int i = 0; i < kNumGroups; ++i) cpu.by_prop[i] = groups_[i].get();
  }
  if (groups_[kCpu]->ensure_started() != ORDO_OK) {
    return fail(ORDO_ERR_NO_MEMORY, "ordo_engine_create: could not start any worker thread");
  }
  return finish_start();
}

// The create has succeeded: only now does ORDO_TRACE's path take the process's next number, so
// that a failed create leaves no gap in them.
ordo_status Engine::finish_start() {
  refresh_ticks();  // the first pushes' stamp: now, not when the constructor ran
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
  shutting_down_.store(true, std::memory_order_seq_cst);
  // Pairs with the light fence in push_resolved: every push either counted itself before this
  // point (and is waited for below) or sees shutting_down_ and backs out.
  AsymmetricFence::heavy();
  wait_idle(nullptr);
  for (auto& group : groups_) {
    if (group) group->stop_and_join();
  }
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

bool Engine::called_from_inside() const {
  if (tls_worker && tls_worker->group->host() == this) return true;
  // Deeper than the record goes, the frames not recorded may be this engine's: say yes, so that
  // a blocking call is refused rather than left to wait for itself.
  if (tls_busy_depth > kBusyMax) return true;
  for (int i = 0; i < tls_busy_depth; ++i) {
    if (tls_busy[i] == this) return true;
  }
  return false;
}

Worker* Engine::current_worker() const {
  return (tls_worker && tls_worker->group->host() == this) ? tls_worker : nullptr;
}

void Engine::enter_worker(Worker* w) {
  tls_worker = w;
  if (w->entered) {
    // The worker replaces one whose thread a callback ended (WorkerGroup::run): it keeps the
    // lane and trace row, and first runs the caller code that thread could not.
    run_deferred_calls();
    return;
  }
  w->entered = true;
  // Lanes below first_external_lane_ are the workers' (one per worker thread the config asks
  // for); a worker without one counts through the shared paths.
  uint32_t i = next_worker_lane_.fetch_add(1, std::memory_order_relaxed);
  w->lane = i < first_external_lane_ ? &lanes_[i] : nullptr;
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
  return push_internal(OpKind::kDeleteVar, v, VarLink::kWriteBit, nullptr);
}

ordo_status Engine::var_clear_error(ordo_var v) {
  return push_internal(OpKind::kClearError, v, VarLink::kWriteBit, nullptr);
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
// Pushing

namespace {
// Why a push names a device the engine's table does not have.
ordo_status no_such_device(int32_t device_type, int32_t device_id) {
  if (device_type == ORDO_DEVICE_GPU) {
    return fail(ORDO_ERR_NO_DEVICE,
                "GPU %d requested, but this build of ordo has no CUDA support (0 GPUs)",
                static_cast<int>(device_id));
  }
  if (device_type != ORDO_DEVICE_CPU) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "ordo_push_opts.device_type=%d is not an ORDO_DEVICE_*",
                static_cast<int>(device_type));
  }
  return fail(ORDO_ERR_INVALID_ARGUMENT, "ordo_push_opts.device_id=%d: the CPU is device 0",
              static_cast<int>(device_id));
}
}  // namespace

ordo_status Engine::route(int32_t prop, int32_t device_type, int32_t device_id, WorkerGroup** out) {
  // Nearly every push: a normal CPU op on a started group (or inline, for the naive kind).
  if (prop == ORDO_PROP_NORMAL && device_type == ORDO_DEVICE_CPU && device_id == 0) {
    WorkerGroup* g = devices_[0].by_prop[ORDO_PROP_NORMAL];
    if (!g || g->started()) {
      *out = g;
      return ORDO_OK;
    }
  }
  if (prop < ORDO_PROP_NORMAL || prop > ORDO_PROP_ASYNC) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "ordo_push_opts.prop=%d is not an ORDO_PROP_*",
                static_cast<int>(prop));
  }
  // The device table says which devices exist.
  const DeviceGroups* device = find_device(device_type, device_id);
  if (!device) return no_such_device(device_type, device_id);
  *out = prop == ORDO_PROP_ASYNC ? nullptr : device->by_prop[prop];
  // A group's first op starts its threads; once destroy has stopped the group it refuses, since
  // nothing would join threads started then before the last release.
  ordo_status st = *out ? (*out)->ensure_started() : ORDO_OK;
  if (st == ORDO_ERR_SHUTDOWN) return refuse_push(st);
  if (st != ORDO_OK) {
    return fail(ORDO_ERR_NO_MEMORY, "could not start worker threads for ordo_push_opts.prop=%d",
                static_cast<int>(prop));
  }
  return ORDO_OK;
}

ordo_status Engine::push(const OpSpec& spec, const ordo_var* const_vars, size_t num_const,
                         const ordo_var* mutable_vars, size_t num_mutable) {
  WorkerGroup* group;
  if (ordo_status s = route(spec.prop, spec.device_type, spec.device_id, &group)) return s;
  VarRefs refs;
  if (ordo_status s = refs.collect(vars_, tag_, const_vars, num_const, mutable_vars, num_mutable)) {
    return s;
  }
  return push_resolved(spec, group, refs.data(), refs.size());
}

ordo_status Engine::push_internal(OpKind kind, ordo_var v, uintptr_t access, void* internal) {
  VarRefs refs;
  ordo_status s = refs.collect(vars_, tag_, nullptr, 0, &v, 1);
  if (s) return s;
  refs[0].access = static_cast<uint8_t>(access);
  OpSpec spec;
  spec.kind = kind;
  spec.internal = internal;
  // Counted before the push, so that the op's completion can never be seen first.
  internal_pushed_.fetch_add(1, std::memory_order_relaxed);
  s = push_resolved(spec, nullptr, refs.data(), refs.size());
  if (s != ORDO_OK) internal_pushed_.fetch_sub(1, std::memory_order_relaxed);
  return s;
}

// Submission throttle (see ordo_engine_config.max_pending). A pusher far ahead of the workers
// fills memory with op blocks that have gone cold by the time they run, and on a machine with
// more threads than cores it takes CPU from the workers; waiting here fixes both. The wait is
// bounded, so a pusher that must itself complete pending work is slowed, never stopped.
void Engine::throttle(PushLane* lane) {
  const int64_t low = throttle_low();
  if (cfg_.pushers_help && !on_an_op_stack() && help_while_throttled(lane, low)) return;
  wait_for_window(low);
}

// Sleeps until at most `low` of the caller's ops are pending, or until the pending count has not
// fallen for a while (ThrottlePace's limit: 1 ms to 100 ms, adapted at each give-up). While it
// falls the pusher keeps waiting, so ops slower than the pusher cannot grow the window without
// bound; when it stalls, an op may be waiting for this very thread to do something after its
// push, so the wait gives up rather than deadlock. (It is the count that must fall, not merely
// ops that complete: ops other threads keep pushing and completing would otherwise hold this
// pusher for as long as they come.)
void Engine::wait_for_window(int64_t low) {
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  int64_t now = now_ns();
  int64_t deadline = now + pace_.stall_ns();
  int64_t pending_before = INT64_MAX;
  for (;;) {
    uint32_t key = throttle_wake_.prepare_wait();
    std::atomic_thread_fence(std::memory_order_seq_cst);  // as in wait_idle
    const int64_t pending = user_pending_now();
    if (pending <= low) {
      throttle_wake_.cancel_wait();
      return;
    }
    if (pending_before == INT64_MAX) pending_before = pending;
    now = now_ns();
    if (now >= deadline) {
      if (pending >= pending_before) {
        throttle_wake_.cancel_wait();
        pace_.gave_up(now, completed_now());
        return;
      }
      pending_before = pending;
      deadline = now + pace_.stall_ns();
    }
    throttle_wake_.wait_for(key, static_cast<uint64_t>(deadline - now));
  }
}

// Runs `run` (which executes ops) as a helper on this pushing thread: meanwhile finalize counts
// the completions on `lane` and returns the blocks to its magazine, as a worker's go to its own
// (see completion_site), so helping costs no shared atomic per op. What was completed is
// announced at the end: this thread may not push again, and a waiter must not miss the last op.
// Never nested: helping starts only from a push made outside any op (check_throttle,
// run_on_pusher, run_inline_on_pusher), and a helped op runs inside one.
template <class F>
void Engine::as_helper(PushLane* lane, F&& run) {
  // Undone by a destructor: a callback run here may end the thread with a forced unwind, and
  // the completions it counted must still be announced.
  struct Scope {
    Engine* engine;
    Helper helper;
    Helper* outer;
    ~Scope() {
      tls_helper = outer;
      engine->announce_batch(&helper.unflushed);
    }
  } scope{this, Helper{this, lane, 0}, tls_helper};
  tls_helper = &scope.helper;
  run();
}

// ORDO_ENGINE_FLAG_PUSHERS_HELP: a throttled pusher runs ready ops of the normal CPU group
// itself instead of sleeping while the workers catch up, as an OpenMP thread runs tasks once
// too many are queued. The ops it pushed are still in its core's cache, and the CPU it would
// have given up does the work. Returns true when the pending count fell to `low`; false when
// nothing was ready to run (the caller then waits as usual).
bool Engine::help_while_throttled(PushLane* lane, int64_t low) {
  WorkerGroup* group = groups_[kCpu].get();
  if (!group) return false;
  const size_t ring_hint = static_cast<size_t>(lane - lanes_.get());
  // Looks at the count as often as a pusher does (max_pending / 8), so that a small window is
  // not run down far below its half; at most every kHelpCheckEvery ops, as the look sums lanes.
  const int64_t check_every = std::min<int64_t>(throttle_check_every_, kHelpCheckEvery);
  bool done = false;
  as_helper(lane, [&] {
    for (int64_t n = 0;; ++n) {
      if (n % check_every == 0 && user_pending_now() <= low) {
        done = true;
        return;
      }
      OpBlock* op = group->take_ready(ring_hint);
      if (!op) return;
      execute(op, nullptr);
    }
  });
  return done;
}

// ORDO_ENGINE_FLAG_PUSHERS_HELP, while the lane is over the window: an op that was ready at
// push runs here, on the pushing thread, instead of crossing a ready ring to a worker (what
// libgomp does with a task once too many are queued). Only plain ops (normal CPU property,
// priority 0) of the normal CPU group, never an inline op (the naive kind: it has its own queue,
// which keeps an op pushed from an op after it), and never from inside an op (its pushes would
// recurse). False: dispatch it as usual.
bool Engine::run_on_pusher(OpBlock* op, PushLane* lane) {
  if (!op->group || op->group != groups_[kCpu].get() || op->prop != ORDO_PROP_NORMAL ||
      op->priority != 0 || on_an_op_stack()) {
    return false;
  }
  as_helper(lane, [&] { execute(op, nullptr); });
  return true;
}

// An op with no group (every op of the naive engine, an ORDO_PROP_ASYNC op, the internal ops
// of deletes, clears and waits) runs inside its push. Run as a helper, it and the inline ops it
// makes ready count their completions on the pushing thread's lane and return their blocks to
// its magazine, as a worker's do: pushers on two threads then share no counter and no pool
// shard (on the engine's shared ones, two naive pushers on disjoint vars ran at 128 ns per op
// each against 46 for one alone). Not as a helper from inside an op (helping never nests; the
// op is queued behind the running one) nor on the shared lane (nullptr: a helper needs a lane
// of its own).
void Engine::run_inline_on_pusher(OpBlock* op, PushLane* lane) {
  if (lane && !on_an_op_stack()) {
    as_helper(lane, [&] { run_inline(op); });
  } else {
    run_inline(op);
  }
}

// Records why a push was refused (nothing was pushed or done) and returns `status`. The message
// names no call: user pushes, ordo_opr_new and the internal pushes of var deletes, clears and
// waits all come here, and the API layer puts the caller's name in front (guarded()).
ordo_status Engine::refuse_push(ordo_status status) {
  if (status == ORDO_ERR_SHUTDOWN) {
    return fail(status,
                "the engine is shutting down (ordo_engine_destroy was called); nothing "
                "was done");
  }
  return fail(status, "out of memory for a new op; nothing was done");
}

// `refs` come from VarRefs::collect (merged, at most OpBlock::kMaxLinks; sorted by slot
// address unless a short list of distinct vars).
ordo_status Engine::push_resolved(const OpSpec& spec, WorkerGroup* group, VarRef* refs, size_t n) {
  // Once shutdown has begun, refuse without counting: a push rejected after counting is pending
  // for a moment, and a pusher that keeps pushing could keep the drain from ever seeing none.
  if (shutting_down_.load(std::memory_order_relaxed)) return refuse_push(ORDO_ERR_SHUTDOWN);
  Worker* self = current_worker();
  PushLane* lane = self ? self->lane : claim_lane(this);
  const bool shared = lane == nullptr;
  if (shared) {
    shared_lane_lock_.lock();
    lane = &shared_lane_;
  }
  // Count first, then look at shutting_down_ (see shutdown()).
  lane->count_push();
  AsymmetricFence::light();
  OpCache* cache = self ? &self->cache : &lane->cache;
  OpBlock* op = nullptr;
  ordo_status status = ORDO_OK;
  if (shutting_down_.load(std::memory_order_relaxed)) {
    status = ORDO_ERR_SHUTDOWN;
  } else if (!(op = pool_.acquire(cache)) || !attach_links(op, n)) {
    status = ORDO_ERR_NO_MEMORY;
  }
  if (status != ORDO_OK) {
    if (op) pool_.release(op, cache);
    lane->uncount_push();
    if (shared) shared_lane_lock_.unlock();
    // A waiter (destroy's drain, ordo_wait_for_all) may have added up the counts while this push
    // was counted, seen it pending, and gone to sleep: nothing else would wake it. The fence
    // orders the uncount before announce_completions() looks for waiters.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    announce_completions();
    return refuse_push(status);  // the message after the count is back: keep the window short
  }
  // Counted here, under the shared lane's lock when the lane is shared. Only the caller's own
  // pushes are throttled: the internal ops of ordo_var_delete, ordo_var_clear_error and
  // ordo_wait_for_var must neither wait nor run callbacks on the calling thread.
  const bool user_op = spec.kind == OpKind::kUser || spec.kind == OpKind::kPrepared;
  const bool check_window = user_op && lane->throttle_check_due(throttle_check_every_);
  if (shared) shared_lane_lock_.unlock();
  fill(op, spec, group);
  // For diagnostics: the push time, as the engine last read it (reading the cycle counter on
  // every push cost A 16 ns/op), and the lane's push count. A lane refreshes the reading each
  // time the count's low 8 bits (kept in the stamp) wrap, so that within one reading a lane's
  // stamps still sort in push order.
  const uint64_t seq = static_cast<uint64_t>(lane->pushed.load(std::memory_order_relaxed));
  if ((seq & 0xFF) == 0) refresh_ticks();
  op->life().store(OpLife::pending_at(recent_ticks_.load(std::memory_order_relaxed), seq),
                   std::memory_order_release);
  bool ready = false;
  if (ordo_status s = enqueue_on_vars(op, refs, n, &ready)) {
    pool_.release(op, nullptr);  // through the pool's locked shards: the lane may be shared
    rejected_.fetch_add(1, std::memory_order_relaxed);  // before: stats never see it completed
    add_completed(1);                                   // the count stays; this balances it
    return s;
  }
  // Not kept by this worker even if it could: the pusher may be an op that waits for it.
  // The lane's position picks the ready ring: two pushing threads do not share one.
  if (ready && !(lane->runs_ready_ops && run_on_pusher(op, lane))) {
    if (WorkerGroup* g = op->group) {  // what dispatch() does with no worker to keep it
      // Woke a sleeping worker (a system call): an idle spell ended, so the engine's last
      // reading of the clock is old; the next ops are stamped with a new one.
      if (g->enqueue(op, shared ? 0 : static_cast<size_t>(lane - lanes_.get()))) refresh_ticks();
    } else {
      run_inline_on_pusher(op, shared ? nullptr : lane);
    }
  }
  if (check_window) check_throttle(lane, shared);
  return ORDO_OK;
}

// Applies the submission throttle every throttle_check_every_ pushes of a lane. Threads that
// found every lane taken share one lane (and its count of pushes), but never help: a helper
// counts completions on a lane of its own; a full window makes them wait like any pusher.
void Engine::check_throttle(PushLane* lane, bool shared) {
  if (cfg_.max_pending <= 0 || called_from_inside()) return;
  const int64_t pending = user_pending_now();
  if (shared) {
    if (pending > cfg_.max_pending) wait_for_window(throttle_low());
    return;
  }
  if (cfg_.pushers_help) {
    if (pending > cfg_.max_pending) {
      lane->runs_ready_ops = true;
    } else if (pending < throttle_low()) {
      lane->runs_ready_ops = false;
    }
  }
  if (pending > cfg_.max_pending) throttle(lane);  // "more than max_pending", as documented
}

// Every op counted as completed was counted by its lane as pushed before, so reading the
// completions first and the pushes second never undercounts what is pending.
int64_t Engine::completed_now() const {
  int64_t done = completed_.load(std::memory_order_seq_cst);
  const uint32_t n = lanes_in_use();
  for (uint32_t i = 0; i < n; ++i)  // workers' lanes, and those of helping pushers
    done += lanes_[i].completed.load(std::memory_order_acquire);
  return done;
}

int64_t Engine::pending_now() const {
  int64_t done = completed_now();
  int64_t pushed = shared_lane_.pushed.load(std::memory_order_acquire);
  const uint32_t n = lanes_in_use();
  for (uint32_t i = 0; i < n; ++i) pushed += lanes_[i].pushed.load(std::memory_order_acquire);
  return pushed - done;
}

// The caller's ops among those pending: what the window (max_pending) and ordo_engine_stats
// count. Internal ops (var deletes, clear_error, waits' markers, and a timed-out wait's marker
// left behind an op that has not finished) are not the caller's pushes and hold no push back.
// The three counts are read one after another, so an internal op pushed or completed meanwhile
// can make the result off by the few internal ops in flight (never below 0): the throttle only
// compares it with half a window.
int64_t Engine::user_pending_now() const {
  const int64_t internal_done = internal_completed_.load(std::memory_order_seq_cst);
  const int64_t pending = pending_now();
  const int64_t internal_pushed = internal_pushed_.load(std::memory_order_seq_cst);
  return std::max<int64_t>(0, pending - (internal_pushed - internal_done));
}

void Engine::fill(OpBlock* op, const OpSpec& spec, WorkerGroup* group) {
  op->fn = spec.fn;
  op->user_data = spec.user_data;
  op->free_fn = spec.free_fn;
  op->group = group;
  op->internal = spec.internal;
  op->priority = spec.priority;
  op->prop = static_cast<uint8_t>(spec.prop);
  op->device_type = static_cast<uint8_t>(spec.device_type);
  op->device_id = static_cast<uint8_t>(spec.device_id);
  op->kind = spec.kind;
  op->deferred = false;
  op->has_name = spec.name != nullptr && spec.name[0] != '\0';
  if (op->has_name) copy_name(op->name, spec.name);  // the cold name line: named ops only
}

bool Engine::attach_links(OpBlock* op, size_t n) {
  op->num_links = static_cast<uint16_t>(n);
  if (n <= OpBlock::kInlineLinks) return true;
  if (op->overflow_capacity < n) {  // kept with the block, so reuse allocates nothing
    const size_t num_lines = (n + LinkLine::kLinks - 1) / LinkLine::kLinks;
    auto* lines = new (std::nothrow) LinkLine[num_lines];
    if (!lines) return false;
    for (size_t i = 0; i < num_lines; ++i) lines[i].op = op;
    delete[] op->overflow_lines;
    op->overflow_lines = lines;
    op->overflow_capacity = static_cast<uint32_t>(num_lines * LinkLine::kLinks);
  }
  return true;
}

// Two-phase locking over the var list: every var's push lock is taken (lock_all waits only in
// slot address order, so concurrent pushes cannot deadlock) before the op arrives at any of
// them, which makes pushes linearizable: all vars see all ops in one global order. A thread
// completing an op takes a push lock only as a wait mark fires or a var's delete completes (for a
// few instructions, waiting for nothing while it holds it), so no pusher waits on a waiting one.
ordo_status Engine::enqueue_on_vars(OpBlock* op, VarRef* refs, size_t n, bool* ready) {
  lock_all(refs, n);
  for (size_t i = 0; i < n; ++i) {
    if (!refs[i].slot->named_by(refs[i].gen)) {
      ordo_status s = stale_var(tag_, refs[i]);  // reads the generation: under the lock
      unlock_all(refs, n);
      return s;
    }
  }
  // The counter starts at n. Workers decrement it for accesses that wait; the pusher subtracts
  // the g it was granted at arrival. With g >= 1 the workers cannot reach zero before the pusher
  // has subtracted; with g == 0 the pusher never touches it again (nor the op, which a worker may
  // run and recycle at once), so a push whose accesses all wait costs no atomic on the op.
  const bool deleting = op->kind == OpKind::kDeleteVar;
  op->wait.store(static_cast<int32_t>(n), std::memory_order_relaxed);
  uint32_t granted = 0;
  LinkCursor links(op);
  for (size_t i = 0; i < n; ++i) {
    VarLink& l = links.next();
    l.set(refs[i].slot, refs[i].access);
    if (refs[i].slot->arrive(&l)) ++granted;
  }
  if (deleting) {
    // Invalidate the handle now, under the lock, so no later push can slip in behind the delete.
    VarSlot* v = refs[0].slot;
    v->live = false;
    v->gen = next_generation(v->gen);
  }
  unlock_all(refs, n);
  if (granted == n) {
    *ready = true;  // no access of it waits anywhere, so nobody else touches its counter
  } else if (granted == 0) {
    *ready = false;
  } else {
    *ready = op->wait.fetch_sub(static_cast<int32_t>(granted), std::memory_order_acq_rel) ==
             static_cast<int32_t>(granted);
  }
  return ORDO_OK;
}

// ---------------------------------------------------------------------------------------------
// Prepared ops

ordo_status Engine::prepared_new(const OpSpec& spec, const ordo_var* const_vars, size_t num_const,
                                 const ordo_var* mutable_vars, size_t num_mutable, ordo_opr* out) {
  WorkerGroup* group;
  if (ordo_status s = route(spec.prop, spec.device_type, spec.device_id, &group)) return s;
  VarRefs refs;
  if (ordo_status s = refs.collect(vars_, tag_, const_vars, num_const, mutable_vars, num_mutable)) {
    return s;
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    SpinGuard g(refs[i].slot->push_lock);
    if (!refs[i].slot->named_by(refs[i].gen)) return stale_var(tag_, refs[i]);
  }
  std::vector<VarRef> stored(refs.data(), refs.data() + refs.size());
  PreparedOp* p = prepared_.allocate();
  if (!p) {
    return fail(ORDO_ERR_NO_MEMORY,
                "ordo_opr_new: no room for another prepared op (%u alive is the most one engine "
                "holds; or memory ran out)",
                PreparedTable::kMaxOps);
  }
  p->fn = spec.fn;
  p->user_data = spec.user_data;
  p->free_fn = spec.free_fn;
  p->group = group;
  p->prop = spec.prop;
  p->device_type = spec.device_type;
  p->device_id = spec.device_id;
  copy_name(p->name, spec.name ? spec.name : "");
  p->refs.swap(stored);
  uint32_t gen = prepared_.publish(p);
  *out = HandleBits::encode(tag_, HandleKind::kPrepared, gen, p->index);
  return ORDO_OK;
}

// Var lists up to this long are copied for each prepared push (a few cache lines); longer ones
// cost an extra atomic on the prepared op instead.
constexpr size_t kPreparedCopyMax = 16;

ordo_status Engine::prepared_push(ordo_opr opr, int32_t priority) {
  if (ordo_status s = check_handle_kind(opr, HandleKind::kPrepared)) return s;
  HandleBits b = HandleBits::decode(opr);
  PreparedOp* p =
      (b.kind == HandleKind::kPrepared && b.tag == tag_) ? prepared_.find(b.index) : nullptr;
  if (!p || !p->try_acquire(b.gen)) {
    return fail(ORDO_ERR_INVALID_HANDLE,
                "prepared op handle 0x%016" PRIx64 " is deleted, foreign or made up", opr);
  }
  OpSpec spec;
  spec.fn = p->fn;
  spec.user_data = p->user_data;
  spec.priority = priority;
  spec.prop = p->prop;
  spec.device_type = p->device_type;
  spec.device_id = p->device_id;
  spec.name = p->name;
  spec.kind = OpKind::kPrepared;
  spec.internal = p;
  // The push may not read p->refs once its op can have run: the op's completion drops this
  // push's reference, which may be the last (the handle deleted meanwhile); the slot is then
  // reused and a new ordo_opr_new frees the list, while enqueue_on_vars still unlocks through
  // it. Short lists are copied to the stack; a long one is kept by a second reference.
  const size_t n = p->refs.size();
  const bool copied = n <= kPreparedCopyMax;
  VarRef copy[kPreparedCopyMax];
  if (copied) {
    std::copy(p->refs.begin(), p->refs.end(), copy);
  } else {
    p->retain();
  }
  ordo_status s = push_resolved(spec, p->group, copied ? copy : p->refs.data(), n);
  if (s != ORDO_OK && p->release()) finish_prepared(p);  // the op's reference: never pushed
  if (!copied && p->release()) finish_prepared(p);       // this push's own
  return s;
}

// Runs the prepared op's free_fn and recycles its slot, on a thread that may hold no op of this
// engine (ordo_opr_delete's caller, a failed push): marked busy meanwhile, as under execute(),
// so that the free_fn cannot release or destroy the engine that finish() goes on using.
void Engine::finish_prepared(PreparedOp* p) {
  BusyScope busy(this);
  prepared_.finish(p);
}

ordo_status Engine::prepared_delete(ordo_opr opr) {
  if (ordo_status s = check_handle_kind(opr, HandleKind::kPrepared)) return s;
  HandleBits b = HandleBits::decode(opr);
  PreparedOp* p =
      (b.kind == HandleKind::kPrepared && b.tag == tag_) ? prepared_.find(b.index) : nullptr;
  bool last = false;
  if (!p || !p->retire(b.gen, &last)) {
    return fail(ORDO_ERR_INVALID_HANDLE,
                "prepared op handle 0x%016" PRIx64 " is deleted, foreign or made up", opr);
  }
  if (last) finish_prepared(p);
  return ORDO_OK;
}

// ---------------------------------------------------------------------------------------------
// Running and completing

void Engine::execute(OpBlock* op, Worker* self) {
  BusyScope busy(this);
  switch (op->kind) {
    case OpKind::kWaitSignal:
      waits_.run_mark(op, self);
      return;
    case OpKind::kAsyncWait:
      run_async_wait(op, self);
      return;
    case OpKind::kClearError:
    case OpKind::kDeleteVar:
      internal_completed_.fetch_add(1, std::memory_order_relaxed);
      finalize(op, nullptr, self);  // the work happens on the var in finalize
      return;
    case OpKind::kUser:
    case OpKind::kPrepared:
      break;
  }
  // One test of tracer_ per op: the untraced instance has no tracing code at all.
  if (__builtin_expect(tracer_ != nullptr, 0)) {
    run_user_op<true>(op, self);
  } else {
    run_user_op<false>(op, self);
  }
}

template <bool kTraced>
void Engine::run_user_op(OpBlock* op, Worker* self) {
  op->set_state(OpState::kRunning);
  LinkCursor links(op);
  for (uint32_t i = 0; i < op->num_links; ++i) {  // both of the var's lines, for finalize
    VarSlot* v = links.next().var();
    prefetch_for_write(v);                                // the state word, CASed at completion
    __builtin_prefetch(reinterpret_cast<char*>(v) + 64);  // the FIFO and error, read
  }
  const uint64_t start_ns = kTraced ? tracer_->now_ns() : 0;
  if (ErrorRecord* inherited = first_error_of(op)) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    if (kTraced) trace_op(op, self, start_ns, TraceOutcome::kSkipped);
    finalize(op, ErrorRecord::retain(inherited), self);  // skipped: passes the error on
    return;
  }
  ErrorRecord* failure;
  try {
    failure = call_user(op);
  } catch (abi::__forced_unwind&) {
    op_unwound(op, self);
    throw;
  }
  if (kTraced) {
    trace_op(op, self, start_ns,
             op->deferred ? TraceOutcome::kDeferred
                          : (failure ? TraceOutcome::kFailed : TraceOutcome::kOk));
  }
  if (op->deferred) {
    // Whichever of "callback returned" and "ordo_complete" comes second finishes the op.
    if (op->finish_refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    failure = op->async_error;
  }
  finalize(op, failure, self);
}

ordo_status Engine::defer(OpBlock* op, ordo_completion* out) {
  if (op->deferred) {
    return fail(ORDO_ERR_INVALID_STATE, "ordo_exec_defer: the op has already deferred");
  }
  op->deferred = true;
  op->set_state(OpState::kDeferred);
  op->async_error = nullptr;
  op->finish_refs.store(2, std::memory_order_relaxed);
  op->completion_gen.store(op->gen | OpBlock::kArmed, std::memory_order_release);
  *out = HandleBits::encode(tag_, HandleKind::kCompletion, op->gen, op->index);
  return ORDO_OK;
}

ordo_status Engine::complete(uint32_t gen, uint32_t index, int32_t code, const char* message) {
  OpBlock* op = pool_.find(index);
  uint32_t armed = gen | OpBlock::kArmed;
  // The CAS disarms the handle: a second call, or a stale handle, fails here.
  if (!op || !op->completion_gen.compare_exchange_strong(armed, gen, std::memory_order_acq_rel)) {
    return fail(ORDO_ERR_INVALID_HANDLE,
                "completion handle is stale: already completed, or never issued");
  }
  if (code != 0) op->async_error = ErrorRecord::make(code, op->op_name(), message);
  if (op->finish_refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    BusyScope busy(this);
    finalize(op, op->async_error, current_worker());
  }
  return ORDO_OK;
}

// The op is done (ran, failed, was skipped, or is an internal op): publish its outcome on each
// var, release its grants, recycle it, and hand on whatever became ready.
void Engine::finalize(OpBlock* op, ErrorRecord* failure, Worker* self) {
  if (failure) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    record_failure(failure);
  }
  try {
    release_user_data(op);  // before waiters can wake: a waiter then sees user_data released
  } catch (abi::__forced_unwind&) {
    release_vars_unwound(op, failure, self);  // the free_fn ended its thread: finish the op
    throw;
  }
  release_vars(op, failure, self);
}

void Engine::release_vars(OpBlock* op, ErrorRecord* failure, Worker* self) {
  OpBlock* ready = nullptr;
  OpBlock** ready_tail = &ready;
  auto chain_ready = [&](OpBlock* r) {
    r->next = nullptr;
    *ready_tail = r;
    ready_tail = &r->next;
  };
  // Counted before its vars are released: whoever sees a var released (a successor, the signal
  // op of ordo_wait_for_var) finds this op completed. Waits for all work, which may therefore
  // see the count before the release, wait for `releasing` to drop (wait_for_releases()).
  const CompletionSite at = completion_site(self);
  begin_release(at.lane);
  note_completed(at);
  LinkCursor links(op);
  const uint32_t num_links = op->num_links;
  for (uint32_t i = 0; i < num_links; ++i) {
    const VarLink& l = links.next();
    VarSlot* v = l.var();
    const bool write = l.write();
    if (failure && write) v->set_error(failure);
    if (op->kind == OpKind::kClearError) v->set_error(nullptr);
    const VarSlot::Completion done = v->complete(l);
    settle_grants(done.granted, chain_ready);
    if (__builtin_expect(done.fired != nullptr, 0)) chain_ready(done.fired->op());
    if (op->kind == OpKind::kDeleteVar) {
      VarWaits::delete_completed(v);
      vars_.reclaim(v);
    }
  }
  ErrorRecord::release(failure);
  pool_.release(op, at.cache);
  end_release(at.lane);
  // A worker keeps one successor for itself, but never while a callback of its own is still on
  // the stack (that callback might wait for the successor to start).
  Worker* keeper = tls_running.op == nullptr ? self : nullptr;
  while (ready) {
    OpBlock* r = ready;
    ready = r->next;
    dispatch(r, keeper, self ? static_cast<size_t>(self->index) : 0);
  }
}

void Engine::release_user_data(OpBlock* op) {
  if (op->kind == OpKind::kPrepared) {
    auto* p = static_cast<PreparedOp*>(op->internal);
    if (p->release()) prepared_.finish(p);
  } else if (op->free_fn) {
    try {
      op->free_fn(op->user_data);
    } catch (abi::__forced_unwind&) {
      throw;  // the thread is ending: finalize() finishes the op first
    } catch (...) {
      // A throwing free_fn from a C++ caller must not take the worker down.
    }
  }
}

void Engine::dispatch(OpBlock* op, Worker* self, size_t ring_hint) {
  WorkerGroup* g = op->group;
  if (!g) {
    run_inline(op);
  } else if (self && g->may_keep(*self, op)) {
    self->next = op;
  } else if (!self || !g->hand_to_self(*self, op)) {
    g->enqueue(op, ring_hint);
  }
}

void Engine::run_inline(OpBlock* op) {
  op->next = nullptr;
  if (tls_inline && tls_inline->engine == this) {  // already looping on this thread: queue it
    if (tls_inline->tail) {
      tls_inline->tail->next = op;
    } else {
      tls_inline->head = op;
    }
    tls_inline->tail = op;
    return;
  }
  InlineQueue q;
  q.engine = this;
  q.head = q.tail = op;
  InlineQueue* outer = tls_inline;
  tls_inline = &q;
  auto pop = [&q] {
    OpBlock* r = q.head;
    q.head = r->next;
    if (!q.head) q.tail = nullptr;
    return r;
  };
  // A thread inside a forced unwind runs no caller code (deferred_calls.h): what it would have
  // run inline fails without being called.
  const bool unwinding = in_forced_unwind();
  try {
    while (q.head) {
      OpBlock* r = pop();
      if (__builtin_expect(unwinding, 0)) {
        skip_unwound(r);
      } else {
        execute(r, current_worker());
      }
    }
  } catch (abi::__forced_unwind&) {
    ForcedUnwindScope no_caller_code;
    while (q.head) skip_unwound(pop());
    tls_inline = outer;
    throw;
  }
  tls_inline = outer;
}

void Engine::record_failure(ErrorRecord* r) {
  std::lock_guard<std::mutex> g(failure_mutex_);
  if (!first_failure_) first_failure_ = ErrorRecord::retain(r);
}

// The span between counting an op completed and releasing its vars, which waits for all work
// wait out (wait_for_releases): a worker or a helping pusher marks it on its lane, other threads
// on a shared count.
void Engine::begin_release(PushLane* lane) {
  if (lane) {
    lane->releasing.store(1, std::memory_order_relaxed);
  } else {
    external_releasing_.fetch_add(1, std::memory_order_seq_cst);
  }
}

void Engine::end_release(PushLane* lane) {
  if (lane) {
    lane->releasing.store(0, std::memory_order_release);
  } else {
    external_releasing_.fetch_sub(1, std::memory_order_release);
  }
}

// Where the calling thread counts a completion and returns the block: a worker, or a pusher
// helping this engine, on its own lane and magazine; any other thread on the shared counter and
// the pool's locked shards (a worker without a lane: shared counter, own magazine).
CompletionSite Engine::completion_site(Worker* self) const {
  if (self) return {self->lane, &self->unflushed, &self->cache};
  if (tls_helper && tls_helper->engine == this) {
    return {tls_helper->lane, &tls_helper->unflushed, &tls_helper->lane->cache};
  }
  return {nullptr, nullptr, nullptr};
}

void Engine::note_completed(const CompletionSite& at) {
  if (!at.lane) {
    add_completed(1);
    return;
  }
  at.lane->count_completion();
  if (++*at.unflushed >= 64) announce_batch(at.unflushed);
}

void Engine::worker_woke(Worker*) {
  refresh_ticks();  // the first ops pushed after an idle spell woke it: stamp the next ones right
}

void Engine::flush_completions(Worker* w) {
  announce_batch(&w->unflushed);
}

// Wakes whoever waits for completions (throttled pushers, ordo_wait_for_all) after a batch of
// completions counted on a lane, or when a worker runs out of work or a pusher stops helping.
// Completions are counted as they happen; only this notification is batched.
void Engine::announce_batch(uint32_t* unflushed) {
  if (*unflushed == 0) return;
  *unflushed = 0;
  // The worker's half of the handshake with a waiter: its counts were stored, then it looks for
  // waiters; a waiter registers, then reads the counts (one of the two sees the other).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  announce_completions();
}

void Engine::add_completed(int64_t n) {
  completed_.fetch_add(n, std::memory_order_seq_cst);
  announce_completions();
}

// Wakes a waiter only once what it waits for holds: a throttled pusher waits for half the
// window to drain (max_pending / 2 ops, 64 batches at the default), and a wait for all work for
// nothing to be pending. Waking it on every batch instead cost a futex wake on a worker and a
// futex wait on the pusher per batch (strace, METG at 1 us: 34,000 throttle waits per 2 million
// ops, a quarter of the run's CPU time in the kernel). Adding up the lanes' counts is a few
// hundred cycles, paid only while someone waits. A crossing that this check misses is not lost:
// the completion that made it is announced later by its own worker (every batch, and when it
// runs out of work), after a fence, and that announcement sees it.
void Engine::announce_completions() {
  const bool throttled = throttle_wake_.has_waiters();
  const bool idle_waited = idle_waiters_.load(std::memory_order_seq_cst) != 0;
  if (!throttled && !idle_waited) return;
  // Every announcer stored its count before coming here; with a fence between that store and
  // these loads on each side, of two announcers racing on the last completions at least one
  // sees both counts, so the wake that makes a waiter's condition true is never skipped.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (throttled && user_pending_now() <= throttle_low()) throttle_wake_.notify_all();
  if (idle_waited && pending_now() == 0) {
    std::lock_guard<std::mutex> g(idle_mutex_);
    idle_cv_.notify_all();
  }
}

// ---------------------------------------------------------------------------------------------
// Observability

namespace {
// A small number for each thread that records into the callers' row (its row in the trace).
uint32_t caller_thread_number() {
  static std::atomic<uint32_t> next{1};
  thread_local uint32_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}
}  // namespace

void Engine::trace_op(const OpBlock* op, Worker* self, uint64_t start_ns, TraceOutcome outcome) {
  TraceRecord r;
  r.start_ns = start_ns;
  r.end_ns = tracer_->now_ns();
  r.thread = self ? 0 : caller_thread_number();
  r.device_type = op->device_type;
  r.device_id = op->device_id;
  r.outcome = outcome;
  copy_name(r.name, op->has_name ? op->name : "");
  if (!self) {
    tracer_->record_external(r);
  } else if (!self->trace) {
    tracer_->count_dropped();  // the worker's row could not be allocated
  } else if (TraceRecord* slot = self->trace->reserve()) {
    *slot = r;
    self->trace->commit();
  }
}

void Engine::stats(ordo_stats* out) const {
  // Completions first: every op they count was pushed before, so pending is never negative.
  // A push rejected after its lane counted it (a stale var) is counted as completed too, to keep
  // pending right; neither count shows it.
  const int64_t rejected = rejected_.load(std::memory_order_seq_cst);
  int64_t done = completed_now() - internal_completed_.load(std::memory_order_seq_cst) - rejected;
  int64_t pushed = shared_lane_.pushed.load(std::memory_order_acquire);
  const uint32_t n = lanes_in_use();
  for (uint32_t i = 0; i < n; ++i) pushed += lanes_[i].pushed.load(std::memory_order_acquire);
  pushed -= internal_pushed_.load(std::memory_order_seq_cst) + rejected;
  if (done < 0) done = 0;
  if (pushed < done) pushed = done;  // a snapshot taken while an internal op was in flight
  // SPEC 3: a skipped op counts as failed; `skipped` is how many of the failed never ran.
  int64_t skipped = skipped_.load(std::memory_order_relaxed);
  int64_t failed = failures_.load(std::memory_order_relaxed);
  // A skip is counted before its op's failure (finalize): a snapshot between the two would show
  // more skipped than failed, which the header rules out.
  if (skipped > failed) skipped = failed;
  out->pushed = static_cast<uint64_t>(pushed);
  out->completed = static_cast<uint64_t>(done);
  out->pending = static_cast<uint64_t>(pushed - done);
  out->failed = failed > 0 ? static_cast<uint64_t>(failed) : 0;
  out->skipped = static_cast<uint64_t>(skipped);
  out->workers = 0;
  out->ready = 0;
  static_assert(kNumGroups == ORDO_STATS_QUEUES, "a queue_ready entry per worker group");
  static_assert(kCpu == ORDO_PROP_NORMAL && kCpuPriority == ORDO_PROP_CPU_PRIORITIZED &&
                    kCopyTo == ORDO_PROP_COPY_TO_DEVICE && kCopyFrom == ORDO_PROP_COPY_FROM_DEVICE,
                "groups are indexed like the properties they run");
  for (int i = 0; i < kNumGroups; ++i) {
    WorkerGroup* g = groups_[i].get();
    out->queue_ready[i] = g ? g->ready_depth() : 0;
    if (!g) continue;
    out->workers += static_cast<uint32_t>(g->running_threads());
    out->ready += out->queue_ready[i];
  }
  out->trace_records = tracer_ ? tracer_->records() : 0;
  out->trace_dropped = tracer_ ? tracer_->dropped() : 0;
}

const Engine::DeviceGroups* Engine::find_device(int32_t device_type, int32_t device_id) const {
  for (uint32_t i = 0; i < num_devices_; ++i) {
    if (devices_[i].device_type == device_type && devices_[i].device_id == device_id) {
      return &devices_[i];
    }
  }
  return nullptr;
}

namespace {
// Calls f(device, group, prop) for each of the engine's ready queues once, device by device:
// `prop` is the ORDO_PROP_* its workers run, or -1 when one group runs every property (pooled).
template <class Devices, class F>
void for_each_queue(const Devices& devices, uint32_t num_devices, F&& f) {
  for (uint32_t d = 0; d < num_devices; ++d) {
    const auto& dev = devices[d];
    const size_t n = sizeof dev.by_prop / sizeof dev.by_prop[0];
    for (size_t p = 0; p < n; ++p) {
      WorkerGroup* g = dev.by_prop[p];
      if (!g || (p > 0 && g == dev.by_prop[p - 1])) continue;  // inline, or shared: counted once
      const bool shared = p + 1 < n && dev.by_prop[p + 1] == g;
      f(dev, g, shared ? -1 : static_cast<int32_t>(p));
    }
  }
}
}  // namespace

uint32_t Engine::queue_count() const {
  uint32_t n = 0;
  for_each_queue(devices_, num_devices_, [&](const DeviceGroups&, WorkerGroup*, int32_t) { ++n; });
  return n;
}

bool Engine::queue_stats(uint32_t index, ordo_queue_stats* out) const {
  uint32_t i = 0;
  bool found = false;
  for_each_queue(devices_, num_devices_, [&](const DeviceGroups& dev, WorkerGroup* g, int32_t p) {
    if (i++ != index) return;
    found = true;
    out->device_type = dev.device_type;
    out->device_id = dev.device_id;
    out->prop = p;
    out->workers = static_cast<uint32_t>(g->running_threads());
    out->ready = g->ready_depth();
    out->name = g->role();
  });
  out->queues = i;
  return found;
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

ordo_status Engine::wait_idle(const uint64_t* timeout_ns) {
  timeout_ns = finite_or_null(timeout_ns);
  if (timeout_ns && *timeout_ns == 0) {  // a poll: look, never sleep (no futex, no timer)
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (pending_now() != 0) return ORDO_ERR_TIMEOUT;
    wait_for_releases();
    return ORDO_OK;
  }
  idle_waiters_.fetch_add(1, std::memory_order_seq_cst);
  // The waiter's half of a store-buffering handshake with announce_batch (completion count
  // stored, fence, idle_waiters_ loaded): the lane counts are read with acquire loads, which
  // alone may be ordered before the RMW above by the C++ model.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bool idle;
  {
    std::unique_lock<std::mutex> lock(idle_mutex_);
    auto is_idle = [this] { return pending_now() == 0; };
    if (timeout_ns) {
      idle = idle_cv_.wait_for(lock, std::chrono::nanoseconds(*timeout_ns), is_idle);
    } else {
      idle_cv_.wait(lock, is_idle);
      idle = true;
    }
  }
  idle_waiters_.fetch_sub(1, std::memory_order_relaxed);
  if (!idle) return ORDO_ERR_TIMEOUT;
  wait_for_releases();
  return ORDO_OK;
}

// Ops are counted as completed just before their vars are released (see finalize): once
// nothing is pending, the last releases are at most a few hundred instructions away.
void Engine::wait_for_releases() const {
  const uint32_t n = lanes_in_use();
  for (uint32_t i = 0; i < n; ++i) {  // workers' lanes, and those of helping pushers
    while (lanes_[i].releasing.load(std::memory_order_acquire) != 0) sched_yield();
  }
  while (external_releasing_.load(std::memory_order_acquire) != 0) sched_yield();
}

ordo_status Engine::wait_for_all(const uint64_t* timeout_ns) {
  refresh_ticks();  // ops pushed after an idle spell are stamped with a recent reading
  if (shutting_down()) return fail(ORDO_ERR_SHUTDOWN, "ordo_wait_for_all: the engine is shut down");
  if (called_from_inside()) {
    return fail(ORDO_ERR_WOULD_DEADLOCK,
                "ordo_wait_for_all called from inside an op of the same engine would wait for "
                "itself; push a follow-up op instead");
  }
  if (wait_idle(timeout_ns) != ORDO_OK) {
    return fail(ORDO_ERR_TIMEOUT, "ordo_wait_for_all: timed out with ops still pending%s",
                worth_a_report(timeout_ns) ? oldest_pending(nullptr).c_str() : "");
  }
  ErrorRecord* first;
  {
    std::lock_guard<std::mutex> g(failure_mutex_);
    first = first_failure_;
    first_failure_ = nullptr;
  }
  if (!first) return ORDO_OK;
  ordo_status s = fail(ORDO_ERR_OP_FAILED, "%s", first->text);
  ErrorRecord::release(first);
  return s;
}

ordo_status Engine::wait_for_var(ordo_var v, const uint64_t* timeout_ns) {
  refresh_ticks();
  return waits_.wait(v, timeout_ns);
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
