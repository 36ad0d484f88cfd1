/*
 * bench_omp: OpenMP tasks with depend clauses as a peer of ordo (bench/bench_common.h has the
 * workloads, flags and output protocol). One source, built twice: by gcc -fopenmp against
 * libgomp as bench_gomp (system "gomp"), and by clang -fopenmp=libomp against LLVM's libomp as
 * bench_libomp (system "libomp").
 *
 * Mapping: a var is an int whose address is the depend list item; a read is depend(in:), a
 * mutation depend(inout:). Each timed run is one `parallel num_threads(T)` region in which one
 * thread (`single`) creates every task; the region's closing barrier is the final wait.
 *
 * Fairness with ordo, which has T workers plus the pushing thread: here the team has T threads
 * in all and the producer is one of them, as OpenMP's model has it. While it creates tasks, the
 * other T-1 threads run them; the producer runs tasks itself whenever the runtime makes task
 * creation wait (libgomp runs a new task inline past 64 x T queued tasks, libomp when its
 * per-thread deque is full) and at the closing barrier. Both sides thus use T cores, and no
 * OpenMP run oversubscribes them; ordo's pusher is a (T+1)-th thread, mostly competing with
 * its own workers on a T-core machine. The thread pool is made by the untimed warm-up run;
 * each timed run then pays one region fork/join (a few microseconds per run, against the
 * 100 ms or more of a run of 1,000,000 tasks).
 *
 * E: the two pushers are the team's threads 0 and 1, each creating its half of the tasks (on
 * disjoint vars, so their tasks, children of different implicit tasks, need no ordering across
 * threads); the region's barrier waits for all of them. Needs T >= 2.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <omp.h>

#include "bench_common.h"

#ifndef BENCH_OMP_SYSTEM
#if defined(__clang__)
#define BENCH_OMP_SYSTEM "libomp"
#else
#define BENCH_OMP_SYSTEM "gomp"
#endif
#endif

static void* xmalloc(size_t n) {
  void* p = malloc(n);
  if (!p) {
    fprintf(stderr, "bench_omp: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* Everything the workloads need, built before any timing starts. */
typedef struct {
  int threads;
  int* own; /* one var per op: A, and E in halves */
  int one;  /* B and C */
  int dag[BENCH_DAG_VARS];
  uint32_t* dag_idx; /* D: per op, two read vars then the mutated one */
} bench;

static size_t run_independent(void* ctx, size_t n) {
  bench* b = ctx;
#pragma omp parallel num_threads(b->threads)
#pragma omp single
  for (size_t i = 0; i < n; i++) {
#pragma omp task depend(inout : b->own[i])
    {}
  }
  return n;
}

static size_t run_chain(void* ctx, size_t n) {
  bench* b = ctx;
#pragma omp parallel num_threads(b->threads)
#pragma omp single
  for (size_t i = 0; i < n; i++) {
#pragma omp task depend(inout : b->one)
    {}
  }
  return n;
}

static size_t run_fanout(void* ctx, size_t n) {
  bench* b = ctx;
  size_t rounds = n / 10;
#pragma omp parallel num_threads(b->threads)
#pragma omp single
  for (size_t r = 0; r < rounds; r++) {
#pragma omp task depend(inout : b->one)
    {}
    for (int k = 0; k < BENCH_FAN_READERS; k++) {
#pragma omp task depend(in : b->one)
      {}
    }
  }
  return rounds * (1 + BENCH_FAN_READERS);
}

static size_t run_dag(void* ctx, size_t n) {
  bench* b = ctx;
#pragma omp parallel num_threads(b->threads)
#pragma omp single
  for (size_t k = 0; k < n; k++) {
    const uint32_t* t = &b->dag_idx[3 * k];
#pragma omp task depend(in : b->dag[t[0]], b->dag[t[1]]) depend(inout : b->dag[t[2]])
    {}
  }
  return n;
}

static size_t run_two_pushers(void* ctx, size_t n) {
  bench* b = ctx;
  size_t half = n / 2;
#pragma omp parallel num_threads(b->threads)
  {
    int me = omp_get_thread_num();
    if (me < 2) {
      size_t first = (size_t)me * half;
      for (size_t i = first; i < first + half; i++) {
#pragma omp task depend(inout : b->own[i])
        {}
      }
    }
  }
  return 2 * half;
}

/* ---- F: the METG stencil ----
 * Two vars per column, for even and odd steps (double buffering, as Task Bench does): task
 * (s, i) reads columns i-1, i, i+1 of buffer (s-1)%2 and writes column i of buffer s%2. Its
 * write then only has to follow step s-1's readers of that buffer, which are the very tasks it
 * depends on, so the runtime sees the stencil's true dependencies and no more. (With a single
 * buffer, (s, i+1) would be created after (s, i) wrote column i and would wait for it,
 * serialising each row.) Edge columns list a neighbour twice, which OpenMP allows. */
typedef struct {
  int threads;
  int* col[2];             /* width dependency tokens per buffer */
  volatile uint64_t* sink; /* per column: keeps the kernel's result alive */
} stencil;

static void spawn_cell(stencil* st, int width, int s, int i, uint64_t iterations) {
  int now = s & 1, before = (s + 1) & 1;
  if (s == 0) {
#pragma omp task depend(out : st->col[now][i])
    st->sink[i] = bench_kernel(iterations);
  } else {
    int lo = i > 0 ? i - 1 : i, hi = i + 1 < width ? i + 1 : i;
    // clang-format off
#pragma omp task depend(in : st->col[before][lo], st->col[before][i], st->col[before][hi]) \
                 depend(out : st->col[now][i])
    // clang-format on
    st->sink[i] = bench_kernel(iterations);
  }
}

static void run_stencil(void* ctx, int width, int steps, uint64_t iterations) {
  stencil* st = ctx;
#pragma omp parallel num_threads(st->threads)
#pragma omp single
  for (int s = 0; s < steps; s++)
    for (int i = 0; i < width; i++) spawn_cell(st, width, s, i, iterations);
}

static void run_metg(const char* system, int threads) {
  int width = 2 * threads;
  stencil st = {threads,
                {xmalloc((size_t)width * sizeof(int)), xmalloc((size_t)width * sizeof(int))},
                xmalloc((size_t)width * sizeof(uint64_t))};
  bench_metg_sweep(system, threads, run_stencil, &st);
  free(st.col[0]);
  free(st.col[1]);
  free((void*)st.sink);
}

/* The team OpenMP really gives for num_threads(threads): it may give fewer (thread limits). */
static int team_size(int threads) {
  int got = 0;
#pragma omp parallel num_threads(threads)
#pragma omp single
  got = omp_get_num_threads();
  return got;
}

int main(int argc, char** argv) {
  bench_args a = bench_parse_args(argc, argv);
  const char* system = BENCH_OMP_SYSTEM;
  omp_set_dynamic(0); /* the team must be exactly T threads, every run */
  int team = team_size(a.threads);
  fprintf(stderr, "bench_omp: %s, team of %d threads (asked %d), OpenMP %d\n", system, team,
          a.threads, _OPENMP);
  if (team != a.threads) {
    fprintf(stderr, "bench_omp: OpenMP gave %d threads instead of %d\n", team, a.threads);
    return 1;
  }

  bench b;
  memset(&b, 0, sizeof b);
  b.threads = a.threads;
  b.own = xmalloc(a.ops * sizeof *b.own);
  memset(b.own, 0, a.ops * sizeof *b.own);
  b.dag_idx = bench_dag_indices(a.ops);

  if (bench_wants(&a, 'A')) bench_run_workload(system, 'A', &a, run_independent, &b);
  if (bench_wants(&a, 'B')) bench_run_workload(system, 'B', &a, run_chain, &b);
  if (bench_wants(&a, 'C')) bench_run_workload(system, 'C', &a, run_fanout, &b);
  if (bench_wants(&a, 'D')) bench_run_workload(system, 'D', &a, run_dag, &b);
  if (bench_wants(&a, 'E')) {
    if (a.threads >= 2)
      bench_run_workload(system, 'E', &a, run_two_pushers, &b);
    else
      bench_skip(system, 'E', "the two pushers are team threads: needs --threads 2 or more");
  }
  if (bench_wants(&a, 'F')) run_metg(system, a.threads);

  free(b.dag_idx);
  free(b.own);
  return 0;
}
