/* Variable deletion: ordering, immediate invalidation, no handle reuse (SPEC §5). */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

TestSuite(var_lifecycle, .timeout = 30.0);

static ordo_engine* make_engine(int32_t kind) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  ordo_engine* e = NULL;
  ordo_status s = ordo_engine_create(&cfg, &e);
  cr_assert_eq(s, ORDO_OK, "create: %s", ordo_last_error_message());
  cr_assert_not_null(e);
  return e;
}

static int32_t op_noop(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  return 0;
}

static int32_t op_fail42(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  return 42;
}

static atomic_int g_ran;
static atomic_int g_freed;
static int32_t op_count(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  atomic_fetch_add(&g_ran, 1);
  return 0;
}
static void free_count(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_freed, 1);
}

/* Every use of a deleted (or foreign) handle is INVALID_HANDLE. */
static void check_dead(ordo_engine* e, ordo_var v, const char* what) {
  atomic_store(&g_ran, 0);
  atomic_store(&g_freed, 0);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  int32_t code = 0;
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, &v, 1, NULL, 0, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: push const", what);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, &v, 1, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: push mutable", what);
  o.prop = ORDO_PROP_ASYNC;
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, &v, 1, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: push ASYNC", what);
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, &v, 1, NULL, 0, NULL, &p), ORDO_ERR_INVALID_HANDLE,
               "%s: opr_new", what);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_ERR_INVALID_HANDLE, "%s: wait", what);
  cr_assert_eq(ordo_wait_for_var_timeout(e, v, 1000000), ORDO_ERR_INVALID_HANDLE,
               "%s: wait_timeout", what);
  cr_assert_eq(ordo_var_clear_error(e, v), ORDO_ERR_INVALID_HANDLE, "%s: clear_error", what);
  cr_assert_eq(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_ERR_INVALID_HANDLE, "%s: get_error",
               what);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_ERR_INVALID_HANDLE, "%s: delete", what);
  cr_assert_eq(atomic_load(&g_ran), 0, "%s: an op on a dead var ran", what);
  cr_assert_eq(atomic_load(&g_freed), 0, "%s", what);
}

struct slow {
  int hold; /* the writer holds v until `release` (not for the naive kind) */
  atomic_int release;
  atomic_int started;
  atomic_int finished;
  atomic_int readers_done;
};

/* Holds v until the test has checked the deleted handle (a 150 ms sleep made that likely: a
 * test thread that came later found the ops done, and "deleted while ops pending" was not). The
 * naive kind runs it inside its push, where it cannot wait for the test thread. */
static int32_t op_slow_writer(ordo_exec* x, void* ud) {
  (void)x;
  struct slow* s = ud;
  atomic_store(&s->started, 1);
  if (s->hold) tu_wait_eq(&s->release, 1, 5000);
  atomic_store(&s->finished, 1);
  return 0;
}

static int32_t op_reader_after(ordo_exec* x, void* ud) {
  (void)x;
  struct slow* s = ud;
  /* Runs after the writer (shares v): the writer must have finished. */
  if (atomic_load(&s->finished)) atomic_fetch_add(&s->readers_done, 1);
  return 0;
}

static void check_delete_ordered(int32_t kind) {
  ordo_engine* e = make_engine(kind);
  ordo_var v = 0, keep = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_var_new(e, &keep), ORDO_OK);
  struct slow s;
  memset(&s, 0, sizeof s);
  s.hold = kind != ORDO_ENGINE_NAIVE;
  cr_assert_eq(ordo_opr_push(e, op_slow_writer, &s, NULL, 0, &v, 1, NULL), ORDO_OK);
  for (int i = 0; i < 5; i++) {
    ordo_var both[2] = {v, keep};
    cr_assert_eq(ordo_opr_push(e, op_reader_after, &s, both, 2, NULL, 0, NULL), ORDO_OK);
  }
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK, "%s", ordo_last_error_message());
  /* From the moment delete returns, v is dead, even though ops on it are still pending. */
  check_dead(e, v, s.hold ? "deleted while ops pending" : "deleted (naive: ops done)");
  if (s.hold) {
    cr_assert_eq(atomic_load(&s.finished), 0, "the writer finished before it was released");
    cr_assert_eq(atomic_load(&s.readers_done), 0, "a reader ran while the writer held v");
    atomic_store(&s.release, 1);
  }
  cr_assert_eq(ordo_wait_for_var(e, keep), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(atomic_load(&s.started), 1);
  cr_assert_eq(atomic_load(&s.finished), 1, "the writer pushed before delete did not finish");
  cr_assert_eq(atomic_load(&s.readers_done), 5,
               "readers pushed before delete: %d of 5 ran after "
               "the writer",
               atomic_load(&s.readers_done));
  check_dead(e, v, "deleted, all ops done");
  cr_assert_eq(ordo_var_delete(e, keep), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(var_lifecycle, delete_ordered_after_earlier_ops_per_device) {
  check_delete_ordered(ORDO_ENGINE_PER_DEVICE);
}
Test(var_lifecycle, delete_ordered_after_earlier_ops_pooled) {
  check_delete_ordered(ORDO_ENGINE_POOLED);
}
Test(var_lifecycle, delete_ordered_after_earlier_ops_naive) {
  check_delete_ordered(ORDO_ENGINE_NAIVE);
}

Test(var_lifecycle, delete_fresh_var_then_dead) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_neq(v, 0u);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK);
  check_dead(e, v, "deleted fresh var");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

Test(var_lifecycle, many_create_delete_cycles_never_reuse_handles) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  enum { N = 100000 };
  ordo_var* all = malloc(sizeof(ordo_var) * N);
  cr_assert_not_null(all);
  for (int i = 0; i < N; i++) {
    ordo_status s = ordo_var_new(e, &all[i]);
    if (s != ORDO_OK) cr_assert_fail("var_new #%d: %s", i, ordo_last_error_message());
    if (all[i] == 0) cr_assert_fail("var_new #%d gave handle 0", i);
    /* Now and then use it, so that deletion has something to order after. */
    if (i % 1000 == 0)
      cr_assert_eq(ordo_opr_push(e, op_noop, NULL, NULL, 0, &all[i], 1, NULL), ORDO_OK);
    s = ordo_var_delete(e, all[i]);
    if (s != ORDO_OK) cr_assert_fail("var_delete #%d: %s", i, ordo_last_error_message());
  }
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  /* Every stale handle stays invalid. */
  for (int i = 0; i < N; i++) {
    int32_t code = 0;
    ordo_status s = ordo_var_get_error(e, all[i], &code, NULL, 0);
    if (s != ORDO_ERR_INVALID_HANDLE)
      cr_assert_fail("stale handle #%d (0x%llx): get_error gave %s", i, (unsigned long long)all[i],
                     ordo_status_string(s));
    if (i % 97 == 0) {
      s = ordo_wait_for_var(e, all[i]);
      if (s != ORDO_ERR_INVALID_HANDLE)
        cr_assert_fail("stale handle #%d: wait gave %s", i, ordo_status_string(s));
    }
  }
  /* No handle was ever handed out twice. */
  qsort(all, N, sizeof all[0], cmp_u64);
  for (int i = 1; i < N; i++) {
    if (all[i] == all[i - 1])
      cr_assert_fail("handle 0x%llx handed out twice", (unsigned long long)all[i]);
  }
  free(all);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(var_lifecycle, batch_create_delete_no_overlap) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  enum { B = 1000, ROUNDS = 5 };
  ordo_var* all = malloc(sizeof(ordo_var) * B * ROUNDS);
  cr_assert_not_null(all);
  for (int r = 0; r < ROUNDS; r++) {
    ordo_var* cur = all + r * B;
    for (int i = 0; i < B; i++) cr_assert_eq(ordo_var_new(e, &cur[i]), ORDO_OK);
    /* Stale handles of earlier rounds are still invalid while new vars are alive. */
    for (int i = 0; i < r * B; i += 7) {
      int32_t code = 0;
      cr_assert_eq(ordo_var_get_error(e, all[i], &code, NULL, 0), ORDO_ERR_INVALID_HANDLE,
                   "round %d: stale handle #%d valid again", r, i);
    }
    /* Delete in reverse order (a free list would hand these back first). */
    for (int i = B - 1; i >= 0; i--) cr_assert_eq(ordo_var_delete(e, cur[i]), ORDO_OK);
  }
  qsort(all, B * ROUNDS, sizeof all[0], cmp_u64);
  for (int i = 1; i < B * ROUNDS; i++)
    cr_assert_neq(all[i], all[i - 1], "handle 0x%llx reused", (unsigned long long)all[i]);
  free(all);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(var_lifecycle, delete_var_in_error_state) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_opr_push(e, op_fail42, NULL, NULL, 0, &v, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_ERR_OP_FAILED);
  int32_t code = 0;
  cr_assert_eq(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 42);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK, "deleting an errored var: %s",
               ordo_last_error_message());
  check_dead(e, v, "deleted errored var");
  /* The failure was recorded for wait_for_all; after that the engine is clean. */
  cr_assert_eq(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(var_lifecycle, delete_var_with_pending_error) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  atomic_store(&g_ran, 0);
  cr_assert_eq(ordo_opr_push(e, op_fail42, NULL, NULL, 0, &v, 1, NULL), ORDO_OK);
  /* Skipped (v in error by then), but still ordered before the delete. */
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, &v, 1, NULL, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK);
  check_dead(e, v, "deleted with error pending");
  cr_assert_eq(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
  cr_assert_eq(atomic_load(&g_ran), 0, "an op reading an errored var ran");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(var_lifecycle, vars_from_another_engine) {
  ordo_engine* a = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_engine* b = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var va[4], vb[4];
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(ordo_var_new(a, &va[i]), ORDO_OK);
    cr_assert_eq(ordo_var_new(b, &vb[i]), ORDO_OK);
  }
  for (int i = 0; i < 4; i++) check_dead(b, va[i], "A's var on B");
  for (int i = 0; i < 4; i++) check_dead(a, vb[i], "B's var on A");
  /* Nothing happened to them on their own engines (in particular no delete). */
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(ordo_opr_push(a, op_noop, NULL, NULL, 0, &va[i], 1, NULL), ORDO_OK);
    cr_assert_eq(ordo_wait_for_var(a, va[i]), ORDO_OK);
    cr_assert_eq(ordo_var_delete(a, va[i]), ORDO_OK);
    cr_assert_eq(ordo_opr_push(b, op_noop, NULL, NULL, 0, &vb[i], 1, NULL), ORDO_OK);
    cr_assert_eq(ordo_wait_for_var(b, vb[i]), ORDO_OK);
    cr_assert_eq(ordo_var_delete(b, vb[i]), ORDO_OK);
  }
  cr_assert_eq(ordo_engine_destroy(a), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(b), ORDO_OK);
}

Test(var_lifecycle, foreign_error_not_cleared) {
  /* clear_error with a foreign handle must not clear anything on the owning engine. */
  ordo_engine* a = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_engine* b = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var va = 0, vb = 0;
  cr_assert_eq(ordo_var_new(a, &va), ORDO_OK);
  cr_assert_eq(ordo_var_new(b, &vb), ORDO_OK);
  cr_assert_eq(ordo_opr_push(a, op_fail42, NULL, NULL, 0, &va, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(a, va), ORDO_ERR_OP_FAILED);
  cr_assert_eq(ordo_var_clear_error(b, va), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_wait_for_var(a, va), ORDO_ERR_OP_FAILED);
  int32_t code = 0;
  cr_assert_eq(ordo_var_get_error(a, va, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 42);
  cr_assert_eq(ordo_engine_destroy(a), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(b), ORDO_OK);
}

Test(var_lifecycle, stale_handle_invalid_after_reuse_pressure) {
  /* Delete one var, create many more (slot reuse), the old handle stays invalid and the new
   * vars work. */
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var old = 0;
  cr_assert_eq(ordo_var_new(e, &old), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, old), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  ordo_var fresh[64];
  for (int i = 0; i < 64; i++) {
    cr_assert_eq(ordo_var_new(e, &fresh[i]), ORDO_OK);
    cr_assert_neq(fresh[i], old);
  }
  check_dead(e, old, "old handle after reuse pressure");
  for (int i = 0; i < 64; i++) {
    cr_assert_eq(ordo_opr_push(e, op_noop, NULL, NULL, 0, &fresh[i], 1, NULL), ORDO_OK);
    cr_assert_eq(ordo_wait_for_var(e, fresh[i]), ORDO_OK);
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(var_lifecycle, vars_of_a_destroyed_engine) {
  /* A handle from an engine that is gone must not reach a var of a later engine. */
  ordo_engine* a = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var va[4];
  for (int i = 0; i < 4; i++) cr_assert_eq(ordo_var_new(a, &va[i]), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(a), ORDO_OK);
  ordo_engine* b = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var vb[4];
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(ordo_var_new(b, &vb[i]), ORDO_OK);
    for (int j = 0; j < 4; j++)
      cr_assert_neq(vb[i], va[j], "engine B handed out engine A's old handle");
  }
  for (int i = 0; i < 4; i++) check_dead(b, va[i], "a destroyed engine's var on a new engine");
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(ordo_wait_for_var(b, vb[i]), ORDO_OK);
    cr_assert_eq(ordo_var_delete(b, vb[i]), ORDO_OK);
  }
  cr_assert_eq(ordo_engine_destroy(b), ORDO_OK);
}

/* A handle that was never issued (the next index of a chunk in use, or a live var's slot at a
 * generation it has not reached) is made up, not a deleted variable: the message must not send
 * its caller looking for a delete that never happened. A deleted var's handle still says so.
 * (Handle layout, for building the made-up ones: index in bits 0-23, generation from bit 24.) */
static void expect_invalid_saying(ordo_engine* e, ordo_var h, const char* says, const char* what) {
  int32_t code = 0;
  ordo_status s = ordo_var_get_error(e, h, &code, NULL, 0);
  cr_assert_eq(s, ORDO_ERR_INVALID_HANDLE, "%s: %s", what, ordo_status_string(s));
  cr_assert(strstr(ordo_last_error_message(), says) != NULL, "%s: the message was '%s'", what,
            ordo_last_error_message());
  s = ordo_opr_push(e, op_noop, NULL, NULL, 0, &h, 1, NULL);
  cr_assert_eq(s, ORDO_ERR_INVALID_HANDLE, "%s (push): %s", what, ordo_status_string(s));
  cr_assert(strstr(ordo_last_error_message(), says) != NULL, "%s (push): the message was '%s'",
            what, ordo_last_error_message());
}

Test(var_lifecycle, made_up_handles_are_not_reported_as_deleted) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = 0, gone = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_var_new(e, &gone), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, gone), ORDO_OK);
  expect_invalid_saying(e, gone, "deleted", "a deleted var");
  expect_invalid_saying(e, v + 5, "made up", "an index never handed out");
  expect_invalid_saying(e, v + ((ordo_var)1 << 24), "made up", "a generation not reached yet");
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK, "the real var is untouched");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
