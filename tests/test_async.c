/*
 * §3 asynchronous ops: ordo_exec_defer + ordo_complete, from other threads and from inside the
 * callback; handle validity; misuse of the exec; ordo_exec_get_info; ORDO_PROP_ASYNC ops.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(async, .timeout = 30.0);

/* wait_deferred, and this file also checks that ordo_exec_defer returned ORDO_OK. */
static ordo_completion wait_deferred_ok(tu_deferred* d) {
  ordo_completion h = wait_deferred(d);
  cr_assert_eq(atomic_load(&d->defer_status), ORDO_OK, "%s: ordo_exec_defer -> %s",
               tu_kind_name(g_kind), ordo_status_string(atomic_load(&d->defer_status)));
  return h;
}

/* Completes a handle from another thread; with after_parked, only once the calling thread is
 * asleep (in the wait or destroy it makes next: see completer_saw_parked), setting `completing`
 * first. A fixed delay there instead let a caller that reached its call late find the op
 * complete already, and check nothing. */
typedef struct completer {
  ordo_completion h;
  int32_t code;
  const char* message;
  int parked_tid; /* 0: complete at once */
  atomic_int saw_parked;
  atomic_int completing;
  atomic_int status;
  pthread_t thread;
} completer;

static void* completer_main(void* p) {
  completer* c = p;
  if (c->parked_tid) {
    atomic_store(&c->saw_parked, tu_wait_thread_parked(c->parked_tid, SYS_futex, -1, 5000));
  }
  atomic_store(&c->completing, 1);
  atomic_store(&c->status, ordo_complete(c->h, c->code, c->message));
  return NULL;
}

static void completer_start(completer* c, ordo_completion h, int32_t code, const char* message,
                            bool after_parked) {
  c->h = h;
  c->code = code;
  c->message = message;
  c->parked_tid = after_parked ? tu_gettid() : 0;
  atomic_init(&c->saw_parked, 0);
  atomic_init(&c->completing, 0);
  atomic_init(&c->status, -1);
  cr_assert_eq(pthread_create(&c->thread, NULL, completer_main, c), 0);
}

/* The caller was seen asleep before the completer completed. */
static void completer_saw_parked(completer* c, const char* what) {
  cr_assert_eq(atomic_load(&c->saw_parked), 1,
               "%s: %s was not seen asleep before ordo_complete (the order the test needs)",
               tu_kind_name(g_kind), what);
}

static ordo_status completer_join(completer* c) {
  pthread_join(c->thread, NULL);
  return atomic_load(&c->status);
}

/* ------------------------------------------------------------------------------------------- */

Test(async, defer_and_complete_from_another_thread) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    atomic_int dep_w, dep_r;
    atomic_init(&dep_w, 0);
    atomic_init(&dep_r, 0);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_opr_push(e, tu_count_fn, &dep_r, &v, 1, NULL, 0, NULL), ORDO_OK);
    ST(ordo_opr_push(e, tu_count_fn, &dep_w, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred_ok(&d);
    cr_assert_eq(atomic_load(&d.calls), 1, "%s", tu_kind_name(g_kind));

    /* The callback has returned but the op is not complete: dependents have not run. */
    tu_sleep_ms(50);
    cr_assert_eq(atomic_load(&dep_r), 0, "%s: reader ran before the deferred writer completed",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&dep_w), 0, "%s: writer ran before the deferred writer completed",
                 tu_kind_name(g_kind));
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(20)), ORDO_ERR_TIMEOUT);

    completer c;
    completer_start(&c, h, 0, NULL, false);
    cr_assert_eq(completer_join(&c), ORDO_OK, "%s: ordo_complete from another thread -> %s",
                 tu_kind_name(g_kind), ordo_status_string(atomic_load(&c.status)));
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&dep_r), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&dep_w), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&d.calls), 1, "%s", tu_kind_name(g_kind));
    ST(ordo_wait_for_all(e), ORDO_OK);
    destroy_engine(e);
  }
}

Test(async, wait_blocks_until_complete_from_another_thread) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred_ok(&d);
    completer c;
    completer_start(&c, h, 0, NULL, true);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&c.completing), 1,
                 "%s: wait_for_var returned before ordo_complete was called", tu_kind_name(g_kind));
    cr_assert_eq(completer_join(&c), ORDO_OK, "%s", tu_kind_name(g_kind));
    completer_saw_parked(&c, "wait_for_var");
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Completing inside the callback; the callback's return value after defer is ignored.         */
/* ------------------------------------------------------------------------------------------- */

typedef struct inline_ctx {
  int32_t complete_code;
  int32_t return_code;
  atomic_int defer_status;
  atomic_int complete_status;
  atomic_int second_complete_status;
  atomic_int calls;
} inline_ctx;

static void inline_init(inline_ctx* c, int32_t complete_code, int32_t return_code) {
  memset(c, 0, sizeof *c);
  c->complete_code = complete_code;
  c->return_code = return_code;
  atomic_store(&c->defer_status, -1);
  atomic_store(&c->complete_status, -1);
  atomic_store(&c->second_complete_status, -1);
}

static int32_t complete_inside_fn(ordo_exec* exec, void* ud) {
  inline_ctx* c = ud;
  ordo_completion h = 0;
  atomic_fetch_add(&c->calls, 1);
  atomic_store(&c->defer_status, ordo_exec_defer(exec, &h));
  atomic_store(&c->complete_status, ordo_complete(h, c->complete_code, NULL));
  atomic_store(&c->second_complete_status, ordo_complete(h, 0, NULL));
  return c->return_code;
}

Test(async, complete_inside_the_callback_before_it_returns) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    inline_ctx c;
    inline_init(&c, 0, 123); /* completes with success, returns 123: the return is ignored */
    atomic_int dep;
    atomic_init(&dep, 0);
    ST(ordo_opr_push(e, complete_inside_fn, &c, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_opr_push(e, tu_count_fn, &dep, &v, 1, NULL, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&c.calls), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.defer_status), ORDO_OK, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.complete_status), ORDO_OK,
                 "%s: ordo_complete inside the callback -> %s", tu_kind_name(g_kind),
                 ordo_status_string(atomic_load(&c.complete_status)));
    cr_assert_eq(atomic_load(&c.second_complete_status), ORDO_ERR_INVALID_HANDLE,
                 "%s: second ordo_complete -> %s", tu_kind_name(g_kind),
                 ordo_status_string(atomic_load(&c.second_complete_status)));
    cr_assert_eq(atomic_load(&dep), 1, "%s", tu_kind_name(g_kind));
    int32_t code = -1;
    ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
    cr_assert_eq(code, 0, "%s: the callback's return value after defer was not ignored",
                 tu_kind_name(g_kind));
    ST(ordo_wait_for_all(e), ORDO_OK);

    /* Conversely: completes with a failure, returns 0: the op failed. */
    ordo_var w = new_var(e);
    inline_ctx f;
    inline_init(&f, 31, 0);
    ST(ordo_opr_push(e, complete_inside_fn, &f, NULL, 0, &w, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, w), ORDO_ERR_OP_FAILED);
    ST(ordo_var_get_error(e, w, &code, NULL, 0), ORDO_OK);
    cr_assert_eq(code, 31, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* Defers like tu_defer_fn, then returns a failure code that must be ignored. */
static int32_t defer_then_fail_fn(ordo_exec* exec, void* ud) {
  tu_defer_fn(exec, ud);
  return 99;
}

Test(async, return_value_after_defer_is_ignored) {
  /* Defers, returns non-zero, completed later with success from another thread. */
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, defer_then_fail_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred_ok(&d);
    tu_sleep_ms(10);
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(10)), ORDO_ERR_TIMEOUT);
    ST(ordo_complete(h, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Handle validity.                                                                            */
/* ------------------------------------------------------------------------------------------- */

Test(async, complete_twice_and_bad_handles) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    ST(ordo_complete(0, 0, NULL), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_complete(0x0123456789abcdefull, 0, NULL), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_complete(UINT64_MAX, 1, "x"), ORDO_ERR_INVALID_HANDLE);

    tu_deferred d1;
    tu_deferred_init(&d1);
    ST(ordo_opr_push(e, tu_defer_fn, &d1, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h1 = wait_deferred_ok(&d1);
    ST(ordo_complete(h1, 0, NULL), ORDO_OK);
    ST(ordo_complete(h1, 0, NULL), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_complete(h1, 5, "late"), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_var(e, v), ORDO_OK); /* the failed second call changed nothing */

    /* A new deferred op (possibly reusing the slot): the stale handle must not complete it. */
    tu_deferred d2;
    tu_deferred_init(&d2);
    ST(ordo_opr_push(e, tu_defer_fn, &d2, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h2 = wait_deferred_ok(&d2);
    cr_assert_neq(h2, h1, "%s: a completion handle was reused", tu_kind_name(g_kind));
    ST(ordo_complete(h1, 0, NULL), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_complete(h1, 9, "stale"), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(30)), ORDO_ERR_TIMEOUT);
    ST(ordo_complete(h2, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    int32_t code = -1;
    ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
    cr_assert_eq(code, 0, "%s: a stale completion changed the op's outcome", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

Test(async, failed_async_completion_poisons_mutable_vars_with_message) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var r = new_var(e), v = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ordo_push_opts o = tu_opts_named("uploader");
    ST(ordo_opr_push(e, tu_defer_fn, &d, &r, 1, &v, 1, &o), ORDO_OK);
    atomic_int dep;
    atomic_init(&dep, 0);
    ST(ordo_opr_push(e, tu_count_fn, &dep, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred_ok(&d);
    completer c;
    completer_start(&c, h, 77, "link down", false);
    cr_assert_eq(completer_join(&c), ORDO_OK, "%s", tu_kind_name(g_kind));
    ordo_status s = ordo_wait_for_var(e, v);
    char msg[512];
    ordo_last_error_copy(msg, sizeof msg);
    cr_assert_eq(s, ORDO_ERR_OP_FAILED, "%s: -> %s", tu_kind_name(g_kind), ordo_status_string(s));
    cr_assert_not_null(strstr(msg, "link down"), "%s: message \"%s\"", tu_kind_name(g_kind), msg);
    cr_assert_not_null(strstr(msg, "uploader"), "%s: message \"%s\"", tu_kind_name(g_kind), msg);
    cr_assert_not_null(strstr(msg, "77"), "%s: message \"%s\"", tu_kind_name(g_kind), msg);
    int32_t code = 0;
    ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
    cr_assert_eq(code, 77, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&dep), 0, "%s: dependent of a failed async op ran",
                 tu_kind_name(g_kind));
    ST(ordo_wait_for_var(e, r), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Misuse of ordo_exec_defer and of the exec pointer.                                          */
/* ------------------------------------------------------------------------------------------- */

typedef struct misuse_ctx {
  atomic_int null_out;      /* ordo_exec_defer(exec, NULL) */
  atomic_int null_exec;     /* ordo_exec_defer(NULL, &h) */
  atomic_int first;         /* first real defer */
  atomic_int second;        /* second defer */
  atomic_int first_nonzero; /* first handle != 0 */
  atomic_int second_changed_out;
  _Atomic uint64_t handle;
} misuse_ctx;

static int32_t null_defer_fn(ordo_exec* exec, void* ud) {
  misuse_ctx* c = ud;
  ordo_completion h = 0;
  atomic_store(&c->null_out, ordo_exec_defer(exec, NULL));
  atomic_store(&c->null_exec, ordo_exec_defer(NULL, &h));
  return 0; /* not deferred: completes normally */
}

static int32_t defer_twice_fn(ordo_exec* exec, void* ud) {
  misuse_ctx* c = ud;
  ordo_completion h1 = 0, h2 = 0;
  atomic_store(&c->first, ordo_exec_defer(exec, &h1));
  atomic_store(&c->first_nonzero, h1 != 0);
  atomic_store(&c->second, ordo_exec_defer(exec, &h2));
  atomic_store(&c->second_changed_out, h2 != 0 && h2 != h1);
  atomic_store(&c->handle, h1);
  return 0;
}

Test(async, defer_misuse) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    misuse_ctx c;
    memset(&c, 0, sizeof c);
    ST(ordo_opr_push(e, null_defer_fn, &c, NULL, 0, &v, 1, NULL), ORDO_OK);
    /* The NULL calls did not defer the op: it completes when its callback returns. */
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(5000)), ORDO_OK);
    cr_assert_eq(atomic_load(&c.null_out), ORDO_ERR_INVALID_ARGUMENT,
                 "%s: ordo_exec_defer(exec, NULL) -> %s", tu_kind_name(g_kind),
                 ordo_status_string(atomic_load(&c.null_out)));
    cr_assert_eq(atomic_load(&c.null_exec), ORDO_ERR_INVALID_ARGUMENT,
                 "%s: ordo_exec_defer(NULL, &h) -> %s", tu_kind_name(g_kind),
                 ordo_status_string(atomic_load(&c.null_exec)));

    memset(&c, 0, sizeof c);
    ST(ordo_opr_push(e, defer_twice_fn, &c, NULL, 0, &v, 1, NULL), ORDO_OK);
    uint64_t deadline = tu_now_ms() + 5000;
    while (atomic_load(&c.handle) == 0 && tu_now_ms() < deadline) tu_sleep_us(100);
    cr_assert_eq(atomic_load(&c.first), ORDO_OK, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.first_nonzero), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.second), ORDO_ERR_INVALID_STATE, "%s: second ordo_exec_defer -> %s",
                 tu_kind_name(g_kind), ordo_status_string(atomic_load(&c.second)));
    cr_assert_eq(atomic_load(&c.second_changed_out), 0,
                 "%s: a failed second defer handed out another handle", tu_kind_name(g_kind));
    /* The op is still deferred (the first defer stands) until completed. */
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(30)), ORDO_ERR_TIMEOUT);
    ST(ordo_complete(atomic_load(&c.handle), 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    destroy_engine(e);
  }
}

/* The exec used from another thread while the op runs, and after the op finished. */
typedef struct exec_escape {
  ordo_exec* saved;
  atomic_int other_thread_defer;
  atomic_int other_thread_info;
} exec_escape;

static void* use_exec_elsewhere(void* p) {
  exec_escape* x = p;
  ordo_completion h = 0;
  atomic_store(&x->other_thread_defer, ordo_exec_defer(x->saved, &h));
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  atomic_store(&x->other_thread_info, ordo_exec_get_info(x->saved, &info));
  return NULL;
}

static int32_t escape_fn(ordo_exec* exec, void* ud) {
  exec_escape* x = ud;
  x->saved = exec;
  pthread_t th;
  if (pthread_create(&th, NULL, use_exec_elsewhere, x) == 0) pthread_join(th, NULL);
  return 0;
}

Test(async, exec_used_outside_its_callback_is_invalid_state) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    exec_escape x;
    memset(&x, 0, sizeof x);
    atomic_store(&x.other_thread_defer, -1);
    atomic_store(&x.other_thread_info, -1);
    ST(ordo_opr_push(e, escape_fn, &x, NULL, 0, &v, 1, NULL), ORDO_OK);
    /* Neither call deferred the op: it completes when its callback returns. */
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(5000)), ORDO_OK);
    cr_assert_eq(atomic_load(&x.other_thread_defer), ORDO_ERR_INVALID_STATE,
                 "%s: defer from another thread while the op runs -> %s", tu_kind_name(g_kind),
                 ordo_status_string(atomic_load(&x.other_thread_defer)));
    cr_assert_eq(atomic_load(&x.other_thread_info), ORDO_ERR_INVALID_STATE,
                 "%s: get_info from another thread while the op runs -> %s", tu_kind_name(g_kind),
                 ordo_status_string(atomic_load(&x.other_thread_info)));
    /* After the op finished, on the test thread. */
    cr_assert_not_null(x.saved);
    ordo_completion h = 0;
    ST(ordo_exec_defer(x.saved, &h), ORDO_ERR_INVALID_STATE);
    ordo_exec_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    ST(ordo_exec_get_info(x.saved, &info), ORDO_ERR_INVALID_STATE);
    /* The engine is unaffected. */
    atomic_int ran;
    atomic_init(&ran, 0);
    ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&ran), 1, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* An exec kept past its callback must stay invalid even when a later op reuses the pooled op
 * block it pointed to: if it did not, ordo_exec_defer would defer that later, unrelated op (and
 * nobody would complete it). */
typedef struct stale_exec {
  ordo_exec* saved;
  atomic_int accepted_at; /* index of the first later op that took the stale exec, or -1 */
  atomic_int accepted_status;
} stale_exec;

typedef struct stale_exec_use {
  stale_exec* s;
  int index;
} stale_exec_use;

static int32_t save_exec_fn(ordo_exec* exec, void* ud) {
  ((stale_exec*)ud)->saved = exec;
  return 0;
}

static int32_t use_stale_exec_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  stale_exec_use* u = ud;
  ordo_completion h = 0;
  ordo_status s = ordo_exec_defer(u->s->saved, &h);
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ordo_status si = ordo_exec_get_info(u->s->saved, &info);
  if (s != ORDO_ERR_INVALID_STATE || si != ORDO_ERR_INVALID_STATE) {
    int none = -1;
    if (atomic_compare_exchange_strong(&u->s->accepted_at, &none, u->index)) {
      atomic_store(&u->s->accepted_status, s != ORDO_ERR_INVALID_STATE ? s : si);
    }
  }
  if (s == ORDO_OK) ordo_complete(h, 0, NULL); /* it deferred this op: finish it */
  return 0;
}

Test(async, an_exec_kept_past_its_callback_never_matches_a_later_op) {
  enum { kLater = 3000 }; /* several times an op pool's batch, so blocks are reused */
  stale_exec_use* uses = calloc(kLater, sizeof *uses);
  cr_assert_not_null(uses);
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    stale_exec s;
    memset(&s, 0, sizeof s);
    atomic_store(&s.accepted_at, -1);
    ST(ordo_opr_push(e, save_exec_fn, &s, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    for (int i = 0; i < kLater; ++i) {
      uses[i] = (stale_exec_use){&s, i};
      ST(ordo_opr_push(e, use_stale_exec_fn, &uses[i], NULL, 0, &v, 1, NULL), ORDO_OK);
      /* Waiting now and then returns blocks to the pool, where later pushes take them again. */
      if (i % 64 == 63) ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(5000)), ORDO_OK);
    }
    ST(ordo_wait_for_all_timeout(e, TU_MS_NS(10000)), ORDO_OK);
    cr_assert_eq(atomic_load(&s.accepted_at), -1,
                 "%s: later op #%d took the stale exec (%s) instead of INVALID_STATE",
                 tu_kind_name(g_kind), atomic_load(&s.accepted_at),
                 ordo_status_string(atomic_load(&s.accepted_status)));
    destroy_engine(e);
  }
  free(uses);
}

/* ------------------------------------------------------------------------------------------- */
/* ordo_exec_get_info.                                                                         */
/* ------------------------------------------------------------------------------------------- */

typedef struct info_rec {
  atomic_int status;
  atomic_int small_status;
  atomic_int tiny_status;
  atomic_int null_status;
  ordo_exec_info info;
  char name[64];
  int name_was_null;
  int32_t small_priority_after; /* must stay the sentinel */
  int32_t small_device_type;
  pthread_t thread;
  atomic_int done;
} info_rec;

static int32_t info_fn(ordo_exec* exec, void* ud) {
  info_rec* r = ud;
  ordo_exec_info info;
  memset(&info, 0xab, sizeof info);
  info.struct_size = sizeof info;
  ordo_status s = ordo_exec_get_info(exec, &info);
  r->info = info;
  r->name_was_null = info.name == NULL;
  if (s == ORDO_OK && info.name) {
    strncpy(r->name, info.name, sizeof r->name - 1);
    r->name[sizeof r->name - 1] = '\0';
  }
  /* A caller compiled against a smaller struct: nothing past struct_size is written. */
  ordo_exec_info small;
  memset(&small, 0, sizeof small);
  small.priority = 0x5a5a5a;
  small.device_type = 77;
  small.struct_size = (uint32_t)offsetof(ordo_exec_info, device_id);
  atomic_store(&r->small_status, ordo_exec_get_info(exec, &small));
  r->small_priority_after = small.priority;
  r->small_device_type = small.device_type;
  ordo_exec_info tiny;
  memset(&tiny, 0, sizeof tiny);
  tiny.struct_size = 2;
  atomic_store(&r->tiny_status, ordo_exec_get_info(exec, &tiny));
  atomic_store(&r->null_status, ordo_exec_get_info(exec, NULL));
  r->thread = pthread_self();
  atomic_store(&r->status, s);
  atomic_store(&r->done, 1);
  return 0;
}

static void info_rec_init(info_rec* r) {
  memset(r, 0, sizeof *r);
  atomic_store(&r->status, -1);
}

Test(async, exec_get_info_describes_the_running_op) {
  static const int32_t props[] = {ORDO_PROP_NORMAL, ORDO_PROP_CPU_PRIORITIZED};
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    int32_t kind = tu_all_kinds[k];
    ordo_engine* e = make_engine(kind);
    for (int p = 0; p < 2; ++p) {
      ordo_var v = new_var(e);
      info_rec r;
      info_rec_init(&r);
      ordo_push_opts o = tu_opts_named("info_op");
      o.priority = 7;
      o.prop = props[p];
      ST(ordo_opr_push(e, info_fn, &r, NULL, 0, &v, 1, &o), ORDO_OK);
      ST(ordo_wait_for_var(e, v), ORDO_OK);
      cr_assert_eq(atomic_load(&r.status), ORDO_OK, "%s: get_info -> %s", tu_kind_name(kind),
                   ordo_status_string(atomic_load(&r.status)));
      cr_assert_str_eq(r.name, "info_op", "%s", tu_kind_name(kind));
      cr_assert_eq(r.info.priority, 7, "%s", tu_kind_name(kind));
      cr_assert_eq(r.info.prop, props[p], "%s", tu_kind_name(kind));
      cr_assert_eq(r.info.device_type, ORDO_DEVICE_CPU, "%s", tu_kind_name(kind));
      cr_assert_eq(r.info.device_id, 0, "%s", tu_kind_name(kind));
      cr_assert_null(r.info.stream, "%s: CPU op has a stream", tu_kind_name(kind));
      cr_assert_eq(r.info.engine, e, "%s: info.engine is not the running engine",
                   tu_kind_name(kind));
      if (kind == ORDO_ENGINE_NAIVE) {
        cr_assert_eq(r.info.worker_index, -1, "%s: inline op has worker_index %d",
                     tu_kind_name(kind), r.info.worker_index);
      } else if (props[p] == ORDO_PROP_NORMAL) {
        cr_assert(r.info.worker_index >= 0 && r.info.worker_index < 2,
                  "%s: worker_index %d with 2 CPU workers", tu_kind_name(kind),
                  r.info.worker_index);
        cr_assert(!pthread_equal(r.thread, pthread_self()),
                  "%s: a normal op ran on the pushing thread", tu_kind_name(kind));
      } else {
        cr_assert(r.info.worker_index >= 0, "%s: worker_index %d", tu_kind_name(kind),
                  r.info.worker_index);
      }
      cr_assert_eq(atomic_load(&r.small_status), ORDO_OK, "%s", tu_kind_name(kind));
      cr_assert_eq(r.small_device_type, ORDO_DEVICE_CPU, "%s", tu_kind_name(kind));
      cr_assert_eq(r.small_priority_after, 0x5a5a5a,
                   "%s: get_info wrote past a smaller struct_size", tu_kind_name(kind));
      cr_assert_eq(atomic_load(&r.tiny_status), ORDO_ERR_INVALID_ARGUMENT,
                   "%s: struct_size 2 -> %s", tu_kind_name(kind),
                   ordo_status_string(atomic_load(&r.tiny_status)));
      cr_assert_eq(atomic_load(&r.null_status), ORDO_ERR_INVALID_ARGUMENT, "%s",
                   tu_kind_name(kind));
    }

    /* No name: "" (never NULL). A long name: ORDO_NAME_MAX bytes kept. */
    ordo_var v = new_var(e);
    info_rec r;
    info_rec_init(&r);
    ST(ordo_opr_push(e, info_fn, &r, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(r.name_was_null, 0, "%s: unnamed op has a NULL name", tu_kind_name(kind));
    cr_assert_str_eq(r.name, "", "%s", tu_kind_name(kind));
    cr_assert_eq(r.info.priority, 0, "%s", tu_kind_name(kind));
    cr_assert_eq(r.info.prop, ORDO_PROP_NORMAL, "%s", tu_kind_name(kind));

    char longname[60];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    info_rec_init(&r);
    ordo_push_opts o = tu_opts_named(longname);
    ST(ordo_opr_push(e, info_fn, &r, NULL, 0, &v, 1, &o), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(strlen(r.name), ORDO_NAME_MAX, "%s: name of %zu bytes, want %d",
                 tu_kind_name(kind), strlen(r.name), ORDO_NAME_MAX);
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* ORDO_PROP_ASYNC ops run inline (on the thread that makes them ready) and can defer.          */
/* ------------------------------------------------------------------------------------------- */

typedef struct async_prop_ctx {
  info_rec info;
  _Atomic uint64_t handle;
  atomic_int defer_status;
} async_prop_ctx;

static int32_t async_prop_fn(ordo_exec* exec, void* ud) {
  async_prop_ctx* c = ud;
  info_fn(exec, &c->info);
  ordo_completion h = 0;
  atomic_store(&c->defer_status, ordo_exec_defer(exec, &h));
  atomic_store(&c->handle, h);
  return 0;
}

typedef struct complete_and_probe {
  ordo_completion h;
  async_prop_ctx* follower;
  atomic_int status;
  atomic_int follower_ran_inside; /* the follower ran before ordo_complete returned */
  pthread_t self;
} complete_and_probe;

static void* complete_and_probe_main(void* p) {
  complete_and_probe* c = p;
  c->self = pthread_self();
  atomic_store(&c->status, ordo_complete(c->h, 0, NULL));
  atomic_store(&c->follower_ran_inside, atomic_load(&c->follower->info.done));
  return NULL;
}

Test(async, prop_async_ops_run_inline_and_can_defer) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    int32_t kind = tu_all_kinds[k];
    ordo_engine* e = make_engine(kind);
    ordo_var v = new_var(e);
    ordo_push_opts o = tu_opts_named("async_op");
    o.prop = ORDO_PROP_ASYNC;

    /* Free vars: runs before the push returns, on the pushing thread. */
    async_prop_ctx a;
    memset(&a, 0, sizeof a);
    info_rec_init(&a.info);
    ST(ordo_opr_push(e, async_prop_fn, &a, NULL, 0, &v, 1, &o), ORDO_OK);
    cr_assert_eq(atomic_load(&a.info.done), 1,
                 "%s: an ORDO_PROP_ASYNC op with free vars had not run when the push returned",
                 tu_kind_name(kind));
    cr_assert(pthread_equal(a.info.thread, pthread_self()),
              "%s: an ORDO_PROP_ASYNC op with free vars ran on another thread", tu_kind_name(kind));
    cr_assert_eq(atomic_load(&a.info.status), ORDO_OK, "%s", tu_kind_name(kind));
    cr_assert_eq(a.info.info.prop, ORDO_PROP_ASYNC, "%s", tu_kind_name(kind));
    cr_assert_eq(a.info.info.worker_index, -1, "%s: inline op has worker_index %d",
                 tu_kind_name(kind), a.info.info.worker_index);
    cr_assert_str_eq(a.info.name, "async_op", "%s", tu_kind_name(kind));
    cr_assert_eq(atomic_load(&a.defer_status), ORDO_OK, "%s", tu_kind_name(kind));
    ordo_completion ha = atomic_load(&a.handle);
    cr_assert_neq(ha, 0, "%s", tu_kind_name(kind));

    /* A second async op on v waits for the deferred first one, then runs inline on the thread
     * that completes it. */
    async_prop_ctx b;
    memset(&b, 0, sizeof b);
    info_rec_init(&b.info);
    ST(ordo_opr_push(e, async_prop_fn, &b, NULL, 0, &v, 1, &o), ORDO_OK);
    tu_sleep_ms(20);
    cr_assert_eq(atomic_load(&b.info.done), 0,
                 "%s: async op ran before the deferred op it depends on completed",
                 tu_kind_name(kind));
    complete_and_probe cp;
    memset(&cp, 0, sizeof cp);
    cp.h = ha;
    cp.follower = &b;
    atomic_store(&cp.status, -1);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, complete_and_probe_main, &cp), 0);
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&cp.status), ORDO_OK, "%s", tu_kind_name(kind));
    cr_assert_eq(atomic_load(&cp.follower_ran_inside), 1,
                 "%s: the ready ORDO_PROP_ASYNC op did not run inside the completing call",
                 tu_kind_name(kind));
    cr_assert(pthread_equal(b.info.thread, cp.self),
              "%s: the ORDO_PROP_ASYNC op did not run on the thread that made it ready",
              tu_kind_name(kind));
    cr_assert_eq(b.info.info.worker_index, -1, "%s", tu_kind_name(kind));
    cr_assert_eq(atomic_load(&b.defer_status), ORDO_OK, "%s", tu_kind_name(kind));

    /* b is deferred now: v stays busy until it is completed. */
    ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(20)), ORDO_ERR_TIMEOUT);
    ST(ordo_complete(atomic_load(&b.handle), 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Destroy waits for deferred ops to be completed.                                             */
/* ------------------------------------------------------------------------------------------- */

Test(async, destroy_waits_for_deferred_completion) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    atomic_int dep;
    atomic_init(&dep, 0);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_opr_push(e, tu_count_fn, &dep, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = wait_deferred_ok(&d);
    completer c;
    completer_start(&c, h, 0, NULL, true);
    destroy_engine(e);
    cr_assert_eq(atomic_load(&c.completing), 1, "%s: destroy returned before ordo_complete",
                 tu_kind_name(g_kind));
    cr_assert_eq(completer_join(&c), ORDO_OK, "%s", tu_kind_name(g_kind));
    completer_saw_parked(&c, "destroy");
    cr_assert_eq(atomic_load(&dep), 1,
                 "%s: destroy returned before the dependent of a deferred "
                 "op ran",
                 tu_kind_name(g_kind));
  }
}

static int compare_handles(const void* a, const void* b) {
  ordo_completion x = *(const ordo_completion*)a, y = *(const ordo_completion*)b;
  return x < y ? -1 : x > y;
}

/* Blocks are recycled between ops that defer and ops that do not; every completion handle ever
 * issued must differ from every other, and stay stale once used, however often its block has
 * been reused since. */
Test(async, completion_handles_stay_unique_across_block_reuse) {
  enum { kRounds = 3000, kPlainPerRound = 3 };
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  ordo_completion* handles = calloc(kRounds, sizeof *handles);
  cr_assert_not_null(handles);
  atomic_int plain;
  atomic_init(&plain, 0);
  for (int i = 0; i < kRounds; ++i) {
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
    handles[i] = wait_deferred_ok(&d);
    ST(ordo_complete(handles[i], 0, NULL), ORDO_OK);
    for (int k = 0; k < kPlainPerRound; ++k) {
      ST(ordo_opr_push(e, tu_count_fn, &plain, NULL, 0, &v, 1, NULL), ORDO_OK);
    }
  }
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&plain), kRounds * kPlainPerRound);
  qsort(handles, kRounds, sizeof *handles, compare_handles);
  for (int i = 1; i < kRounds; ++i) {
    cr_assert_neq(handles[i], handles[i - 1], "completion handle 0x%llx was issued twice",
                  (unsigned long long)handles[i]);
  }
  for (int i = 0; i < kRounds; i += 97) {
    ST(ordo_complete(handles[i], 7, "stale"), ORDO_ERR_INVALID_HANDLE);
  }
  int32_t code = -1;
  ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 0, "a stale completion changed an op's outcome");
  free(handles);
  destroy_engine(e);
}
