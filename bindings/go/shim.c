/* The C side of the Go binding (see shim.h). Kept small: argument plumbing, the message copy,
 * and the trampolines. */
#include "shim.h"

#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"

/* A malloc'd copy of this thread's last error message, taken right after the failing call. */
static char* last_message(void) {
  size_t n = ordo_last_error_copy(NULL, 0);
  char* m = (char*)malloc(n + 1);
  if (m != NULL) ordo_last_error_copy(m, n + 1);
  return m;
}

static ordo_go_ret result(ordo_status s) {
  ordo_go_ret r = {s, 0, 0, NULL};
  if (s != ORDO_OK) r.msg = last_message();
  return r;
}

/* The shim's own allocation failed (before any ordo call): the status alone says it. */
static ordo_go_ret no_memory(void) {
  ordo_go_ret r = {ORDO_ERR_NO_MEMORY, 0, 0, NULL};
  return r;
}

static ordo_engine* engine(uintptr_t e) { return (ordo_engine*)e; }

/* The options of a push (an op's or a pipeline run's); gpu < 0: the CPU. */
static ordo_push_opts push_opts(int32_t priority, int32_t prop, int32_t gpu, const char* name) {
  ordo_push_opts opts;
  ordo_push_opts_init_sized(&opts, sizeof opts);
  opts.priority = priority;
  opts.prop = prop;
  if (gpu >= 0) {
    opts.device_type = ORDO_DEVICE_GPU;
    opts.device_id = gpu;
  }
  opts.name = name;
  return opts;
}

ordo_go_ret ordo_go_engine_create(int32_t kind, int32_t cpu_threads, int32_t gpu_compute_streams,
                                  int32_t gpu_stream_waits) {
  ordo_engine_config cfg;
  ordo_engine_config_init_sized(&cfg, sizeof cfg);
  cfg.kind = kind;
  cfg.cpu_threads = cpu_threads;
  cfg.gpu_compute_streams = gpu_compute_streams;
  cfg.gpu_stream_waits = gpu_stream_waits;
  ordo_engine* e = NULL;
  ordo_go_ret r = result(ordo_engine_create(&cfg, &e));
  if (r.status == ORDO_OK) {
    /* The Go Engine keeps a reference of its own past Close, so that calls made after Close
     * (or racing it) get ORDO_ERR_SHUTDOWN from a live engine; its finalizer drops it. */
    ordo_status s = ordo_engine_retain(e);
    if (s != ORDO_OK) {
      r = result(s);
      ordo_engine_destroy(e);
      return r;
    }
  }
  r.value = (uint64_t)(uintptr_t)e;
  return r;
}

ordo_go_ret ordo_go_engine_destroy(uintptr_t e) { return result(ordo_engine_destroy(engine(e))); }

void ordo_go_engine_release(uintptr_t e) { (void)ordo_engine_release(engine(e)); }

ordo_go_ret ordo_go_engine_config(uintptr_t e, ordo_engine_config* out) {
  ordo_engine_config_init_sized(out, sizeof *out);
  return result(ordo_engine_get_config(engine(e), out));
}

ordo_go_ret ordo_go_var_new(uintptr_t e) {
  ordo_var v = 0;
  ordo_go_ret r = result(ordo_var_new(engine(e), &v));
  r.value = v;
  return r;
}

ordo_go_ret ordo_go_var_delete(uintptr_t e, ordo_var v) {
  return result(ordo_var_delete(engine(e), v));
}

ordo_go_ret ordo_go_var_clear_error(uintptr_t e, ordo_var v) {
  return result(ordo_var_clear_error(engine(e), v));
}

/* The engine whose capture this thread has open through ordo_go_begin_capture, or 0. */
static _Thread_local uintptr_t capturing;

/* user_data of a Go op: the cgo.Handle of its closure. A one-shot op (keep == 0) hands it to
 * its run (goOrdoRun deletes the handle) or, skipped, to go_op_free. A kept op (one a capture
 * may have recorded: its callback runs once per launch, its free_fn once, at the graph's
 * destroy) keeps it until go_op_free, and its runs only read it. */
typedef struct go_op {
  uintptr_t handle;
  int32_t keep;
} go_op;

static int32_t go_op_run(ordo_exec* exec, void* user_data) {
  go_op* op = (go_op*)user_data;
  uintptr_t h = op->handle;
  if (!op->keep) op->handle = 0;
  return goOrdoRun(h, (uintptr_t)exec, op->keep);
}

/* Runs exactly once, after the op finished (ran, failed or was skipped), on whichever thread
 * finished it, or for a captured op when its graph is destroyed (or its capture dropped); the
 * engine orders it after every go_op_run. Calls into Go only for a skipped or kept op. */
static void go_op_free(void* user_data) {
  go_op* op = (go_op*)user_data;
  if (op->handle != 0) goOrdoFree(op->handle);
  free(op);
}

ordo_go_ret ordo_go_push(uintptr_t e, uintptr_t h, const ordo_var* reads, size_t nreads,
                         const ordo_var* writes, size_t nwrites, int32_t priority, int32_t prop,
                         int32_t gpu, const char* name) {
  go_op* op = (go_op*)malloc(sizeof *op);
  if (op == NULL) return no_memory();
  op->handle = h;
  op->keep = capturing != 0 && capturing == e;
  ordo_push_opts opts = push_opts(priority, prop, gpu, name);
  opts.free_fn = go_op_free;
  ordo_status s = ordo_opr_push(engine(e), go_op_run, op, reads, nreads, writes, nwrites, &opts);
  if (s != ORDO_OK) free(op); /* nothing was pushed, free_fn will not run */
  return result(s);
}

static ordo_go_ret wait_result(uintptr_t e, ordo_var v, ordo_status s) {
  ordo_go_ret r = result(s);
  if (s == ORDO_ERR_OP_FAILED) {
    int32_t code = 0;
    if (ordo_var_get_error(engine(e), v, &code, NULL, 0) == ORDO_OK) r.code = code;
  }
  return r;
}

ordo_go_ret ordo_go_wait_var(uintptr_t e, ordo_var v, uint64_t timeout_ns) {
  ordo_status s = timeout_ns == UINT64_MAX ? ordo_wait_for_var(engine(e), v)
                                           : ordo_wait_for_var_timeout(engine(e), v, timeout_ns);
  return wait_result(e, v, s);
}

ordo_go_ret ordo_go_wait_all(uintptr_t e, uint64_t timeout_ns) {
  return result(timeout_ns == UINT64_MAX ? ordo_wait_for_all(engine(e))
                                         : ordo_wait_for_all_timeout(engine(e), timeout_ns));
}

ordo_go_ret ordo_go_defer(uintptr_t exec) {
  ordo_completion c = 0;
  ordo_go_ret r = result(ordo_exec_defer((ordo_exec*)exec, &c));
  r.value = c;
  return r;
}

ordo_go_ret ordo_go_exec_info(uintptr_t exec, ordo_exec_info* out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  return result(ordo_exec_get_info((const ordo_exec*)exec, out));
}

ordo_go_ret ordo_go_complete(ordo_completion c, int32_t code, const char* msg) {
  return result(ordo_complete(c, code, msg));
}

ordo_go_ret ordo_go_fail_running(uintptr_t exec, int32_t code, const char* msg) {
  ordo_completion c = 0;
  ordo_status s = ordo_exec_defer((ordo_exec*)exec, &c);
  if (s == ORDO_OK) s = ordo_complete(c, code, msg);
  return result(s);
}

ordo_go_ret ordo_go_var_error(uintptr_t e, ordo_var v) {
  int32_t code = 0;
  char buf[1024];
  buf[0] = '\0';
  ordo_go_ret r = result(ordo_var_get_error(engine(e), v, &code, buf, sizeof buf));
  if (r.status == ORDO_OK && code != 0) {
    r.code = code;
    size_t n = strlen(buf);
    r.msg = (char*)malloc(n + 1);
    if (r.msg != NULL) memcpy(r.msg, buf, n + 1);
  }
  return r;
}

ordo_go_ret ordo_go_stats(uintptr_t e, ordo_stats* out) {
  out->struct_size = (uint32_t)sizeof *out;
  return result(ordo_engine_stats(engine(e), out));
}

/* user_data of an asynchronous wait. */
typedef struct go_wait {
  uintptr_t handle;
  ordo_engine* engine;
  ordo_var var;
} go_wait;

static void go_wait_done(void* user_data, ordo_status status) {
  go_wait* w = (go_wait*)user_data;
  int32_t code = 0;
  char msg[1024];
  msg[0] = '\0';
  if (status == ORDO_ERR_OP_FAILED)
    (void)ordo_var_get_error(w->engine, w->var, &code, msg, sizeof msg);
  uintptr_t h = w->handle;
  free(w);
  goOrdoWaitDone(h, status, code, msg);
}

ordo_go_ret ordo_go_wait_async(uintptr_t e, ordo_var v, uintptr_t h) {
  go_wait* w = (go_wait*)malloc(sizeof *w);
  if (w == NULL) return no_memory();
  w->handle = h;
  w->engine = engine(e);
  w->var = v;
  ordo_status s = ordo_wait_for_var_async(engine(e), v, go_wait_done, w);
  if (s != ORDO_OK) free(w); /* fn is never called */
  return result(s);
}

ordo_go_ret ordo_go_begin_capture(uintptr_t e) {
  ordo_go_ret r = result(ordo_graph_begin_capture(engine(e)));
  if (r.status == ORDO_OK) capturing = e;
  return r;
}

ordo_go_ret ordo_go_end_capture(uintptr_t e) {
  ordo_graph* g = NULL;
  ordo_go_ret r = result(ordo_graph_end_capture(engine(e), &g));
  /* The capture is over whatever the status, except for these two, which change nothing. */
  if (r.status != ORDO_ERR_INVALID_ARGUMENT && r.status != ORDO_ERR_INVALID_STATE &&
      capturing == e)
    capturing = 0;
  r.value = (uint64_t)(uintptr_t)g;
  return r;
}

ordo_go_ret ordo_go_graph_launch(uintptr_t g) { return result(ordo_graph_launch((ordo_graph*)g)); }

ordo_go_ret ordo_go_graph_destroy(uintptr_t g) {
  return result(ordo_graph_destroy((ordo_graph*)g));
}

/* A pipe's callback: calls the Go function behind the cgo.Handle in user_data, with what the
 * pipeflow says (fixed for the invocation), so that the Go side reads it without more calls. */
static int32_t go_pipe_run(ordo_pipeflow* pf, void* user_data) {
  return goOrdoPipe((uintptr_t)user_data, (uintptr_t)pf, ordo_pipeflow_token(pf),
                    ordo_pipeflow_line(pf), ordo_pipeflow_pipe(pf),
                    ordo_pipeflow_num_deferrals(pf));
}

/* The ordo_pipe array for types and handles (NULL when n is 0), malloc'd; *ok is 0 when out of
 * memory. */
static ordo_pipe* make_pipes(const int64_t* types, const uintptr_t* handles, size_t n, int* ok) {
  *ok = 1;
  if (n == 0) return NULL;
  ordo_pipe* pipes = (ordo_pipe*)calloc(n, sizeof *pipes);
  if (pipes == NULL) {
    *ok = 0;
    return NULL;
  }
  for (size_t i = 0; i < n; ++i) {
    pipes[i].type = types[i];
    pipes[i].fn = go_pipe_run;
    pipes[i].user_data = (void*)handles[i];
  }
  return pipes;
}

ordo_go_ret ordo_go_pipeline_create(uintptr_t e, uint32_t lines, const int64_t* types,
                                    const uintptr_t* handles, size_t n) {
  int ok;
  ordo_pipe* pipes = make_pipes(types, handles, n, &ok);
  if (!ok) return no_memory();
  ordo_pipeline* p = NULL;
  ordo_go_ret r = result(ordo_pipeline_create(engine(e), lines, pipes, n, &p));
  free(pipes); /* copied by ordo */
  r.value = (uint64_t)(uintptr_t)p;
  return r;
}

static ordo_pipeline* pipeline(uintptr_t p) { return (ordo_pipeline*)p; }

ordo_go_ret ordo_go_pipeline_reset_pipes(uintptr_t p, uint32_t lines, const int64_t* types,
                                         const uintptr_t* handles, size_t n) {
  int ok;
  ordo_pipe* pipes = make_pipes(types, handles, n, &ok);
  if (!ok) return no_memory();
  ordo_go_ret r = result(ordo_pipeline_reset_pipes(pipeline(p), lines, pipes, n));
  free(pipes);
  return r;
}

ordo_go_ret ordo_go_pipeline_run(uintptr_t p) { return result(ordo_pipeline_run(pipeline(p))); }

ordo_go_ret ordo_go_pipeline_push(uintptr_t p, const ordo_var* reads, size_t nreads,
                                  const ordo_var* writes, size_t nwrites, int32_t priority,
                                  int32_t prop, int32_t gpu, const char* name) {
  ordo_push_opts opts = push_opts(priority, prop, gpu, name);
  return result(ordo_pipeline_push(pipeline(p), reads, nreads, writes, nwrites, &opts));
}

ordo_go_ret ordo_go_pipeline_reset(uintptr_t p) { return result(ordo_pipeline_reset(pipeline(p))); }

ordo_go_ret ordo_go_pipeline_num_tokens(uintptr_t p) {
  uint64_t n = 0;
  ordo_go_ret r = result(ordo_pipeline_num_tokens(pipeline(p), &n));
  r.value = n;
  return r;
}

ordo_go_ret ordo_go_pipeline_dropped(uintptr_t p, uint64_t* ids, size_t cap) {
  uint64_t n = 0;
  ordo_go_ret r = result(ordo_pipeline_dropped(pipeline(p), &n, ids, cap));
  r.value = n;
  return r;
}

ordo_go_ret ordo_go_pipeline_destroy(uintptr_t p) {
  return result(ordo_pipeline_destroy(pipeline(p)));
}

ordo_go_ret ordo_go_pipeflow_stop(uintptr_t pf) {
  return result(ordo_pipeflow_stop((ordo_pipeflow*)pf));
}

ordo_go_ret ordo_go_pipeflow_defer(uintptr_t pf, uint64_t token) {
  return result(ordo_pipeflow_defer((ordo_pipeflow*)pf, token));
}
