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
#include <pthread.h>
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

/* ---- The naive pusher's own run of the op it made ready (OpRunner::run_inline_helping) ----
 * A push outside every op that makes its op ready runs it at once on the pushing thread, counts
 * its completion on the thread's lane without a batch, and announces it as it returns. These
 * tests check the counts after each kind of run (success, failure, deferral, a completion of
 * another op from inside the callback, nested pushes) and that a waiter on another thread is
 * woken by the pusher's last completion. */

typedef struct completer {
  tu_deferred* d; /* the deferred op this callback completes */
  atomic_int ran;
} completer;

static int32_t complete_other_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  completer* c = ud;
  ordo_complete(atomic_load(&c->d->completion), 0, NULL);
  atomic_fetch_add(&c->ran, 1);
  return 0;
}

static int32_t fail_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  atomic_fetch_add((atomic_int*)ud, 1);
  return 5;
}

typedef struct nester {
  ordo_engine* e;
  ordo_var v;
  atomic_int count; /* what the nested ops count */
  atomic_int push_errors;
} nester;

static int32_t push_three_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  nester* n = ud;
  for (int i = 0; i < 3; ++i) {
    if (ordo_opr_push(n->e, tu_count_fn, &n->count, NULL, 0, &n->v, 1, NULL) != ORDO_OK) {
      atomic_fetch_add(&n->push_errors, 1);
    }
  }
  return 0;
}

static void expect_counts(ordo_engine* e, uint64_t pushed, uint64_t pending, const char* when) {
  ordo_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  ST(ordo_engine_stats(e, &st), ORDO_OK);
  cr_assert_eq(st.pushed, pushed, "%s: %llu pushed, want %llu", when, (unsigned long long)st.pushed,
               (unsigned long long)pushed);
  cr_assert_eq(st.pending, pending, "%s: %llu pending, want %llu", when,
               (unsigned long long)st.pending, (unsigned long long)pending);
  /* A poll: the pending count the waits see is the same one (once a var carries a failure,
   * a wait for all work that finds none pending returns ORDO_ERR_OP_FAILED). */
  const ordo_status polled = ordo_wait_for_all_timeout(e, 0);
  if (pending == 0) {
    cr_assert(polled == ORDO_OK || polled == ORDO_ERR_OP_FAILED, "%s: a poll returned %s", when,
              ordo_status_string(polled));
  } else {
    cr_assert_eq(polled, ORDO_ERR_TIMEOUT, "%s: a poll returned %s, want a timeout", when,
                 ordo_status_string(polled));
  }
}

static void every_kind_of_run_on_the_pusher(const ordo_push_opts* opts, const char* what) {
  ordo_engine* e = NULL;
  g_kind = ORDO_ENGINE_NAIVE;
  ST(tu_engine_create(ORDO_ENGINE_NAIVE, 0, &e), ORDO_OK);
  ordo_var a = new_var(e), b = new_var(e), c = new_var(e), d = new_var(e);
  atomic_int count = 0, failed = 0;
  char when[96];

  ST(ordo_opr_push(e, tu_count_fn, &count, NULL, 0, &a, 1, opts), ORDO_OK);
  snprintf(when, sizeof when, "%s, after a success", what);
  expect_counts(e, 1, 0, when);

  ST(ordo_opr_push(e, fail_fn, &failed, NULL, 0, &b, 1, opts), ORDO_OK);
  snprintf(when, sizeof when, "%s, after a failure", what);
  expect_counts(e, 2, 0, when); /* its poll reports the failure, and clears the record */
  ST(ordo_wait_for_var(e, b), ORDO_ERR_OP_FAILED);

  tu_deferred dd;
  tu_deferred_init(&dd);
  ST(ordo_opr_push(e, tu_defer_fn, &dd, NULL, 0, &c, 1, opts), ORDO_OK);
  snprintf(when, sizeof when, "%s, after a deferral", what);
  expect_counts(e, 3, 1, when);
  cr_assert_neq(tu_deferred_wait(&dd, 1000), 0, "%s: the op did not defer", what);

  /* This op's callback completes the deferred one: both are done when its push returns. */
  completer cp = {&dd, 0};
  ST(ordo_opr_push(e, complete_other_fn, &cp, NULL, 0, &d, 1, opts), ORDO_OK);
  snprintf(when, sizeof when, "%s, after a completion from a callback", what);
  expect_counts(e, 4, 0, when);

  /* Three pushes from inside the op queue behind it and run before its push returns. */
  nester n = {e, a, 0, 0};
  ST(ordo_opr_push(e, push_three_fn, &n, NULL, 0, &d, 1, opts), ORDO_OK);
  cr_assert_eq(atomic_load(&n.push_errors), 0, "%s: a nested push failed", what);
  cr_assert_eq(atomic_load(&n.count), 3, "%s: %d nested ops ran when the push returned, want 3",
               what, atomic_load(&n.count));
  snprintf(when, sizeof when, "%s, after nested pushes", what);
  expect_counts(e, 8, 0, when);

  /* A second deferral, completed from this thread (no op on the stack). */
  tu_deferred d2;
  tu_deferred_init(&d2);
  ST(ordo_opr_push(e, tu_defer_fn, &d2, NULL, 0, &a, 1, opts), ORDO_OK);
  ST(ordo_opr_push(e, tu_count_fn, &count, NULL, 0, &a, 1, opts), ORDO_OK); /* queued behind */
  snprintf(when, sizeof when, "%s, with a deferred op and one behind it", what);
  expect_counts(e, 10, 2, when);
  ST(ordo_complete(tu_deferred_wait(&d2, 1000), 0, NULL), ORDO_OK);
  snprintf(when, sizeof when, "%s, after completing it", what);
  expect_counts(e, 10, 0, when);

  cr_assert_eq(atomic_load(&count), 2, "%s: %d counting ops ran, want 2", what,
               atomic_load(&count));
  cr_assert_eq(atomic_load(&failed), 1, "%s: the failing op ran %d times", what,
               atomic_load(&failed));
  cr_assert_eq(atomic_load(&cp.ran), 1, "%s: the completing op ran %d times", what,
               atomic_load(&cp.ran));
  ST(ordo_wait_for_all(e), ORDO_OK); /* the poll after the failure reported (and cleared) it */
  destroy_engine(e);
}

Test(inline_runs, a_naive_pusher_counts_every_kind_of_run) {
  every_kind_of_run_on_the_pusher(NULL, "plain pushes"); /* ordo_opr_push's plain path */
  ordo_push_opts o = tu_opts_named("named");
  every_kind_of_run_on_the_pusher(&o, "pushes with options"); /* the general path */
}

typedef struct last_op {
  ordo_engine* e;
  atomic_int go;      /* the op runs: the waiter may start */
  atomic_int waiting; /* the waiter is about to wait */
  atomic_int status;
  atomic_llong waited_ms;
} last_op;

static void* wait_for_all_thread(void* arg) {
  last_op* l = arg;
  tu_wait_ge(&l->go, 1, 5000);
  atomic_store(&l->waiting, 1);
  uint64_t t0 = tu_now_ms();
  atomic_store(&l->status, ordo_wait_for_all_timeout(l->e, TU_MS_NS(5000)));
  atomic_store(&l->waited_ms, (long long)(tu_now_ms() - t0));
  return NULL;
}

/* The only op pending, run by its pusher: it lets the waiter start, and returns once the
 * waiter is (nearly always) asleep in its wait. Nothing completes after it, so only the
 * pusher's announcement of its completion can wake the waiter before the wait times out. */
static int32_t hold_until_waiting_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  last_op* l = ud;
  atomic_store(&l->go, 1);
  tu_wait_ge(&l->waiting, 1, 5000);
  tu_sleep_ms(20);
  return 0;
}

Test(inline_runs, a_waiter_wakes_when_a_naive_pusher_completes_the_last_op) {
  ordo_engine* e = NULL;
  g_kind = ORDO_ENGINE_NAIVE;
  ST(tu_engine_create(ORDO_ENGINE_NAIVE, 0, &e), ORDO_OK);
  ordo_var v = new_var(e);
  for (int round = 0; round < 10; ++round) {
    last_op l;
    l.e = e;
    atomic_init(&l.go, 0);
    atomic_init(&l.waiting, 0);
    atomic_init(&l.status, -1);
    atomic_init(&l.waited_ms, -1);
    pthread_t waiter;
    cr_assert_eq(pthread_create(&waiter, NULL, wait_for_all_thread, &l), 0);
    ST(ordo_opr_push(e, hold_until_waiting_fn, &l, NULL, 0, &v, 1, NULL), ORDO_OK);
    pthread_join(waiter, NULL);
    /* A wait that nobody woke also returns ORDO_OK, when its timeout ends and it finds nothing
     * pending: it must have been woken long before. */
    cr_assert(atomic_load(&l.status) == ORDO_OK && atomic_load(&l.waited_ms) < 2500,
              "round %d: the wait returned %s after %lld ms (not woken by the pusher)", round,
              ordo_status_string(atomic_load(&l.status)), (long long)atomic_load(&l.waited_ms));
  }
  destroy_engine(e);
}
