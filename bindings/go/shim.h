/* The C side of the Go binding: every call the Go code makes into ordo goes through one of these
 * functions, so that the status and the calling thread's last error message come back from the
 * same cgo call (a goroutine may run on another OS thread by its next call, and the message is
 * thread-local). Also the op and wait trampolines that call into Go. */
#ifndef ORDO_GO_SHIM_H
#define ORDO_GO_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include <ordo/ordo.h>

/* A shim call's result: the status, a value (a handle, a pointer, an op's code) and, when the
 * status is not ORDO_OK, a malloc'd copy of the message (NULL if it could not be copied), which
 * the Go side frees. */
typedef struct ordo_go_ret {
  ordo_status status;
  int32_t code;
  uint64_t value;
  char* msg;
} ordo_go_ret;

/* The fields are ordo_engine_config's; 0 leaves one to the environment or the default. */
ordo_go_ret ordo_go_engine_create(int32_t kind, int32_t cpu_threads, int32_t gpu_compute_streams,
                                  int32_t gpu_stream_waits);
/* The effective configuration (ordo_engine_get_config); trace_path is not for Go to keep. */
ordo_go_ret ordo_go_engine_config(uintptr_t e, ordo_engine_config* out);
ordo_go_ret ordo_go_engine_destroy(uintptr_t e);
void ordo_go_engine_release(uintptr_t e);
ordo_go_ret ordo_go_var_new(uintptr_t e);
ordo_go_ret ordo_go_var_delete(uintptr_t e, ordo_var v);
ordo_go_ret ordo_go_var_clear_error(uintptr_t e, ordo_var v);
/* Pushes an op whose callback runs the Go closure behind cgo.Handle h. On failure the handle is
 * still the caller's to delete. name may be NULL. A push that this thread's capture of e may
 * record (see ordo_go_begin_capture) keeps the handle until its free_fn, which ordo then calls
 * once, when the graph is destroyed, after every launch's run; any other push hands the handle
 * to its one run. */
ordo_go_ret ordo_go_push(uintptr_t e, uintptr_t h, const ordo_var* reads, size_t nreads,
                         const ordo_var* writes, size_t nwrites, int32_t priority, int32_t prop,
                         int32_t gpu, const char* name);
/* timeout_ns == UINT64_MAX: no timeout. On ORDO_ERR_OP_FAILED, code is the failing op's code. */
ordo_go_ret ordo_go_wait_var(uintptr_t e, ordo_var v, uint64_t timeout_ns);
ordo_go_ret ordo_go_wait_all(uintptr_t e, uint64_t timeout_ns);
/* value: the completion handle. */
ordo_go_ret ordo_go_defer(uintptr_t exec);
/* The running op's ordo_exec_info (its name is not for Go to keep). */
ordo_go_ret ordo_go_exec_info(uintptr_t exec, ordo_exec_info* out);
ordo_go_ret ordo_go_complete(ordo_completion c, int32_t code, const char* msg);
/* Fails the running op with a message: defers it and completes it at once (a synchronous op's
 * return value carries a code but no message). */
ordo_go_ret ordo_go_fail_running(uintptr_t exec, int32_t code, const char* msg);
/* Reads v's error state now: code (0 = none) and, when set, its message. */
ordo_go_ret ordo_go_var_error(uintptr_t e, ordo_var v);
ordo_go_ret ordo_go_stats(uintptr_t e, ordo_stats* out);
/* ordo_wait_for_var_async whose callback hands the status, the failing op's code and message
 * (read with ordo_var_get_error on the thread that settles the wait) to the Go function behind
 * cgo.Handle h. On failure the handle is still the caller's to delete. */
ordo_go_ret ordo_go_wait_async(uintptr_t e, ordo_var v, uintptr_t h);
/* Capture and replay. begin and end must be called on one OS thread (the Go side locks it):
 * while this thread's capture of e is open, the shim marks the Go ops this thread pushes to e as
 * ones that run many times (a push that ordo runs at once, from inside an op, is marked too:
 * that costs a call into Go at its free_fn, nothing else). end: value is the ordo_graph*. */
ordo_go_ret ordo_go_begin_capture(uintptr_t e);
ordo_go_ret ordo_go_end_capture(uintptr_t e);
ordo_go_ret ordo_go_graph_launch(uintptr_t g);
ordo_go_ret ordo_go_graph_destroy(uintptr_t g);
/* Pipelines. Pipe i is of type types[i] (ORDO_PIPE_*) and calls the Go function behind
 * cgo.Handle handles[i] (the shim's trampoline, the handle as user_data), which stays the
 * caller's. create: value is the ordo_pipeline*. */
ordo_go_ret ordo_go_pipeline_create(uintptr_t e, uint32_t lines, const int64_t* types,
                                    const uintptr_t* handles, size_t n);
ordo_go_ret ordo_go_pipeline_reset_pipes(uintptr_t p, uint32_t lines, const int64_t* types,
                                         const uintptr_t* handles, size_t n);
ordo_go_ret ordo_go_pipeline_run(uintptr_t p);
/* name may be NULL. */
ordo_go_ret ordo_go_pipeline_push(uintptr_t p, const ordo_var* reads, size_t nreads,
                                  const ordo_var* writes, size_t nwrites, int32_t priority,
                                  int32_t prop, int32_t gpu, const char* name);
ordo_go_ret ordo_go_pipeline_reset(uintptr_t p);
/* value: the number of tokens. */
ordo_go_ret ordo_go_pipeline_num_tokens(uintptr_t p);
/* value: how many tokens the last run dropped; the first min(value, cap) ids go to ids. */
ordo_go_ret ordo_go_pipeline_dropped(uintptr_t p, uint64_t* ids, size_t cap);
ordo_go_ret ordo_go_pipeline_destroy(uintptr_t p);
ordo_go_ret ordo_go_pipeflow_stop(uintptr_t pf);
ordo_go_ret ordo_go_pipeflow_defer(uintptr_t pf, uint64_t token);

#endif
