/*
 * A worker runs the successor that a one-var op's completion makes ready itself, at once
 * (OpRunner::finalize_one_var): these tests push a chain of one var that meets every kind of
 * successor such a run can find (a writer, a group of readers, an op that still waits on another
 * var, an op that defers, a failure and the ops it poisons, a wait on the var) and check the
 * order, the errors and the free_fns; and that an urgent op still overtakes a running chain.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(worker_runs, .timeout = 60.0);

enum { kLogCap = 64 };

typedef struct run_log {
  atomic_int next;
  atomic_int seq[kLogCap];
  atomic_int freed;
} run_log;

typedef struct step {
  run_log* log;
  int seq;
  int32_t code;   /* what the callback returns */
  tu_deferred* d; /* non-NULL: the callback defers (after logging) */
} step;

static int32_t step_fn(ordo_exec* exec, void* ud) {
  step* s = ud;
  int pos = atomic_fetch_add(&s->log->next, 1);
  if (pos < kLogCap) atomic_store(&s->log->seq[pos], s->seq);
  if (s->d) return tu_defer_fn(exec, s->d);
  return s->code;
}

static void step_free(void* ud) {
  step* s = ud;
  atomic_fetch_add(&s->log->freed, 1);
}

static void push_step(ordo_engine* e, step* s, const ordo_var* reads, size_t nr,
                      const ordo_var* writes, size_t nw) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = step_free;
  ST(ordo_opr_push(e, step_fn, s, reads, nr, writes, nw, &o), ORDO_OK);
}

static int logged(run_log* log, int pos) {
  return atomic_load(&log->seq[pos]);
}

/* Waits until `n` steps have logged. */
static void wait_logged(run_log* log, int n) {
  cr_assert(tu_wait_ge(&log->next, n, 10000), "%s: %d of %d steps ran", tu_kind_name(g_kind),
            atomic_load(&log->next), n);
}

static void chain_meets_every_kind_of_successor(int32_t kind, int32_t threads) {
  ordo_engine* e = NULL;
  g_kind = kind;
  ST(tu_engine_create(kind, threads, &e), ORDO_OK);
  ordo_var v = new_var(e);
  ordo_var u = new_var(e);
  run_log log;
  memset(&log, 0, sizeof log);
  enum { N = 17 };
  step s[N];
  for (int i = 0; i < N; ++i) s[i] = (step){&log, i, 0, NULL};
  tu_deferred on_u, on_v;
  tu_deferred_init(&on_u);
  tu_deferred_init(&on_v);
  s[0].d = &on_u;  /* step 0 holds u until the test completes it */
  s[12].d = &on_v; /* step 12 defers in the middle of v's chain */
  s[14].code = 7;  /* fails: 15 and 16 are skipped */
  tu_gate gate;
  tu_gate_init(&gate);

  push_step(e, &s[0], NULL, 0, &u, 1);
  const ordo_completion cu = wait_deferred(&on_u); /* logged first, whichever worker took it */
  /* Everything on v queues behind the gate, so the chain runs from v's queue back to back. */
  ST(ordo_opr_push(e, tu_gate_fn, &gate, NULL, 0, &v, 1, NULL), ORDO_OK);
  cr_assert(tu_wait_ge(&gate.in, 1, 5000));
  for (int i = 1; i <= 5; ++i) push_step(e, &s[i], NULL, 0, &v, 1);
  for (int i = 6; i <= 8; ++i) push_step(e, &s[i], &v, 1, NULL, 0); /* readers, granted together */
  push_step(e, &s[9], NULL, 0, &v, 1);
  const ordo_var both[2] = {v, u};
  push_step(e, &s[10], NULL, 0, both, 2); /* granted v, still waits for u */
  push_step(e, &s[11], NULL, 0, &v, 1);
  push_step(e, &s[12], NULL, 0, &v, 1);
  push_step(e, &s[13], NULL, 0, &v, 1);
  push_step(e, &s[14], NULL, 0, &v, 1);
  push_step(e, &s[15], NULL, 0, &v, 1);
  push_step(e, &s[16], &v, 1, NULL, 0);
  atomic_store(&gate.open, 1);

  wait_logged(&log, 10); /* 0 to 9 */
  tu_sleep_ms(20);
  cr_assert_eq(atomic_load(&log.next), 10, "%s: the op of v and u ran before u was released",
               tu_kind_name(kind));
  ST(ordo_complete(cu, 0, NULL), ORDO_OK);
  const ordo_completion cv = wait_deferred(&on_v);
  wait_logged(&log, 13); /* 10, 11, 12 */
  tu_sleep_ms(20);
  cr_assert_eq(atomic_load(&log.next), 13, "%s: an op ran past a deferred op of its var",
               tu_kind_name(kind));
  ST(ordo_complete(cv, 0, NULL), ORDO_OK);
  ST(ordo_wait_for_var(e, v), ORDO_ERR_OP_FAILED);
  ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);

  cr_assert_eq(atomic_load(&log.next), 15, "%s: %d steps ran, want 15 (15 and 16 skipped)",
               tu_kind_name(kind), atomic_load(&log.next));
  cr_assert_eq(logged(&log, 0), 0);
  for (int i = 1; i <= 5; ++i)
    cr_assert_eq(logged(&log, i), i, "%s: position %d", tu_kind_name(kind), i);
  int readers = 0;
  for (int i = 6; i <= 8; ++i) readers |= 1 << logged(&log, i);
  cr_assert_eq(readers, (1 << 6) | (1 << 7) | (1 << 8), "%s: the readers ran out of place",
               tu_kind_name(kind));
  for (int i = 9; i <= 14; ++i)
    cr_assert_eq(logged(&log, i), i, "%s: position %d", tu_kind_name(kind), i);
  destroy_engine(e);
  cr_assert_eq(atomic_load(&log.freed), N, "%s: %d free_fns ran, want %d", tu_kind_name(kind),
               atomic_load(&log.freed), N);
}

Test(worker_runs, a_chain_meets_every_kind_of_successor_on_one_worker) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    chain_meets_every_kind_of_successor(tu_threaded_kinds[k], 1);
  }
}

Test(worker_runs, a_chain_meets_every_kind_of_successor_on_two_workers) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    chain_meets_every_kind_of_successor(tu_threaded_kinds[k], 2);
  }
}

/* ------------------------------------------------------------------------------------------- */

typedef struct slow_link {
  atomic_int* ran; /* chain ops run so far */
  atomic_int* at;  /* where the urgent op ran: the chain ops run before it */
} slow_link;

static int32_t slow_link_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  slow_link* l = ud;
  tu_sleep_us(200);
  atomic_fetch_add(l->ran, 1);
  return 0;
}

static int32_t urgent_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  slow_link* l = ud;
  atomic_store(l->at, atomic_load(l->ran));
  return 0;
}

Test(worker_runs, an_urgent_op_overtakes_a_running_chain) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = NULL;
    g_kind = tu_threaded_kinds[k];
    ST(tu_engine_create(g_kind, 1, &e), ORDO_OK);
    ordo_var v = new_var(e);
    ordo_var w = new_var(e);
    enum { N = 500 };
    atomic_int ran, at;
    atomic_init(&ran, 0);
    atomic_init(&at, -1);
    slow_link l = {&ran, &at};
    for (int i = 0; i < N; ++i) {
      ST(ordo_opr_push(e, slow_link_fn, &l, NULL, 0, &v, 1, NULL), ORDO_OK);
    }
    cr_assert(tu_wait_ge(&ran, 20, 10000));
    const int pushed_at = atomic_load(&ran);
    ordo_push_opts urgent;
    ordo_push_opts_init(&urgent);
    urgent.priority = 1;
    ST(ordo_opr_push(e, urgent_fn, &l, NULL, 0, &w, 1, &urgent), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    const int ran_at = atomic_load(&at);
    /* The one worker runs it as soon as the chain op it is in returns (a few ops' slack for a
       slow machine), not after the chain's 500 ops. */
    cr_assert(ran_at >= pushed_at && ran_at <= pushed_at + 50,
              "%s: the urgent op ran after %d chain ops, pushed after %d", tu_kind_name(g_kind),
              ran_at, pushed_at);
    destroy_engine(e);
  }
}
