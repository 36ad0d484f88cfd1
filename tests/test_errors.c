/*
 * §3 errors: a failing op poisons the vars it mutates (not the ones it only reads); later ops on
 * a poisoned var are skipped and pass the ORIGINAL error on; ordo_wait_for_var reports it;
 * ordo_var_clear_error is ordered like a write; ordo_wait_for_all reports a failure once.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(errors, .timeout = 30.0);

/* An op that counts its calls and returns `code`. */
typedef struct code_op {
  atomic_int calls;
  int32_t code;
} code_op;

static void code_op_init(code_op* o, int32_t code) {
  atomic_init(&o->calls, 0);
  o->code = code;
}

static int32_t code_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  code_op* o = ud;
  atomic_fetch_add(&o->calls, 1);
  return o->code;
}

static ordo_status push_named(ordo_engine* e, code_op* op, const char* name, const ordo_var* cv,
                              size_t nc, const ordo_var* mv, size_t nm) {
  ordo_push_opts o = tu_opts_named(name);
  return ordo_opr_push(e, code_fn, op, cv, nc, mv, nm, &o);
}

/* Waits on v expecting ORDO_ERR_OP_FAILED; copies the thread's message into msg. */
static void wait_var_failed(ordo_engine* e, ordo_var v, char* msg, size_t cap) {
  ordo_status s = ordo_wait_for_var(e, v);
  ordo_last_error_copy(msg, cap);
  cr_assert_eq(s, ORDO_ERR_OP_FAILED, "%s: wait_for_var on a poisoned var -> %s (%s)",
               tu_kind_name(g_kind), ordo_status_string(s), msg);
}

static void assert_contains(const char* hay, const char* needle, const char* what) {
  cr_assert_not_null(strstr(hay, needle), "%s: %s \"%s\" does not contain \"%s\"",
                     tu_kind_name(g_kind), what, hay, needle);
}

static void assert_var_error(ordo_engine* e, ordo_var v, int32_t want_code, const char* want_name) {
  int32_t code = -12345;
  char buf[256];
  memset(buf, 0, sizeof buf);
  ST(ordo_var_get_error(e, v, &code, buf, sizeof buf), ORDO_OK);
  cr_assert_eq(code, want_code, "%s: var_get_error code %d, want %d", tu_kind_name(g_kind), code,
               want_code);
  if (want_code != 0) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, "op '%s' failed (code %d)", want_name, (int)want_code);
    cr_assert_eq(strncmp(buf, prefix, strlen(prefix)), 0,
                 "%s: var_get_error message \"%s\" does not start with \"%s\"",
                 tu_kind_name(g_kind), buf, prefix);
  }
}

/* ------------------------------------------------------------------------------------------- */

Test(errors, failure_poisons_mutated_vars_only) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var r = new_var(e);  /* only read by the failing op */
    ordo_var m1 = new_var(e); /* mutated */
    ordo_var m2 = new_var(e); /* mutated too */
    code_op f;
    code_op_init(&f, 42);
    ordo_var mv[2] = {m1, m2};
    ST(push_named(e, &f, "failer", &r, 1, mv, 2), ORDO_OK);

    char msg[512];
    wait_var_failed(e, m1, msg, sizeof msg);
    assert_contains(msg, "failer", "wait_for_var message");
    assert_contains(msg, "42", "wait_for_var message");
    wait_var_failed(e, m2, msg, sizeof msg);
    assert_contains(msg, "failer", "wait_for_var message");
    cr_assert_eq(atomic_load(&f.calls), 1, "%s", tu_kind_name(g_kind));
    assert_var_error(e, m1, 42, "failer");
    assert_var_error(e, m2, 42, "failer");

    /* The var the failing op only read stays clean, and ops on it run. */
    ST(ordo_wait_for_var(e, r), ORDO_OK);
    assert_var_error(e, r, 0, NULL);
    code_op ok;
    code_op_init(&ok, 0);
    ST(push_named(e, &ok, "reader", &r, 1, NULL, 0), ORDO_OK);
    ST(push_named(e, &ok, "writer", NULL, 0, &r, 1), ORDO_OK);
    ST(ordo_wait_for_var(e, r), ORDO_OK);
    cr_assert_eq(atomic_load(&ok.calls), 2,
                 "%s: ops on a var only read by a failed op were "
                 "skipped",
                 tu_kind_name(g_kind));
    assert_var_error(e, r, 0, NULL);
    destroy_engine(e);
  }
}

Test(errors, codes_are_recorded_unchanged) {
  static const int32_t codes[] = {1, -1, 7, 1000000, INT32_MIN, INT32_MAX};
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; ++i) {
      ordo_var v = new_var(e);
      code_op f;
      code_op_init(&f, codes[i]);
      ST(push_named(e, &f, "coded", NULL, 0, &v, 1), ORDO_OK);
      char msg[512];
      wait_var_failed(e, v, msg, sizeof msg);
      char num[32];
      snprintf(num, sizeof num, "%d", (int)codes[i]);
      assert_contains(msg, num, "wait_for_var message");
      assert_var_error(e, v, codes[i], "coded");
    }
    destroy_engine(e);
  }
}

Test(errors, skipped_ops_are_not_called_and_pass_the_original_error_on) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var a = new_var(e), b = new_var(e), c = new_var(e), d = new_var(e), x = new_var(e);
    code_op f, s1, s2, s3, clean;
    code_op_init(&f, 7);
    code_op_init(&s1, 0);
    code_op_init(&s2, 0);
    code_op_init(&s3, 0);
    code_op_init(&clean, 0);
    ST(push_named(e, &f, "failer", &a, 1, &b, 1), ORDO_OK);
    ST(push_named(e, &s1, "reads_b_writes_c", &b, 1, &c, 1), ORDO_OK); /* reads poisoned b */
    ST(push_named(e, &s2, "writes_b", NULL, 0, &b, 1), ORDO_OK);       /* mutates poisoned b */
    ST(push_named(e, &s3, "reads_c_writes_d", &c, 1, &d, 1), ORDO_OK); /* transitive via c */
    ST(push_named(e, &clean, "reads_a_writes_x", &a, 1, &x, 1), ORDO_OK);

    char msg[512];
    wait_var_failed(e, d, msg, sizeof msg);
    /* The skipped ops inherit the original op's name and code. */
    assert_contains(msg, "failer", "wait_for_var(d) message");
    assert_contains(msg, "7", "wait_for_var(d) message");
    wait_var_failed(e, c, msg, sizeof msg);
    assert_contains(msg, "failer", "wait_for_var(c) message");
    wait_var_failed(e, b, msg, sizeof msg);
    ST(ordo_wait_for_var(e, x), ORDO_OK);
    ST(ordo_wait_for_var(e, a), ORDO_OK);

    cr_assert_eq(atomic_load(&f.calls), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&s1.calls), 0, "%s: op reading a poisoned var was called",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&s2.calls), 0, "%s: op mutating a poisoned var was called",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&s3.calls), 0, "%s: op on a transitively poisoned var was called",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&clean.calls), 1, "%s: op on clean vars was skipped",
                 tu_kind_name(g_kind));
    assert_var_error(e, b, 7, "failer");
    assert_var_error(e, c, 7, "failer");
    assert_var_error(e, d, 7, "failer");
    assert_var_error(e, a, 0, NULL);
    assert_var_error(e, x, 0, NULL);

    /* Ops pushed after the failure has settled are skipped too. */
    code_op late;
    code_op_init(&late, 0);
    ST(push_named(e, &late, "late", &d, 1, NULL, 0), ORDO_OK);
    ST(push_named(e, &late, "late2", NULL, 0, &c, 1), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
    cr_assert_eq(atomic_load(&late.calls), 0, "%s", tu_kind_name(g_kind));
    assert_var_error(e, c, 7, "failer");
    destroy_engine(e);
  }
}

Test(errors, clear_error_is_ordered_like_a_write) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    /* A deferred op holds v, so everything below is queued when clear_error is called. */
    tu_deferred blocker;
    tu_deferred_init(&blocker);
    ST(ordo_opr_push(e, tu_defer_fn, &blocker, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_completion h = tu_deferred_wait(&blocker, 5000);
    cr_assert_neq(h, 0, "%s: blocker never deferred", tu_kind_name(g_kind));

    code_op f, before_w, before_r, after_w, after_r;
    code_op_init(&f, 5);
    code_op_init(&before_w, 0);
    code_op_init(&before_r, 0);
    code_op_init(&after_w, 0);
    code_op_init(&after_r, 0);
    ST(push_named(e, &f, "failer", NULL, 0, &v, 1), ORDO_OK);
    ST(push_named(e, &before_w, "before_w", NULL, 0, &v, 1), ORDO_OK);
    ST(push_named(e, &before_r, "before_r", &v, 1, NULL, 0), ORDO_OK);
    ST(ordo_var_clear_error(e, v), ORDO_OK);
    ST(push_named(e, &after_r, "after_r", &v, 1, NULL, 0), ORDO_OK);
    ST(push_named(e, &after_w, "after_w", NULL, 0, &v, 1), ORDO_OK);

    cr_assert_eq(atomic_load(&f.calls), 0, "%s", tu_kind_name(g_kind));
    ST(ordo_complete(h, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&f.calls), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&before_w.calls), 0,
                 "%s: a writer pushed before clear_error ran despite the failure",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&before_r.calls), 0,
                 "%s: a reader pushed before clear_error ran despite the failure",
                 tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&after_r.calls), 1,
                 "%s: a reader pushed after clear_error was skipped", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&after_w.calls), 1,
                 "%s: a writer pushed after clear_error was skipped", tu_kind_name(g_kind));
    assert_var_error(e, v, 0, NULL);
    /* The failure and the skips still count for wait_for_all. */
    ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
    ST(ordo_wait_for_all(e), ORDO_OK);

    /* clear_error on a settled poisoned var, then ops run. */
    code_op f2, again;
    code_op_init(&f2, 9);
    code_op_init(&again, 0);
    ST(push_named(e, &f2, "failer2", NULL, 0, &v, 1), ORDO_OK);
    char msg[512];
    wait_var_failed(e, v, msg, sizeof msg);
    assert_contains(msg, "failer2", "wait_for_var message");
    ST(ordo_var_clear_error(e, v), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    ST(push_named(e, &again, "again", NULL, 0, &v, 1), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    cr_assert_eq(atomic_load(&again.calls), 1, "%s", tu_kind_name(g_kind));
    assert_var_error(e, v, 0, NULL);
    destroy_engine(e);
  }
}

Test(errors, clear_error_bad_handles) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  ST(ordo_var_delete(e, v), ORDO_OK);
  ST(ordo_var_clear_error(e, v), ORDO_ERR_INVALID_HANDLE);
  ST(ordo_var_clear_error(e, 0), ORDO_ERR_INVALID_HANDLE);
  ST(ordo_var_clear_error(NULL, v), ORDO_ERR_INVALID_ARGUMENT);
  int32_t code = 0;
  ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_ERR_INVALID_HANDLE);
  ordo_var w = new_var(e);
  ST(ordo_var_get_error(e, w, NULL, NULL, 0), ORDO_ERR_INVALID_ARGUMENT);
  code = -1;
  ST(ordo_var_get_error(e, w, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 0);
  destroy_engine(e);
}

Test(errors, wait_for_all_reports_a_failure_once) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    ordo_var w = new_var(e);
    code_op f, ok;
    code_op_init(&f, 13);
    code_op_init(&ok, 0);
    ST(push_named(e, &ok, "fine", NULL, 0, &w, 1), ORDO_OK);
    ST(push_named(e, &f, "first_failure", NULL, 0, &v, 1), ORDO_OK);

    ordo_status s = ordo_wait_for_all(e);
    char msg[512];
    ordo_last_error_copy(msg, sizeof msg);
    cr_assert_eq(s, ORDO_ERR_OP_FAILED, "%s: wait_for_all after a failure -> %s",
                 tu_kind_name(g_kind), ordo_status_string(s));
    assert_contains(msg, "first_failure", "wait_for_all message");
    assert_contains(msg, "13", "wait_for_all message");
    ST(ordo_wait_for_all(e), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    /* The var stays poisoned: only the wait_for_all record was cleared. */
    wait_var_failed(e, v, msg, sizeof msg);
    assert_var_error(e, v, 13, "first_failure");

    /* A skipped op counts as a failure for the next wait_for_all. */
    code_op skipped;
    code_op_init(&skipped, 0);
    ST(push_named(e, &skipped, "skipped", NULL, 0, &v, 1), ORDO_OK);
    s = ordo_wait_for_all(e);
    ordo_last_error_copy(msg, sizeof msg);
    cr_assert_eq(s, ORDO_ERR_OP_FAILED, "%s: wait_for_all after a skipped op -> %s",
                 tu_kind_name(g_kind), ordo_status_string(s));
    assert_contains(msg, "first_failure", "wait_for_all message for a skipped op");
    cr_assert_eq(atomic_load(&skipped.calls), 0, "%s", tu_kind_name(g_kind));
    ST(ordo_wait_for_all(e), ORDO_OK);

    /* The first of two failures is the one reported. */
    ordo_var p = new_var(e), q = new_var(e);
    code_op f1, f2;
    code_op_init(&f1, 21);
    code_op_init(&f2, 22);
    ST(push_named(e, &f1, "one", NULL, 0, &p, 1), ORDO_OK);
    ST(ordo_wait_for_var(e, p), ORDO_ERR_OP_FAILED);
    ST(push_named(e, &f2, "two", NULL, 0, &q, 1), ORDO_OK);
    ST(ordo_wait_for_var(e, q), ORDO_ERR_OP_FAILED);
    s = ordo_wait_for_all(e);
    ordo_last_error_copy(msg, sizeof msg);
    cr_assert_eq(s, ORDO_ERR_OP_FAILED, "%s", tu_kind_name(g_kind));
    assert_contains(msg, "'one'", "wait_for_all message (first failure)");
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&ok.calls), 1, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Async failures carry the message given to ordo_complete.                                    */
/* ------------------------------------------------------------------------------------------- */

typedef struct cm_arg {
  ordo_completion h;
  atomic_int status;
} cm_arg;

static void* complete_failing(void* p) {
  cm_arg* a = p;
  atomic_store(&a->status, ordo_complete(a->h, 17, "the disk is on fire"));
  return NULL;
}

Test(errors, message_given_to_complete_is_shown) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var r = new_var(e), v = new_var(e), dep = new_var(e);
    tu_deferred d;
    tu_deferred_init(&d);
    ordo_push_opts o = tu_opts_named("async_writer");
    ST(ordo_opr_push(e, tu_defer_fn, &d, &r, 1, &v, 1, &o), ORDO_OK);
    code_op skipped;
    code_op_init(&skipped, 0);
    ST(push_named(e, &skipped, "dependent", &v, 1, &dep, 1), ORDO_OK);
    ordo_completion h = tu_deferred_wait(&d, 5000);
    cr_assert_neq(h, 0, "%s", tu_kind_name(g_kind));
    cm_arg a;
    a.h = h;
    atomic_init(&a.status, -1);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, complete_failing, &a), 0);
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&a.status), ORDO_OK, "%s: complete -> %s", tu_kind_name(g_kind),
                 ordo_status_string(atomic_load(&a.status)));

    char msg[512];
    wait_var_failed(e, v, msg, sizeof msg);
    assert_contains(msg, "the disk is on fire", "wait_for_var message");
    assert_contains(msg, "async_writer", "wait_for_var message");
    assert_contains(msg, "17", "wait_for_var message");
    int32_t code = 0;
    char buf[256];
    ST(ordo_var_get_error(e, v, &code, buf, sizeof buf), ORDO_OK);
    cr_assert_eq(code, 17, "%s", tu_kind_name(g_kind));
    cr_assert_str_eq(buf, "op 'async_writer' failed (code 17): the disk is on fire", "%s",
                     tu_kind_name(g_kind));
    /* The dependent was skipped and inherited the message too. */
    wait_var_failed(e, dep, msg, sizeof msg);
    assert_contains(msg, "the disk is on fire", "wait_for_var(dep) message");
    cr_assert_eq(atomic_load(&skipped.calls), 0, "%s", tu_kind_name(g_kind));
    ST(ordo_var_get_error(e, dep, &code, buf, sizeof buf), ORDO_OK);
    cr_assert_eq(code, 17, "%s", tu_kind_name(g_kind));
    cr_assert_str_eq(buf, "op 'async_writer' failed (code 17): the disk is on fire", "%s",
                     tu_kind_name(g_kind));
    /* The var the async op only read is clean. */
    ST(ordo_wait_for_var(e, r), ORDO_OK);
    destroy_engine(e);
  }
}

Test(errors, get_error_truncates_and_names_are_capped) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v = new_var(e);
    char longname[100];
    for (int i = 0; i < 99; ++i) longname[i] = (char)('a' + i % 26);
    longname[99] = '\0';
    code_op f;
    code_op_init(&f, 3);
    ST(push_named(e, &f, longname, NULL, 0, &v, 1), ORDO_OK);
    char msg[512];
    wait_var_failed(e, v, msg, sizeof msg);
    char kept[ORDO_NAME_MAX + 3];
    kept[0] = '\'';
    memcpy(kept + 1, longname, ORDO_NAME_MAX);
    kept[ORDO_NAME_MAX + 1] = '\'';
    kept[ORDO_NAME_MAX + 2] = '\0';
    assert_contains(msg, kept, "message of an op with a long name");

    /* A small buffer gets a NUL-terminated prefix. */
    char small[8];
    memset(small, 'X', sizeof small);
    int32_t code = 0;
    ST(ordo_var_get_error(e, v, &code, small, sizeof small), ORDO_OK);
    cr_assert_eq(code, 3, "%s", tu_kind_name(g_kind));
    cr_assert_eq(small[7], '\0', "%s: truncated message not NUL-terminated", tu_kind_name(g_kind));
    cr_assert_str_eq(small, "op 'abc", "%s", tu_kind_name(g_kind));

    /* An op without a name still fails cleanly. */
    ordo_var u = new_var(e);
    code_op g;
    code_op_init(&g, 4);
    ST(ordo_opr_push(e, code_fn, &g, NULL, 0, &u, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, u), ORDO_ERR_OP_FAILED);
    ST(ordo_var_get_error(e, u, &code, NULL, 0), ORDO_OK);
    cr_assert_eq(code, 4, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

Test(errors, failing_op_on_a_var_read_by_many_poisons_only_its_own) {
  /* Many readers of a var alongside a failing writer of another: the readers' var stays clean. */
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var shared = new_var(e);
    ordo_var outs[16];
    code_op ops[16];
    for (int i = 0; i < 16; ++i) {
      outs[i] = new_var(e);
      code_op_init(&ops[i], i % 4 == 0 ? 100 + i : 0);
      ST(push_named(e, &ops[i], "mixed", &shared, 1, &outs[i], 1), ORDO_OK);
    }
    ST(ordo_wait_for_var(e, shared), ORDO_OK);
    for (int i = 0; i < 16; ++i) {
      ordo_status want = i % 4 == 0 ? ORDO_ERR_OP_FAILED : ORDO_OK;
      ST(ordo_wait_for_var(e, outs[i]), want);
      assert_var_error(e, outs[i], i % 4 == 0 ? 100 + i : 0, "mixed");
      cr_assert_eq(atomic_load(&ops[i].calls), 1, "%s", tu_kind_name(g_kind));
    }
    assert_var_error(e, shared, 0, NULL);
    destroy_engine(e);
  }
}

/* A user code that happens to equal ORDO_ERR_OP_FAILED (3) is still a plain user code: the
 * message must not claim the callback threw. */
Test(errors, user_code_equal_to_a_status_is_reported_as_is) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_POOLED, 2, &e), ORDO_OK);
  ordo_var v;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  code_op op;
  code_op_init(&op, ORDO_ERR_OP_FAILED);
  cr_assert_eq(push_named(e, &op, "three", NULL, 0, &v, 1), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_ERR_OP_FAILED);
  cr_assert_eq(atomic_load(&op.calls), 1);
  cr_assert_str_eq(ordo_last_error_message(), "op 'three' failed (code 3)");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
