/*
 * ordo: a task dependency engine behind a stable C ABI.
 *
 * A caller creates an engine, creates variables (tags that stand for data) and pushes ops: a
 * callback plus the variables it reads and the variables it mutates. Two ops that share a
 * variable, where at least one of them mutates it, run in push order; ops that only read it may
 * run at the same time; everything else runs concurrently on worker threads.
 *
 * Conventions that hold for every function below unless its comment says otherwise:
 *  - Every fallible function returns an ordo_status; ORDO_OK (0) is success. On failure, a
 *    readable message is stored for the calling thread (ordo_last_error_message()).
 *  - No function throws, aborts or reads through a bad handle: a NULL engine, NULL out pointer,
 *    NULL callback, or a NULL array with a non-zero count is ORDO_ERR_INVALID_ARGUMENT; a variable,
 *    completion or prepared-op handle that is 0, stale, deleted, from another engine, of another
 *    kind (a var handle passed as a prepared op, ...) or made up is ORDO_ERR_INVALID_HANDLE
 *    (handles of different kinds never have the same value); an engine pointer that ordo never
 *    handed out, or whose memory has gone with its last reference, is ORDO_ERR_INVALID_HANDLE.
 *    Engine pointers are slots of a table of 65,535, handed out round robin, skipping slots in
 *    use: a slot is handed out again only after at least 65,535 - L other engine creations since
 *    it was last handed out, L being the most engines alive at once meanwhile. Until then a
 *    freed engine's pointer, and the handles it issued, stay invalid; after that they may name
 *    a new engine and its objects (for an engine that lived through that many creations, as
 *    soon as it is freed).
 *  - Structs that may grow start with struct_size (the caller's sizeof). A size below 4 or
 *    above 4096 (no struct of this ABI will grow that large: the struct was not initialized) is
 *    ORDO_ERR_INVALID_ARGUMENT, and nothing is read or written through it.
 *  - Every function is thread-safe unless its comment says otherwise.
 *  - Arrays (var lists) and option or config structs passed in are read only during the call:
 *    the caller may free or reuse them as soon as it returns. Every options or config pointer
 *    may be NULL, which means the defaults.
 *  - Which thread runs caller code: an op's callback (ordo_fn) runs on a worker thread of the
 *    engine, or inline on the thread that makes it ready (the naive engine, ORDO_PROP_ASYNC ops,
 *    a pusher helping under ORDO_ENGINE_FLAG_PUSHERS_HELP); its free_fn runs right after the op
 *    finished, on the thread that finished it (the one that ran or skipped it, or the one that
 *    called ordo_complete for a deferred op); a prepared op's free_fn as ordo_opr_new says; an
 *    ordo_wait_fn as ordo_wait_for_var_async says (for a thread ended inside caller code, see
 *    the next point). ordo never calls caller code from a signal handler.
 *  - Caller code called by ordo (callbacks, free_fns, ordo_wait_fns) must return normally. A C++
 *    exception escaping it is caught (a callback's op then fails). longjmp, siglongjmp, or a
 *    coroutine or fiber switch that never comes back, out of caller code is forbidden: it skips
 *    ordo's bookkeeping for the op and leaves the engine and the thread unusable (ops hang;
 *    undefined behaviour). A forced unwind (pthread_exit or pthread_cancel on that thread, as
 *    Python does to a thread that wants the GIL while the interpreter exits; and likewise any
 *    exception that is not C++, such as a Rust panic through a "C-unwind" callback, which ordo
 *    never swallows) passes through ordo and goes on ending the thread: ordo first fails the
 *    op (ORDO_ERR_OP_FAILED, "the callback's thread exited"; an op that had deferred waits for
 *    its ordo_complete as usual;
 *    a free_fn's op completes as it was going to; a pipe callback's pipeline run fails as
 *    pipeline.h says), releases its vars and wakes its waiters, so nothing hangs and nothing
 *    aborts. On its way out the thread runs no more caller code (a
 *    second forced unwind during the first would abort the process): ops it would have run
 *    inline next (the naive engine, ORDO_PROP_ASYNC) fail without being called ("not run"),
 *    and the free_fns and ordo_wait_fns it would have called are queued, to run on the next
 *    thread that calls an ordo wait (ordo_wait_for_var*, ordo_wait_for_all*,
 *    ordo_wait_for_var_async), ordo_engine_destroy or ordo_engine_release, or on the worker that
 *    replaces the ended one. A worker thread so ended gets a successor at once while a thread
 *    waits on the engine (a wait, destroy's drain) or an async wait is pending, else at the next
 *    such call: a runtime that ends threads calling into it is usually exiting, and threads
 *    started meanwhile would go on calling into it (CPython crashes once its interpreter is
 *    gone). Until then the engine has that many fewer workers.
 *  - Fork: an engine belongs to the process that created it (its worker threads do not survive
 *    fork()). In a child of fork(), every call naming an engine the parent created (or a var,
 *    completion, prepared op or exec of one) returns ORDO_ERR_INVALID_STATE ("created ... before
 *    a fork()"), except three that only count references there: ordo_engine_retain,
 *    ordo_engine_release, and ordo_engine_destroy, which returns ORDO_OK at once. The child's
 *    copy of such an engine is never drained, joined or freed (its memory stays as the fork left
 *    it), and no callback, free_fn or ordo_wait_fn of it runs in the child. Engines created in
 *    the child work normally.
 *  - Types in signatures are fixed-width integers and pointers only (no enums, bool or structs by
 *    value), so every FFI can call them.
 *
 * This header is valid C99 and C++.
 */
#ifndef ORDO_ORDO_H
#define ORDO_ORDO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Readers of this header that are not C compilers (cffi's cdef, bindgen, Clang.jl) can define
 * ORDO_API as empty and ORDO_NO_INLINE_HELPERS before including it (or pass -DORDO_API=
 * -DORDO_NO_INLINE_HELPERS to the preprocessor): what is left is declarations only, with no
 * attribute and no function body. ORDO_NO_INLINE_HELPERS hides ordo_engine_config_init and
 * ordo_push_opts_init, which such a consumer replaces with the _init_sized functions and
 * ordo_struct_size. */
#ifndef ORDO_API
#if defined(_WIN32)
#if defined(ORDO_BUILDING_LIBRARY)
#define ORDO_API __declspec(dllexport)
#else
#define ORDO_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define ORDO_API __attribute__((visibility("default")))
#else
#define ORDO_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------- */
/* Version                                                                                     */
/* ------------------------------------------------------------------------------------------- */

#define ORDO_VERSION_MAJOR 0
#define ORDO_VERSION_MINOR 1
#define ORDO_VERSION_PATCH 0
/** The version this header describes, as one number: major * 10000 + minor * 100 + patch. */
#define ORDO_VERSION_NUMBER \
  (ORDO_VERSION_MAJOR * 10000 + ORDO_VERSION_MINOR * 100 + ORDO_VERSION_PATCH)

/** The version of the loaded library, encoded like ORDO_VERSION_NUMBER. Never fails. */
ORDO_API uint32_t ordo_version(void);
/** The version of the loaded library as a static string such as "0.1.0". Never NULL. */
ORDO_API const char* ordo_version_string(void);

/* ------------------------------------------------------------------------------------------- */
/* Types and status codes                                                                      */
/* ------------------------------------------------------------------------------------------- */

/** An engine. Opaque, reference counted (ordo_engine_retain / ordo_engine_release). */
typedef struct ordo_engine ordo_engine;
/** The execution context of a running op. Valid only inside its callback, on its thread: an exec
 *  used anywhere else (kept after the callback returned, passed to another thread, made up) gets
 *  ORDO_ERR_INVALID_STATE, and never stands for another op. Opaque: not a pointer to read. */
typedef struct ordo_exec ordo_exec;
/** A variable handle: 64 bits, generation-checked, tied to one engine. 0 is never valid. */
typedef uint64_t ordo_var;
/** A one-shot handle that completes a deferred (asynchronous) op. 0 is never valid. */
typedef uint64_t ordo_completion;
/** A prepared op: created once, pushed many times. 0 is never valid. */
typedef uint64_t ordo_opr;
/** A status code: ORDO_OK or one of the ORDO_ERR_* values below. */
typedef int32_t ordo_status;

/**
 * An op's callback. Runs on a worker thread (or inside the push for the naive engine and for
 * ORDO_PROP_ASYNC ops). Returns 0 for success or any non-zero user code for failure; the code is
 * recorded unchanged in the error state of the vars the op mutates. After ordo_exec_defer() the
 * return value is ignored and the op completes through ordo_complete(). The callback must not
 * unwind (a C++ exception escaping it is caught and counted as a failure, code ORDO_ERR_OP_FAILED;
 * a forced unwind fails the op and goes on, and longjmp out of it is forbidden: see the
 * conventions above).
 */
typedef int32_t (*ordo_fn)(ordo_exec* exec, void* user_data);
/** Releases an op's user_data. Called exactly once per successful push (see ordo_push_opts),
 *  on the thread that finished the op (see the conventions above). */
typedef void (*ordo_free_fn)(void* user_data);
/** The callback of ordo_wait_for_var_async: called exactly once, with ORDO_OK or
 *  ORDO_ERR_OP_FAILED (see there). Must not block for long: it runs on an engine thread. */
typedef void (*ordo_wait_fn)(void* user_data, ordo_status status);

#define ORDO_OK 0
/** A NULL pointer, a NULL array with a non-zero count, an out-of-range field or value. */
#define ORDO_ERR_INVALID_ARGUMENT 1
/** A var/completion/prepared-op handle that is 0, stale, deleted, foreign, of another kind or
 *  made up; or an engine pointer ordo never handed out or that has been freed by its last
 *  release. */
#define ORDO_ERR_INVALID_HANDLE 2
/** A waited-for op (or one it depended on) failed; details in ordo_last_error_message(). */
#define ORDO_ERR_OP_FAILED 3
/** A timed wait ran out of time. Nothing else happened. */
#define ORDO_ERR_TIMEOUT 4
/** The op asked for a device this build or machine does not have. */
#define ORDO_ERR_NO_DEVICE 5
/** The engine is shutting down or shut down (ordo_engine_destroy has begun). */
#define ORDO_ERR_SHUTDOWN 6
/** Memory or another resource (handle space, threads) ran out. Nothing was pushed. */
#define ORDO_ERR_NO_MEMORY 7
/** The call is not valid now: e.g. an exec used outside its callback, a second defer, an
 *  engine used in a child of fork() that its parent created. */
#define ORDO_ERR_INVALID_STATE 8
/** The call would wait for work that cannot finish while the caller waits: a wait, destroy or
 *  last release called from inside an op of the same engine. Nothing happened. */
#define ORDO_ERR_WOULD_DEADLOCK 9
/** A struct_size larger than this library knows with non-zero unknown bytes, a non-NULL
 *  reserved `next` pointer, or unknown flag bits. */
#define ORDO_ERR_UNSUPPORTED 10
/** A bug in ordo or an unexpected system error; the message says what. */
#define ORDO_ERR_INTERNAL 11
/** A pipeline run ended with tokens whose deferral was never resolved (see pipeline.h,
 *  ordo_pipeline_dropped); every other result of the run is intact. */
#define ORDO_ERR_TOKENS_DROPPED 12

/** A static, never-NULL name for a status, e.g. "ORDO_ERR_TIMEOUT". Unknown codes give
 *  "ORDO_ERR_UNKNOWN". */
ORDO_API const char* ordo_status_string(ordo_status s);

/**
 * The message of the last failed call on this thread; "" if there was none. Never NULL. It
 * starts with the failed call's name ("ordo_var_delete: var handle ... is stale: ..."), except
 * a wait's ORDO_ERR_OP_FAILED, which is the failed op's own account ("op 'x' failed (code 3)").
 * The pointer stays valid until the next ordo call on this thread. Thread-local: fetch it on the
 * thread that made the failing call (bindings whose runtime may move between OS threads should
 * use ordo_last_error_copy inside the same native call).
 */
ORDO_API const char* ordo_last_error_message(void);
/**
 * Copies the calling thread's last error message into buf (NUL-terminated, truncated to fit
 * cap bytes; nothing is written when buf is NULL or cap is 0). Returns the full length of the
 * message, excluding the NUL, so a caller can size a buffer. Never fails.
 */
ORDO_API size_t ordo_last_error_copy(char* buf, size_t cap);

/* ------------------------------------------------------------------------------------------- */
/* Struct sizes                                                                                */
/* ------------------------------------------------------------------------------------------- */

/** Kinds for ordo_struct_size: one per public struct that starts with struct_size. */
#define ORDO_STRUCT_ENGINE_CONFIG 1
#define ORDO_STRUCT_STATS 2
#define ORDO_STRUCT_QUEUE_STATS 3
#define ORDO_STRUCT_PUSH_OPTS 4
#define ORDO_STRUCT_EXEC_INFO 5

/** The library's sizeof the struct of that kind (ORDO_STRUCT_*), 0 for an unknown kind. For
 *  bindings that declare the structs themselves: their layout test compares their size with
 *  this, and a struct_size of at most this is always understood. No public struct has padding:
 *  every byte up to its size belongs to a field (reserved ones included). Never fails; any
 *  thread. */
ORDO_API size_t ordo_struct_size(int32_t kind);

/* ------------------------------------------------------------------------------------------- */
/* Engine                                                                                      */
/* ------------------------------------------------------------------------------------------- */

/** Engine kinds (ordo_engine_config.kind). 0 means: env ORDO_ENGINE, else per_device. */
#define ORDO_ENGINE_DEFAULT 0
/** Runs each op inside the push call (or the call that makes it ready); a push from inside one
 *  of its ops runs right after that op returns (see ORDO_PROP_ASYNC). A debugging aid: no
 *  worker threads, nothing overlaps. */
#define ORDO_ENGINE_NAIVE 1
/** One shared pool of CPU workers for every op property. */
#define ORDO_ENGINE_POOLED 2
/** Worker blocks per device and per property: CPU workers, a CPU priority worker, copy
 *  workers, and per GPU a compute block and one block per copy direction, with the GPU's
 *  streams (gpu_compute_streams compute streams, one stream per copy direction). Without a
 *  usable GPU (a build without CUDA, no runtime, driver or device) a GPU push returns
 *  ORDO_ERR_NO_DEVICE with the reason. Every kind makes a GPU's streams (and the thread that
 *  watches their events) at the first op for that GPU, not at ordo_engine_create: an engine
 *  that runs only CPU ops makes no CUDA context. */
#define ORDO_ENGINE_PER_DEVICE 3

/**
 * ordo_engine_config.flags: pushing threads help the workers once the engine is over its
 * submission window (max_pending), as an OpenMP thread runs tasks when too many are queued.
 * A push that the throttle holds runs ready ops of the normal CPU workers on the pushing thread
 * (threads past the 64 that get a push lane of their own only wait)
 * instead of sleeping, until half of the pending ops are done or nothing is ready; and until a
 * later check finds fewer than half of max_pending pending, a push whose op is ready at once
 * (normal CPU property, priority 0) runs it before returning. Faster when pushers outnumber
 * idle cores, since what a thread pushed is still in its cache. The trade: callbacks then run
 * on a thread that calls ordo_opr_push or ordo_opr_push_prepared from outside any op (of any
 * engine: a push from inside an op never helps; ordo_var_delete, ordo_var_clear_error and the
 * waits never do, and are not held by the throttle either), so an op
 * must not wait for something that thread would do after its push returns (that would
 * deadlock); in particular two ops pushed by one thread, readers of one var included, are then
 * not guaranteed to be able to run at the same time. Off by default; env ORDO_PUSHERS_HELP=1
 * turns it on when the flag is not set. ordo_engine_get_config reports it.
 */
#define ORDO_ENGINE_FLAG_PUSHERS_HELP 0x1u

/**
 * Engine configuration. Growable: starts with struct_size; always fill it with
 * ordo_engine_config_init() before setting fields. A field left at 0 takes its environment
 * override if set, else the default. Precedence: explicit field > environment > default.
 */
typedef struct ordo_engine_config {
  uint32_t struct_size; /**< sizeof(ordo_engine_config) as the caller compiled it */
  int32_t kind;         /**< ORDO_ENGINE_*; env ORDO_ENGINE=naive|pooled|per_device */
  int32_t cpu_threads;  /**< CPU workers; env ORDO_CPU_THREADS; default: hardware threads, >= 2
                             (at most 1,024). Each of the three thread counts is 0 (take the
                             environment's, else the default) or 1 to 1,024; anything else is
                             INVALID_ARGUMENT */
  int32_t cpu_priority_threads; /**< per_device: workers for ORDO_PROP_CPU_PRIORITIZED ops; env
                                   ORDO_CPU_PRIORITY_THREADS; default 1 */
  int32_t copy_threads;         /**< per_device: workers for each copy direction; env
                                   ORDO_COPY_THREADS; default 1 */
  int32_t max_pending;    /**< submission throttle: when more of the caller's ops than this
                             are pending (as ordo_stats.pending counts them: the internal ops of
                             var deletes, clear_error and waits do not count), a push
                             (ordo_opr_push, ordo_opr_push_prepared) from a thread that is not
                             running an op of this engine waits until half of them are done,
                             keeping memory and caches bounded (StarPU's
                             STARPU_LIMIT_MAX_SUBMITTED_TASKS does the same). It waits as long
                             as the pending count keeps falling, and gives up once it has not
                             fallen for a limit learned from how far apart completions come
                             (1.5 times the longest spell without one, 1 ms to 100 ms, halved
                             while nothing completes) (so an op that waits for the pusher never
                             deadlocks it; the window is then overrun by what the pusher adds,
                             as it is while the limit is learned and by ops that complete more
                             than about 70 ms apart).
                             Each pushing thread looks every max_pending / 8 pushes (at most
                             256), so one pusher overshoots the window by at most an eighth; env
                             ORDO_MAX_PENDING; default 8192; -1 = no throttle; otherwise at
                             least 64 (smaller values are INVALID_ARGUMENT) */
  uint32_t flags;         /**< ORDO_ENGINE_FLAG_* bits; others must be 0 */
  uint32_t reserved0;     /**< must be 0 (else ORDO_ERR_UNSUPPORTED). It fills what was a
                             padding hole before `next`, so every byte inside struct_size is a
                             field; the struct's size and offsets are unchanged */
  const void* next;       /**< reserved for extension chains, must be NULL */
  const char* trace_path; /**< non-NULL and non-empty: record every op (name, worker, device,
                             start, end, outcome) and write them as Chrome trace JSON (opens in
                             Perfetto and chrome://tracing) to this file when the engine shuts
                             down; see ordo_engine_write_trace. Copied at create. Env
                             ORDO_TRACE=path.json; default NULL (tracing off, which costs one
                             predictable branch per op). Under ORDO_TRACE (trace_path not
                             set) the process's first engine so traced writes path.json, the
                             n-th path-n.json, so that none overwrites another's. Records
                             are kept in memory per worker, at most 1,048,576 per worker (more
                             are counted as dropped). A
                             deferred op's record ends when its callback returns, with the
                             outcome "deferred": its completion (and a failure passed to
                             ordo_complete) is not in the trace, only in ordo_engine_stats and
                             the waits. A
                             trace that cannot be written at shutdown is reported on stderr;
                             destroy still returns ORDO_OK and leaves the last error alone. An
                             ordo_engine_create that fails writes no file. */
  int32_t gpu_compute_streams; /**< compute streams per GPU, taken round robin by the GPU ops
                                  of ORDO_PROP_NORMAL and ORDO_PROP_CPU_PRIORITIZED (each copy
                                  direction has one stream of its own besides); env
                                  ORDO_GPU_STREAMS; default 4; 0 (the environment's, else the
                                  default) or 1 to 64, anything else is INVALID_ARGUMENT.
                                  Unused without a GPU */
  int32_t gpu_stream_waits;    /**< early release of GPU successors (SPEC §7): a GPU op that
                                  depends only on GPU ops of the same GPU whose events are
                                  recorded (their callbacks returned, their work enqueued)
                                  starts at once, its stream waiting for theirs on the device
                                  (cudaStreamWaitEvent), instead of once their work has
                                  finished. CPU ops, the waits, other GPUs' ops and deletes
                                  still wait for the work to finish. When such a producer's
                                  work fails, an op that started early fails with the
                                  producer's error as a skipped op does (its vars are poisoned,
                                  ordo_stats.skipped counts it), though its callback ran and
                                  its work may have run. 1 = on, -1 = off (every
                                  successor starts once the work it depends on has finished),
                                  0 = env ORDO_GPU_STREAM_WAITS (1 or 0), else on; other values
                                  are INVALID_ARGUMENT. ordo_engine_get_config reports 1 or -1 */
} ordo_engine_config;

/**
 * Fills cfg with defaults, writing at most `size` bytes (the caller's sizeof). Safe when the
 * library's struct is larger than the caller's. This is the entry point for FFI languages.
 * Does nothing when cfg is NULL or size is smaller than 4 or above 4096.
 */
ORDO_API void ordo_engine_config_init_sized(ordo_engine_config* cfg, size_t size);
/** Fills cfg with defaults using the caller's compile-time struct size. */
#ifndef ORDO_NO_INLINE_HELPERS
static inline void ordo_engine_config_init(ordo_engine_config* cfg) {
  ordo_engine_config_init_sized(cfg, sizeof(ordo_engine_config));
}
#endif

/**
 * Creates an engine and its worker threads; *out receives it with one reference (the
 * creator's). cfg may be NULL for defaults. Errors: INVALID_ARGUMENT (out NULL, bad field or
 * bad env value), UNSUPPORTED (unknown struct tail, flags or next), NO_MEMORY (memory, threads
 * or engine slots ran out). On failure *out is set to NULL.
 */
ORDO_API ordo_status ordo_engine_create(const ordo_engine_config* cfg, ordo_engine** out);

/**
 * Shuts the engine down: new pushes return ORDO_ERR_SHUTDOWN at once, every op pushed before
 * runs to completion (deferred ops included: destroy waits for their ordo_complete), worker
 * threads are joined, and the creator's reference is dropped (memory goes with the last
 * reference). Through other references afterwards, calls that would add work (pushes, var
 * new/delete/clear_error, waits) return ORDO_ERR_SHUTDOWN; read-only queries
 * (ordo_var_get_error, ordo_engine_get_config, ordo_engine_stats, ordo_engine_write_trace) and
 * ordo_opr_delete still work, so a binding can read results and free what it holds.
 * Errors: WOULD_DEADLOCK when called from inside an op of this engine (nothing happens);
 * SHUTDOWN when destroy was already called and the engine is still referenced elsewhere;
 * INVALID_HANDLE when the engine is already freed.
 */
ORDO_API ordo_status ordo_engine_destroy(ordo_engine* e);

/** Adds a reference. Errors: INVALID_HANDLE when the engine is already freed; NO_MEMORY when it
 *  already holds 2^31 - 1 references, the most it counts (nothing changes). Works on an engine
 *  that is shutting down, so bindings can keep its memory alive. */
ORDO_API ordo_status ordo_engine_retain(ordo_engine* e);
/**
 * Drops a reference. The last one shuts the engine down as ordo_engine_destroy does and frees
 * it. Errors: INVALID_HANDLE (already freed); WOULD_DEADLOCK when this would be the last
 * reference and the caller is inside an op of this engine (the reference is kept).
 */
ORDO_API ordo_status ordo_engine_release(ordo_engine* e);

/** Reads the effective configuration (kind and thread counts after env and defaults) into out,
 *  writing at most out->struct_size bytes; set struct_size (ordo_engine_config_init) first.
 *  out->trace_path, when not NULL, points into the engine: it is valid until the engine is
 *  freed (its last reference released); copy it to keep it longer. */
ORDO_API ordo_status ordo_engine_get_config(ordo_engine* e, ordo_engine_config* out);

/** Queues counted one by one in ordo_stats.queue_ready: one per ORDO_PROP_* that has workers. */
#define ORDO_STATS_QUEUES 4

/** Counters of one engine (SPEC §9). Growable: set struct_size before the call. Counts are of
 *  the caller's ops (ordo_opr_push and ordo_opr_push_prepared), not of the internal ops that
 *  var deletes, clear_error and wait_for_var queue. Read one after another while ops run, so a
 *  snapshot may be off by the ops that moved meanwhile; exact when the engine is idle. */
typedef struct ordo_stats {
  uint32_t struct_size;   /**< sizeof(ordo_stats) as the caller compiled it */
  uint32_t workers;       /**< worker threads running */
  uint64_t pushed;        /**< ops accepted since the engine was created */
  uint64_t completed;     /**< ops finished: ran, failed or skipped */
  uint64_t failed;        /**< ops that failed: non-zero return, throw, failing completion, or
                               skipped (a skipped op counts as failed, with the inherited error) */
  uint64_t skipped;       /**< of `failed`, the ops not run because a var they use carried an
                               error */
  uint64_t pending;       /**< pushed and not completed */
  uint64_t ready;         /**< ops ready to run and waiting for a worker (all queues together) */
  uint64_t trace_records; /**< op records held by the tracer; 0 when tracing is off */
  uint64_t trace_dropped; /**< op records not kept because a worker's buffer was full */
  uint64_t queue_ready[ORDO_STATS_QUEUES]; /**< `ready`, queue by queue: [p] counts the ops
                             waiting for the workers that run ORDO_PROP_* p (per_device: CPU,
                             CPU-prioritized, copy-to and copy-from workers). The pooled kind's
                             one queue, for every property, is [ORDO_PROP_NORMAL]; naive: all 0.
                             The last field so far: a caller compiled against a header without
                             it passes a smaller struct_size and simply does not get it. */
} ordo_stats;

/** Fills out (up to out->struct_size bytes) with the engine's counters. Thread-safe, lock-free
 *  for the caller's pushes; may be called from inside an op. Errors: INVALID_ARGUMENT (engine or
 *  out NULL, struct_size < 4), INVALID_HANDLE (engine freed). Works after destroy while the
 *  engine is still referenced (ordo_engine_retain). */
ORDO_API ordo_status ordo_engine_stats(ordo_engine* e, ordo_stats* out);

/** One of an engine's ready queues: the ops ready to run and waiting for one group of workers
 *  of one device (per_device: the CPU workers, the CPU-prioritized worker, the copy-to and the
 *  copy-from workers; pooled: one queue for every property; naive: none). Unlike
 *  ordo_stats.queue_ready, whose four entries are fixed by the ABI, the list grows with devices
 *  (each GPU's queues will follow the CPU's). Growable: set struct_size before the call. */
typedef struct ordo_queue_stats {
  uint32_t struct_size; /**< sizeof(ordo_queue_stats) as the caller compiled it */
  uint32_t queues;      /**< how many queues the engine has: indexes 0 .. queues - 1 */
  int32_t device_type;  /**< ORDO_DEVICE_* of the workers */
  int32_t device_id;    /**< GPU ordinal; 0 on the CPU */
  int32_t prop;         /**< the ORDO_PROP_* these workers run; -1 when they run every
                             property (the pooled kind's one queue) */
  uint32_t workers;     /**< worker threads running (0 until the queue's first op starts them) */
  uint64_t ready;       /**< ops ready and waiting for these workers (approximate while ops
                             run, as ordo_stats.ready) */
  const char* name;     /**< a static name: "cpu", "prio", "h2d", "d2h"; never NULL */
} ordo_queue_stats;

/** Fills out (up to out->struct_size bytes) with the index-th ready queue of the engine, device
 *  by device (index 0 is the CPU's normal queue when the engine has workers). How many there are
 *  comes in every answer (`queues`) and from ordo_engine_queue_count. Thread-safe; may be
 *  called from inside an op. Errors: INVALID_ARGUMENT (engine or out NULL, struct_size < 4, or
 *  index not below the number of queues: the message says how many there are),
 *  INVALID_HANDLE (engine freed). */
ORDO_API ordo_status ordo_engine_queue_stats(ordo_engine* e, uint32_t index, ordo_queue_stats* out);
/** The number of ready queues ordo_engine_queue_stats reports (0 for the naive kind). Errors:
 *  INVALID_ARGUMENT (NULL), INVALID_HANDLE (engine freed). */
ORDO_API ordo_status ordo_engine_queue_count(ordo_engine* e, uint32_t* out);

/**
 * Writes the op records so far as Chrome trace JSON to `path` (the records are kept: the file
 * written at shutdown still has them all). A regular file is replaced whole, through a
 * temporary file beside it and a rename, so that a reader or another engine writing the same
 * path never sees half a trace; the new file keeps the old one's permission bits (and its owner
 * and group, where the process may set them). Other paths (/dev/stdout, a FIFO, a symbolic link,
 * a file with other hard links, so that they keep seeing it), and a file in a folder where no
 * temporary file can be made, are written directly. It holds no lock of the engine while it
 * writes: ordo_engine_stats and new workers do not wait for a slow file (two writes of one
 * engine's trace run one after the other). Op name bytes that are not UTF-8 are written as
 * U+FFFD. Thread-safe; ops keep running meanwhile and those that finish while it writes may or
 * may not be in the file. Errors: INVALID_ARGUMENT (engine or
 * path NULL, path empty, or the file cannot be written: the message names the reason),
 * INVALID_STATE (tracing is off for this engine: set ordo_engine_config.trace_path or ORDO_TRACE),
 * INVALID_HANDLE (engine freed).
 */
ORDO_API ordo_status ordo_engine_write_trace(ordo_engine* e, const char* path);

/**
 * Writes, for a person hunting a hang (an ordo_complete never called, an op that never
 * returns), what the engine still has pending: every op pushed and not finished, oldest first,
 * with its name, its state (queued for its vars; ready, waiting for a worker; running;
 * deferred, waiting for ordo_complete), how long it has been pending, and the vars it reads or
 * mutates (up to 6); then every var that waits hang on (ordo_wait_for_var's marks, the waits
 * that share them or wait behind them, waits for the var's delete). The internal ops of var
 * deletes, clears and waits are listed too. A snapshot taken while the engine runs: ops that
 * finish meanwhile may or may not be listed. The text is for reading, not parsing, and may
 * change. Any thread, also from inside an op; the engine is not stopped (the scan costs time
 * in proportion to every op and var the engine ever held). Errors: INVALID_ARGUMENT (engine or
 * out NULL), INVALID_HANDLE (engine freed).
 */
ORDO_API ordo_status ordo_engine_dump(ordo_engine* e, FILE* out);

/** Number of GPUs this library can use (at most 16). 0 in a build without CUDA (meson option
 *  `cuda`), and on a machine without a GPU or a CUDA driver: a GPU push then returns
 *  ORDO_ERR_NO_DEVICE, whose message (ordo_last_error_message) says which. The CUDA runtime
 *  (libcudart.so of the toolkit ordo was built with) is loaded on first use from the loader's
 *  path, else from $CUDA_HOME/lib64; libordo.so itself needs no CUDA library. */
ORDO_API ordo_status ordo_device_count(int32_t* out);

/* ------------------------------------------------------------------------------------------- */
/* Variables                                                                                   */
/* ------------------------------------------------------------------------------------------- */

/** Creates a variable. Errors: INVALID_ARGUMENT, SHUTDOWN, NO_MEMORY (16,777,216 vars alive). */
ORDO_API ordo_status ordo_var_new(ordo_engine* e, ordo_var* out);

/**
 * Deletes a variable. Ordered like a write: it takes effect after every op pushed before it that
 * uses v; its memory is reclaimed then. From the moment this returns, every use of v (push,
 * wait, delete, query) returns ORDO_ERR_INVALID_HANDLE, and the handle is never valid again.
 * Errors: INVALID_HANDLE, SHUTDOWN.
 */
ORDO_API ordo_status ordo_var_delete(ordo_engine* e, ordo_var v);

/**
 * Clears v's error state. Ordered like a write: ops pushed before it still see (and are skipped
 * by) the error; ops pushed after it run normally. Errors: INVALID_HANDLE, SHUTDOWN.
 */
ORDO_API ordo_status ordo_var_clear_error(ordo_engine* e, ordo_var v);

/**
 * Reads v's error state as it is now (not ordered with pending ops: wait first for a settled
 * answer). *code receives 0 when v has no error, else the failing op's code. When buf is not
 * NULL, the message "op 'NAME' failed (code N): MESSAGE" is copied into it (truncated to cap).
 * Errors: INVALID_ARGUMENT (code NULL), INVALID_HANDLE.
 */
ORDO_API ordo_status ordo_var_get_error(ordo_engine* e, ordo_var v, int32_t* code, char* buf,
                                        size_t cap);

/* ------------------------------------------------------------------------------------------- */
/* Pushing ops                                                                                 */
/* ------------------------------------------------------------------------------------------- */

/** Op properties (ordo_push_opts.prop): which workers run the op. */
#define ORDO_PROP_NORMAL 0           /**< CPU workers (or the device's compute workers) */
#define ORDO_PROP_CPU_PRIORITIZED 1  /**< per_device: a dedicated CPU priority worker */
#define ORDO_PROP_COPY_TO_DEVICE 2   /**< per_device: upload workers (on the CPU today) */
#define ORDO_PROP_COPY_FROM_DEVICE 3 /**< per_device: download workers (on the CPU today) */
/** Runs inline on whichever thread makes it ready (the pusher or the thread completing its last
 *  dependency): for ops that only start asynchronous work and defer. Keep them short. One
 *  exception: an inline op that another inline op of the same engine makes ready on the same
 *  thread (by pushing it, or by completing) runs right after that op returns, not inside it,
 *  so that inline ops never recurse; such an op must not wait for one it pushed. */
#define ORDO_PROP_ASYNC 4

/** Device types (ordo_push_opts.device_type). */
#define ORDO_DEVICE_CPU 0
#define ORDO_DEVICE_GPU 1

/** Max bytes of an op name kept by the engine (longer names are truncated). */
#define ORDO_NAME_MAX 47

/** Push options. Growable: fill with ordo_push_opts_init() before setting fields. */
typedef struct ordo_push_opts {
  uint32_t struct_size; /**< sizeof(ordo_push_opts) as the caller compiled it */
  int32_t priority;     /**< higher runs first among ready ops waiting for the same workers;
                             default 0 */
  int32_t prop;         /**< ORDO_PROP_*; default ORDO_PROP_NORMAL */
  int32_t device_type;  /**< ORDO_DEVICE_CPU (default) or ORDO_DEVICE_GPU */
  int32_t device_id;    /**< GPU ordinal for ORDO_DEVICE_GPU; must be 0 for the CPU */
  uint32_t reserved0;   /**< must be 0 (else ORDO_ERR_UNSUPPORTED). It fills what was a padding
                             hole before free_fn; the struct's size and offsets are unchanged */
  ordo_free_fn free_fn; /**< when not NULL, called with user_data exactly once after the op
                             finished (ran, failed or was skipped), before waiters on its vars
                             wake; only when the push returned ORDO_OK */
  const char* name;     /**< shown in errors and traces; copied (up to ORDO_NAME_MAX bytes,
                             cut back to a whole UTF-8 character), may be NULL */
  const void* next;     /**< reserved, must be NULL */
} ordo_push_opts;

/** Fills opts with defaults, writing at most `size` bytes (the caller's sizeof). Does nothing
 *  when opts is NULL or size is smaller than 4 or above 4096. The entry point for FFI
 *  languages. */
ORDO_API void ordo_push_opts_init_sized(ordo_push_opts* opts, size_t size);
/** Fills opts with defaults using the caller's compile-time struct size. */
#ifndef ORDO_NO_INLINE_HELPERS
static inline void ordo_push_opts_init(ordo_push_opts* opts) {
  ordo_push_opts_init_sized(opts, sizeof(ordo_push_opts));
}
#endif

/**
 * Pushes an op. Always asynchronous, except for the naive engine and ORDO_PROP_ASYNC ops whose
 * vars are free, which run before this returns (when pushed from inside an inline op of the
 * same engine, right after that op returns instead, see ORDO_PROP_ASYNC), and for a ready op
 * pushed over the window under ORDO_ENGINE_FLAG_PUSHERS_HELP (see there), which may run on
 * this thread before this returns. The op runs after every op pushed before it
 * that shares a var with it where either mutates it. A var in both lists counts as mutable; a
 * var listed twice counts once; an op with no vars simply runs. May be called from inside an op.
 * Pushes from several threads are linearizable and never deadlock.
 * If any var the op reads or mutates is in an error state when the op's turn comes, fn is not
 * called: the op is skipped (counted as failed, and in ordo_stats.skipped), and passes the error
 * on to the vars it mutates.
 * Ownership: user_data stays the caller's; free_fn (if given) releases it after the op finished.
 * On failure nothing was pushed and free_fn is not called.
 * Flow control: from a thread that is not running an op of this engine, a push made while more
 * than ordo_engine_config.max_pending ops are pending waits for the workers to catch up (while
 * the count falls; once it stops falling, for a limit learned from how far apart completions
 * come, 1 ms to 100 ms), after the op has been pushed; with ORDO_ENGINE_FLAG_PUSHERS_HELP it
 * first runs ready ops on the calling thread.
 * Errors: INVALID_ARGUMENT (e or fn NULL, NULL array with non-zero count, bad opts field, more
 * than 65,535 distinct vars), INVALID_HANDLE (any var 0, stale, deleted or foreign),
 * UNSUPPORTED (opts tail or next),
 * NO_DEVICE (GPU asked for and none present; or the GPU's streams, made by its first op, could
 * not be made: the message has CUDA's error, e.g. in a child forked after its parent used CUDA
 * (in a forked child the message says so), and every later op for that GPU on this engine gets
 * the same), SHUTDOWN, NO_MEMORY.
 */
ORDO_API ordo_status ordo_opr_push(ordo_engine* e, ordo_fn fn, void* user_data,
                                   const ordo_var* const_vars, size_t num_const,
                                   const ordo_var* mutable_vars, size_t num_mutable,
                                   const ordo_push_opts* opts);

/**
 * Creates a prepared op: the callback, var lists and options are checked, deduplicated and
 * stored once, so each ordo_opr_push_prepared costs less than ordo_opr_push. opts->free_fn (if
 * given) runs once, after ordo_opr_delete and after the last push of it has finished; for a
 * prepared op never deleted, on the thread that lets the engine's last reference go, after the
 * drain (in ordo_engine_destroy, or in the last ordo_engine_release when other references
 * remained, so that ordo_opr_delete still works through them after destroy).
 * Errors: as ordo_opr_push; NO_MEMORY also when 262,144 prepared ops of the engine are alive
 * (created and not yet deleted), the most one engine holds.
 */
ORDO_API ordo_status ordo_opr_new(ordo_engine* e, ordo_fn fn, void* user_data,
                                  const ordo_var* const_vars, size_t num_const,
                                  const ordo_var* mutable_vars, size_t num_mutable,
                                  const ordo_push_opts* opts, ordo_opr* out);
/**
 * Pushes a prepared op once, with the given priority. Same ordering as ordo_opr_push.
 * Errors: INVALID_HANDLE (opr invalid or deleted, or one of its vars deleted since), SHUTDOWN,
 * NO_MEMORY, INVALID_ARGUMENT (e NULL).
 */
ORDO_API ordo_status ordo_opr_push_prepared(ordo_engine* e, ordo_opr opr, int32_t priority);
/** Deletes a prepared op: the handle is invalid at once; pushes already made still run.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT. */
ORDO_API ordo_status ordo_opr_delete(ordo_engine* e, ordo_opr opr);

/* ------------------------------------------------------------------------------------------- */
/* Inside an op                                                                                */
/* ------------------------------------------------------------------------------------------- */

/**
 * Makes the running op asynchronous: it completes when ordo_complete(*out, ...) is called,
 * exactly once, from any thread (also before the callback returns), not when the callback
 * returns (whose return value is then ignored). Call only from inside the op's own callback,
 * on its thread. Errors: INVALID_ARGUMENT (NULL), INVALID_STATE (exec not the running op on
 * this thread, or the op already deferred).
 */
ORDO_API ordo_status ordo_exec_defer(ordo_exec* exec, ordo_completion* out);

/**
 * Completes a deferred op with code (0 = success, else the failure code, as a callback's return
 * value) and an optional message (copied; may be NULL). Any thread. The second call for one
 * handle, or a stale or made-up handle, returns ORDO_ERR_INVALID_HANDLE and changes nothing.
 * Needs no reference to the engine, and never drains or frees it: safe from inside an op (or
 * free_fn) of the same engine, also while another thread lets the engine's last reference go
 * (that drain waits for the calling op, and the engine is freed only after this call returns,
 * on whichever thread lets go of it last; never on a thread inside one of its ops). A completion
 * of a freed engine's op returns ORDO_ERR_INVALID_HANDLE.
 */
ORDO_API ordo_status ordo_complete(ordo_completion c, int32_t code, const char* message);

/** What a running op can learn about itself. Growable: set struct_size before the call. */
typedef struct ordo_exec_info {
  uint32_t struct_size; /**< sizeof(ordo_exec_info) as the caller compiled it */
  int32_t device_type;  /**< ORDO_DEVICE_* the op runs on */
  int32_t device_id;    /**< GPU ordinal, 0 on the CPU */
  int32_t worker_index; /**< index of the worker within its group; -1 when run inline (naive
                           engine, ORDO_PROP_ASYNC, or a pusher helping under
                           ORDO_ENGINE_FLAG_PUSHERS_HELP) */
  int32_t priority;     /**< the op's priority */
  int32_t prop;         /**< the op's ORDO_PROP_* */
  void* stream;         /**< the op's CUDA stream (castable to cudaStream_t); NULL on the CPU */
  ordo_engine* engine;  /**< the engine running the op (no reference is added) */
  const char* name;     /**< the op's name, "" if none; valid during the callback */
} ordo_exec_info;

/**
 * Fills info (up to info->struct_size bytes) for the running op. Call only from inside the
 * op's callback, on its thread. Errors: INVALID_ARGUMENT (NULL, struct_size < 4),
 * INVALID_STATE (exec not running on this thread).
 */
ORDO_API ordo_status ordo_exec_get_info(const ordo_exec* exec, ordo_exec_info* info);

/* ------------------------------------------------------------------------------------------- */
/* Waiting                                                                                     */
/* ------------------------------------------------------------------------------------------- */
/* "From inside an op" (WOULD_DEADLOCK below and in destroy/release) means: an op's callback or
 * free_fn of that engine is on the calling thread's stack. ordo records up to 8 such engines per
 * thread (ops of one engine that run ops of another inline, nested); on a thread nested deeper
 * than that, every blocking call is refused with WOULD_DEADLOCK, since ordo can no longer tell
 * which engines are on its stack. */

/**
 * Blocks until every op pushed before this call that reads or mutates v has completed, and
 * orders nothing: ops pushed after the call run as if it had not been made (a reader of v pushed
 * after it runs beside the readers pushed before it). Ops that other threads push on v while the
 * wait is in progress overlap the call, and it may wait for them. It does when an earlier wait
 * on v is pending (in progress, or timed out with ops before it unfinished) and other ops were
 * pushed on v since: it first waits for the ops before that earlier wait, then for every op
 * pushed on v until then, by any thread. (With nothing pushed on v since, it shares the earlier
 * wait's outcome.) So an op pushed on v while a wait is in progress must not depend on that
 * wait returning, and ordo_wait_for_var_timeout may time out because of such ops.
 * INVALID_HANDLE: v was deleted before the call; or it was deleted while the wait was in
 * progress before the wait had a mark of its own queued on v (it was waiting behind an earlier
 * wait's mark), and then only once the delete, and so every op pushed on v before the wait,
 * has finished (a timed wait whose timeout comes first returns TIMEOUT). A delete pushed after
 * the wait's own mark is ordered after it: that wait returns as if no delete had come.
 * Returns ORDO_ERR_OP_FAILED if v is then in an error state (the message names the failing op,
 * its code and message; ordo_var_get_error gives the code). Called from inside an op of the
 * same engine it returns ORDO_ERR_WOULD_DEADLOCK at once instead of waiting (the op itself, or
 * ops it pushed, may be what the wait would wait for): push a follow-up op instead.
 * Errors: INVALID_ARGUMENT, INVALID_HANDLE, OP_FAILED, WOULD_DEADLOCK, SHUTDOWN (engine freed by
 * a concurrent release while waiting is a caller error).
 */
ORDO_API ordo_status ordo_wait_for_var(ordo_engine* e, ordo_var v);
/** As ordo_wait_for_var, giving up after timeout_ns nanoseconds with ORDO_ERR_TIMEOUT. Results
 *  are unaffected. A timeout of 0 is a poll: it looks at v and returns (OK, OP_FAILED or
 *  TIMEOUT), leaving nothing behind, allocating nothing and never sleeping. Any other timeout
 *  that expires leaves the abandoned wait on v, ordering nothing (as described above), until the
 *  ops before it finish. A timeout above 2^60 ns (about 36 years) means no timeout. A wait with a
 *  timeout of 1 ms or more that times out names in its message up to 3 of the oldest of the
 *  caller's ops still pending on v, with their state and for how long (see ordo_engine_dump);
 *  shorter timeouts keep the message short, since finding those ops scans the engine. */
ORDO_API ordo_status ordo_wait_for_var_timeout(ordo_engine* e, ordo_var v, uint64_t timeout_ns);

/**
 * Blocks until every op pushed to the engine before this call has completed (while other
 * threads keep pushing, it also waits for theirs: it returns when nothing is pending).
 * Returns ORDO_ERR_OP_FAILED if any op failed (or was skipped) since the previous
 * ordo_wait_for_all, with the first failure's detail in the message; that record is then
 * cleared. Called from inside an op of the same engine: ORDO_ERR_WOULD_DEADLOCK at once.
 * After ordo_engine_destroy (through another reference): ORDO_ERR_SHUTDOWN.
 */
ORDO_API ordo_status ordo_wait_for_all(ordo_engine* e);
/** As ordo_wait_for_all, giving up after timeout_ns with ORDO_ERR_TIMEOUT (the failure record
 *  is then kept for the next wait); with a timeout of 1 ms or more, the message then names up
 *  to 3 of the oldest of the caller's ops still pending, with their state (queued for its vars,
 *  ready, running, deferred and waiting for ordo_complete) and for how long (ordo_engine_dump
 *  lists them all). A timeout of 0 is a poll that never sleeps. A timeout above 2^60 ns means
 *  no timeout. */
ORDO_API ordo_status ordo_wait_for_all_timeout(ordo_engine* e, uint64_t timeout_ns);

/**
 * For event loops (asyncio, Rust futures, Go channels, Julia tasks): asks for fn(user_data,
 * status) to be called exactly once, after every op pushed on v before this call has completed.
 * Never blocks: the call returns at once (unless fn runs inside it, below).
 * status: ORDO_OK, or ORDO_ERR_OP_FAILED when v is then in an error state; the same result
 * ordo_wait_for_var would give (fn gets no message: ordo_var_get_error reads it, as long as
 * nothing pushed later has changed it).
 * Ordering: the wait is queued on v as a write with no callback (as ordo_var_clear_error is):
 * it waits for every op before it, readers included, and ops pushed on v after it start once
 * those have completed (without waiting for fn), so unlike ordo_wait_for_var it keeps a reader
 * pushed after it from overlapping the readers pushed before it. It is not an op of the caller:
 * ordo_stats and ordo_wait_for_all's failure record do not count it (ordo_wait_for_all does wait
 * for it).
 * Which thread runs fn: the one that completes the last of those ops (a worker, a thread in
 * ordo_complete, a thread running inline ops), right after that op; or, when they have all
 * completed already, the calling thread, before this call returns (from inside an inline op of
 * the same engine: right after that op returns, see ORDO_PROP_ASYNC). fn counts as running
 * inside an op of the engine (waits, destroy and the last release from it return
 * ORDO_ERR_WOULD_DEADLOCK); it may push, complete ops and call ordo_wait_for_var_async again.
 * A C++ exception escaping fn is caught and ignored. Destroy (and the last release) drains the
 * engine, so a pending fn runs with its real status before destroy returns.
 * ORDO_ERR_SHUTDOWN is kept for a wait an engine cannot settle: this version never passes it,
 * but a binding should treat it as a failure.
 * If this call returns an error, fn is never called. Errors: INVALID_ARGUMENT (e or fn NULL),
 * INVALID_HANDLE (v 0, stale, deleted or foreign), SHUTDOWN (destroy has begun), NO_MEMORY,
 * INVALID_STATE (an engine created before a fork(), in the child).
 */
ORDO_API ordo_status ordo_wait_for_var_async(ordo_engine* e, ordo_var v, ordo_wait_fn fn,
                                             void* user_data);

/* ------------------------------------------------------------------------------------------- */
/* Capture and replay (graphs)                                                                 */
/* ------------------------------------------------------------------------------------------- */
/*
 * Record a sequence of pushes once, then launch it many times:
 *
 *   ordo_graph_begin_capture(e);
 *   ordo_opr_push(e, step, &d, &a, 1, &b, 1, NULL);   recorded, not run
 *   ordo_opr_push_prepared(e, opr, 0);                recorded, not run
 *   ordo_graph* g;
 *   ordo_graph_end_capture(e, &g);
 *   for (...) ordo_graph_launch(g);                   as if those pushes were made again
 *   ordo_wait_for_all(e);
 *   ordo_graph_destroy(g);
 *
 * A launch behaves exactly as the captured pushes made again, in capture order, by the
 * launching thread at the moment of the launch: the same callbacks, user data, vars, options
 * (priority, name, property, device) and the same ordering against every other push, launch,
 * wait, delete and clear on those vars (SPEC §2), the same errors and skips (§3), counted in
 * ordo_stats like pushes. ordo_wait_for_var and ordo_wait_for_all wait for launched ops as for
 * pushed ones. Launches from one thread compose in program order; a launch is not atomic
 * against other threads: like two threads' pushes, the ops of launches (of one graph or
 * several) made by two threads at once may interleave, each op ordered as one push. Ops may
 * defer (ordo_exec_defer) and are completed by ordo_complete as usual.
 * What a launch does: every captured op's var handles are resolved (and its device routed)
 * once, at capture, and each launch pushes the ops without resolving them again. Captured ops
 * that can only run one after another on the same vars (a chain: each one's only dependent
 * inside the graph has it as its only dependency, all with the same vars and access modes;
 * plain CPU ops of one priority, not on the naive engine) run as one engine op, back to back on
 * one worker, each still skipped, failed, traced and counted as its own push would be
 * (docs/ARCHITECTURE.md §10). A launch holds a chain's vars from the chain's first op to its
 * last, as the chain's own pushes would hand them from one op to the next; what differs: another
 * thread's push on those vars is ordered before or after the whole chain, never between two of
 * its ops (one of the orders its pushes allow), ordo_engine_dump lists a chain as one op, and
 * the submission window (max_pending) counts it as one.
 * Captured ops of one var that no earlier captured op uses (independent ops: plain CPU ops at
 * priority 0, not in a chain, not on the naive engine) form the graph's bundle: a launch queues
 * them as one engine op that the workers share, claiming them a few at a time (and taking them
 * from one another, so that an idle worker always gets the next one). Each still starts once
 * its own var grants it (one whose var is busy at the launch is pushed alone), releases its var
 * as it finishes, runs beside the others, and defers, fails, is skipped, named, traced and
 * counted as its own push would be. What differs: they arrive on their vars before the graph's
 * other ops (none of which they depend on), the submission window counts the bundle as one op,
 * ordo_stats counts its ops completed when the last of them has finished, ordo_engine_dump
 * lists it as one op (with each deferred op of it by name), and a launch made while two
 * launches of the same graph still run bundle ops pushes its independent ops one by one.
 */

/** A captured graph of ops. Opaque: a handle, not a pointer to read. A destroyed or made-up
 *  graph handle is ORDO_ERR_INVALID_HANDLE in every call below (handles carry a generation and
 *  are never reused for another graph while the process lives, up to 2^32 graphs per slot). */
typedef struct ordo_graph ordo_graph;

/**
 * Starts recording this thread's pushes to e: from now until ordo_graph_end_capture on this
 * thread, every ordo_opr_push and ordo_opr_push_prepared this thread makes to e (from its own
 * code, not from inside an op) is checked as a push would be (the same errors, and nothing is
 * recorded when it fails) and recorded instead of run; it returns ORDO_OK. Pushes to other
 * engines, pushes by other threads, and pushes from inside ops (a callback or free_fn of e on
 * this thread's stack, such as an ORDO_PROP_ASYNC op run inline) are made as usual, never
 * recorded. While the capture is open, these calls on e from this thread (outside ops) return
 * ORDO_ERR_INVALID_STATE and do nothing: ordo_wait_for_var, ordo_wait_for_var_timeout,
 * ordo_wait_for_all, ordo_wait_for_all_timeout, ordo_wait_for_var_async, ordo_var_delete,
 * ordo_var_clear_error, ordo_engine_destroy and ordo_graph_launch; ordo_pipeline_run and
 * ordo_pipeline_push of a pipeline on e likewise. ordo_var_new, ordo_opr_new, ordo_opr_delete
 * and the queries work as usual. One capture per thread at a time.
 * Errors: INVALID_ARGUMENT (e NULL), INVALID_HANDLE, INVALID_STATE (a capture is already open on
 * this thread, of any engine; or called from inside an op of e), SHUTDOWN, NO_MEMORY.
 */
ORDO_API ordo_status ordo_graph_begin_capture(ordo_engine* e);

/**
 * Ends this thread's capture of e and returns what it recorded as a new graph in *out (a
 * capture with no push gives a valid empty graph, whose launch does nothing). Must be called on
 * the thread that began the capture. The capture is over once this returns, whatever the
 * status (except for INVALID_ARGUMENT and INVALID_STATE, which change nothing).
 * If e was destroyed (by another thread, or by its last release) while the capture was open,
 * this returns ORDO_ERR_SHUTDOWN: the recorded ops were never pushed, and their free_fns run
 * here, on this thread. A thread that exits with a capture open leaks it (and the engine's
 * memory it holds): end every capture.
 * Errors: INVALID_ARGUMENT (e or out NULL), INVALID_STATE (no capture open on this thread, or
 * it records another engine), SHUTDOWN, NO_MEMORY (65,535 graphs exist; the recorded ops are
 * dropped and their free_fns run). *out is NULL on every failure.
 */
ORDO_API ordo_status ordo_graph_end_capture(ordo_engine* e, ordo_graph** out);

/**
 * Launches the graph: pushes its ops again, in capture order, as described above. Asynchronous
 * like a push (the naive engine and ORDO_PROP_ASYNC ops run inline, as pushed ones would; the
 * submission window applies). Any thread, also from inside an op; several threads may launch one
 * graph at once. The free_fns given at capture are not called per launch (once, at destroy); a
 * captured ordo_opr_push_prepared keeps its prepared op alive (and its free_fn waiting) until
 * the graph is destroyed, even if ordo_opr_delete is called meanwhile.
 * A var the graph uses that was deleted after the capture: the launch pushes the ops before the
 * first op that uses it (as the pushes made again would), then stops with INVALID_HANDLE; the
 * message names that op and how many were pushed. SHUTDOWN and NO_MEMORY half-way likewise.
 * Errors: INVALID_ARGUMENT (g NULL), INVALID_HANDLE (g destroyed or made up; a var deleted),
 * INVALID_STATE (this thread is capturing the graph's engine: graphs are not captured in
 * graphs), SHUTDOWN (the graph's engine is destroyed), NO_MEMORY.
 */
ORDO_API ordo_status ordo_graph_launch(ordo_graph* g);

/**
 * Destroys the graph: its handle is invalid at once, the free_fns given to the captured
 * ordo_opr_push calls run now, on this thread, once each, in capture order (as the engine's
 * free_fns: "from inside an op" for the waits below, and a push from one is made, never
 * recorded), and the captured prepared ops are let go (a prepared op deleted meanwhile then runs
 * its free_fn, when this was its last use). Works after the graph's engine was destroyed.
 * Refused while a launch is in flight: being pushed by another thread, or ops of a launch not
 * yet finished (wait for them, e.g. with ordo_wait_for_all, then destroy).
 * Errors: INVALID_ARGUMENT (g NULL), INVALID_HANDLE (g destroyed or made up), INVALID_STATE (a
 * launch in flight; nothing happened).
 */
ORDO_API ordo_status ordo_graph_destroy(ordo_graph* g);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Pipelines with token deferral (ordo_pipeline_*, ordo_pipeflow_*). */
#include "pipeline.h"

#endif /* ORDO_ORDO_H */
