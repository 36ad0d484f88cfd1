/*
 * ordo_wait_for_var_async: fn(user_data, status) runs exactly once, after every op pushed on
 * the var before the call, without blocking the caller; OP_FAILED when the var carries an
 * error; never called when the call fails; drained (never lost) by destroy; may push more work.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(async_wait, .timeout = 60.0);

/* One async wait's record: how often fn ran, with what, on which thread, and what the writers
 * had done by then. */
typedef struct waited {
  atomic_int calls;
  atomic_int status;
  atomic_int seen; /* writers_done as fn saw it */
  atomic_int* writers_done;
  pthread_t thread;
} waited;

static void waited_init(waited* w, atomic_int* writers_done) {
  atomic_init(&w->calls, 0);
  atomic_init(&w->status, -1);
  atomic_init(&w->seen, -1);
  w->writers_done = writers_done;
}

static void on_waited(void* ud, ordo_status status) {
  waited* w = ud;
  if (w->writers_done) atomic_store(&w->seen, atomic_load(w->writers_done));
  w->thread = pthread_self();
  atomic_store(&w->status, status);
  atomic_fetch_add(&w->calls, 1);
}

static int32_t slow_writer(ordo_exec* exec, void* ud) {
  (void)exec;
  tu_sleep_ms(2);
  atomic_fetch_add((atomic_int*)ud, 1);
  return 0;
}

static int32_t fail_7(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  return 7;
}

/* fn runs after every op pushed on the var before the call (readers and writers), once. */
Test(async_wait, runs_after_every_earlier_op_once) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    atomic_int done;
    atomic_init(&done, 0);
    tu_gate gate;
    tu_gate_init(&gate);
    const int threaded = tu_all_kinds[k] != ORDO_ENGINE_NAIVE;
    if (threaded) ST(ordo_opr_push(e, tu_gate_fn, &gate, NULL, 0, &v, 1, NULL), ORDO_OK);
    for (int i = 0; i < 5; ++i)
      ST(ordo_opr_push(e, slow_writer, &done, NULL, 0, &v, 1, NULL), ORDO_OK);
    for (int i = 0; i < 3; ++i)
      ST(ordo_opr_push(e, slow_writer, &done, &v, 1, NULL, 0, NULL), ORDO_OK);
    waited w;
    waited_init(&w, &done);
    ST(ordo_wait_for_var_async(e, v, on_waited, &w), ORDO_OK);
    if (threaded) {
      /* The writers are held behind the gate: the call returned without waiting for them. */
      cr_assert_eq(atomic_load(&w.calls), 0, "%s: fn ran before its ops", tu_kind_name(g_kind));
      atomic_store(&gate.open, 1);
    }
    cr_assert(tu_wait_ge(&w.calls, 1, 10000), "%s: fn never ran", tu_kind_name(g_kind));
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&w.calls), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&w.status), ORDO_OK, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&w.seen), 8, "%s: fn saw %d of 8 ops done", tu_kind_name(g_kind),
                 atomic_load(&w.seen));
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

/* An idle var: fn runs inside the call, on the calling thread. */
Test(async_wait, idle_var_runs_inline_on_caller) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    waited w;
    waited_init(&w, NULL);
    ST(ordo_wait_for_var_async(e, v, on_waited, &w), ORDO_OK);
    cr_assert_eq(atomic_load(&w.calls), 1, "%s: fn did not run inside the call",
                 tu_kind_name(g_kind));
    cr_assert(pthread_equal(w.thread, pthread_self()), "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&w.status), ORDO_OK);
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

/* The var carries an error: OP_FAILED, as ordo_wait_for_var says; cleared: OK again. A later
 * failure does not reach a wait pushed before it. */
Test(async_wait, failure_status) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    ordo_var other = new_var(e);
    ST(ordo_opr_push(e, fail_7, NULL, NULL, 0, &v, 1, NULL), ORDO_OK);
    waited failed, clean, cleared;
    waited_init(&failed, NULL);
    waited_init(&clean, NULL);
    waited_init(&cleared, NULL);
    ST(ordo_wait_for_var_async(e, v, on_waited, &failed), ORDO_OK);
    ST(ordo_wait_for_var_async(e, other, on_waited, &clean), ORDO_OK);
    ST(ordo_var_clear_error(e, v), ORDO_OK);
    ST(ordo_wait_for_var_async(e, v, on_waited, &cleared), ORDO_OK);
    ST(ordo_opr_push(e, fail_7, NULL, NULL, 0, &v, 1, NULL), ORDO_OK); /* after: not seen */
    cr_assert(tu_wait_ge(&cleared.calls, 1, 10000));
    cr_assert(tu_wait_ge(&failed.calls, 1, 10000));
    cr_assert(tu_wait_ge(&clean.calls, 1, 10000));
    cr_assert_eq(atomic_load(&failed.status), ORDO_ERR_OP_FAILED, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&clean.status), ORDO_OK, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&cleared.status), ORDO_OK, "%s", tu_kind_name(g_kind));
    /* The same answer the blocking wait gives. */
    ST(ordo_wait_for_var(e, v), ORDO_ERR_OP_FAILED);
    /* Not a failure of the caller's ops: only the two failing ops are. */
    ordo_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    ST(ordo_engine_stats(e, &st), ORDO_OK);
    cr_assert_eq(st.pushed, 2);
    cr_assert_eq(st.failed, 2);
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

/* When the call fails, fn is never called. */
Test(async_wait, errors_never_call_fn) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  waited w;
  waited_init(&w, NULL);
  ST(ordo_wait_for_var_async(NULL, v, on_waited, &w), ORDO_ERR_INVALID_ARGUMENT);
  ST(ordo_wait_for_var_async(e, v, NULL, &w), ORDO_ERR_INVALID_ARGUMENT);
  ST(ordo_wait_for_var_async(e, 0, on_waited, &w), ORDO_ERR_INVALID_HANDLE);
  ST(ordo_wait_for_var_async(e, v + 12345, on_waited, &w), ORDO_ERR_INVALID_HANDLE);
  ordo_var gone = new_var(e);
  ST(ordo_var_delete(e, gone), ORDO_OK);
  ST(ordo_wait_for_var_async(e, gone, on_waited, &w), ORDO_ERR_INVALID_HANDLE);
  cr_assert(strstr(ordo_last_error_message(), "ordo_wait_for_var_async") != NULL, "%s",
            ordo_last_error_message());
  ST(ordo_engine_retain(e), ORDO_OK);
  ST(ordo_engine_destroy(e), ORDO_OK);
  ST(ordo_wait_for_var_async(e, v, on_waited, &w), ORDO_ERR_SHUTDOWN);
  ST(ordo_engine_release(e), ORDO_OK);
  tu_sleep_ms(20);
  cr_assert_eq(atomic_load(&w.calls), 0);
}

/* Many threads issue async waits on a few vars while pushing: every successful call gets
 * exactly one fn call, each after the writes pushed before it on its var. */
#define MANY_THREADS 4
#define MANY_WAITS 400
#define MANY_VARS 3

typedef struct many_ctx {
  ordo_engine* e;
  ordo_var vars[MANY_VARS];
  atomic_int writes[MANY_VARS];
  atomic_int calls;        /* fn calls, in all */
  atomic_int accepted;     /* successful ordo_wait_for_var_async calls */
  atomic_int out_of_order; /* a fn that saw fewer writes than were pushed before its call */
  atomic_int bad_status;
} many_ctx;

typedef struct many_wait {
  many_ctx* ctx;
  int var;
  int writes_before; /* writes pushed on the var by this thread before the call */
} many_wait;

static int32_t count_write(ordo_exec* exec, void* ud) {
  (void)exec;
  atomic_fetch_add((atomic_int*)ud, 1);
  return 0;
}

static void on_many(void* ud, ordo_status status) {
  many_wait* w = ud;
  if (status != ORDO_OK) atomic_fetch_add(&w->ctx->bad_status, 1);
  if (atomic_load(&w->ctx->writes[w->var]) < w->writes_before) {
    atomic_fetch_add(&w->ctx->out_of_order, 1);
  }
  atomic_fetch_add(&w->ctx->calls, 1);
  free(w);
}

static void* many_thread(void* arg) {
  many_ctx* c = arg;
  int mine[MANY_VARS] = {0};
  for (int i = 0; i < MANY_WAITS; ++i) {
    int var = i % MANY_VARS;
    if (ordo_opr_push(c->e, count_write, &c->writes[var], NULL, 0, &c->vars[var], 1, NULL) ==
        ORDO_OK) {
      mine[var]++;
    }
    many_wait* w = malloc(sizeof *w);
    w->ctx = c;
    w->var = var;
    w->writes_before = mine[var];
    if (ordo_wait_for_var_async(c->e, c->vars[var], on_many, w) == ORDO_OK) {
      atomic_fetch_add(&c->accepted, 1);
    } else {
      free(w);
    }
  }
  return NULL;
}

Test(async_wait, many_concurrent_waits) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    many_ctx c;
    memset(&c, 0, sizeof c);
    c.e = make_engine(tu_all_kinds[k]);
    for (int i = 0; i < MANY_VARS; ++i) c.vars[i] = new_var(c.e);
    pthread_t t[MANY_THREADS];
    for (int i = 0; i < MANY_THREADS; ++i) pthread_create(&t[i], NULL, many_thread, &c);
    for (int i = 0; i < MANY_THREADS; ++i) pthread_join(t[i], NULL);
    ST(ordo_wait_for_all(c.e), ORDO_OK);
    cr_assert(tu_wait_ge(&c.calls, atomic_load(&c.accepted), 10000));
    ST(ordo_engine_destroy(c.e), ORDO_OK);
    cr_assert_eq(atomic_load(&c.accepted), MANY_THREADS * MANY_WAITS, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.calls), atomic_load(&c.accepted), "%s: %d calls for %d waits",
                 tu_kind_name(g_kind), atomic_load(&c.calls), atomic_load(&c.accepted));
    cr_assert_eq(atomic_load(&c.out_of_order), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.bad_status), 0, "%s", tu_kind_name(g_kind));
  }
}

/* Destroy with async waits pending behind a deferred op: destroy drains them, so every fn runs
 * once, with its real status, before destroy returns. */
typedef struct completer {
  tu_deferred* d;
  int32_t code;
} completer;

static void* complete_later(void* arg) {
  completer* c = arg;
  ordo_completion h = tu_deferred_wait(c->d, 5000);
  tu_sleep_ms(50);
  ordo_complete(h, c->code, "late failure");
  return NULL;
}

Test(async_wait, destroy_drains_pending_waits) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    ordo_var u = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_opr_push(e, tu_count_fn, &(atomic_int){0}, &v, 1, &u, 1, NULL), ORDO_OK);
    enum { N = 50 };
    waited w[N];
    for (int i = 0; i < N; ++i) {
      waited_init(&w[i], NULL);
      ST(ordo_wait_for_var_async(e, i % 2 ? v : u, on_waited, &w[i]), ORDO_OK);
    }
    for (int i = 0; i < N; ++i) cr_assert_eq(atomic_load(&w[i].calls), 0);
    completer c = {&d, 5};
    pthread_t t;
    pthread_create(&t, NULL, complete_later, &c);
    ST(ordo_engine_destroy(e), ORDO_OK);
    for (int i = 0; i < N; ++i) {
      cr_assert_eq(atomic_load(&w[i].calls), 1, "%s: wait %d ran %d times", tu_kind_name(g_kind), i,
                   atomic_load(&w[i].calls));
      cr_assert_eq(atomic_load(&w[i].status), ORDO_ERR_OP_FAILED, "%s: wait %d",
                   tu_kind_name(g_kind), i);
    }
    pthread_join(t, NULL);
  }
}

/* fn pushes more work and waits again: a chain of 20 waits, each pushing a writer first. A
 * blocking wait from fn is refused (it counts as inside an op). */
typedef struct chain {
  ordo_engine* e;
  ordo_var v;
  atomic_int writes;
  atomic_int links;
  atomic_int push_errors;
  atomic_int blocking_wait;
  atomic_int bad_order;
} chain;

static void on_chain(void* ud, ordo_status status) {
  chain* c = ud;
  if (status != ORDO_OK) atomic_fetch_add(&c->push_errors, 1);
  int n = atomic_fetch_add(&c->links, 1) + 1;
  if (atomic_load(&c->writes) != n - 1) atomic_fetch_add(&c->bad_order, 1);
  if (n == 1) atomic_store(&c->blocking_wait, ordo_wait_for_var(c->e, c->v));
  if (n >= 20) return;
  if (ordo_opr_push(c->e, count_write, &c->writes, NULL, 0, &c->v, 1, NULL) != ORDO_OK ||
      ordo_wait_for_var_async(c->e, c->v, on_chain, c) != ORDO_OK) {
    atomic_fetch_add(&c->push_errors, 1);
  }
}

Test(async_wait, callback_pushes_more_work) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    chain c;
    memset(&c, 0, sizeof c);
    c.e = make_engine(tu_all_kinds[k]);
    c.v = new_var(c.e);
    ST(ordo_wait_for_var_async(c.e, c.v, on_chain, &c), ORDO_OK);
    cr_assert(tu_wait_ge(&c.links, 20, 10000), "%s: %d links", tu_kind_name(g_kind),
              atomic_load(&c.links));
    ST(ordo_wait_for_var(c.e, c.v), ORDO_OK);
    cr_assert_eq(atomic_load(&c.writes), 19, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.push_errors), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.bad_order), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.blocking_wait), ORDO_ERR_WOULD_DEADLOCK, "%s",
                 tu_kind_name(g_kind));
    ST(ordo_engine_destroy(c.e), ORDO_OK);
    cr_assert_eq(atomic_load(&c.links), 20);
  }
}
