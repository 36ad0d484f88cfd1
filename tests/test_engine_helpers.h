/*
 * The preamble shared by the Criterion test files that run each test on one engine kind after
 * another. It includes Criterion and test_util.h; each test file is its own translation unit,
 * so every file gets its own g_kind. Unlike test_util.h these helpers assert, so they are for
 * the test thread only, never for op callbacks or other worker threads.
 *
 *   g_kind          the kind of the engine the test thread made last (set by make_engine)
 *   ST(expr, want)  asserts that expr returns status `want`, naming g_kind in the message
 *   make_engine     an engine of a kind with 2 CPU workers
 *   destroy_engine  destroys it, asserting ORDO_OK
 *   new_var         a new var on it
 *   wait_deferred   waits up to 5 s for a tu_deferred op to have deferred; returns its handle
 */
#ifndef ORDO_TESTS_TEST_ENGINE_HELPERS_H
#define ORDO_TESTS_TEST_ENGINE_HELPERS_H

#include <criterion/criterion.h>

#include "test_util.h"

static int32_t g_kind;
#define ST(expr, want) TU_ASSERT_ST(expr, want, tu_kind_name(g_kind))

static inline ordo_engine* make_engine(int32_t kind) {
  ordo_engine* e = NULL;
  g_kind = kind;
  ST(tu_engine_create(kind, 2, &e), ORDO_OK);
  cr_assert_not_null(e);
  return e;
}

static inline void destroy_engine(ordo_engine* e) {
  ST(ordo_engine_destroy(e), ORDO_OK);
}

static inline ordo_var new_var(ordo_engine* e) {
  ordo_var v = 0;
  ST(ordo_var_new(e, &v), ORDO_OK);
  return v;
}

static inline ordo_completion wait_deferred(tu_deferred* d) {
  ordo_completion h = tu_deferred_wait(d, 5000);
  cr_assert_neq(h, 0, "%s: the op never deferred", tu_kind_name(g_kind));
  return h;
}

#endif /* ORDO_TESTS_TEST_ENGINE_HELPERS_H */
