/*
 * A hang must say what it waits for (issue #21): a timed wait that runs out names the oldest of
 * the caller's ops still pending (name, state, how long), and ordo_engine_dump lists every
 * pending op and every var that waits hang on. A user hunting their own missing ordo_complete
 * starts here.
 */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

static ordo_engine* make(int32_t threads) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, threads, &e), ORDO_OK);
  return e;
}

static ordo_var new_var(ordo_engine* e) {
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  return v;
}

/* Pushes a named op that defers and is never completed by the engine; returns its handle once it
 * has deferred. */
static ordo_completion push_deferred(ordo_engine* e, tu_deferred* d, const char* name,
                                     ordo_var mutated) {
  tu_deferred_init(d);
  ordo_push_opts o = tu_opts_named(name);
  cr_assert_eq(ordo_opr_push(e, tu_defer_fn, d, NULL, 0, &mutated, 1, &o), ORDO_OK);
  ordo_completion c = tu_deferred_wait(d, 10000);
  cr_assert_neq(c, 0, "the op never deferred");
  return c;
}

/* The whole of what ordo_engine_dump writes, as a string (static buffer). */
static const char* dump_text(ordo_engine* e) {
  static char text[16384];
  FILE* f = tmpfile();
  cr_assert_not_null(f);
  cr_assert_eq(ordo_engine_dump(e, f), ORDO_OK, "%s", ordo_last_error_message());
  rewind(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

Test(diagnostics, wait_for_all_timeout_names_a_deferred_op_never_completed, .timeout = 20.0) {
  ordo_engine* e = make(2);
  ordo_var v = new_var(e);
  tu_deferred d;
  ordo_completion c = push_deferred(e, &d, "load_tile", v);
  cr_assert_eq(ordo_wait_for_all_timeout(e, 20 * 1000000ull), ORDO_ERR_TIMEOUT);
  const char* msg = ordo_last_error_message();
  cr_assert(strstr(msg, "ordo_wait_for_all") != NULL, "%s", msg);
  cr_assert(strstr(msg, "'load_tile'") != NULL, "the message names the op: %s", msg);
  cr_assert(strstr(msg, "deferred: waiting for ordo_complete") != NULL, "its state: %s", msg);
  cr_assert(strstr(msg, " ms") != NULL || strstr(msg, " s") != NULL, "for how long: %s", msg);
  cr_assert_eq(ordo_complete(c, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(diagnostics, wait_for_var_timeout_names_the_ops_on_that_var_only, .timeout = 20.0) {
  ordo_engine* e = make(2);
  ordo_var v = new_var(e), other = new_var(e);
  tu_deferred d, d_other;
  ordo_completion c = push_deferred(e, &d, "on_v", v);
  ordo_completion c_other = push_deferred(e, &d_other, "elsewhere", other);
  /* A reader of v queued behind the deferred writer. */
  atomic_int ran;
  atomic_init(&ran, 0);
  ordo_push_opts o = tu_opts_named("reads_v");
  cr_assert_eq(ordo_opr_push(e, tu_count_fn, &ran, &v, 1, NULL, 0, &o), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var_timeout(e, v, 20 * 1000000ull), ORDO_ERR_TIMEOUT);
  const char* msg = ordo_last_error_message();
  cr_assert(strstr(msg, "'on_v' (deferred: waiting for ordo_complete)") != NULL, "%s", msg);
  cr_assert(strstr(msg, "'reads_v' (queued for its vars)") != NULL, "%s", msg);
  cr_assert(strstr(msg, "elsewhere") == NULL, "an op on another var is not named: %s", msg);
  cr_assert(strstr(msg, "mark") == NULL, "the wait's own mark is not named: %s", msg);
  /* Oldest first. */
  cr_assert(strstr(msg, "'on_v'") < strstr(msg, "'reads_v'"), "%s", msg);
  cr_assert_eq(ordo_complete(c, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_complete(c_other, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&ran), 1);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(diagnostics, a_running_op_and_a_ready_one_are_told_apart, .timeout = 20.0) {
  ordo_engine* e = make(1); /* one CPU worker: the gate holds it, the next op stays ready */
  tu_gate g;
  tu_gate_init(&g);
  ordo_push_opts gate = tu_opts_named("gate");
  cr_assert_eq(ordo_opr_push(e, tu_gate_fn, &g, NULL, 0, NULL, 0, &gate), ORDO_OK);
  cr_assert(tu_wait_ge(&g.in, 1, 10000), "the gate op never ran");
  atomic_int ran;
  atomic_init(&ran, 0);
  ordo_push_opts next = tu_opts_named("next");
  cr_assert_eq(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, NULL, 0, &next), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all_timeout(e, 5 * 1000000ull), ORDO_ERR_TIMEOUT);
  const char* msg = ordo_last_error_message();
  cr_assert(strstr(msg, "'gate' (running)") != NULL, "%s", msg);
  cr_assert(strstr(msg, "'next' (ready: waiting for a worker)") != NULL, "%s", msg);
  atomic_store(&g.open, 1);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&ran), 1);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(diagnostics, at_most_three_ops_are_named_and_the_rest_counted, .timeout = 20.0) {
  ordo_engine* e = make(2);
  ordo_var v = new_var(e);
  tu_deferred d;
  ordo_completion c = push_deferred(e, &d, "first", v);
  atomic_int ran;
  atomic_init(&ran, 0);
  for (int i = 0; i < 5; i++) { /* five readers queued behind it */
    ordo_push_opts o = tu_opts_named("queued");
    cr_assert_eq(ordo_opr_push(e, tu_count_fn, &ran, &v, 1, NULL, 0, &o), ORDO_OK);
  }
  cr_assert_eq(ordo_wait_for_all_timeout(e, 5 * 1000000ull), ORDO_ERR_TIMEOUT);
  const char* msg = ordo_last_error_message();
  int named = 0;
  for (const char* p = msg; (p = strstr(p, "'queued'")) != NULL; p++) named++;
  cr_assert_eq(named, 2, "the first and two of the readers are named: %s", msg);
  cr_assert(strstr(msg, "and 3 more") != NULL, "%s", msg);
  cr_assert_eq(ordo_complete(c, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&ran), 5);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(diagnostics, a_timeout_under_a_millisecond_keeps_the_message_short, .timeout = 20.0) {
  ordo_engine* e = make(2);
  ordo_var v = new_var(e);
  tu_deferred d;
  ordo_completion c = push_deferred(e, &d, "slow", v);
  cr_assert_eq(ordo_wait_for_all_timeout(e, 100000), ORDO_ERR_TIMEOUT);
  cr_assert(strstr(ordo_last_error_message(), "slow") == NULL, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_var_timeout(e, v, 0), ORDO_ERR_TIMEOUT); /* a poll */
  cr_assert(strstr(ordo_last_error_message(), "slow") == NULL, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_complete(c, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(diagnostics, dump_lists_pending_ops_and_vars_with_waits, .timeout = 20.0) {
  ordo_engine* e = make(2);
  ordo_var v = new_var(e);
  tu_deferred d;
  ordo_completion c = push_deferred(e, &d, "never_completed", v);
  /* A timed wait that runs out leaves its mark on v: v is a var with a wait. */
  cr_assert_eq(ordo_wait_for_var_timeout(e, v, 2 * 1000000ull), ORDO_ERR_TIMEOUT);
  const char* text = dump_text(e);
  cr_assert(strstr(text, "'never_completed' (deferred: waiting for ordo_complete)") != NULL, "%s",
            text);
  cr_assert(strstr(text, "mutates var 0x") != NULL, "the op's vars: %s", text);
  cr_assert(strstr(text, "ordo_wait_for_var's mark") != NULL, "%s", text);
  cr_assert(strstr(text, "vars with waits:\n  var 0x") != NULL, "%s", text);
  cr_assert(strstr(text, "a wait mark outstanding") != NULL, "%s", text);
  cr_assert_eq(ordo_complete(c, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  text = dump_text(e);
  cr_assert(strstr(text, "0 ops pending") != NULL, "%s", text);
  cr_assert(strstr(text, "vars with waits: none") != NULL, "%s", text);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(diagnostics, dump_refuses_bad_arguments) {
  ordo_engine* e = make(2);
  cr_assert_eq(ordo_engine_dump(NULL, stderr), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert(strlen(ordo_last_error_message()) > 0);
  cr_assert_eq(ordo_engine_dump(e, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(ordo_last_error_message(), "out") != NULL, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(ordo_engine_dump(e, stderr), ORDO_ERR_INVALID_HANDLE, "a freed engine");
  cr_assert(strlen(ordo_last_error_message()) > 0);
}
