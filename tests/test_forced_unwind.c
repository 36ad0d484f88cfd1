/*
 * Forced unwinds through caller code: a callback (or free_fn, or ordo_wait_fn) that ends its
 * thread with pthread_exit, or whose thread is cancelled, as Python does to a thread that wants
 * the GIL while the interpreter exits. The unwind passes through ordo (no "FATAL: exception not
 * rethrown" abort): the op fails with a message that says so, the thread exits, nothing hangs,
 * ops the thread would have run inline next fail without being called, queued free_fns run on
 * the next wait, and a worker thread so ended is replaced. A pipe callback that ends its thread
 * fails its pipeline run (OP_FAILED, the pipeline needs a reset) and nothing waits for good.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "test_util.h"

TestSuite(forced_unwind, .timeout = 60.0);

#define EXIT_CODE ((void*)(intptr_t)0x5eed)

static ordo_engine* make_engine(int32_t kind, int32_t threads) {
  ordo_engine* e = NULL;
  TU_ASSERT_ST(tu_engine_create(kind, threads, &e), ORDO_OK, tu_kind_name(kind));
  return e;
}

static ordo_var new_var(ordo_engine* e) {
  ordo_var v = 0;
  TU_ASSERT_ST(ordo_var_new(e, &v), ORDO_OK, "var");
  return v;
}

static atomic_int g_frees;
static atomic_int g_calls;

static void count_free(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_frees, 1);
}

static int32_t exit_thread(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  atomic_fetch_add(&g_calls, 1);
  pthread_exit(EXIT_CODE);
  return 0;
}

static int32_t count_call(ordo_exec* exec, void* ud) {
  (void)exec;
  atomic_fetch_add((atomic_int*)ud, 1);
  return 0;
}

static ordo_push_opts with_free(const char* name) {
  ordo_push_opts o = tu_opts_named(name);
  o.free_fn = count_free;
  return o;
}

/* Runs fn(arg) on a new thread; returns what pthread_join says the thread ended with. */
static void* on_thread(void* (*fn)(void*), void* arg) {
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, fn, arg), 0);
  void* ret = NULL;
  cr_assert_eq(pthread_join(t, &ret), 0);
  return ret;
}

static void assert_var_failed_with(ordo_engine* e, ordo_var v, const char* words) {
  TU_ASSERT_ST(ordo_wait_for_var(e, v), ORDO_ERR_OP_FAILED, "wait");
  cr_assert(strstr(ordo_last_error_message(), words) != NULL, "message: %s",
            ordo_last_error_message());
  int32_t code = 0;
  TU_ASSERT_ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK, "get_error");
  cr_assert_eq(code, ORDO_ERR_OP_FAILED);
}

/* ---- the naive engine on a thread of the test's ------------------------------------------- */

typedef struct pusher {
  ordo_engine* e;
  ordo_var v;
  ordo_var other;
  ordo_status push_status; /* never set when the callback ends the thread inside the push */
} pusher;

static void* push_exiting_op(void* arg) {
  pusher* p = arg;
  ordo_push_opts o = with_free("exits");
  p->push_status = ordo_opr_push(p->e, exit_thread, NULL, NULL, 0, &p->v, 1, &o);
  return NULL;
}

Test(forced_unwind, naive_callback_pthread_exit_fails_the_op) {
  atomic_init(&g_frees, 0);
  atomic_init(&g_calls, 0);
  ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
  pusher p = {e, new_var(e), 0, -1};
  cr_assert_eq(on_thread(push_exiting_op, &p), EXIT_CODE, "the thread did not exit");
  cr_assert_eq(p.push_status, -1, "the push returned instead of ending the thread");
  cr_assert_eq(atomic_load(&g_calls), 1);
  assert_var_failed_with(e, p.v, "thread exited");
  cr_assert(strstr(ordo_last_error_message(), "'exits'") != NULL, "%s", ordo_last_error_message());
  /* The free_fn was queued (the ending thread runs no caller code) and ran at the wait. */
  cr_assert_eq(atomic_load(&g_frees), 1);
  /* The engine goes on: later ops on v are skipped until cleared, then run. */
  atomic_int ran;
  atomic_init(&ran, 0);
  TU_ASSERT_ST(ordo_var_clear_error(e, p.v), ORDO_OK, "clear");
  TU_ASSERT_ST(ordo_opr_push(e, count_call, &ran, NULL, 0, &p.v, 1, NULL), ORDO_OK, "push");
  TU_ASSERT_ST(ordo_wait_for_var(e, p.v), ORDO_OK, "wait");
  TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED, "wait_all");
  TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_all");
  cr_assert_eq(atomic_load(&ran), 1);
  ordo_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  TU_ASSERT_ST(ordo_engine_stats(e, &st), ORDO_OK, "stats");
  cr_assert_eq(st.pushed, 2);
  cr_assert_eq(st.completed, 2);
  cr_assert_eq(st.failed, 1);
  cr_assert_eq(st.pending, 0);
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}

/* An op pushed from inside an inline op runs after it, in the same loop; when it ends the
 * thread, what is still queued in that loop fails without being called, and its successors are
 * skipped; free_fns all run once. */
typedef struct outer_ctx {
  ordo_engine* e;
  ordo_var a, b, c;
  atomic_int b_ran, c_ran;
} outer_ctx;

static int32_t push_three(ordo_exec* exec, void* ud) {
  (void)exec;
  outer_ctx* o = ud;
  ordo_push_opts fo = with_free("exits");
  ordo_push_opts bo = with_free("queued");
  ordo_push_opts co = with_free("after");
  ordo_opr_push(o->e, exit_thread, NULL, NULL, 0, &o->a, 1, &fo);
  ordo_opr_push(o->e, count_call, &o->b_ran, NULL, 0, &o->b, 1, &bo);
  ordo_opr_push(o->e, count_call, &o->c_ran, &o->b, 1, &o->c, 1, &co);
  return 0;
}

static void* push_outer(void* arg) {
  outer_ctx* o = arg;
  ordo_push_opts opts = with_free("outer");
  ordo_opr_push(o->e, push_three, o, NULL, 0, NULL, 0, &opts);
  return NULL;
}

Test(forced_unwind, naive_queued_inline_ops_fail_uncalled) {
  atomic_init(&g_frees, 0);
  atomic_init(&g_calls, 0);
  outer_ctx o;
  memset(&o, 0, sizeof o);
  o.e = make_engine(ORDO_ENGINE_NAIVE, 0);
  o.a = new_var(o.e);
  o.b = new_var(o.e);
  o.c = new_var(o.e);
  cr_assert_eq(on_thread(push_outer, &o), EXIT_CODE);
  assert_var_failed_with(o.e, o.a, "thread exited");
  assert_var_failed_with(o.e, o.b, "not run: the thread that was to run it inline exited");
  assert_var_failed_with(o.e, o.c, "not run");
  cr_assert_eq(atomic_load(&o.b_ran), 0);
  cr_assert_eq(atomic_load(&o.c_ran), 0);
  cr_assert_eq(atomic_load(&g_frees), 4, "free_fns: %d of 4", atomic_load(&g_frees));
  TU_ASSERT_ST(ordo_wait_for_all(o.e), ORDO_ERR_OP_FAILED, "wait_all");
  TU_ASSERT_ST(ordo_engine_destroy(o.e), ORDO_OK, "destroy");
}

/* pthread_cancel at a cancellation point inside a callback: the same path. */
static atomic_int g_in_callback;

static int32_t sleep_forever(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  atomic_store(&g_in_callback, 1);
  for (;;) tu_sleep_ms(1000); /* nanosleep: a cancellation point */
  return 0;
}

static void* push_sleeper(void* arg) {
  pusher* p = arg;
  ordo_push_opts o = with_free("sleeper");
  p->push_status = ordo_opr_push(p->e, sleep_forever, NULL, NULL, 0, &p->v, 1, &o);
  return NULL;
}

Test(forced_unwind, naive_callback_cancelled) {
  atomic_init(&g_frees, 0);
  atomic_init(&g_in_callback, 0);
  ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
  pusher p = {e, new_var(e), 0, -1};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, push_sleeper, &p), 0);
  cr_assert(tu_wait_eq(&g_in_callback, 1, 5000));
  cr_assert_eq(pthread_cancel(t), 0);
  void* ret = NULL;
  cr_assert_eq(pthread_join(t, &ret), 0);
  cr_assert_eq(ret, PTHREAD_CANCELED);
  assert_var_failed_with(e, p.v, "thread exited");
  cr_assert_eq(atomic_load(&g_frees), 1);
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}

/* A callback that deferred and then ended its thread: the op waits for its completion, which
 * another thread gives, and succeeds. */
static _Atomic uint64_t g_completion;

static int32_t defer_then_exit(ordo_exec* exec, void* ud) {
  (void)ud;
  ordo_completion c = 0;
  if (ordo_exec_defer(exec, &c) == ORDO_OK) atomic_store(&g_completion, c);
  pthread_exit(EXIT_CODE);
  return 0;
}

static void* push_deferring(void* arg) {
  pusher* p = arg;
  ordo_push_opts o = with_free("deferred");
  p->push_status = ordo_opr_push(p->e, defer_then_exit, NULL, NULL, 0, &p->v, 1, &o);
  return NULL;
}

Test(forced_unwind, deferred_then_exit_completes_later) {
  atomic_init(&g_frees, 0);
  atomic_store(&g_completion, 0);
  ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
  pusher p = {e, new_var(e), 0, -1};
  cr_assert_eq(on_thread(push_deferring, &p), EXIT_CODE);
  ordo_completion c = atomic_load(&g_completion);
  cr_assert_neq(c, 0);
  TU_ASSERT_ST(ordo_wait_for_var_timeout(e, p.v, TU_MS_NS(20)), ORDO_ERR_TIMEOUT, "pending");
  TU_ASSERT_ST(ordo_complete(c, 0, NULL), ORDO_OK, "complete");
  TU_ASSERT_ST(ordo_wait_for_var(e, p.v), ORDO_OK, "wait");
  cr_assert_eq(atomic_load(&g_frees), 1);
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}

/* A free_fn that ends the thread calling ordo_complete: the op is finished first (its vars
 * released, waiters woken, its successor handed on) and the engine's pin is dropped (destroy
 * frees it). The naive engine would run the successor inline on that thread: it fails uncalled
 * instead; worker engines run it. */
static void free_and_exit(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_frees, 1);
  pthread_exit(EXIT_CODE);
}

static void* complete_on_thread(void* arg) {
  ordo_complete(*(ordo_completion*)arg, 0, NULL);
  return NULL;
}

Test(forced_unwind, free_fn_exits_thread_in_complete) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    atomic_init(&g_frees, 0);
    ordo_engine* e = make_engine(tu_all_kinds[k], 2);
    ordo_var v = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ordo_push_opts o = tu_opts_named("deferred");
    o.free_fn = free_and_exit;
    TU_ASSERT_ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, &o), ORDO_OK, "push");
    atomic_int ran;
    atomic_init(&ran, 0);
    TU_ASSERT_ST(ordo_opr_push(e, count_call, &ran, NULL, 0, &v, 1, NULL), ORDO_OK, "push");
    ordo_completion c = tu_deferred_wait(&d, 5000);
    cr_assert_neq(c, 0);
    cr_assert_eq(on_thread(complete_on_thread, &c), EXIT_CODE, "%s", tu_kind_name(tu_all_kinds[k]));
    if (tu_all_kinds[k] == ORDO_ENGINE_NAIVE) {
      assert_var_failed_with(e, v, "not run");
      cr_assert_eq(atomic_load(&ran), 0);
    } else {
      TU_ASSERT_ST(ordo_wait_for_var(e, v), ORDO_OK, tu_kind_name(tu_all_kinds[k]));
      cr_assert_eq(atomic_load(&ran), 1);
    }
    cr_assert_eq(atomic_load(&g_frees), 1);
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
  }
}

/* ---- worker threads ---------------------------------------------------------------------- */

static uint32_t cpu_workers(ordo_engine* e) {
  ordo_queue_stats q;
  memset(&q, 0, sizeof q);
  q.struct_size = sizeof q;
  TU_ASSERT_ST(ordo_engine_queue_stats(e, 0, &q), ORDO_OK, "queue_stats");
  return q.workers;
}

/* A callback that ends its worker thread: the op fails, the worker is replaced (with a single
 * worker nothing else would run the ops behind it), and every later op runs. */
Test(forced_unwind, worker_callback_exit_is_replaced) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    int32_t kind = tu_threaded_kinds[k];
    atomic_init(&g_frees, 0);
    atomic_init(&g_calls, 0);
    ordo_engine* e = make_engine(kind, 1);
    ordo_var v[5];
    ordo_var w = new_var(e);
    atomic_int ran;
    atomic_init(&ran, 0);
    for (int round = 0; round < 5; ++round) {
      v[round] = new_var(e);
      ordo_push_opts o = with_free("exits");
      TU_ASSERT_ST(ordo_opr_push(e, exit_thread, NULL, NULL, 0, &v[round], 1, &o), ORDO_OK, "push");
      for (int i = 0; i < 20; ++i) {
        ordo_push_opts f = with_free("after");
        TU_ASSERT_ST(ordo_opr_push(e, count_call, &ran, NULL, 0, &w, 1, &f), ORDO_OK, "push");
      }
    }
    TU_ASSERT_ST(ordo_wait_for_var(e, w), ORDO_OK, tu_kind_name(kind));
    for (int round = 0; round < 5; ++round) assert_var_failed_with(e, v[round], "thread exited");
    TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED, tu_kind_name(kind));
    cr_assert_eq(atomic_load(&ran), 100);
    cr_assert_eq(atomic_load(&g_calls), 5);
    /* The exited threads' free_fns run on their replacements (or the next wait): soon. */
    tu_wait_ge(&g_frees, 105, 5000);
    cr_assert_eq(atomic_load(&g_frees), 105, "%s: free_fns %d of 105", tu_kind_name(kind),
                 atomic_load(&g_frees));
    ordo_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    TU_ASSERT_ST(ordo_engine_stats(e, &st), ORDO_OK, "stats");
    cr_assert_eq(st.failed, 5);
    cr_assert_eq(st.completed, 105);
    /* The last exit may end its thread after the waits above returned: the worker is then
     * vacant until the next wait gives it a thread. */
    uint32_t workers = cpu_workers(e);
    for (int i = 0; i < 400 && workers != 1; ++i) {
      tu_sleep_ms(5);
      ordo_wait_for_all(e);
      workers = cpu_workers(e);
    }
    cr_assert_eq(workers, 1, "%s: %u workers", tu_kind_name(kind), workers);
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, tu_kind_name(kind));
  }
}

/* A free_fn that ends its worker thread: the op (which succeeded) completes, its successors
 * run, the worker is replaced. */
Test(forced_unwind, worker_free_fn_exit) {
  atomic_init(&g_frees, 0);
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED, 1);
  ordo_var v = new_var(e);
  atomic_int ran;
  atomic_init(&ran, 0);
  for (int i = 0; i < 3; ++i) {
    ordo_push_opts o = tu_opts_named("free exits");
    o.free_fn = free_and_exit;
    TU_ASSERT_ST(ordo_opr_push(e, count_call, &ran, NULL, 0, &v, 1, &o), ORDO_OK, "push");
    TU_ASSERT_ST(ordo_opr_push(e, count_call, &ran, &v, 1, NULL, 0, NULL), ORDO_OK, "push");
  }
  TU_ASSERT_ST(ordo_wait_for_var(e, v), ORDO_OK, "wait");
  TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_all");
  cr_assert_eq(atomic_load(&ran), 6);
  cr_assert_eq(atomic_load(&g_frees), 3);
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}

/* An ordo_wait_fn that ends its worker thread; later async waits still run, exactly once. */
static atomic_int g_waits;

static void wait_and_exit(void* ud, ordo_status status) {
  (void)ud;
  (void)status;
  atomic_fetch_add(&g_waits, 1);
  pthread_exit(EXIT_CODE);
}

static void wait_counted(void* ud, ordo_status status) {
  (void)ud;
  if (status == ORDO_OK) atomic_fetch_add(&g_waits, 1);
}

static int32_t slow_op(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  tu_sleep_ms(5);
  return 0;
}

Test(forced_unwind, worker_wait_fn_exit) {
  atomic_init(&g_waits, 0);
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED, 1);
  ordo_var v = new_var(e);
  for (int i = 0; i < 3; ++i) {
    TU_ASSERT_ST(ordo_opr_push(e, slow_op, NULL, NULL, 0, &v, 1, NULL), ORDO_OK, "push");
    TU_ASSERT_ST(ordo_wait_for_var_async(e, v, wait_and_exit, NULL), ORDO_OK, "async");
    TU_ASSERT_ST(ordo_wait_for_var_async(e, v, wait_counted, NULL), ORDO_OK, "async");
  }
  TU_ASSERT_ST(ordo_wait_for_var(e, v), ORDO_OK, "wait");
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
  cr_assert_eq(atomic_load(&g_waits), 6, "%d of 6 wait fns", atomic_load(&g_waits));
}

/* Destroy while worker callbacks end their threads: the drain finishes (the workers are
 * replaced while it waits), and every queued free_fn has run when destroy returns. */
Test(forced_unwind, destroy_while_workers_exit) {
  atomic_init(&g_frees, 0);
  atomic_init(&g_calls, 0);
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var vars[40];
  for (int i = 0; i < 40; ++i) vars[i] = new_var(e);
  for (int i = 0; i < 40; ++i) {
    ordo_push_opts o = with_free(i % 4 == 0 ? "exits" : "runs");
    ordo_fn fn = i % 4 == 0 ? exit_thread : slow_op;
    TU_ASSERT_ST(ordo_opr_push(e, fn, NULL, NULL, 0, &vars[i], 1, &o), ORDO_OK, "push");
  }
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
  cr_assert_eq(atomic_load(&g_calls), 10);
  cr_assert_eq(atomic_load(&g_frees), 40, "%d of 40 free_fns", atomic_load(&g_frees));
}

/* A prepared op's free_fn that ends the thread deleting it: the slot is recycled, the engine
 * goes on (new prepared ops, pushes), destroy frees it. */
typedef struct deleter {
  ordo_engine* e;
  ordo_opr p;
} deleter;

static void* delete_prepared(void* arg) {
  deleter* d = arg;
  ordo_opr_delete(d->e, d->p);
  return NULL;
}

Test(forced_unwind, prepared_free_fn_exit) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    atomic_init(&g_frees, 0);
    ordo_engine* e = make_engine(tu_all_kinds[k], 2);
    ordo_var v = new_var(e);
    atomic_int ran;
    atomic_init(&ran, 0);
    ordo_push_opts o = tu_opts_named("prepared");
    o.free_fn = free_and_exit;
    deleter d = {e, 0};
    TU_ASSERT_ST(ordo_opr_new(e, count_call, &ran, NULL, 0, &v, 1, &o, &d.p), ORDO_OK, "new");
    for (int i = 0; i < 10; ++i) TU_ASSERT_ST(ordo_opr_push_prepared(e, d.p, 0), ORDO_OK, "push");
    TU_ASSERT_ST(ordo_wait_for_var(e, v), ORDO_OK, "wait");
    cr_assert_eq(on_thread(delete_prepared, &d), EXIT_CODE, "%s", tu_kind_name(tu_all_kinds[k]));
    cr_assert_eq(atomic_load(&g_frees), 1);
    TU_ASSERT_ST(ordo_opr_push_prepared(e, d.p, 0), ORDO_ERR_INVALID_HANDLE, "deleted");
    for (int i = 0; i < 300; ++i) {
      ordo_opr p = 0;
      TU_ASSERT_ST(ordo_opr_new(e, count_call, &ran, NULL, 0, &v, 1, NULL, &p), ORDO_OK, "new");
      TU_ASSERT_ST(ordo_opr_push_prepared(e, p, 0), ORDO_OK, "push");
      TU_ASSERT_ST(ordo_opr_delete(e, p), ORDO_OK, "delete");
    }
    TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_all");
    cr_assert_eq(atomic_load(&ran), 310);
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
  }
}

/* A worker thread that caller code ended is not replaced while nobody waits on the engine (its
 * host may be exiting: Python's interpreter crashes if new threads keep calling into it as it
 * finalizes); the next wait gives the worker a new thread, and the ops pushed meanwhile run. */

Test(forced_unwind, worker_replaced_when_a_wait_needs_it) {
  atomic_init(&g_calls, 0);
  atomic_init(&g_frees, 0);
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED, 1);
  ordo_var v = new_var(e);
  ordo_var w = new_var(e);
  ordo_push_opts o = with_free("exits");
  TU_ASSERT_ST(ordo_opr_push(e, exit_thread, NULL, NULL, 0, &v, 1, &o), ORDO_OK, "push");
  cr_assert(tu_wait_ge(&g_calls, 1, 5000));
  for (int i = 0; i < 200 && cpu_workers(e) != 0; ++i) tu_sleep_ms(5);
  cr_assert_eq(cpu_workers(e), 0, "the ended worker was replaced with nobody waiting");
  atomic_int ran;
  atomic_init(&ran, 0);
  for (int i = 0; i < 10; ++i) {
    TU_ASSERT_ST(ordo_opr_push(e, count_call, &ran, NULL, 0, &w, 1, NULL), ORDO_OK, "push");
  }
  tu_sleep_ms(50);
  cr_assert_eq(atomic_load(&ran), 0, "ops ran with no worker");
  TU_ASSERT_ST(ordo_wait_for_var(e, w), ORDO_OK, "wait");
  cr_assert_eq(atomic_load(&ran), 10);
  cr_assert_eq(cpu_workers(e), 1);
  assert_var_failed_with(e, v, "thread exited");
  cr_assert_eq(atomic_load(&g_frees), 1);
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}

/* ---- a prepared op run inline whose push is unwound --------------------------------------- */

/* The naive engine runs a prepared op inside ordo_opr_push_prepared; its callback ends the
 * thread there. The op fails, and every reference on the prepared op is dropped on the way
 * out: the push's own too (taken when the var list is too long to copy, over 16 vars), so that
 * ordo_opr_delete then runs the free_fn, exactly once. */
typedef struct prepared_pusher {
  ordo_engine* e;
  ordo_opr p;
} prepared_pusher;

static void* push_prepared_on_thread(void* arg) {
  prepared_pusher* pp = arg;
  ordo_opr_push_prepared(pp->e, pp->p, 0);
  return NULL;
}

Test(forced_unwind, naive_prepared_push_unwound_drops_its_reference) {
  static const size_t var_counts[] = {1, 16, 17, 40};
  for (size_t k = 0; k < sizeof var_counts / sizeof var_counts[0]; ++k) {
    const size_t n = var_counts[k];
    atomic_init(&g_frees, 0);
    atomic_init(&g_calls, 0);
    ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
    ordo_var vars[40];
    for (size_t i = 0; i < n; ++i) vars[i] = new_var(e);
    ordo_push_opts o = with_free("prepared exits");
    prepared_pusher pp = {e, 0};
    TU_ASSERT_ST(ordo_opr_new(e, exit_thread, NULL, NULL, 0, vars, n, &o, &pp.p), ORDO_OK, "new");
    cr_assert_eq(on_thread(push_prepared_on_thread, &pp), EXIT_CODE, "%zu vars", n);
    cr_assert_eq(atomic_load(&g_calls), 1);
    assert_var_failed_with(e, vars[0], "thread exited");
    assert_var_failed_with(e, vars[n - 1], "thread exited");
    cr_assert_eq(atomic_load(&g_frees), 0, "%zu vars: free_fn ran before the delete", n);
    TU_ASSERT_ST(ordo_opr_delete(e, pp.p), ORDO_OK, "delete");
    cr_assert_eq(atomic_load(&g_frees), 1, "%zu vars: free_fn ran %d times after the delete", n,
                 atomic_load(&g_frees));
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
    cr_assert_eq(atomic_load(&g_frees), 1, "%zu vars: free_fn ran %d times", n,
                 atomic_load(&g_frees));
  }
}

/* The same, with the handle deleted inside the callback before it ends the thread: the push's
 * reference is then the last, and its free_fn is due on the exiting thread, which runs no caller
 * code: it is queued, and runs at the next wait. */
static _Thread_local int tls_prepared_exiting;
static atomic_int g_frees_on_exiting_thread;

static void count_free_where(void* ud) {
  (void)ud;
  if (tls_prepared_exiting) atomic_fetch_add(&g_frees_on_exiting_thread, 1);
  atomic_fetch_add(&g_frees, 1);
}

static int32_t delete_self_then_exit(ordo_exec* exec, void* ud) {
  (void)exec;
  prepared_pusher* pp = ud;
  atomic_fetch_add(&g_calls, 1);
  ordo_opr_delete(pp->e, pp->p);
  tls_prepared_exiting = 1;
  pthread_exit(EXIT_CODE);
  return 0;
}

Test(forced_unwind, naive_prepared_push_unwound_last_reference) {
  static const size_t var_counts[] = {1, 17};
  for (size_t k = 0; k < sizeof var_counts / sizeof var_counts[0]; ++k) {
    const size_t n = var_counts[k];
    atomic_init(&g_frees, 0);
    atomic_init(&g_calls, 0);
    atomic_init(&g_frees_on_exiting_thread, 0);
    ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
    ordo_var vars[17];
    for (size_t i = 0; i < n; ++i) vars[i] = new_var(e);
    ordo_push_opts o = tu_opts_named("deletes itself, exits");
    o.free_fn = count_free_where;
    prepared_pusher pp = {e, 0};
    TU_ASSERT_ST(ordo_opr_new(e, delete_self_then_exit, &pp, NULL, 0, vars, n, &o, &pp.p), ORDO_OK,
                 "new");
    cr_assert_eq(on_thread(push_prepared_on_thread, &pp), EXIT_CODE, "%zu vars", n);
    cr_assert_eq(atomic_load(&g_calls), 1);
    assert_var_failed_with(e, vars[n - 1], "thread exited"); /* a wait: runs what was queued */
    cr_assert_eq(atomic_load(&g_frees), 1, "%zu vars: free_fn ran %d times", n,
                 atomic_load(&g_frees));
    cr_assert_eq(atomic_load(&g_frees_on_exiting_thread), 0, "%zu vars", n);
    TU_ASSERT_ST(ordo_opr_push_prepared(e, pp.p, 0), ORDO_ERR_INVALID_HANDLE, "deleted");
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
    cr_assert_eq(atomic_load(&g_frees), 1);
  }
}

/* ---- pipelines ----------------------------------------------------------------------------- *
 * A pipe callback that ends its thread (pthread_exit, cancellation) ends the run as a failing
 * pipe does: ORDO_ERR_OP_FAILED, a message that names the pipe, token and line, the tokens in
 * flight drained without more callbacks, the pipeline then needs a reset. Nothing hangs, and the
 * ending thread runs no caller code after the exit (a callback there could only start a second
 * forced unwind, which aborts the process). */

TestSuite(pipeline_unwind, .timeout = 30.0);

#define PS ORDO_PIPE_SERIAL
#define PP ORDO_PIPE_PARALLEL

static _Thread_local int tls_exiting; /* this thread has begun to exit inside a pipe callback */

typedef struct unwinding_pipes {
  uint64_t stop;         /* pipe 0 stops on this token */
  uint32_t exit_pipe;    /* this pipe's callback ends its thread ... */
  uint64_t exit_token;   /* ... on this token (UINT64_MAX: never) */
  int cancel;            /* instead of pthread_exit, sleep until cancelled */
  atomic_int exited;     /* the exit has begun (once per run) */
  atomic_int calls[3];   /* callbacks per pipe, tokens only (not pipe 0's stop) */
  atomic_int after_exit; /* callbacks that started on a thread after it began to exit */
} unwinding_pipes;

static void unwinding_init(unwinding_pipes* u, uint64_t stop, uint32_t exit_pipe,
                           uint64_t exit_token) {
  memset(u, 0, sizeof *u);
  u->stop = stop;
  u->exit_pipe = exit_pipe;
  u->exit_token = exit_token;
}

static void unwinding_rearm(unwinding_pipes* u) {
  uint64_t stop = u->stop;
  unwinding_init(u, stop, 0, UINT64_MAX);
}

static int32_t unwinding_pipe(ordo_pipeflow* pf, void* ud) {
  unwinding_pipes* u = ud;
  if (tls_exiting) atomic_fetch_add(&u->after_exit, 1);
  const uint32_t pipe = ordo_pipeflow_pipe(pf);
  const uint64_t token = ordo_pipeflow_token(pf);
  if (pipe == 0 && token == u->stop) return ordo_pipeflow_stop(pf);
  atomic_fetch_add(&u->calls[pipe], 1);
  int not_yet = 0;
  if (pipe == u->exit_pipe && token == u->exit_token &&
      atomic_compare_exchange_strong(&u->exited, &not_yet, 1)) {
    tls_exiting = 1;
    if (u->cancel) {
      atomic_store(&g_in_callback, 1);
      for (;;) tu_sleep_ms(1000); /* a cancellation point */
    }
    pthread_exit(EXIT_CODE);
  }
  if (pipe != 0) tu_sleep_us(100); /* let tokens overlap on the workers */
  return 0;
}

static ordo_pipeline* unwinding_pipeline(ordo_engine* e, unwinding_pipes* u) {
  ordo_pipe pipes[3] = {{PS, unwinding_pipe, u}, {PS, unwinding_pipe, u}, {PP, unwinding_pipe, u}};
  ordo_pipeline* p = NULL;
  TU_ASSERT_ST(ordo_pipeline_create(e, 3, pipes, 3, &p), ORDO_OK, "create");
  return p;
}

static void assert_mentions(const char* message, const char* words) {
  cr_assert(strstr(message, words) != NULL, "'%s' not in: %s", words, message);
}

/* The run's message: the pipe, the token, its line, and that its thread exited. */
static void assert_exit_message(const char* message, const unwinding_pipes* u) {
  char pipe[32], token[48];
  snprintf(pipe, sizeof pipe, "pipe %u", (unsigned)u->exit_pipe);
  snprintf(token, sizeof token, "token %llu", (unsigned long long)u->exit_token);
  assert_mentions(message, pipe);
  assert_mentions(message, token);
  assert_mentions(message, "(line ");
  assert_mentions(message, "thread exited");
  assert_mentions(message, "ordo_pipeline_reset");
}

/* After a run that a thread exit ended: the pipeline is not in flight but needs a reset; after
 * one it runs every token again. */
static void assert_needs_reset_then_runs(ordo_pipeline* p, unwinding_pipes* u) {
  TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_ERR_INVALID_STATE, "run before reset");
  assert_mentions(ordo_last_error_message(), "call ordo_pipeline_reset");
  TU_ASSERT_ST(ordo_pipeline_reset(p), ORDO_OK, "reset");
  unwinding_rearm(u);
  TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_OK, "run after reset");
  for (int f = 0; f < 3; ++f) {
    cr_assert_eq(atomic_load(&u->calls[f]), (int)u->stop, "pipe %d: %d calls", f,
                 atomic_load(&u->calls[f]));
  }
}

typedef struct run_on_thread {
  ordo_pipeline* p;
  ordo_status status; /* never set when the thread ends inside the run */
} run_on_thread;

static void* run_pipeline_thread(void* arg) {
  run_on_thread* r = arg;
  r->status = ordo_pipeline_run(r->p);
  return NULL;
}

/* The naive engine runs every step on the thread that called ordo_pipeline_run: the exit ends
 * that thread, so the run's end is seen on the pipeline (not in flight, needs a reset). */
Test(pipeline_unwind, naive_run_thread_exits_in_a_pipe) {
  static const struct {
    uint32_t pipe;
    uint64_t token;
  } cases[] = {{0, 0}, {0, 4}, {1, 3}, {2, 5}, {2, 19}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
    unwinding_pipes u;
    unwinding_init(&u, 20, cases[k].pipe, cases[k].token);
    ordo_pipeline* p = unwinding_pipeline(e, &u);
    run_on_thread r = {p, -1};
    cr_assert_eq(on_thread(run_pipeline_thread, &r), EXIT_CODE, "pipe %u", cases[k].pipe);
    cr_assert_eq(r.status, -1, "the run returned instead of ending the thread");
    cr_assert_eq(atomic_load(&u.exited), 1);
    cr_assert_eq(atomic_load(&u.after_exit), 0, "callbacks ran on the exiting thread");
    /* As for any op whose callback ends its thread, the engine counts the op that ran the
     * step as failed (and, naive, the steps' ops queued behind it on that thread). */
    TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED, "wait_all");
    assert_mentions(ordo_last_error_message(), "'ordo_pipeline'");
    assert_mentions(ordo_last_error_message(), "thread exited");
    TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_all");
    /* No token went past the pipe that exited once the exit began. */
    for (uint32_t f = cases[k].pipe + 1; f < 3; ++f) {
      cr_assert_leq(atomic_load(&u.calls[f]), (int)cases[k].token, "pipe %u", f);
    }
    assert_needs_reset_then_runs(p, &u);
    TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, "destroy pipeline");
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
  }
}

/* The same, with the thread cancelled inside a pipe callback. */
Test(pipeline_unwind, naive_run_thread_cancelled_in_a_pipe) {
  atomic_init(&g_in_callback, 0);
  ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
  unwinding_pipes u;
  unwinding_init(&u, 20, 1, 6);
  u.cancel = 1;
  ordo_pipeline* p = unwinding_pipeline(e, &u);
  run_on_thread r = {p, -1};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, run_pipeline_thread, &r), 0);
  cr_assert(tu_wait_eq(&g_in_callback, 1, 5000));
  cr_assert_eq(pthread_cancel(t), 0);
  void* ret = NULL;
  cr_assert_eq(pthread_join(t, &ret), 0);
  cr_assert_eq(ret, PTHREAD_CANCELED);
  cr_assert_eq(r.status, -1);
  cr_assert_eq(atomic_load(&u.after_exit), 0);
  assert_needs_reset_then_runs(p, &u);
  TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, "destroy pipeline");
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}

/* A pushed run's op fails, with the run's message, and whoever waits on its vars wakes. */
static void assert_pushed_run_failed(ordo_engine* e, ordo_var v, const unwinding_pipes* u) {
  TU_ASSERT_ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(10000)), ORDO_ERR_OP_FAILED, "wait");
  char message[512] = "";
  int32_t code = 0;
  TU_ASSERT_ST(ordo_var_get_error(e, v, &code, message, sizeof message), ORDO_OK, "get_error");
  cr_assert_eq(code, ORDO_ERR_OP_FAILED);
  assert_exit_message(message, u);
}

/* After a pushed run that a thread exit ended: a push needs a reset first; then it runs. */
static void assert_push_needs_reset_then_runs(ordo_engine* e, ordo_pipeline* p, ordo_var v,
                                              unwinding_pipes* u) {
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, &v, 1, NULL), ORDO_ERR_INVALID_STATE, "push");
  assert_mentions(ordo_last_error_message(), "call ordo_pipeline_reset");
  TU_ASSERT_ST(ordo_pipeline_reset(p), ORDO_OK, "reset");
  TU_ASSERT_ST(ordo_var_clear_error(e, v), ORDO_OK, "clear");
  unwinding_rearm(u);
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, &v, 1, NULL), ORDO_OK, "push after reset");
  TU_ASSERT_ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(10000)), ORDO_OK, "wait");
  for (int f = 0; f < 3; ++f) cr_assert_eq(atomic_load(&u->calls[f]), (int)u->stop, "pipe %d", f);
}

typedef struct push_on_thread {
  ordo_pipeline* p;
  ordo_var v;
  ordo_status status;
} push_on_thread;

static void* push_pipeline_thread(void* arg) {
  push_on_thread* r = arg;
  r->status = ordo_pipeline_push(r->p, NULL, 0, &r->v, 1, NULL);
  return NULL;
}

/* The naive engine runs a pushed run inside the push: the exit ends the pushing thread, and the
 * waiters on the run's vars wake with its failure. */
Test(pipeline_unwind, naive_pushed_run_thread_exits_in_a_pipe) {
  static const struct {
    uint32_t pipe;
    uint64_t token;
  } cases[] = {{0, 2}, {1, 3}, {2, 7}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
    unwinding_pipes u;
    unwinding_init(&u, 20, cases[k].pipe, cases[k].token);
    ordo_pipeline* p = unwinding_pipeline(e, &u);
    push_on_thread r = {p, new_var(e), -1};
    cr_assert_eq(on_thread(push_pipeline_thread, &r), EXIT_CODE, "pipe %u", cases[k].pipe);
    cr_assert_eq(r.status, -1, "the push returned instead of ending the thread");
    cr_assert_eq(atomic_load(&u.after_exit), 0, "callbacks ran on the exiting thread");
    assert_pushed_run_failed(e, r.v, &u);
    assert_push_needs_reset_then_runs(e, p, r.v, &u);
    TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, "destroy pipeline");
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
  }
}

/* Worker engines: a worker's thread exits inside a pipe callback. ordo_pipeline_run returns the
 * failure; the worker is replaced (one worker: nothing else would run the steps after it). */
Test(pipeline_unwind, worker_exits_in_a_pipe_during_run) {
  static const struct {
    uint32_t pipe;
    uint64_t token;
  } cases[] = {{0, 5}, {1, 3}, {2, 8}};
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    for (int32_t workers = 1; workers <= 2; ++workers) {
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        const int32_t kind = tu_threaded_kinds[k];
        ordo_engine* e = make_engine(kind, workers);
        unwinding_pipes u;
        unwinding_init(&u, 30, cases[c].pipe, cases[c].token);
        ordo_pipeline* p = unwinding_pipeline(e, &u);
        TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_ERR_OP_FAILED, tu_kind_name(kind));
        assert_exit_message(ordo_last_error_message(), &u);
        cr_assert_eq(atomic_load(&u.after_exit), 0, "callbacks ran on the exiting thread");
        TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED, "wait_all: the step's op");
        assert_mentions(ordo_last_error_message(), "'ordo_pipeline'");
        assert_needs_reset_then_runs(p, &u);
        uint32_t n = cpu_workers(e);
        for (int i = 0; i < 400 && n != (uint32_t)workers; ++i) {
          tu_sleep_ms(5);
          ordo_wait_for_all(e);
          n = cpu_workers(e);
        }
        cr_assert_eq(n, (uint32_t)workers, "%s: %u workers", tu_kind_name(kind), n);
        TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, "destroy pipeline");
        TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
      }
    }
  }
}

/* A pushed run on worker engines: its waiters wake with the failure. */
Test(pipeline_unwind, worker_exits_in_a_pipe_of_a_pushed_run) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    for (int32_t workers = 1; workers <= 2; ++workers) {
      const int32_t kind = tu_threaded_kinds[k];
      ordo_engine* e = make_engine(kind, workers);
      unwinding_pipes u;
      unwinding_init(&u, 30, 2, 4);
      ordo_pipeline* p = unwinding_pipeline(e, &u);
      ordo_var v = new_var(e);
      TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, &v, 1, NULL), ORDO_OK, "push");
      assert_pushed_run_failed(e, v, &u);
      cr_assert_eq(atomic_load(&u.after_exit), 0, "callbacks ran on the exiting thread");
      assert_push_needs_reset_then_runs(e, p, v, &u);
      TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, "destroy pipeline");
      TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
    }
  }
}
