/*
 * pipeline_ordo: ordo's side of workload P (bench/pipeline_common.h): a serial-parallel-serial
 * pipeline with empty stages, through ordo_pipeline_run on the default (per_device) engine.
 * Exits non-zero only when an ordo call fails.
 *
 * Usage: pipeline_ordo [--ops TOKENS] [--reps R] [--threads T]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ordo/ordo.h>

#include "pipeline_common.h"

typedef struct {
  ordo_engine* e;
  ordo_pipeline* by_lines[PIPELINE_NUM_LINE_COUNTS];
  uint64_t stop; /* read by pipe 0 only */
} bench;

static int32_t source(ordo_pipeflow* pf, void* user_data) {
  const bench* b = user_data;
  return ordo_pipeflow_token(pf) == b->stop ? ordo_pipeflow_stop(pf) : 0;
}

static int32_t empty(ordo_pipeflow* pf, void* user_data) {
  (void)pf;
  (void)user_data;
  return 0;
}

static void die(const char* what) {
  fprintf(stderr, "pipeline_ordo: %s: %s\n", what, ordo_last_error_message());
  exit(1);
}

static void run(void* ctx, unsigned lines, size_t tokens) {
  bench* b = ctx;
  ordo_pipeline* p = b->by_lines[lines == pipeline_lines[0] ? 0 : 1];
  if (ordo_pipeline_reset(p) != ORDO_OK) die("ordo_pipeline_reset");
  b->stop = tokens;
  if (ordo_pipeline_run(p) != ORDO_OK) die("ordo_pipeline_run");
}

int main(int argc, char** argv) {
  bench_args a = pipeline_parse_args(argc, argv);
  bench b = {0};
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.cpu_threads = a.threads;
  if (ordo_engine_create(&cfg, &b.e) != ORDO_OK) die("ordo_engine_create");
  ordo_pipe pipes[3] = {{ORDO_PIPE_SERIAL, source, &b},
                        {ORDO_PIPE_PARALLEL, empty, NULL},
                        {ORDO_PIPE_SERIAL, empty, NULL}};
  for (int i = 0; i < PIPELINE_NUM_LINE_COUNTS; i++) {
    if (ordo_pipeline_create(b.e, pipeline_lines[i], pipes, 3, &b.by_lines[i]) != ORDO_OK) {
      die("ordo_pipeline_create");
    }
  }
  fprintf(stderr, "pipeline_ordo: %zu tokens, %d reps, %d workers\n", a.ops, a.reps, a.threads);
  for (int i = 0; i < PIPELINE_NUM_LINE_COUNTS; i++) {
    pipeline_measure("ordo", &a, pipeline_lines[i], run, &b);
  }
  for (int i = 0; i < PIPELINE_NUM_LINE_COUNTS; i++) ordo_pipeline_destroy(b.by_lines[i]);
  ordo_engine_destroy(b.e);
  return 0;
}
