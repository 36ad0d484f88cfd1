/*
 * pipeline_common.h: what the pipeline benchmarks share (pipeline_ordo.c, pipeline_tbb.cpp), so
 * that ordo and oneTBB run the same pipeline, are timed the same way and report the same line.
 *
 * The pipeline (workload P of `make bench`): 3 pipes, serial-in-order / parallel /
 * serial-in-order, with empty stages, so that what is measured is the pipeline machinery per
 * token: handing a token from stage to stage and from line to line. Each system runs it on 2
 * and on 4 lines (oneTBB: max_number_of_live_tokens), for --ops tokens, an untimed warm-up of
 * ops/10 tokens first, then --reps timed runs.
 *
 * Flags: --ops N (tokens per run, default 1,000,000), --reps R (default 5), --threads T (worker
 * threads, default 2; ordo: the engine's CPU workers, the calling thread waits beside them;
 * oneTBB: T threads in all, the calling thread being one of them, as in bench_tbb.cpp).
 * Output, one line per number of lines:
 *   PIPE <system> <lines> <median_ns_per_token> <min> <max>
 * bench/compare.py adds tokens per second (1e9 / ns per token) and the ratio to ordo.
 */
#ifndef ORDO_BENCH_PIPELINE_COMMON_H
#define ORDO_BENCH_PIPELINE_COMMON_H

#include "bench_common.h"

static const unsigned pipeline_lines[] = {2, 4};
#define PIPELINE_NUM_LINE_COUNTS 2

/* bench_common.h's flags, without --only (the program runs one workload). */
static inline bench_args pipeline_parse_args(int argc, char** argv) {
  bench_args a;
  a.ops = 1000000;
  a.reps = 5;
  a.threads = 2;
  a.only[0] = 0;
  for (int i = 1; i < argc; i += 2) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--ops") && v) {
      a.ops = (size_t)bench_number(argv[0], v, 100, BENCH_MAX_OPS);
    } else if (!strcmp(argv[i], "--reps") && v) {
      a.reps = (int)bench_number(argv[0], v, 1, BENCH_MAX_REPS);
    } else if (!strcmp(argv[i], "--threads") && v) {
      a.threads = (int)bench_number(argv[0], v, 1, BENCH_MAX_THREADS);
    } else {
      fprintf(stderr, "usage: %s [--ops TOKENS] [--reps R] [--threads T]\n", argv[0]);
      exit(2);
    }
  }
  return a;
}

/* Runs `run(ctx, lines, tokens)` (one whole pipeline run, returning when every token is out)
 * once untimed with tokens/10, then reps times timed; prints the PIPE line. */
typedef void (*pipeline_run_fn)(void* ctx, unsigned lines, size_t tokens);
static inline void pipeline_measure(const char* system, const bench_args* a, unsigned lines,
                                    pipeline_run_fn run, void* ctx) {
  double v[BENCH_MAX_REPS];
  run(ctx, lines, a->ops / 10);
  for (int r = 0; r < a->reps; r++) {
    uint64_t t0 = bench_now_ns();
    run(ctx, lines, a->ops);
    v[r] = (double)(bench_now_ns() - t0) / (double)a->ops;
  }
  qsort(v, (size_t)a->reps, sizeof v[0], bench_cmp_double);
  int n = a->reps;
  double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  printf("PIPE %s %u %.1f %.1f %.1f\n", system, lines, median, v[0], v[n - 1]);
  fflush(stdout);
}

#endif
