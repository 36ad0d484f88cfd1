/* Capture and replay (issue #26): ordo_graph_begin_capture / end_capture / launch / destroy,
 * their semantics (a launch is the captured pushes made again) and every documented misuse. */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "test_util.h"

TestSuite(graph, .timeout = 60.0);

static ordo_engine* make_engine(int32_t kind) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK, "%s", ordo_last_error_message());
  return e;
}

static ordo_var new_var(ordo_engine* e) {
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  return v;
}

static void expect_status(ordo_status got, ordo_status want, const char* what) {
  cr_expect_eq(got, want, "%s: %s, expected %s (%s)", what, ordo_status_string(got),
               ordo_status_string(want), ordo_last_error_message());
  if (want != ORDO_OK) cr_expect_neq(ordo_last_error_message()[0], '\0', "%s: no message", what);
}

/* A log of op tags, appended by ops that share a mutated var (so they never overlap). */
struct log {
  atomic_int n;
  int tags[4096];
};

struct tagged {
  struct log* log;
  int tag;
};

static int32_t append(ordo_exec* x, void* ud) {
  (void)x;
  struct tagged* t = ud;
  int i = atomic_fetch_add(&t->log->n, 1);
  if (i < 4096) t->log->tags[i] = t->tag;
  return 0;
}

static atomic_int g_count;
static int32_t count_op(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  atomic_fetch_add(&g_count, 1);
  return 0;
}

static int32_t fail_with(ordo_exec* x, void* ud) {
  (void)x;
  return (int32_t)(intptr_t)ud;
}

static atomic_int g_freed;
static void count_free(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_freed, 1);
}

static uint64_t pushed(ordo_engine* e) {
  ordo_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  cr_assert_eq(ordo_engine_stats(e, &st), ORDO_OK);
  return st.pushed;
}

/* Capture three appends on one var: nothing runs while capturing; each launch replays them in
 * order, after what was pushed before it and before what is pushed after it. */
static void replay_in_order(int32_t kind) {
  ordo_engine* e = make_engine(kind);
  ordo_var v = new_var(e);
  struct log log;
  memset(&log, 0, sizeof log);
  struct tagged t[5] = {{&log, 0}, {&log, 1}, {&log, 2}, {&log, 3}, {&log, 4}};
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = count_free;
  atomic_store(&g_freed, 0);
  const uint64_t before = pushed(e);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  for (int i = 1; i <= 3; i++) {
    expect_status(ordo_opr_push(e, append, &t[i], NULL, 0, &v, 1, &opts), ORDO_OK, "captured");
  }
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  cr_assert_not_null(g);
  cr_expect_eq(atomic_load(&log.n), 0, "captured pushes must not run");
  cr_expect_eq(pushed(e), before, "captured pushes are not pushes");
  for (int round = 0; round < 3; round++) {
    expect_status(ordo_opr_push(e, append, &t[0], NULL, 0, &v, 1, NULL), ORDO_OK, "push");
    expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
    expect_status(ordo_opr_push(e, append, &t[4], NULL, 0, &v, 1, NULL), ORDO_OK, "push");
  }
  expect_status(ordo_wait_for_var(e, v), ORDO_OK, "wait");
  cr_assert_eq(atomic_load(&log.n), 15);
  for (int i = 0; i < 15; i++) cr_expect_eq(log.tags[i], i % 5, "entry %d", i);
  cr_expect_eq(pushed(e), before + 15, "launched ops count as pushed");
  cr_expect_eq(atomic_load(&g_freed), 0, "free_fn is not called per launch");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  cr_expect_eq(atomic_load(&g_freed), 3, "free_fn runs once per captured push, at destroy");
  ordo_engine_destroy(e);
}

Test(graph, replay_in_order_naive) {
  replay_in_order(ORDO_ENGINE_NAIVE);
}
Test(graph, replay_in_order_pooled) {
  replay_in_order(ORDO_ENGINE_POOLED);
}
Test(graph, replay_in_order_per_device) {
  replay_in_order(ORDO_ENGINE_PER_DEVICE);
}

Test(graph, empty_capture_is_a_valid_empty_graph) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  const uint64_t before = pushed(e);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  cr_assert_not_null(g);
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(pushed(e), before);
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

Test(graph, nested_begin_and_end_without_begin_are_invalid_state) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_engine* other = make_engine(ORDO_ENGINE_POOLED);
  ordo_graph* g = (ordo_graph*)0x1;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_ERR_INVALID_STATE, "end without begin");
  cr_expect_null(g);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  expect_status(ordo_graph_begin_capture(e), ORDO_ERR_INVALID_STATE, "nested begin");
  expect_status(ordo_graph_begin_capture(other), ORDO_ERR_INVALID_STATE, "begin on another");
  expect_status(ordo_graph_end_capture(other, &g), ORDO_ERR_INVALID_STATE, "end on another");
  expect_status(ordo_graph_end_capture(e, NULL), ORDO_ERR_INVALID_ARGUMENT, "end, out NULL");
  expect_status(ordo_graph_end_capture(NULL, &g), ORDO_ERR_INVALID_ARGUMENT, "end, e NULL");
  expect_status(ordo_graph_begin_capture(NULL), ORDO_ERR_INVALID_ARGUMENT, "begin, e NULL");
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end still works after misuse");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(other);
  ordo_engine_destroy(e);
}

struct end_on_thread {
  ordo_engine* e;
  ordo_status status;
};
static void* end_elsewhere(void* p) {
  struct end_on_thread* a = p;
  ordo_graph* g = NULL;
  a->status = ordo_graph_end_capture(a->e, &g);
  return NULL;
}

Test(graph, end_on_another_thread_is_invalid_state_and_pushes_there_run) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  atomic_store(&g_count, 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  struct end_on_thread a = {e, ORDO_OK};
  pthread_t t;
  pthread_create(&t, NULL, end_elsewhere, &a);
  pthread_join(t, NULL);
  cr_expect_eq(a.status, ORDO_ERR_INVALID_STATE);
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end on the capturing thread");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

Test(graph, waits_deletes_clears_and_destroy_inside_a_capture_are_refused) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = new_var(e);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  expect_status(ordo_wait_for_var(e, v), ORDO_ERR_INVALID_STATE, "wait_for_var");
  expect_status(ordo_wait_for_var_timeout(e, v, 0), ORDO_ERR_INVALID_STATE, "wait timeout");
  expect_status(ordo_wait_for_all(e), ORDO_ERR_INVALID_STATE, "wait_for_all");
  expect_status(ordo_wait_for_all_timeout(e, 0), ORDO_ERR_INVALID_STATE, "wait_all timeout");
  expect_status(ordo_var_delete(e, v), ORDO_ERR_INVALID_STATE, "var_delete");
  expect_status(ordo_var_clear_error(e, v), ORDO_ERR_INVALID_STATE, "clear_error");
  expect_status(ordo_engine_destroy(e), ORDO_ERR_INVALID_STATE, "engine_destroy");
  cr_expect(strstr(ordo_last_error_message(), "ordo_engine_destroy") != NULL, "%s",
            ordo_last_error_message());
  ordo_var w = 0;
  expect_status(ordo_var_new(e, &w), ORDO_OK, "var_new works in a capture");
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_var_delete(e, v), ORDO_OK, "delete after the capture");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

static void noop_wait_fn(void* ud, ordo_status s) {
  (void)ud;
  (void)s;
}

Test(graph, async_wait_and_launch_inside_a_capture_are_refused) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_graph* empty = NULL;
  expect_status(ordo_graph_end_capture(e, &empty), ORDO_OK, "end");
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin again");
  expect_status(ordo_wait_for_var_async(e, v, noop_wait_fn, NULL), ORDO_ERR_INVALID_STATE,
                "wait_for_var_async");
  expect_status(ordo_graph_launch(empty), ORDO_ERR_INVALID_STATE, "launch inside a capture");
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_graph_launch(empty), ORDO_OK, "launch after the capture");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  expect_status(ordo_graph_destroy(empty), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

Test(graph, capture_checks_each_push_as_a_push_would) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  ordo_var dead = new_var(e);
  cr_assert_eq(ordo_var_delete(e, dead), ORDO_OK);
  ordo_push_opts gpu;
  ordo_push_opts_init(&gpu);
  gpu.device_type = ORDO_DEVICE_GPU;
  int32_t gpus = 0;
  cr_assert_eq(ordo_device_count(&gpus), ORDO_OK);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  expect_status(ordo_opr_push(e, NULL, NULL, NULL, 0, &v, 1, NULL), ORDO_ERR_INVALID_ARGUMENT,
                "NULL fn");
  expect_status(ordo_opr_push(e, count_op, NULL, NULL, 0, &dead, 1, NULL), ORDO_ERR_INVALID_HANDLE,
                "deleted var");
  ordo_var made_up = 12345;
  expect_status(ordo_opr_push(e, count_op, NULL, &made_up, 1, NULL, 0, NULL),
                ORDO_ERR_INVALID_HANDLE, "made-up var");
  expect_status(ordo_opr_push_prepared(e, 777, 0), ORDO_ERR_INVALID_HANDLE, "made-up opr");
  if (gpus == 0) {
    expect_status(ordo_opr_push(e, count_op, NULL, NULL, 0, &v, 1, &gpu), ORDO_ERR_NO_DEVICE,
                  "GPU op without a GPU");
  }
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  const uint64_t before = pushed(e);
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch: nothing was recorded");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(pushed(e), before);
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

Test(graph, var_deleted_after_capture_stops_the_launch_at_its_first_use) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var a = new_var(e), b = new_var(e);
  atomic_store(&g_count, 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, count_op, NULL, NULL, 0, &a, 1, NULL);
  ordo_opr_push(e, count_op, NULL, NULL, 0, &b, 1, NULL);
  ordo_opr_push(e, count_op, NULL, NULL, 0, &a, 1, NULL);
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  cr_assert_eq(ordo_var_delete(e, b), ORDO_OK);
  expect_status(ordo_graph_launch(g), ORDO_ERR_INVALID_HANDLE, "launch with a deleted var");
  cr_expect(strstr(ordo_last_error_message(), "op 1 of 3") != NULL, "%s",
            ordo_last_error_message());
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_count), 1, "the op before the deleted var's first use ran");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy after a stopped launch");
  ordo_engine_destroy(e);
}

Test(graph, bad_graph_handles) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  expect_status(ordo_graph_launch(NULL), ORDO_ERR_INVALID_ARGUMENT, "launch NULL");
  expect_status(ordo_graph_destroy(NULL), ORDO_ERR_INVALID_ARGUMENT, "destroy NULL");
  int local = 0;
  expect_status(ordo_graph_launch((ordo_graph*)&local), ORDO_ERR_INVALID_HANDLE, "made up");
  expect_status(ordo_graph_destroy((ordo_graph*)(uintptr_t)0xB), ORDO_ERR_INVALID_HANDLE,
                "made up with the tag");
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  expect_status(ordo_graph_launch(g), ORDO_ERR_INVALID_HANDLE, "launch after destroy");
  expect_status(ordo_graph_destroy(g), ORDO_ERR_INVALID_HANDLE, "destroy twice");
  /* The slot used again: the old handle still names nothing. */
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_graph* g2 = NULL;
  expect_status(ordo_graph_end_capture(e, &g2), ORDO_OK, "end");
  cr_expect_neq(g, g2);
  expect_status(ordo_graph_launch(g), ORDO_ERR_INVALID_HANDLE, "stale handle");
  expect_status(ordo_graph_destroy(g2), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

static atomic_int g_gate;
static int32_t gated_op(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  while (!atomic_load(&g_gate)) tu_sleep_us(100);
  return 0;
}

Test(graph, destroy_while_a_launch_is_in_flight_is_refused) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = new_var(e);
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = count_free;
  atomic_store(&g_freed, 0);
  atomic_store(&g_gate, 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, gated_op, NULL, NULL, 0, &v, 1, &opts);
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
  expect_status(ordo_graph_destroy(g), ORDO_ERR_INVALID_STATE, "destroy in flight");
  cr_expect_eq(atomic_load(&g_freed), 0);
  atomic_store(&g_gate, 1);
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy once finished");
  cr_expect_eq(atomic_load(&g_freed), 1);
  ordo_engine_destroy(e);
}

Test(graph, failures_in_a_launch_poison_and_skip_as_pushes_do) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = new_var(e), w = new_var(e);
  atomic_store(&g_count, 0);
  ordo_push_opts named;
  ordo_push_opts_init(&named);
  named.name = "fails";
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, fail_with, (void*)(intptr_t)7, NULL, 0, &v, 1, &named);
  ordo_opr_push(e, count_op, NULL, &v, 1, &w, 1, NULL); /* skipped: reads the poisoned v */
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
  expect_status(ordo_wait_for_var(e, w), ORDO_ERR_OP_FAILED, "wait on the inheriting var");
  cr_expect(strstr(ordo_last_error_message(), "fails") != NULL, "%s", ordo_last_error_message());
  int32_t code = 0;
  cr_expect_eq(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
  cr_expect_eq(code, 7);
  cr_expect_eq(ordo_var_get_error(e, w, &code, NULL, 0), ORDO_OK);
  cr_expect_eq(code, 7, "the skipped op passes the error on");
  expect_status(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED, "wait_for_all reports it");
  cr_expect_eq(atomic_load(&g_count), 0, "the reader of a poisoned var was skipped");
  ordo_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  ordo_engine_stats(e, &st);
  cr_expect_eq(st.failed, 2);
  cr_expect_eq(st.skipped, 1);
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

/* An op of the graph that defers, completed from another thread. */
static void* complete_later(void* p) {
  tu_sleep_ms(5);
  ordo_complete((ordo_completion)(uintptr_t)p, 0, NULL);
  return NULL;
}
static int32_t deferring_op(ordo_exec* x, void* ud) {
  (void)ud;
  ordo_completion c = 0;
  if (ordo_exec_defer(x, &c) != ORDO_OK) return 99;
  pthread_t t;
  pthread_create(&t, NULL, complete_later, (void*)(uintptr_t)c);
  pthread_detach(t);
  return 0;
}

Test(graph, deferred_ops_in_a_graph_complete_through_ordo_complete) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = new_var(e);
  struct log log;
  memset(&log, 0, sizeof log);
  struct tagged after = {&log, 1};
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, deferring_op, NULL, NULL, 0, &v, 1, NULL);
  ordo_opr_push(e, append, &after, NULL, 0, &v, 1, NULL);
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  for (int i = 0; i < 3; i++) expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
  expect_status(ordo_wait_for_var(e, v), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&log.n), 3);
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait all");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

static atomic_int g_prep_freed;
static void prep_free(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_prep_freed, 1);
}

Test(graph, a_captured_prepared_op_outlives_its_delete_until_destroy) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  atomic_store(&g_count, 0);
  atomic_store(&g_prep_freed, 0);
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = prep_free;
  ordo_opr opr = 0;
  cr_assert_eq(ordo_opr_new(e, count_op, NULL, NULL, 0, &v, 1, &opts, &opr), ORDO_OK);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  expect_status(ordo_opr_push_prepared(e, opr, 3), ORDO_OK, "captured prepared push");
  expect_status(ordo_opr_push_prepared(e, opr, 0), ORDO_OK, "captured prepared push");
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  cr_assert_eq(ordo_opr_delete(e, opr), ORDO_OK);
  cr_expect_eq(atomic_load(&g_prep_freed), 0, "the graph keeps the prepared op");
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch after the delete");
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch after the delete");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_count), 4);
  cr_expect_eq(atomic_load(&g_prep_freed), 0);
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  cr_expect_eq(atomic_load(&g_prep_freed), 1, "its free_fn runs once, when the graph lets go");
  expect_status(ordo_opr_push_prepared(e, opr, 0), ORDO_ERR_INVALID_HANDLE, "deleted opr");
  ordo_engine_destroy(e);
}

struct destroyer {
  ordo_engine* e;
  ordo_status status;
};
static void* destroy_engine_thread(void* p) {
  struct destroyer* d = p;
  d->status = ordo_engine_destroy(d->e);
  return NULL;
}

Test(graph, capture_left_open_at_engine_destroy_ends_with_shutdown) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = count_free;
  atomic_store(&g_freed, 0);
  atomic_store(&g_count, 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, count_op, NULL, NULL, 0, &v, 1, &opts);
  ordo_opr_push(e, count_op, NULL, NULL, 0, &v, 1, &opts);
  struct destroyer d = {e, ORDO_ERR_INTERNAL};
  pthread_t t;
  pthread_create(&t, NULL, destroy_engine_thread, &d);
  pthread_join(t, NULL);
  cr_expect_eq(d.status, ORDO_OK, "destroy from another thread goes ahead");
  ordo_graph* g = (ordo_graph*)0x1;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_ERR_SHUTDOWN, "end after the destroy");
  cr_expect_null(g);
  cr_expect_eq(atomic_load(&g_freed), 2, "the dropped ops' free_fns ran");
  cr_expect_eq(atomic_load(&g_count), 0);
  ordo_graph* none = NULL;
  expect_status(ordo_graph_end_capture(e, &none), ORDO_ERR_INVALID_STATE, "the capture is over");
}

Test(graph, launch_after_engine_destroy_is_shutdown_and_destroy_still_works) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = new_var(e);
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = count_free;
  atomic_store(&g_freed, 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, count_op, NULL, NULL, 0, &v, 1, &opts);
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK); /* drains the launch */
  expect_status(ordo_graph_launch(g), ORDO_ERR_SHUTDOWN, "launch after destroy");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy after the engine");
  cr_expect_eq(atomic_load(&g_freed), 1);
}

struct pusher_arg {
  ordo_engine* e;
  ordo_var v;
  ordo_status status;
};
static void* push_from_thread(void* p) {
  struct pusher_arg* a = p;
  a->status = ordo_opr_push(a->e, count_op, NULL, NULL, 0, &a->v, 1, NULL);
  return NULL;
}

Test(graph, pushes_to_another_engine_and_from_other_threads_are_not_captured) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_engine* other = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e), w = new_var(other);
  atomic_store(&g_count, 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  expect_status(ordo_opr_push(other, count_op, NULL, NULL, 0, &w, 1, NULL), ORDO_OK, "other");
  cr_expect(tu_wait_eq(&g_count, 1, 5000), "a push to another engine runs at once");
  struct pusher_arg a = {e, v, ORDO_ERR_INTERNAL};
  pthread_t t;
  pthread_create(&t, NULL, push_from_thread, &a);
  pthread_join(t, NULL);
  cr_expect_eq(a.status, ORDO_OK);
  cr_expect(tu_wait_eq(&g_count, 2, 5000), "another thread's push to e runs at once");
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_count), 2, "the graph is empty");
  ordo_graph_destroy(g);
  ordo_engine_destroy(other);
  ordo_engine_destroy(e);
}

/* An ORDO_PROP_ASYNC op made ready by ordo_complete on the capturing thread runs inline there;
 * what it pushes is made, not captured (pushes from inside ops are never captured). */
static ordo_completion g_held;
static int32_t hold_op(ordo_exec* x, void* ud) {
  (void)ud;
  ordo_completion c = 0;
  if (ordo_exec_defer(x, &c) != ORDO_OK) return 1;
  __atomic_store_n(&g_held, c, __ATOMIC_RELEASE); /* the test thread polls it */
  return 0;
}
static int32_t pushes_from_inside(ordo_exec* x, void* ud) {
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ordo_exec_get_info(x, &info);
  (void)ud;
  return ordo_opr_push(info.engine, count_op, NULL, NULL, 0, NULL, 0, NULL) == ORDO_OK ? 0 : 1;
}

Test(graph, a_push_from_inside_an_op_on_the_capturing_thread_is_not_captured) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = new_var(e);
  atomic_store(&g_count, 0);
  g_held = 0;
  ordo_push_opts async;
  ordo_push_opts_init(&async);
  async.prop = ORDO_PROP_ASYNC;
  cr_assert_eq(ordo_opr_push(e, hold_op, NULL, NULL, 0, &v, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_opr_push(e, pushes_from_inside, NULL, NULL, 0, &v, 1, &async), ORDO_OK);
  uint64_t end = tu_now_ms() + 5000;
  while (__atomic_load_n(&g_held, __ATOMIC_ACQUIRE) == 0 && tu_now_ms() < end) tu_sleep_us(100);
  cr_assert_neq(__atomic_load_n(&g_held, __ATOMIC_ACQUIRE), 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  expect_status(ordo_complete(g_held, 0, NULL), ORDO_OK, "complete inside the capture");
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_count), 1, "the inner push was made");
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_count), 1, "and not captured");
  ordo_graph_destroy(g);
  ordo_engine_destroy(e);
}

static int32_t begins_inside(ordo_exec* x, void* ud) {
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ordo_exec_get_info(x, &info);
  *(ordo_status*)ud = ordo_graph_begin_capture(info.engine);
  return 0;
}

Test(graph, begin_capture_from_inside_an_op_is_refused) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_status inside = ORDO_OK;
  cr_assert_eq(ordo_opr_push(e, begins_inside, &inside, NULL, 0, NULL, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_expect_eq(inside, ORDO_ERR_INVALID_STATE);
  ordo_engine_destroy(e);
}

/* Launches from two threads at once: every op runs, each once per launch. */
struct launcher {
  ordo_graph* g;
  int launches;
  int failed;
};
static void* launch_many(void* p) {
  struct launcher* l = p;
  for (int i = 0; i < l->launches; i++) l->failed += ordo_graph_launch(l->g) != ORDO_OK;
  return NULL;
}

Test(graph, concurrent_launches_from_two_threads) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v = new_var(e), w = new_var(e);
  struct log log;
  memset(&log, 0, sizeof log);
  struct tagged t = {&log, 1};
  atomic_store(&g_count, 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, append, &t, &w, 1, &v, 1, NULL);
  ordo_opr_push(e, count_op, NULL, &v, 1, NULL, 0, NULL);
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  struct launcher a = {g, 500, 0}, b = {g, 500, 0};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, launch_many, &a);
  pthread_create(&tb, NULL, launch_many, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  cr_expect_eq(a.failed + b.failed, 0);
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&log.n), 1000);
  cr_expect_eq(atomic_load(&g_count), 1000);
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

static int32_t check_name(ordo_exec* x, void* ud) {
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ordo_exec_get_info(x, &info);
  int ok = strcmp(info.name, "named") == 0 && info.priority == 5;
  atomic_fetch_add((atomic_int*)ud, ok ? 1 : 1000);
  return 0;
}

Test(graph, launched_ops_keep_their_name_and_priority) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  atomic_int seen = 0;
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.name = "named";
  opts.priority = 5;
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, check_name, &seen, NULL, 0, NULL, 0, &opts);
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_graph_launch(g), ORDO_OK, "launch");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&seen), 1);
  ordo_graph_destroy(g);
  ordo_engine_destroy(e);
}

/* A graph op whose callback ends its thread (a forced unwind) fails as a pushed op does, and
 * still counts as finished for the graph: destroy succeeds once the engine is idle. */
static int32_t exits_thread(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  pthread_exit(NULL);
  return 0;
}
static void* launch_once(void* p) {
  ordo_graph_launch((ordo_graph*)p);
  return NULL;
}

Test(graph, an_op_that_ends_its_thread_fails_and_the_graph_can_be_destroyed) {
  ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE);
  ordo_var v = new_var(e);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, exits_thread, NULL, NULL, 0, &v, 1, NULL);
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  pthread_t t;
  pthread_create(&t, NULL, launch_once, g); /* naive: the op runs, and ends, on that thread */
  pthread_join(t, NULL);
  expect_status(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED, "wait_for_all");
  expect_status(ordo_graph_destroy(g), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

static int32_t stop_at_once(ordo_pipeflow* pf, void* ud) {
  (void)ud;
  return ordo_pipeflow_stop(pf);
}

Test(graph, pipeline_runs_inside_a_capture_are_refused) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  ordo_pipe pipe = {ORDO_PIPE_SERIAL, stop_at_once, NULL};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 1, &pipe, 1, &p), ORDO_OK);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  expect_status(ordo_pipeline_run(p), ORDO_ERR_INVALID_STATE, "pipeline_run");
  expect_status(ordo_pipeline_push(p, NULL, 0, &v, 1, NULL), ORDO_ERR_INVALID_STATE,
                "pipeline_push");
  ordo_graph* g = NULL;
  expect_status(ordo_graph_end_capture(e, &g), ORDO_OK, "end");
  expect_status(ordo_pipeline_run(p), ORDO_OK, "pipeline_run after the capture");
  ordo_graph_destroy(g);
  ordo_pipeline_destroy(p);
  ordo_engine_destroy(e);
}

/* A launch from inside an op is a push from inside an op: allowed, ordered after the op's own
 * position; destroying the graph from inside one of its own ops is refused (it is in flight). */
static ordo_graph* g_inner;
static atomic_int g_inner_status = 0;
static int32_t launches_inside(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  atomic_store(&g_inner_status, ordo_graph_launch(g_inner));
  return 0;
}
static int32_t destroys_own_graph(ordo_exec* x, void* ud) {
  (void)x;
  atomic_store(&g_inner_status, ordo_graph_destroy(*(ordo_graph**)ud));
  return 0;
}

Test(graph, launch_from_inside_an_op_and_destroy_of_its_own_graph) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v = new_var(e);
  atomic_store(&g_count, 0);
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, count_op, NULL, NULL, 0, &v, 1, NULL);
  expect_status(ordo_graph_end_capture(e, &g_inner), ORDO_OK, "end");
  expect_status(ordo_opr_push(e, launches_inside, NULL, NULL, 0, NULL, 0, NULL), ORDO_OK, "push");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_inner_status), ORDO_OK);
  cr_expect_eq(atomic_load(&g_count), 1, "the graph launched from the op ran");
  ordo_graph* self = NULL;
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin");
  ordo_opr_push(e, destroys_own_graph, &self, NULL, 0, &v, 1, NULL);
  expect_status(ordo_graph_end_capture(e, &self), ORDO_OK, "end");
  expect_status(ordo_graph_launch(self), ORDO_OK, "launch");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_inner_status), ORDO_ERR_INVALID_STATE, "destroy from its own op");
  expect_status(ordo_graph_destroy(self), ORDO_OK, "destroy afterwards");
  expect_status(ordo_graph_destroy(g_inner), ORDO_OK, "destroy");
  ordo_engine_destroy(e);
}

/* The free_fns a graph's destroy runs are free_fns of its engine: a push from one is made, never
 * recorded into a capture the destroying thread has open (pushes from inside ops and free_fns
 * never are), and a wait from one is WOULD_DEADLOCK, as from any free_fn of the engine. */
struct free_pushes {
  ordo_engine* e;
  ordo_var v;
  ordo_status pushed;
  ordo_status waited;
};

static void push_from_free(void* ud) {
  struct free_pushes* f = ud;
  f->pushed = ordo_opr_push(f->e, count_op, NULL, NULL, 0, &f->v, 1, NULL);
  f->waited = ordo_wait_for_all(f->e);
}

Test(graph, a_push_from_a_free_fn_run_by_destroy_inside_a_capture_is_made_not_recorded) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  struct free_pushes f = {e, new_var(e), -1, -1};
  atomic_store(&g_count, 0);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = push_from_free;
  ordo_graph* a = NULL;
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin A");
  expect_status(ordo_opr_push(e, count_op, &f, NULL, 0, NULL, 0, &o), ORDO_OK,
                "captured push with a free_fn (never launched)");
  expect_status(ordo_graph_end_capture(e, &a), ORDO_OK, "end A");
  ordo_graph* b = NULL;
  expect_status(ordo_graph_begin_capture(e), ORDO_OK, "begin B");
  expect_status(ordo_graph_destroy(a), ORDO_OK, "destroy A inside the capture of B");
  expect_status(ordo_graph_end_capture(e, &b), ORDO_OK, "end B");
  expect_status(f.pushed, ORDO_OK, "the free_fn's push");
  expect_status(f.waited, ORDO_ERR_WOULD_DEADLOCK, "the free_fn's wait");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_count), 1, "the free_fn's op ran (it was not recorded into B)");
  expect_status(ordo_graph_launch(b), ORDO_OK, "launch B");
  expect_status(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_expect_eq(atomic_load(&g_count), 1, "B recorded nothing");
  expect_status(ordo_graph_destroy(b), ORDO_OK, "destroy B");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
