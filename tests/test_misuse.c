/* Bad arguments and struct_size versioning (SPEC §10, ABI.md §3.1). Every misuse returns its
 * exact status and leaves nothing behind. */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(misuse, .timeout = 30.0);

#define BOGUS_VAR ((ordo_var)0xdeadbeef12345678ull)

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

static void reset_counts(void) {
  atomic_store(&g_ran, 0);
  atomic_store(&g_freed, 0);
}

/* ---- NULL engine ---- */

Test(misuse, null_engine_everywhere) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 0, &v, 1, NULL, &p), ORDO_OK);
  reset_counts();

  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  int32_t code = 0;
  ordo_var w = 0;
  ordo_opr q = 0;
  char buf[64];
  cr_assert_eq(ordo_engine_destroy(NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_engine_retain(NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_engine_release(NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_engine_get_config(NULL, &cfg), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_var_new(NULL, &w), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_var_delete(NULL, v), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_var_clear_error(NULL, v), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_var_get_error(NULL, v, &code, buf, sizeof buf), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_push(NULL, op_count, NULL, NULL, 0, &v, 1, NULL),
               ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_push(NULL, op_count, NULL, NULL, 0, NULL, 0, NULL),
               ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_new(NULL, op_count, NULL, NULL, 0, &v, 1, NULL, &q),
               ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_push_prepared(NULL, p, 0), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_delete(NULL, p), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_wait_for_var(NULL, v), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_wait_for_var_timeout(NULL, v, 1000), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_wait_for_all(NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_wait_for_all_timeout(NULL, 1000), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_gt(strlen(ordo_last_error_message()), 0u);

  /* None of that touched the real engine's objects. */
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK, "prepared op was deleted by a NULL call");
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 1);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(misuse, device_count_null) {
  cr_assert_eq(ordo_device_count(NULL), ORDO_ERR_INVALID_ARGUMENT);
  int32_t n = -5;
  cr_assert_eq(ordo_device_count(&n), ORDO_OK);
  cr_assert_geq(n, 0);
}

Test(misuse, exec_functions_outside_op) {
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  cr_assert_eq(ordo_exec_get_info(NULL, &info), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_exec_get_info(NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
  ordo_completion c = 0;
  cr_assert_eq(ordo_exec_defer(NULL, &c), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_complete(0, 0, NULL), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_complete((ordo_completion)0xdeadbeef12345678ull, 0, "x"),
               ORDO_ERR_INVALID_HANDLE);
}

/* ---- NULL fn, NULL outs, NULL arrays ---- */

Test(misuse, null_fn) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  reset_counts();
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  cr_assert_eq(ordo_opr_push(e, NULL, NULL, NULL, 0, NULL, 0, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_push(e, NULL, NULL, &v, 1, &v, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, NULL, NULL, &v, 1, NULL, 0, &o, &p), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 0);
}

Test(misuse, null_out_pointers) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cr_assert_eq(ordo_engine_create(NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_engine_create(&cfg, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_engine_get_config(e, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_var_new(e, NULL), ORDO_ERR_INVALID_ARGUMENT);
  char buf[16];
  cr_assert_eq(ordo_var_get_error(e, v, NULL, NULL, 0), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_var_get_error(e, v, NULL, buf, sizeof buf), ORDO_ERR_INVALID_ARGUMENT);
  reset_counts();
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 0, &v, 1, &o, NULL),
               ORDO_ERR_INVALID_ARGUMENT);
  /* A valid get_error with a NULL buf is fine. */
  int32_t code = -1;
  cr_assert_eq(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 0);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 0);
  cr_assert_eq(atomic_load(&g_freed), 0, "free_fn called for a failed opr_new");
}

Test(misuse, null_arrays_with_counts) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  reset_counts();
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 1, NULL, 0, &o), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, NULL, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 3, &v, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, &v, 1, NULL, 2, &o), ORDO_ERR_INVALID_ARGUMENT);
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 1, NULL, 0, &o, &p),
               ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, &v, 1, NULL, 1, &o, &p), ORDO_ERR_INVALID_ARGUMENT);
  /* NULL arrays with zero counts are fine. */
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, NULL, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 1);
  cr_assert_eq(atomic_load(&g_freed), 0);
}

/* ---- bad var handles ---- */

static void check_bad_var(ordo_engine* e, ordo_var bad, ordo_var good, const char* what) {
  reset_counts();
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  int32_t code = 0;
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, &bad, 1, NULL, 0, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: push const", what);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, &bad, 1, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: push mutable", what);
  /* The bad one after a good one, in either list: nothing is pushed. */
  ordo_var pair[2] = {good, bad};
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, pair, 2, NULL, 0, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: push const pair", what);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, pair, 2, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: push mutable pair", what);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, &good, 1, &bad, 1, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: good const, bad mutable", what);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, &bad, 1, &good, 1, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: bad const, good mutable", what);
  o.prop = ORDO_PROP_ASYNC;
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, pair, 2, &o), ORDO_ERR_INVALID_HANDLE,
               "%s: ASYNC push", what);
  o.prop = ORDO_PROP_NORMAL;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, pair, 2, NULL, 0, &o, &p), ORDO_ERR_INVALID_HANDLE,
               "%s: opr_new", what);
  cr_assert_eq(ordo_wait_for_var(e, bad), ORDO_ERR_INVALID_HANDLE, "%s: wait", what);
  cr_assert_eq(ordo_wait_for_var_timeout(e, bad, 1000000), ORDO_ERR_INVALID_HANDLE,
               "%s: wait_timeout", what);
  cr_assert_eq(ordo_var_delete(e, bad), ORDO_ERR_INVALID_HANDLE, "%s: delete", what);
  cr_assert_eq(ordo_var_clear_error(e, bad), ORDO_ERR_INVALID_HANDLE, "%s: clear_error", what);
  cr_assert_eq(ordo_var_get_error(e, bad, &code, NULL, 0), ORDO_ERR_INVALID_HANDLE, "%s: get_error",
               what);
  cr_assert_gt(strlen(ordo_last_error_message()), 0u);
  /* The good var is not blocked or damaged by the failed pushes. */
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, &good, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, good), ORDO_OK, "%s", what);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK, "%s: a failed push counted as a failed op", what);
  cr_assert_eq(ordo_var_get_error(e, good, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 0);
  cr_assert_eq(atomic_load(&g_ran), 1, "%s: an op from a failed push ran", what);
  cr_assert_eq(atomic_load(&g_freed), 0, "%s: free_fn called for a failed push", what);
}

static void check_bad_vars_kind(int32_t kind) {
  ordo_engine* e = make_engine(kind);
  ordo_var good = 0;
  cr_assert_eq(ordo_var_new(e, &good), ORDO_OK);
  check_bad_var(e, 0, good, "handle 0");
  check_bad_var(e, BOGUS_VAR, good, "made-up handle");
  check_bad_var(e, ~(ordo_var)0, good, "all ones");

  ordo_engine* other = make_engine(ORDO_ENGINE_POOLED);
  ordo_var foreign = 0;
  cr_assert_eq(ordo_var_new(other, &foreign), ORDO_OK);
  /* Make the handle sets overlap as much as possible. */
  ordo_var more[8];
  for (int i = 0; i < 8; i++) cr_assert_eq(ordo_var_new(other, &more[i]), ORDO_OK);
  check_bad_var(e, foreign, good, "foreign handle");
  for (int i = 0; i < 8; i++) check_bad_var(e, more[i], good, "foreign handle (more)");
  /* The foreign var is still fine on its own engine. */
  cr_assert_eq(ordo_wait_for_var(other, foreign), ORDO_OK);
  cr_assert_eq(ordo_var_delete(other, foreign), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(other), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(misuse, bad_var_handles_per_device) {
  check_bad_vars_kind(ORDO_ENGINE_PER_DEVICE);
}
Test(misuse, bad_var_handles_naive) {
  check_bad_vars_kind(ORDO_ENGINE_NAIVE);
}

Test(misuse, bad_opr_handles) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_engine* other = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_opr foreign = 0;
  cr_assert_eq(ordo_opr_new(other, op_count, NULL, NULL, 0, NULL, 0, NULL, &foreign), ORDO_OK);
  const ordo_opr bad[] = {0, (ordo_opr)0xdeadbeef12345678ull, foreign};
  for (size_t i = 0; i < 3; i++) {
    cr_assert_eq(ordo_opr_push_prepared(e, bad[i], 0), ORDO_ERR_INVALID_HANDLE, "case %zu", i);
    cr_assert_eq(ordo_opr_delete(e, bad[i]), ORDO_ERR_INVALID_HANDLE, "case %zu", i);
  }
  /* The foreign prepared op survived the delete attempt on the wrong engine. */
  reset_counts();
  cr_assert_eq(ordo_opr_push_prepared(other, foreign, 0), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(other), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 1);
  cr_assert_eq(ordo_opr_delete(other, foreign), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(other), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* Var, prepared-op and completion handles each name their own kind of object. They once shared
 * one layout, so an engine's first var and first prepared op had the same value, and
 * ordo_opr_delete() given the var deleted the prepared op (found by review). */
static _Atomic ordo_completion g_deferred;

static int32_t op_defer(ordo_exec* exec, void* ud) {
  (void)ud;
  ordo_completion c = 0;
  cr_assert_eq(ordo_exec_defer(exec, &c), ORDO_OK);
  atomic_store(&g_deferred, c);
  return 0;
}

static void assert_wrong_kind(ordo_status s, const char* got, const char* expected) {
  cr_assert_eq(s, ORDO_ERR_INVALID_HANDLE, "status %d", s);
  char want[96];
  snprintf(want, sizeof want, "is a %s handle, not a %s handle", got, expected);
  cr_assert_not_null(strstr(ordo_last_error_message(), want), "message: %s",
                     ordo_last_error_message());
}

Test(misuse, handles_of_another_kind_name_nothing) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  reset_counts();
  atomic_store(&g_deferred, 0);
  ordo_var v = 0, w = 0;
  ordo_opr p = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_var_new(e, &w), ORDO_OK);
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = free_count;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 0, &v, 1, &opts, &p), ORDO_OK);
  cr_assert_eq(ordo_opr_push(e, op_defer, NULL, NULL, 0, &w, 1, NULL), ORDO_OK);
  ordo_completion c;
  while ((c = atomic_load(&g_deferred)) == 0) sched_yield();
  cr_assert(v != p && v != c && p != c, "v %llx p %llx c %llx", (unsigned long long)v,
            (unsigned long long)p, (unsigned long long)c);

  assert_wrong_kind(ordo_opr_push_prepared(e, v, 0), "var", "prepared op");
  assert_wrong_kind(ordo_opr_delete(e, v), "var", "prepared op");
  assert_wrong_kind(ordo_opr_delete(e, c), "completion", "prepared op");
  assert_wrong_kind(ordo_var_delete(e, p), "prepared op", "var");
  assert_wrong_kind(ordo_var_delete(e, c), "completion", "var");
  assert_wrong_kind(ordo_wait_for_var(e, p), "prepared op", "var");
  assert_wrong_kind(ordo_opr_push(e, op_count, NULL, &c, 1, NULL, 0, NULL), "completion", "var");
  assert_wrong_kind(ordo_complete(v, 42, "not mine"), "var", "completion");
  assert_wrong_kind(ordo_complete(p, 42, "not mine"), "prepared op", "completion");

  /* Each object is untouched: the deferred op completes once, cleanly; the prepared op runs and
   * is freed once; the var is still live. */
  cr_assert_eq(atomic_load(&g_freed), 0, "a wrong-kind delete freed the prepared op");
  cr_assert_eq(ordo_complete(c, 0, NULL), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_var(e, w), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(atomic_load(&g_ran), 1);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 1);
}

/* ---- bad options: nothing pushed ---- */

Test(misuse, failed_push_pushes_nothing) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  reset_counts();
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  int dummy = 0;
  o.next = &dummy;
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, &v, 1, &o), ORDO_ERR_UNSUPPORTED);
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 0, &v, 1, &o, &p), ORDO_ERR_UNSUPPORTED);
  o.next = NULL;
  o.prop = 99;
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, &v, 1, &o), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 0, &v, 1, &o, &p), ORDO_ERR_INVALID_ARGUMENT);
  o.prop = ORDO_PROP_ASYNC;
  o.next = &dummy;
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, &v, 1, &o), ORDO_ERR_UNSUPPORTED);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 0);
  cr_assert_eq(atomic_load(&g_freed), 0);
}

/* ---- struct_size versioning: push opts ---- */

struct bigger_opts {
  ordo_push_opts o;
  unsigned char tail[16];
};

struct opts_rec {
  atomic_int ran;
  int32_t priority, prop;
  char name[64];
};

static int32_t op_opts_rec(ordo_exec* x, void* ud) {
  struct opts_rec* r = ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(x, &info) == ORDO_OK) {
    r->priority = info.priority;
    r->prop = info.prop;
    strncpy(r->name, info.name ? info.name : "<NULL>", sizeof r->name - 1);
  }
  atomic_store(&r->ran, 1);
  return 0;
}

Test(misuse, push_opts_bigger_struct) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  reset_counts();
  struct bigger_opts b;
  memset(&b, 0, sizeof b);
  ordo_push_opts_init(&b.o);
  b.o.struct_size = (uint32_t)sizeof b;
  b.o.priority = 4;
  b.o.name = "big";
  b.o.free_fn = free_count;
  struct opts_rec r;
  memset(&r, 0, sizeof r);
  cr_assert_eq(ordo_opr_push(e, op_opts_rec, &r, NULL, 0, NULL, 0, &b.o), ORDO_OK,
               "zero tail refused: %s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&r.ran), 1);
  cr_assert_eq(r.priority, 4);
  cr_assert_str_eq(r.name, "big");
  cr_assert_eq(atomic_load(&g_freed), 1);

  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 0, NULL, 0, &b.o, &p), ORDO_OK);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);

  for (size_t i = 0; i < sizeof b.tail; i += 5) {
    b.tail[i] = 1;
    struct opts_rec r2;
    memset(&r2, 0, sizeof r2);
    cr_assert_eq(ordo_opr_push(e, op_opts_rec, &r2, NULL, 0, NULL, 0, &b.o), ORDO_ERR_UNSUPPORTED,
                 "non-zero tail byte %zu accepted", i);
    cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 0, NULL, 0, &b.o, &p), ORDO_ERR_UNSUPPORTED);
    cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&r2.ran), 0);
    b.tail[i] = 0;
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 2,
               "free_fn count %d: the prepared op's ran once, the "
               "push's once, the refused ones never",
               atomic_load(&g_freed));
}

Test(misuse, push_opts_struct_size_too_small) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  reset_counts();
  const uint32_t sizes[] = {0, 1, 2, 3};
  for (size_t i = 0; i < 4; i++) {
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.free_fn = free_count;
    o.struct_size = sizes[i];
    cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, NULL, 0, &o), ORDO_ERR_INVALID_ARGUMENT,
                 "struct_size %u", (unsigned)sizes[i]);
    ordo_opr p = 0;
    cr_assert_eq(ordo_opr_new(e, op_count, NULL, NULL, 0, NULL, 0, &o, &p),
                 ORDO_ERR_INVALID_ARGUMENT, "opr_new struct_size %u", (unsigned)sizes[i]);
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 0);
  cr_assert_eq(atomic_load(&g_freed), 0);
}

Test(misuse, push_opts_older_smaller_struct) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  reset_counts();
  /* An "older" caller whose struct ends before `name`: name and next are garbage it never had. */
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.struct_size = (uint32_t)offsetof(ordo_push_opts, name);
  o.priority = 5;
  o.prop = ORDO_PROP_CPU_PRIORITIZED;
  o.free_fn = free_count;
  o.name = (const char*)(uintptr_t)0x1; /* beyond struct_size: must not be read */
  o.next = (const void*)(uintptr_t)0x1; /* beyond struct_size: must not be read */
  struct opts_rec r;
  memset(&r, 0, sizeof r);
  cr_assert_eq(ordo_opr_push(e, op_opts_rec, &r, NULL, 0, NULL, 0, &o), ORDO_OK,
               "older struct refused: %s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&r.ran), 1);
  cr_assert_eq(r.priority, 5);
  cr_assert_eq(r.prop, ORDO_PROP_CPU_PRIORITIZED);
  cr_assert_str_eq(r.name, "", "name beyond struct_size was used");

  /* The smallest valid struct: only struct_size; everything else defaults. */
  ordo_push_opts m;
  memset(&m, 0x7F, sizeof m);
  m.struct_size = 4;
  struct opts_rec r2;
  memset(&r2, 0, sizeof r2);
  cr_assert_eq(ordo_opr_push(e, op_opts_rec, &r2, NULL, 0, NULL, 0, &m), ORDO_OK,
               "struct_size 4 refused: %s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&r2.ran), 1);
  cr_assert_eq(r2.priority, 0);
  cr_assert_eq(r2.prop, ORDO_PROP_NORMAL);
  cr_assert_str_eq(r2.name, "");

  /* Ends right after prop: device_type/device_id/free_fn are defaults. */
  ordo_push_opts d;
  memset(&d, 0x7F, sizeof d);
  d.struct_size = (uint32_t)offsetof(ordo_push_opts, device_type);
  d.priority = -2;
  d.prop = ORDO_PROP_NORMAL;
  struct opts_rec r3;
  memset(&r3, 0, sizeof r3);
  cr_assert_eq(ordo_opr_push(e, op_opts_rec, &r3, NULL, 0, NULL, 0, &d), ORDO_OK,
               "struct ending at prop refused: %s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&r3.ran), 1);
  cr_assert_eq(r3.priority, -2);

  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 1);
}

Test(misuse, push_opts_init_sized_writes_at_most_size) {
  union {
    ordo_push_opts o;
    unsigned char bytes[sizeof(ordo_push_opts) + 16];
  } u;
  const size_t sizes[] = {4, 8, offsetof(ordo_push_opts, free_fn), offsetof(ordo_push_opts, name),
                          offsetof(ordo_push_opts, next)};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    memset(&u, 0xAB, sizeof u);
    ordo_push_opts_init_sized(&u.o, sizes[k]);
    cr_assert_eq(u.o.struct_size, (uint32_t)sizes[k], "size %zu: struct_size %u", sizes[k],
                 (unsigned)u.o.struct_size);
    for (size_t i = sizes[k]; i < sizeof u; i++)
      cr_assert_eq(u.bytes[i], 0xAB, "init_sized(%zu) wrote byte %zu", sizes[k], i);
    if (sizes[k] >= offsetof(ordo_push_opts, prop) + sizeof(int32_t)) {
      cr_assert_eq(u.o.priority, 0);
      cr_assert_eq(u.o.prop, ORDO_PROP_NORMAL);
    }
  }
  /* Smaller than 4 or NULL: nothing written. */
  for (size_t s = 0; s < 4; s++) {
    memset(&u, 0xAB, sizeof u);
    ordo_push_opts_init_sized(&u.o, s);
    for (size_t i = 0; i < sizeof u; i++)
      cr_assert_eq(u.bytes[i], 0xAB, "init_sized(%zu) wrote byte %zu", s, i);
  }
  ordo_push_opts_init_sized(NULL, sizeof(ordo_push_opts));

  /* Above 4096, the header's bound for every struct_size (no struct of this ABI grows so
   * large: the size is garbage): nothing written, for both init_sized functions. */
  static unsigned char big[8192];
  memset(big, 0xAB, sizeof big);
  ordo_push_opts_init_sized((ordo_push_opts*)(void*)big, 4097);
  ordo_engine_config_init_sized((ordo_engine_config*)(void*)big, sizeof big);
  for (size_t i = 0; i < sizeof big; i++)
    cr_assert_eq(big[i], 0xAB, "init_sized above 4096 wrote byte %zu", i);

  /* Full size: every default. */
  memset(&u, 0xAB, sizeof u);
  ordo_push_opts_init(&u.o);
  cr_assert_eq(u.o.struct_size, (uint32_t)sizeof(ordo_push_opts));
  cr_assert_eq(u.o.priority, 0);
  cr_assert_eq(u.o.prop, ORDO_PROP_NORMAL);
  cr_assert_eq(u.o.device_type, ORDO_DEVICE_CPU);
  cr_assert_eq(u.o.device_id, 0);
  cr_assert_null(u.o.free_fn);
  cr_assert_null(u.o.name);
  cr_assert_null(u.o.next);
  for (size_t i = sizeof(ordo_push_opts); i < sizeof u; i++) cr_assert_eq(u.bytes[i], 0xAB);
}

/* ---- struct_size versioning: engine config ---- */

struct bigger_config {
  ordo_engine_config c;
  unsigned char tail[16];
};

Test(misuse, config_bigger_struct) {
  struct bigger_config b;
  memset(&b, 0, sizeof b);
  ordo_engine_config_init(&b.c);
  b.c.struct_size = (uint32_t)sizeof b;
  b.c.kind = ORDO_ENGINE_POOLED;
  b.c.cpu_threads = 3;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(&b.c, &e), ORDO_OK, "zero tail refused: %s",
               ordo_last_error_message());
  ordo_engine_config c;
  ordo_engine_config_init(&c);
  cr_assert_eq(ordo_engine_get_config(e, &c), ORDO_OK);
  cr_assert_eq(c.kind, ORDO_ENGINE_POOLED);
  cr_assert_eq(c.cpu_threads, 3);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);

  for (size_t i = 0; i < sizeof b.tail; i += 3) {
    b.tail[i] = 0x80;
    e = (ordo_engine*)(uintptr_t)0x1;
    cr_assert_eq(ordo_engine_create(&b.c, &e), ORDO_ERR_UNSUPPORTED, "tail byte %zu", i);
    cr_assert_null(e);
    b.tail[i] = 0;
  }
}

Test(misuse, config_struct_size_too_small) {
  for (uint32_t s = 0; s < 4; s++) {
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.struct_size = s;
    ordo_engine* e = (ordo_engine*)(uintptr_t)0x1;
    cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_ERR_INVALID_ARGUMENT, "struct_size %u",
                 (unsigned)s);
    cr_assert_null(e);
  }
}

Test(misuse, config_older_smaller_struct) {
  unsetenv("ORDO_CPU_THREADS");
  unsetenv("ORDO_ENGINE");
  ordo_engine_config cfg;
  memset(&cfg, 0x7F, sizeof cfg); /* garbage beyond struct_size must not be read */
  cfg.struct_size = (uint32_t)offsetof(ordo_engine_config, cpu_threads);
  cfg.kind = ORDO_ENGINE_POOLED;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK, "older config refused: %s",
               ordo_last_error_message());
  ordo_engine_config c;
  ordo_engine_config_init(&c);
  cr_assert_eq(ordo_engine_get_config(e, &c), ORDO_OK);
  cr_assert_eq(c.kind, ORDO_ENGINE_POOLED);
  cr_assert_geq(c.cpu_threads, 2, "missing cpu_threads did not take the default");
  cr_assert_lt(c.cpu_threads, 0x7F7F7F7F);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(misuse, config_flags_and_next) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.flags = ORDO_ENGINE_FLAG_PUSHERS_HELP << 1; /* the first bit not defined */
  ordo_engine* e = (ordo_engine*)(uintptr_t)0x1;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_ERR_UNSUPPORTED);
  cr_assert_null(e);
  cfg.flags = 0x80000000u;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_ERR_UNSUPPORTED);
  ordo_engine_config_init(&cfg);
  int dummy = 0;
  cfg.next = &dummy;
  e = (ordo_engine*)(uintptr_t)0x1;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_ERR_UNSUPPORTED);
  cr_assert_null(e);
}

Test(misuse, config_init_sized_writes_at_most_size) {
  union {
    ordo_engine_config c;
    unsigned char bytes[sizeof(ordo_engine_config) + 16];
  } u;
  const size_t sizes[] = {4, offsetof(ordo_engine_config, cpu_threads),
                          offsetof(ordo_engine_config, flags)};
  for (size_t k = 0; k < 3; k++) {
    memset(&u, 0xAB, sizeof u);
    ordo_engine_config_init_sized(&u.c, sizes[k]);
    cr_assert_eq(u.c.struct_size, (uint32_t)sizes[k]);
    for (size_t i = sizes[k]; i < sizeof u; i++)
      cr_assert_eq(u.bytes[i], 0xAB, "config init_sized(%zu) wrote byte %zu", sizes[k], i);
  }
  for (size_t s = 0; s < 4; s++) {
    memset(&u, 0xAB, sizeof u);
    ordo_engine_config_init_sized(&u.c, s);
    for (size_t i = 0; i < sizeof u; i++) cr_assert_eq(u.bytes[i], 0xAB);
  }
  ordo_engine_config_init_sized(NULL, sizeof(ordo_engine_config));
  memset(&u, 0xAB, sizeof u);
  ordo_engine_config_init(&u.c);
  cr_assert_eq(u.c.struct_size, (uint32_t)sizeof(ordo_engine_config));
  cr_assert_eq(u.c.kind, ORDO_ENGINE_DEFAULT);
  cr_assert_eq(u.c.cpu_threads, 0);
  cr_assert_eq(u.c.cpu_priority_threads, 0);
  cr_assert_eq(u.c.copy_threads, 0);
  cr_assert_eq(u.c.max_pending, 0);
  cr_assert_eq(u.c.flags, 0u);
  cr_assert_null(u.c.next);
  for (size_t i = sizeof(ordo_engine_config); i < sizeof u; i++) cr_assert_eq(u.bytes[i], 0xAB);
}

/* ---- exec info misuse from inside an op ---- */

struct exec_misuse {
  atomic_int ran;
  atomic_int null_info;
  atomic_int small_info;
  atomic_int null_defer_out;
  atomic_int ok_small;
  atomic_int ok_small_prio;
  ordo_exec* saved;
};

static int32_t op_exec_misuse(ordo_exec* x, void* ud) {
  struct exec_misuse* m = ud;
  atomic_store(&m->null_info, ordo_exec_get_info(x, NULL));
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = 3;
  atomic_store(&m->small_info, ordo_exec_get_info(x, &info));
  atomic_store(&m->null_defer_out, ordo_exec_defer(x, NULL));
  /* An older, smaller exec_info: only the fields it has are written. */
  union {
    ordo_exec_info i;
    unsigned char bytes[sizeof(ordo_exec_info)];
  } u;
  memset(&u, 0xCD, sizeof u);
  u.i.struct_size = (uint32_t)offsetof(ordo_exec_info, stream);
  ordo_status s = ordo_exec_get_info(x, &u.i);
  int untouched = 1;
  for (size_t i = offsetof(ordo_exec_info, stream); i < sizeof u; i++)
    if (u.bytes[i] != 0xCD) untouched = 0;
  atomic_store(&m->ok_small, s == ORDO_OK && untouched);
  atomic_store(&m->ok_small_prio, u.i.priority);
  m->saved = x;
  atomic_store(&m->ran, 1);
  return 0;
}

Test(misuse, exec_info_misuse_inside_op) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  struct exec_misuse m;
  memset(&m, 0, sizeof m);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.priority = 6;
  cr_assert_eq(ordo_opr_push(e, op_exec_misuse, &m, NULL, 0, NULL, 0, &o), ORDO_OK);
  /* Bounded: a wrongly accepted defer(x, NULL) would leave the op pending forever. */
  cr_assert_eq(ordo_wait_for_all_timeout(e, 5000000000ull), ORDO_OK, "%s",
               ordo_last_error_message());
  cr_assert_eq(atomic_load(&m.ran), 1);
  cr_assert_eq(atomic_load(&m.null_info), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(atomic_load(&m.small_info), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(atomic_load(&m.null_defer_out), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert(atomic_load(&m.ok_small),
            "get_info with a smaller struct_size failed or wrote "
            "past struct_size");
  cr_assert_eq(atomic_load(&m.ok_small_prio), 6);
  /* The exec outside its callback. */
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  cr_assert_eq(ordo_exec_get_info(m.saved, &info), ORDO_ERR_INVALID_STATE);
  ordo_completion c = 0;
  cr_assert_eq(ordo_exec_defer(m.saved, &c), ORDO_ERR_INVALID_STATE);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* An op's distinct vars are counted in 16 bits: more must be refused, not truncated. */
Test(misuse, too_many_vars_in_one_op, .timeout = 60.0) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_POOLED;
  cfg.cpu_threads = 2;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK);
  size_t n = 65536;
  ordo_var* vars = malloc(n * sizeof *vars);
  cr_assert_not_null(vars);
  for (size_t i = 0; i < n; ++i) cr_assert_eq(ordo_var_new(e, &vars[i]), ORDO_OK);
  atomic_store(&g_ran, 0);
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, vars, n, NULL, 0, NULL), ORDO_ERR_INVALID_ARGUMENT,
               "65536 vars: %s", ordo_last_error_message());
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, vars, n - 1, NULL, 0, NULL), ORDO_OK,
               "65535 vars: %s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 1);
  free(vars);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* Counts whose sum wraps around size_t must be refused before anything is read. */
Test(misuse, var_counts_that_overflow, .timeout = 30.0) {
  reset_counts();
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(NULL, &e), ORDO_OK);
  ordo_var v;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  ordo_var list[2] = {v, v};
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, list, SIZE_MAX, list, 1, NULL),
               ORDO_ERR_INVALID_ARGUMENT, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, list, 1, list, SIZE_MAX, NULL),
               ORDO_ERR_INVALID_ARGUMENT, "%s", ordo_last_error_message());
  /* Counts that sum to 1 by wrapping: the push of one var with no options (a path of its own,
   * docs/PERFORMANCE.md "The plain push") must not take them for one var. */
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, list, SIZE_MAX, list, 2, NULL),
               ORDO_ERR_INVALID_ARGUMENT, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, list, 2, list, SIZE_MAX, NULL),
               ORDO_ERR_INVALID_ARGUMENT, "%s", ordo_last_error_message());
  /* One var whose list is NULL, and one var with no callback: refused with the general path's
   * messages. */
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 1, NULL, 0, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(ordo_last_error_message(), "const_vars is NULL"), "%s",
                     ordo_last_error_message());
  cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, NULL, 1, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(ordo_last_error_message(), "mutable_vars is NULL"), "%s",
                     ordo_last_error_message());
  cr_assert_eq(ordo_opr_push(e, NULL, NULL, NULL, 0, &v, 1, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_not_null(strstr(ordo_last_error_message(), "fn is NULL"), "%s",
                     ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 0, "a refused push ran");
  ordo_opr opr;
  cr_assert_eq(ordo_opr_new(e, op_count, NULL, list, SIZE_MAX, list, 2, NULL, &opr),
               ORDO_ERR_INVALID_ARGUMENT, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* Every message starts with the public function that refused (the lambdas inside api.cpp once
 * made it "operator()"; found by review). */
static void assert_message_names(ordo_status s, ordo_status want, const char* fn) {
  cr_assert_eq(s, want, "%s returned %d", fn, s);
  const char* msg = ordo_last_error_message();
  cr_assert_eq(strncmp(msg, fn, strlen(fn)), 0, "%s: message \"%s\"", fn, msg);
  cr_assert_null(strstr(msg, "operator()"), "%s: message \"%s\"", fn, msg);
}

Test(misuse, messages_name_the_function) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  assert_message_names(ordo_var_new(e, NULL), ORDO_ERR_INVALID_ARGUMENT, "ordo_var_new");
  assert_message_names(ordo_engine_create(NULL, NULL), ORDO_ERR_INVALID_ARGUMENT,
                       "ordo_engine_create");
  assert_message_names(ordo_opr_push(e, op_count, NULL, NULL, 3, NULL, 0, NULL),
                       ORDO_ERR_INVALID_ARGUMENT, "ordo_opr_push");
  assert_message_names(ordo_opr_new(e, op_count, NULL, NULL, 0, &v, 1, NULL, NULL),
                       ORDO_ERR_INVALID_ARGUMENT, "ordo_opr_new");
  ordo_stats st;
  memset(&st, 0, sizeof st);
  assert_message_names(ordo_engine_stats(e, &st), ORDO_ERR_INVALID_ARGUMENT, "ordo_engine_stats");
  ordo_engine_config cfg;
  memset(&cfg, 0, sizeof cfg);
  assert_message_names(ordo_engine_get_config(e, &cfg), ORDO_ERR_INVALID_ARGUMENT,
                       "ordo_engine_get_config");
  assert_message_names(ordo_engine_write_trace(e, NULL), ORDO_ERR_INVALID_ARGUMENT,
                       "ordo_engine_write_trace");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* A struct_size that no struct of the ABI will ever have is an uninitialised struct: refused,
 * and nothing is read or written through it (a garbage size once made ordo_engine_get_config
 * zero gigabytes; found by review). */
Test(misuse, implausible_struct_sizes_are_refused) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  const uint32_t sizes[] = {4097, 0xABABABABu, 0xFFFFFFFFu};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    struct {
      ordo_stats stats;
      unsigned char canary[64];
    } out;
    memset(&out, 0x5A, sizeof out);
    out.stats.struct_size = sizes[i];
    cr_assert_eq(ordo_engine_stats(e, &out.stats), ORDO_ERR_INVALID_ARGUMENT, "size %u", sizes[i]);
    cr_assert_not_null(strstr(ordo_last_error_message(), "not initialized"), "%s",
                       ordo_last_error_message());
    for (size_t k = 0; k < sizeof out.canary; k++) cr_assert_eq(out.canary[k], 0x5A);
    cr_assert_eq(out.stats.struct_size, sizes[i], "struct_size was overwritten");

    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.struct_size = sizes[i];
    cr_assert_eq(ordo_engine_get_config(e, &cfg), ORDO_ERR_INVALID_ARGUMENT, "size %u", sizes[i]);
    ordo_engine* other = NULL;
    cr_assert_eq(ordo_engine_create(&cfg, &other), ORDO_ERR_INVALID_ARGUMENT, "size %u", sizes[i]);
    cr_assert_null(other);

    ordo_push_opts opts;
    ordo_push_opts_init(&opts);
    opts.struct_size = sizes[i];
    reset_counts();
    cr_assert_eq(ordo_opr_push(e, op_count, NULL, NULL, 0, NULL, 0, &opts),
                 ORDO_ERR_INVALID_ARGUMENT, "size %u", sizes[i]);
  }
  /* The largest plausible size still works (with a zero tail, as ever). */
  struct {
    ordo_stats stats;
    unsigned char tail[4096 - sizeof(ordo_stats)];
  } big;
  memset(&big, 0, sizeof big);
  big.stats.struct_size = 4096;
  cr_assert_eq(ordo_engine_stats(e, &big.stats), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_ran), 0, "a refused push ran");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

static int32_t op_noop_for_names(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  return 0;
}

/* Every refused call's message starts with the call's name, so that a log line says which call
 * failed; before, some said only "the engine pointer is NULL" or "cannot write the trace to". */
static void expect_message_names(ordo_status got, ordo_status want, const char* call) {
  cr_assert_eq(got, want, "%s: %s, want %s", call, ordo_status_string(got),
               ordo_status_string(want));
  const char* m = ordo_last_error_message();
  cr_assert(strncmp(m, call, strlen(call)) == 0 && m[strlen(call)] == ':',
            "%s's message does not start with its name: '%s'", call, m);
}

Test(misuse, every_refused_call_names_itself) {
  ordo_engine_config c;
  ordo_engine_config_init(&c);
  expect_message_names(ordo_engine_get_config(NULL, &c), ORDO_ERR_INVALID_ARGUMENT,
                       "ordo_engine_get_config");
  ordo_stats st;
  st.struct_size = sizeof st;
  expect_message_names(ordo_engine_stats(NULL, &st), ORDO_ERR_INVALID_ARGUMENT,
                       "ordo_engine_stats");
  c.next = &c;
  ordo_engine* e = NULL;
  expect_message_names(ordo_engine_create(&c, &e), ORDO_ERR_UNSUPPORTED, "ordo_engine_create");
  ordo_engine_config_init(&c);
  c.kind = ORDO_ENGINE_POOLED;
  c.cpu_threads = 2;
  cr_assert_eq(ordo_engine_create(&c, &e), ORDO_OK);
  expect_message_names(ordo_engine_write_trace(e, "/tmp/untraced.json"), ORDO_ERR_INVALID_STATE,
                       "ordo_engine_write_trace");
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.prop = 99;
  expect_message_names(ordo_opr_push(e, op_noop_for_names, NULL, NULL, 0, NULL, 0, &o),
                       ORDO_ERR_INVALID_ARGUMENT, "ordo_opr_push");
  ordo_var v;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK);
  expect_message_names(ordo_var_delete(e, v), ORDO_ERR_INVALID_HANDLE, "ordo_var_delete");
  expect_message_names(ordo_wait_for_var_timeout(e, v, 0), ORDO_ERR_INVALID_HANDLE,
                       "ordo_wait_for_var_timeout");
  expect_message_names(ordo_engine_release(NULL), ORDO_ERR_INVALID_ARGUMENT, "ordo_engine_release");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  expect_message_names(ordo_engine_destroy(e), ORDO_ERR_INVALID_HANDLE, "ordo_engine_destroy");
}
