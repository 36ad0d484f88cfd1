/*
 * A program that hangs on purpose, for tests/test_with_timeout.sh: it pushes an op that defers
 * and is never completed, then waits for its var from a second thread and from main. The step
 * timeout wrapper must show both waits in ordo_wait_for_var in its stack dump.
 *   ordo_hang_helper [PIDFILE]    appends its pid to PIDFILE first (to check it was killed)
 */
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static ordo_engine* g_engine;
static ordo_var g_var;

static int32_t defer_forever(ordo_exec* exec, void* user_data) {
  (void)user_data;
  ordo_completion c = 0;
  return ordo_exec_defer(exec, &c); /* never completed */
}

static void* waiter(void* arg) {
  (void)arg;
  ordo_wait_for_var(g_engine, g_var);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) {
    FILE* f = fopen(argv[1], "a");
    if (!f) return 1;
    fprintf(f, "%ld\n", (long)getpid());
    fclose(f);
  }
  if (ordo_engine_create(NULL, &g_engine) != ORDO_OK || ordo_var_new(g_engine, &g_var) != ORDO_OK ||
      ordo_opr_push(g_engine, defer_forever, NULL, NULL, 0, &g_var, 1, NULL) != ORDO_OK) {
    fprintf(stderr, "hang_helper: setup failed: %s\n", ordo_last_error_message());
    return 1;
  }
  pthread_t t;
  if (pthread_create(&t, NULL, waiter, NULL) != 0) return 1;
  printf("hang_helper: waiting forever\n");
  fflush(stdout);
  ordo_wait_for_var(g_engine, g_var);
  return 0;
}
