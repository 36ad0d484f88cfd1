#include "engine/op_runner.h"

#include <atomic>

#include "base/foreign_exception.h"
#include "base/hot_tls.h"
#include "base/last_error.h"
#include "base/prefetch.h"
#include "core/exec_token.h"
#include "core/handle_bits.h"
#include "engine/bulk_bundle.h"
#include "engine/bulk_chain.h"
#include "engine/call_callback.h"
#include "engine/deferred_calls.h"
#include "engine/thread_state.h"
#include "engine/var_waits.h"

namespace ordo {

namespace {

// Ops that run inline are queued here while another inline op of the same engine runs on this
// thread, so nested readiness (an inline op making another ready) loops instead of recursing.
// An op of another engine gets a nested loop: queuing it behind this engine's op could leave a
// wait on that other engine blocked forever.
struct InlineQueue {
  const OpRunner* runner = nullptr;
  OpBlock* head = nullptr;
  OpBlock* tail = nullptr;
  OpBlock* pop() {  // head is not nullptr
    OpBlock* r = head;
    head = r->next;
    if (!head) tail = nullptr;
    return r;
  }
};
ORDO_HOT_TLS InlineQueue* tls_inline = nullptr;

// A pushed op's callback (engine/call_callback.h), named as the op is.
__attribute__((always_inline)) inline ErrorRecord* call_user(OpBlock* op) {
  return call_callback(op, op->fn, op->user_data, [op] { return op->op_name(); });
}

// The ops a completion made ready, in the order it granted them (chained through `next`).
struct ReadyList {
  OpBlock* head = nullptr;
  OpBlock** tail = &head;
  void add(OpBlock* r) {
    r->next = nullptr;
    *tail = r;
    tail = &r->next;
  }
};

// A small number for each thread that records into the callers' row (its row in the trace).
// Numbered at first use, not by a dynamic initializer, whose guard word would sit in the static
// TLS segment too (tests/check_so_limits.sh).
uint32_t caller_thread_number() {
  static std::atomic<uint32_t> next{1};
  static thread_local uint32_t mine = 0;
  if (mine == 0) mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

}  // namespace

OpRunner::OpRunner(const Parts& parts)
    : engine_(parts.engine),
      tag_(parts.tag),
      pool_(parts.pool),
      vars_(parts.vars),
      prepared_(parts.prepared),
      waits_(parts.waits),
      counts_(parts.counts),
      outcomes_(parts.outcomes),
      tracer_(parts.tracer),
      devices_(parts.devices),
      early_(parts.gpu_stream_waits ? std::make_unique<EarlyRelease>(
                                          [](const void* ctx, uint32_t id) {
                                            return static_cast<const DeviceTable*>(ctx)->gpu(id);
                                          },
                                          &parts.devices)
                                    : nullptr) {}

Worker* OpRunner::current_worker() const {
  Worker* w = this_thread::worker;
  return (w && w->group->host() == engine_) ? w : nullptr;
}

void OpRunner::execute(OpBlock* op, Worker* self) {
  // Every caller passes as self this thread's worker of this engine, or nullptr.
  this_thread::BusyScope busy(engine_, self);
  switch (op->kind) {
    case OpKind::kWaitSignal:
      waits_.run_mark(op, self);
      return;
    case OpKind::kClearError:
    case OpKind::kDeleteVar:
      counts_.count_internal_completion();
      finalize(op, nullptr, self);  // the work happens on the var in finalize
      return;
    case OpKind::kAsyncWait:
      run_async_wait(op, self);
      return;
    case OpKind::kChain:
      run_chain(op, self);
      return;
    case OpKind::kBundle:
      run_bundle(op, self);
      return;
    case OpKind::kMember:  // never queued: a member runs inside its carrier's run
      return;
    case OpKind::kUser:
    case OpKind::kPrepared:
    case OpKind::kGraph:
      break;
  }
  // A GPU op: one test of a field on the line already read, never taken by a CPU op.
  if (__builtin_expect(op->device_type != ORDO_DEVICE_CPU, 0)) {
    if (tracer_ != nullptr) {
      run_user_op<true, true>(op, self);
    } else {
      run_user_op<false, true>(op, self);
    }
    return;
  }
  // One test of tracer_ per op: the untraced instance has no tracing code at all. A worker's
  // instance also runs the successors it may keep itself (finalize_one_var); the others (inline,
  // a helping pusher) leave that code out.
  if (__builtin_expect(tracer_ != nullptr, 0)) {
    run_user_op<true, false>(op, self);
  } else if (self) {
    run_user_op<false, false, true>(op, self);
  } else {
    run_user_op<false, false>(op, nullptr);
  }
}

namespace {
StreamManager::StreamKind stream_kind(uint8_t prop) {
  switch (prop) {
    case ORDO_PROP_COPY_TO_DEVICE:
      return StreamManager::StreamKind::kToDevice;
    case ORDO_PROP_COPY_FROM_DEVICE:
      return StreamManager::StreamKind::kFromDevice;
    default:
      return StreamManager::StreamKind::kCompute;
  }
}

// The op's failure for a device call that failed with `code`, in the device's own words.
ErrorRecord* device_failure(OpBlock* op, StreamManager* gpu, int code, const char* call) {
  gpu->api()->clear_error();
  char msg[256];
  gpu->describe(code, call, msg, sizeof msg);
  return ErrorRecord::make(ORDO_ERR_OP_FAILED, op->op_name(), msg);
}
}  // namespace

void OpRunner::gpu_done(void* ctx, uint64_t token, int error, const char* message) {
  auto* runner = static_cast<OpRunner*>(ctx);
  runner->complete(static_cast<uint32_t>(token >> 32), static_cast<uint32_t>(token),
                   error != 0 ? ORDO_ERR_OP_FAILED : 0, message);
}

void OpRunner::track_gpu(OpBlock* op, StreamManager* gpu) {
  ordo_completion handle;
  defer(op, &handle);  // cannot fail: the callback did not defer
  const uint64_t token = (static_cast<uint64_t>(op->gen) << 32) | op->index;
  void* event = nullptr;
  if (int e = gpu->track(op->stream, token, &event)) {
    ErrorRecord* f = device_failure(op, gpu, e, "cudaEventRecord");
    op->async_error = f;  // completes the handle as ordo_complete would, with this failure
    op->completion_gen.store(op->gen, std::memory_order_relaxed);
    op->finish_refs.fetch_sub(1, std::memory_order_acq_rel);  // the caller's drop finalizes
  } else if (early_) {
    // The event is recorded: the GPU ops of this device that come next may start now. The op
    // cannot complete before the caller drops its reference (finish_refs), after this.
    EarlyRelease::Handoff h;
    early_->recorded(op, event, op->stream, &h);
    dispatch_chain(h.ready);
  }
}

void OpRunner::early_pushed(const VarRef* refs, size_t n) {
  if (!early_) return;
  EarlyRelease::Handoff h;
  early_->pushed(refs, n, &h);
  dispatch_chain(h.ready);
}

void OpRunner::dispatch_chain(OpBlock* ready) {
  while (ready) {
    OpBlock* r = ready;
    ready = r->next;
    dispatch(r, nullptr, 0);  // never kept: a callback may be on this thread's stack
  }
}

template <bool kTraced, bool kGpu, bool kOnWorker>
void OpRunner::run_user_op(OpBlock* op, Worker* self) {
  run_user_op_body<kTraced, kGpu, kOnWorker, false>(op, self, nullptr);
}

// run_user_op's body. kHelping: run by run_inline_helping, for the pusher that made it ready
// (`self` nullptr, untraced, on the CPU), which counts its completion at `at`; its var's line
// is in this core's cache already (the push arrived on it), so it is not prefetched.
template <bool kTraced, bool kGpu, bool kOnWorker, bool kHelping>
__attribute__((always_inline)) inline void OpRunner::run_user_op_body(OpBlock* op, Worker* self,
                                                                      const CompletionSite* at) {
next_op:  // the successor finalize_one_var handed back: run here, not through the worker's loop
  op->set_state(OpState::kRunning);
  // The vars' lines, fetched for finalize, and the first error among them: for one var (most
  // ops) in one pass; for more, every prefetch first so that their misses overlap.
  ErrorRecord* inherited;
  if (__builtin_expect(op->num_links == 1, 1)) {
    VarSlot* v = op->inline_lines[0].link[0].var();
    if (!kHelping) prefetch_for_write(v);  // the state word, CASed at completion
    inherited = v->current_error();
  } else {
    for_each_link(op, [](VarLink& l) {
      VarSlot* v = l.var();
      prefetch_for_write(v);                                // the state word
      __builtin_prefetch(reinterpret_cast<char*>(v) + 64);  // the FIFO and error, read
      return false;
    });
    inherited = first_error_of(op);
  }
  const uint64_t start_ns = kTraced ? tracer_->now_ns() : 0;
  if (inherited) {
    outcomes_.skipped();
    if (kTraced) trace_op(op, self, start_ns, TraceOutcome::kSkipped);
    // skipped: passes the error on
    if (kGpu) {
      finish(op, ErrorRecord::retain(inherited), self);
    } else {
      finalize(op, ErrorRecord::retain(inherited), self);
    }
    return;
  }
  StreamManager* gpu = nullptr;
  if (kGpu) {
    gpu = devices_.gpu(op->device_id);  // routing checked the id
    if (int e = gpu->enter(stream_kind(op->prop), &op->stream)) {
      if (kTraced) trace_op(op, self, start_ns, TraceOutcome::kFailed);
      finish(op, device_failure(op, gpu, e, "cudaSetDevice"), self);
      return;
    }
    // Started early: its stream waits for the producers' events before its work is enqueued.
    if (op->early_waits) {
      if (int e = early_->issue_waits(op, op->stream)) {
        if (kTraced) trace_op(op, self, start_ns, TraceOutcome::kFailed);
        finish(op, device_failure(op, gpu, e, "cudaStreamWaitEvent"), self);
        return;
      }
    }
  }
  ErrorRecord* failure;
  try {
    failure = call_user(op);
  } catch (...) {  // only a forced unwind gets out of call_user
    op_unwound(op, self);
    throw;
  }
  if (kTraced) {
    trace_op(op, self, start_ns, ran_outcome(op->deferred, failure != nullptr));
  }
  // A GPU op's callback has enqueued its work: it completes when the stream reaches its event
  // (an op that deferred itself is completed by its caller, as on the CPU).
  if (kGpu && !failure && !op->deferred) track_gpu(op, gpu);
  if (op->deferred) {
    // Whichever of "callback returned" and "ordo_complete" comes second finishes the op.
    if (op->finish_refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    failure = op->async_error;
  }
  if (kGpu) {
    finish(op, failure, self);
  } else if (!failure && op->num_links == 1 && op->kind == OpKind::kUser) {
    if (kOnWorker) {
      op = finalize_one_var(op, self);
      if (op) goto next_op;
    } else {
      finalize_one_var_off_worker<kHelping>(op, kHelping ? *at : completion_site(self), self);
    }
  } else {
    finalize(op, failure, self);
  }
}

ordo_status OpRunner::defer(OpBlock* op, ordo_completion* out) {
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

// ordo_complete, and its form inside a forced unwind's handler.
template <bool kUnwinding>
__attribute__((always_inline)) inline ordo_status OpRunner::complete_as(uint32_t gen,
                                                                        uint32_t index,
                                                                        int32_t code,
                                                                        const char* message) {
  OpBlock* op = pool_.find(index);
  uint32_t armed = gen | OpBlock::kArmed;
  // The CAS disarms the handle: a second call, or a stale handle, fails here.
  if (!op || !op->completion_gen.compare_exchange_strong(armed, gen, std::memory_order_acq_rel)) {
    return fail(ORDO_ERR_INVALID_HANDLE,
                "completion handle is stale: already completed, or never issued");
  }
  if (code != 0) op->async_error = ErrorRecord::make(code, op->op_name(), message);
  if (op->finish_refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (op->kind == OpKind::kChain) {
      chain_resumable(op);  // a worker goes on with the chain, never this thread
      return ORDO_OK;
    }
    this_thread::BusyScope busy(engine_);
    if (kUnwinding) {
      finalize_unwinding(op, op->async_error, current_worker());
    } else {
      finish(op, op->async_error, current_worker());
    }
  }
  return ORDO_OK;
}

ordo_status OpRunner::complete(uint32_t gen, uint32_t index, int32_t code, const char* message) {
  return complete_as<false>(gen, index, code, message);
}

ordo_status OpRunner::complete_unwinding(uint32_t gen, uint32_t index, int32_t code,
                                         const char* message) {
  return complete_as<true>(gen, index, code, message);
}

void OpRunner::finalize(OpBlock* op, ErrorRecord* failure, Worker* self) {
  finalize_as<false>(op, failure, self);
}

void OpRunner::finish(OpBlock* op, ErrorRecord* failure, Worker* self) {
  if (op->kind == OpKind::kMember) {  // a bundle's member that deferred
    finalize_member(op, failure, self);
    return;
  }
  if (op->device_type == ORDO_DEVICE_CPU || !early_) {
    finalize(op, failure, self);
    return;
  }
  // Granted early: completed here only once every var has granted it for real (else the last
  // grant completes it, with this failure).
  if (op->early_refs.load(std::memory_order_acquire) != 0) {
    op->early_failure = failure;
    if (op->early_refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    op->early_failure = nullptr;
  }
  finalize_gpu(op, failure, self);
}

void OpRunner::finalize_gpu(OpBlock* op, ErrorRecord* failure, Worker* self) {
  // The ops that a completion lets finish (granted early, completed, now granted for real) are
  // finalized by this loop, not by recursion: a long chain of small kernels whose events the
  // poller saw before their producers' can all finish at once, one stack frame each otherwise.
  OpBlock* todo = nullptr;
  for (;;) {
    early_->issue_waits(op, nullptr);  // never ran (skipped, failed to start): drops its waits
    // A var it was granted early carries an error: the producer failed after this op had
    // started (a var granted for real would have had it before, and the op was skipped). Its
    // outcome is the producer's, as a skipped op's.
    if (!failure) {
      if (ErrorRecord* inherited = first_error_of(op)) {
        outcomes_.skipped();
        failure = ErrorRecord::retain(inherited);
      }
    }
    OpBlock* finished = finalize_as<true>(op, failure, self);
    while (finished) {
      OpBlock* f = finished;
      finished = f->next;
      f->next = todo;
      todo = f;
    }
    if (!todo) return;
    op = todo;
    todo = op->next;
    failure = op->early_failure;
    op->early_failure = nullptr;
  }
}

// Publishes the op's outcome on each var, releases its grants, recycles it, and hands on
// whatever became ready.
template <bool kGpu>
__attribute__((always_inline)) inline OpBlock* OpRunner::finalize_as(OpBlock* op,
                                                                     ErrorRecord* failure,
                                                                     Worker* self) {
  if (failure) outcomes_.failed(failure);
  release_user_data(op, failure, self);  // before waiters can wake: they see user_data released
  ReadyList ready;
  auto chain_ready = [&ready](OpBlock* r) { ready.add(r); };
  // Counted before its vars are released: whoever sees a var released (a successor, the signal
  // op of ordo_wait_for_var) finds this op completed. Waits for all work, which may therefore
  // see the count before the release, wait for the release to end (PendingCounts).
  const CompletionSite at = completion_site(self);
  counts_.begin_release(at.lane);
  counts_.note_completed(at);
  OpBlock* finished = nullptr;
  if (kGpu) {
    EarlyRelease::Handoff h;
    early_->complete_links(op, failure, &h);
    while (OpBlock* r = h.ready) {
      h.ready = r->next;
      chain_ready(r);
    }
    finished = h.finished;
  } else {
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
  }
  ErrorRecord::release(failure);
  pool_.release(op, at.cache);
  counts_.end_release(at.lane);
  dispatch_ready(ready.head, self);
  // Ops granted early whose last access this completion granted, after their own completion:
  // finalize_gpu finalizes them next.
  return finished;
}

// finalize() of the commonest op, on a worker: a caller's op of one var that succeeded. The same
// steps in the same order, without the loop over links, the failure and the internal kinds'
// tests. When the completion makes exactly one op ready and this worker may keep it, that op is
// returned for run_user_op to run at once: a chain of one var's ops runs back to back without
// going back through the worker's loop and execute's dispatch on kinds (per_device B 628.6 ->
// 495.8 instructions per op, callgrind; docs/PERFORMANCE.md also has what it does to the wall
// clock). Anything else the completion hands on goes out as finalize's would.
__attribute__((always_inline)) inline OpBlock* OpRunner::finalize_one_var(OpBlock* op,
                                                                          Worker* self) {
  const VarSlot::Completion done = complete_one_var<false>(op, completion_site(self), self);
  VarLink* granted = done.granted;
  if (__builtin_expect(done.fired != nullptr || !granted ||
                           granted->next.load(std::memory_order_relaxed) != nullptr,
                       0)) {
    if (granted != nullptr || done.fired != nullptr) hand_on(done, self);  // rare here
    return nullptr;
  }
  OpBlock* r = granted->op();
  if (r->wait.fetch_sub(1, std::memory_order_acq_rel) != 1) return nullptr;  // waits elsewhere
  // As dispatch() would keep it, and then run here: never while a callback is on the stack.
  Worker* keeper = this_thread::running.op == nullptr ? self : nullptr;
  WorkerGroup* g = r->group;
  if (keeper && g && r->kind == OpKind::kUser && r->device_type == ORDO_DEVICE_CPU &&
      g->may_keep(*keeper, r)) {
    return r;
  }
  dispatch(r, keeper, static_cast<size_t>(self->index));
  return nullptr;
}

// Off a worker, nothing is kept: an op run inline (the naive engine, on the pusher) or by a
// helping pusher hands on what its completion made ready, as finalize does (naive B 605.4 ->
// 530.4 instructions per op, callgrind).
template <bool kAnnouncedByCaller>
__attribute__((always_inline)) inline void OpRunner::finalize_one_var_off_worker(
    OpBlock* op, const CompletionSite& at, Worker* self) {
  const VarSlot::Completion done = complete_one_var<kAnnouncedByCaller>(op, at, self);
  if (done.granted != nullptr || done.fired != nullptr) hand_on(done, self);
}

template <bool kAnnouncedByCaller>
__attribute__((always_inline)) inline VarSlot::Completion OpRunner::complete_one_var(
    OpBlock* op, const CompletionSite& at, Worker* self) {
  release_user_data(op, nullptr, self);  // before waiters can wake, as in finalize
  counts_.begin_release(at.lane);        // counted before the var is released: see finalize
  if (kAnnouncedByCaller) {
    at.lane->count_completion();  // run_inline_helping announces it, with no batch to count
  } else {
    counts_.note_completed(at);
  }
  const VarLink& l = op->inline_lines[0].link[0];
  const VarSlot::Completion done = l.var()->complete(l);
  pool_.release(op, at.cache);
  counts_.end_release(at.lane);
  return done;
}

// What a one-var completion made ready, handed on as finalize's end does: finalize_one_var's
// rare ends (several readers granted, a wait mark fired, a successor not kept) and every end of
// finalize_one_var_off_worker. Out of line, and called only when something was granted: inlined
// into both, gcc outlined other code of execute instead (per_device A +20 instructions per op).
__attribute__((noinline)) void OpRunner::hand_on(const VarSlot::Completion& done, Worker* self) {
  ReadyList ready;
  settle_grants(done.granted, [&ready](OpBlock* r) { ready.add(r); });
  if (done.fired != nullptr) ready.add(done.fired->op());
  dispatch_ready(ready.head, self);
}

// Hands on the ops a completion made ready. A worker keeps one successor for itself, but never
// while a callback of its own is still on the stack (that callback might wait for the successor
// to start).
__attribute__((always_inline)) inline void OpRunner::dispatch_ready(OpBlock* ready, Worker* self) {
  Worker* keeper = this_thread::running.op == nullptr ? self : nullptr;
  while (ready) {
    OpBlock* r = ready;
    ready = r->next;
    dispatch(r, keeper, self ? static_cast<size_t>(self->index) : 0);
  }
}

// Inlined: finalize's CPU instance kept it inline while it was its only caller (a call costs
// the CPU path ~20 instructions per op).
__attribute__((always_inline)) inline void OpRunner::release_user_data(OpBlock* op,
                                                                       ErrorRecord* failure,
                                                                       Worker* self) {
  // A plain op (the common case) costs one test of its kind, as before kGraph existed.
  if (__builtin_expect(op->kind != OpKind::kUser, 0)) {
    release_internal(op, failure, self);
  } else if (op->free_fn) {
    try {
      op->free_fn(op->user_data);
    } catch (...) {
      if (foreign_exception_in_flight()) {
        free_fn_unwound(op, failure, self);  // the free_fn ended the thread: finish the op
        throw;
      }
      // A throwing free_fn from a C++ caller must not take the worker down.
    }
  }
}

// What a prepared push or a graph's op lets go of when it finishes (internal ops: nothing).
void OpRunner::release_internal(OpBlock* op, ErrorRecord* failure, Worker* self) {
  if (op->kind == OpKind::kPrepared) {
    auto* p = static_cast<PreparedOp*>(op->internal);
    if (p->release()) {
      try {
        prepared_.finish(p);
      } catch (...) {                        // only a forced unwind gets out of finish()
        free_fn_unwound(op, failure, self);  // the free_fn ended the thread: finish the op
        throw;
      }
    }
  } else if (op->kind == OpKind::kGraph) {
    auto* hook = static_cast<OpHook*>(op->internal);
    hook->finished(hook);  // ordo's own code: it never unwinds
  } else if (op->kind == OpKind::kChain) {
    OpHook* hook = static_cast<const BulkChain*>(op->internal)->hook;
    hook->finished(hook);
  } else if (op->kind == OpKind::kBundle) {
    auto* run = static_cast<BundleRun*>(op->internal);  // its members told the graph already
    run->retire(run);
  }
}

// Inlined into finalize's two instances (CPU and GPU): called, it costs every worker's op.
__attribute__((always_inline)) inline void OpRunner::dispatch(OpBlock* op, Worker* self,
                                                              size_t ring_hint) {
  WorkerGroup* g = op->group;
  if (!g) {
    run_inline(op);
  } else if (self && g->may_keep(*self, op)) {
    self->next = op;
  } else if (!self || !g->hand_to_self(*self, op)) {
    g->enqueue(op, ring_hint);
  }
}

// Here, not in chain_runner.cpp: dispatch is inlined into this file only. The completing thread
// may be anyone's (an I/O thread, another op's callback): the chain's next callbacks run on a
// worker of the chain's group, as the ops after a completed op would.
void OpRunner::chain_resumable(OpBlock* op) {
  dispatch(op, nullptr, 0);
}

void OpRunner::run_inline(OpBlock* op) {
  op->next = nullptr;
  if (tls_inline && tls_inline->runner == this) {  // already looping on this thread: queue it
    if (tls_inline->tail) {
      tls_inline->tail->next = op;
    } else {
      tls_inline->head = op;
    }
    tls_inline->tail = op;
    return;
  }
  InlineQueue q;
  q.runner = this;
  q.head = q.tail = op;
  InlineQueue* outer = tls_inline;
  tls_inline = &q;
  try {
    while (q.head) execute(q.pop(), current_worker());
  } catch (...) {  // only a forced unwind gets out of an op's run
    // A callback ended the thread, which runs no caller code any more (deferred_calls.h): what
    // it would have run inline fails without being called.
    ForcedUnwindScope no_caller_code;
    while (q.head) skip_unwound(q.pop());
    tls_inline = outer;
    throw;
  }
  tls_inline = outer;
}

// The pusher is outside every op, so no inline loop of this engine is on its stack (a loop runs
// its ops under a BusyScope): the op starts one. It is nearly always a caller's CPU op, which
// runs here without execute's tests of its kind, its device and the tracer, and counts its
// completion on the lane without a batch and without looking the site up. The helper is made
// this thread's only for what looks it up: execute's ops (the other kinds, the ops queued
// behind). A completion of another op on this thread meanwhile (an ordo_complete from the
// callback) is counted on the shared counter, which is as right. All this took naive B from
// 530.4 to 445.4 instructions per op (callgrind; docs/PERFORMANCE.md, "The naive pusher's own
// run").
void OpRunner::run_inline_helping(OpBlock* op, PushLane* lane) {
  if (lane == nullptr) __builtin_unreachable();  // the counts' tests of it fold away
  InlineQueue q;
  q.runner = this;
  InlineQueue* const outer_queue = tls_inline;
  tls_inline = &q;
  this_thread::Helper helper;
  this_thread::Helper* outer_helper = nullptr;
  bool installed = false;
  auto install = [&] {
    helper = {engine_, lane, 0};
    outer_helper = this_thread::helper;
    this_thread::helper = &helper;
    installed = true;
  };
  // What was completed on the lane is announced at the end, whatever it was (the first op
  // counts its completion with no batch): this thread may not push again, and a waiter must
  // not miss the last op.
  auto end = [&] {
    tls_inline = outer_queue;
    if (installed) this_thread::helper = outer_helper;
    counts_.announce_lane();
  };
  try {
    if (__builtin_expect(
            tracer_ == nullptr && op->kind == OpKind::kUser && op->device_type == ORDO_DEVICE_CPU,
            1)) {
      this_thread::OutermostBusyScope busy(engine_);  // as execute() marks it
      const CompletionSite at{lane, nullptr, &lane->cache};
      run_user_op_body<false, false, false, true>(op, nullptr, &at);
    } else {
      install();
      execute(op, nullptr);
    }
    if (__builtin_expect(q.head != nullptr, 0)) {
      if (!installed) install();
      do execute(q.pop(), nullptr);
      while (q.head);
    }
  } catch (...) {  // only a forced unwind gets out of an op's run
    // A callback ended the thread, which runs no caller code any more (deferred_calls.h): what
    // it would have run inline fails without being called.
    {
      ForcedUnwindScope no_caller_code;
      while (q.head) skip_unwound(q.pop());
    }
    end();
    throw;
  }
  end();
}

// finalize() inside a forced unwind's handler (engine/forced_unwind.cpp). The ops it makes
// ready to run inline are queued, never run (no caller code now): on this engine's inline loop
// if one is on this thread's stack (its handler fails them as the unwind passes it), else on
// one made here for them.
void OpRunner::finalize_unwinding(OpBlock* op, ErrorRecord* failure, Worker* self) {
  ForcedUnwindScope no_caller_code;
  if (tls_inline && tls_inline->runner == this) {
    finish(op, failure, self);
    return;
  }
  InlineQueue q;
  q.runner = this;
  InlineQueue* outer = tls_inline;
  tls_inline = &q;
  finish(op, failure, self);
  while (q.head) skip_unwound(q.pop());
  tls_inline = outer;
}

// Where the calling thread counts a completion and returns the block: a worker, or a pusher
// helping this engine, on its own lane and magazine; any other thread on the shared counter and
// the pool's locked shards (a worker without a lane: shared counter, own magazine).
CompletionSite OpRunner::completion_site(Worker* self) const {
  if (self) return {self->lane, &self->unflushed, &self->cache};
  this_thread::Helper* h = this_thread::helper;
  if (h && h->engine == engine_) return {h->lane, &h->unflushed, &h->lane->cache};
  return {nullptr, nullptr, nullptr};
}

void OpRunner::trace_op(const OpBlock* op, Worker* self, uint64_t start_ns, TraceOutcome outcome) {
  trace_named(op->has_name ? op->name : "", op, self, start_ns, outcome);
}

// One record on the op's device, under `name` (a chain's node has a name of its own).
void OpRunner::trace_named(const char* name, const OpBlock* op, Worker* self, uint64_t start_ns,
                           TraceOutcome outcome) {
  TraceRecord r;
  r.start_ns = start_ns;
  r.end_ns = tracer_->now_ns();
  r.thread = self ? 0 : caller_thread_number();
  r.device_type = op->device_type;
  r.device_id = op->device_id;
  r.outcome = outcome;
  copy_name(r.name, name);
  if (!self) {
    tracer_->record_external(r);
  } else if (!self->trace) {
    tracer_->count_dropped();  // the worker's row could not be allocated
  } else if (TraceRecord* slot = self->trace->reserve()) {
    *slot = r;
    self->trace->commit();
  }
}

}  // namespace ordo
