/*
 * A consumer of the installed ordo: built by tests/install_consumer.sh with
 *   cc -std=c99 -pedantic -Wall -Werror $(pkg-config --cflags ordo) consumer.c $(pkg-config --libs
 * ordo) It creates an engine and a var, pushes 100 ops that each increment a counter the var stands
 * for, waits, runs a 2-pipe pipeline of 10 tokens (the installed ordo/pipeline.h), and prints
 * "consumer: counter=100 version=<library version>". Exits non-zero on any mismatch or failed
 * call.
 */
#include <ordo/ordo.h>
#include <ordo/pipeline.h>
#include <stdio.h>
#include <string.h>

#define N_OPS 100

typedef struct counter {
  long value;
} counter;

static int32_t increment(ordo_exec* exec, void* user_data) {
  counter* c = (counter*)user_data;
  (void)exec;
  c->value++;
  return 0;
}

static int32_t source(ordo_pipeflow* pf, void* user_data) {
  (void)user_data;
  return ordo_pipeflow_token(pf) == 10 ? ordo_pipeflow_stop(pf) : 0;
}

static int32_t count_token(ordo_pipeflow* pf, void* user_data) {
  (void)pf;
  ((counter*)user_data)->value++;
  return 0;
}

static int check(ordo_status st, const char* what) {
  if (st != ORDO_OK) {
    fprintf(stderr, "consumer: %s failed: %s (%s)\n", what, ordo_status_string(st),
            ordo_last_error_message());
    return 0;
  }
  return 1;
}

int main(void) {
  ordo_engine* e = NULL;
  ordo_engine_config cfg;
  ordo_var v = 0;
  counter c;
  int i;
  int ok = 1;

  c.value = 0;
  if (ordo_version() != (uint32_t)ORDO_VERSION_NUMBER) {
    fprintf(stderr, "consumer: library version %u, header version %u\n", (unsigned)ordo_version(),
            (unsigned)ORDO_VERSION_NUMBER);
    return 1;
  }
  ordo_engine_config_init(&cfg);
  cfg.cpu_threads = 2;
  if (!check(ordo_engine_create(&cfg, &e), "ordo_engine_create")) return 1;
  if (!check(ordo_var_new(e, &v), "ordo_var_new")) return 1;
  for (i = 0; i < N_OPS && ok; i++) {
    ok = check(ordo_opr_push(e, increment, &c, NULL, 0, &v, 1, NULL), "ordo_opr_push");
  }
  ok = ok && check(ordo_wait_for_var(e, v), "ordo_wait_for_var");
  ok = ok && check(ordo_wait_for_all(e), "ordo_wait_for_all");
  ok = ok && check(ordo_var_delete(e, v), "ordo_var_delete");
  {
    counter tokens;
    ordo_pipeline* p = NULL;
    ordo_pipe pipes[2];
    tokens.value = 0;
    pipes[0].type = ORDO_PIPE_SERIAL;
    pipes[0].fn = source;
    pipes[0].user_data = NULL;
    pipes[1].type = ORDO_PIPE_SERIAL;
    pipes[1].fn = count_token;
    pipes[1].user_data = &tokens;
    ok = ok && check(ordo_pipeline_create(e, 2, pipes, 2, &p), "ordo_pipeline_create");
    ok = ok && check(ordo_pipeline_run(p), "ordo_pipeline_run");
    ok = ok && check(ordo_pipeline_destroy(p), "ordo_pipeline_destroy");
    if (ok && tokens.value != 10) {
      fprintf(stderr, "consumer: the pipeline ran %ld tokens, expected 10\n", tokens.value);
      ok = 0;
    }
  }
  ok = check(ordo_engine_destroy(e), "ordo_engine_destroy") && ok;
  if (!ok) return 1;

  printf("consumer: counter=%ld version=%s\n", c.value, ordo_version_string());
  if (c.value != N_OPS) {
    fprintf(stderr, "consumer: counter is %ld, expected %d\n", c.value, N_OPS);
    return 1;
  }
  return 0;
}
