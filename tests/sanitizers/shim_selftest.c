/*
 * Checks of the Criterion shim itself (run by shim_selftest.sh): that it passes what passes,
 * and fails, skips and times out where Criterion would. The "selftest" suite must pass as a
 * whole; each "failing" test must end the run with the status shim_selftest.sh expects.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

TestSuite(selftest, .timeout = 10.0);

Test(selftest, every_check_passes_on_true_conditions) {
  int x = 3;
  unsigned u = 2;
  cr_assert(x == 3);
  cr_assert(x == 3, "with a message %d", x);
  cr_assert_eq(x + 1, 4);
  cr_assert_eq(u, 2, "an unsigned against an int literal");
  cr_assert_neq(x, 4);
  cr_assert_lt(-1, 0);
  cr_assert_gt(u, 1u);
  cr_assert_geq(u, 2u);
  cr_assert_null(NULL);
  cr_assert_not_null(&x);
  cr_assert_str_eq("abc", "abc");
  cr_expect_eq(x, 3);
  cr_expect_gt(x, 2, "x is %d", x);
}

Test(selftest, operands_are_evaluated_once) {
  int n = 0;
  cr_assert_eq(++n, 1);
  cr_assert_eq(n, 1);
}

/* Names sort in run order: a test's environment must not leak into the next one. */
Test(selftest, env_a_set_in_one_test) {
  cr_assert_eq(setenv("SHIM_SELFTEST_VAR", "1", 1), 0);
}

Test(selftest, env_b_restored_for_the_next) {
  cr_assert_null(getenv("SHIM_SELFTEST_VAR"));
}

static _Thread_local int g_thread_local;

Test(selftest, thread_a_sets_a_thread_local) {
  g_thread_local = 1;
}

Test(selftest, thread_b_starts_on_a_fresh_thread) {
  cr_assert_eq(g_thread_local, 0);
}

Test(selftest, skip_ends_the_test) {
  cr_skip_test("skipped on purpose (%d)", 42);
  cr_assert_fail("ran past cr_skip_test");
}

Test(failing, fatal_assertion) {
  cr_assert_eq(1, 2, "an expected failure");
  puts("UNREACHED");
}

Test(failing, expectation_lets_the_test_go_on) {
  cr_expect_eq(1, 2);
  puts("WENT ON");
}

Test(failing, timeout, .timeout = 0.2) {
  struct timespec ts = {5, 0};
  nanosleep(&ts, NULL);
}

static void* assert_false(void* arg) {
  (void)arg;
  cr_assert(0, "from another thread");
  return NULL;
}

Test(failing, assertion_on_another_thread) {
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, assert_false, NULL), 0);
  pthread_join(t, NULL);
}
