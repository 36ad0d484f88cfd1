/*
 * Reproducer of an OPEN limitation (found by review; documented under ordo_wait_for_var in
 * include/ordo/ordo.h). A var carries one wait mark at a time. A wait made while an earlier
 * wait's mark is still pending (here: it timed out, the reader before it still runs) and after
 * another op was pushed on the var cannot join that mark, so it is queued as a write: a reader
 * pushed after it then waits for the readers before it, and two readers that wait for each other
 * (SPEC 2.2) hang. Reader A below gives up after 3 s instead of hanging.
 *
 * Build and run against any build of the library, e.g.:
 *   cc -std=c11 -Iinclude fuzz/repro/open_wait_after_a_push_while_a_mark_is_pending.c \
 *      -Lbuild/src -lordo -Wl,-rpath,$PWD/build/src -o /tmp/repro && /tmp/repro
 * Exits 0 when reader B could start while reader A ran (fixed), 1 when it could not.
 */
#define _POSIX_C_SOURCE 200809L
#include <ordo/ordo.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static atomic_int b_started;
static atomic_int a_met_b;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Reader A: waits up to 3 s for reader B to start beside it. */
static int32_t reader_a(ordo_exec* x, void* u) {
  (void)x, (void)u;
  for (int i = 0; i < 3000 && !atomic_load(&b_started); ++i) sleep_ms(1);
  atomic_store(&a_met_b, atomic_load(&b_started));
  return 0;
}

static int32_t reader_b(ordo_exec* x, void* u) {
  (void)x, (void)u;
  atomic_store(&b_started, 1);
  return 0;
}

static int32_t noop(ordo_exec* x, void* u) {
  (void)x, (void)u;
  return 0;
}

int main(void) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_POOLED;
  cfg.cpu_threads = 4;
  ordo_engine* e = NULL;
  ordo_var v = 0;
  if (ordo_engine_create(&cfg, &e) != ORDO_OK || ordo_var_new(e, &v) != ORDO_OK) return 2;
  ordo_opr_push(e, reader_a, NULL, &v, 1, NULL, 0, NULL);
  printf("wait 1: %s\n", ordo_status_string(ordo_wait_for_var_timeout(e, v, 1000000)));
  ordo_opr_push(e, noop, NULL, &v, 1, NULL, 0, NULL); /* a reader between the two waits */
  printf("wait 2: %s\n", ordo_status_string(ordo_wait_for_var_timeout(e, v, 1000000)));
  ordo_opr_push(e, reader_b, NULL, &v, 1, NULL, 0, NULL);
  ordo_wait_for_all(e);
  ordo_engine_destroy(e);
  printf("reader B started while reader A ran: %s\n", atomic_load(&a_met_b) ? "yes" : "NO");
  return atomic_load(&a_met_b) ? 0 : 1;
}
