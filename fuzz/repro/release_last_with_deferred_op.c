/*
 * Reproducer (found by fuzz_handles): dropping the last engine reference with
 * ordo_engine_release while a deferred op is outstanding deadlocks. The header says the last
 * release "shuts the engine down as ordo_engine_destroy does", and destroy waits for deferred
 * ops' ordo_complete. But release_slot() drops the slot's count to 0 before `delete engine` (whose
 * destructor shuts down and waits), so the ordo_complete that would let it finish is refused with
 * ORDO_ERR_INVALID_HANDLE ("its engine is gone") and the release waits forever.
 * (ordo_engine_destroy works: it shuts down while still holding the creator's reference.)
 *
 *   cc -std=c11 -pthread -Iinclude fuzz/repro/release_last_with_deferred_op.c -Lbuild/src -lordo \
 *      -Wl,-rpath,$PWD/build/src -o /tmp/repro && /tmp/repro
 * Exits 0 when the release returns after the completion, 1 when ordo_complete is refused, and
 * is killed by alarm() after 5 s when the release hangs.
 */
#define _POSIX_C_SOURCE 200809L
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static ordo_completion g_handle;
static ordo_status g_complete_status = -1;

static int32_t defer_op(ordo_exec* x, void* u) {
  (void)u;
  ordo_exec_defer(x, &g_handle);
  return 0;
}

static void* complete_later(void* arg) {
  (void)arg;
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL); /* the main thread is inside ordo_engine_release by now */
  g_complete_status = ordo_complete(g_handle, 0, NULL);
  printf("ordo_complete during the last release: %s (%s)\n",
         ordo_status_string(g_complete_status), ordo_last_error_message());
  fflush(stdout);
  return NULL;
}

int main(void) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_NAIVE;
  ordo_engine* e = NULL;
  if (ordo_engine_create(&cfg, &e) != ORDO_OK) return 2;
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.prop = ORDO_PROP_ASYNC; /* no vars: runs and defers inside the push */
  ordo_opr_push(e, defer_op, NULL, NULL, 0, NULL, 0, &o);

  pthread_t t;
  pthread_create(&t, NULL, complete_later, NULL);
  alarm(5);
  ordo_status s = ordo_engine_release(e); /* the creator's reference, the last one */
  printf("ordo_engine_release: %s\n", ordo_status_string(s));
  pthread_join(t, NULL);
  return g_complete_status == ORDO_OK ? 0 : 1;
}
