/*
 * cholesky_starpu: the tiled Cholesky of examples/cholesky.c on StarPU 1.3, for comparison.
 * Same matrix, tiling, kernels, op order and priorities (examples/cholesky_common.h); each
 * tile is a StarPU matrix handle, each op a starpu_task_insert with STARPU_R on the tiles it
 * reads and STARPU_RW on the one it updates. StarPU runs `--threads` CPU workers (no CUDA, no
 * OpenCL); the main thread only submits and waits, as in the ordo version.
 *
 * Usage: cholesky_starpu [--n N] [--tile T] [--threads T] [--reps R] [--warmup W] [--no-check]
 *                        [--prio none|critical|panel] [--trsm inverse|solve] [--sched LIST]
 * LIST: comma-separated scheduling policies, default eager,prio,lws,dmda,dmdas; each gets one
 * StarPU init (untimed), --warmup untimed and --reps timed factorizations, and one line
 *   CHOL starpu-<sched> <n> <tile> <gflops> <seconds>     (median of the reps)
 * Timed: from the first task insert to the return of starpu_task_wait_for_all. Tiles are
 * registered before and unregistered after each factorization, outside the timing, so the
 * program owns the data while it refills it. The history-based performance models that dmda
 * and dmdas need are calibrated by the warm-up runs and kept by StarPU in $STARPU_HOME/.starpu
 * (default: $HOME), so later runs start calibrated.
 * Exit status: 0, or 1 when a factorization failed or its residual check failed.
 */
#define _GNU_SOURCE /* clock_gettime, setenv, strtok_r, aligned_alloc in C11 mode */
#include <starpu.h>
#include <stdatomic.h>

#include "cholesky_common.h"
#include "starpu_common.h"

#define DEFAULT_SCHEDULERS "eager,prio,lws,dmda,dmdas"

/* The first failing potrf's info, 0 while none failed: a codelet has no other way to fail. */
static atomic_int potrf_failure;

static void potrf_cpu(void* buffers[], void* arg) {
  (void)arg;
  double* akk = (double*)STARPU_MATRIX_GET_PTR(buffers[0]);
  int info = chol_potrf(akk, (int)STARPU_MATRIX_GET_NX(buffers[0]));
  int none = 0;
  if (info != 0) atomic_compare_exchange_strong(&potrf_failure, &none, info);
}

static void trsm_cpu(void* buffers[], void* arg) {
  (void)arg;
  chol_trsm((const double*)STARPU_MATRIX_GET_PTR(buffers[1]),
            (double*)STARPU_MATRIX_GET_PTR(buffers[0]), (int)STARPU_MATRIX_GET_NX(buffers[0]),
            (int)STARPU_MATRIX_GET_NY(buffers[0]));
}

static void syrk_cpu(void* buffers[], void* arg) {
  (void)arg;
  chol_syrk((const double*)STARPU_MATRIX_GET_PTR(buffers[1]),
            (double*)STARPU_MATRIX_GET_PTR(buffers[0]), (int)STARPU_MATRIX_GET_NX(buffers[1]),
            (int)STARPU_MATRIX_GET_NY(buffers[1]));
}

static void gemm_cpu(void* buffers[], void* arg) {
  (void)arg;
  chol_gemm((const double*)STARPU_MATRIX_GET_PTR(buffers[1]),
            (const double*)STARPU_MATRIX_GET_PTR(buffers[2]),
            (double*)STARPU_MATRIX_GET_PTR(buffers[0]), (int)STARPU_MATRIX_GET_NX(buffers[1]),
            (int)STARPU_MATRIX_GET_NX(buffers[2]), (int)STARPU_MATRIX_GET_NY(buffers[1]));
}

/* History-based models: what dmda and dmdas schedule by; the other policies ignore them. */
static struct starpu_perfmodel potrf_model = {.type = STARPU_HISTORY_BASED,
                                              .symbol = "ordo_chol_potrf"};
static struct starpu_perfmodel trsm_model = {.type = STARPU_HISTORY_BASED,
                                             .symbol = "ordo_chol_trsm"};
static struct starpu_perfmodel syrk_model = {.type = STARPU_HISTORY_BASED,
                                             .symbol = "ordo_chol_syrk"};
static struct starpu_perfmodel gemm_model = {.type = STARPU_HISTORY_BASED,
                                             .symbol = "ordo_chol_gemm"};

/* Buffer 0 is always the tile the op updates; the tiles it reads follow, in the order
 * chol_op_inputs gives them. */
static struct starpu_codelet potrf_cl = {.cpu_funcs = {potrf_cpu},
                                         .nbuffers = 1,
                                         .modes = {STARPU_RW},
                                         .model = &potrf_model,
                                         .name = "potrf"};
static struct starpu_codelet trsm_cl = {.cpu_funcs = {trsm_cpu},
                                        .nbuffers = 2,
                                        .modes = {STARPU_RW, STARPU_R},
                                        .model = &trsm_model,
                                        .name = "trsm"};
static struct starpu_codelet syrk_cl = {.cpu_funcs = {syrk_cpu},
                                        .nbuffers = 2,
                                        .modes = {STARPU_RW, STARPU_R},
                                        .model = &syrk_model,
                                        .name = "syrk"};
static struct starpu_codelet gemm_cl = {.cpu_funcs = {gemm_cpu},
                                        .nbuffers = 3,
                                        .modes = {STARPU_RW, STARPU_R, STARPU_R},
                                        .model = &gemm_model,
                                        .name = "gemm"};

static struct starpu_codelet* codelet_for(chol_kind kind) {
  switch (kind) {
    case CHOL_POTRF:
      return &potrf_cl;
    case CHOL_TRSM:
      return &trsm_cl;
    case CHOL_SYRK:
      return &syrk_cl;
    case CHOL_GEMM:
      return &gemm_cl;
  }
  return NULL;
}

typedef struct {
  const chol_matrix* matrix;
  starpu_data_handle_t* handles; /* indexed like chol_matrix.tiles */
  chol_prio_scheme prio;
} submitter;

static int insert_op(void* ctx, const chol_op* op) {
  submitter* s = ctx;
  int nt = s->matrix->nt, rows[2], cols[2], out_row, out_col;
  int num_inputs = chol_op_inputs(op, rows, cols);
  chol_op_output(op, &out_row, &out_col);
  struct starpu_data_descr descrs[3];
  descrs[0] = (struct starpu_data_descr){s->handles[out_row * nt + out_col], STARPU_RW};
  for (int r = 0; r < num_inputs; r++) {
    descrs[1 + r] = (struct starpu_data_descr){s->handles[rows[r] * nt + cols[r]], STARPU_R};
  }
  int priority = chol_op_priority(op, s->prio) ? STARPU_MAX_PRIO : STARPU_DEFAULT_PRIO;
  int rc = starpu_task_insert(codelet_for(op->kind), STARPU_DATA_MODE_ARRAY, descrs, 1 + num_inputs,
                              STARPU_PRIORITY, priority, 0);
  if (rc != 0) fprintf(stderr, "cholesky_starpu: starpu_task_insert: %d\n", rc);
  return rc;
}

static void register_tiles(const chol_matrix* m, starpu_data_handle_t* handles) {
  for (int i = 0; i < m->nt; i++) {
    for (int j = 0; j <= i; j++) {
      /* A diagonal tile's handle covers its second half too: the inverse that potrf writes
       * and trsm reads under --trsm inverse (no codelet takes a size from a diagonal NY). */
      int rows = chol_rows(m, i), cols = chol_rows(m, j) * (i == j ? 2 : 1);
      starpu_matrix_data_register(&handles[i * m->nt + j], STARPU_MAIN_RAM,
                                  (uintptr_t)chol_tile(m, i, j), (uint32_t)rows, (uint32_t)rows,
                                  (uint32_t)cols, sizeof(double));
    }
  }
}

static void unregister_tiles(const chol_matrix* m, starpu_data_handle_t* handles) {
  for (int i = 0; i < m->nt; i++) {
    for (int j = 0; j <= i; j++) starpu_data_unregister(handles[i * m->nt + j]);
  }
}

/* One factorization of the freshly filled matrix into *time; returns 0 when a task could not
 * be inserted or a potrf failed, else 1. */
static int factorize(chol_matrix* m, starpu_data_handle_t* handles, chol_prio_scheme prio,
                     chol_timing* time) {
  chol_matrix_fill(m);
  register_tiles(m, handles);
  submitter s = {m, handles, prio};
  chol_timing start = chol_timing_start();
  int rc = chol_for_each_op(m->nt, insert_op, &s);
  starpu_task_wait_for_all();
  *time = chol_timing_stop(start);
  unregister_tiles(m, handles);
  int info = atomic_load(&potrf_failure);
  if (info != 0) fprintf(stderr, "cholesky_starpu: potrf failed (info %d)\n", info);
  return rc == 0 && info == 0;
}

static int start_starpu(const char* sched, int threads) {
  struct starpu_conf conf;
  starpu_conf_init(&conf);
  conf.precedence_over_environment_variables = 1; /* STARPU_SCHED, STARPU_NCPU: not these */
  conf.sched_policy_name = sched;
  conf.ncpus = threads;
  conf.ncuda = 0;
  conf.nopencl = 0;
  conf.nmic = 0;
  conf.nmpi_ms = 0;
  int rc = starpu_init(&conf);
  if (rc != 0) {
    fprintf(stderr, "cholesky_starpu: starpu_init(%s): %d\n", sched, rc);
    return 0;
  }
  if ((int)starpu_cpu_worker_get_count() != threads) {
    fprintf(stderr, "cholesky_starpu: StarPU started %u CPU workers, not %d; %s skipped\n",
            starpu_cpu_worker_get_count(), threads, sched);
    starpu_shutdown();
    return 0;
  }
  return 1;
}

/* Runs one policy: init, warm-ups, timed reps, the CHOL line, the check. Returns 1 when all
 * went well. */
static int run_policy(const char* sched, chol_matrix* m, starpu_data_handle_t* handles,
                      const chol_args* a) {
  if (!starpu_scheduler_exists(sched)) {
    fprintf(stderr, "cholesky_starpu: StarPU %d.%d has no scheduler '%s'\n", STARPU_MAJOR_VERSION,
            STARPU_MINOR_VERSION, sched);
    return 0;
  }
  if (!start_starpu(sched, a->threads)) return 0;
  chol_timing* runs = chol_xmalloc((size_t)a->reps * sizeof *runs);
  int ok = 1;
  for (int rep = -a->warmup; rep < a->reps && ok; rep++) {
    chol_timing t;
    ok = factorize(m, handles, a->prio, &t);
    if (rep >= 0) runs[rep] = t;
  }
  starpu_shutdown();
  if (ok) {
    char system[64];
    snprintf(system, sizeof system, "starpu-%s", sched);
    double median = chol_summarize_runs(system, a, runs);
    ok = !a->check || chol_report_check(m, a->threads);
    /* A wrong result prints no CHOL line: the suite then shows the failure, not a time. */
    if (ok) chol_print_result(system, a, median);
  }
  free(runs);
  return ok;
}

int main(int argc, char** argv) {
  chol_args a = chol_parse_args(argc, argv, 3, 1, "--sched", "--sched LIST");
  setenv("STARPU_SILENT", "1", 0); /* no banners; an explicit setting wins */
  chol_blas_threads(1);            /* one task = one thread */
  char* list = strdup(a.extra_value ? a.extra_value : DEFAULT_SCHEDULERS);
  chol_matrix m = chol_matrix_alloc(a.n, a.tile);
  starpu_data_handle_t* handles = chol_xmalloc((size_t)m.nt * m.nt * sizeof *handles);
  printf("StarPU %d.%d: tiled Cholesky, N=%d, tile %d, %d CPU workers, priorities: %s\n",
         STARPU_MAJOR_VERSION, STARPU_MINOR_VERSION, a.n, a.tile, a.threads,
         chol_prio_name(a.prio));
  fflush(stdout);
  int ok = 1;
  char* save = NULL;
  for (char* sched = strtok_r(list, ",", &save); sched; sched = strtok_r(NULL, ",", &save)) {
    ok &= run_policy(sched, &m, handles, &a);
  }
  free(handles);
  chol_matrix_free(&m);
  free(list);
  return ok ? 0 : 1;
}
