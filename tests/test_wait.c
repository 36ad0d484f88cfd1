/*
 * §4 waiting: ordo_wait_for_var waits for every earlier op on the var (readers and writers) and
 * nothing else; timed waits time out without side effects; waits and destroy from inside an op
 * return ORDO_ERR_WOULD_DEADLOCK at once; waits on empty engines and bad handles.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(wait, .timeout = 30.0);

/* ------------------------------------------------------------------------------------------- */

typedef struct slow_ctx {
  atomic_int writers_done;
  atomic_int readers_done;
} slow_ctx;

static int32_t slow_writer(ordo_exec* exec, void* ud) {
  (void)exec;
  tu_sleep_ms(20);
  atomic_fetch_add(&((slow_ctx*)ud)->writers_done, 1);
  return 0;
}

static int32_t slow_reader(ordo_exec* exec, void* ud) {
  (void)exec;
  tu_sleep_ms(30);
  atomic_fetch_add(&((slow_ctx*)ud)->readers_done, 1);
  return 0;
}

/* Holds a worker until released (or 5 s pass); records whether it was released. */
typedef struct hold_ctx {
  atomic_int started;
  atomic_int release;
  atomic_int released_in_time;
} hold_ctx;

static int32_t hold_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  hold_ctx* h = ud;
  atomic_store(&h->started, 1);
  if (tu_wait_eq(&h->release, 1, 5000)) atomic_store(&h->released_in_time, 1);
  return 0;
}

Test(wait, wait_for_var_waits_for_earlier_readers_and_writers) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    slow_ctx c;
    memset(&c, 0, sizeof c);
    ST(ordo_opr_push(e, slow_writer, &c, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_opr_push(e, slow_reader, &c, &v, 1, NULL, 0, NULL), ORDO_OK);
    ST(ordo_opr_push(e, slow_reader, &c, &v, 1, NULL, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&c.writers_done), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.readers_done), 2,
                 "%s: wait_for_var returned with %d of 2 readers done", tu_kind_name(g_kind),
                 atomic_load(&c.readers_done));

    /* Only readers pending (wait after readers, no writer behind them). */
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 3; ++i)
      ST(ordo_opr_push(e, slow_reader, &c, &v, 1, NULL, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&c.readers_done), 3,
                 "%s: wait_for_var returned with %d of 3 readers done", tu_kind_name(g_kind),
                 atomic_load(&c.readers_done));

    /* A writer followed by readers that also read another var. */
    memset(&c, 0, sizeof c);
    ordo_var u = new_var(e);
    ordo_var both[2] = {u, v};
    ST(ordo_opr_push(e, slow_writer, &c, &u, 1, &v, 1, NULL), ORDO_OK);
    ST(ordo_opr_push(e, slow_reader, &c, both, 2, NULL, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&c.writers_done), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.readers_done), 1, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

Test(wait, wait_for_var_does_not_wait_for_other_vars) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    ordo_var v = new_var(e), other = new_var(e);
    hold_ctx h;
    memset(&h, 0, sizeof h);
    slow_ctx c;
    memset(&c, 0, sizeof c);
    ST(ordo_opr_push(e, hold_fn, &h, NULL, 0, &other, 1, NULL), ORDO_OK);
    ST(ordo_opr_push(e, slow_writer, &c, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(3000)), ORDO_OK);
    cr_assert_eq(atomic_load(&c.writers_done), 1, "%s", tu_kind_name(g_kind));
    /* The op on the other var is still held. */
    ST(ordo_wait_for_var_timeout(e, other, TU_MS_NS(10)), ORDO_ERR_TIMEOUT);
    atomic_store(&h.release, 1);
    ST(ordo_wait_for_var(e, other), ORDO_OK);
    cr_assert_eq(atomic_load(&h.released_in_time), 1,
                 "%s: wait_for_var(v) waited for an op on another var", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Timed waits.                                                                                */
/* ------------------------------------------------------------------------------------------- */

Test(wait, timed_waits_time_out_on_a_deferred_op_and_later_succeed) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e), free_var = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred(&d);
    atomic_int after;
    atomic_init(&after, 0);
    ST(ordo_opr_push(e, tu_count_fn, &after, &v, 1, NULL, 0, NULL), ORDO_OK);

    uint64_t t0 = tu_now_ns();
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(50)), ORDO_ERR_TIMEOUT);
    uint64_t took = tu_now_ns() - t0;
    cr_assert_geq(took, TU_MS_NS(45), "%s: 50 ms timeout returned after %llu ns",
                  tu_kind_name(g_kind), (unsigned long long)took);
    cr_assert_lt(took, TU_MS_NS(2000), "%s: 50 ms timeout returned after %llu ms",
                 tu_kind_name(g_kind), (unsigned long long)(took / 1000000u));

    t0 = tu_now_ns();
    ST(ordo_wait_for_all_timeout(e, TU_MS_NS(50)), ORDO_ERR_TIMEOUT);
    took = tu_now_ns() - t0;
    cr_assert_geq(took, TU_MS_NS(45), "%s", tu_kind_name(g_kind));
    cr_assert_lt(took, TU_MS_NS(2000), "%s", tu_kind_name(g_kind));

    /* Zero timeouts: a poll. */
    ST(ordo_wait_for_var_timeout(e, v, 0), ORDO_ERR_TIMEOUT);
    ST(ordo_wait_for_all_timeout(e, 0), ORDO_ERR_TIMEOUT);
    ST(ordo_wait_for_var_timeout(e, free_var, 0), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, free_var, TU_MS_NS(50)), ORDO_OK);

    /* The timeouts changed nothing: the dependent still waits, then runs. */
    cr_assert_eq(atomic_load(&after), 0, "%s", tu_kind_name(g_kind));
    ST(ordo_complete(h, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(5000)), ORDO_OK);
    ST(ordo_wait_for_all_timeout(e, TU_MS_NS(5000)), ORDO_OK);
    cr_assert_eq(atomic_load(&after), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&d.calls), 1, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* Completes h once thread `waiter` is parked (in the wait the test makes), setting `completing`
 * first. It used to sleep 50 ms and the test required the wait to take 30: a waiting thread
 * that reached its wait late failed it, one that returned early by 20 ms passed. */
typedef struct delayed_complete {
  ordo_completion h;
  int waiter;
  atomic_int saw_waiter_parked;
  atomic_int completing;
  atomic_int status;
} delayed_complete;

static void* delayed_complete_main(void* p) {
  delayed_complete* c = p;
  atomic_store(&c->saw_waiter_parked, tu_wait_thread_parked(c->waiter, SYS_futex, -1, 5000));
  atomic_store(&c->completing, 1);
  atomic_store(&c->status, ordo_complete(c->h, 0, NULL));
  return NULL;
}

static void start_delayed_complete(delayed_complete* c, pthread_t* th, ordo_completion h) {
  c->h = h;
  c->waiter = tu_gettid();
  atomic_init(&c->saw_waiter_parked, 0);
  atomic_init(&c->completing, 0);
  atomic_init(&c->status, -1);
  cr_assert_eq(pthread_create(th, NULL, delayed_complete_main, c), 0);
}

Test(wait, huge_timeouts_do_not_overflow) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    ST(ordo_wait_for_var_timeout(e, v, UINT64_MAX), ORDO_OK);
    ST(ordo_wait_for_all_timeout(e, UINT64_MAX), ORDO_OK);

    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    delayed_complete c;
    pthread_t th;
    start_delayed_complete(&c, &th, wait_deferred(&d));
    ST(ordo_wait_for_var_timeout(e, v, UINT64_MAX), ORDO_OK);
    cr_assert_eq(atomic_load(&c.completing), 1,
                 "%s: wait with UINT64_MAX timeout returned before the op was completed",
                 tu_kind_name(g_kind));
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&c.saw_waiter_parked), 1,
                 "%s: the wait was not seen asleep before the op was completed",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.status), ORDO_OK, "%s", tu_kind_name(g_kind));

    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    delayed_complete c2;
    start_delayed_complete(&c2, &th, wait_deferred(&d));
    ST(ordo_wait_for_all_timeout(e, UINT64_MAX - 1), ORDO_OK);
    cr_assert_eq(atomic_load(&c2.completing), 1,
                 "%s: wait_for_all with a huge timeout returned before the op was completed",
                 tu_kind_name(g_kind));
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&c2.saw_waiter_parked), 1,
                 "%s: wait_for_all was not seen asleep before the op was completed",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c2.status), ORDO_OK, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

static int32_t fail_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  return 66;
}

Test(wait, wait_for_all_timeout_keeps_the_failure_record) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e), x = new_var(e);
    ordo_push_opts o = tu_opts_named("kept_failure");
    ST(ordo_opr_push(e, fail_fn, NULL, NULL, 0, &x, 1, &o), ORDO_OK);
    ST(ordo_wait_for_var(e, x), ORDO_ERR_OP_FAILED);
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred(&d);
    ST(ordo_wait_for_all_timeout(e, TU_MS_NS(30)), ORDO_ERR_TIMEOUT);
    ST(ordo_complete(h, 0, NULL), ORDO_OK);
    ordo_status s = ordo_wait_for_all(e);
    char msg[512];
    ordo_last_error_copy(msg, sizeof msg);
    cr_assert_eq(s, ORDO_ERR_OP_FAILED, "%s: the failure record was lost by a timed-out wait",
                 tu_kind_name(g_kind));
    cr_assert_not_null(strstr(msg, "kept_failure"), "%s: \"%s\"", tu_kind_name(g_kind), msg);
    ST(ordo_wait_for_all(e), ORDO_OK);

    /* A timed wait that succeeds consumes the record like ordo_wait_for_all. */
    ST(ordo_opr_push(e, fail_fn, NULL, NULL, 0, &x, 1, &o), ORDO_OK);
    ST(ordo_wait_for_all_timeout(e, TU_MS_NS(5000)), ORDO_ERR_OP_FAILED);
    ST(ordo_wait_for_all_timeout(e, TU_MS_NS(5000)), ORDO_OK);
    destroy_engine(e);
  }
}

/* Several threads wait on one var at once; all wake when it completes. */
typedef struct waiter_arg {
  ordo_engine* e;
  ordo_var v;
  atomic_int* returned;
  atomic_int status;
  atomic_int tid; /* set just before the wait */
} waiter_arg;

static void* waiter_main(void* p) {
  waiter_arg* a = p;
  atomic_store(&a->tid, tu_gettid());
  atomic_store(&a->status, ordo_wait_for_var(a->e, a->v));
  atomic_fetch_add(a->returned, 1);
  return NULL;
}

/* Waits (up to 5 s) until the waiter is parked in its wait (asleep in a futex). A sleep, instead,
 * lets a late waiter make its call after the step it was meant to wait through: the test then
 * checks less without saying so. */
static void assert_waiter_parked(waiter_arg* a, const char* what) {
  uint64_t deadline = tu_now_ms() + 5000;
  while (atomic_load(&a->tid) == 0 && tu_now_ms() < deadline) tu_sleep_us(50);
  cr_assert_neq(atomic_load(&a->tid), 0, "%s: the waiting thread never ran", tu_kind_name(g_kind));
  cr_assert(tu_wait_thread_parked(atomic_load(&a->tid), SYS_futex, -1, 5000),
            "%s: the waiting thread was not seen asleep %s within 5 s (it returned %s)",
            tu_kind_name(g_kind), what, ordo_status_string(atomic_load(&a->status)));
}

Test(wait, many_threads_wait_on_one_var) {
  enum { W = 4 };
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred(&d);
    atomic_int returned;
    atomic_init(&returned, 0);
    waiter_arg args[W];
    pthread_t th[W];
    for (int i = 0; i < W; ++i) {
      args[i].e = e;
      args[i].v = v;
      args[i].returned = &returned;
      atomic_init(&args[i].status, -1);
      atomic_init(&args[i].tid, 0);
      cr_assert_eq(pthread_create(&th[i], NULL, waiter_main, &args[i]), 0);
    }
    /* Every waiter in its wait before the op completes (else it tests nothing). */
    for (int i = 0; i < W; ++i) assert_waiter_parked(&args[i], "in its wait");
    cr_assert_eq(atomic_load(&returned), 0, "%s: a waiter returned before the op completed",
                 tu_kind_name(g_kind));
    ST(ordo_complete(h, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&returned, W, 5000), "%s: only %d of %d waiters woke",
              tu_kind_name(g_kind), atomic_load(&returned), W);
    for (int i = 0; i < W; ++i) {
      pthread_join(th[i], NULL);
      cr_assert_eq(atomic_load(&args[i].status), ORDO_OK, "%s", tu_kind_name(g_kind));
    }
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Waits and destroy from inside an op.                                                        */
/* ------------------------------------------------------------------------------------------- */

typedef struct inside_ctx {
  ordo_engine* e;
  ordo_var own;   /* the var the op mutates */
  ordo_var other; /* a var with nothing pending */
  ordo_engine* foreign;
  ordo_var foreign_var;
  atomic_int st_var_own;
  atomic_int st_var_other;
  atomic_int st_var_timeout;
  atomic_int st_all;
  atomic_int st_all_timeout;
  atomic_int st_destroy;
  atomic_int st_foreign;
  atomic_int st_push_after;
  _Atomic uint64_t slowest_ns;
  atomic_int done;
} inside_ctx;

static void timed_store(inside_ctx* c, atomic_int* slot, ordo_status s, uint64_t t0) {
  uint64_t dt = tu_now_ns() - t0;
  uint64_t cur = atomic_load(&c->slowest_ns);
  while (dt > cur && !atomic_compare_exchange_weak(&c->slowest_ns, &cur, dt)) {
  }
  atomic_store(slot, s);
}

static int32_t inside_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  inside_ctx* c = ud;
  uint64_t t0 = tu_now_ns();
  timed_store(c, &c->st_var_own, ordo_wait_for_var(c->e, c->own), t0);
  t0 = tu_now_ns();
  timed_store(c, &c->st_var_other, ordo_wait_for_var(c->e, c->other), t0);
  t0 = tu_now_ns();
  timed_store(c, &c->st_var_timeout, ordo_wait_for_var_timeout(c->e, c->own, TU_MS_NS(3000)), t0);
  t0 = tu_now_ns();
  timed_store(c, &c->st_all, ordo_wait_for_all(c->e), t0);
  t0 = tu_now_ns();
  timed_store(c, &c->st_all_timeout, ordo_wait_for_all_timeout(c->e, TU_MS_NS(3000)), t0);
  t0 = tu_now_ns();
  timed_store(c, &c->st_destroy, ordo_engine_destroy(c->e), t0);
  if (c->foreign) atomic_store(&c->st_foreign, ordo_wait_for_var(c->foreign, c->foreign_var));
  /* The refused destroy did nothing: pushing still works. */
  atomic_store(&c->st_push_after,
               ordo_opr_push(c->e, tu_count_fn, &c->done, NULL, 0, NULL, 0, NULL));
  return 0;
}

Test(wait, waits_and_destroy_inside_an_op_would_deadlock) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    int32_t kind = tu_all_kinds[k];
    ordo_engine* e = make_engine(kind);
    ordo_engine* f = NULL;
    ST(tu_engine_create(kind, 2, &f), ORDO_OK);
    inside_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.own = new_var(e);
    c.other = new_var(e);
    c.foreign = f;
    ST(ordo_var_new(f, &c.foreign_var), ORDO_OK);
    atomic_int fdone;
    atomic_init(&fdone, 0);
    ST(ordo_opr_push(f, tu_count_fn, &fdone, NULL, 0, &c.foreign_var, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(f, c.foreign_var), ORDO_OK);
    atomic_store(&c.st_var_own, -1);
    atomic_store(&c.st_var_other, -1);
    atomic_store(&c.st_var_timeout, -1);
    atomic_store(&c.st_all, -1);
    atomic_store(&c.st_all_timeout, -1);
    atomic_store(&c.st_destroy, -1);
    atomic_store(&c.st_foreign, -1);
    atomic_store(&c.st_push_after, -1);

    ST(ordo_opr_push(e, inside_fn, &c, NULL, 0, &c.own, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, c.own, TU_MS_NS(20000)), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);

    const char* kn = tu_kind_name(kind);
    cr_assert_eq(atomic_load(&c.st_var_own), ORDO_ERR_WOULD_DEADLOCK,
                 "%s: wait_for_var(own var) inside an op -> %s", kn,
                 ordo_status_string(atomic_load(&c.st_var_own)));
    cr_assert_eq(atomic_load(&c.st_var_other), ORDO_ERR_WOULD_DEADLOCK,
                 "%s: wait_for_var(idle var) inside an op -> %s", kn,
                 ordo_status_string(atomic_load(&c.st_var_other)));
    cr_assert_eq(atomic_load(&c.st_var_timeout), ORDO_ERR_WOULD_DEADLOCK,
                 "%s: wait_for_var_timeout inside an op -> %s", kn,
                 ordo_status_string(atomic_load(&c.st_var_timeout)));
    cr_assert_eq(atomic_load(&c.st_all), ORDO_ERR_WOULD_DEADLOCK,
                 "%s: wait_for_all inside an op -> %s", kn,
                 ordo_status_string(atomic_load(&c.st_all)));
    cr_assert_eq(atomic_load(&c.st_all_timeout), ORDO_ERR_WOULD_DEADLOCK,
                 "%s: wait_for_all_timeout inside an op -> %s", kn,
                 ordo_status_string(atomic_load(&c.st_all_timeout)));
    cr_assert_eq(atomic_load(&c.st_destroy), ORDO_ERR_WOULD_DEADLOCK,
                 "%s: engine_destroy inside an op -> %s", kn,
                 ordo_status_string(atomic_load(&c.st_destroy)));
    cr_assert_lt(atomic_load(&c.slowest_ns), TU_MS_NS(1000),
                 "%s: a refused wait inside an op took %llu ms", kn,
                 (unsigned long long)(atomic_load(&c.slowest_ns) / 1000000u));
    cr_assert_eq(atomic_load(&c.st_foreign), ORDO_OK,
                 "%s: waiting on another engine's settled var inside an op -> %s", kn,
                 ordo_status_string(atomic_load(&c.st_foreign)));
    cr_assert_eq(atomic_load(&c.st_push_after), ORDO_OK,
                 "%s: push after a refused destroy inside an op -> %s", kn,
                 ordo_status_string(atomic_load(&c.st_push_after)));
    cr_assert_eq(atomic_load(&c.done), 1, "%s", kn);

    /* The engine still works. */
    atomic_int ran;
    atomic_init(&ran, 0);
    for (int i = 0; i < 10; ++i)
      ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, &c.own, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, c.own), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&ran), 10, "%s", kn);
    destroy_engine(e);
    ST(ordo_engine_destroy(f), ORDO_OK);
  }
}

/* A deferred op whose callback waits: still refused (it is inside the op). */
typedef struct defer_wait_ctx {
  ordo_engine* e;
  ordo_var v;
  atomic_int st_wait;
  _Atomic uint64_t handle;
} defer_wait_ctx;

static int32_t defer_then_wait_fn(ordo_exec* exec, void* ud) {
  defer_wait_ctx* c = ud;
  ordo_completion h = 0;
  ordo_exec_defer(exec, &h);
  atomic_store(&c->st_wait, ordo_wait_for_var(c->e, c->v));
  atomic_store(&c->handle, h);
  return 0;
}

Test(wait, wait_inside_a_deferred_op_would_deadlock) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    defer_wait_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.v = new_var(e);
    atomic_store(&c.st_wait, -1);
    ST(ordo_opr_push(e, defer_then_wait_fn, &c, NULL, 0, &c.v, 1, NULL), ORDO_OK);
    uint64_t deadline = tu_now_ms() + 5000;
    while (atomic_load(&c.handle) == 0 && tu_now_ms() < deadline) tu_sleep_us(100);
    cr_assert_neq(atomic_load(&c.handle), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.st_wait), ORDO_ERR_WOULD_DEADLOCK, "%s: -> %s",
                 tu_kind_name(g_kind), ordo_status_string(atomic_load(&c.st_wait)));
    ST(ordo_complete(atomic_load(&c.handle), 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, c.v), ORDO_OK);
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Empty engines and bad handles.                                                              */
/* ------------------------------------------------------------------------------------------- */

Test(wait, waits_on_an_idle_engine_return_ok) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ST(ordo_wait_for_all(e), ORDO_OK);
    ST(ordo_wait_for_all_timeout(e, 0), ORDO_OK);
    ST(ordo_wait_for_all_timeout(e, TU_MS_NS(10)), ORDO_OK);
    ordo_var v = new_var(e);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, v, 0), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    /* After everything finished, waits return at once. */
    atomic_int ran;
    atomic_init(&ran, 0);
    ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, v, 0), ORDO_OK);
    ST(ordo_wait_for_all_timeout(e, 0), ORDO_OK);
    cr_assert_eq(atomic_load(&ran), 1, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

Test(wait, waits_with_bad_handles) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_engine* f = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    ordo_var foreign = new_var(f);
    ST(ordo_var_delete(e, v), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(10)), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_var(e, 0), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_var_timeout(e, 0, 0), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_var(e, 0x7777777777777777ull), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_var(NULL, v), ORDO_ERR_INVALID_ARGUMENT);
    ST(ordo_wait_for_var_timeout(NULL, v, 0), ORDO_ERR_INVALID_ARGUMENT);
    ST(ordo_wait_for_all(NULL), ORDO_ERR_INVALID_ARGUMENT);
    ST(ordo_wait_for_all_timeout(NULL, 0), ORDO_ERR_INVALID_ARGUMENT);
    /* A var of another engine, unless its bits happen to name a live var of e. */
    ordo_var probe = new_var(e);
    if (foreign != probe) ST(ordo_wait_for_var(e, foreign), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_var(f, foreign), ORDO_OK);

    /* A var deleted while an op on it is pending: the wait after the delete is refused. */
    ordo_var w = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &w, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred(&d);
    ST(ordo_var_delete(e, w), ORDO_OK);
    ST(ordo_wait_for_var(e, w), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_complete(h, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    ST(ordo_wait_for_var(e, w), ORDO_ERR_INVALID_HANDLE);
    destroy_engine(f);
    destroy_engine(e);
  }
}

/* A wait that returned leaves nothing behind: an immediate zero-timeout wait finds the var idle
 * (the signal op used to release the var after waking the waiter), and every count agrees that
 * the ops waited for are complete (workers used to count completions in batches after waking the
 * waiter; under load, or TSan, the waiter won that race and wait_for_all_timeout(e, 0) said
 * TIMEOUT). */
Test(wait, a_returned_wait_leaves_the_var_idle) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    ordo_var v = new_var(e);
    atomic_int ran;
    atomic_init(&ran, 0);
    for (int i = 0; i < 3000; ++i) {
      ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, &v, 1, NULL), ORDO_OK);
      ST(ordo_wait_for_var(e, v), ORDO_OK);
      ordo_stats st;
      memset(&st, 0, sizeof st);
      st.struct_size = sizeof st;
      ST(ordo_engine_stats(e, &st), ORDO_OK);
      cr_assert_eq(st.pending, 0,
                   "%s: round %d: %llu ops pending after ordo_wait_for_var (pushed %llu, "
                   "completed %llu)",
                   tu_kind_name(g_kind), i, (unsigned long long)st.pending,
                   (unsigned long long)st.pushed, (unsigned long long)st.completed);
      ST(ordo_wait_for_all_timeout(e, 0), ORDO_OK);
      ST(ordo_wait_for_var_timeout(e, v, 0), ORDO_OK);
    }
    cr_assert_eq(atomic_load(&ran), 3000, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* ordo_wait_for_all returns only once the ops it waited for have released their vars, not
 * merely been counted as completed (they are counted first, then release): an op of 4,000 vars
 * takes tens of microseconds to release them all, so a wait that skipped the releases still in
 * flight (wait_for_releases) would return with the last vars held, and the polls below would
 * say TIMEOUT. Both ways an op is finished: on a worker, and by ordo_complete on a thread that
 * is not a worker (counted on the engine's shared counter). */
enum { kManyVars = 4000 };
static ordo_var g_many[kManyVars];

static ordo_completion g_many_completion;
static atomic_int g_many_complete_status;

static void* complete_many(void* arg) {
  (void)arg;
  atomic_store(&g_many_complete_status, ordo_complete(g_many_completion, 0, NULL));
  return NULL;
}

static void check_every_var_idle(ordo_engine* e, int round, const char* how) {
  for (int i = kManyVars - 1; i >= 0; --i) { /* the last released first */
    ordo_status s = ordo_wait_for_var_timeout(e, g_many[i], 0);
    cr_assert_eq(s, ORDO_OK, "%s: round %d (%s): var %d of %d still held after ordo_wait_for_all",
                 tu_kind_name(g_kind), round, how, i, kManyVars);
  }
}

Test(wait, wait_for_all_returns_once_every_var_is_released, .timeout = 60.0) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    for (int i = 0; i < kManyVars; ++i) g_many[i] = new_var(e);
    atomic_int ran;
    atomic_init(&ran, 0);
    for (int round = 0; round < 20; ++round) {
      ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, g_many, kManyVars, NULL), ORDO_OK);
      ST(ordo_wait_for_all(e), ORDO_OK);
      check_every_var_idle(e, round, "finished on a worker");
      tu_deferred d;
      tu_deferred_init(&d);
      ST(ordo_opr_push(e, tu_defer_fn, &d, g_many, kManyVars / 2, g_many + kManyVars / 2,
                       kManyVars / 2, NULL),
         ORDO_OK);
      g_many_completion = tu_deferred_wait(&d, 10000);
      cr_assert_neq(g_many_completion, 0, "%s: the op never deferred", tu_kind_name(g_kind));
      pthread_t t;
      cr_assert_eq(pthread_create(&t, NULL, complete_many, NULL), 0);
      ST(ordo_wait_for_all(e), ORDO_OK); /* returns once the other thread's completion is done */
      check_every_var_idle(e, round, "completed by ordo_complete on another thread");
      pthread_join(t, NULL);
      cr_assert_eq(atomic_load(&g_many_complete_status), ORDO_OK);
    }
    cr_assert_eq(atomic_load(&ran), 20);
    destroy_engine(e);
  }
}

/* Two waits and a delete race on one var, every thread on one CPU so that each is preempted
 * at random points. When the delete lands between the first wait reserving the var for its mark
 * and pushing it, that push fails; the waits that joined the reservation meanwhile must then be
 * woken to begin again (cancel_wait_reservation). That exact interleaving is rare here (a test
 * without the wake still passed 3 runs of 1,500 rounds); tests/internal/test_wait_seams.cpp
 * forces it. This one checks the three calls' outcomes over many interleavings: each wait
 * returns OK (its mark went in before the delete) or INVALID_HANDLE (the var was deleted first,
 * or before the wait had a mark of its own). */
typedef struct race_ctx {
  ordo_engine* e;
  ordo_var v;
  atomic_int go;
  atomic_int done;
  atomic_int status[3];
  int spins[3]; /* yields before acting: varies who goes first */
} race_ctx;

static void* race_wait(void* arg, int who) {
  race_ctx* c = arg;
  while (!atomic_load(&c->go)) sched_yield();
  for (int i = 0; i < c->spins[who]; i++) sched_yield();
  ordo_status s = who == 2 ? ordo_var_delete(c->e, c->v) : ordo_wait_for_var(c->e, c->v);
  atomic_store(&c->status[who], s);
  atomic_fetch_add(&c->done, 1);
  return NULL;
}
static void* race_waiter0(void* arg) {
  return race_wait(arg, 0);
}
static void* race_waiter1(void* arg) {
  return race_wait(arg, 1);
}
static void* race_deleter(void* arg) {
  return race_wait(arg, 2);
}

Test(wait, waits_joined_to_a_mark_that_fails_to_push_begin_again, .timeout = 120.0) {
  cr_assert_eq(tu_pin_to_one_cpu(), 0); /* this thread and every thread it creates */
  g_kind = ORDO_ENGINE_PER_DEVICE;
  ordo_engine* e = make_engine(g_kind);
  unsigned seed = 12345;
  for (int round = 0; round < 1500; round++) {
    race_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.v = new_var(e);
    for (int i = 0; i < 3; i++) {
      atomic_init(&c.status[i], -1);
      c.spins[i] = (int)(rand_r(&seed) % 3);
    }
    tu_deferred d; /* holds the var, so that the waits block until it completes */
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &c.v, 1, NULL), ORDO_OK);
    ordo_completion done = tu_deferred_wait(&d, 10000);
    cr_assert_neq(done, 0);
    pthread_t t[3];
    cr_assert_eq(pthread_create(&t[0], NULL, race_waiter0, &c), 0);
    cr_assert_eq(pthread_create(&t[1], NULL, race_waiter1, &c), 0);
    cr_assert_eq(pthread_create(&t[2], NULL, race_deleter, &c), 0);
    atomic_store(&c.go, 1);
    tu_wait_eq(&c.done, 1, 1); /* the delete, or a wait that found it, may return early */
    ST(ordo_complete(done, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&c.done, 3, 20000), "round %d: a wait never returned (statuses %d %d)",
              round, atomic_load(&c.status[0]), atomic_load(&c.status[1]));
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    ST(atomic_load(&c.status[2]), ORDO_OK);
    for (int i = 0; i < 2; i++) {
      ordo_status s = atomic_load(&c.status[i]);
      cr_assert(s == ORDO_OK || s == ORDO_ERR_INVALID_HANDLE, "round %d: wait %d: %s", round, i,
                ordo_status_string(s));
    }
  }
  ST(ordo_wait_for_all(e), ORDO_OK);
  destroy_engine(e);
}

/* A thread records the engines whose ops are on its stack, up to 8. Nested deeper than that
 * (naive engines whose ops push into the next one run inline), a wait from the innermost op on
 * its own engine used to wait for itself: refused only for the first 8 (found by review). */
enum { kNestedEngines = 10 };
static ordo_engine* g_nested[kNestedEngines];
static ordo_status g_nested_wait[kNestedEngines];

static int32_t op_nest(ordo_exec* x, void* ud) {
  (void)x;
  intptr_t level = (intptr_t)ud;
  if (level + 1 < kNestedEngines) {
    return ordo_opr_push(g_nested[level + 1], op_nest, (void*)(level + 1), NULL, 0, NULL, 0, NULL);
  }
  for (int k = 0; k < kNestedEngines; k++) {
    g_nested_wait[k] = ordo_wait_for_all_timeout(g_nested[k], 200000000ull);
  }
  return 0;
}

Test(wait, waits_nested_deeper_than_recorded_are_refused) {
  for (int i = 0; i < kNestedEngines; i++) {
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.kind = ORDO_ENGINE_NAIVE;
    cr_assert_eq(ordo_engine_create(&cfg, &g_nested[i]), ORDO_OK);
    g_nested_wait[i] = -1;
  }
  cr_assert_eq(ordo_opr_push(g_nested[0], op_nest, (void*)0, NULL, 0, NULL, 0, NULL), ORDO_OK);
  for (int k = 0; k < kNestedEngines; k++) {
    cr_assert_eq(g_nested_wait[k], ORDO_ERR_WOULD_DEADLOCK, "wait on engine %d from depth %d: %s",
                 k, kNestedEngines, ordo_status_string(g_nested_wait[k]));
  }
  for (int i = kNestedEngines - 1; i >= 0; i--)
    cr_assert_eq(ordo_engine_destroy(g_nested[i]), ORDO_OK);
}

/* A poll (a zero timeout) looks and returns: it leaves nothing behind and never sleeps. A
 * wait_for_var_timeout(v, 0) that queued its marker on v (ordered like a write) and then timed
 * out left the marker there: a reader pushed after the poll then had to wait for the readers
 * before it, so two readers that wait for each other hung (SPEC 2.2, and 4: "timed variants
 * return ORDO_ERR_TIMEOUT without side effects"), and each poll cost a heap block and a sleep. */
/* The second reader releases the first, which is hold_fn (above): they meet only if they overlap.
 */
static int32_t release_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  atomic_store(&((hold_ctx*)ud)->release, 1);
  return 0;
}

static long voluntary_switches(void) {
  struct rusage u;
  cr_assert_eq(getrusage(RUSAGE_THREAD, &u), 0);
  return u.ru_nvcsw;
}

Test(wait, a_poll_leaves_nothing_behind_and_never_sleeps) {
  enum { kPolls = 1000 };
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    if (tu_all_kinds[k] == ORDO_ENGINE_NAIVE) continue; /* ops run in their push: no overlap */
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    hold_ctx r;
    memset(&r, 0, sizeof r);
    ST(ordo_opr_push(e, hold_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&r.started, 1, 5000), "%s: the first reader never ran",
              tu_kind_name(g_kind));
    long before = voluntary_switches();
    for (int i = 0; i < kPolls; ++i) {
      ST(ordo_wait_for_var_timeout(e, v, 0), ORDO_ERR_TIMEOUT);
      ST(ordo_wait_for_all_timeout(e, 0), ORDO_ERR_TIMEOUT);
    }
    long slept = voluntary_switches() - before;
    ST(ordo_opr_push(e, release_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(10000)), ORDO_OK);
    cr_assert_eq(atomic_load(&r.released_in_time), 1,
                 "%s: a reader pushed after %d polls of its var could not run beside the reader "
                 "pushed before them",
                 tu_kind_name(g_kind), kPolls);
    if (!tu_under_valgrind()) { /* valgrind parks threads in the kernel at will */
      cr_assert_leq(slept, kPolls / 10, "%s: %d pairs of polls slept %ld times",
                    tu_kind_name(g_kind), kPolls, slept);
    }
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* A wait orders nothing (SPEC 2.3): readers pushed after it run beside the readers before it.  */
/* ------------------------------------------------------------------------------------------- */

static void start_waiter(waiter_arg* a, pthread_t* th, ordo_engine* e, ordo_var v,
                         atomic_int* returned) {
  a->e = e;
  a->v = v;
  a->returned = returned;
  atomic_init(&a->status, -1);
  atomic_init(&a->tid, 0);
  cr_assert_eq(pthread_create(th, NULL, waiter_main, a), 0);
}

/* A reader holds v while `waits` waits of `timeout_ns` each time out; then a reader pushed after
 * them must run beside it (it releases the first). */
static void check_expired_waits_order_nothing(ordo_engine* e, ordo_var v, int waits,
                                              uint64_t timeout_ns) {
  hold_ctx r;
  memset(&r, 0, sizeof r);
  ST(ordo_opr_push(e, hold_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
  cr_assert(tu_wait_eq(&r.started, 1, 5000), "%s: the first reader never ran",
            tu_kind_name(g_kind));
  for (int i = 0; i < waits; ++i) ST(ordo_wait_for_var_timeout(e, v, timeout_ns), ORDO_ERR_TIMEOUT);
  ST(ordo_opr_push(e, release_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
  ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(10000)), ORDO_OK);
  cr_assert_eq(atomic_load(&r.released_in_time), 1,
               "%s: a reader pushed after %d timed-out waits could not run beside the reader "
               "pushed before them",
               tu_kind_name(g_kind), waits);
}

/* A wait that timed out left its marker on the var, ordered like a write: the reader pushed
 * after it then waited for the reader before it, so two readers that wait for each other hung
 * (SPEC 2.2), and the timed wait was not "without side effects" (SPEC 4). */
Test(wait, a_timed_out_wait_does_not_order_later_readers) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    check_expired_waits_order_nothing(e, new_var(e), 1, TU_MS_NS(20));
    destroy_engine(e);
  }
}

/* The same with a thread that polls with short timeouts: each expired wait leaves its mark
 * behind, and the next wait, finding it outstanding, was pushed as a write (one mark per var):
 * from the second expired wait on, a reader pushed after them waited for the reader before
 * (found by review). A wait with nothing pushed on the var since the outstanding mark now joins
 * it, and the joined waits return together once the ops before them are done. */
Test(wait, repeated_timed_out_waits_do_not_order_later_readers) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    ordo_var v = new_var(e);
    check_expired_waits_order_nothing(e, v, 4, TU_MS_NS(2));
    /* And the other way round: a writer pushed after them still waits for the reader. */
    hold_ctx r;
    memset(&r, 0, sizeof r);
    ST(ordo_opr_push(e, hold_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&r.started, 1, 5000), "%s", tu_kind_name(g_kind));
    for (int i = 0; i < 3; ++i) ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(2)), ORDO_ERR_TIMEOUT);
    atomic_int wrote;
    atomic_init(&wrote, 0);
    ST(ordo_opr_push(e, tu_count_fn, &wrote, NULL, 0, &v, 1, NULL), ORDO_OK);
    tu_sleep_ms(20);
    cr_assert_eq(atomic_load(&wrote), 0, "%s: a writer overtook a running reader",
                 tu_kind_name(g_kind));
    atomic_store(&r.release, 1);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&wrote), 1, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* While a thread waits on a var that readers hold, a reader pushed after the wait starts at once
 * (beside them), and the wait returns once the readers before it are done, not waiting for the
 * one after it. `queued_first`: the readers and the wait queue behind a writer first (the wait is
 * then granted together with the readers around it), else they find the var held by readers. */
static void check_wait_between_readers(bool queued_first) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    const char* kind = tu_kind_name(g_kind);
    ordo_var v = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ordo_completion writer = 0;
    if (queued_first) {
      ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
      writer = wait_deferred(&d);
    }
    hold_ctx before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    ST(ordo_opr_push(e, hold_fn, &before, &v, 1, NULL, 0, NULL), ORDO_OK);
    if (!queued_first) {
      cr_assert(tu_wait_eq(&before.started, 1, 5000), "%s: the first reader never ran", kind);
    }
    atomic_int returned;
    atomic_init(&returned, 0);
    waiter_arg a;
    pthread_t th;
    start_waiter(&a, &th, e, v, &returned);
    assert_waiter_parked(&a, "in its wait"); /* before the reader after it is pushed */
    ST(ordo_opr_push(e, hold_fn, &after, &v, 1, NULL, 0, NULL), ORDO_OK);
    if (queued_first) ST(ordo_complete(writer, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&after.started, 1, 5000),
              "%s: a reader pushed after a wait did not start beside the reader before it", kind);
    cr_assert_eq(atomic_load(&returned), 0, "%s: the wait returned while an earlier reader ran",
                 kind);
    atomic_store(&before.release, 1);
    cr_assert(tu_wait_eq(&returned, 1, 5000),
              "%s: the wait did not return when the reader before it finished (the reader "
              "after it still runs)",
              kind);
    cr_assert_eq(atomic_load(&after.released_in_time), 0, "%s", kind);
    pthread_join(th, NULL);
    ST(atomic_load(&a.status), ORDO_OK);
    atomic_store(&after.release, 1);
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&before.released_in_time), 1, "%s", kind);
    cr_assert_eq(atomic_load(&after.released_in_time), 1, "%s", kind);
    destroy_engine(e);
  }
}

Test(wait, a_wait_among_active_readers_orders_nothing) {
  check_wait_between_readers(false);
}

Test(wait, a_wait_queued_among_readers_orders_nothing) {
  check_wait_between_readers(true);
}

/* A wait made while an earlier wait's mark was pending (it timed out; the reader before it still
 * ran) and after another op was pushed on the var could not join that mark, and was queued as a
 * write (one mark per var): a reader pushed after it waited for the reader before it, so two
 * readers that wait for each other hung (found by review; it was the open reproducer
 * fuzz/repro/open_wait_after_a_push_while_a_mark_is_pending.c). Such a wait now waits behind the
 * pending mark, and one that times out there leaves nothing on the var. */
Test(wait, a_wait_after_a_push_while_a_mark_is_pending_orders_nothing) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    ordo_var v = new_var(e);
    hold_ctx r;
    memset(&r, 0, sizeof r);
    atomic_int between;
    atomic_init(&between, 0);
    ST(ordo_opr_push(e, hold_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&r.started, 1, 5000), "%s: the first reader never ran",
              tu_kind_name(g_kind));
    for (int i = 0; i < 3; ++i) {
      ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(2)), ORDO_ERR_TIMEOUT);
      ST(ordo_opr_push(e, tu_count_fn, &between, &v, 1, NULL, 0, NULL), ORDO_OK);
    }
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(2)), ORDO_ERR_TIMEOUT);
    ST(ordo_opr_push(e, release_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(10000)), ORDO_OK);
    cr_assert_eq(atomic_load(&r.released_in_time), 1,
                 "%s: a reader pushed after waits that came after other pushes could not run "
                 "beside the reader pushed before them",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&between), 3, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* A reader holds v while a wait times out (its mark stays on v), and a second reader runs beside
 * it; then another thread waits on v, behind that mark: parked there when this returns. */
typedef struct behind_setup {
  hold_ctx first, between;
  atomic_int returned;
  waiter_arg a;
  pthread_t th;
} behind_setup;

static void start_a_wait_behind_a_mark(behind_setup* b, ordo_engine* e, ordo_var v) {
  const char* kind = tu_kind_name(g_kind);
  memset(&b->first, 0, sizeof b->first);
  memset(&b->between, 0, sizeof b->between);
  ST(ordo_opr_push(e, hold_fn, &b->first, &v, 1, NULL, 0, NULL), ORDO_OK);
  cr_assert(tu_wait_eq(&b->first.started, 1, 5000), "%s: the first reader never ran", kind);
  ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(2)), ORDO_ERR_TIMEOUT); /* its mark stays */
  ST(ordo_opr_push(e, hold_fn, &b->between, &v, 1, NULL, 0, NULL), ORDO_OK);
  cr_assert(tu_wait_eq(&b->between.started, 1, 5000), "%s: the second reader never ran", kind);
  atomic_init(&b->returned, 0);
  start_waiter(&b->a, &b->th, e, v, &b->returned);
  assert_waiter_parked(&b->a, "behind the mark");
}

/* Lets the first reader go, so that the mark behind it fires: returns once the waiter has woken
 * and gone back to sleep (begun again, behind the second reader), so that a wait that returned
 * then, too early, has done so before the test goes on. */
static void release_the_first_reader(behind_setup* b) {
  const long slept = tu_thread_sleeps(atomic_load(&b->a.tid));
  cr_assert_geq(slept, 0, "no voluntary_ctxt_switches in /proc/self/task/TID/status");
  atomic_store(&b->first.release, 1);
  uint64_t deadline = tu_now_ms() + 5000;
  bool asleep_again = false;
  while (!asleep_again && atomic_load(&b->returned) == 0 && tu_now_ms() < deadline) {
    asleep_again = tu_wait_thread_parked(atomic_load(&b->a.tid), SYS_futex, slept, 20);
  }
  cr_assert(asleep_again || atomic_load(&b->returned) != 0,
            "%s: the wait was not seen waking and sleeping again within 5 s of the release of "
            "the reader before its mark",
            tu_kind_name(g_kind));
}

/* The same wait, untimed, from another thread: it returns only once every op pushed before it
 * has completed (the reader before the pending mark, and the one between the mark and the
 * wait), and meanwhile a reader pushed after it starts beside them. */
Test(wait, a_wait_behind_a_pending_mark_waits_for_every_earlier_op) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = NULL; /* three readers hold workers at once */
    g_kind = tu_threaded_kinds[k];
    ST(tu_engine_create(g_kind, 3, &e), ORDO_OK);
    const char* kind = tu_kind_name(g_kind);
    ordo_var v = new_var(e);
    behind_setup b;
    start_a_wait_behind_a_mark(&b, e, v);
    hold_ctx after;
    memset(&after, 0, sizeof after);
    ST(ordo_opr_push(e, hold_fn, &after, &v, 1, NULL, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&after.started, 1, 5000),
              "%s: a reader pushed after a wait behind a pending mark did not start beside the "
              "readers before it",
              kind);
    release_the_first_reader(&b);
    cr_assert_eq(atomic_load(&b.returned), 0,
                 "%s: the wait returned while a reader pushed before it still ran", kind);
    atomic_store(&b.between.release, 1);
    atomic_store(&after.release, 1);
    cr_assert(tu_wait_eq(&b.returned, 1, 5000), "%s: the wait did not return", kind);
    pthread_join(b.th, NULL);
    ST(atomic_load(&b.a.status), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&b.first.released_in_time), 1, "%s", kind);
    cr_assert_eq(atomic_load(&b.between.released_in_time), 1, "%s", kind);
    destroy_engine(e);
  }
}

/* A wait behind a pending mark whose var another thread deletes meanwhile: beginning again once
 * the mark fired, it found the handle stale and returned INVALID_HANDLE at once, while a reader
 * pushed before it still ran (found by review). The delete counts as before the wait, which may
 * say INVALID_HANDLE, but only once that delete, and so every op before the wait, is done. */
Test(wait,
     a_wait_behind_a_mark_on_a_var_deleted_meanwhile_returns_once_the_ops_before_it_are_done) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    const char* kind = tu_kind_name(g_kind);
    ordo_var v = new_var(e);
    behind_setup b;
    start_a_wait_behind_a_mark(&b, e, v);
    ST(ordo_var_delete(e, v), ORDO_OK);
    release_the_first_reader(&b); /* the mark fires; the waiter begins again */
    cr_assert_eq(atomic_load(&b.returned), 0,
                 "%s: the wait returned (%s) while a reader pushed before it still ran", kind,
                 ordo_status_string(atomic_load(&b.a.status)));
    atomic_store(&b.between.release, 1);
    cr_assert(tu_wait_eq(&b.returned, 1, 5000), "%s: the wait did not return", kind);
    pthread_join(b.th, NULL);
    ST(atomic_load(&b.a.status), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_all(e), ORDO_OK);
    destroy_engine(e);
  }
}

/* Threads that poll a var an op holds with short timeouts: each expired wait joined the
 * outstanding mark and left its waiter (about 600 bytes) on the mark's list until the mark fired,
 * so memory grew with every poll (found by review: 12 MB for 20,000 polls of one thread; a first
 * fix, leaving the list only from its head, still grew by 36 MB a second with two threads). An
 * expired wait now leaves the list wherever it is. Measured with mallinfo2 on one malloc arena;
 * only glibc's own allocator fills it in (not ASan's or valgrind's: then the test checks
 * nothing). */
enum { kHeapPollers = 4, kPollsEach = 5000 };

typedef struct heap_poller_arg {
  ordo_engine* e;
  ordo_var v;
  int unexpected; /* polls that did not time out */
} heap_poller_arg;

static void* heap_poller_main(void* p) {
  heap_poller_arg* a = p;
  for (int i = 0; i < kPollsEach; ++i) {
    if (ordo_wait_for_var_timeout(a->e, a->v, 1000) != ORDO_ERR_TIMEOUT) a->unexpected++;
  }
  return NULL;
}

static size_t heap_in_use(void) {
  return mallinfo2().uordblks;
}

static void poll_a_held_var(ordo_engine* e, ordo_var v, int threads) {
  heap_poller_arg args[kHeapPollers];
  pthread_t th[kHeapPollers];
  for (int i = 0; i < threads; ++i) {
    args[i] = (heap_poller_arg){e, v, 0};
    cr_assert_eq(pthread_create(&th[i], NULL, heap_poller_main, &args[i]), 0);
  }
  for (int i = 0; i < threads; ++i) {
    pthread_join(th[i], NULL);
    cr_assert_eq(args[i].unexpected, 0, "a poll of a held var did not time out");
  }
}

Test(wait, expired_waits_joined_to_a_mark_do_not_pile_up) {
  mallopt(M_ARENA_MAX, 1); /* every thread's allocations in the arena mallinfo2 counts */
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  hold_ctx r;
  memset(&r, 0, sizeof r);
  ST(ordo_opr_push(e, hold_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
  cr_assert(tu_wait_eq(&r.started, 1, 5000), "the reader never ran");
  ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(1)), ORDO_ERR_TIMEOUT); /* the mark they join */
  poll_a_held_var(e, v, 1); /* warms up threads' stacks and caches */
  const size_t before = heap_in_use();
  poll_a_held_var(e, v, 1);
  poll_a_held_var(e, v, kHeapPollers);
  const size_t after = heap_in_use();
  atomic_store(&r.release, 1);
  ST(ordo_wait_for_var(e, v), ORDO_OK);
  if (before != 0) {
    cr_assert_lt(after, before + 1024 * 1024, "%d expired waits grew the heap by %zu bytes",
                 (1 + kHeapPollers) * kPollsEach, after - before);
  }
  destroy_engine(e);
}

/* Threads that each push readers of a var and wait on it with short timeouts, all at once,
 * while a reader holds the var: their waits reserve the var, join each other's marks or wait
 * behind them and time out there, over and over. None of it may order the reader pushed at the
 * end (it releases the first), and untimed waits afterwards must each find every reader their
 * thread pushed finished. */
enum { kPollers = 4, kPolls = 60, kPollsBeforeRelease = 10 };

typedef struct poller_arg {
  ordo_engine* e;
  ordo_var v;
  atomic_int* phase; /* 1: the readers' release has been pushed */
  atomic_int pushed_done;
  atomic_int rounds; /* pushes and waits made */
  ordo_status final_status;
  int missing_after_wait;
} poller_arg;

static void* poller_main(void* p) {
  poller_arg* a = p;
  for (int i = 0; i < kPolls; ++i) {
    if (ordo_opr_push(a->e, tu_count_fn, &a->pushed_done, &a->v, 1, NULL, 0, NULL) != ORDO_OK) {
      a->final_status = ORDO_ERR_INTERNAL;
      return NULL;
    }
    (void)ordo_wait_for_var_timeout(a->e, a->v, 50000u * (uint64_t)(1 + i % 4)); /* TIMEOUT or OK */
    atomic_fetch_add(&a->rounds, 1);
  }
  tu_wait_eq(a->phase, 1, 10000);
  a->final_status = ordo_wait_for_var(a->e, a->v);
  a->missing_after_wait = kPolls - atomic_load(&a->pushed_done);
  return NULL;
}

Test(wait, threads_polling_and_pushing_on_a_held_var_order_nothing) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    const char* kind = tu_kind_name(g_kind);
    ordo_var v = new_var(e);
    hold_ctx r;
    memset(&r, 0, sizeof r);
    ST(ordo_opr_push(e, hold_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&r.started, 1, 5000), "%s: the first reader never ran", kind);
    atomic_int phase;
    atomic_init(&phase, 0);
    poller_arg args[kPollers];
    pthread_t th[kPollers];
    for (int i = 0; i < kPollers; ++i) {
      memset(&args[i], 0, sizeof args[i]);
      args[i].e = e;
      args[i].v = v;
      args[i].phase = &phase;
      atomic_init(&args[i].pushed_done, 0);
      atomic_init(&args[i].rounds, 0);
      cr_assert_eq(pthread_create(&th[i], NULL, poller_main, &args[i]), 0);
    }
    /* Every poller has pushed and waited on the held var a few times before the release (which
     * a sleep made only likely). */
    for (int i = 0; i < kPollers; ++i) {
      cr_assert(tu_wait_ge(&args[i].rounds, kPollsBeforeRelease, 5000),
                "%s: poller %d made %d rounds in 5 s", kind, i, atomic_load(&args[i].rounds));
    }
    ST(ordo_opr_push(e, release_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
    atomic_store(&phase, 1);
    for (int i = 0; i < kPollers; ++i) pthread_join(th[i], NULL);
    cr_assert_eq(atomic_load(&r.released_in_time), 1,
                 "%s: a reader pushed after the pollers' waits could not run beside the reader "
                 "before them",
                 kind);
    for (int i = 0; i < kPollers; ++i) {
      ST(args[i].final_status, ORDO_OK);
      cr_assert_eq(args[i].missing_after_wait, 0,
                   "%s: a wait returned before %d readers its thread pushed before it finished",
                   kind, args[i].missing_after_wait);
    }
    destroy_engine(e);
  }
}

/* Several threads wait at once on a var that a reader holds: all return once it is done. */
Test(wait, concurrent_waits_on_a_read_var_all_return) {
  enum { W = 4 };
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    ordo_var v = new_var(e);
    hold_ctx r;
    memset(&r, 0, sizeof r);
    ST(ordo_opr_push(e, hold_fn, &r, &v, 1, NULL, 0, NULL), ORDO_OK);
    cr_assert(tu_wait_eq(&r.started, 1, 5000), "%s: the reader never ran", tu_kind_name(g_kind));
    atomic_int returned;
    atomic_init(&returned, 0);
    waiter_arg args[W];
    pthread_t th[W];
    for (int i = 0; i < W; ++i) start_waiter(&args[i], &th[i], e, v, &returned);
    for (int i = 0; i < W; ++i) assert_waiter_parked(&args[i], "in its wait");
    cr_assert_eq(atomic_load(&returned), 0, "%s: a wait returned while the reader ran",
                 tu_kind_name(g_kind));
    atomic_store(&r.release, 1);
    cr_assert(tu_wait_eq(&returned, W, 5000), "%s: only %d of %d waiters woke",
              tu_kind_name(g_kind), atomic_load(&returned), W);
    for (int i = 0; i < W; ++i) {
      pthread_join(th[i], NULL);
      ST(atomic_load(&args[i].status), ORDO_OK);
    }
    destroy_engine(e);
  }
}

/* Waits while two threads keep pushing readers (and now and then a writer) of one var: each wait
 * returns only once every op pushed before it has finished, whether its mark was granted beside
 * running readers or queued behind a writer, or it joined another's mark or waited behind it. */
enum { kStreamOps = 10000, kStreamWaits = 200 };

typedef struct stream_ctx {
  ordo_engine* e;
  ordo_var v;
  pthread_mutex_t lock; /* held around each push, so that next_seq orders them */
  int next_seq;
  atomic_int done[kStreamOps];
  atomic_int bad_waits;
  atomic_int push_errors;
} stream_ctx;

typedef struct stream_op {
  stream_ctx* c;
  int seq;
} stream_op;

static stream_op g_stream_ops[kStreamOps];

static int32_t stream_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  stream_op* op = ud;
  if (op->seq % 5 == 0) { /* a long one now and then: readers overlap and finish out of order */
    uint64_t until = tu_now_ns() + 50000;
    while (tu_now_ns() < until) sched_yield();
  }
  atomic_store(&op->c->done[op->seq], 1);
  return 0;
}

static void* stream_pusher(void* p) {
  stream_ctx* c = p;
  for (;;) {
    pthread_mutex_lock(&c->lock);
    int seq = c->next_seq;
    if (seq == kStreamOps) {
      pthread_mutex_unlock(&c->lock);
      break;
    }
    c->next_seq++;
    g_stream_ops[seq].c = c;
    g_stream_ops[seq].seq = seq;
    bool write = seq % 97 == 0;
    ordo_status s = ordo_opr_push(c->e, stream_fn, &g_stream_ops[seq], write ? NULL : &c->v,
                                  write ? 0 : 1, write ? &c->v : NULL, write ? 1 : 0, NULL);
    pthread_mutex_unlock(&c->lock);
    if (s != ORDO_OK) atomic_fetch_add(&c->push_errors, 1);
    if (seq % 64 == 0) tu_sleep_ms(1); /* keeps the stream going while the waiters wait */
  }
  return NULL;
}

/* spread: a wait every millisecond or so, over the whole stream. timed: each wait gives up after
 * 2 to 32 us (and then leaves its mark on the var, where later waits join it or wait behind
 * it). */
static void* stream_waiter_loop(stream_ctx* c, bool spread, bool timed) {
  for (int i = 0; i < kStreamWaits; ++i) {
    if (spread) tu_sleep_ms(1);
    pthread_mutex_lock(&c->lock);
    int before = c->next_seq; /* every op below this was pushed before the wait */
    pthread_mutex_unlock(&c->lock);
    if (timed) {
      ordo_status s = ordo_wait_for_var_timeout(c->e, c->v, 2000u << (i % 5));
      if (s == ORDO_ERR_TIMEOUT) continue;
      if (s != ORDO_OK) atomic_fetch_add(&c->bad_waits, 1);
    } else if (ordo_wait_for_var(c->e, c->v) != ORDO_OK) {
      atomic_fetch_add(&c->bad_waits, 1);
    }
    for (int k = 0; k < before; ++k) {
      if (!atomic_load(&c->done[k])) {
        atomic_fetch_add(&c->bad_waits, 1);
        break;
      }
    }
  }
  return NULL;
}

static void* stream_waiter(void* p) {
  return stream_waiter_loop(p, false, false);
}

static void* stream_spread_waiter(void* p) {
  return stream_waiter_loop(p, true, false);
}

static void* stream_timed_waiter(void* p) {
  return stream_waiter_loop(p, true, true);
}

/* timed: the second waiter's waits time out now and then (stream_waiter_loop). */
static void check_waits_among_streaming_readers(bool timed) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    static stream_ctx c;
    memset(&c, 0, sizeof c);
    c.e = make_engine(tu_threaded_kinds[k]);
    c.v = new_var(c.e);
    pthread_mutex_init(&c.lock, NULL);
    pthread_t th[4];
    for (int i = 0; i < 2; ++i) cr_assert_eq(pthread_create(&th[i], NULL, stream_pusher, &c), 0);
    cr_assert_eq(pthread_create(&th[2], NULL, timed ? stream_spread_waiter : stream_waiter, &c), 0);
    cr_assert_eq(pthread_create(&th[3], NULL, timed ? stream_timed_waiter : stream_waiter, &c), 0);
    for (int i = 0; i < 4; ++i) pthread_join(th[i], NULL);
    ST(ordo_wait_for_all(c.e), ORDO_OK);
    cr_assert_eq(atomic_load(&c.push_errors), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.bad_waits), 0,
                 "%s: %d waits returned before an op pushed before them had finished",
                 tu_kind_name(g_kind), atomic_load(&c.bad_waits));
    for (int i = 0; i < kStreamOps; ++i) cr_assert_eq(atomic_load(&c.done[i]), 1);
    pthread_mutex_destroy(&c.lock);
    destroy_engine(c.e);
  }
}

Test(wait, waits_among_streaming_readers_wait_for_every_earlier_op) {
  check_waits_among_streaming_readers(false);
}

/* With expired waits' marks left on the var, later waits join them or wait behind them (and
 * give up there, or push their own once those fire): each wait that returns OK must still find
 * every op pushed before it finished, and nothing may hang. */
Test(wait, timed_waits_among_streaming_readers_wait_for_every_earlier_op) {
  check_waits_among_streaming_readers(true);
}
