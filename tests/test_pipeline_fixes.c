/*
 * The Taskflow bugs ordo fixes (pipeline.md §5) and the dropped-token report:
 *   TF-BUG 1  stop() on a resumed token while others are ready: they are dropped and reported,
 *             never replayed by the next run (Taskflow replayed them: duplicate ids);
 *   TF-BUG 2  defer() then stop(): the targets are forgotten (Taskflow deferred the next run's
 *             first token on that line to them, losing it);
 *   TF-BUG 3  a rerun without reset after a drop continues the line ring where it is, so that
 *             no token is lost and serial pipes stay in order;
 *   TF-BUG 8  a failing pipe ends the run with an error and the pipeline needs a reset.
 * Each multi-run scenario runs ps_reps() (200) times on 1, 2 and 4 workers, with random delays
 * after the first run.
 */
#include <criterion/criterion.h>

#include "pipeline_script.h"

#define S ORDO_PIPE_SERIAL
#define P ORDO_PIPE_PARALLEL

/* A scenario: runs on one pipeline, each with its script (rules and stop) and expectations,
 * without reset between them unless `reset_before` says so. The pipes are the first script's. */
typedef struct step {
  ps_script script;
  ps_expect expect;
  int reset_before;
} step;

static void run_steps(const step* steps, int n, const char* name) {
  static const int32_t workers[] = {1, 2, 4};
  ps_record* r = malloc(sizeof *r);
  cr_assert_not_null(r);
  ps_script cur = steps[0].script;
  ps_pipes pp;
  ps_pipes_make(&pp, r, &cur);
  const int reps = ps_reps();
  for (size_t w = 0; w < 3; w++) {
    ordo_engine* eng = NULL;
    cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, workers[w], &eng), ORDO_OK);
    ordo_pipeline* p = NULL;
    cr_assert_eq(ordo_pipeline_create(eng, cur.lines, pp.pipes, (size_t)cur.num_pipes, &p),
                 ORDO_OK);
    for (int rep = 0; rep < reps; rep++) {
      for (int i = 0; i < n; i++) {
        cur = steps[i].script;
        cur.jitter = rep > 0;
        if (steps[i].reset_before) cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
        ps_record_init(r, &cur);
        ordo_status st = ordo_pipeline_run(p);
        char ctx[128];
        snprintf(ctx, sizeof ctx, "%s, %d workers, repetition %d, run %d", name, workers[w], rep,
                 i + 1);
        ps_check(p, r, &steps[i].expect, st, ctx);
      }
      cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
    }
    cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(eng), ORDO_OK);
  }
  free(r);
}

TestSuite(pipeline_fixes, .timeout = 120);

/* TF-BUG 1: 0, 1 and 2 wait for 3; 3's acceptance makes them ready; pipe 0 stops on 0 (resumed)
 * while 1 and 2 are still ready. All three are dropped and reported; the next run, without
 * reset, starts with the fresh id 4 on the next line; a reset then gives a clean restart. */
Test(pipeline_fixes, tf_bug_1_ready_tokens_are_dropped_not_replayed) {
  const step steps[] = {
      {.script =
           {.lines = 2,
            .num_pipes = 2,
            .types = {S, S},
            .stop_at = UINT64_MAX,
            .nrules = 4,
            .rules = {{0, 0, 1, {3}, 0}, {1, 0, 1, {3}, 0}, {2, 0, 1, {3}, 0}, {0, 1, 0, {0}, 1}}},
       .expect = {.pipe0 = "0/0@L0 D{3} 1/0@L0 D{3} 2/0@L0 D{3} 3/0@L0 0/1@L1 STOP",
                  .accepted = "3",
                  .lines = "0",
                  .nds = "",
                  .num_tokens = 4,
                  .status = ORDO_ERR_TOKENS_DROPPED,
                  .dropped = "0 1 2"}},
      {.script = {.lines = 2, .num_pipes = 2, .types = {S, S}, .stop_at = 7},
       .expect = {.pipe0 = "4/0@L1 5/0@L0 6/0@L1 7/0@L0 STOP",
                  .accepted = "4 5 6",
                  .lines = "1 0 1",
                  .nds = "",
                  .num_tokens = 7,
                  .status = ORDO_OK,
                  .dropped = ""}},
      {.script = {.lines = 2, .num_pipes = 2, .types = {S, S}, .stop_at = 3},
       .expect = {.pipe0 = "0/0@L0 1/0@L1 2/0@L0 3/0@L1 STOP",
                  .accepted = "0 1 2",
                  .lines = "0 1 0",
                  .nds = "",
                  .num_tokens = 3,
                  .status = ORDO_OK,
                  .dropped = ""},
       .reset_before = 1},
  };
  run_steps(steps, 3, "TF-BUG 1");
}

/* TF-BUG 2: token 3 defers to 5 and then stops. The next run, without reset, must accept its
 * first token (3, fresh again: a stop id is not consumed) on line 3 % 2 = 1 without deferring it.
 */
Test(pipeline_fixes, tf_bug_2_stop_forgets_the_targets) {
  const step steps[] = {
      {.script = {.lines = 2,
                  .num_pipes = 2,
                  .types = {S, S},
                  .stop_at = UINT64_MAX,
                  .nrules = 1,
                  .rules = {{3, 0, 1, {5}, 1}}},
       .expect = {.pipe0 = "0/0@L0 1/0@L1 2/0@L0 3/0@L1 D{5} STOP",
                  .accepted = "0 1 2",
                  .lines = "0 1 0",
                  .nds = "",
                  .num_tokens = 3,
                  .status = ORDO_OK,
                  .dropped = ""}},
      {.script = {.lines = 2, .num_pipes = 2, .types = {S, S}, .stop_at = 6},
       .expect = {.pipe0 = "3/0@L1 4/0@L0 5/0@L1 6/0@L0 STOP",
                  .accepted = "3 4 5",
                  .lines = "1 0 1",
                  .nds = "",
                  .num_tokens = 6,
                  .status = ORDO_OK,
                  .dropped = ""}},
  };
  run_steps(steps, 2, "TF-BUG 2");
}

/* TF-BUG 3: token 1 is dropped (its target is never generated), so 4 ids were handed out but 3
 * tokens accepted. The next run starts on line 3 % 3 = 0 (Taskflow started on 4 % 3 = 1, ended
 * early and ran a serial pipe out of order), and every token of it reaches every pipe, in
 * order. */
Test(pipeline_fixes, tf_bug_3_rerun_after_a_drop_keeps_the_line_ring) {
  const step steps[] = {
      {.script = {.lines = 3,
                  .num_pipes = 3,
                  .types = {S, P, S},
                  .stop_at = 4,
                  .nrules = 1,
                  .rules = {{1, 0, 1, {100}, 0}}},
       .expect = {.pipe0 = "0/0@L0 1/0@L1 D{100} 2/0@L1 3/0@L2 4/0@L0 STOP",
                  .accepted = "0 2 3",
                  .lines = "0 1 2",
                  .nds = "",
                  .num_tokens = 4,
                  .status = ORDO_ERR_TOKENS_DROPPED,
                  .dropped = "1"}},
      {.script = {.lines = 3, .num_pipes = 3, .types = {S, P, S}, .stop_at = 9},
       .expect = {.pipe0 = "4/0@L0 5/0@L1 6/0@L2 7/0@L0 8/0@L1 9/0@L2 STOP",
                  .accepted = "4 5 6 7 8",
                  .lines = "0 1 2 0 1",
                  .nds = "",
                  .num_tokens = 9,
                  .status = ORDO_OK,
                  .dropped = ""}},
      {.script = {.lines = 3, .num_pipes = 3, .types = {S, P, S}, .stop_at = 11},
       .expect = {.pipe0 = "9/0@L2 10/0@L0 11/0@L1 STOP",
                  .accepted = "9 10",
                  .lines = "2 0",
                  .nds = "",
                  .num_tokens = 11,
                  .status = ORDO_OK,
                  .dropped = ""}},
  };
  run_steps(steps, 3, "TF-BUG 3");
}

/* A cycle: 1 waits for 2 (not generated yet: valid), 2 for 1 (deferred: valid). Neither is ever
 * ready; both are dropped and named in the message; the rest of the run is intact; the
 * pipeline runs again at once (no reset needed) and the list is cleared by that run. */
Test(pipeline_fixes, a_cycle_is_dropped_and_reported) {
  const step steps[] = {
      {.script = {.lines = 2,
                  .num_pipes = 2,
                  .types = {S, S},
                  .stop_at = 5,
                  .nrules = 2,
                  .rules = {{1, 0, 1, {2}, 0}, {2, 0, 1, {1}, 0}}},
       .expect = {.pipe0 = "0/0@L0 1/0@L1 D{2} 2/0@L1 D{1} 3/0@L1 4/0@L0 5/0@L1 STOP",
                  .accepted = "0 3 4",
                  .lines = "0 1 0",
                  .nds = "",
                  .num_tokens = 5,
                  .status = ORDO_ERR_TOKENS_DROPPED,
                  .dropped = "1 2"}},
      {.script = {.lines = 2, .num_pipes = 2, .types = {S, S}, .stop_at = 6},
       .expect = {.pipe0 = "5/0@L1 6/0@L0 STOP",
                  .accepted = "5",
                  .lines = "1",
                  .nds = "",
                  .num_tokens = 6,
                  .status = ORDO_OK,
                  .dropped = ""}},
  };
  run_steps(steps, 2, "cycle");
}

/* The report itself: the status, the message (count and first ids), ordo_pipeline_dropped with
 * a short buffer, a NULL buffer, and after reset. 20 tokens defer to a target never generated. */
static int32_t defer_all_odd(ordo_pipeflow* pf, void* ud) {
  (void)ud;
  uint64_t t = ordo_pipeflow_token(pf);
  if (t == 40) return ordo_pipeflow_stop(pf);
  if (t % 2 == 1) return ordo_pipeflow_defer(pf, 1000);
  return 0;
}
static int32_t nothing(ordo_pipeflow* pf, void* ud) {
  (void)pf;
  (void)ud;
  return 0;
}

Test(pipeline_fixes, dropped_report_message_and_list) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, 2, &e), ORDO_OK);
  ordo_pipe pipes[2] = {{S, defer_all_odd, NULL}, {P, nothing, NULL}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 3, pipes, 2, &p), ORDO_OK);
  uint64_t count = 99, ids[30];
  cr_assert_eq(ordo_pipeline_dropped(p, &count, NULL, 0), ORDO_OK);
  cr_assert_eq(count, 0, "before any run");
  cr_assert_eq(ordo_pipeline_run(p), ORDO_ERR_TOKENS_DROPPED);
  const char* msg = ordo_last_error_message();
  cr_assert(strstr(msg, "ordo_pipeline_run") != NULL, "message: %s", msg);
  cr_assert(strstr(msg, "20 tokens dropped (ids 1, 3, 5, 7, 9, 11, 13, 15, ...)") != NULL,
            "message: %s", msg);
  cr_assert_eq(ordo_pipeline_dropped(p, &count, NULL, 0), ORDO_OK);
  cr_assert_eq(count, 20);
  memset(ids, 0xff, sizeof ids);
  cr_assert_eq(ordo_pipeline_dropped(p, &count, ids, 5), ORDO_OK);
  cr_assert_eq(count, 20);
  for (int i = 0; i < 5; i++) cr_assert_eq(ids[i], (uint64_t)(2 * i + 1));
  cr_assert_eq(ids[5], UINT64_MAX, "wrote past cap");
  cr_assert_eq(ordo_pipeline_dropped(p, &count, ids, 30), ORDO_OK);
  for (int i = 0; i < 20; i++) cr_assert_eq(ids[i], (uint64_t)(2 * i + 1));
  uint64_t n = 0;
  cr_assert_eq(ordo_pipeline_num_tokens(p, &n), ORDO_OK);
  cr_assert_eq(n, 40, "dropped tokens still count as generated");
  cr_assert_eq(ordo_pipeline_dropped(p, &count, NULL, 3), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_pipeline_dropped(p, NULL, ids, 3), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
  cr_assert_eq(ordo_pipeline_dropped(p, &count, ids, 30), ORDO_OK);
  cr_assert_eq(count, 0, "reset clears the list");
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* TF-BUG 8: a failing later pipe. Serial pipe 1 fails at token 2: it never sees token 3 (no
 * callback starts after the failure); the run returns OP_FAILED naming the pipe, the token and
 * the code; running again without reset is refused; after reset the pipeline works. */
Test(pipeline_fixes, tf_bug_8_a_failing_pipe_ends_the_run) {
  static const int32_t workers[] = {1, 2, 4};
  ps_record* r = malloc(sizeof *r);
  for (int w = 0; w < 3; w++) {
    ps_script s = {.lines = 2, .num_pipes = 3, .types = {S, S, S}, .stop_at = 10};
    ps_pipes pp;
    ps_pipes_make(&pp, r, &s);
    ordo_engine* e = NULL;
    cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, workers[w], &e), ORDO_OK);
    ordo_pipeline* p = NULL;
    cr_assert_eq(ordo_pipeline_create(e, 2, pp.pipes, 3, &p), ORDO_OK);
    for (int rep = 0; rep < ps_reps(); rep++) {
      s.fail_pipe = 1;
      s.fail_token = 2;
      s.fail_code = 42;
      s.jitter = rep > 0;
      ps_record_init(r, &s);
      cr_assert_eq(ordo_pipeline_run(p), ORDO_ERR_OP_FAILED);
      const char* msg = ordo_last_error_message();
      cr_assert(strstr(msg, "pipe 1 failed on token 2 (line 0)") && strstr(msg, "(code 42)") &&
                    strstr(msg, "ordo_pipeline_reset"),
                "message: %s", msg);
      cr_assert_eq(atomic_load(&r->n[1]), 3, "pipe 1 ran %d tokens, want 0 1 2",
                   atomic_load(&r->n[1]));
      for (int i = 0; i < 3; i++) cr_assert_eq(r->ev[1][i].token, (uint64_t)i);
      int n2 = atomic_load(&r->n[2]);
      cr_assert_leq(n2, 2, "pipe 2 ran token 2 or later after the failure");
      for (int i = 0; i < n2; i++) cr_assert_eq(r->ev[2][i].token, (uint64_t)i);
      cr_assert_eq(ordo_pipeline_run(p), ORDO_ERR_INVALID_STATE);
      cr_assert(strstr(ordo_last_error_message(), "ordo_pipeline_reset"));
      cr_assert_eq(ordo_pipeline_push(p, NULL, 0, NULL, 0, NULL), ORDO_ERR_INVALID_STATE);
      cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
      s.fail_pipe = 0;
      ps_record_init(r, &s);
      cr_assert_eq(ordo_pipeline_run(p), ORDO_OK, "%s", ordo_last_error_message());
      cr_assert_eq(atomic_load(&r->n[2]), 10);
      cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
    }
    cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  }
  free(r);
}

/* Failures elsewhere: in pipe 0 (on a fresh and on a resumed token), in a parallel pipe while
 * other tokens run beside it, and a failure while tokens are deferred (they are reported too). */
typedef struct fail_ctx {
  uint64_t fail_at;
  uint32_t fail_nd;
  atomic_int later_calls;
} fail_ctx;

static int32_t pipe0_fails(ordo_pipeflow* pf, void* ud) {
  fail_ctx* c = ud;
  uint64_t t = ordo_pipeflow_token(pf);
  uint32_t nd = ordo_pipeflow_num_deferrals(pf);
  if (t == c->fail_at && nd == c->fail_nd) return 7;
  if (t == 3 && nd == 0) return ordo_pipeflow_defer(pf, 5);    /* resumed once 5 is accepted */
  if (t == 8 && nd == 0) return ordo_pipeflow_defer(pf, 1000); /* never resumed */
  if (t == 100) return ordo_pipeflow_stop(pf);
  return 0;
}
static int32_t later_counts(ordo_pipeflow* pf, void* ud) {
  (void)pf;
  atomic_fetch_add(&((fail_ctx*)ud)->later_calls, 1);
  return 0;
}
static int32_t parallel_fails(ordo_pipeflow* pf, void* ud) {
  atomic_fetch_add(&((fail_ctx*)ud)->later_calls, 1);
  return ordo_pipeflow_token(pf) == 20 ? -5 : 0;
}

Test(pipeline_fixes, failures_in_pipe_0_and_in_a_parallel_pipe) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, 2, &e), ORDO_OK);
  fail_ctx c = {.fail_at = 6, .fail_nd = 0};
  ordo_pipe pipes[2] = {{S, pipe0_fails, &c}, {S, later_counts, &c}};
  ordo_pipeline* p = NULL;
  cr_assert_eq(ordo_pipeline_create(e, 3, pipes, 2, &p), ORDO_OK);
  /* fresh token 6 fails: 0 1 2 4 5 3 accepted before it */
  cr_assert_eq(ordo_pipeline_run(p), ORDO_ERR_OP_FAILED);
  cr_assert(strstr(ordo_last_error_message(), "pipe 0 failed on token 6") != NULL, "%s",
            ordo_last_error_message());
  /* pipe 1 may have skipped some of 0 1 2 4 5 3, accepted before the failure: no callback
   * starts once a failure is recorded */
  cr_assert_leq(atomic_load(&c.later_calls), 6);
  /* resumed token 3 fails */
  cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
  c.fail_at = 3;
  c.fail_nd = 1;
  atomic_store(&c.later_calls, 0);
  cr_assert_eq(ordo_pipeline_run(p), ORDO_ERR_OP_FAILED);
  cr_assert(strstr(ordo_last_error_message(), "pipe 0 failed on token 3") != NULL, "%s",
            ordo_last_error_message());
  cr_assert_leq(atomic_load(&c.later_calls), 5, "0 1 2 4 5 accepted before the failure");
  /* a parallel pipe fails at token 20 while 8 is deferred: the failure wins, 8 is reported */
  cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
  c.fail_at = UINT64_MAX;
  atomic_store(&c.later_calls, 0);
  ordo_pipe par[2] = {{S, pipe0_fails, &c}, {P, parallel_fails, &c}};
  cr_assert_eq(ordo_pipeline_reset_pipes(p, 0, par, 2), ORDO_OK);
  cr_assert_eq(ordo_pipeline_run(p), ORDO_ERR_OP_FAILED);
  const char* msg = ordo_last_error_message();
  cr_assert(strstr(msg, "pipe 1 failed on token 20") && strstr(msg, "(code -5)") &&
                strstr(msg, "1 token dropped (ids 8)"),
            "%s", msg);
  int calls = atomic_load(&c.later_calls);
  cr_assert(calls >= 1 && calls < 99, "parallel pipe calls: %d", calls);
  uint64_t count = 0, id = 0;
  cr_assert_eq(ordo_pipeline_dropped(p, &count, &id, 1), ORDO_OK);
  cr_assert_eq(count, 1);
  cr_assert_eq(id, 8);
  cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
