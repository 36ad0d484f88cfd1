/*
 * cholesky_omp: the tiled Cholesky of examples/cholesky.c with OpenMP tasks, for comparison.
 * Same matrix, tiling, kernels, op order and priorities (examples/cholesky_common.h); each op
 * is an `omp task` with depend(in:) on the tiles it reads and depend(inout:) on the one it
 * updates. One thread of a team of `--threads` creates the tasks (inside `omp single`) and
 * then runs tasks like the others, so all threads compute.
 *
 * Built twice from this source: with gcc against libgomp (system "gomp") and with clang against
 * LLVM's libomp (system "libomp"); CHOLESKY_OMP_SYSTEM names the build.
 *
 * Usage: cholesky_omp [--n N] [--tile T] [--threads T] [--reps R] [--warmup W] [--no-check]
 *                     [--prio none|critical|panel] [--trsm inverse|solve]
 * Prints CHOL <system> <n> <tile> <gflops> <seconds> (median of the reps). Timed: the parallel
 * region, from before its start to after its end (the team already exists: an untimed empty
 * region runs first). Task priorities need OMP_MAX_TASK_PRIORITY >= 1, which libgomp reads
 * only when it loads: when it is unset and priorities are asked for, the program sets it and
 * re-executes itself (see ensure_task_priorities).
 * Exit status: 0, or 1 when a potrf failed or the residual check failed.
 */
#define _GNU_SOURCE /* clock_gettime, setenv, strtok_r, aligned_alloc in C11 mode */
#include <omp.h>
#include <stdatomic.h>

#include "cholesky_common.h"

#ifndef CHOLESKY_OMP_SYSTEM
#define CHOLESKY_OMP_SYSTEM "omp"
#endif

/* The first failing potrf's info, 0 while none failed. */
static atomic_int potrf_failure;

typedef struct {
  const chol_matrix* matrix;
  chol_prio_scheme prio;
} spawner;

static void record_potrf(int info) {
  int none = 0;
  if (info != 0) atomic_compare_exchange_strong(&potrf_failure, &none, info);
}

/* Creates the op's task. The depend clauses name the first element of each tile, which stands
 * for the whole tile: each tile is only ever used as a whole. */
static int spawn_op(void* ctx, const chol_op* op) {
  const spawner* s = ctx;
  const chol_matrix* m = s->matrix;
  int mi = chol_rows(m, op->i), mj = chol_rows(m, op->j), nk = chol_rows(m, op->k);
  int priority = chol_op_priority(op, s->prio);
  double* akk = chol_tile(m, op->k, op->k);
  switch (op->kind) {
    case CHOL_POTRF:
#pragma omp task depend(inout : akk[0]) priority(priority)
      record_potrf(chol_potrf(akk, nk));
      break;
    case CHOL_TRSM: {
      double* aik = chol_tile(m, op->i, op->k);
#pragma omp task depend(in : akk[0]) depend(inout : aik[0]) priority(priority)
      chol_trsm(akk, aik, mi, nk);
      break;
    }
    case CHOL_SYRK: {
      double *aik = chol_tile(m, op->i, op->k), *aii = chol_tile(m, op->i, op->i);
#pragma omp task depend(in : aik[0]) depend(inout : aii[0]) priority(priority)
      chol_syrk(aik, aii, mi, nk);
      break;
    }
    case CHOL_GEMM: {
      double *aik = chol_tile(m, op->i, op->k), *ajk = chol_tile(m, op->j, op->k);
      double* aij = chol_tile(m, op->i, op->j);
#pragma omp task depend(in : aik[0], ajk[0]) depend(inout : aij[0]) priority(priority)
      chol_gemm(aik, ajk, aij, mi, mj, nk);
      break;
    }
  }
  return 0;
}

/* One factorization of the freshly filled matrix; returns its timing. */
static chol_timing factorize(chol_matrix* m, const chol_args* a) {
  chol_matrix_fill(m);
  spawner s = {m, a->prio};
  chol_timing start = chol_timing_start();
#pragma omp parallel num_threads(a->threads)
#pragma omp single
  chol_for_each_op(m->nt, spawn_op, &s);
  return chol_timing_stop(start);
}

/* libgomp reads OMP_MAX_TASK_PRIORITY once, when it loads, and ignores priority clauses while
 * it is 0 (the default): set it and start again, once (the variable then stays set). Without
 * /proc, the run goes on without priorities and says so. */
static void ensure_task_priorities(const chol_args* a, char** argv) {
  if (a->prio == CHOL_PRIO_NONE || getenv("OMP_MAX_TASK_PRIORITY")) return;
  setenv("OMP_MAX_TASK_PRIORITY", "1", 1);
  execv("/proc/self/exe", argv);
  perror("cholesky_omp: re-executing with OMP_MAX_TASK_PRIORITY=1");
}

int main(int argc, char** argv) {
  chol_args a = chol_parse_args(argc, argv, 3, 1, NULL, NULL);
  ensure_task_priorities(&a, argv);
  chol_blas_threads(1); /* one task = one thread */
  chol_matrix m = chol_matrix_alloc(a.n, a.tile);
  printf(
      "OpenMP (%s, max task priority %d): tiled Cholesky, N=%d, tile %d, %d threads, "
      "priorities: %s\n",
      CHOLESKY_OMP_SYSTEM, omp_get_max_task_priority(), a.n, a.tile, a.threads,
      chol_prio_name(a.prio));
  fflush(stdout);
#pragma omp parallel num_threads(a.threads)
  { /* creates the team outside the timing */
  }
  chol_timing* runs = chol_xmalloc((size_t)a.reps * sizeof *runs);
  for (int rep = -a.warmup; rep < a.reps; rep++) {
    chol_timing t = factorize(&m, &a);
    if (rep >= 0) runs[rep] = t;
  }
  int info = atomic_load(&potrf_failure);
  if (info != 0) fprintf(stderr, "cholesky_omp: potrf failed (info %d)\n", info);
  double median = info == 0 ? chol_summarize_runs(CHOLESKY_OMP_SYSTEM, &a, runs) : 0;
  int ok = info == 0 && (!a.check || chol_report_check(&m, a.threads));
  /* A wrong result prints no CHOL line: the suite then shows the failure, not a time. */
  if (ok) chol_print_result(CHOLESKY_OMP_SYSTEM, &a, median);
  free(runs);
  chol_matrix_free(&m);
  return ok ? 0 : 1;
}
