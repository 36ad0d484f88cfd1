/*
 * The pipeline API's contract apart from the deferral rules (test_pipeline_cases.c): bad
 * arguments and handles, pipeflows used outside their callback, one run at a time, runs from
 * inside the engine, destroyed engines, and many tokens through many lines.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "test_util.h"

#define S ORDO_PIPE_SERIAL
#define P ORDO_PIPE_PARALLEL

TestSuite(pipeline_api, .timeout = 60);

/* A pipe 0 that stops at `stop_at` (user_data: uint64_t*), and a pipe that does nothing. */
static int32_t stop_at(ordo_pipeflow* pf, void* ud) {
  if (ordo_pipeflow_token(pf) == *(const uint64_t*)ud) return ordo_pipeflow_stop(pf);
  return 0;
}
static int32_t nothing(ordo_pipeflow* pf, void* ud) {
  (void)pf;
  (void)ud;
  return 0;
}

static ordo_engine* engine(int32_t workers) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(workers ? ORDO_ENGINE_PER_DEVICE : ORDO_ENGINE_NAIVE, workers, &e),
               ORDO_OK);
  return e;
}

Test(pipeline_api, create_rejects_bad_arguments) {
  ordo_engine* e = engine(1);
  static uint64_t ten = 10;
  ordo_pipe ok[2] = {{S, stop_at, &ten}, {P, nothing, NULL}};
  ordo_pipeline* p = (ordo_pipeline*)&ten; /* must come back NULL on failure */
  TU_ASSERT_ST(ordo_pipeline_create(NULL, 2, ok, 2, &p), ORDO_ERR_INVALID_ARGUMENT, "NULL engine");
  cr_assert_null(p);
  TU_ASSERT_ST(ordo_pipeline_create((ordo_engine*)&ten, 2, ok, 2, &p), ORDO_ERR_INVALID_HANDLE,
               "made-up engine");
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, ok, 2, NULL), ORDO_ERR_INVALID_ARGUMENT, "NULL out");
  TU_ASSERT_ST(ordo_pipeline_create(e, 0, ok, 2, &p), ORDO_ERR_INVALID_ARGUMENT, "zero lines");
  cr_assert(strstr(ordo_last_error_message(), "at least one line"));
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, ok, 0, &p), ORDO_ERR_INVALID_ARGUMENT, "no pipes");
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, NULL, 2, &p), ORDO_ERR_INVALID_ARGUMENT, "NULL pipes");
  TU_ASSERT_ST(ordo_pipeline_create(e, 65537, ok, 2, &p), ORDO_ERR_INVALID_ARGUMENT, "lines");
  TU_ASSERT_ST(ordo_pipeline_create(e, 65536, ok, 20, &p), ORDO_ERR_INVALID_ARGUMENT, "cells");
  ordo_pipe bad[2] = {{P, stop_at, &ten}, {P, nothing, NULL}};
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, bad, 2, &p), ORDO_ERR_INVALID_ARGUMENT, "parallel first");
  cr_assert(strstr(ordo_last_error_message(), "first pipe"), "%s", ordo_last_error_message());
  bad[0] = ok[0];
  bad[1].fn = NULL;
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, bad, 2, &p), ORDO_ERR_INVALID_ARGUMENT, "NULL fn");
  cr_assert(strstr(ordo_last_error_message(), "pipes[1].fn is NULL"));
  bad[1] = ok[1];
  bad[1].type = 3;
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, bad, 2, &p), ORDO_ERR_INVALID_ARGUMENT, "type 3");
  bad[1].type = 0;
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, bad, 2, &p), ORDO_ERR_INVALID_ARGUMENT, "type 0");
  cr_assert_null(p);
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, ok, 2, &p), ORDO_OK, "good");
  /* the same checks on reset_pipes, which changes nothing when it refuses */
  bad[1] = ok[1];
  bad[0].type = P;
  TU_ASSERT_ST(ordo_pipeline_reset_pipes(p, 0, bad, 2), ORDO_ERR_INVALID_ARGUMENT, "reset par");
  TU_ASSERT_ST(ordo_pipeline_reset_pipes(p, 0, NULL, 2), ORDO_ERR_INVALID_ARGUMENT, "reset NULL");
  TU_ASSERT_ST(ordo_pipeline_reset_pipes(p, 0, ok, 0), ORDO_ERR_INVALID_ARGUMENT, "reset empty");
  TU_ASSERT_ST(ordo_pipeline_reset_pipes(p, 70000, ok, 2), ORDO_ERR_INVALID_ARGUMENT, "lines");
  ordo_pipe many[20];
  for (int i = 0; i < 20; i++) many[i] = ok[i == 0 ? 0 : 1];
  ordo_pipeline* wide = NULL;
  TU_ASSERT_ST(ordo_pipeline_create(e, 65536, ok, 1, &wide), ORDO_OK, "65,536 lines");
  TU_ASSERT_ST(ordo_pipeline_reset_pipes(wide, 0, many, 20), ORDO_ERR_INVALID_ARGUMENT,
               "kept lines x 20 pipes");
  cr_assert(strstr(ordo_last_error_message(), "65536 lines x 20 pipes"), "%s",
            ordo_last_error_message());
  TU_ASSERT_ST(ordo_pipeline_destroy(wide), ORDO_OK, "destroy");
  TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_OK, "the pipeline still works");
  uint64_t n = 0;
  TU_ASSERT_ST(ordo_pipeline_num_tokens(p, &n), ORDO_OK, "num_tokens");
  cr_assert_eq(n, 10);
  TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, "destroy");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(pipeline_api, bad_and_destroyed_handles) {
  ordo_engine* e = engine(2);
  static uint64_t five = 5;
  ordo_pipe pipes[1] = {{S, stop_at, &five}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 2, pipes, 1, &p), ORDO_OK);
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  int local = 0;
  ordo_pipeline* made_up = (ordo_pipeline*)&local;
  ordo_pipeline* misaligned = (ordo_pipeline*)((char*)p + 1);
  ordo_pipeline* handles[3] = {p, made_up, misaligned};
  uint64_t n, ids[2];
  for (int i = 0; i < 3; i++) {
    ordo_pipeline* h = handles[i];
    TU_ASSERT_ST(ordo_pipeline_run(h), ORDO_ERR_INVALID_HANDLE, "run");
    TU_ASSERT_ST(ordo_pipeline_push(h, NULL, 0, NULL, 0, NULL), ORDO_ERR_INVALID_HANDLE, "push");
    TU_ASSERT_ST(ordo_pipeline_reset(h), ORDO_ERR_INVALID_HANDLE, "reset");
    TU_ASSERT_ST(ordo_pipeline_reset_pipes(h, 0, pipes, 1), ORDO_ERR_INVALID_HANDLE, "reset_pipes");
    TU_ASSERT_ST(ordo_pipeline_num_tokens(h, &n), ORDO_ERR_INVALID_HANDLE, "num_tokens");
    TU_ASSERT_ST(ordo_pipeline_dropped(h, &n, ids, 2), ORDO_ERR_INVALID_HANDLE, "dropped");
    TU_ASSERT_ST(ordo_pipeline_destroy(h), ORDO_ERR_INVALID_HANDLE, "destroy");
  }
  cr_assert(strstr(ordo_last_error_message(), "ordo_pipeline_destroy"));
  TU_ASSERT_ST(ordo_pipeline_run(NULL), ORDO_ERR_INVALID_ARGUMENT, "run NULL");
  TU_ASSERT_ST(ordo_pipeline_push(NULL, NULL, 0, NULL, 0, NULL), ORDO_ERR_INVALID_ARGUMENT, "push");
  TU_ASSERT_ST(ordo_pipeline_reset(NULL), ORDO_ERR_INVALID_ARGUMENT, "reset NULL");
  TU_ASSERT_ST(ordo_pipeline_reset_pipes(NULL, 0, pipes, 1), ORDO_ERR_INVALID_ARGUMENT, "r_p");
  TU_ASSERT_ST(ordo_pipeline_num_tokens(NULL, &n), ORDO_ERR_INVALID_ARGUMENT, "num_tokens");
  TU_ASSERT_ST(ordo_pipeline_dropped(NULL, &n, ids, 2), ORDO_ERR_INVALID_ARGUMENT, "dropped");
  TU_ASSERT_ST(ordo_pipeline_destroy(NULL), ORDO_ERR_INVALID_ARGUMENT, "destroy NULL");
  /* a new pipeline does not take the slot just freed (round robin) */
  ordo_pipeline* q = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 2, pipes, 1, &q), ORDO_OK);
  cr_assert_neq(q, p);
  TU_ASSERT_ST(ordo_pipeline_num_tokens(q, NULL), ORDO_ERR_INVALID_ARGUMENT, "NULL out");
  TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_ERR_INVALID_HANDLE, "old handle");
  cr_assert_eq(ordo_pipeline_destroy(q), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* A pipeflow is valid only inside its own callback, on its thread. */
static _Atomic(ordo_pipeflow*) g_kept;
static atomic_int g_kept_checks;
static int32_t keeps_its_pipeflow(ordo_pipeflow* pf, void* ud) {
  (void)ud;
  uint64_t t = ordo_pipeflow_token(pf);
  ordo_pipeflow* old = atomic_exchange(&g_kept, pf);
  if (old) { /* the last callback's pipeflow, used in this one: never this token's */
    int ok = ordo_pipeflow_token(old) == UINT64_MAX && ordo_pipeflow_line(old) == UINT32_MAX &&
             ordo_pipeflow_pipe(old) == UINT32_MAX &&
             ordo_pipeflow_num_deferrals(old) == UINT32_MAX &&
             ordo_pipeflow_stop(old) == ORDO_ERR_INVALID_STATE &&
             ordo_pipeflow_defer(old, 1) == ORDO_ERR_INVALID_STATE;
    if (ok) atomic_fetch_add(&g_kept_checks, 1);
  }
  if (t == 20) return ordo_pipeflow_stop(pf);
  return 0;
}

Test(pipeline_api, pipeflow_outside_its_callback) {
  cr_assert_eq(ordo_pipeflow_token(NULL), UINT64_MAX);
  cr_assert_eq(ordo_pipeflow_line(NULL), UINT32_MAX);
  cr_assert_eq(ordo_pipeflow_pipe(NULL), UINT32_MAX);
  cr_assert_eq(ordo_pipeflow_num_deferrals(NULL), UINT32_MAX);
  TU_ASSERT_ST(ordo_pipeflow_stop(NULL), ORDO_ERR_INVALID_ARGUMENT, "stop NULL");
  TU_ASSERT_ST(ordo_pipeflow_defer(NULL, 3), ORDO_ERR_INVALID_ARGUMENT, "defer NULL");
  int local;
  ordo_pipeflow* made_up = (ordo_pipeflow*)&local;
  cr_assert_eq(ordo_pipeflow_token(made_up), UINT64_MAX);
  TU_ASSERT_ST(ordo_pipeflow_stop(made_up), ORDO_ERR_INVALID_STATE, "stop made up");
  TU_ASSERT_ST(ordo_pipeflow_defer(made_up, 3), ORDO_ERR_INVALID_STATE, "defer made up");
  ordo_engine* e = engine(1); /* one worker: every callback on one thread */
  ordo_pipe pipes[1] = {{S, keeps_its_pipeflow, NULL}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 3, pipes, 1, &p), ORDO_OK);
  cr_assert_eq(ordo_pipeline_run(p), ORDO_OK);
  cr_assert_eq(atomic_load(&g_kept_checks), 20, "kept pipeflows checked: %d",
               atomic_load(&g_kept_checks));
  ordo_pipeflow* kept = atomic_load(&g_kept);
  cr_assert_eq(ordo_pipeflow_token(kept), UINT64_MAX, "after the run");
  TU_ASSERT_ST(ordo_pipeflow_stop(kept), ORDO_ERR_INVALID_STATE, "stop after the run");
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* One run at a time: while a pushed run is held inside a pipe callback, everything that would
 * change the pipeline, or start another run, is refused; reading num_tokens is fine. */
static tu_gate g_gate;
static int32_t held_at_token_3(ordo_pipeflow* pf, void* ud) {
  (void)ud;
  if (ordo_pipeflow_token(pf) == 3) tu_gate_fn(NULL, &g_gate);
  return 0;
}

Test(pipeline_api, one_run_at_a_time) {
  ordo_engine* e = engine(2);
  static uint64_t ten = 10;
  ordo_pipe pipes[2] = {{S, stop_at, &ten}, {S, held_at_token_3, NULL}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 2, pipes, 2, &p), ORDO_OK);
  tu_gate_init(&g_gate);
  cr_assert_eq(ordo_pipeline_push(p, NULL, 0, NULL, 0, NULL), ORDO_OK);
  cr_assert(tu_wait_ge(&g_gate.in, 1, 10000), "the run never reached token 3");
  uint64_t n = 0;
  TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_ERR_INVALID_STATE, "run");
  cr_assert(strstr(ordo_last_error_message(), "in flight"));
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, NULL, 0, NULL), ORDO_ERR_INVALID_STATE, "push");
  TU_ASSERT_ST(ordo_pipeline_reset(p), ORDO_ERR_INVALID_STATE, "reset");
  TU_ASSERT_ST(ordo_pipeline_reset_pipes(p, 0, pipes, 2), ORDO_ERR_INVALID_STATE, "reset_pipes");
  TU_ASSERT_ST(ordo_pipeline_dropped(p, &n, NULL, 0), ORDO_ERR_INVALID_STATE, "dropped");
  TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_ERR_INVALID_STATE, "destroy");
  TU_ASSERT_ST(ordo_pipeline_num_tokens(p, &n), ORDO_OK, "num_tokens");
  cr_assert(n >= 4 && n <= 6, "num_tokens while held: %llu", (unsigned long long)n);
  atomic_store(&g_gate.open, 1);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  TU_ASSERT_ST(ordo_pipeline_num_tokens(p, &n), ORDO_OK, "num_tokens");
  cr_assert_eq(n, 10);
  TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, "destroy after the run");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* Runs from inside the engine would wait for work that cannot run: WOULD_DEADLOCK. Inside its
 * own pipe, a pipeline's reset and destroy are refused (its run is in flight). */
typedef struct inside {
  ordo_pipeline* self;
  ordo_pipeline* other; /* on the same engine */
  atomic_int run_self, run_other, reset_self, destroy_self, pushed_op_ran;
} inside;

static int32_t count_op(ordo_exec* exec, void* ud) {
  (void)exec;
  atomic_fetch_add((atomic_int*)ud, 1);
  return 0;
}

static int32_t tries_from_inside(ordo_pipeflow* pf, void* ud) {
  inside* in = ud;
  if (ordo_pipeflow_token(pf) == 2) {
    atomic_store(&in->run_self, ordo_pipeline_run(in->self));
    atomic_store(&in->run_other, ordo_pipeline_run(in->other));
    atomic_store(&in->reset_self, ordo_pipeline_reset(in->self));
    atomic_store(&in->destroy_self, ordo_pipeline_destroy(in->self));
  }
  return 0;
}

static int32_t op_runs_pipeline(ordo_exec* exec, void* ud) {
  (void)exec;
  inside* in = ud;
  atomic_store(&in->run_other, ordo_pipeline_run(in->other));
  return 0;
}

Test(pipeline_api, runs_from_inside_the_engine_would_deadlock) {
  for (int32_t workers = 0; workers <= 2; workers += 2) { /* naive, then 2 workers */
    ordo_engine* e = engine(workers);
    static uint64_t five = 5;
    inside in;
    memset(&in, 0, sizeof in);
    ordo_pipe mine[2] = {{S, stop_at, &five}, {P, tries_from_inside, &in}};
    ordo_pipe plain[1] = {{S, stop_at, &five}};
    cr_assert_eq(ordo_pipeline_create(e, 2, mine, 2, &in.self), ORDO_OK);
    cr_assert_eq(ordo_pipeline_create(e, 2, plain, 1, &in.other), ORDO_OK);
    cr_assert_eq(ordo_pipeline_run(in.self), ORDO_OK, "%s", ordo_last_error_message());
    cr_assert_eq(atomic_load(&in.run_self), ORDO_ERR_WOULD_DEADLOCK);
    cr_assert_eq(atomic_load(&in.run_other), ORDO_ERR_WOULD_DEADLOCK);
    cr_assert_eq(atomic_load(&in.reset_self), ORDO_ERR_INVALID_STATE);
    cr_assert_eq(atomic_load(&in.destroy_self), ORDO_ERR_INVALID_STATE);
    /* from inside a plain op of the engine */
    atomic_store(&in.run_other, -1);
    cr_assert_eq(ordo_opr_push(e, op_runs_pipeline, &in, NULL, 0, NULL, 0, NULL), ORDO_OK);
    cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&in.run_other), ORDO_ERR_WOULD_DEADLOCK);
    /* pushing the run from inside is the way: it runs after the op */
    cr_assert_eq(ordo_pipeline_run(in.other), ORDO_OK);
    cr_assert_eq(ordo_pipeline_destroy(in.self), ORDO_OK);
    cr_assert_eq(ordo_pipeline_destroy(in.other), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  }
}

/* A pipe callback may push ops and run a pipeline of another engine. */
typedef struct nested {
  ordo_engine* e;
  ordo_pipeline* on_other_engine;
  atomic_int pushed, ran, inner_status;
} nested;

static int32_t pushes_and_nests(ordo_pipeflow* pf, void* ud) {
  nested* n = ud;
  if (ordo_opr_push(n->e, count_op, &n->ran, NULL, 0, NULL, 0, NULL) == ORDO_OK) {
    atomic_fetch_add(&n->pushed, 1);
  }
  if (ordo_pipeflow_token(pf) == 1) {
    atomic_store(&n->inner_status, ordo_pipeline_run(n->on_other_engine));
  }
  return 0;
}

Test(pipeline_api, callbacks_push_ops_and_run_other_engines_pipelines) {
  for (int32_t workers = 0; workers <= 2; workers += 2) {
    nested n;
    memset(&n, 0, sizeof n);
    atomic_store(&n.inner_status, -1);
    n.e = engine(workers);
    ordo_engine* other = engine(workers);
    static uint64_t three = 3, eight = 8;
    ordo_pipe inner[2] = {{S, stop_at, &three}, {P, nothing, NULL}};
    cr_assert_eq(ordo_pipeline_create(other, 2, inner, 2, &n.on_other_engine), ORDO_OK);
    ordo_pipe outer[2] = {{S, stop_at, &eight}, {S, pushes_and_nests, &n}};
    ordo_pipeline* p = NULL;
    cr_assert_eq(ordo_pipeline_create(n.e, 3, outer, 2, &p), ORDO_OK);
    cr_assert_eq(ordo_pipeline_run(p), ORDO_OK, "%s", ordo_last_error_message());
    cr_assert_eq(ordo_wait_for_all(n.e), ORDO_OK);
    cr_assert_eq(atomic_load(&n.pushed), 8);
    cr_assert_eq(atomic_load(&n.ran), 8);
    cr_assert_eq(atomic_load(&n.inner_status), ORDO_OK);
    uint64_t t = 0;
    cr_assert_eq(ordo_pipeline_num_tokens(n.on_other_engine, &t), ORDO_OK);
    cr_assert_eq(t, 3);
    cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
    cr_assert_eq(ordo_pipeline_destroy(n.on_other_engine), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(other), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(n.e), ORDO_OK);
  }
}

/* After ordo_engine_destroy a pipeline keeps the engine's memory: its runs say SHUTDOWN, and
 * destroying it afterwards frees the engine (ASan's leak check sees the rest). */
Test(pipeline_api, runs_after_the_engine_is_destroyed) {
  ordo_engine* e = engine(2);
  static uint64_t four = 4;
  ordo_pipe pipes[1] = {{S, stop_at, &four}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 2, pipes, 1, &p), ORDO_OK);
  cr_assert_eq(ordo_engine_retain(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  ordo_pipeline* q = NULL;
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, pipes, 1, &q), ORDO_ERR_SHUTDOWN, "create");
  TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_ERR_SHUTDOWN, "run");
  TU_ASSERT_ST(ordo_pipeline_push(p, NULL, 0, NULL, 0, NULL), ORDO_ERR_SHUTDOWN, "push");
  cr_assert_eq(ordo_engine_release(e), ORDO_OK); /* the last reference */
  TU_ASSERT_ST(ordo_pipeline_run(p), ORDO_ERR_SHUTDOWN, "run after the last release");
  uint64_t n = 1;
  TU_ASSERT_ST(ordo_pipeline_num_tokens(p, &n), ORDO_OK, "num_tokens");
  cr_assert_eq(n, 0);
  TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, "destroy frees the engine's memory");
}

/* Lines wait without holding a worker: pipe 1 (serial) holds token 0 on one of two workers;
 * the lines behind it cannot pass pipe 1, and their steps must have given the other worker
 * back, so an unrelated op runs at once. */
Test(pipeline_api, a_waiting_line_holds_no_worker) {
  ordo_engine* e = engine(2);
  static uint64_t forty = 40;
  tu_gate_init(&g_gate);
  ordo_pipe pipes[3] = {{S, stop_at, &forty}, {S, held_at_token_3, NULL}, {P, nothing, NULL}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 8, pipes, 3, &p), ORDO_OK);
  cr_assert_eq(ordo_pipeline_push(p, NULL, 0, NULL, 0, NULL), ORDO_OK);
  cr_assert(tu_wait_ge(&g_gate.in, 1, 10000));
  tu_sleep_ms(20); /* the other lines reach pipe 1 and wait there */
  atomic_int ran = 0;
  for (int i = 0; i < 10; i++) {
    cr_assert_eq(ordo_opr_push(e, count_op, &ran, NULL, 0, NULL, 0, NULL), ORDO_OK);
  }
  cr_assert(tu_wait_ge(&ran, 10, 5000), "unrelated ops did not run while lines waited (%d)",
            atomic_load(&ran));
  uint64_t n = 0;
  cr_assert_eq(ordo_pipeline_num_tokens(p, &n), ORDO_OK);
  cr_assert(n >= 4 && n <= 12, "tokens while held: %llu", (unsigned long long)n);
  atomic_store(&g_gate.open, 1);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* Many tokens through many lines on each engine kind: the counts and the serial order. */
typedef struct counter {
  uint64_t stop;
  uint64_t next_serial; /* serial pipe 2's expected next token (it runs alone) */
  atomic_int parallel, out_of_order;
} counter;

static int32_t source(ordo_pipeflow* pf, void* ud) {
  return ordo_pipeflow_token(pf) == ((counter*)ud)->stop ? ordo_pipeflow_stop(pf) : 0;
}
static int32_t parallel_count(ordo_pipeflow* pf, void* ud) {
  (void)pf;
  atomic_fetch_add(&((counter*)ud)->parallel, 1);
  return 0;
}
static int32_t serial_in_order(ordo_pipeflow* pf, void* ud) {
  counter* c = ud;
  if (ordo_pipeflow_token(pf) != c->next_serial) atomic_fetch_add(&c->out_of_order, 1);
  c->next_serial = ordo_pipeflow_token(pf) + 1;
  return 0;
}

Test(pipeline_api, many_tokens_many_lines_every_kind, .timeout = 120) {
  const uint32_t lines[] = {1, 2, 7, 64};
  for (int k = 0; k < TU_NUM_ALL_KINDS; k++) {
    for (int li = 0; li < 4; li++) {
      ordo_engine* e = NULL;
      cr_assert_eq(tu_engine_create(tu_all_kinds[k], 3, &e), ORDO_OK);
      counter c = {.stop = tu_under_valgrind() ? 500 : 20000};
      ordo_pipe pipes[3] = {{S, source, &c}, {P, parallel_count, &c}, {S, serial_in_order, &c}};
      ordo_pipeline* p = NULL;
      cr_assert_eq(ordo_pipeline_create(e, lines[li], pipes, 3, &p), ORDO_OK);
      for (int run = 0; run < 2; run++) { /* the second continues ids and the line ring */
        cr_assert_eq(ordo_pipeline_run(p), ORDO_OK, "%s", ordo_last_error_message());
        c.stop *= 2;
      }
      c.stop /= 2;
      cr_assert_eq((uint64_t)atomic_load(&c.parallel), c.stop, "%s, %u lines",
                   tu_kind_name(tu_all_kinds[k]), lines[li]);
      cr_assert_eq(c.next_serial, c.stop);
      cr_assert_eq(atomic_load(&c.out_of_order), 0);
      cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
      cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
    }
  }
}

/* Several threads run their own pipelines on one engine at once. */
typedef struct runner {
  ordo_engine* e;
  int runs_ok;
} runner;

static void* run_many(void* arg) {
  runner* r = arg;
  counter c = {.stop = 300};
  ordo_pipe pipes[3] = {{S, source, &c}, {P, parallel_count, &c}, {S, serial_in_order, &c}};
  ordo_pipeline* p = NULL;
  if (ordo_pipeline_create(r->e, 4, pipes, 3, &p) != ORDO_OK) return NULL;
  for (int i = 0; i < 30; i++) {
    c.next_serial = 0;
    if (ordo_pipeline_run(p) == ORDO_OK && c.next_serial == 300 && !atomic_load(&c.out_of_order)) {
      r->runs_ok++;
    }
    ordo_pipeline_reset(p);
  }
  ordo_pipeline_destroy(p);
  return NULL;
}

Test(pipeline_api, threads_run_pipelines_on_one_engine) {
  ordo_engine* e = engine(2);
  pthread_t t[4];
  runner r[4];
  for (int i = 0; i < 4; i++) {
    r[i] = (runner){e, 0};
    cr_assert_eq(pthread_create(&t[i], NULL, run_many, &r[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    cr_assert_eq(r[i].runs_ok, 30, "thread %d: %d good runs of 30", i, r[i].runs_ok);
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* Callbacks of a parallel pipe must be able to run at the same time: each of the first two
 * waits (up to 10 s) until the other has started. A scheduler that kept one token's step
 * behind the other's callback on the same thread would make them time out. */
typedef struct meet {
  uint64_t stop;
  atomic_int inside, met, timed_out;
} meet;

static int32_t meet_source(ordo_pipeflow* pf, void* ud) {
  return ordo_pipeflow_token(pf) == ((meet*)ud)->stop ? ordo_pipeflow_stop(pf) : 0;
}
static int32_t wait_for_a_partner(ordo_pipeflow* pf, void* ud) {
  meet* m = ud;
  if (ordo_pipeflow_token(pf) < 2) {
    atomic_fetch_add(&m->inside, 1);
    if (tu_wait_ge(&m->inside, 2, 10000)) {
      atomic_fetch_add(&m->met, 1);
    } else {
      atomic_fetch_add(&m->timed_out, 1);
    }
  }
  return 0;
}

Test(pipeline_api, parallel_callbacks_run_at_the_same_time, .timeout = 60) {
  for (int32_t workers = 2; workers <= 4; workers += 2) {
    for (int shape = 0; shape < 2; shape++) { /* S-P-S, then S-P */
      ordo_engine* e = engine(workers);
      meet m = {.stop = 20};
      ordo_pipe pipes[3] = {{S, meet_source, &m}, {P, wait_for_a_partner, &m}, {S, nothing, NULL}};
      ordo_pipeline* p = NULL;
      cr_assert_eq(ordo_pipeline_create(e, 4, pipes, shape ? 2 : 3, &p), ORDO_OK);
      uint64_t t0 = tu_now_ms();
      cr_assert_eq(ordo_pipeline_run(p), ORDO_OK, "%s", ordo_last_error_message());
      cr_assert_eq(atomic_load(&m.met), 2,
                   "%d workers, shape %d: %d met, %d timed out after %llu ms", workers, shape,
                   atomic_load(&m.met), atomic_load(&m.timed_out),
                   (unsigned long long)(tu_now_ms() - t0));
      cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
      cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
    }
  }
}

/* ordo_engine_destroy while a run is in flight: the drain waits for the run's steps, which go on
 * on the threads already running them when the engine refuses further pushes; the run ends with
 * every token through every pipe, and destroy returns. */
typedef struct during {
  ordo_pipeline* p;
  atomic_int started, status;
  atomic_int stage_calls;
} during;

static int32_t slow_stage(ordo_pipeflow* pf, void* ud) {
  during* d = ud;
  (void)pf;
  atomic_store(&d->started, 1);
  tu_sleep_us(200);
  atomic_fetch_add(&d->stage_calls, 1);
  return 0;
}

static void* run_in_thread(void* arg) {
  during* d = arg;
  atomic_store(&d->status, ordo_pipeline_run(d->p));
  return NULL;
}

Test(pipeline_api, engine_destroyed_while_a_run_is_in_flight) {
  ordo_engine* e = engine(2);
  static uint64_t stop = 300;
  during d;
  memset(&d, 0, sizeof d);
  atomic_store(&d.status, -1);
  ordo_pipe pipes[3] = {{S, stop_at, &stop}, {P, slow_stage, &d}, {S, nothing, NULL}};
  cr_assert_eq(ordo_pipeline_create(e, 4, pipes, 3, &d.p), ORDO_OK);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, run_in_thread, &d), 0);
  cr_assert(tu_wait_ge(&d.started, 1, 10000));
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK); /* drains the run's steps */
  pthread_join(t, NULL);
  cr_assert_eq(atomic_load(&d.status), ORDO_OK, "the run: %s",
               ordo_status_string(atomic_load(&d.status)));
  cr_assert_eq(atomic_load(&d.stage_calls), 300);
  TU_ASSERT_ST(ordo_pipeline_run(d.p), ORDO_ERR_SHUTDOWN, "run after destroy");
  cr_assert_eq(ordo_pipeline_destroy(d.p), ORDO_OK);
}
