/*
 * An op of one var that succeeds and did not run on a worker of its engine (the naive engine's
 * ops, run inside the push that made them ready; a traced engine's ops) finishes through
 * OpRunner::finalize_one_var_off_worker, which hands on what its completion made ready as
 * finalize would. These tests queue every kind of successor behind such an op (writers, a group
 * of readers, an op of two vars, a failure and the ops it poisons) and check the order, the
 * errors and the free_fns.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(inline_runs, .timeout = 60.0);

enum { kLogCap = 32, kSteps = 12 };

typedef struct run_log {
  atomic_int next;
  atomic_int seq[kLogCap];
  atomic_int freed;
  atomic_int push_errors; /* pushes from inside the head op that did not return ORDO_OK */
} run_log;

typedef struct step {
  run_log* log;
  int seq;
  int32_t code; /* what the callback returns */
} step;

/* The chain behind the head op, pushed from inside it so that it queues behind it even on the
 * naive engine (whose ops otherwise run as they are pushed). */
typedef struct chain {
  ordo_engine* e;
  ordo_var v, u;
  step s[kSteps];
} chain;

static void step_free(void* ud) {
  step* s = ud;
  atomic_fetch_add(&s->log->freed, 1);
}

static int32_t step_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  step* s = ud;
  int pos = atomic_fetch_add(&s->log->next, 1);
  if (pos < kLogCap) atomic_store(&s->log->seq[pos], s->seq);
  return s->code;
}

static void push_step(chain* c, step* s, const ordo_var* reads, size_t nr, const ordo_var* writes,
                      size_t nw) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = step_free;
  if (ordo_opr_push(c->e, step_fn, s, reads, nr, writes, nw, &o) != ORDO_OK) {
    atomic_fetch_add(&c->s[0].log->push_errors, 1);
  }
}

/* Step 0, the head: logs, then pushes steps 1-11 behind itself on v. */
static int32_t head_fn(ordo_exec* exec, void* ud) {
  chain* c = ud;
  step_fn(exec, &c->s[0]);
  for (int i = 1; i <= 3; ++i) push_step(c, &c->s[i], NULL, 0, &c->v, 1); /* writers */
  for (int i = 4; i <= 6; ++i) push_step(c, &c->s[i], &c->v, 1, NULL, 0); /* readers */
  push_step(c, &c->s[7], NULL, 0, &c->v, 1);
  const ordo_var both[2] = {c->v, c->u};
  push_step(c, &c->s[8], NULL, 0, both, 2);  /* waits on v only */
  push_step(c, &c->s[9], NULL, 0, &c->v, 1); /* fails: 10 and 11 are skipped */
  push_step(c, &c->s[10], NULL, 0, &c->v, 1);
  push_step(c, &c->s[11], &c->v, 1, NULL, 0);
  return 0;
}

static void head_free(void* ud) {
  chain* c = ud;
  atomic_fetch_add(&c->s[0].log->freed, 1);
}

static int logged(run_log* log, int pos) {
  return atomic_load(&log->seq[pos]);
}

static void chain_behind_a_one_var_op(ordo_engine* e, const char* what) {
  run_log log;
  memset(&log, 0, sizeof log);
  chain c;
  c.e = e;
  c.v = new_var(e);
  c.u = new_var(e);
  for (int i = 0; i < kSteps; ++i) c.s[i] = (step){&log, i, 0};
  c.s[9].code = 7;
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = head_free;
  ST(ordo_opr_push(e, head_fn, &c, NULL, 0, &c.v, 1, &o), ORDO_OK);
  /* Steps 1-11 are pushed by the head op, which on a threaded engine may not have run yet when
   * the push returns: wait for all work first. */
  ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
  ST(ordo_wait_for_var(e, c.v), ORDO_ERR_OP_FAILED);
  ST(ordo_wait_for_var(e, c.u), ORDO_OK); /* step 8 succeeded: u carries no error */

  cr_assert_eq(atomic_load(&log.push_errors), 0, "%s: a push from the head op failed", what);
  cr_assert_eq(atomic_load(&log.next), 10, "%s: %d steps ran, want 10 (10 and 11 skipped)", what,
               atomic_load(&log.next));
  for (int i = 0; i <= 3; ++i) cr_assert_eq(logged(&log, i), i, "%s: position %d", what, i);
  int readers = 0;
  for (int i = 4; i <= 6; ++i) readers |= 1 << logged(&log, i);
  cr_assert_eq(readers, (1 << 4) | (1 << 5) | (1 << 6), "%s: the readers ran out of place", what);
  for (int i = 7; i <= 9; ++i) cr_assert_eq(logged(&log, i), i, "%s: position %d", what, i);
  int32_t code = 0;
  ST(ordo_var_get_error(e, c.v, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 7, "%s: v's error is %d, want step 9's 7", what, code);
  ST(ordo_var_get_error(e, c.u, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 0, "%s: u's error is %d, want none", what, code);
  /* Every free_fn ran (the skipped ops' too) once its op was done, before the waits returned. */
  cr_assert_eq(atomic_load(&log.freed), kSteps, "%s: %d free_fns ran, want %d", what,
               atomic_load(&log.freed), kSteps);
}

Test(inline_runs, the_naive_engine_hands_on_every_kind_of_successor) {
  ordo_engine* e = NULL;
  g_kind = ORDO_ENGINE_NAIVE;
  ST(tu_engine_create(ORDO_ENGINE_NAIVE, 0, &e), ORDO_OK);
  chain_behind_a_one_var_op(e, "naive");
  destroy_engine(e);
}

/* A traced engine's workers run the traced instance of the op runner, which finishes a one-var
 * op off the worker path too (and may still keep a successor, as finalize does). */
Test(inline_runs, a_traced_engine_hands_on_every_kind_of_successor) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    for (int32_t threads = 1; threads <= 2; ++threads) {
      char path[64];
      snprintf(path, sizeof path, "/tmp/ordo-inline-runs-%d-%d-%d.json", (int)getpid(), k,
               (int)threads);
      ordo_engine_config cfg;
      ordo_engine_config_init(&cfg);
      cfg.kind = tu_threaded_kinds[k];
      cfg.cpu_threads = threads;
      cfg.trace_path = path;
      g_kind = cfg.kind;
      ordo_engine* e = NULL;
      ST(ordo_engine_create(&cfg, &e), ORDO_OK);
      char what[64];
      snprintf(what, sizeof what, "%s traced, %d worker(s)", tu_kind_name(g_kind), (int)threads);
      chain_behind_a_one_var_op(e, what);
      destroy_engine(e);
      unlink(path);
    }
  }
}
