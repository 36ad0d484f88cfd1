/*
 * Timed waits that run out while a deferred op is completed from a thread of the caller's own
 * (issue #21's report: ordo_wait_for_all never returned after such a wait, with the op's
 * ordo_complete having returned ORDO_OK). The reported sequence, repeated on one engine:
 *   16 vars; op A mutates vars 4 and 15, defers, and a plain pthread completes it; op B mutates
 *   vars 1, 6, 7 and 12; ordo_wait_for_var_timeout(var 15, 3 ms); ordo_wait_for_all; delete the
 *   16 vars; ordo_wait_for_all.
 * Run here in both orders the report allows (the completion released by A's callback, so the
 * timed wait may or may not run out; or released by the test thread right after the timed wait,
 * so that it always runs out with A's completion and the wait mark it releases racing the
 * next ordo_wait_for_all), on both threaded engine kinds, and with every thread on one CPU.
 * Every wait is bounded: a hang fails the test with ordo_engine_dump's report.
 */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#include "test_util.h"

enum { kVars = 16, kReps = 150 };

typedef struct race {
  ordo_engine* e;
  _Atomic uint64_t handle; /* A's completion, once A has deferred */
  atomic_int release;      /* the test thread lets the completer go (after_wait mode) */
  atomic_int stop;
  atomic_int complete_errors; /* ordo_complete calls that did not return ORDO_OK */
  int after_wait;             /* 1: completed only once the test thread's timed wait ran out */
} race;

static int32_t defer_a(ordo_exec* x, void* ud) {
  race* r = ud;
  ordo_completion c = 0;
  if (ordo_exec_defer(x, &c) == ORDO_OK) atomic_store(&r->handle, c);
  return 0;
}

static int32_t noop(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  return 0;
}

/* The plain pthread that polls a flag and completes A. */
static void* completer(void* arg) {
  race* r = arg;
  while (!atomic_load(&r->stop)) {
    uint64_t c = atomic_load(&r->handle);
    if (c == 0 || (r->after_wait && !atomic_load(&r->release))) {
      sched_yield();
      continue;
    }
    atomic_store(&r->handle, 0);
    atomic_store(&r->release, 0);
    if (ordo_complete(c, 0, NULL) != ORDO_OK) atomic_fetch_add(&r->complete_errors, 1);
  }
  return NULL;
}

/* A wait bounded at 20 s: past that, the engine's own report goes to the test's output. */
static ordo_status bounded_wait_for_all(ordo_engine* e, int rep, const char* which) {
  ordo_status s = ordo_wait_for_all_timeout(e, 20ull * 1000 * 1000 * 1000);
  if (s == ORDO_ERR_TIMEOUT) {
    fprintf(stderr, "rep %d, %s: %s\n", rep, which, ordo_last_error_message());
    ordo_engine_dump(e, stderr);
  }
  return s;
}

static void run_reported_sequence(int32_t kind, int after_wait, int one_cpu) {
  if (one_cpu) cr_assert_eq(tu_pin_to_one_cpu(), 0); /* inherited by every new thread */
  race r;
  memset(&r, 0, sizeof r);
  r.after_wait = after_wait;
  cr_assert_eq(tu_engine_create(kind, 2, &r.e), ORDO_OK);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, completer, &r), 0);
  int timed_out = 0;
  for (int rep = 0; rep < kReps; ++rep) {
    ordo_var v[kVars];
    for (int i = 0; i < kVars; ++i) cr_assert_eq(ordo_var_new(r.e, &v[i]), ORDO_OK);
    ordo_var a[2] = {v[4], v[15]};
    ordo_var b[4] = {v[1], v[6], v[7], v[12]};
    cr_assert_eq(ordo_opr_push(r.e, defer_a, &r, NULL, 0, a, 2, NULL), ORDO_OK);
    cr_assert_eq(ordo_opr_push(r.e, noop, NULL, NULL, 0, b, 4, NULL), ORDO_OK);
    ordo_status w = ordo_wait_for_var_timeout(r.e, v[15], 3 * 1000 * 1000);
    cr_assert(w == ORDO_OK || w == ORDO_ERR_TIMEOUT, "rep %d: %s", rep, ordo_status_string(w));
    timed_out += w == ORDO_ERR_TIMEOUT;
    atomic_store(&r.release, 1);
    cr_assert_eq(bounded_wait_for_all(r.e, rep, "the wait after the timed one"), ORDO_OK,
                 "rep %d (%s, %s): ordo_wait_for_all never returned", rep, tu_kind_name(kind),
                 after_wait ? "completed after the timed wait" : "completed when A deferred");
    for (int i = 0; i < kVars; ++i) cr_assert_eq(ordo_var_delete(r.e, v[i]), ORDO_OK);
    cr_assert_eq(bounded_wait_for_all(r.e, rep, "the wait after the deletes"), ORDO_OK);
  }
  atomic_store(&r.stop, 1);
  pthread_join(t, NULL);
  cr_assert_eq(atomic_load(&r.complete_errors), 0);
  if (after_wait) {
    cr_assert_eq(timed_out, kReps, "every timed wait ran out (A was not completed before it)");
  }
  cr_assert_eq(ordo_engine_destroy(r.e), ORDO_OK);
}

Test(timed_wait_races, reported_sequence_completed_when_a_defers, .timeout = 60.0) {
  run_reported_sequence(ORDO_ENGINE_PER_DEVICE, 0, 0);
  run_reported_sequence(ORDO_ENGINE_POOLED, 0, 0);
}

Test(timed_wait_races, reported_sequence_completed_after_the_timed_wait, .timeout = 60.0) {
  run_reported_sequence(ORDO_ENGINE_PER_DEVICE, 1, 0);
  run_reported_sequence(ORDO_ENGINE_POOLED, 1, 0);
}

Test(timed_wait_races, reported_sequence_on_one_cpu, .timeout = 90.0) {
  run_reported_sequence(ORDO_ENGINE_PER_DEVICE, 1, 1);
  run_reported_sequence(ORDO_ENGINE_PER_DEVICE, 0, 1);
}
