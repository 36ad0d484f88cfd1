/*
 * bench_common.h: what every benchmark program in bench/ shares, so that ordo and each peer run
 * exactly the same work, are timed the same way and report in the same format.
 *
 * Every program takes the same flags:
 *   --ops N       ops per workload (default 1,000,000; C uses N/10 rounds of 1 writer + 8 readers)
 *   --reps R      timed repetitions per workload (default 5); one untimed warm-up run comes first
 *   --threads T   worker threads (default 2)
 *   --only XYZ    run only these workloads (letters A-F, default all the program supports)
 *
 * and prints, besides any human-readable lines on stderr, one machine line per result on stdout
 * that bench/compare.py turns into the side-by-side table:
 *   RESULT <system> <workload> <median> <min> <max>     (workloads A-E: ns per op)
 *   REP    <system> <workload> <rep> <ns_per_op> <c2c_before> <c2c_after>
 *                                                       (one per timed repetition of A-E, before
 *                                                        the RESULT line; c2c: the core-to-core
 *                                                        round trip in ns, bench_c2c.h, -1 when
 *                                                        it cannot be measured)
 *   METG   <system> <metg_ns> <efficiency_at_metg>        (workload F, see below)
 *   EFF    <system> <grain_ns> <efficiency> <c2c_before> <c2c_after>
 *                                                       (workload F, one per swept grain; the
 *                                                        round trip probed around its two runs)
 *   SKIP   <system> <workload> <reason...>                (a workload this system cannot express)
 * <system> is one word naming the runtime and its mode, e.g. ordo, gomp, libomp, tbb-flow,
 * starpu-lws, mxnet-bulk15.
 *
 * Workload F is METG (Task Bench, Slaughter et al., SC'20): a 1-D stencil of width 2 x threads;
 * task (step s, column i) depends on columns i-1, i, i+1 of step s-1. Each task runs
 * bench_kernel(iterations); the grain (task duration) is swept down by halving from about 1 ms.
 * Efficiency at a grain = (tasks x grain / threads) / elapsed. METG = the smallest grain whose
 * efficiency is still >= 50%. bench_metg_sweep() runs the sweep with a callback that executes one
 * whole stencil on the system under test, so every system is measured identically.
 */
#ifndef ORDO_BENCH_COMMON_H
#define ORDO_BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_c2c.h"

#define BENCH_FAN_READERS 8
#define BENCH_DAG_VARS 1000
#define BENCH_DAG_SEED 12345u

typedef struct {
  size_t ops;
  int reps;
  int threads;
  char only[16]; /* letters to run; empty = all */
} bench_args;

static inline uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A program's own flags, for the usage line (set before bench_parse_args). */
static const char* bench_own_flags_usage = "";

enum { BENCH_MAX_REPS = 64, BENCH_MAX_THREADS = 1024 };
#define BENCH_MAX_OPS 100000000ull /* sizes computed from it stay far from overflowing */

static inline void bench_usage(const char* prog) {
  fprintf(stderr,
          "usage: %s [--ops N] [--reps R] [--threads T] [--only LETTERS]%s%s\n"
          "  N 100..%llu, R 1..%d, T 1..%d, LETTERS from A-F (those this program runs)\n",
          prog, bench_own_flags_usage[0] ? " " : "", bench_own_flags_usage, BENCH_MAX_OPS,
          BENCH_MAX_REPS, BENCH_MAX_THREADS);
  exit(2);
}

/* A whole decimal number in [lo, hi], or exits with the usage line. */
static inline unsigned long long bench_number(const char* prog, const char* v,
                                              unsigned long long lo, unsigned long long hi) {
  char* end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || n < lo || n > hi) bench_usage(prog);
  return n;
}

static inline bench_args bench_parse_args(int argc, char** argv) {
  bench_args a;
  a.ops = 1000000;
  a.reps = 5;
  a.threads = 2;
  a.only[0] = 0;
  for (int i = 1; i < argc; i += 2) { /* every flag takes a value */
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--ops") && v) {
      a.ops = (size_t)bench_number(argv[0], v, 100, BENCH_MAX_OPS);
    } else if (!strcmp(argv[i], "--reps") && v) {
      a.reps = (int)bench_number(argv[0], v, 1, BENCH_MAX_REPS);
    } else if (!strcmp(argv[i], "--threads") && v) {
      a.threads = (int)bench_number(argv[0], v, 1, BENCH_MAX_THREADS);
    } else if (!strcmp(argv[i], "--only") && v && v[0] && strlen(v) < sizeof a.only &&
               strspn(v, "ABCDEF") == strlen(v)) {
      snprintf(a.only, sizeof a.only, "%s", v);
    } else {
      bench_usage(argv[0]);
    }
  }
  return a;
}

/* Whether workload `letter` was asked for. */
static inline int bench_wants(const bench_args* a, char letter) {
  return a->only[0] == 0 || strchr(a->only, letter) != NULL;
}

static inline int bench_cmp_double(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

/* Sorts v (n values) and prints the RESULT line: median, min, max. */
static inline void bench_report(const char* system, char workload, double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  printf("RESULT %s %c %.1f %.1f %.1f\n", system, workload, median, v[0], v[n - 1]);
  fflush(stdout);
}

static inline void bench_skip(const char* system, char workload, const char* reason) {
  printf("SKIP %s %c %s\n", system, workload, reason);
  fflush(stdout);
}

/* Runs one workload: an untimed warm-up at ops/10, then reps timed runs, then a REP line per
 * run and the RESULT line. run(ctx, n) does all the work for n ops (push everything, wait for
 * all) and returns how many ops it ran; the value reported is ns per op. The core-to-core round
 * trip is probed (bench_c2c.h) before each run and after the last, outside the timer, so that
 * each REP line says which phase of the machine its run saw. */
typedef size_t (*bench_workload_fn)(void* ctx, size_t n);
static inline void bench_run_workload(const char* system, char workload, const bench_args* a,
                                      bench_workload_fn run, void* ctx) {
  double v[BENCH_MAX_REPS], c2c[BENCH_MAX_REPS + 1];
  int reps = a->reps; /* at most BENCH_MAX_REPS: bench_parse_args checks */
  run(ctx, a->ops / 10);
  for (int r = 0; r < reps; r++) {
    c2c[r] = bench_c2c_quick_ns();
    uint64_t t0 = bench_now_ns();
    size_t ops = run(ctx, a->ops);
    v[r] = (double)(bench_now_ns() - t0) / (double)ops;
  }
  c2c[reps] = bench_c2c_quick_ns();
  for (int r = 0; r < reps; r++) {
    printf("REP %s %c %d %.1f %.0f %.0f\n", system, workload, r + 1, v[r], c2c[r], c2c[r + 1]);
  }
  bench_report(system, workload, v, reps);
}

/* The op bodies of workload D: op k reads dag_vars[3k], dag_vars[3k+1] and mutates
 * dag_vars[3k+2], indices into 1,000 vars, the same fixed sequence for every system. The two
 * reads and the write are distinct. Caller frees. */
static inline uint32_t* bench_dag_indices(size_t ops) {
  uint32_t* idx = (uint32_t*)malloc(ops * 3 * sizeof *idx);
  if (!idx) {
    fprintf(stderr, "bench: out of memory\n");
    exit(1);
  }
  uint64_t x = BENCH_DAG_SEED;
  for (size_t k = 0; k < ops; k++) {
    uint32_t r[3];
    for (int j = 0; j < 3; j++) {
      for (;;) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
        r[j] = (uint32_t)(x % BENCH_DAG_VARS);
        int dup = 0;
        for (int m = 0; m < j; m++) dup |= r[m] == r[j];
        if (!dup) break;
      }
    }
    memcpy(idx + 3 * k, r, sizeof r);
  }
  return idx;
}

/* ---- workload F: METG ---- */

/* The compute kernel: `iterations` rounds of dependent arithmetic the compiler cannot remove.
 * Returns a value the caller must use (store it in a volatile or a task result). */
static inline uint64_t bench_kernel(uint64_t iterations) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (uint64_t i = 0; i < iterations; i++) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

static inline uint64_t bench_thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Iterations of bench_kernel per microsecond on this core, measured once in this thread's CPU
 * time (not wall time: on a busy machine the wall clock would count time this thread did not
 * run and make every grain shorter than its label), best of 5 trials of about 10 ms. */
static inline double bench_kernel_iters_per_us(void) {
  static double cached = 0;
  if (cached > 0) return cached;
  uint64_t n = 1 << 16;
  while (1) { /* find a size that takes at least 10 ms */
    uint64_t t0 = bench_thread_cpu_ns();
    volatile uint64_t sink = bench_kernel(n);
    (void)sink;
    if (bench_thread_cpu_ns() - t0 > 10000000ull) break;
    n *= 2;
  }
  for (int trial = 0; trial < 5; trial++) {
    uint64_t t0 = bench_thread_cpu_ns();
    volatile uint64_t sink = bench_kernel(n);
    (void)sink;
    double rate = (double)n / ((double)(bench_thread_cpu_ns() - t0) / 1000.0);
    if (rate > cached) cached = rate;
  }
  return cached;
}

/* One stencil run on the system under test: width columns, steps steps, every task runs
 * bench_kernel(iterations); task (s, i) depends on (s-1, i-1), (s-1, i), (s-1, i+1) (where they
 * exist). Returns when every task has finished. */
typedef void (*bench_stencil_fn)(void* ctx, int width, int steps, uint64_t iterations);

/* Sweeps the grain from ~1 ms down by halves (2 timed runs per grain, best kept), prints an EFF
 * line per grain and the METG line. Stops after efficiency has fallen below 25%. */
static inline void bench_metg_sweep(const char* system, int threads, bench_stencil_fn stencil,
                                    void* ctx) {
  const int width = 2 * threads;
  const double per_us = bench_kernel_iters_per_us();
  double metg_ns = -1, metg_eff = 0;
  int fell_below = 0;
  for (double grain_ns = 1024000; grain_ns >= 250; grain_ns /= 2) {
    uint64_t iters = (uint64_t)(per_us * grain_ns / 1000.0);
    if (iters == 0) iters = 1;
    /* About 0.2 s of ideal work per run, at least 20 steps. */
    int steps = (int)(0.2e9 * threads / (grain_ns * width));
    if (steps < 20) steps = 20;
    if (steps > 20000) steps = 20000;
    stencil(ctx, width, 4, iters); /* warm-up */
    double best = 1e300;
    double c2c_before = bench_c2c_quick_ns();
    for (int r = 0; r < 2; r++) {
      uint64_t t0 = bench_now_ns();
      stencil(ctx, width, steps, iters);
      double dt = (double)(bench_now_ns() - t0);
      if (dt < best) best = dt;
    }
    double c2c_after = bench_c2c_quick_ns();
    double eff = ((double)steps * width * grain_ns / threads) / best;
    printf("EFF %s %.0f %.3f %.0f %.0f\n", system, grain_ns, eff, c2c_before, c2c_after);
    fflush(stdout);
    /* "Stays at 50% or more": after the first grain below, a smaller grain that happens to reach
     * 50% again (noise) is not the METG. */
    if (eff < 0.5) fell_below = 1;
    if (!fell_below) metg_ns = grain_ns, metg_eff = eff;
    if (eff < 0.25) break;
  }
  printf("METG %s %.0f %.3f\n", system, metg_ns, metg_eff);
  fflush(stdout);
}

#endif
