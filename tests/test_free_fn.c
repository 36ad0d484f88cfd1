/*
 * ordo_push_opts.free_fn: called exactly once per successful push, after the op finished (ran,
 * failed, was skipped, or was deferred and completed), before waiters on its vars wake; never
 * for a failed push. Prepared ops: once, after ordo_opr_delete and their last push.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(free_fn, .timeout = 30.0);

/* Per-op user data: how often the callback and the free_fn ran, and whether the callback had
 * finished when free_fn ran. */
typedef struct ud_rec {
  atomic_int calls;
  atomic_int frees;
  atomic_int freed_before_done; /* free_fn ran while the op had not finished */
  atomic_int done;
  int32_t code;           /* returned by the callback */
  uint32_t free_sleep_ms; /* free_fn sleeps this long before counting */
  uint32_t fn_sleep_ms;   /* the callback sleeps this long */
  int defer;              /* the callback defers instead */
  _Atomic uint64_t handle;
} ud_rec;

static void ud_init(ud_rec* r, int32_t code) {
  memset(r, 0, sizeof *r);
  r->code = code;
}

static int32_t ud_fn(ordo_exec* exec, void* p) {
  ud_rec* r = p;
  atomic_fetch_add(&r->calls, 1);
  if (r->fn_sleep_ms) tu_sleep_ms(r->fn_sleep_ms);
  if (r->defer) {
    ordo_completion h = 0;
    if (ordo_exec_defer(exec, &h) == ORDO_OK) atomic_store(&r->handle, h);
    return 0;
  }
  atomic_store(&r->done, 1);
  return r->code;
}

static void ud_free(void* p) {
  ud_rec* r = p;
  if (r->free_sleep_ms) tu_sleep_ms(r->free_sleep_ms);
  if (!r->defer && atomic_load(&r->calls) > 0 && !atomic_load(&r->done)) {
    atomic_fetch_add(&r->freed_before_done, 1);
  }
  atomic_fetch_add(&r->frees, 1);
}

static ordo_status push_ud(ordo_engine* e, ud_rec* r, const ordo_var* cv, size_t nc,
                           const ordo_var* mv, size_t nm) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = ud_free;
  o.name = "freeable";
  return ordo_opr_push(e, ud_fn, r, cv, nc, mv, nm, &o);
}

/* ------------------------------------------------------------------------------------------- */

Test(free_fn, runs_once_for_ops_that_ran_failed_or_were_skipped) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e), w = new_var(e), x = new_var(e);
    enum { OK1, NOVARS, FAILED, SKIP_W, SKIP_R, SKIP_T, CLEAN, NREC };
    ud_rec r[NREC];
    for (int i = 0; i < NREC; ++i) ud_init(&r[i], i == FAILED ? 4 : 0);
    ST(push_ud(e, &r[OK1], NULL, 0, &v, 1), ORDO_OK);
    ST(push_ud(e, &r[NOVARS], NULL, 0, NULL, 0), ORDO_OK);
    ST(push_ud(e, &r[FAILED], NULL, 0, &v, 1), ORDO_OK);
    ST(push_ud(e, &r[SKIP_W], NULL, 0, &v, 1), ORDO_OK); /* skipped: writes poisoned v */
    ST(push_ud(e, &r[SKIP_R], &v, 1, &w, 1), ORDO_OK);   /* skipped: reads poisoned v */
    ST(push_ud(e, &r[SKIP_T], &w, 1, NULL, 0), ORDO_OK); /* skipped: w poisoned by SKIP_R */
    ST(push_ud(e, &r[CLEAN], NULL, 0, &x, 1), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
    static const char* names[NREC] = {
        "ran",  "no vars", "failed", "skipped writer", "skipped reader", "transitively skipped",
        "clean"};
    for (int i = 0; i < NREC; ++i) {
      cr_assert_eq(atomic_load(&r[i].frees), 1, "%s: free_fn of the %s op ran %d times",
                   tu_kind_name(g_kind), names[i], atomic_load(&r[i].frees));
      cr_assert_eq(atomic_load(&r[i].freed_before_done), 0,
                   "%s: free_fn of the %s op ran before its callback returned",
                   tu_kind_name(g_kind), names[i]);
    }
    cr_assert_eq(atomic_load(&r[SKIP_W].calls), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&r[SKIP_R].calls), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&r[SKIP_T].calls), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&r[FAILED].calls), 1, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
    /* Still exactly once after destroy. */
    for (int i = 0; i < NREC; ++i) cr_assert_eq(atomic_load(&r[i].frees), 1);
  }
}

typedef struct cplt_arg {
  ordo_completion h;
  int32_t code;
  atomic_int status;
} cplt_arg;

static void* cplt_main(void* p) {
  cplt_arg* a = p;
  atomic_store(&a->status, ordo_complete(a->h, a->code, a->code ? "async failure" : NULL));
  return NULL;
}

Test(free_fn, runs_once_for_deferred_ops_after_completion) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    for (int code = 0; code <= 1; ++code) {
      ordo_var v = new_var(e);
      ud_rec r;
      ud_init(&r, 0);
      r.defer = 1;
      ud_rec dep;
      ud_init(&dep, 0);
      ST(push_ud(e, &r, NULL, 0, &v, 1), ORDO_OK);
      ST(push_ud(e, &dep, &v, 1, NULL, 0), ORDO_OK);
      uint64_t deadline = tu_now_ms() + 5000;
      while (atomic_load(&r.handle) == 0 && tu_now_ms() < deadline) tu_sleep_us(100);
      ordo_completion h = atomic_load(&r.handle);
      cr_assert_neq(h, 0, "%s: never deferred", tu_kind_name(g_kind));
      tu_sleep_ms(30);
      cr_assert_eq(atomic_load(&r.frees), 0,
                   "%s: free_fn of a deferred op ran before ordo_complete", tu_kind_name(g_kind));
      cr_assert_eq(atomic_load(&dep.frees), 0, "%s", tu_kind_name(g_kind));
      cplt_arg a = {h, code ? 55 : 0, -1};
      pthread_t th;
      cr_assert_eq(pthread_create(&th, NULL, cplt_main, &a), 0);
      pthread_join(th, NULL);
      cr_assert_eq(atomic_load(&a.status), ORDO_OK, "%s", tu_kind_name(g_kind));
      ST(ordo_wait_for_var(e, v), code ? ORDO_ERR_OP_FAILED : ORDO_OK);
      cr_assert_eq(atomic_load(&r.frees), 1, "%s: free_fn of a deferred op ran %d times",
                   tu_kind_name(g_kind), atomic_load(&r.frees));
      cr_assert_eq(atomic_load(&dep.frees), 1, "%s", tu_kind_name(g_kind));
      cr_assert_eq(atomic_load(&dep.calls), code ? 0 : 1, "%s", tu_kind_name(g_kind));
      /* A stale complete does not free again. */
      ST(ordo_complete(h, 0, NULL), ORDO_ERR_INVALID_HANDLE);
      cr_assert_eq(atomic_load(&r.frees), 1, "%s", tu_kind_name(g_kind));
    }
    (void)ordo_wait_for_all(e);
    destroy_engine(e);
  }
}

Test(free_fn, runs_before_wait_for_var_returns) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    for (int i = 0; i < 12; ++i) {
      ordo_var v = new_var(e);
      ud_rec r;
      ud_init(&r, i % 3 == 2 ? 8 : 0); /* every third op fails */
      r.fn_sleep_ms = 5;
      r.free_sleep_ms = 15; /* a slow free_fn: a wait that does not wait for it returns early */
      if (i % 2 == 0) {
        ST(push_ud(e, &r, NULL, 0, &v, 1), ORDO_OK);
      } else {
        ST(push_ud(e, &r, &v, 1, NULL, 0), ORDO_OK); /* readers' free_fn too */
      }
      ordo_status want = (i % 3 == 2 && i % 2 == 0) ? ORDO_ERR_OP_FAILED : ORDO_OK;
      ST(ordo_wait_for_var(e, v), want);
      cr_assert_eq(atomic_load(&r.frees), 1,
                   "%s: iteration %d: ordo_wait_for_var returned before free_fn had run",
                   tu_kind_name(g_kind), i);
    }
    (void)ordo_wait_for_all(e);
    destroy_engine(e);
  }
}

Test(free_fn, runs_before_wait_for_all_returns) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    for (int i = 0; i < 6; ++i) {
      ud_rec r;
      ud_init(&r, 0);
      r.fn_sleep_ms = 5;
      r.free_sleep_ms = 15;
      ST(push_ud(e, &r, NULL, 0, &v, 1), ORDO_OK);
      ST(ordo_wait_for_all(e), ORDO_OK);
      cr_assert_eq(atomic_load(&r.frees), 1,
                   "%s: iteration %d: ordo_wait_for_all returned before free_fn had run",
                   tu_kind_name(g_kind), i);
    }
    destroy_engine(e);
  }
}

Test(free_fn, not_called_when_the_push_fails) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var good = new_var(e);
    ordo_var deleted = new_var(e);
    ST(ordo_var_delete(e, deleted), ORDO_OK);
    ud_rec r;
    ud_init(&r, 0);
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.free_fn = ud_free;

    ordo_var zero = 0, made_up = 0x00ff00ff00ff00ffull;
    ordo_var mixed[2] = {good, deleted};
    ST(ordo_opr_push(e, ud_fn, &r, NULL, 0, &zero, 1, &o), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_opr_push(e, ud_fn, &r, &made_up, 1, NULL, 0, &o), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_opr_push(e, ud_fn, &r, NULL, 0, &deleted, 1, &o), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_opr_push(e, ud_fn, &r, NULL, 0, mixed, 2, &o), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_opr_push(e, ud_fn, &r, mixed, 2, &good, 1, &o), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_opr_push(e, NULL, &r, NULL, 0, &good, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
    ST(ordo_opr_push(e, ud_fn, &r, NULL, 2, &good, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
    ST(ordo_opr_push(e, ud_fn, &r, NULL, 0, NULL, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
    ST(ordo_opr_push(NULL, ud_fn, &r, NULL, 0, &good, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
    o.next = &o; /* reserved, must be NULL */
    ST(ordo_opr_push(e, ud_fn, &r, NULL, 0, &good, 1, &o), ORDO_ERR_UNSUPPORTED);
    o.next = NULL;
    o.device_type = ORDO_DEVICE_CPU;
    o.device_id = 3; /* must be 0 for the CPU */
    ST(ordo_opr_push(e, ud_fn, &r, NULL, 0, &good, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
    o.device_id = 0;

    ST(ordo_wait_for_all(e), ORDO_OK);
    ST(ordo_wait_for_var(e, good), ORDO_OK);
    tu_sleep_ms(20);
    cr_assert_eq(atomic_load(&r.frees), 0, "%s: free_fn ran %d times for failed pushes",
                 tu_kind_name(g_kind), atomic_load(&r.frees));
    cr_assert_eq(atomic_load(&r.calls), 0, "%s: a failed push ran its op", tu_kind_name(g_kind));

    /* After shutdown has begun, through a second reference. */
    ST(ordo_engine_retain(e), ORDO_OK);
    ST(ordo_engine_destroy(e), ORDO_OK);
    ST(ordo_opr_push(e, ud_fn, &r, NULL, 0, NULL, 0, &o), ORDO_ERR_SHUTDOWN);
    ST(ordo_engine_release(e), ORDO_OK);
    cr_assert_eq(atomic_load(&r.frees), 0, "%s: free_fn ran for a push refused at shutdown",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&r.calls), 0, "%s", tu_kind_name(g_kind));
  }
}

Test(free_fn, runs_exactly_once_under_load) {
  enum { N = 5000, V = 16 };
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var vars[V];
    for (int i = 0; i < V; ++i) vars[i] = new_var(e);
    ud_rec* r = calloc(N, sizeof *r);
    cr_assert_not_null(r);
    unsigned rng = 99u;
    for (int i = 0; i < N; ++i) {
      ud_init(&r[i], (i % 97 == 0) ? 1 : 0);
      rng = rng * 1664525u + 1013904223u;
      ordo_var a = vars[(rng >> 8) % V], b = vars[(rng >> 16) % V];
      if ((rng >> 24) & 1) {
        ST(push_ud(e, &r[i], &a, 1, &b, 1), ORDO_OK);
      } else {
        ST(push_ud(e, &r[i], NULL, 0, &a, 1), ORDO_OK);
      }
      if (i % 500 == 0) {
        for (int j = 0; j < V; ++j) ST(ordo_var_clear_error(e, vars[j]), ORDO_OK);
      }
    }
    (void)ordo_wait_for_all(e);
    for (int i = 0; i < N; ++i) {
      cr_assert_eq(atomic_load(&r[i].frees), 1, "%s: free_fn of op %d ran %d times",
                   tu_kind_name(g_kind), i, atomic_load(&r[i].frees));
    }
    destroy_engine(e);
    free(r);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Prepared ops.                                                                               */
/* ------------------------------------------------------------------------------------------- */

typedef struct prep_ud {
  atomic_int calls;
  atomic_int frees;
  atomic_int calls_at_free;
} prep_ud;

static int32_t prep_fn(ordo_exec* exec, void* p) {
  (void)exec;
  atomic_fetch_add(&((prep_ud*)p)->calls, 1);
  return 0;
}

static void prep_free(void* p) {
  prep_ud* u = p;
  atomic_store(&u->calls_at_free, atomic_load(&u->calls));
  atomic_fetch_add(&u->frees, 1);
}

Test(free_fn, prepared_op_frees_once_after_delete_and_its_pushes) {
  enum { PUSHES = 100 };
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    prep_ud u;
    memset(&u, 0, sizeof u);
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.free_fn = prep_free;
    o.name = "prepared";
    ordo_opr op = 0;
    ST(ordo_opr_new(e, prep_fn, &u, NULL, 0, &v, 1, &o, &op), ORDO_OK);
    cr_assert_neq(op, 0, "%s", tu_kind_name(g_kind));

    /* Pushes that finished do not free it. */
    for (int i = 0; i < PUSHES; ++i) ST(ordo_opr_push_prepared(e, op, 0), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&u.calls), PUSHES, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&u.frees), 0, "%s: prepared op freed before ordo_opr_delete",
                 tu_kind_name(g_kind));

    /* Pushes held back by a deferred op: delete does not free until they have run. */
    tu_deferred d;
    tu_deferred_init(&d);
    ordo_var blockvars[1] = {v};
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, blockvars, 1, NULL), ORDO_OK);
    ordo_completion h = tu_deferred_wait(&d, 5000);
    cr_assert_neq(h, 0, "%s", tu_kind_name(g_kind));
    for (int i = 0; i < PUSHES; ++i) ST(ordo_opr_push_prepared(e, op, 0), ORDO_OK);
    ST(ordo_opr_delete(e, op), ORDO_OK);
    ST(ordo_opr_push_prepared(e, op, 0), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_opr_delete(e, op), ORDO_ERR_INVALID_HANDLE);
    tu_sleep_ms(20);
    cr_assert_eq(atomic_load(&u.frees), 0,
                 "%s: prepared op freed while %d of its pushes were still pending",
                 tu_kind_name(g_kind), 2 * PUSHES - atomic_load(&u.calls));
    ST(ordo_complete(h, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert(tu_wait_eq(&u.frees, 1, 2000), "%s: prepared op's free_fn ran %d times after delete",
              tu_kind_name(g_kind), atomic_load(&u.frees));
    cr_assert_eq(atomic_load(&u.calls), 2 * PUSHES, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&u.calls_at_free), 2 * PUSHES,
                 "%s: free_fn ran before the last push of the prepared op", tu_kind_name(g_kind));
    destroy_engine(e);
    cr_assert_eq(atomic_load(&u.frees), 1, "%s", tu_kind_name(g_kind));
  }
}

Test(free_fn, prepared_op_deleted_after_its_pushes_frees_once) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    prep_ud u;
    memset(&u, 0, sizeof u);
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.free_fn = prep_free;
    ordo_opr op = 0;
    ST(ordo_opr_new(e, prep_fn, &u, &v, 1, NULL, 0, &o, &op), ORDO_OK);
    for (int i = 0; i < 10; ++i) ST(ordo_opr_push_prepared(e, op, i), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    ST(ordo_opr_delete(e, op), ORDO_OK);
    cr_assert(tu_wait_eq(&u.frees, 1, 2000), "%s: free_fn ran %d times", tu_kind_name(g_kind),
              atomic_load(&u.frees));
    tu_sleep_ms(10);
    cr_assert_eq(atomic_load(&u.frees), 1, "%s", tu_kind_name(g_kind));

    /* Never pushed, deleted at once. */
    prep_ud u2;
    memset(&u2, 0, sizeof u2);
    ordo_opr op2 = 0;
    ST(ordo_opr_new(e, prep_fn, &u2, NULL, 0, NULL, 0, &o, &op2), ORDO_OK);
    ST(ordo_opr_delete(e, op2), ORDO_OK);
    cr_assert(tu_wait_eq(&u2.frees, 1, 2000), "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&u2.calls), 0, "%s", tu_kind_name(g_kind));

    /* Never deleted: freed at engine destroy. */
    prep_ud u3;
    memset(&u3, 0, sizeof u3);
    ordo_opr op3 = 0;
    ST(ordo_opr_new(e, prep_fn, &u3, NULL, 0, &v, 1, &o, &op3), ORDO_OK);
    ST(ordo_opr_push_prepared(e, op3, 0), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&u3.frees), 0, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
    cr_assert_eq(atomic_load(&u3.frees), 1,
                 "%s: a prepared op never deleted was freed %d times by destroy",
                 tu_kind_name(g_kind), atomic_load(&u3.frees));
    cr_assert_eq(atomic_load(&u.frees), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&u2.frees), 1, "%s", tu_kind_name(g_kind));
  }
}

Test(free_fn, prepared_op_creation_failure_does_not_free) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  ST(ordo_var_delete(e, v), ORDO_OK);
  prep_ud u;
  memset(&u, 0, sizeof u);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = prep_free;
  ordo_opr op = 0;
  ST(ordo_opr_new(e, prep_fn, &u, NULL, 0, &v, 1, &o, &op), ORDO_ERR_INVALID_HANDLE);
  ST(ordo_opr_new(e, NULL, &u, NULL, 0, NULL, 0, &o, &op), ORDO_ERR_INVALID_ARGUMENT);
  destroy_engine(e);
  cr_assert_eq(atomic_load(&u.frees), 0, "free_fn ran for a prepared op that was never created");
}
