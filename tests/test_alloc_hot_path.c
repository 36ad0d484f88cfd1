/*
 * Proves the hot path does not allocate (SPEC §6: "Ops are pooled: steady-state push/complete
 * allocates nothing from the heap"), nor a pipeline run per token (issue #23).
 *
 * This executable defines malloc and friends itself, forwarding to glibc's __libc_* entry points
 * and counting calls while `g_counting` is on. libordo.so resolves malloc dynamically, so its
 * calls (and those of the libstdc++ linked into it) land here. After a warm-up of the same shapes,
 * a counted window of push -> run -> complete cycles must make at most 1 allocation per 1,000 ops.
 * A second window runs a 3-pipe serial-parallel-serial pipeline on 4 lines, with every fourth
 * token deferring to a later one (a B-frame waiting for its reference), after a warm-up run of
 * the same shape: at most 1 allocation per 1,000 tokens. A third window launches a captured
 * graph of the same op shapes (issue #26) many times, after warm-up launches: 0 allocations.
 *
 * A plain program (not Criterion): prints a table and `alloc: N passed, M failed`, exits 0 on
 * pass and 1 on fail.
 */
#include <errno.h>
#include <ordo/ordo.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocator interposition ---- */

extern void* __libc_malloc(size_t size);
extern void __libc_free(void* p);
extern void* __libc_calloc(size_t n, size_t size);
extern void* __libc_realloc(void* p, size_t size);
extern void* __libc_memalign(size_t align, size_t size);
extern void* __libc_valloc(size_t size);

static atomic_int g_counting;
static atomic_ulong g_allocs;
static atomic_ulong g_frees;

static inline void count_alloc(void) {
  if (atomic_load_explicit(&g_counting, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  }
}

void* malloc(size_t size) {
  count_alloc();
  return __libc_malloc(size);
}

void free(void* p) {
  if (p && atomic_load_explicit(&g_counting, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&g_frees, 1, memory_order_relaxed);
  }
  __libc_free(p);
}

void* calloc(size_t n, size_t size) {
  count_alloc();
  return __libc_calloc(n, size);
}

void* realloc(void* p, size_t size) {
  count_alloc();
  return __libc_realloc(p, size);
}

void* memalign(size_t align, size_t size) {
  count_alloc();
  return __libc_memalign(align, size);
}

void* aligned_alloc(size_t align, size_t size) {
  count_alloc();
  return __libc_memalign(align, size);
}

void* valloc(size_t size) {
  count_alloc();
  return __libc_valloc(size);
}

int posix_memalign(void** out, size_t align, size_t size) {
  count_alloc();
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(align, size);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

/* ---- workload ---- */

#define WARMUP_OPS 100000
#define COUNTED_OPS 100000
#define MAX_ALLOCS_PER_1000 1 /* the bound: at most 1 allocation per 1,000 ops */
#define MAX_IN_FLIGHT 256     /* pushes run ahead of completions by at most this much */
#define N_INDEP 16

static ordo_engine* g_e;
static ordo_var g_indep[N_INDEP];
static ordo_var g_chain;
static ordo_var g_in_a, g_in_b, g_out;
static ordo_var g_async_var;

static atomic_ulong g_done;    /* ops whose callback finished (or completed, if deferred) */
static atomic_ulong g_bad;     /* an ordo call failed inside a callback */
static unsigned long g_pushed; /* by the main thread */
static unsigned long g_push_errors;
static long g_chain_value; /* touched only by chain ops: serialised by the engine */
static long g_out_value;

static int32_t fn_indep(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  atomic_fetch_add_explicit(&g_done, 1, memory_order_relaxed);
  return 0;
}

static int32_t fn_chain(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  g_chain_value++;
  atomic_fetch_add_explicit(&g_done, 1, memory_order_relaxed);
  return 0;
}

static int32_t fn_join(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  g_out_value++;
  atomic_fetch_add_explicit(&g_done, 1, memory_order_relaxed);
  return 0;
}

static int32_t fn_async(ordo_exec* exec, void* ud) {
  (void)ud;
  ordo_completion c = 0;
  if (ordo_exec_defer(exec, &c) != ORDO_OK) {
    atomic_fetch_add(&g_bad, 1);
    atomic_fetch_add_explicit(&g_done, 1, memory_order_relaxed);
    return 0;
  }
  atomic_fetch_add_explicit(&g_done, 1, memory_order_relaxed);
  if (ordo_complete(c, 0, NULL) != ORDO_OK) atomic_fetch_add(&g_bad, 1);
  return 0;
}

static void free_noop(void* ud) {
  (void)ud;
}

static void push_one(ordo_fn fn, const ordo_var* r, size_t nr, const ordo_var* w, size_t nw,
                     const ordo_push_opts* opts) {
  /* throttle without ordo waits: bounded pending ops, as in a steady state */
  while (g_pushed - atomic_load_explicit(&g_done, memory_order_relaxed) > MAX_IN_FLIGHT) {
    sched_yield();
  }
  if (ordo_opr_push(g_e, fn, NULL, r, nr, w, nw, opts) != ORDO_OK) {
    g_push_errors++;
    return;
  }
  g_pushed++;
}

/* Pushes n ops cycling through the shapes. */
static void run_cycles(unsigned long n) {
  ordo_push_opts named;
  ordo_push_opts_init(&named);
  named.name = "chain_step_with_a_name_that_is_longer_than_ordo_name_max_bytes";
  named.priority = 1;
  ordo_push_opts with_free;
  ordo_push_opts_init(&with_free);
  with_free.free_fn = free_noop;
  with_free.name = "join";
  ordo_var ins[2] = {g_in_a, g_in_b};
  for (unsigned long i = 0; i < n; i++) {
    switch (i % 8) {
      case 0:
      case 1:
      case 2:
        push_one(fn_indep, NULL, 0, &g_indep[i % N_INDEP], 1, NULL);
        break;
      case 3:
      case 4:
        push_one(fn_chain, NULL, 0, &g_chain, 1, &named);
        break;
      case 5:
      case 6:
        push_one(fn_join, ins, 2, &g_out, 1, &with_free);
        break;
      default:
        push_one(fn_async, NULL, 0, &g_async_var, 1, NULL);
        break;
    }
  }
}

/* ---- pipeline workload ---- */

#define PIPELINE_WARMUP_TOKENS 40000
#define PIPELINE_COUNTED_TOKENS 100000 /* both multiples of 4: no deferral is left unresolved */

static uint64_t g_pl_stop;
static atomic_ulong g_pl_stages;

static int32_t pl_source(ordo_pipeflow* pf, void* ud) {
  (void)ud;
  uint64_t t = ordo_pipeflow_token(pf);
  if (t == g_pl_stop) return ordo_pipeflow_stop(pf);
  if (t % 4 == 1 && ordo_pipeflow_num_deferrals(pf) == 0) return ordo_pipeflow_defer(pf, t + 2);
  return 0;
}

static int32_t pl_stage(ordo_pipeflow* pf, void* ud) {
  (void)pf;
  (void)ud;
  atomic_fetch_add_explicit(&g_pl_stages, 1, memory_order_relaxed);
  return 0;
}

/* Runs the pipeline window; prints its row; returns 1 on pass. */
static int pipeline_window(void) {
  ordo_pipe pipes[3] = {{ORDO_PIPE_SERIAL, pl_source, NULL},
                        {ORDO_PIPE_PARALLEL, pl_stage, NULL},
                        {ORDO_PIPE_SERIAL, pl_stage, NULL}};
  ordo_pipeline* p = NULL;
  if (ordo_pipeline_create(g_e, 4, pipes, 3, &p) != ORDO_OK) {
    printf("ordo_pipeline_create: %s\n", ordo_last_error_message());
    return 0;
  }
  g_pl_stop = PIPELINE_WARMUP_TOKENS;
  ordo_status warm = ordo_pipeline_run(p);
  g_pl_stop = PIPELINE_WARMUP_TOKENS + PIPELINE_COUNTED_TOKENS; /* ids go on: no reset */
  atomic_store(&g_allocs, 0);
  atomic_store(&g_counting, 1);
  ordo_status counted = ordo_pipeline_run(p);
  atomic_store(&g_counting, 0);
  unsigned long allocs = atomic_load(&g_allocs);
  int ok = warm == ORDO_OK && counted == ORDO_OK;
  if (!ok) {
    printf("pipeline runs: %s, %s (%s)\n", ordo_status_string(warm), ordo_status_string(counted),
           ordo_last_error_message());
  }
  unsigned long want_stages = 2ul * (PIPELINE_WARMUP_TOKENS + PIPELINE_COUNTED_TOKENS);
  if (atomic_load(&g_pl_stages) != want_stages) {
    printf("pipeline stages ran %lu times, expected %lu\n", atomic_load(&g_pl_stages), want_stages);
    ok = 0;
  }
  unsigned long limit = PIPELINE_COUNTED_TOKENS / 1000 * MAX_ALLOCS_PER_1000;
  int alloc_ok = allocs <= limit;
  printf("%-28s %10d %14lu %16.3f %8s\n", "pipeline run (counted)", PIPELINE_COUNTED_TOKENS, allocs,
         (double)allocs * 1000.0 / PIPELINE_COUNTED_TOKENS, alloc_ok ? "PASS" : "FAIL");
  printf("(tokens, S-P-S on 4 lines, every fourth token deferred once; limit: %lu allocations)\n\n",
         limit);
  if (ordo_pipeline_destroy(p) != ORDO_OK) ok = 0;
  return ok && alloc_ok;
}

/* ---- graph workload: one capture of the 8 shapes, launched many times ---- */

#define GRAPH_WARMUP_LAUNCHES 2000
#define GRAPH_COUNTED_LAUNCHES 10000 /* 80,000 replayed ops */

/* Launches g n times, keeping at most about MAX_IN_FLIGHT ops pending (no ordo waits). */
static unsigned long launch_graph(ordo_graph* g, unsigned long n) {
  unsigned long failed = 0;
  for (unsigned long i = 0; i < n; i++) {
    while (g_pushed - atomic_load_explicit(&g_done, memory_order_relaxed) > MAX_IN_FLIGHT) {
      sched_yield();
    }
    if (ordo_graph_launch(g) != ORDO_OK) {
      failed++;
      continue;
    }
    g_pushed += 8;
  }
  return failed;
}

/* Runs the graph window; prints its row; returns 1 on pass. */
static int graph_window(void) {
  if (ordo_graph_begin_capture(g_e) != ORDO_OK) {
    printf("ordo_graph_begin_capture: %s\n", ordo_last_error_message());
    return 0;
  }
  unsigned long pushed = g_pushed;
  run_cycles(8); /* recorded: each push returns at once and runs nothing */
  g_pushed = pushed;
  ordo_graph* g = NULL;
  if (ordo_graph_end_capture(g_e, &g) != ORDO_OK) {
    printf("ordo_graph_end_capture: %s\n", ordo_last_error_message());
    return 0;
  }
  unsigned long failed = launch_graph(g, GRAPH_WARMUP_LAUNCHES);
  ordo_status warm = ordo_wait_for_all(g_e);
  unsigned long done_before = atomic_load(&g_done);
  atomic_store(&g_allocs, 0);
  atomic_store(&g_counting, 1);
  failed += launch_graph(g, GRAPH_COUNTED_LAUNCHES);
  ordo_status counted = ordo_wait_for_all(g_e);
  atomic_store(&g_counting, 0);
  unsigned long allocs = atomic_load(&g_allocs);
  unsigned long ops = atomic_load(&g_done) - done_before;
  int ok =
      warm == ORDO_OK && counted == ORDO_OK && failed == 0 && ops == 8ul * GRAPH_COUNTED_LAUNCHES;
  if (!ok) {
    printf("graph launches: %s, %s, %lu failed, %lu ops (%s)\n", ordo_status_string(warm),
           ordo_status_string(counted), failed, ops, ordo_last_error_message());
  }
  int alloc_ok = allocs == 0;
  printf("%-28s %10lu %14lu %16.3f %8s\n", "graph launch (counted)", ops, allocs,
         ops ? (double)allocs * 1000.0 / (double)ops : 0.0, alloc_ok ? "PASS" : "FAIL");
  printf(
      "(replayed ops, the 8 shapes above captured once: ops 3-4 and 5-6 run as two chains,\n"
      " each one op back to back, and ops 0-2 and 7 as one bundle that the workers share;\n"
      " limit: 0 allocations)\n\n");
  if (ordo_graph_destroy(g) != ORDO_OK) ok = 0;
  return ok && alloc_ok;
}

int main(void) {
  /* touch stdio before any counting so its buffers exist */
  printf("ordo alloc test: library %s\n", ordo_version_string());
  fflush(stdout);

  /* count the set-up too: it must allocate, which proves the interposition reaches libordo */
  atomic_store(&g_counting, 1);
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  cfg.cpu_threads = 2;
  ordo_status st = ordo_engine_create(&cfg, &g_e);
  if (st != ORDO_OK) {
    printf("ordo_engine_create failed: %s (%s)\nalloc: 0 passed, 1 failed\n",
           ordo_status_string(st), ordo_last_error_message());
    return 1;
  }
  int ok = 1;
  for (int i = 0; i < N_INDEP && ok; i++) ok = ordo_var_new(g_e, &g_indep[i]) == ORDO_OK;
  ok = ok && ordo_var_new(g_e, &g_chain) == ORDO_OK;
  ok = ok && ordo_var_new(g_e, &g_in_a) == ORDO_OK;
  ok = ok && ordo_var_new(g_e, &g_in_b) == ORDO_OK;
  ok = ok && ordo_var_new(g_e, &g_out) == ORDO_OK;
  ok = ok && ordo_var_new(g_e, &g_async_var) == ORDO_OK;
  if (!ok) {
    printf("ordo_var_new failed: %s\nalloc: 0 passed, 1 failed\n", ordo_last_error_message());
    return 1;
  }

  /* warm-up: the same shapes, so pools reach their steady size */
  run_cycles(WARMUP_OPS);
  st = ordo_wait_for_all(g_e);
  atomic_store(&g_counting, 0);
  unsigned long setup_allocs = atomic_load(&g_allocs);
  if (setup_allocs == 0) {
    printf(
        "no allocation counted while creating the engine and warming up: the malloc\n"
        "interposition does not reach libordo, so the counted window would prove nothing\n");
    ok = 0;
  }
  if (st != ORDO_OK) {
    printf("warm-up ordo_wait_for_all: %s (%s)\n", ordo_status_string(st),
           ordo_last_error_message());
    ok = 0;
  }

  /* counted window: pushes, runs, completions, and one final wait */
  unsigned long pushed_before = g_pushed;
  atomic_store(&g_allocs, 0);
  atomic_store(&g_frees, 0);
  atomic_store(&g_counting, 1);
  run_cycles(COUNTED_OPS);
  ordo_status wst = ordo_wait_for_all(g_e);
  atomic_store(&g_counting, 0);
  unsigned long allocs = atomic_load(&g_allocs);
  unsigned long frees = atomic_load(&g_frees);
  unsigned long ops = g_pushed - pushed_before;

  if (wst != ORDO_OK) {
    printf("counted ordo_wait_for_all: %s (%s)\n", ordo_status_string(wst),
           ordo_last_error_message());
    ok = 0;
  }
  if (g_push_errors) {
    printf("%lu pushes failed\n", g_push_errors);
    ok = 0;
  }
  if (atomic_load(&g_bad)) {
    printf("%lu defer/complete calls failed inside callbacks\n", atomic_load(&g_bad));
    ok = 0;
  }
  unsigned long total = WARMUP_OPS + COUNTED_OPS;
  unsigned long done = atomic_load(&g_done);
  if (done != total) {
    printf("ops finished: %lu, expected %lu\n", done, total);
    ok = 0;
  }
  long want_chain = (long)(total / 8 * 2), want_out = (long)(total / 8 * 2);
  if (g_chain_value != want_chain || g_out_value != want_out) {
    printf("chain=%ld (want %ld) join=%ld (want %ld)\n", g_chain_value, want_chain, g_out_value,
           want_out);
    ok = 0;
  }

  unsigned long limit = (unsigned long)COUNTED_OPS / 1000 * MAX_ALLOCS_PER_1000;
  int alloc_ok = ops == COUNTED_OPS && allocs <= limit;
  printf("\n%-28s %10s %14s %16s %8s\n", "window", "ops", "malloc calls", "per 1,000 ops",
         "result");
  printf("%-28s %10lu %14lu %16.3f %8s\n", "push/run/complete (counted)", ops, allocs,
         ops ? (double)allocs * 1000.0 / (double)ops : 0.0, alloc_ok ? "PASS" : "FAIL");
  printf(
      "(frees in window: %lu; limit: %lu allocations = %d per 1,000 ops; engine set-up and\n"
      " %d warm-up ops made %lu allocations, outside the window)\n\n",
      frees, limit, MAX_ALLOCS_PER_1000, WARMUP_OPS, setup_allocs);
  ok = ok && alloc_ok;
  ok = pipeline_window() && ok;
  ok = graph_window() && ok;

  st = ordo_engine_destroy(g_e);
  if (st != ORDO_OK) {
    printf("ordo_engine_destroy: %s\n", ordo_status_string(st));
    ok = 0;
  }
  printf("alloc: %d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
  return ok ? 0 : 1;
}
