/*
 * bench_starpu: the StarPU 1.3 peer of the benchmark suite. Same workloads, flags and output as
 * every bench program (see bench_common.h); what is StarPU-specific is written here.
 *
 * How ordo's concepts map onto StarPU:
 *   var          a data handle over an 8-byte buffer (starpu_variable_data_register), registered
 *                before timing; StarPU's implicit (sequentially consistent) data dependencies
 *                then order the tasks exactly as ordo orders ops;
 *   op           starpu_task_insert() of a CPU codelet with an empty body, STARPU_R for each read
 *                var and STARPU_RW for each mutated var (RW, not W: ordo's "mutable" means the op
 *                may read the old value too);
 *   wait_for_all starpu_task_wait_for_all(), which ends the timed region.
 * The codelets have no performance model, so nothing is calibrated and the dm* schedulers run
 * without estimates; STARPU_SILENT=1 keeps StarPU's warnings off the output.
 *
 * StarPU chooses its scheduler at starpu_init, so this program re-initialises StarPU once per
 * scheduler (starpu_conf.sched_policy_name, with precedence over STARPU_* environment variables
 * so that a stray STARPU_SCHED or STARPU_NCPU cannot change what is measured) and prints every
 * result as system starpu-<scheduler>. Workers: --threads CPU workers, no CUDA, no OpenCL; the
 * main thread only submits, as with ordo.
 *
 * StarPU has no limit on submitted tasks by default (STARPU_LIMIT_MAX_SUBMITTED_TASKS unset),
 * whereas ordo throttles pushers at 8192 pending ops; we keep StarPU's default.
 *
 * A and E need one handle per op: registering (and later unregistering) 1M handles takes StarPU
 * tens of seconds per scheduler, untimed, and a 1M-op run peaks near 4 GB resident, as every
 * submitted task stays allocated until it has run.
 *
 * Usage: bench_starpu [--ops N] [--reps R] [--threads T] [--only LETTERS] [--sched a,b,...]
 * Schedulers: --sched, else $BENCH_STARPU_SCHEDULERS (for bench/run.sh, which passes the same
 * flags to every program), else eager,prio,lws,ws (see DEFAULT_SCHEDULERS for why not dmda).
 */
#ifndef _GNU_SOURCE
/* Before any system header: -std=c11 hides barriers, strdup, strtok_r and setenv otherwise. */
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <starpu.h>

#include "bench_common.h"
#include "bench_pushers.h"
#include "starpu_common.h"

/* Not dmda, dm and their kin by default: they rank workers by performance-model estimates, which
 * these codelets lack, and their cost per task then grows with the number of queued tasks (C at
 * 20k ops: 9 us/op; 100k: 430 us/op), so 1M ops would take hours. --sched dmda still runs it. */
#define DEFAULT_SCHEDULERS "eager,prio,lws,ws"

static void die(const char* what, int ret) {
  fprintf(stderr, "bench_starpu: %s failed: %s\n", what, strerror(ret < 0 ? -ret : ret));
  exit(1);
}

static void* xcalloc(size_t n, size_t size) {
  void* p = calloc(n, size);
  if (!p) die("calloc", ENOMEM);
  return p;
}

/* The op body of workloads A-E: nothing, so that only the runtime's own cost is measured. */
static void empty_cpu(void* buffers[], void* cl_arg) {
  (void)buffers;
  (void)cl_arg;
}

/* The op body of F: the kernel, whose result goes into the written cell (buffer 0) so that the
 * compiler cannot drop it. cl_arg points at the iteration count, shared by every task. */
static void stencil_cpu(void* buffers[], void* cl_arg) {
  uint64_t* cell = (uint64_t*)STARPU_VARIABLE_GET_PTR(buffers[0]);
  *cell = bench_kernel(*(const uint64_t*)cl_arg);
}

/* Variable buffer counts: the access modes come from each starpu_task_insert call. */
static struct starpu_codelet empty_cl = {
    .where = STARPU_CPU,
    .cpu_funcs = {empty_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "bench_empty",
};
static struct starpu_codelet stencil_cl = {
    .where = STARPU_CPU,
    .cpu_funcs = {stencil_cpu},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "bench_stencil",
};

/* Everything the workloads touch, registered before any timing starts. */
typedef struct {
  const bench_args* args;
  uint64_t* own_data; /* A and E: one var per op */
  starpu_data_handle_t* own;
  uint64_t one_data; /* B and C: the single var */
  starpu_data_handle_t one;
  uint64_t dag_data[BENCH_DAG_VARS]; /* D */
  starpu_data_handle_t dag[BENCH_DAG_VARS];
  uint32_t* dag_idx;
  int width; /* F: two rows (steps s-1 and s) of `width` cells */
  uint64_t* cell_data;
  starpu_data_handle_t* cell;
  uint64_t iterations; /* F: the kernel length of the stencil being run */
  bench_pushers* two;  /* E */
} sp_bench;

static void check_insert(int ret) {
  if (ret != 0) die("starpu_task_insert", ret);
}

static void wait_all(void) {
  int ret = starpu_task_wait_for_all();
  if (ret != 0) die("starpu_task_wait_for_all", ret);
}

/* A: n tasks, each mutating its own var: no dependencies at all. */
static size_t w_independent(void* p, size_t n) {
  sp_bench* b = p;
  for (size_t i = 0; i < n; i++)
    check_insert(starpu_task_insert(&empty_cl, STARPU_RW, b->own[i], 0));
  wait_all();
  return n;
}

/* B: n tasks mutating one var: a chain, each task waits for the previous one. */
static size_t w_chain(void* p, size_t n) {
  sp_bench* b = p;
  for (size_t i = 0; i < n; i++) check_insert(starpu_task_insert(&empty_cl, STARPU_RW, b->one, 0));
  wait_all();
  return n;
}

/* C: n/10 rounds of one writer then 8 readers of one var. */
static size_t w_fanout(void* p, size_t n) {
  sp_bench* b = p;
  size_t rounds = n / 10;
  for (size_t r = 0; r < rounds; r++) {
    check_insert(starpu_task_insert(&empty_cl, STARPU_RW, b->one, 0));
    for (int k = 0; k < BENCH_FAN_READERS; k++)
      check_insert(starpu_task_insert(&empty_cl, STARPU_R, b->one, 0));
  }
  wait_all();
  return rounds * (1 + BENCH_FAN_READERS);
}

/* D: the shared random DAG, 2 reads and 1 write per task. */
static size_t w_dag(void* p, size_t n) {
  sp_bench* b = p;
  for (size_t k = 0; k < n; k++) {
    const uint32_t* t = b->dag_idx + 3 * k;
    check_insert(starpu_task_insert(&empty_cl, STARPU_R, b->dag[t[0]], STARPU_R, b->dag[t[1]],
                                    STARPU_RW, b->dag[t[2]], 0));
  }
  wait_all();
  return n;
}

/* E: two application threads submit at once, each its own half of the vars (bench_pushers.h:
 * started before any timing, as for every system). StarPU accepts submissions from any thread,
 * so this is the same pattern as ordo's two pushers. */
static void push_half(void* p, int which, size_t half) {
  sp_bench* b = p;
  starpu_data_handle_t* vars = b->own + (size_t)which * half;
  for (size_t i = 0; i < half; i++)
    check_insert(starpu_task_insert(&empty_cl, STARPU_RW, vars[i], 0));
}

static size_t w_two_pushers(void* p, size_t n) {
  sp_bench* b = p;
  size_t pushed = bench_pushers_run(b->two, n);
  wait_all(); /* after both returned: both halves are submitted by now */
  return pushed;
}

/* F: one stencil. Cell i of step s lives in row s % 2; the task writing it reads cells i-1, i,
 * i+1 of the other row. Reusing two rows adds no dependency: the tasks that read a cell of
 * row s % 2 before step s overwrites it are (s-1, i-1..i+1), which (s, i) depends on anyway. */
static void sp_stencil(void* p, int width, int steps, uint64_t iterations) {
  sp_bench* b = p;
  if (width > b->width) die("stencil width", EINVAL);
  b->iterations = iterations; /* nothing runs now: the last stencil ended in wait_all */
  for (int s = 0; s < steps; s++) {
    starpu_data_handle_t* cur = b->cell + (size_t)(s % 2) * (size_t)b->width;
    starpu_data_handle_t* prev = b->cell + (size_t)((s + 1) % 2) * (size_t)b->width;
    for (int i = 0; i < width; i++) {
      struct starpu_data_descr d[4];
      int nd = 0;
      d[nd].handle = cur[i], d[nd++].mode = STARPU_RW;
      for (int j = i - 1; s > 0 && j <= i + 1; j++)
        if (j >= 0 && j < width) d[nd].handle = prev[j], d[nd++].mode = STARPU_R;
      check_insert(starpu_task_insert(&stencil_cl, STARPU_DATA_MODE_ARRAY, d, nd,
                                      STARPU_CL_ARGS_NFREE, &b->iterations, sizeof b->iterations,
                                      0));
    }
  }
  wait_all();
}

static void register_vars(starpu_data_handle_t* h, uint64_t* data, size_t n) {
  for (size_t i = 0; i < n; i++)
    starpu_variable_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)&data[i], sizeof data[i]);
}

/* Every task on these handles has finished (wait_all), so no coherency work is needed. */
static void unregister_vars(starpu_data_handle_t* h, size_t n) {
  for (size_t i = 0; i < n; i++) starpu_data_unregister_no_coherency(h[i]);
}

static void start_starpu(const char* scheduler, int threads) {
  struct starpu_conf conf;
  starpu_conf_init(&conf);
  conf.precedence_over_environment_variables = 1;
  conf.sched_policy_name = scheduler;
  conf.ncpus = threads;
  conf.ncuda = 0;
  conf.nopencl = 0;
  conf.calibrate = 0;
  int ret = starpu_init(&conf);
  if (ret != 0) die("starpu_init", ret);
}

/* One scheduler: init StarPU, register the vars, run every requested workload, shut down. */
static void run_scheduler(const char* scheduler, sp_bench* b) {
  const bench_args* a = b->args;
  char system[64];
  snprintf(system, sizeof system, "starpu-%s", scheduler);
  start_starpu(scheduler, a->threads);
  fprintf(stderr, "bench_starpu: scheduler %s, %u CPU workers\n", scheduler,
          starpu_cpu_worker_get_count());
  int need_own = bench_wants(a, 'A') || bench_wants(a, 'E');
  uint64_t t0 = bench_now_ns();
  if (need_own) register_vars(b->own, b->own_data, a->ops);
  register_vars(&b->one, &b->one_data, 1);
  register_vars(b->dag, b->dag_data, BENCH_DAG_VARS);
  register_vars(b->cell, b->cell_data, 2 * (size_t)b->width);
  fprintf(stderr, "bench_starpu: data handles registered in %.1f s (untimed)\n",
          (double)(bench_now_ns() - t0) / 1e9);

  if (bench_wants(a, 'A')) bench_run_workload(system, 'A', a, w_independent, b);
  if (bench_wants(a, 'B')) bench_run_workload(system, 'B', a, w_chain, b);
  if (bench_wants(a, 'C')) bench_run_workload(system, 'C', a, w_fanout, b);
  if (bench_wants(a, 'D')) bench_run_workload(system, 'D', a, w_dag, b);
  if (bench_wants(a, 'E')) {
    b->two = bench_pushers_start(push_half, b);
    bench_run_workload(system, 'E', a, w_two_pushers, b);
    bench_pushers_stop(b->two);
  }
  if (bench_wants(a, 'F')) bench_metg_sweep(system, a->threads, sp_stencil, b);

  if (need_own) unregister_vars(b->own, a->ops);
  unregister_vars(&b->one, 1);
  unregister_vars(b->dag, BENCH_DAG_VARS);
  unregister_vars(b->cell, 2 * (size_t)b->width);
  starpu_shutdown();
}

/* Takes --sched LIST out of argv (the shared parser rejects flags it does not know) and returns
 * the list, else the environment's, else the default one. */
static char* take_sched_flag(int* argc, char** argv) {
  const char* env = getenv("BENCH_STARPU_SCHEDULERS");
  const char* list = env && *env ? env : DEFAULT_SCHEDULERS;
  int out = 1;
  for (int i = 1; i < *argc; i++) {
    if (!strcmp(argv[i], "--sched") && i + 1 < *argc) {
      list = argv[++i];
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  char* copy = strdup(list);
  if (!copy) die("strdup", ENOMEM);
  return copy;
}

int main(int argc, char** argv) {
  bench_own_flags_usage = "[--sched LIST]";
  char* schedulers = take_sched_flag(&argc, argv);
  bench_args a = bench_parse_args(argc, argv);
  /* Only where the caller did not say otherwise: STARPU_SILENT=0 still shows StarPU's chatter. */
  setenv("STARPU_SILENT", "1", 0);

  int major, minor, release;
  starpu_get_version(&major, &minor, &release);
  fprintf(stderr, "bench_starpu: StarPU %d.%d.%d, schedulers %s\n", major, minor, release,
          schedulers);

  sp_bench b;
  memset(&b, 0, sizeof b);
  b.args = &a;
  b.own_data = xcalloc(a.ops, sizeof *b.own_data);
  b.own = xcalloc(a.ops, sizeof *b.own);
  b.dag_idx = bench_dag_indices(a.ops);
  b.width = 2 * a.threads;
  b.cell_data = xcalloc(2 * (size_t)b.width, sizeof *b.cell_data);
  b.cell = xcalloc(2 * (size_t)b.width, sizeof *b.cell);

  for (char *save = NULL, *s = strtok_r(schedulers, ",", &save); s;
       s = strtok_r(NULL, ",", &save)) {
    if (starpu_scheduler_exists(s)) {
      run_scheduler(s, &b);
    } else {
      fprintf(stderr, "bench_starpu: StarPU %d.%d has no scheduler '%s'; skipped\n", major, minor,
              s);
    }
  }

  free(b.cell);
  free(b.cell_data);
  free(b.dag_idx);
  free(b.own);
  free(b.own_data);
  free(schedulers);
  return 0;
}
