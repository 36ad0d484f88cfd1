/*
 * bench_ordo: ordo's side of the bench suite (bench/bench_common.h has the workloads, the flags
 * and the output protocol). It is a measurement, not a test: it never fails because something
 * is slow; it exits non-zero only when an ordo call fails (then the numbers would mean nothing).
 *
 * Usage: bench_ordo [--ops N] [--reps R] [--threads T] [--only LETTERS]
 *                   [--kind naive|pooled|per_device] [--pushers-help] [--graph]
 * --threads is the engine's CPU worker count; the pushing thread (main, or the two pushers of E)
 * comes on top of it, as it does for every caller of ordo. The system is reported as "ordo" for
 * the default per_device engine and "ordo-<kind>" for the others. Without --kind the engine
 * takes env ORDO_ENGINE, else per_device. --pushers-help sets ORDO_ENGINE_FLAG_PUSHERS_HELP (a
 * throttled pusher runs ready ops itself) and appends "-help" to the name. --graph (system
 * "ordo-graph", workloads A-E) captures each workload's pushes once per size, before timing
 * (ordo_graph_begin_capture .. end_capture), and times ordo_graph_launch + ordo_wait_for_all:
 * one capture, one launch per repetition, the ns per op of a replay.
 *
 * Engine, vars and D's var lists are all made before timing; bench_run_workload() times from
 * the first push to the return of ordo_wait_for_all.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ordo/ordo.h>
#include <pthread.h>

#include "bench_common.h"
#include "bench_pushers.h"

static void die(const char* what, ordo_status s) {
  fprintf(stderr, "bench_ordo: %s: %s (%s)\n", what, ordo_status_string(s),
          ordo_last_error_message());
  exit(1);
}
#define CHECK(call)                    \
  do {                                 \
    ordo_status s_ = (call);           \
    if (s_ != ORDO_OK) die(#call, s_); \
  } while (0)

static void* xmalloc(size_t n) {
  void* p = malloc(n);
  if (!p) {
    fprintf(stderr, "bench_ordo: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static int32_t empty_op(ordo_exec* exec, void* user_data) {
  (void)exec;
  (void)user_data;
  return 0;
}

/* Everything the workloads need, built before any timing starts. */
/* --graph: a workload's graphs, captured before timing, one per (workload, pusher, size). */
#define MAX_GRAPHS 8
typedef struct {
  char letter;
  int which; /* E: the pusher; 0 otherwise */
  size_t n;
  size_t ops; /* what the captured pushes count for */
  ordo_graph* g;
} captured;

typedef struct {
  ordo_engine* e;
  ordo_var* own;      /* --ops vars: one per op for A, split in halves for E */
  ordo_var one;       /* B and C */
  ordo_var* dag_ops;  /* D: per op, two read vars then the mutated one */
  bench_pushers* two; /* E: started before any timing (bench_pushers.h) */
  char letter;        /* --graph: the workload being timed */
  captured graphs[MAX_GRAPHS];
  int num_graphs;
} bench;

/* Each workload's pushes (the same calls whether made or captured); they return the op count. */
typedef size_t (*push_fn)(bench* b, size_t n);

static size_t push_independent(bench* b, size_t n) {
  for (size_t i = 0; i < n; i++)
    CHECK(ordo_opr_push(b->e, empty_op, NULL, NULL, 0, &b->own[i], 1, NULL));
  return n;
}

static size_t push_chain(bench* b, size_t n) {
  for (size_t i = 0; i < n; i++)
    CHECK(ordo_opr_push(b->e, empty_op, NULL, NULL, 0, &b->one, 1, NULL));
  return n;
}

static size_t push_fanout(bench* b, size_t n) {
  size_t rounds = n / 10;
  for (size_t r = 0; r < rounds; r++) {
    CHECK(ordo_opr_push(b->e, empty_op, NULL, NULL, 0, &b->one, 1, NULL));
    for (int k = 0; k < BENCH_FAN_READERS; k++)
      CHECK(ordo_opr_push(b->e, empty_op, NULL, &b->one, 1, NULL, 0, NULL));
  }
  return rounds * (1 + BENCH_FAN_READERS);
}

static size_t push_dag(bench* b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const ordo_var* v = &b->dag_ops[3 * i];
    CHECK(ordo_opr_push(b->e, empty_op, NULL, v, 2, v + 2, 1, NULL));
  }
  return n;
}

#define DYNAMIC_RUN(name)                         \
  static size_t run_##name(void* ctx, size_t n) { \
    bench* b = ctx;                               \
    size_t ops = push_##name(b, n);               \
    CHECK(ordo_wait_for_all(b->e));               \
    return ops;                                   \
  }
DYNAMIC_RUN(independent)
DYNAMIC_RUN(chain)
DYNAMIC_RUN(fanout)
DYNAMIC_RUN(dag)

/* ---- --graph ---- */

static captured* find_graph(bench* b, char letter, int which, size_t n) {
  for (int i = 0; i < b->num_graphs; i++) {
    captured* c = &b->graphs[i];
    if (c->letter == letter && c->which == which && c->n == n) return c;
  }
  fprintf(stderr, "bench_ordo: no graph captured for %c/%d/%zu\n", letter, which, n);
  exit(1);
}

static void capture(bench* b, char letter, int which, size_t n, size_t (*push)(bench*, size_t)) {
  captured* c = &b->graphs[b->num_graphs++];
  c->letter = letter;
  c->which = which;
  c->n = n;
  CHECK(ordo_graph_begin_capture(b->e));
  c->ops = push(b, n);
  CHECK(ordo_graph_end_capture(b->e, &c->g));
}

static void drop_graphs(bench* b) {
  CHECK(ordo_wait_for_all(b->e));
  for (int i = 0; i < b->num_graphs; i++) CHECK(ordo_graph_destroy(b->graphs[i].g));
  b->num_graphs = 0;
}

static size_t run_graph(void* ctx, size_t n) {
  bench* b = ctx;
  captured* c = find_graph(b, b->letter, 0, n);
  CHECK(ordo_graph_launch(c->g));
  CHECK(ordo_wait_for_all(b->e));
  return c->ops;
}

/* ---- E: two pusher threads on disjoint vars ---- */

static void push_half(void* ctx, int which, size_t half) {
  bench* b = ctx;
  const ordo_var* mine = b->own + (size_t)which * half;
  for (size_t i = 0; i < half; i++)
    CHECK(ordo_opr_push(b->e, empty_op, NULL, NULL, 0, &mine[i], 1, NULL));
}

/* E replayed: each pusher launches the graph of its own half. */
static int g_capturing_which; /* the half being captured */
static size_t half_own(bench* b, size_t half) {
  push_half(b, g_capturing_which, half);
  return half;
}

static void launch_half(void* ctx, int which, size_t half) {
  bench* b = ctx;
  CHECK(ordo_graph_launch(find_graph(b, 'E', which, half)->g));
}

static size_t run_two_pushers(void* ctx, size_t n) {
  bench* b = ctx;
  size_t pushed = bench_pushers_run(b->two, n);
  CHECK(ordo_wait_for_all(b->e)); /* after both finished pushing: nothing is missed */
  return pushed;
}

/* ---- F: the METG stencil ----
 * Two vars per column, one for even steps and one for odd steps (double buffering, as Task
 * Bench does). Task (s, i) reads the previous step's vars of columns i-1, i, i+1 and mutates
 * its own column's var of step s. With a single var per column, (s, i) mutating column i would
 * come, in push order, before (s, i+1) reads column i: (s, i+1) would then wait for (s, i) and
 * see step s's value instead of step s-1's, serialising each row. With two vars, the write of
 * (s, i) on buffer s%2 only has to follow step s-1's readers of that buffer, which are exactly
 * the tasks (s, i) depends on anyway, so ordo sees the stencil's true dependencies and no more. */
#define STENCIL_MAX_WIDTH 256

typedef struct {
  uint64_t iterations;
  volatile uint64_t sink; /* keeps the kernel's result alive; one column's tasks are ordered */
} stencil_cell;

typedef struct {
  ordo_engine* e;
  ordo_var col[2][STENCIL_MAX_WIDTH];
  stencil_cell cell[STENCIL_MAX_WIDTH];
} stencil;

static int32_t stencil_op(ordo_exec* exec, void* user_data) {
  (void)exec;
  stencil_cell* c = user_data;
  c->sink = bench_kernel(c->iterations);
  return 0;
}

static void push_cell(stencil* st, int width, int s, int i) {
  ordo_var reads[3];
  size_t nreads = 0;
  if (s > 0) {
    const ordo_var* prev = st->col[(s - 1) & 1];
    for (int j = i - 1; j <= i + 1; j++)
      if (j >= 0 && j < width) reads[nreads++] = prev[j];
  }
  CHECK(ordo_opr_push(st->e, stencil_op, &st->cell[i], reads, nreads, &st->col[s & 1][i], 1, NULL));
}

static void run_stencil(void* ctx, int width, int steps, uint64_t iterations) {
  stencil* st = ctx;
  for (int i = 0; i < width; i++) st->cell[i].iterations = iterations;
  for (int s = 0; s < steps; s++)
    for (int i = 0; i < width; i++) push_cell(st, width, s, i);
  CHECK(ordo_wait_for_all(st->e));
}

/* ---- setup ---- */

static int32_t parse_kind(const char* s) {
  if (s && !strcmp(s, "naive")) return ORDO_ENGINE_NAIVE;
  if (s && !strcmp(s, "pooled")) return ORDO_ENGINE_POOLED;
  if (s && !strcmp(s, "per_device")) return ORDO_ENGINE_PER_DEVICE;
  fprintf(stderr, "bench_ordo: --kind must be naive, pooled or per_device\n");
  exit(2);
}

/* Takes --kind, --pushers-help and --graph out of argv (bench_parse_args knows only the common
 * flags); returns the kind and sets *help. */
static int32_t take_own_flags(int* argc, char** argv, int* help, int* graph) {
  int32_t kind = ORDO_ENGINE_DEFAULT;
  int out = 1;
  *help = 0;
  *graph = 0;
  for (int i = 1; i < *argc; i++) {
    if (!strcmp(argv[i], "--kind")) {
      kind = parse_kind(i + 1 < *argc ? argv[i + 1] : NULL);
      i++;
    } else if (!strcmp(argv[i], "--pushers-help")) {
      *help = 1;
    } else if (!strcmp(argv[i], "--graph")) {
      *graph = 1;
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return kind;
}

/* The system name in the output: "ordo" for the default engine, "ordo-<kind>" otherwise, and
 * "-help" appended with ORDO_ENGINE_FLAG_PUSHERS_HELP. */
static const char* system_name(int32_t kind, int help, int graph) {
  if (graph) return "ordo-graph";
  switch (kind) {
    case ORDO_ENGINE_NAIVE:
      return help ? "ordo-naive-help" : "ordo-naive";
    case ORDO_ENGINE_POOLED:
      return help ? "ordo-pooled-help" : "ordo-pooled";
    default:
      return help ? "ordo-help" : "ordo";
  }
}

static ordo_engine* make_engine(int32_t kind, int help, int threads, int32_t* effective_kind,
                                int* effective_help) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = threads;
  cfg.flags = help ? ORDO_ENGINE_FLAG_PUSHERS_HELP : 0;
  ordo_engine* e;
  CHECK(ordo_engine_create(&cfg, &e));
  ordo_engine_config eff;
  ordo_engine_config_init(&eff);
  CHECK(ordo_engine_get_config(e, &eff));
  *effective_kind = eff.kind;
  *effective_help = (eff.flags & ORDO_ENGINE_FLAG_PUSHERS_HELP) != 0;
  fprintf(stderr, "bench_ordo: ordo %s, system %s, cpu_threads=%d, max_pending=%d\n",
          ordo_version_string(), system_name(eff.kind, *effective_help, 0), (int)eff.cpu_threads,
          (int)eff.max_pending);
  return e;
}

static void make_vars(bench* b, size_t ops) {
  b->own = xmalloc(ops * sizeof *b->own);
  for (size_t i = 0; i < ops; i++) CHECK(ordo_var_new(b->e, &b->own[i]));
  CHECK(ordo_var_new(b->e, &b->one));
  ordo_var dag[BENCH_DAG_VARS];
  for (int i = 0; i < BENCH_DAG_VARS; i++) CHECK(ordo_var_new(b->e, &dag[i]));
  uint32_t* idx = bench_dag_indices(ops);
  b->dag_ops = xmalloc(3 * ops * sizeof *b->dag_ops);
  for (size_t k = 0; k < 3 * ops; k++) b->dag_ops[k] = dag[idx[k]];
  free(idx);
}

static void run_metg(const char* system, ordo_engine* e, int threads) {
  int width = 2 * threads;
  if (width > STENCIL_MAX_WIDTH) {
    bench_skip(system, 'F', "more threads than this program's stencil supports");
    return;
  }
  stencil* st = xmalloc(sizeof *st);
  memset(st, 0, sizeof *st);
  st->e = e;
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < width; i++) CHECK(ordo_var_new(e, &st->col[b][i]));
  bench_metg_sweep(system, threads, run_stencil, st);
  free(st);
}

/* --graph: A-E, each captured at the warm-up's size and the timed size, then replayed. */
static void run_graphs(const char* system, bench_args* a, bench* b) {
  static const struct {
    char letter;
    push_fn push;
  } w[] = {{'A', push_independent}, {'B', push_chain}, {'C', push_fanout}, {'D', push_dag}};
  for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
    if (!bench_wants(a, w[i].letter)) continue;
    capture(b, w[i].letter, 0, a->ops / 10, w[i].push);
    capture(b, w[i].letter, 0, a->ops, w[i].push);
    b->letter = w[i].letter;
    bench_run_workload(system, w[i].letter, a, run_graph, b);
    drop_graphs(b);
  }
  if (bench_wants(a, 'E')) {
    for (int which = 0; which < 2; which++) {
      g_capturing_which = which;
      capture(b, 'E', which, a->ops / 10 / 2, half_own);
      capture(b, 'E', which, a->ops / 2, half_own);
    }
    b->two->push_half = launch_half;
    bench_run_workload(system, 'E', a, run_two_pushers, b);
    drop_graphs(b);
  }
  if (bench_wants(a, 'F')) bench_skip(system, 'F', "no graph mode for the METG sweep");
}

int main(int argc, char** argv) {
  int help, graph;
  bench_own_flags_usage = "[--kind naive|pooled|per_device] [--pushers-help] [--graph]";
  int32_t kind = take_own_flags(&argc, argv, &help, &graph);
  bench_args a = bench_parse_args(argc, argv);
  int32_t effective_kind;
  int effective_help;
  bench b;
  memset(&b, 0, sizeof b);
  b.e = make_engine(kind, help, a.threads, &effective_kind, &effective_help);
  const char* system = system_name(effective_kind, effective_help, graph);
  make_vars(&b, a.ops);
  b.two = bench_pushers_start(push_half, &b);
  if (graph) {
    run_graphs(system, &a, &b);
    bench_pushers_stop(b.two);
    CHECK(ordo_engine_destroy(b.e));
    free(b.dag_ops);
    free(b.own);
    return 0;
  }

  if (bench_wants(&a, 'A')) bench_run_workload(system, 'A', &a, run_independent, &b);
  if (bench_wants(&a, 'B')) bench_run_workload(system, 'B', &a, run_chain, &b);
  if (bench_wants(&a, 'C')) bench_run_workload(system, 'C', &a, run_fanout, &b);
  if (bench_wants(&a, 'D')) bench_run_workload(system, 'D', &a, run_dag, &b);
  if (bench_wants(&a, 'E')) bench_run_workload(system, 'E', &a, run_two_pushers, &b);
  if (bench_wants(&a, 'F')) run_metg(system, b.e, a.threads);

  bench_pushers_stop(b.two);
  CHECK(ordo_engine_destroy(b.e)); /* the vars go with the engine */
  free(b.dag_ops);
  free(b.own);
  return 0;
}
