/*
 * Pushed pipeline runs (ordo_pipeline_push): a run is an op of the engine, ordered by its vars
 * like any other. Ops pushed with vars wait for a pushed run, and a pushed run waits for them;
 * a failing run poisons the vars it mutates; a run skipped because of an input error runs
 * nothing and leaves the pipeline usable.
 */
#include <criterion/criterion.h>

#include "test_util.h"

#define S ORDO_PIPE_SERIAL
#define P ORDO_PIPE_PARALLEL

TestSuite(pipeline_push, .timeout = 60);

/* A shared clock of events: each records the tick it happened at. */
typedef struct timeline {
  atomic_int tick;
  atomic_int producer_done;   /* tick at which the producer op finished */
  atomic_int first_pipe_call; /* tick of the run's first callback */
  atomic_int last_pipe_call;  /* tick of the run's last callback */
  atomic_int consumer_start;  /* tick at which the consumer op started */
  atomic_int calls;
  uint64_t stop;
  uint64_t fail_at;     /* pipe 1 returns 9 at this token */
  uint64_t defer_token; /* defers, once, to a token never generated (dropped) */
} timeline;

static int32_t producer(ordo_exec* exec, void* ud) {
  (void)exec;
  timeline* t = ud;
  tu_sleep_ms(20); /* long enough that a run not waiting for it would start first */
  atomic_store(&t->producer_done, atomic_fetch_add(&t->tick, 1));
  return 0;
}
static int32_t consumer(ordo_exec* exec, void* ud) {
  (void)exec;
  timeline* t = ud;
  atomic_store(&t->consumer_start, atomic_fetch_add(&t->tick, 1));
  return 0;
}
static int32_t source(ordo_pipeflow* pf, void* ud) {
  timeline* t = ud;
  int tick = atomic_fetch_add(&t->tick, 1);
  int unset = -1;
  atomic_compare_exchange_strong(&t->first_pipe_call, &unset, tick);
  atomic_store(&t->last_pipe_call, tick);
  if (ordo_pipeflow_token(pf) == t->stop) return ordo_pipeflow_stop(pf);
  if (ordo_pipeflow_token(pf) == t->defer_token && ordo_pipeflow_num_deferrals(pf) == 0) {
    return ordo_pipeflow_defer(pf, t->stop + 5); /* never generated: dropped */
  }
  return 0;
}
static int32_t stage(ordo_pipeflow* pf, void* ud) {
  timeline* t = ud;
  tu_sleep_us(200);
  tu_atomic_max(&t->last_pipe_call, atomic_fetch_add(&t->tick, 1));
  atomic_fetch_add(&t->calls, 1);
  return ordo_pipeflow_token(pf) == t->fail_at ? 9 : 0;
}

static void timeline_init(timeline* t, uint64_t stop, uint64_t fail_at) {
  memset(t, 0, sizeof *t);
  atomic_store(&t->first_pipe_call, -1);
  atomic_store(&t->consumer_start, -1);
  atomic_store(&t->producer_done, -1);
  t->stop = stop;
  t->fail_at = fail_at;
  t->defer_token = UINT64_MAX;
}

/* producer -> (v) -> pushed run -> (w) -> consumer, in both directions at once. */
Test(pipeline_push, ops_and_runs_depend_on_each_other_both_ways) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; k++) {
    ordo_engine* e = NULL;
    cr_assert_eq(tu_engine_create(tu_all_kinds[k], 2, &e), ORDO_OK);
    timeline t;
    timeline_init(&t, 30, UINT64_MAX);
    t.defer_token = 2;
    ordo_pipe pipes[3] = {{S, source, &t}, {P, stage, &t}, {S, stage, &t}};
    ordo_pipeline* p = NULL;
    cr_assert_eq(ordo_pipeline_create(e, 4, pipes, 3, &p), ORDO_OK);
    ordo_var v, w;
    cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
    cr_assert_eq(ordo_var_new(e, &w), ORDO_OK);
    cr_assert_eq(ordo_opr_push(e, producer, &t, NULL, 0, &v, 1, NULL), ORDO_OK);
    ordo_push_opts o = tu_opts_named("frames");
    o.priority = 3;
    cr_assert_eq(ordo_pipeline_push(p, &v, 1, &w, 1, &o), ORDO_OK);
    cr_assert_eq(ordo_opr_push(e, consumer, &t, &w, 1, NULL, 0, NULL), ORDO_OK);
    /* the run dropped token 2: its op fails with ORDO_ERR_TOKENS_DROPPED, so w carries it and
     * the consumer is skipped; clear the error and push the consumer again */
    ordo_status s = ordo_wait_for_var(e, w);
    const char* kind = tu_kind_name(tu_all_kinds[k]);
    cr_assert_eq(s, ORDO_ERR_OP_FAILED, "%s: %s", kind, ordo_last_error_message());
    cr_assert(strstr(ordo_last_error_message(), "1 token dropped (ids 2)"), "%s",
              ordo_last_error_message());
    cr_assert(strstr(ordo_last_error_message(), "'frames'"), "%s", ordo_last_error_message());
    int32_t code = 0;
    cr_assert_eq(ordo_var_get_error(e, w, &code, NULL, 0), ORDO_OK);
    cr_assert_eq(code, ORDO_ERR_TOKENS_DROPPED);
    cr_assert_eq(atomic_load(&t.consumer_start), -1, "%s: the consumer ran on an error", kind);
    cr_assert_eq(ordo_var_clear_error(e, w), ORDO_OK);
    cr_assert_eq(ordo_opr_push(e, consumer, &t, &w, 1, NULL, 0, NULL), ORDO_OK);
    ordo_wait_for_all(e); /* reports the failure above once more */
    cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
    int produced = atomic_load(&t.producer_done), first = atomic_load(&t.first_pipe_call);
    int last = atomic_load(&t.last_pipe_call), consumed = atomic_load(&t.consumer_start);
    cr_assert(produced >= 0 && first > produced,
              "%s: the run started (tick %d) before the op it "
              "reads finished (tick %d)",
              kind, first, produced);
    cr_assert(consumed > last,
              "%s: the consumer started (tick %d) before the run's last step "
              "(tick %d)",
              kind, consumed, last);
    cr_assert_eq(atomic_load(&t.calls), 2 * 29, "%s: pipe calls", kind);
    uint64_t count = 0, id = 0;
    cr_assert_eq(ordo_pipeline_dropped(p, &count, &id, 1), ORDO_OK);
    cr_assert_eq(count, 1);
    cr_assert_eq(id, 2);
    cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  }
}

/* A failing pipe poisons the run's mutable vars with the pipe's code; the op reading them is
 * skipped; the pipeline needs a reset. Then a clean pushed run succeeds. */
Test(pipeline_push, a_failing_run_poisons_its_mutable_vars) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, 2, &e), ORDO_OK);
  timeline t;
  timeline_init(&t, 20, 6);
  ordo_pipe pipes[2] = {{S, source, &t}, {S, stage, &t}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 3, pipes, 2, &p), ORDO_OK);
  ordo_var w;
  cr_assert_eq(ordo_var_new(e, &w), ORDO_OK);
  cr_assert_eq(ordo_pipeline_push(p, NULL, 0, &w, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_opr_push(e, consumer, &t, &w, 1, NULL, 0, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, w), ORDO_ERR_OP_FAILED);
  const char* msg = ordo_last_error_message();
  cr_assert(strstr(msg, "'ordo_pipeline_run'") && strstr(msg, "pipe 1 failed on token 6") &&
                strstr(msg, "(code 9)"),
            "%s", msg);
  int32_t code = 0;
  cr_assert_eq(ordo_var_get_error(e, w, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 9);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
  cr_assert_eq(atomic_load(&t.consumer_start), -1, "an op reading a poisoned var ran");
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, &w, 1, NULL), ORDO_ERR_INVALID_STATE, "no reset");
  cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
  cr_assert_eq(ordo_var_clear_error(e, w), ORDO_OK);
  t.fail_at = UINT64_MAX;
  t.stop = 2; /* stops before token 2 defers */
  cr_assert_eq(ordo_pipeline_push(p, NULL, 0, &w, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, w), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* A pushed run whose input var carries an error is skipped: no callback runs, its own output is
 * poisoned, and the pipeline is free again (destroy works once the op has finished). */
static int32_t fails(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  return 5;
}

Test(pipeline_push, a_skipped_run_runs_nothing) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, 2, &e), ORDO_OK);
  timeline t;
  timeline_init(&t, 5, UINT64_MAX);
  ordo_pipe pipes[2] = {{S, source, &t}, {S, stage, &t}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 3, pipes, 2, &p), ORDO_OK);
  ordo_var v, w;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_var_new(e, &w), ORDO_OK);
  cr_assert_eq(ordo_opr_push(e, fails, NULL, NULL, 0, &v, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_pipeline_push(p, &v, 1, &w, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, w), ORDO_ERR_OP_FAILED);
  int32_t code = 0;
  cr_assert_eq(ordo_var_get_error(e, w, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 5, "the skipped run passes the input's error on");
  cr_assert_eq(atomic_load(&t.first_pipe_call), -1, "a skipped run called a pipe");
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  ordo_wait_for_all(e);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* Refused pushes push nothing and leave the pipeline free. */
static void noop_free(void* ud) {
  (void)ud;
}

Test(pipeline_push, refused_pushes_leave_the_pipeline_free) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, 2, &e), ORDO_OK);
  timeline t;
  timeline_init(&t, 1, UINT64_MAX);
  ordo_pipe pipes[1] = {{S, source, &t}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 3, pipes, 1, &p), ORDO_OK);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = noop_free;
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, NULL, 0, &o), ORDO_ERR_INVALID_ARGUMENT, "free_fn");
  cr_assert(strstr(ordo_last_error_message(), "free_fn"));
  ordo_var made_up = 12345;
  TU_ASSERT_ST(ordo_pipeline_push(p, &made_up, 1, NULL, 0, NULL), ORDO_ERR_INVALID_HANDLE, "var");
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 1, NULL, 0, NULL), ORDO_ERR_INVALID_ARGUMENT, "NULL");
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  int32_t gpus = 0;
  cr_assert_eq(ordo_device_count(&gpus), ORDO_OK);
  o.device_id = gpus; /* one past the last GPU, on any machine */
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, NULL, 0, &o), ORDO_ERR_NO_DEVICE, "GPU");
  o.device_type = ORDO_DEVICE_CPU;
  o.device_id = 0;
  o.prop = 99;
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, NULL, 0, &o), ORDO_ERR_INVALID_ARGUMENT, "prop");
  TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_OK, "the pipeline is free");
  /* a run pushed as an ORDO_PROP_ASYNC op starts on the pusher and runs on the workers */
  o.prop = ORDO_PROP_ASYNC;
  cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, NULL, 0, &o), ORDO_OK, "async");
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  uint64_t n = 0;
  cr_assert_eq(ordo_pipeline_num_tokens(p, &n), ORDO_OK);
  cr_assert_eq(n, 1);
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* Many pushed runs in a row on one var, each after the previous one (the var orders them):
 * ids continue from run to run. Waiting for the var between pushes is not needed for order,
 * only for the one-run-at-a-time rule, so each push follows the previous run's wait. */
Test(pipeline_push, pushed_runs_in_a_row) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, 2, &e), ORDO_OK);
  timeline t;
  timeline_init(&t, 10, UINT64_MAX);
  ordo_pipe pipes[2] = {{S, source, &t}, {P, stage, &t}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 2, pipes, 2, &p), ORDO_OK);
  ordo_var w;
  cr_assert_eq(ordo_var_new(e, &w), ORDO_OK);
  for (int i = 0; i < 20; i++) {
    t.stop = 2 + (uint64_t)i; /* one token per run after the first */
    cr_assert_eq(ordo_pipeline_push(p, NULL, 0, &w, 1, NULL), ORDO_OK, "%s",
                 ordo_last_error_message());
    cr_assert_eq(ordo_wait_for_var(e, w), ORDO_OK, "%s", ordo_last_error_message());
  }
  uint64_t n = 0;
  cr_assert_eq(ordo_pipeline_num_tokens(p, &n), ORDO_OK);
  cr_assert_eq(n, 21);
  cr_assert_eq(atomic_load(&t.calls), 21);
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
