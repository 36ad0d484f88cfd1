/*
 * cholesky: the main ordo demo. Factors a random symmetric positive definite matrix, A = L L^T,
 * with the tiled right-looking algorithm: every tile is an ordo var, every kernel call an op
 * that reads the tiles it needs (const vars) and mutates the one it updates (a mutable var).
 * ordo derives the whole dependency graph from those lists and the push order; the main thread
 * only pushes and waits. Kernels, tiling, op order and the check are shared with the StarPU
 * and OpenMP versions in bench/ (cholesky_common.h), so the three can be compared.
 *
 * Usage: cholesky [--n N] [--tile T] [--threads T] [--trace PATH] [--no-check]
 *                 [--reps R] [--warmup W] [--prio none|critical|panel] [--trsm inverse|solve]
 *                 [--graph]
 * Defaults: N 4096, tile 256, one worker per online CPU, trace in ./cholesky-trace.json
 * (--trace "" for none; it holds the warm-up's ops too), one timed run after one untimed
 * warm-up, critical-path priorities, trsm by the inverse of the diagonal tile's factor
 * (cholesky_common.h says why). The warm-up is there because a process's first factorization
 * runs 4-15% slower (the op pool and OpenBLAS's buffers are new, the workers asleep), and the
 * rate beside the dgemm reference should be the steady one, as make bench measures it.
 * --graph captures the factorization's pushes once (ordo_graph_begin_capture .. end_capture) and
 * launches the graph for every run (warm-up included): the same ops, vars, names and priorities,
 * replayed. It reports how long each ordo_graph_launch call took against the run's time (the
 * launch overhead), and its CHOL line names the system ordo-graph.
 *
 * Output: progress on stderr; on stdout the timing, the residual check (PASS/FAIL), the dgemm
 * references and, last, the machine-readable lines
 *   GEMMREF dgemm-1t <gflops>   GEMMREF dgemm-<T>t <gflops>   CHOL ordo <n> <tile> <gflops> <s>
 * Exit status: 0 on success, 1 when the check fails or an ordo call or an op fails.
 */
#define _GNU_SOURCE /* clock_gettime, setenv, strtok_r, aligned_alloc in C11 mode */
#include <ordo/ordo.h>
#include <stdatomic.h>

#include "cholesky_common.h"

#define DEFAULT_TRACE_PATH "cholesky-trace.json"
#define GEMM_REFERENCE_SIZE 2048
#define PROGRESS_PERIOD_NS 250000000ull

static void die(const char* what, ordo_status s) {
  fflush(stdout);
  fprintf(stderr, "cholesky: %s: %s (%s)\n", what, ordo_status_string(s),
          ordo_last_error_message());
  exit(1);
}
#define CHECK(call)                    \
  do {                                 \
    ordo_status s_ = (call);           \
    if (s_ != ORDO_OK) die(#call, s_); \
  } while (0)

/* What the ops of one factorization share: the matrix, and a counter the ops bump so the main
 * thread can show progress. */
typedef struct {
  const chol_matrix* matrix;
  atomic_long ops_done;
} run_state;

/* One op's user_data: which op, and the shared state. Preallocated, one per op, reused by every
 * factorization (each waits for all of its ops before the next one starts). */
typedef struct {
  chol_op op;
  run_state* run;
} op_task;

static int32_t run_op(ordo_exec* exec, void* user_data) {
  (void)exec;
  op_task* task = user_data;
  int info = chol_op_run(task->run->matrix, &task->op);
  atomic_fetch_add_explicit(&task->run->ops_done, 1, memory_order_relaxed);
  /* A failed potrf (A not positive definite) fails the op: ordo skips every op that depends
   * on its tile and the final wait reports it, with the op's name and this code. */
  return info;
}

/* Everything the pusher needs: one var per lower tile, indexed like chol_matrix.tiles. */
typedef struct {
  ordo_engine* engine;
  const ordo_var* vars;
  int nt;
  chol_prio_scheme prio;
  op_task* tasks;
  long pushed;
  run_state* run;
} pusher;

static int push_op(void* ctx, const chol_op* op) {
  pusher* p = ctx;
  op_task* task = &p->tasks[p->pushed++];
  task->op = *op;
  task->run = p->run;
  int rows[2], cols[2], out_row, out_col;
  int num_inputs = chol_op_inputs(op, rows, cols);
  ordo_var inputs[2];
  for (int r = 0; r < num_inputs; r++) inputs[r] = p->vars[rows[r] * p->nt + cols[r]];
  chol_op_output(op, &out_row, &out_col);
  ordo_var output = p->vars[out_row * p->nt + out_col];
  char name[ORDO_NAME_MAX + 1];
  chol_op_name(op, name, sizeof name);
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.name = name; /* copied by the push */
  opts.priority = chol_op_priority(op, p->prio);
  CHECK(ordo_opr_push(p->engine, run_op, task, inputs, (size_t)num_inputs, &output, 1, &opts));
  return 0;
}

/* Waits for every op, redrawing a progress line on stderr about every 0.25 s: in place on a
 * terminal, else (a log) one line per second at most. Returns wait_for_all's final status. */
static ordo_status wait_with_progress(ordo_engine* e, run_state* run, long total, double t0) {
  int tty = isatty(STDERR_FILENO);
  double last_line = t0;
  int drew = 0;
  for (;;) {
    ordo_status s = ordo_wait_for_all_timeout(e, PROGRESS_PERIOD_NS);
    if (s != ORDO_ERR_TIMEOUT) {
      if (drew && tty) fprintf(stderr, "\r%60s\r", "");
      return s;
    }
    double now = chol_now_s();
    if (!tty && now - last_line < 1.0) continue;
    long done = atomic_load_explicit(&run->ops_done, memory_order_relaxed);
    fprintf(stderr, "%s  factorizing: %ld/%ld ops (%3.0f%%), %.1f s%s", tty ? "\r" : "", done,
            total, 100.0 * (double)done / (double)total, now - t0, tty ? "" : "\n");
    last_line = now;
    drew = 1;
  }
}

/* --graph: the factorization captured once; each run launches it. launch_s collects how long
 * each timed ordo_graph_launch call took. */
typedef struct {
  ordo_graph* graph;
  run_state run;
  double* launch_s;
} replay;

static replay capture_factorization(ordo_engine* e, const ordo_var* vars, const chol_matrix* m,
                                    op_task* tasks, const chol_args* a) {
  replay r = {NULL, {m, 0}, chol_xmalloc((size_t)a->reps * sizeof(double))};
  pusher p = {e, vars, m->nt, a->prio, tasks, 0, &r.run};
  CHECK(ordo_graph_begin_capture(e));
  chol_for_each_op(m->nt, push_op, &p);
  CHECK(ordo_graph_end_capture(e, &r.graph));
  return r;
}

static chol_timing factorize_replayed(ordo_engine* e, replay* r, const chol_matrix* m, int rep) {
  atomic_store(&r->run.ops_done, 0);
  chol_timing start = chol_timing_start();
  CHECK(ordo_graph_launch(r->graph));
  if (rep >= 0) r->launch_s[rep] = chol_now_s() - start.wall;
  ordo_status s = wait_with_progress(e, &r->run, chol_op_count(m->nt), start.wall);
  chol_timing t = chol_timing_stop(start);
  if (s != ORDO_OK) die("the factorization", s);
  return t;
}

/* The launch overhead: each timed launch against its run's wall time; the worst share goes to
 * bench/compare.py as "GRAPHLAUNCH ordo-graph <n> <tile> <share>". */
static void report_launches(const replay* r, const chol_timing* runs, int reps,
                            const chol_args* a) {
  double worst = 0, sum = 0;
  for (int i = 0; i < reps; i++) {
    double share = r->launch_s[i] / runs[i].wall;
    sum += r->launch_s[i];
    if (share > worst) worst = share;
  }
  printf(
      "graph: one capture, %d timed launches: ordo_graph_launch took %.0f us on average, at "
      "most %.2f%% of its run's time\n",
      reps, 1e6 * sum / reps, 100 * worst);
  printf("GRAPHLAUNCH ordo-graph %d %d %.6f\n", a->n, a->tile, worst);
}

/* Takes --graph out of argv (chol_parse_args knows only the shared flags and --trace). */
static int take_graph_flag(int* argc, char** argv) {
  int out = 1, graph = 0;
  for (int i = 1; i < *argc; i++) {
    if (!strcmp(argv[i], "--graph")) {
      graph = 1;
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  return graph;
}

/* One factorization of the (freshly filled) matrix: push every op, wait, time it. */
static chol_timing factorize(ordo_engine* e, const ordo_var* vars, const chol_matrix* m,
                             op_task* tasks, const chol_args* a) {
  run_state run = {m, 0};
  pusher p = {e, vars, m->nt, a->prio, tasks, 0, &run};
  long total = chol_op_count(m->nt);
  chol_timing start = chol_timing_start();
  chol_for_each_op(m->nt, push_op, &p);
  ordo_status s = wait_with_progress(e, &run, total, start.wall);
  chol_timing t = chol_timing_stop(start);
  if (s != ORDO_OK) die("the factorization", s);
  return t;
}

static ordo_engine* create_engine(const chol_args* a, const char* trace_path) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.cpu_threads = a->threads;
  cfg.trace_path = trace_path; /* written by ordo_engine_destroy */
  ordo_engine* e;
  CHECK(ordo_engine_create(&cfg, &e));
  return e;
}

static ordo_var* create_tile_vars(ordo_engine* e, const chol_matrix* m) {
  ordo_var* vars = chol_xmalloc((size_t)m->nt * m->nt * sizeof *vars);
  for (int i = 0; i < m->nt; i++) {
    for (int j = 0; j <= i; j++) CHECK(ordo_var_new(e, &vars[i * m->nt + j]));
  }
  return vars;
}

int main(int argc, char** argv) {
  const int graph = take_graph_flag(&argc, argv);
  chol_args a = chol_parse_args(argc, argv, 1, 1, "--trace", "--trace PATH");
  const char* trace_path = a.extra_value ? a.extra_value : DEFAULT_TRACE_PATH;
  if (!*trace_path) trace_path = NULL; /* --trace "": no trace */
  chol_blas_threads(1);                /* before any BLAS call: one op = one thread */

  chol_matrix m = chol_matrix_alloc(a.n, a.tile);
  long total = chol_op_count(m.nt);
  printf(
      "ordo %s: tiled Cholesky, N=%d, tile %d (%dx%d tiles, %ld ops), %d workers, "
      "priorities: %s, trsm by %s\n",
      ordo_version_string(), a.n, a.tile, m.nt, m.nt, total, a.threads, chol_prio_name(a.prio),
      chol_trsm_name(chol_trsm_mode));
  fflush(stdout);

  ordo_engine* e = create_engine(&a, trace_path);
  ordo_var* vars = create_tile_vars(e, &m);
  op_task* tasks = chol_xmalloc((size_t)total * sizeof *tasks);
  chol_timing* runs = chol_xmalloc((size_t)a.reps * sizeof *runs);
  replay r = {NULL, {&m, 0}, NULL};
  if (graph) r = capture_factorization(e, vars, &m, tasks, &a);
  for (int rep = -a.warmup; rep < a.reps; rep++) {
    chol_matrix_fill(&m);
    chol_timing t = graph ? factorize_replayed(e, &r, &m, rep) : factorize(e, vars, &m, tasks, &a);
    if (rep >= 0) runs[rep] = t;
  }
  double median = chol_summarize_runs("factorization", &a, runs);
  if (graph) {
    report_launches(&r, runs, a.reps, &a);
    CHECK(ordo_graph_destroy(r.graph));
    free(r.launch_s);
  }

  int ok = !a.check || chol_report_check(&m, a.threads);
  ordo_stats stats = {.struct_size = sizeof stats};
  CHECK(ordo_engine_stats(e, &stats));
  /* Written now, to learn whether it worked: destroy writes it again (the same records) but
   * cannot fail for it, and only says so on stderr. */
  if (trace_path && ordo_engine_write_trace(e, trace_path) == ORDO_OK) {
    printf("trace: %llu ops (%llu dropped) written to %s (open it in https://ui.perfetto.dev)\n",
           (unsigned long long)stats.trace_records, (unsigned long long)stats.trace_dropped,
           trace_path);
  } else if (trace_path) {
    printf("trace: not written: %s\n", ordo_last_error_message());
  }
  CHECK(ordo_engine_destroy(e)); /* joins the workers (and writes the trace once more) */

  double gemm_1t = chol_dgemm_rate(GEMM_REFERENCE_SIZE, 1);
  double gemm_all = a.threads > 1 ? chol_dgemm_rate(GEMM_REFERENCE_SIZE, a.threads) : gemm_1t;
  printf(
      "dgemm %d^3 reference: %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d; "
      "Cholesky reached %.0f%% of the %d-thread rate\n",
      GEMM_REFERENCE_SIZE, gemm_1t, gemm_all, a.threads, 100 * chol_gflops(a.n, median) / gemm_all,
      a.threads);
  if (a.threads > 1 && a.threads <= chol_online_cpus() && gemm_all < 1.25 * gemm_1t) {
    /* Seen once on the 2-vCPU VM (55 against 53 GFLOP/s): a percentage of that is meaningless. */
    printf(
        "note: the %d-thread dgemm ran barely faster than 1 thread, so the CPUs were shared "
        "while it ran; the percentage above is not meaningful\n",
        a.threads);
  }
  printf("GEMMREF dgemm-1t %.2f\n", gemm_1t);
  if (a.threads > 1) printf("GEMMREF dgemm-%dt %.2f\n", a.threads, gemm_all);
  /* A wrong result prints no CHOL line: the suite then shows the program's failure, not a time. */
  if (ok) chol_print_result(graph ? "ordo-graph" : "ordo", &a, median);

  free(runs);
  free(tasks);
  free(vars);
  chol_matrix_free(&m);
  return ok ? 0 : 1;
}
