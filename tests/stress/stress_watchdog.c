/*
 * The watchdog: a hang must end the run with a report, not hold a CI job until its timeout.
 * Progress is anything a running engine does (ops run, finished, completed, checks made); when
 * none of it moves for the configured time, the watchdog prints what the run was doing and
 * exits with status 3.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "stress.h"

static pthread_t g_thread;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static int g_stop;
static int g_seconds;
static watchdog_dump_fn g_dump;

unsigned long watchdog_progress(void) {
  return atomic_load(&g_count.ran) + atomic_load(&g_count.finished) +
         atomic_load(&g_count.completed_by_completer) + atomic_load(&g_count.checks);
}

/* Sleeps one second unless stopped first; returns whether to stop. */
static int sleep_a_second(void) {
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += 1;
  pthread_mutex_lock(&g_mu);
  int rc = 0;
  while (!g_stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g_cv, &g_mu, &until);
  int stop = g_stop;
  pthread_mutex_unlock(&g_mu);
  return stop;
}

static void* watchdog_main(void* arg) {
  (void)arg;
  unsigned long last = watchdog_progress();
  int still = 0;
  while (!sleep_a_second()) {
    unsigned long now = watchdog_progress();
    still = now == last ? still + 1 : 0;
    last = now;
    if (still < g_seconds) continue;
    fflush(stdout);
    fprintf(stderr, "ordo_stress: WATCHDOG: no progress for %d s; state:\n", g_seconds);
    g_dump();
    fflush(stderr);
    _exit(3);
  }
  return NULL;
}

int watchdog_start(int seconds, watchdog_dump_fn dump) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g_cv, &attr);
  pthread_condattr_destroy(&attr);
  g_seconds = seconds;
  g_dump = dump;
  g_stop = 0;
  return pthread_create(&g_thread, NULL, watchdog_main, NULL) == 0 ? 0 : -1;
}

void watchdog_stop(void) {
  pthread_mutex_lock(&g_mu);
  g_stop = 1;
  pthread_cond_signal(&g_cv);
  pthread_mutex_unlock(&g_mu);
  pthread_join(g_thread, NULL);
}
