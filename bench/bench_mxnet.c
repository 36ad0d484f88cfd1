/*
 * bench_mxnet: MXNet 1.9.1's dependency engine (ThreadedEnginePerDevice, the default) as a peer
 * of ordo, driven from C through its own C API: ops are pushed with MXEnginePushSync on engine
 * variables, the end is awaited with MXNDArrayWaitAll (Engine::WaitForAll).
 *
 * Two systems are measured, both on workloads A-F of bench_common.h:
 *   mxnet         op bulking off (bulk size 0): one engine op per push
 *   mxnet-bulk15  MXEngineSetBulkSize(15), as Gluon sets it for imperative code: PushSync then
 *                 appends up to 15 consecutive pushes of the pushing thread into one engine op
 *                 (ThreadedEngine::BulkAppend), their vars merged; Engine::WaitForAll flushes.
 *                 The bulk state is thread-local, so every pushing thread sets it itself.
 *
 * libmxnet.so comes from the mxnet==1.9.1 wheel (bench/fetch_mxnet.sh unpacks it) and is opened
 * with dlopen, so this program builds everywhere and prints SKIP lines when it cannot load it.
 * Where: $BENCH_MXNET_LIB, else BUILD/peers/mxnet/mxnet/libmxnet.so, else the loader's search.
 *
 * Variables. MXEnginePushSync takes arrays of engine VarHandles, but the C API has no call that
 * creates one; it only pushes on NDArrays' vars (MXEnginePushSyncND), which costs two more vector
 * copies per push. So by default the vars are made by the engine itself, mxnet::Engine::Get()->
 * NewVariable(), reached through the library's exported C++ symbols (see mx_new_var). With
 * BENCH_MXNET_VARS=ndarray in the environment it uses NDArrays (MXNDArrayCreateEx, delayed
 * allocation, so no memory behind them) and MXEnginePushSyncND instead.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_pushers.h"

#define BULK_SIZE 15 /* what Gluon uses for imperative bulking */
#define STENCIL_MAX_WIDTH 256
#define CHECK_OPS 2000 /* ops in the binding self-check */

/* ---- the part of MXNet 1.9.1's C API used here, from include/mxnet/c_api.h ---- */

/* typedef void (*EngineSyncFunc)(void*, void*): (RunContext*, func_param). */
typedef void (*mx_sync_fn)(void* run_ctx, void* param);
/* int MXEnginePushSync(EngineSyncFunc sync_func, void* func_param, EngineFuncParamDeleter
 *   deleter, ContextHandle ctx_handle, EngineVarHandle const_vars_handle, int num_const_vars,
 *   EngineVarHandle mutable_vars_handle, int num_mutable_vars, EngineFnPropertyHandle prop_handle,
 *   int priority, const char* opr_name);
 * The EngineVarHandle arguments point to arrays of VarHandle (src/c_api/c_api.cc casts them to
 * VarHandle*). MXEnginePushSyncND has the same shape with NDArrayHandle* arrays, so one pointer
 * type serves both. */
typedef int (*mx_push_sync_fn)(mx_sync_fn fn, void* param, void (*deleter)(void*), const void* ctx,
                               void** const_vars, int num_const, void** mutable_vars,
                               int num_mutable, const void* prop, int priority,
                               const char* opr_name);
/* int MXEngineSetBulkSize(int bulk_size, int* prev_bulk_size); */
typedef int (*mx_set_bulk_fn)(int bulk_size, int* prev);
/* int MXNDArrayWaitAll(); int MXNotifyShutdown(); int MXGetVersion(int* out); */
typedef int (*mx_void_fn)(void);
typedef int (*mx_version_fn)(int* out);
/* const char* MXGetLastError(); */
typedef const char* (*mx_last_error_fn)(void);
/* int MXNDArrayCreateEx(const uint32_t* shape, uint32_t ndim, int dev_type, int dev_id,
 *   int delay_alloc, int dtype, NDArrayHandle* out); */
typedef int (*mx_nd_create_fn)(const uint32_t* shape, uint32_t ndim, int dev_type, int dev_id,
                               int delay_alloc, int dtype, void** out);
/* C++ (include/mxnet/engine.h, src/engine/threaded_engine.h): static Engine* Engine::Get() and
 * ThreadedVar* ThreadedEngine::NewVariable(), a non-virtual call with `this` as the first
 * argument under the Itanium C++ ABI. */
typedef void* (*mx_engine_get_fn)(void);
typedef void* (*mx_new_var_fn)(void* engine);

/* mxnet::Context (include/mxnet/base.h): enum DeviceType dev_type; int32_t dev_id. */
typedef struct {
  int dev_type;
  int32_t dev_id;
} mx_context;
/* mxnet::RunContext (include/mxnet/base.h), what an EngineSyncFunc gets as its first argument;
 * is_bulk is set while the op runs inside an engine bulk (ThreadedEngine::BulkFlush). */
typedef struct {
  mx_context ctx;
  void* stream;
  void* aux_stream;
  bool is_bulk;
} mx_run_context;
#define MX_CPU 1     /* Context::kCPU = mshadow::cpu::kDevMask = 1 << 0 */
#define MX_FLOAT32 0 /* mshadow::kFloat32 */

typedef struct {
  void* lib;
  mx_push_sync_fn push;
  mx_set_bulk_fn set_bulk;
  mx_void_fn wait_all;
  mx_void_fn notify_shutdown;
  mx_version_fn version;
  mx_last_error_fn last_error;
  mx_nd_create_fn nd_create;   /* ndarray vars only */
  mx_engine_get_fn engine_get; /* engine vars only */
  mx_new_var_fn new_var;       /* engine vars only */
  int ndarray_vars;
  mx_context cpu;
} mx_api;

static mx_api mx;

static void mx_die(const char* what) {
  fprintf(stderr, "bench_mxnet: %s failed: %s\n", what, mx.last_error ? mx.last_error() : "?");
  exit(1);
}

static void* mx_sym(const char* name, char* why, size_t cap) {
  void* p = dlsym(mx.lib, name);
  if (!p && why[0] == 0) snprintf(why, cap, "libmxnet.so lacks %s", name);
  return p;
}

/* $BENCH_MXNET_LIB; else where bench/fetch_mxnet.sh unpacks the wheel, BUILD/peers/mxnet/mxnet/,
 * seen from this program in BUILD/bench/; else the bare name, for the loader's own search. */
static void mx_library_path(char* out, size_t cap) {
  const char* env = getenv("BENCH_MXNET_LIB");
  if (env && *env) {
    snprintf(out, cap, "%s", env);
    return;
  }
  char exe[2048];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = 0;
    char* slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(out, cap, "%s/../peers/mxnet/mxnet/libmxnet.so", exe);
    if (access(out, R_OK) == 0) return;
  }
  snprintf(out, cap, "libmxnet.so");
}

/* MXNet reads its thread count and engine type from the environment when the engine is first
 * made, so they are set before the library is even loaded. Returns 0, or -1 with `why`. */
static int mx_load(int threads, char* why, size_t cap) {
  char n[16];
  snprintf(n, sizeof n, "%d", threads);
  setenv("MXNET_CPU_WORKER_NTHREADS", n, 1);
  setenv("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice", 1);
  setenv("MXNET_USE_OPERATOR_TUNING", "0", 0); /* operator timing at load: start-up only */
  char path[4096];
  mx_library_path(path, sizeof path);
  mx.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!mx.lib) {
    snprintf(why, cap, "cannot load libmxnet.so of mxnet 1.9.1: %s", dlerror());
    return -1;
  }
  const char* vars = getenv("BENCH_MXNET_VARS");
  mx.ndarray_vars = vars && !strcmp(vars, "ndarray");
  why[0] = 0;
  *(void**)&mx.push = mx_sym(mx.ndarray_vars ? "MXEnginePushSyncND" : "MXEnginePushSync", why, cap);
  *(void**)&mx.set_bulk = mx_sym("MXEngineSetBulkSize", why, cap);
  *(void**)&mx.wait_all = mx_sym("MXNDArrayWaitAll", why, cap);
  *(void**)&mx.notify_shutdown = mx_sym("MXNotifyShutdown", why, cap);
  *(void**)&mx.version = mx_sym("MXGetVersion", why, cap);
  *(void**)&mx.last_error = mx_sym("MXGetLastError", why, cap);
  if (mx.ndarray_vars) {
    *(void**)&mx.nd_create = mx_sym("MXNDArrayCreateEx", why, cap);
  } else {
    *(void**)&mx.engine_get = mx_sym("_ZN5mxnet6Engine3GetEv", why, cap);
    *(void**)&mx.new_var = mx_sym("_ZN5mxnet6engine14ThreadedEngine11NewVariableEv", why, cap);
  }
  mx.cpu.dev_type = MX_CPU;
  mx.cpu.dev_id = 0;
  return why[0] ? -1 : 0;
}

/* One new variable, owned by the engine until the process ends (nothing here deletes vars). */
static void* mx_new_var(void) {
  if (mx.ndarray_vars) {
    const uint32_t shape[1] = {1};
    void* nd = NULL;
    if (mx.nd_create(shape, 1, MX_CPU, 0, 1, MX_FLOAT32, &nd) != 0) mx_die("MXNDArrayCreateEx");
    return nd;
  }
  /* ThreadedEngine is a single-inheritance Engine and ThreadedVar's first base is Var, so the
   * pointers need no adjustment. The engine type is forced to ThreadedEnginePerDevice above. */
  return mx.new_var(mx.engine_get());
}

static void mx_push(mx_sync_fn fn, void* param, void** reads, int nreads, void** writes,
                    int nwrites) {
  if (mx.push(fn, param, NULL, &mx.cpu, reads, nreads, writes, nwrites, NULL, 0, NULL) != 0)
    mx_die("MXEnginePushSync");
}

static void mx_wait_all(void) {
  if (mx.wait_all() != 0) mx_die("MXNDArrayWaitAll");
}

/* Bulking is per pushing thread; setting it to 0 also flushes what this thread has bulked. */
static void mx_set_bulk(int size) {
  int prev;
  if (mx.set_bulk(size, &prev) != 0) mx_die("MXEngineSetBulkSize");
}

/* ---- the benchmark's state, built before any timing ---- */

typedef struct {
  uint64_t iterations;
  uint64_t result; /* written only by the op that mutates this cell's var */
} stencil_cell;

typedef struct {
  const char* system;
  int bulk;                         /* bulk size each pushing thread sets: 0 or BULK_SIZE */
  size_t n;                         /* --ops */
  void** own;                       /* n vars: one per op for A, halves for E */
  void* one;                        /* B and C */
  void** dag_ops;                   /* D: 3 per op, two read, one mutated */
  void* rows[2][STENCIL_MAX_WIDTH]; /* F: double-buffered stencil columns */
  stencil_cell cells[2][STENCIL_MAX_WIDTH];
  bench_pushers* two; /* E */
} mx_bench;

static void empty_op(void* run_ctx, void* param) {
  (void)run_ctx;
  (void)param;
}

static size_t w_independent(void* ctx, size_t n) {
  mx_bench* b = ctx;
  for (size_t i = 0; i < n; i++) mx_push(empty_op, NULL, NULL, 0, &b->own[i], 1);
  mx_wait_all();
  return n;
}

static size_t w_chain(void* ctx, size_t n) {
  mx_bench* b = ctx;
  for (size_t i = 0; i < n; i++) mx_push(empty_op, NULL, NULL, 0, &b->one, 1);
  mx_wait_all();
  return n;
}

static size_t w_fanout(void* ctx, size_t n) {
  mx_bench* b = ctx;
  size_t rounds = n / 10;
  for (size_t r = 0; r < rounds; r++) {
    mx_push(empty_op, NULL, NULL, 0, &b->one, 1);
    for (int k = 0; k < BENCH_FAN_READERS; k++) mx_push(empty_op, NULL, &b->one, 1, NULL, 0);
  }
  mx_wait_all();
  return rounds * (1 + BENCH_FAN_READERS);
}

static size_t w_dag(void* ctx, size_t n) {
  mx_bench* b = ctx;
  for (size_t i = 0; i < n; i++) {
    void** t = &b->dag_ops[3 * i];
    mx_push(empty_op, NULL, t, 2, t + 2, 1);
  }
  mx_wait_all();
  return n;
}

/* E: two pusher threads (bench_pushers.h: started before any timing, as for every system),
 * released together, each on its own half of the vars. */
static void push_half(void* ctx, int which, size_t half) {
  const mx_bench* b = ctx;
  void** vars = b->own + (size_t)which * half;
  mx_set_bulk(b->bulk); /* thread-local in MXNet */
  for (size_t i = 0; i < half; i++) mx_push(empty_op, NULL, NULL, 0, &vars[i], 1);
  mx_set_bulk(0); /* flushes this thread's last bulk: WaitForAll only flushes the caller's */
}

static size_t w_two_pushers(void* ctx, size_t n) {
  mx_bench* b = ctx;
  size_t pushed = bench_pushers_run(b->two, n);
  mx_wait_all(); /* after both returned: everything is pushed and flushed by now */
  return pushed;
}

/* ---- F: the METG stencil ---- */

static void stencil_op(void* run_ctx, void* param) {
  (void)run_ctx;
  stencil_cell* c = param;
  c->result = bench_kernel(c->iterations);
}

/* Task (s, i) reads rows[(s-1)%2][i-1..i+1] and mutates rows[s%2][i]. The write-after-read
 * order this double buffering adds (on the readers of step s-1) links exactly the same tasks
 * as the true dependencies, so the graph is the Task Bench stencil and nothing more. */
static void stencil(void* ctx, int width, int steps, uint64_t iterations) {
  mx_bench* b = ctx;
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < width; i++) b->cells[r][i].iterations = iterations;
  for (int s = 0; s < steps; s++) {
    void** prev = b->rows[(s + 1) % 2];
    void** cur = b->rows[s % 2];
    for (int i = 0; i < width; i++) {
      int lo = i > 0 ? i - 1 : 0, hi = i + 1 < width ? i + 1 : width - 1;
      mx_push(stencil_op, &b->cells[s % 2][i], s ? &prev[lo] : NULL, s ? hi - lo + 1 : 0, &cur[i],
              1);
    }
  }
  mx_wait_all();
}

/* ---- a self-check of the binding, before any number is trusted ---- */

typedef struct {
  size_t next;             /* how many writers have run; touched only by ops mutating the var */
  size_t order[CHECK_OPS]; /* push index of the k-th writer to run */
  size_t seen[CHECK_OPS];  /* what reader i saw of `next` */
  unsigned char in_bulk[CHECK_OPS];
} check_state;

typedef struct {
  check_state* st;
  size_t index; /* push index */
} check_arg;

static void check_writer(void* run_ctx, void* param) {
  check_arg* a = param;
  a->st->in_bulk[a->index] = ((const mx_run_context*)run_ctx)->is_bulk;
  a->st->order[a->st->next++] = a->index;
}

static void check_reader(void* run_ctx, void* param) {
  check_arg* a = param;
  a->st->in_bulk[a->index] = ((const mx_run_context*)run_ctx)->is_bulk;
  a->st->seen[a->index] = a->st->next;
}

static int is_check_reader(size_t i) {
  return i % 3 == 2;
}

/* Pushes two writers then one reader, over and over, on one var: the writers must run once each
 * in push order and each reader must see exactly the writers pushed before it. If a prototype
 * or a struct layout declared above were wrong, this is where it would show. It also reports
 * from RunContext::is_bulk whether each op ran inside an engine bulk: all with bulking on, none
 * with it off. Returns how many ran in a bulk. */
static size_t check_binding(int bulk) {
  static check_state st;
  static check_arg args[CHECK_OPS];
  memset(&st, 0, sizeof st);
  void* var = mx_new_var();
  mx_set_bulk(bulk);
  for (size_t i = 0; i < CHECK_OPS; i++) {
    args[i].st = &st;
    args[i].index = i;
    if (is_check_reader(i))
      mx_push(check_reader, &args[i], &var, 1, NULL, 0);
    else
      mx_push(check_writer, &args[i], NULL, 0, &var, 1);
  }
  mx_wait_all();
  mx_set_bulk(0);
  size_t writers = 0, bulked = 0;
  int ok = 1;
  for (size_t i = 0; i < CHECK_OPS; i++) {
    bulked += st.in_bulk[i];
    if (is_check_reader(i))
      ok &= st.seen[i] == writers;
    else
      ok &= st.next > writers && st.order[writers++] == i;
  }
  ok &= st.next == writers;
  if (!ok) {
    fprintf(stderr, "bench_mxnet: self-check failed (bulk %d): ops ran out of order or not once\n",
            bulk);
    exit(1);
  }
  return bulked;
}

/* ---- main ---- */

static void* xmalloc(size_t n) {
  void* p = malloc(n);
  if (!p) {
    fprintf(stderr, "bench_mxnet: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static void skip_all(const bench_args* a, const char* why) {
  static const char* systems[] = {"mxnet", "mxnet-bulk15"};
  for (int s = 0; s < 2; s++)
    for (const char* w = "ABCDEF"; *w; w++)
      if (bench_wants(a, *w)) bench_skip(systems[s], *w, why);
}

static void setup_vars(mx_bench* b, int width) {
  b->own = xmalloc(b->n * sizeof *b->own);
  for (size_t i = 0; i < b->n; i++) b->own[i] = mx_new_var();
  b->one = mx_new_var();
  void* dag[BENCH_DAG_VARS];
  for (int i = 0; i < BENCH_DAG_VARS; i++) dag[i] = mx_new_var();
  uint32_t* idx = bench_dag_indices(b->n);
  b->dag_ops = xmalloc(3 * b->n * sizeof *b->dag_ops);
  for (size_t k = 0; k < 3 * b->n; k++) b->dag_ops[k] = dag[idx[k]];
  free(idx);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < width; i++) b->rows[r][i] = mx_new_var();
}

static void run_system(mx_bench* b, const bench_args* a) {
  mx_set_bulk(b->bulk); /* for this (the main) thread; E's pushers set their own */
  if (bench_wants(a, 'A')) bench_run_workload(b->system, 'A', a, w_independent, b);
  if (bench_wants(a, 'B')) bench_run_workload(b->system, 'B', a, w_chain, b);
  if (bench_wants(a, 'C')) bench_run_workload(b->system, 'C', a, w_fanout, b);
  if (bench_wants(a, 'D')) bench_run_workload(b->system, 'D', a, w_dag, b);
  if (bench_wants(a, 'E')) {
    b->two = bench_pushers_start(push_half, b);
    bench_run_workload(b->system, 'E', a, w_two_pushers, b);
    bench_pushers_stop(b->two);
  }
  if (bench_wants(a, 'F')) bench_metg_sweep(b->system, a->threads, stencil, b);
  mx_set_bulk(0);
}

int main(int argc, char** argv) {
  bench_args a = bench_parse_args(argc, argv);
  int width = 2 * a.threads;
  if (width > STENCIL_MAX_WIDTH) {
    fprintf(stderr, "bench_mxnet: at most %d threads\n", STENCIL_MAX_WIDTH / 2);
    return 2;
  }
  char why[512];
  if (mx_load(a.threads, why, sizeof why) != 0) {
    fprintf(stderr,
            "bench_mxnet: %s\n(tools/install-bench-deps.sh BUILD fetches it into "
            "BUILD/peers/mxnet; BENCH_MXNET_LIB=path/to/libmxnet.so points elsewhere)\n",
            why);
    skip_all(&a, why);
    return 0;
  }
  int version = 0;
  if (mx.version(&version) != 0) mx_die("MXGetVersion");
  fprintf(stderr, "bench_mxnet: MXNet %d.%d.%d, ThreadedEnginePerDevice, %d CPU workers, %s vars\n",
          version / 10000, version / 100 % 100, version % 100, a.threads,
          mx.ndarray_vars ? "NDArray (MXEnginePushSyncND)" : "engine (MXEnginePushSync)");

  size_t bulked_off = check_binding(0), bulked_on = check_binding(BULK_SIZE);
  fprintf(stderr,
          "bench_mxnet: ops run inside an engine bulk: %zu of %d with bulk size 0, %zu of %d "
          "with %d\n",
          bulked_off, CHECK_OPS, bulked_on, CHECK_OPS, BULK_SIZE);
  if (bulked_off != 0 || bulked_on != CHECK_OPS) {
    fprintf(stderr, "bench_mxnet: MXEngineSetBulkSize did not act as expected\n");
    return 1;
  }

  static mx_bench b; /* large (the stencil rows); zeroed */
  b.n = a.ops;
  setup_vars(&b, width);
  b.system = "mxnet";
  b.bulk = 0;
  run_system(&b, &a);
  b.system = "mxnet-bulk15";
  b.bulk = BULK_SIZE;
  run_system(&b, &a);

  mx_wait_all();
  /* What MXNet's Python front end does at exit: engine threads stop before static destructors. */
  if (mx.notify_shutdown() != 0) mx_die("MXNotifyShutdown");
  return 0;
}
