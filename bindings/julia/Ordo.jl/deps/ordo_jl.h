/* ordo_jl: the C half of the Julia binding (Ordo.jl). No Julia code ever runs on a thread that
 * Julia did not start (JuliaLang/julia#55525): an op's callback, on an engine thread, only defers
 * the op, queues an event for Julia and calls uv_async_send (given as a function pointer, so this
 * library does not link against Julia or libuv). Julia's side drains the queue in a task woken by
 * a Base.AsyncCondition, runs the op's closure as a Julia task and calls ordo_complete. Blocking
 * calls (waits, destroy) run on a short-lived thread of this library and report through the same
 * queue, so no Julia thread ever blocks in ordo (a capture call waits, as for a mutex, while the
 * capture's thread makes one push or end, which never waits for Julia).
 *
 * Graphs (ordo_graph_*): a capture runs on a thread of this library (ordo_jl_capture_*), and the
 * ops pushed through it are "kept": each launch's run of one comes as RUN_KEPT, which leaves the
 * closure in place, and the op is released once, as RELEASE, when its graph is destroyed.
 *
 * Thread-safety: every function may be called from any thread; a hub's events come out in the
 * order they were queued. */
#ifndef ORDO_JL_H
#define ORDO_JL_H

#include <ordo/ordo.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ordo_jl_hub ordo_jl_hub;
typedef struct ordo_jl_capture ordo_jl_capture;

/* Event kinds popped by ordo_jl_pop (none is queued once the hub is closed). An op pushed by
 * ordo_jl_push is one-shot: exactly one of RUN and DROP comes for it, and then nothing more. An op
 * pushed by ordo_jl_capture_push is kept: zero or more RUN_KEPT (one per launch of its graph that
 * runs it; several may be out at once; a launch that skips it sends nothing), then exactly one
 * RELEASE, queued by the graph's destroy (or by an end of the capture that makes no graph) after
 * every RUN_KEPT of it was popped and completed (ordo refuses to destroy a graph while ops of a
 * launch are in flight). */
#define ORDO_JL_RUN 1  /* op `id` may run now: `completion` completes it (exactly once) */
#define ORDO_JL_DROP 2 /* op `id` will never run (skipped: a var in an error state): forget it */
#define ORDO_JL_DONE 3 /* call or wait `id` finished: `status`, `code` (a failed op's), `msg` */
#define ORDO_JL_RUN_KEPT 4 /* kept op `id` runs for a launch: as RUN, but keep the closure */
#define ORDO_JL_RELEASE 5  /* kept op `id`'s graph is gone: forget the closure (no more events) */

/* Blocking calls for ordo_jl_start (run on a thread of their own). */
#define ORDO_JL_WAIT_VAR 1   /* ordo_wait_for_var(_timeout) */
#define ORDO_JL_WAIT_ALL 2   /* ordo_wait_for_all(_timeout) */
#define ORDO_JL_DESTROY 3    /* ordo_engine_destroy */
#define ORDO_JL_WAIT_ASYNC 4 /* ordo_wait_for_var_async: no thread, the engine calls back */

/* A hub: one queue of events and the async handle that wakes its Julia task. send is
 * uv_async_send (int (*)(void*)), async the uv_async_t* of a Base.AsyncCondition. NULL when out
 * of memory. */
ordo_jl_hub* ordo_jl_hub_new(void* send, void* async);
/* After this returns, the hub never calls send again: ops that become ready are completed with
 * ORDO_ERR_SHUTDOWN ("the Julia side is gone") instead, other events are dropped. For Julia's
 * exit (atexit) and for Engine close, before the AsyncCondition is closed. */
void ordo_jl_hub_close(ordo_jl_hub* h);
/* Frees a closed hub and the events still queued. Only once its engine is destroyed (every op
 * finished, every async wait answered); ordo_jl_start calls still running, captures not yet
 * ended and kept ops not yet released (graphs not yet destroyed, which may outlive the engine)
 * hold the hub: the last of them frees it. */
void ordo_jl_hub_free(ordo_jl_hub* h);

/* Pops the oldest event: 1 and its fields, or 0 when the queue is empty. msg (DONE only, else
 * NULL) is malloc'd: free it with ordo_jl_free. */
int32_t ordo_jl_pop(ordo_jl_hub* h, int32_t* kind, uint64_t* id, uint64_t* completion,
                    int32_t* status, int32_t* code, char** msg);
void ordo_jl_free(void* p);

/* Creates an engine for Julia: no submission throttle (max_pending -1: a push must never wait for
 * ops that need the pushing Julia thread to run them). On failure the message is copied to
 * msg (cap bytes). */
ordo_status ordo_jl_engine_create(int32_t kind, int32_t cpu_threads, ordo_engine** out, char* msg,
                                  size_t cap);

/* The plain calls Julia makes, each copying its failure message to msg (cap bytes) in the same C
 * call: Julia code between two ccalls may run a finalizer that calls ordo on the same thread. */
ordo_status ordo_jl_var_new(ordo_engine* e, ordo_var* out, char* msg, size_t cap);
ordo_status ordo_jl_var_delete(ordo_engine* e, ordo_var v, char* msg, size_t cap);
ordo_status ordo_jl_var_clear_error(ordo_engine* e, ordo_var v, char* msg, size_t cap);
ordo_status ordo_jl_complete(ordo_completion c, int32_t code, const char* text, char* msg,
                             size_t cap);

/* Pushes op `id`: its callback defers it and queues ORDO_JL_RUN; its free_fn queues ORDO_JL_DROP
 * when it never ran. name may be NULL. On failure nothing was pushed and nothing will be queued;
 * the message is copied to msg. */
ordo_status ordo_jl_push(ordo_jl_hub* h, ordo_engine* e, uint64_t id, const ordo_var* reads,
                         size_t nreads, const ordo_var* writes, size_t nwrites, int32_t priority,
                         int32_t prop, const char* name, char* msg, size_t cap);

/* Capture and replay. ordo captures per OS thread, but a Julia task may move between threads at
 * any yield, and other tasks may run on its thread meanwhile (their pushes would be recorded).
 * So a capture has a thread of its own, started by ordo_jl_capture_begin, which calls
 * ordo_graph_begin_capture(e) there; each ordo_jl_capture_push makes its push there (recorded,
 * as kept op `id`), and ordo_jl_capture_end calls ordo_graph_end_capture there and ends the
 * thread. Each call returns once its ordo call has returned there (which never waits for Julia),
 * with ordo's status and message. Only the pushes given to ordo_jl_capture_push are recorded:
 * ordo_jl_push and other calls by any thread go on as usual during the capture. The calls on one
 * capture may come from any thread, one at a time (never overlapping); end must be called, once,
 * and the capture is gone when it returns, whatever the status.
 * begin: *out is the capture, or NULL on failure (ordo_graph_begin_capture's errors). */
ordo_status ordo_jl_capture_begin(ordo_jl_hub* h, ordo_engine* e, ordo_jl_capture** out, char* msg,
                                  size_t cap);
/* As ordo_jl_push, recorded: nothing runs now; each launch of the graph runs it (RUN_KEPT), and
 * its destroy releases it (RELEASE). On failure nothing was recorded and nothing will be queued. */
ordo_status ordo_jl_capture_push(ordo_jl_capture* c, uint64_t id, const ordo_var* reads,
                                 size_t nreads, const ordo_var* writes, size_t nwrites,
                                 int32_t priority, int32_t prop, const char* name, char* msg,
                                 size_t cap);
/* Ends the capture and frees c: *out is the graph (ordo_graph_end_capture). On SHUTDOWN (the
 * engine was destroyed meanwhile) or NO_MEMORY there is none and the recorded ops are released
 * (RELEASE each) before this returns. c or out NULL: INVALID_ARGUMENT, and nothing changes. */
ordo_status ordo_jl_capture_end(ordo_jl_capture* c, ordo_graph** out, char* msg, size_t cap);
/* ordo_graph_launch and ordo_graph_destroy, with the message. Neither waits: destroy is refused
 * (INVALID_STATE) while a launch is in flight, and queues the RELEASE of each kept op it frees. */
ordo_status ordo_jl_graph_launch(ordo_graph* g, char* msg, size_t cap);
ordo_status ordo_jl_graph_destroy(ordo_graph* g, char* msg, size_t cap);

/* Starts call `what` (ORDO_JL_*) for `id`; its result comes as ORDO_JL_DONE with that id. v is
 * for WAIT_VAR and WAIT_ASYNC; timeout_ns UINT64_MAX means none. Returns ORDO_OK when started
 * (then exactly one DONE follows), else the error (message in msg) and nothing is queued. */
ordo_status ordo_jl_start(ordo_jl_hub* h, uint64_t id, int32_t what, ordo_engine* e, ordo_var v,
                          uint64_t timeout_ns, char* msg, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
