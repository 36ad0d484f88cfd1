/*
 * cholesky_kernels: the speed of each tiled-Cholesky kernel on its own, one thread, with its
 * tiles in cache ("hot": the same few tiles every call) and out of it ("cold": each call takes
 * its tiles at random from a pool as large as the whole matrix); both with the tiles' first
 * read (chol_warm) off, then "cold, read" with it on, as the Cholesky programs run. The kernels are
 * the ones every Cholesky program calls (examples/cholesky_common.h), so this says how fast a
 * perfect scheduler could factor: docs/PERFORMANCE.md reads the cap on the factorization off these
 * rates.
 *
 * Usage: cholesky_kernels [--n N] [--tile T] [--calls C]
 * Defaults: N 4096 (the pool: the matrix's lower tiles, N=4096 and tile 256 give 136 tiles,
 * 68 MB), tile 256, 200 calls per kernel and column. Prints a table, a line per kernel, in
 * GFLOP/s of the conventional flops (gemm 2 t^3, trsm and syrk t^3, potrf t^3/3; the inverse
 * that potrf computes for --trsm inverse is not counted, as in the factorization's rate).
 */
#define _GNU_SOURCE /* clock_gettime, aligned_alloc in C11 mode */
#include "cholesky_common.h"

typedef struct {
  int tile, calls;
  double** pool;   /* square tiles, each with room for an inverse after it (as diagonal tiles) */
  int pool_size;   /* at least 3 */
  double* initial; /* the SPD tile and its factor's inverse every pool tile starts as */
  unsigned seed;
} kernel_bench;

/* The kernels as one signature: the tile the op updates, then the tiles it reads (potrf reads
 * none, trsm and syrk one). */
typedef void (*kernel_fn)(kernel_bench* b, double* out, const double* in1, const double* in2);

static void run_gemm(kernel_bench* b, double* out, const double* in1, const double* in2) {
  chol_gemm(in1, in2, out, b->tile, b->tile, b->tile);
}
static void run_syrk(kernel_bench* b, double* out, const double* in1, const double* in2) {
  (void)in2;
  chol_syrk(in1, out, b->tile, b->tile);
}
static void run_trsm(kernel_bench* b, double* out, const double* in1, const double* in2) {
  (void)in2;
  chol_trsm(in1, out, b->tile, b->tile);
}
static void run_potrf(kernel_bench* b, double* out, const double* in1, const double* in2) {
  (void)in1, (void)in2;
  if (chol_potrf(out, b->tile) != 0) {
    fprintf(stderr, "cholesky_kernels: potrf failed on an SPD tile\n");
    exit(1);
  }
}

/* A diagonally dominant SPD tile in t, followed by its factor's inverse: a valid input of every
 * kernel (potrf factors it; its lower triangle is a well-conditioned factor for trsm). */
static void make_initial(double* t, int tile) {
  for (int c = 0; c < tile; c++) {
    for (int r = 0; r < tile; r++) t[(size_t)c * tile + r] = chol_entry(tile, r, c);
  }
  size_t count = (size_t)tile * tile;
  memcpy(t + count, t, count * sizeof *t);
  if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', tile, t + count, tile) != 0 ||
      chol_invert_lower(t + count, tile, tile) != 0) {
    fprintf(stderr, "cholesky_kernels: the test tile is not SPD\n");
    exit(1);
  }
}

static unsigned next_random(kernel_bench* b) {
  b->seed = b->seed * 1103515245u + 12345u;
  return b->seed >> 8;
}

/* GFLOP/s of `calls` calls of fn, on tiles 0, 1, 2 of the pool every time (hot) or on three
 * distinct tiles drawn at random (cold). After each call, outside the timing, the updated tile
 * gets its initial contents back: potrf needs an SPD tile, and repeated trsm would shrink it
 * into denormals. */
static double rate(kernel_bench* b, kernel_fn fn, double flops, int cold) {
  double seconds = 0;
  size_t tile_bytes = 2 * (size_t)b->tile * b->tile * sizeof(double);
  for (int call = 0; call < b->calls; call++) {
    int t[3] = {0, 1, 2};
    for (int i = 0; cold && i < 3; i++) {
      do t[i] = (int)(next_random(b) % (unsigned)b->pool_size);
      while ((i > 0 && t[i] == t[0]) || (i > 1 && t[i] == t[1]));
    }
    double* out = b->pool[t[0]];
    double t0 = chol_now_s();
    fn(b, out, b->pool[t[1]], b->pool[t[2]]);
    seconds += chol_now_s() - t0;
    memcpy(out, b->initial, tile_bytes);
  }
  return flops * b->calls / seconds * 1e-9;
}

static void report(kernel_bench* b, const char* name, kernel_fn fn, double flops) {
  chol_warm_tiles = 0;
  rate(b, fn, flops, 0); /* warm-up: OpenBLAS's buffers, page faults */
  double hot = rate(b, fn, flops, 0), cold = rate(b, fn, flops, 1);
  chol_warm_tiles = 1;
  double warmed = rate(b, fn, flops, 1);
  printf("  %-14s %8.1f %8.1f %12.1f\n", name, hot, cold, warmed);
  fflush(stdout);
}

int main(int argc, char** argv) {
  kernel_bench b = {.tile = 256, .calls = 200, .seed = 1};
  int n = 4096;
  for (int i = 1; i < argc; i += 2) {
    int* num = !strcmp(argv[i], "--n")       ? &n
               : !strcmp(argv[i], "--tile")  ? &b.tile
               : !strcmp(argv[i], "--calls") ? &b.calls
                                             : NULL;
    if (!num || i + 1 >= argc || !chol_parse_int(argv[i + 1], 1, num)) {
      fprintf(stderr, "usage: %s [--n N] [--tile T] [--calls C]\n", argv[0]);
      return 2;
    }
  }
  int nt = (n + b.tile - 1) / b.tile;
  b.pool_size = nt * (nt + 1) / 2 < 3 ? 3 : nt * (nt + 1) / 2;
  chol_blas_threads(1);
  b.pool = chol_xmalloc((size_t)b.pool_size * sizeof *b.pool);
  size_t bytes = 2 * (size_t)b.tile * b.tile * sizeof(double), padded = (bytes + 63) / 64 * 64;
  b.initial = chol_alloc_ok(aligned_alloc(64, padded), padded);
  make_initial(b.initial, b.tile);
  for (int i = 0; i < b.pool_size; i++) {
    b.pool[i] = chol_alloc_ok(aligned_alloc(64, padded), padded);
    memcpy(b.pool[i], b.initial, bytes);
  }
  double t3 = (double)b.tile * b.tile * b.tile;
  printf("Cholesky kernels, one thread, tile %d; hot: 3 tiles reused, cold: %d tiles (%.1f MB)\n",
         b.tile, b.pool_size, b.pool_size * (double)bytes / 2 / (1 << 20));
  printf("  %-14s %8s %8s %12s   (GFLOP/s)\n", "kernel", "hot", "cold", "cold, read");
  report(&b, "gemm", run_gemm, 2 * t3);
  report(&b, "syrk", run_syrk, t3);
  chol_trsm_mode = CHOL_TRSM_SOLVE;
  report(&b, "trsm-solve", run_trsm, t3);
  report(&b, "potrf", run_potrf, t3 / 3);
  chol_trsm_mode = CHOL_TRSM_INVERSE;
  report(&b, "trsm-inverse", run_trsm, t3);
  report(&b, "potrf+inverse", run_potrf, t3 / 3);
  for (int i = 0; i < b.pool_size; i++) free(b.pool[i]);
  free(b.pool);
  free(b.initial);
  return 0;
}
