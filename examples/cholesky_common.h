/*
 * cholesky_common.h: everything the three tiled Cholesky programs share, so that ordo
 * (examples/cholesky.c), StarPU (bench/cholesky_starpu.c) and OpenMP (bench/cholesky_omp.c)
 * factor the same matrix, with the same tiling, the same kernels, the same ops in the same
 * submission order and the same priorities, and are timed and checked the same way. Only the
 * runtime that orders the ops differs.
 *
 * The algorithm: right-looking tiled Cholesky, lower, A = L L^T. The matrix is stored as its
 * lower tiles only, each tile a separate column-major block (rows x cols, leading dimension =
 * rows). For each step k:
 *   potrf(k)      A_kk = chol(A_kk)                    reads -,          mutates A_kk
 *   trsm(i,k)     A_ik = A_ik L_kk^-T    (i > k)       reads A_kk,       mutates A_ik
 *   syrk(i,k)     A_ii -= A_ik A_ik^T    (i > k)       reads A_ik,       mutates A_ii
 *   gemm(i,j,k)   A_ij -= A_ik A_jk^T    (i > j > k)   reads A_ik, A_jk, mutates A_ij
 * Kernels are OpenBLAS (cblas_dtrmm or cblas_dtrsm, cblas_dsyrk, cblas_dgemm) and
 * LAPACKE_dpotrf/dtrtri, each run single-threaded: the runtime provides the parallelism, one op
 * per worker.
 *
 * trsm, two ways (--trsm): `inverse` (the default) has potrf(k) also invert its factor, into
 * the second half of the diagonal tile's storage, and every trsm(i,k) multiply by that inverse
 * (dtrmm), as MAGMA's GPU solvers do: at tile 256 OpenBLAS's dtrmm runs at about 45 GFLOP/s and
 * its dtrsm at 26, and the 120 trsms of N=4096 outweigh 16 inversions (ordo, 2 workers: time in
 * trsm 87 -> 50 ms, in potrf 4 -> 10 ms, the factorization 68-75 -> 80-82 GFLOP/s). The diagonal
 * tile's var (or StarPU handle) covers both halves, so no runtime needs to know. `solve` calls
 * dtrsm, the textbook kernel; it is the safer choice for an ill-conditioned matrix, whose explicit
 * inverse loses more accuracy than a solve (this program's matrix is diagonally dominant, and the
 * residual check guards both).
 *
 * Define _GNU_SOURCE before the first include of a program that includes it (clock_gettime,
 * setenv and strtok_r are POSIX, not C11).
 */
#ifndef ORDO_CHOLESKY_COMMON_H
#define ORDO_CHOLESKY_COMMON_H

#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------- */
/* Command line                                                                                */
/* ------------------------------------------------------------------------------------------- */

/* Which ops get a higher priority than the rest (see chol_op_priority). */
typedef enum { CHOL_PRIO_NONE, CHOL_PRIO_CRITICAL, CHOL_PRIO_PANEL } chol_prio_scheme;

/* How trsm(i,k) applies L_kk^-T (see the top of this file). */
typedef enum { CHOL_TRSM_INVERSE, CHOL_TRSM_SOLVE } chol_trsm_variant;

/* The variant every kernel call uses: set by chol_parse_args (--trsm), before any op runs, and
 * only read afterwards. A global rather than a chol_args field: the StarPU codelets have no other
 * way to learn it. */
static chol_trsm_variant chol_trsm_mode = CHOL_TRSM_INVERSE;

typedef struct {
  int n;                   /* matrix order */
  int tile;                /* tile order (the last row/column of tiles may be smaller) */
  int threads;             /* workers the runtime runs ops on */
  int reps;                /* timed factorizations; the median is reported */
  int warmup;              /* untimed factorizations before them */
  int check;               /* 0 with --no-check: skip the residual check */
  chol_prio_scheme prio;   /* --prio none|critical|panel */
  const char* extra_value; /* the value of the program's own flag (--trace, --sched), if given */
} chol_args;

static inline int chol_online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static inline void chol_usage(const char* prog, const char* extra_flag, const char* extra_help) {
  fprintf(stderr,
          "usage: %s [--n N] [--tile T] [--threads T] [--reps R] [--warmup W] [--no-check]\n"
          "          [--prio none|critical|panel] [--trsm inverse|solve]%s%s%s\n",
          prog, extra_flag ? " [" : "", extra_flag ? extra_help : "", extra_flag ? "]" : "");
  exit(2);
}

static inline int chol_parse_trsm(const char* s, chol_trsm_variant* out) {
  if (!strcmp(s, "inverse"))
    *out = CHOL_TRSM_INVERSE;
  else if (!strcmp(s, "solve"))
    *out = CHOL_TRSM_SOLVE;
  else
    return 0;
  return 1;
}

static inline int chol_parse_prio(const char* s, chol_prio_scheme* out) {
  if (!strcmp(s, "none"))
    *out = CHOL_PRIO_NONE;
  else if (!strcmp(s, "critical"))
    *out = CHOL_PRIO_CRITICAL;
  else if (!strcmp(s, "panel"))
    *out = CHOL_PRIO_PANEL;
  else
    return 0;
  return 1;
}

/* Parses a decimal integer in [min, 1000000] into *out; returns 0 when s is not one. */
static inline int chol_parse_int(const char* s, int min, int* out) {
  char* end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < min || v > 1000000) return 0;
  *out = (int)v;
  return 1;
}

/* Parses the shared flags plus at most one program-specific flag `extra_flag` taking a value
 * (e.g. "--trace" for ordo, "--sched" for StarPU; NULL for none). Defaults: N 4096, tile 256,
 * threads = online CPUs, the given reps and warm-ups, check on, critical-path priorities. --trsm
 * sets chol_trsm_mode (default: the inverse). */
static inline chol_args chol_parse_args(int argc, char** argv, int default_reps, int default_warmup,
                                        const char* extra_flag, const char* extra_help) {
  chol_args a = {.n = 4096,
                 .tile = 256,
                 .threads = chol_online_cpus(),
                 .reps = default_reps,
                 .warmup = default_warmup,
                 .check = 1,
                 .prio = CHOL_PRIO_CRITICAL,
                 .extra_value = NULL};
  for (int i = 1; i < argc; i++) {
    const char* f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int* num = !strcmp(f, "--n")         ? &a.n
               : !strcmp(f, "--tile")    ? &a.tile
               : !strcmp(f, "--threads") ? &a.threads
               : !strcmp(f, "--reps")    ? &a.reps
               : !strcmp(f, "--warmup")  ? &a.warmup
                                         : NULL;
    if (!strcmp(f, "--no-check")) {
      a.check = 0;
      continue;
    }
    if (!v) chol_usage(argv[0], extra_flag, extra_help);
    if (num) {
      int min = num == &a.warmup ? 0 : 1;
      if (!chol_parse_int(v, min, num)) chol_usage(argv[0], extra_flag, extra_help);
    } else if (!strcmp(f, "--prio")) {
      if (!chol_parse_prio(v, &a.prio)) chol_usage(argv[0], extra_flag, extra_help);
    } else if (!strcmp(f, "--trsm")) {
      if (!chol_parse_trsm(v, &chol_trsm_mode)) chol_usage(argv[0], extra_flag, extra_help);
    } else if (extra_flag && !strcmp(f, extra_flag)) {
      a.extra_value = v;
    } else {
      chol_usage(argv[0], extra_flag, extra_help);
    }
    i++;
  }
  if (a.tile > a.n) a.tile = a.n;
  return a;
}

static inline const char* chol_trsm_name(chol_trsm_variant t) {
  return t == CHOL_TRSM_INVERSE ? "inverse" : "solve";
}

static inline const char* chol_prio_name(chol_prio_scheme p) {
  return p == CHOL_PRIO_NONE ? "none" : p == CHOL_PRIO_CRITICAL ? "critical" : "panel";
}

/* Returns p, or exits with a message when an allocation of `bytes` gave NULL. */
static inline void* chol_alloc_ok(void* p, size_t bytes) {
  if (!p) {
    fprintf(stderr, "cholesky: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}
static inline void* chol_xmalloc(size_t bytes) {
  return chol_alloc_ok(malloc(bytes), bytes);
}

/* ------------------------------------------------------------------------------------------- */
/* Time and reporting                                                                          */
/* ------------------------------------------------------------------------------------------- */

static inline double chol_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The conventional Cholesky flop count, n^3/3 (lower-order terms left out, as everyone does). */
static inline double chol_gflops(int n, double seconds) {
  return (double)n * n * n / 3.0 / seconds * 1e-9;
}

static inline int chol_cmp_double(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

/* Sorts v in place and returns its median. */
static inline double chol_median(double* v, int count) {
  qsort(v, (size_t)count, sizeof *v, chol_cmp_double);
  return count % 2 ? v[count / 2] : (v[count / 2 - 1] + v[count / 2]) / 2;
}

/* Nanoseconds spent inside the kernels so far, summed over threads; every kernel adds its own
 * time (two clock reads per call of about a millisecond). */
static atomic_llong chol_kernel_ns;

static inline long long chol_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static inline void chol_count_kernel_since(long long start_ns) {
  atomic_fetch_add_explicit(&chol_kernel_ns, chol_now_ns() - start_ns, memory_order_relaxed);
}

/* One timed factorization: wall-clock seconds; the process's CPU seconds over the same span
 * (their ratio is how many cores the run really had: on a shared machine that can be fewer than
 * its threads, and then its time says more about the neighbours than about the runtime); and
 * the seconds spent in kernels, summed over threads (divided by threads x wall, the share of
 * the workers' time that went into kernels rather than waiting or scheduling). */
typedef struct {
  double wall, cpu, kernel;
} chol_timing;

static inline double chol_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double chol_kernel_s(void) {
  return 1e-9 * (double)atomic_load(&chol_kernel_ns);
}

static inline chol_timing chol_timing_start(void) {
  chol_timing t = {chol_now_s(), chol_cpu_s(), chol_kernel_s()};
  return t;
}

/* The time since `start`. */
static inline chol_timing chol_timing_stop(chol_timing start) {
  chol_timing t = {chol_now_s() - start.wall, chol_cpu_s() - start.cpu,
                   chol_kernel_s() - start.kernel};
  return t;
}

/* Prints a readable summary of the timed runs (median and best time; medians of the cores the
 * process had and of the workers' share of time in kernels) and returns the median wall time,
 * the number the CHOL line reports. */
static inline double chol_summarize_runs(const char* system, const chol_args* a,
                                         const chol_timing* runs) {
  double* wall = (double*)chol_xmalloc((size_t)a->reps * sizeof *wall);
  double* cores = (double*)chol_xmalloc((size_t)a->reps * sizeof *cores);
  double* in_kernels = (double*)chol_xmalloc((size_t)a->reps * sizeof *in_kernels);
  for (int r = 0; r < a->reps; r++) {
    wall[r] = runs[r].wall;
    cores[r] = runs[r].cpu / runs[r].wall;
    in_kernels[r] = runs[r].kernel / (a->threads * runs[r].wall);
  }
  double median = chol_median(wall, a->reps), best = wall[0];
  printf(
      "%s: %.3f s, %.1f GFLOP/s (median of %d after %d warm-up%s; best %.3f s, %.1f GFLOP/s); "
      "%.2f cores busy, workers in kernels %.0f%% of the time\n",
      system, median, chol_gflops(a->n, median), a->reps, a->warmup, a->warmup == 1 ? "" : "s",
      best, chol_gflops(a->n, best), chol_median(cores, a->reps),
      100 * chol_median(in_kernels, a->reps));
  fflush(stdout);
  free(wall);
  free(cores);
  free(in_kernels);
  return median;
}

/* The machine-readable line the bench driver collects. */
static inline void chol_print_result(const char* system, const chol_args* a, double seconds) {
  printf("CHOL %s %d %d %.2f %.4f\n", system, a->n, a->tile, chol_gflops(a->n, seconds), seconds);
  fflush(stdout);
}

/* ------------------------------------------------------------------------------------------- */
/* BLAS threading                                                                              */
/* ------------------------------------------------------------------------------------------- */

/* Sets OpenBLAS's thread count and returns the count it took. 1 must take: then every BLAS call
 * runs entirely on the calling thread (OpenBLAS splits a call only when its thread count is
 * above 1), which is what running one op per worker requires; more would oversubscribe the
 * cores. More than 1 may be capped (OpenBLAS is built for at most some number of threads, 64 in
 * Debian's): the residual check and the dgemm reference then run on fewer, and say so. */
static inline int chol_blas_threads(int threads) {
  openblas_set_num_threads(threads);
  int got = openblas_get_num_threads();
  if (threads == 1 && got != 1) {
    fprintf(stderr, "cholesky: OpenBLAS runs %d threads, asked for 1\n", got);
    exit(1);
  }
  if (got != threads) {
    fprintf(stderr, "cholesky: OpenBLAS runs at most %d threads; asked for %d, using %d\n", got,
            threads, got);
  }
  return got;
}

/* ------------------------------------------------------------------------------------------- */
/* The tiled matrix                                                                            */
/* ------------------------------------------------------------------------------------------- */

typedef struct {
  int n, tile, nt; /* order, tile order, tiles per side */
  double** tiles;  /* lower tiles, tiles[i * nt + j] for i >= j; NULL above the diagonal; a
                      diagonal tile has room for two: the tile, then its factor's inverse */
} chol_matrix;

/* Rows (or columns) of the tiles in tile row (or column) i: `tile`, except for a ragged last. */
static inline int chol_rows(const chol_matrix* m, int i) {
  int left = m->n - i * m->tile;
  return left < m->tile ? left : m->tile;
}

static inline double* chol_tile(const chol_matrix* m, int i, int j) {
  return m->tiles[i * m->nt + j];
}

static inline chol_matrix chol_matrix_alloc(int n, int tile) {
  chol_matrix m = {n, tile, (n + tile - 1) / tile, NULL};
  size_t slots = (size_t)m.nt * m.nt;
  m.tiles = (double**)chol_alloc_ok(calloc(slots, sizeof *m.tiles), slots * sizeof *m.tiles);
  for (int i = 0; i < m.nt; i++) {
    for (int j = 0; j <= i; j++) {
      size_t bytes = (size_t)chol_rows(&m, i) * chol_rows(&m, j) * sizeof(double);
      if (i == j) bytes *= 2; /* the inverse of L_ii follows the tile (--trsm inverse) */
      /* Cache-line aligned so no two tiles share a line (two workers write them at once). */
      size_t padded = (bytes + 63) / 64 * 64;
      m.tiles[i * m.nt + j] = (double*)chol_alloc_ok(aligned_alloc(64, padded), padded);
    }
  }
  return m;
}

static inline void chol_matrix_free(chol_matrix* m) {
  for (int i = 0; i < m->nt * m->nt; i++) free(m->tiles[i]);
  free(m->tiles);
  m->tiles = NULL;
}

/* Entry (r, c) of the test matrix, any r, c: symmetric by construction (a hash of the unordered
 * pair, uniform in [0, 1)) with n added on the diagonal, so every row is strictly diagonally
 * dominant with a positive diagonal, hence symmetric positive definite. Computed, not stored,
 * so the residual check can regenerate A after it has been overwritten by L. */
static inline double chol_entry(int n, int r, int c) {
  uint64_t lo = (uint64_t)(r < c ? r : c), hi = (uint64_t)(r < c ? c : r);
  uint64_t x = (hi << 32 | lo) + 0x9E3779B97F4A7C15ull; /* splitmix64 */
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  double u = (double)(x >> 11) * 0x1.0p-53;
  return r == c ? u + n : u;
}

/* Writes A into the lower tiles (overwriting a previous factorization). */
static inline void chol_matrix_fill(chol_matrix* m) {
  for (int ti = 0; ti < m->nt; ti++) {
    for (int tj = 0; tj <= ti; tj++) {
      double* t = chol_tile(m, ti, tj);
      int rows = chol_rows(m, ti), cols = chol_rows(m, tj);
      for (int c = 0; c < cols; c++) {
        for (int r = 0; r < rows; r++) {
          t[(size_t)c * rows + r] = chol_entry(m->n, ti * m->tile + r, tj * m->tile + c);
        }
      }
    }
  }
}

/* ------------------------------------------------------------------------------------------- */
/* The ops                                                                                     */
/* ------------------------------------------------------------------------------------------- */

typedef enum { CHOL_POTRF, CHOL_TRSM, CHOL_SYRK, CHOL_GEMM } chol_kind;

/* One op of the factorization; which fields mean what is in the table at the top. */
typedef struct {
  chol_kind kind;
  int i, j, k;
} chol_op;

/* The tile an op mutates, as (row, col) of tiles. */
static inline void chol_op_output(const chol_op* op, int* row, int* col) {
  *row = op->i;
  *col = op->kind == CHOL_SYRK ? op->i : op->j;
}

/* The tiles an op reads (0 to 2), as (row, col) pairs in rows[]/cols[]; returns how many. */
static inline int chol_op_inputs(const chol_op* op, int rows[2], int cols[2]) {
  switch (op->kind) {
    case CHOL_POTRF:
      return 0;
    case CHOL_TRSM:
      rows[0] = op->k, cols[0] = op->k;
      return 1;
    case CHOL_SYRK:
      rows[0] = op->i, cols[0] = op->k;
      return 1;
    case CHOL_GEMM:
      rows[0] = op->i, cols[0] = op->k;
      rows[1] = op->j, cols[1] = op->k;
      return 2;
  }
  return 0;
}

static inline void chol_op_name(const chol_op* op, char* buf, size_t cap) {
  switch (op->kind) {
    case CHOL_POTRF:
      snprintf(buf, cap, "potrf(%d)", op->k);
      break;
    case CHOL_TRSM:
      snprintf(buf, cap, "trsm(%d,%d)", op->i, op->k);
      break;
    case CHOL_SYRK:
      snprintf(buf, cap, "syrk(%d,%d)", op->i, op->k);
      break;
    case CHOL_GEMM:
      snprintf(buf, cap, "gemm(%d,%d,%d)", op->i, op->j, op->k);
      break;
  }
}

/* Whether an op gets the higher priority (1 rather than 0) under a scheme:
 *   critical  the critical path, as StarPU's own Cholesky example: potrf(k), trsm(k+1,k),
 *             syrk(k+1,k) (the chain that leads to potrf(k+1));
 *   panel     those plus every trsm and the gemms that update the next panel column
 *             (gemm(i,k+1,k)), so the next step's panel is ready as early as possible;
 *   none      all 0.
 * Two levels only: each runtime maps 1 to its top priority and 0 to its default. */
static inline int chol_op_priority(const chol_op* op, chol_prio_scheme scheme) {
  if (scheme == CHOL_PRIO_NONE) return 0;
  int next = op->k + 1;
  int critical = op->kind == CHOL_POTRF || (op->kind == CHOL_TRSM && op->i == next) ||
                 (op->kind == CHOL_SYRK && op->i == next);
  if (scheme == CHOL_PRIO_CRITICAL) return critical;
  return critical || op->kind == CHOL_TRSM || (op->kind == CHOL_GEMM && op->j == next);
}

/* Inverts the lower triangular n x n matrix at l (leading dimension ld) in place, recursively:
 * inv([A 0; B C]) = [inv(A) 0; -inv(C) B inv(A), inv(C)], two half-size inversions and two
 * dtrmm. LAPACK's dtrtri at 256 took 0.60 ms on this machine against 0.24 ms for this (leaves
 * of 32 and below go to dtrtri). Returns dtrtri's info: > 0 when a diagonal entry is zero. */
#define CHOL_INVERT_LEAF 32
static inline int chol_invert_lower(double* l, int n, int ld) {
  if (n <= CHOL_INVERT_LEAF) return LAPACKE_dtrtri(LAPACK_COL_MAJOR, 'L', 'N', n, l, ld);
  int n1 = n / 2, n2 = n - n1;
  double *a = l, *b = l + n1, *c = l + (size_t)n1 * ld + n1;
  int info = chol_invert_lower(a, n1, ld);
  if (info != 0) return info;
  info = chol_invert_lower(c, n2, ld);
  if (info != 0) return info > 0 ? n1 + info : info; /* C's diagonal starts at n1 */
  cblas_dtrmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, n2, n1, 1.0, a, ld,
              b, ld);
  cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n2, n1, -1.0, c, ld,
              b, ld);
  return 0;
}

/* Whether each kernel first reads its tiles (chol_warm). On in every Cholesky program;
 * bench/cholesky_kernels turns it off to measure what it is worth. Set before any op runs. */
static int chol_warm_tiles = 1;

/* Where chol_warm leaves its sum, so that the loads cannot be optimized away; per thread, so
 * that workers warming tiles at once do not share (or race on) a line. */
static _Thread_local volatile double chol_warm_sink;

/* Reads one double of every cache line of a tile (`count` doubles), eight independent loads
 * per step. Why: OpenBLAS's dgemm at tile 256 runs at 48-51 GFLOP/s on three tiles it has just
 * used (1.5 MB, in this core's 1 MB L2 and the shared L3) but at 38-40 on tiles from memory
 * (the factorization's usual case: 68 MB of tiles, 32 MB of L3), as its packing and its C
 * updates wait on one miss after another. A plain streaming
 * read first, at full memory-level parallelism, brings a tile in for 10-20 us of the
 * op's 700-800: cold dgemm 37.8 -> 45.1 GFLOP/s including the read (5 runs each), and the
 * factorization 75.6-83.8 -> 80.5-85.7 GFLOP/s (6 alternated pairs). */
static inline void chol_warm(const double* t, size_t count) {
  if (!chol_warm_tiles) return;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  size_t i = 0;
  for (; i + 64 <= count; i += 64) {
    s0 += t[i], s1 += t[i + 8], s2 += t[i + 16], s3 += t[i + 24];
    s4 += t[i + 32], s5 += t[i + 40], s6 += t[i + 48], s7 += t[i + 56];
  }
  for (; i < count; i += 8) s0 += t[i];
  chol_warm_sink = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

/* The kernels, on raw tiles (column-major, leading dimension = rows), as every runtime calls
 * them: ordo and OpenMP with the matrix's tile pointers, StarPU with its codelet buffers. Sizes:
 * mi rows of the output (and of A_ik), mj rows of A_jk, nk the order of A_kk. A diagonal tile
 * is followed by room for its factor's inverse (chol_matrix_alloc), which potrf fills and trsm
 * reads under --trsm inverse. Each kernel reads its tiles first (chol_warm), inside its timing. */
static inline size_t chol_inverse_offset(int nk) {
  return (size_t)nk * nk;
}
static inline int chol_potrf(double* akk, int nk) {
  long long t0 = chol_now_ns();
  chol_warm(akk, (size_t)nk * nk);
  int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', nk, akk, nk);
  if (info == 0 && chol_trsm_mode == CHOL_TRSM_INVERSE) {
    double* inverse = akk + chol_inverse_offset(nk);
    memcpy(inverse, akk, (size_t)nk * nk * sizeof *inverse);
    info = chol_invert_lower(inverse, nk, nk);
  }
  chol_count_kernel_since(t0);
  return info;
}
static inline void chol_trsm(const double* lkk, double* aik, int mi, int nk) {
  long long t0 = chol_now_ns();
  int inverse = chol_trsm_mode == CHOL_TRSM_INVERSE;
  const double* factor = inverse ? lkk + chol_inverse_offset(nk) : lkk;
  chol_warm(factor, (size_t)nk * nk);
  chol_warm(aik, (size_t)mi * nk);
  if (inverse) {
    cblas_dtrmm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, mi, nk, 1.0,
                factor, nk, aik, mi);
  } else {
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, mi, nk, 1.0,
                factor, nk, aik, mi);
  }
  chol_count_kernel_since(t0);
}
static inline void chol_syrk(const double* aik, double* aii, int mi, int nk) {
  long long t0 = chol_now_ns();
  chol_warm(aik, (size_t)mi * nk);
  chol_warm(aii, (size_t)mi * mi);
  cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, mi, nk, -1.0, aik, mi, 1.0, aii, mi);
  chol_count_kernel_since(t0);
}
static inline void chol_gemm(const double* aik, const double* ajk, double* aij, int mi, int mj,
                             int nk) {
  long long t0 = chol_now_ns();
  chol_warm(aik, (size_t)mi * nk);
  chol_warm(ajk, (size_t)mj * nk);
  chol_warm(aij, (size_t)mi * mj);
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, mi, mj, nk, -1.0, aik, mi, ajk, mj, 1.0, aij,
              mi);
  chol_count_kernel_since(t0);
}

/* Runs the op's kernel on the matrix's tiles. Returns 0, or LAPACKE's info for a potrf that
 * failed (> 0: the leading minor of that order is not positive definite). */
static inline int chol_op_run(const chol_matrix* m, const chol_op* op) {
  int mi = chol_rows(m, op->i), nk = chol_rows(m, op->k);
  switch (op->kind) {
    case CHOL_POTRF:
      return chol_potrf(chol_tile(m, op->k, op->k), nk);
    case CHOL_TRSM:
      chol_trsm(chol_tile(m, op->k, op->k), chol_tile(m, op->i, op->k), mi, nk);
      return 0;
    case CHOL_SYRK:
      chol_syrk(chol_tile(m, op->i, op->k), chol_tile(m, op->i, op->i), mi, nk);
      return 0;
    case CHOL_GEMM:
      chol_gemm(chol_tile(m, op->i, op->k), chol_tile(m, op->j, op->k), chol_tile(m, op->i, op->j),
                mi, chol_rows(m, op->j), nk);
      return 0;
  }
  return 0;
}

/* Calls visit(ctx, &op) for every op of the factorization of an nt x nt tile matrix, in the
 * submission order every runtime uses (the sequential right-looking loop). Stops early and
 * returns visit's value when it is non-zero; 0 otherwise. */
typedef int (*chol_visit_fn)(void* ctx, const chol_op* op);
static inline int chol_for_each_op(int nt, chol_visit_fn visit, void* ctx) {
  for (int k = 0; k < nt; k++) {
    chol_op potrf = {CHOL_POTRF, k, k, k};
    int rc = visit(ctx, &potrf);
    for (int i = k + 1; i < nt && !rc; i++) {
      chol_op trsm = {CHOL_TRSM, i, k, k};
      rc = visit(ctx, &trsm);
    }
    for (int i = k + 1; i < nt && !rc; i++) {
      chol_op syrk = {CHOL_SYRK, i, i, k};
      rc = visit(ctx, &syrk);
      for (int j = k + 1; j < i && !rc; j++) {
        chol_op gemm = {CHOL_GEMM, i, j, k};
        rc = visit(ctx, &gemm);
      }
    }
    if (rc) return rc;
  }
  return 0;
}

/* How many ops chol_for_each_op visits. */
static inline long chol_op_count(int nt) {
  long count = 0;
  for (int k = 0; k < nt; k++) {
    long below = nt - 1 - k;
    count += 1 + below + below + below * (below - 1) / 2;
  }
  return count;
}

/* ------------------------------------------------------------------------------------------- */
/* Checking the result                                                                         */
/* ------------------------------------------------------------------------------------------- */

/* Copies the factor L out of the tiles into a dense column-major n x n matrix with zeros above
 * the diagonal (potrf leaves the diagonal tiles' upper triangles untouched, i.e. still A). */
static inline double* chol_dense_factor(const chol_matrix* m) {
  size_t n = (size_t)m->n;
  double* l = (double*)chol_alloc_ok(calloc(n * n, sizeof(double)), n * n * sizeof(double));
  for (int ti = 0; ti < m->nt; ti++) {
    for (int tj = 0; tj <= ti; tj++) {
      const double* t = chol_tile(m, ti, tj);
      int rows = chol_rows(m, ti), cols = chol_rows(m, tj);
      for (int c = 0; c < cols; c++) {
        int first = ti == tj ? c : 0;
        size_t col = (size_t)tj * m->tile + c, row0 = (size_t)ti * m->tile;
        memcpy(&l[col * n + row0 + first], &t[(size_t)c * rows + first],
               (size_t)(rows - first) * sizeof *t);
      }
    }
  }
  return l;
}

/* ||A - L L^T||_F / ||A||_F, with L L^T computed by one dsyrk on `threads` OpenBLAS threads
 * (set back to 1 afterwards). Both matrices are symmetric, so only the lower triangle is
 * summed, off-diagonal entries counted twice. */
static inline double chol_residual(const chol_matrix* m, int threads) {
  size_t n = (size_t)m->n;
  double* l = chol_dense_factor(m);
  double* llt = (double*)chol_xmalloc(n * n * sizeof *llt);
  chol_blas_threads(threads);
  cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, m->n, m->n, 1.0, l, m->n, 0.0, llt, m->n);
  chol_blas_threads(1);
  double diff = 0, norm = 0;
  for (size_t c = 0; c < n; c++) {
    for (size_t r = c; r < n; r++) {
      double a = chol_entry(m->n, (int)r, (int)c), d = llt[c * n + r] - a;
      double weight = r == c ? 1.0 : 2.0;
      diff += weight * d * d;
      norm += weight * a * a;
    }
  }
  free(l);
  free(llt);
  return sqrt(diff) / sqrt(norm);
}

/* LAPACK's own acceptance test for a Cholesky factorization: the residual divided by n * eps
 * must stay below 30 (xPOT01 in LAPACK's test suite). Any wrong ordering of the ops gives a
 * residual of order 1, far above it. */
static inline int chol_residual_ok(double residual, int n) {
  return residual / ((double)n * DBL_EPSILON) < 30.0;
}

/* Prints the verdict; returns 1 when it passed. */
static inline int chol_report_check(const chol_matrix* m, int threads) {
  double t0 = chol_now_s();
  double residual = chol_residual(m, threads);
  int ok = chol_residual_ok(residual, m->n);
  printf("check: ||A - L L^T||_F / ||A||_F = %.3e (%.3g n eps; limit 30) in %.2f s: %s\n", residual,
         residual / ((double)m->n * DBL_EPSILON), chol_now_s() - t0, ok ? "PASS" : "FAIL");
  fflush(stdout);
  return ok;
}

/* ------------------------------------------------------------------------------------------- */
/* The dgemm reference                                                                         */
/* ------------------------------------------------------------------------------------------- */

/* OpenBLAS dgemm rate in GFLOP/s on size x size x size with `threads` threads: the best of
 * three calls after one warm-up, the ceiling the factorization's kernels can reach. Sets
 * OpenBLAS back to 1 thread. */
static inline double chol_dgemm_rate(int size, int threads) {
  size_t n = (size_t)size;
  double* a = (double*)chol_xmalloc(n * n * sizeof *a);
  double* b = (double*)chol_xmalloc(n * n * sizeof *b);
  double* c = (double*)chol_xmalloc(n * n * sizeof *c);
  for (size_t i = 0; i < n * n; i++) a[i] = b[i] = c[i] = 1.0 / (double)(1 + i % 7);
  chol_blas_threads(threads);
  double best = 1e30;
  for (int rep = 0; rep < 4; rep++) {
    double t0 = chol_now_s();
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0, a, size, b, size,
                0.0, c, size);
    double t = chol_now_s() - t0;
    if (rep > 0 && t < best) best = t;
  }
  chol_blas_threads(1);
  free(a);
  free(b);
  free(c);
  return 2.0 * size * size * (double)size / best * 1e-9;
}

#endif /* ORDO_CHOLESKY_COMMON_H */
