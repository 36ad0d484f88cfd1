/*
 * pipeline.md §6, case by case: each case's exact pipe-0 invocation sequence (token,
 * num_deferrals, line, decision), the accepted order with its lines and num_deferrals (which
 * every later pipe must see: serial pipes in that order, parallel ones as a set), num_tokens and
 * the dropped tokens. Each case runs 200 times on engines of 1, 2 and 4 CPU workers with random
 * delays in the callbacks (pipeline_script.h), and once on the naive engine; T7b, which times a
 * sleeping step, runs once per shape on 2 and on 4 workers.
 */
#include <criterion/criterion.h>

#include "pipeline_script.h"

#define S ORDO_PIPE_SERIAL
#define P ORDO_PIPE_PARALLEL

/* Runs `s` ps_reps() times on each worker count (and once on the naive engine), resetting the
 * pipeline between runs, and checks every run against `e`. */
static void run_case(const ps_script* s, const ps_expect* e, const char* name) {
  static const int32_t workers[] = {0 /* naive */, 1, 2, 4};
  ps_record* r = malloc(sizeof *r);
  cr_assert_not_null(r);
  ps_script jittered = *s;
  ps_pipes pp;
  ps_pipes_make(&pp, r, &jittered);
  for (size_t w = 0; w < sizeof workers / sizeof workers[0]; w++) {
    ordo_engine* eng = NULL;
    int32_t kind = workers[w] ? ORDO_ENGINE_PER_DEVICE : ORDO_ENGINE_NAIVE;
    cr_assert_eq(tu_engine_create(kind, workers[w], &eng), ORDO_OK);
    ordo_pipeline* p = NULL;
    TU_ASSERT_ST(ordo_pipeline_create(eng, s->lines, pp.pipes, (size_t)s->num_pipes, &p), ORDO_OK,
                 name);
    const int reps = workers[w] ? ps_reps() : 1;
    for (int i = 0; i < reps; i++) {
      jittered.jitter = i > 0; /* the first run of each engine without delays */
      ps_record_init(r, &jittered);
      ordo_status st = ordo_pipeline_run(p);
      char ctx[160];
      snprintf(ctx, sizeof ctx, "%s, %s engine, %d workers, run %d", name,
               workers[w] ? "per_device" : "naive", workers[w], i);
      ps_check(p, r, e, st, ctx);
      TU_ASSERT_ST(ordo_pipeline_reset(p), ORDO_OK, ctx);
    }
    TU_ASSERT_ST(ordo_pipeline_destroy(p), ORDO_OK, name);
    cr_assert_eq(ordo_engine_destroy(eng), ORDO_OK);
  }
  free(r);
}

/* The documentation example's script (T1): 2 defers to 8; 5 to 2 and 7, then to 9. */
#define T1_RULES                         \
  .nrules = 3, .rules = {                \
                   {2, 0, 1, {8}, 0},    \
                   {5, 0, 2, {2, 7}, 0}, \
                   {5, 1, 1, {9}, 0},    \
  }
#define T1_ACCEPTED "0 1 3 4 6 7 8 2 9 5 10"

TestSuite(pipeline_cases, .timeout = 120);

Test(pipeline_cases, t1a_documentation_example_4_lines) {
  ps_script s = {.lines = 4, .num_pipes = 3, .types = {S, S, S}, .stop_at = 11, T1_RULES};
  ps_expect e = {.pipe0 =
                     "0/0@L0 1/0@L1 2/0@L2 D{8} 3/0@L2 4/0@L3 5/0@L0 D{2,7} 6/0@L0 7/0@L1 8/0@L2 "
                     "2/1@L3 5/1@L0 D{9} 9/0@L0 5/2@L1 10/0@L2 11/0@L3 STOP",
                 .accepted = T1_ACCEPTED,
                 .lines = "0 1 2 3 0 1 2 3 0 1 2",
                 .nds = "2:1 5:2",
                 .num_tokens = 11,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T1a");
}

Test(pipeline_cases, t1b_documentation_example_2_lines) {
  ps_script s = {.lines = 2, .num_pipes = 3, .types = {S, S, S}, .stop_at = 11, T1_RULES};
  ps_expect e = {.pipe0 =
                     "0/0@L0 1/0@L1 2/0@L0 D{8} 3/0@L0 4/0@L1 5/0@L0 D{2,7} 6/0@L0 7/0@L1 8/0@L0 "
                     "2/1@L1 5/1@L0 D{9} 9/0@L0 5/2@L1 10/0@L0 11/0@L1 STOP",
                 .accepted = T1_ACCEPTED,
                 .lines = "0 1 0 1 0 1 0 1 0 1 0",
                 .nds = "2:1 5:2",
                 .num_tokens = 11,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T1b");
}

/* §3.5: the same accepted order for 1 and 8 lines, S-P-S, and a single pipe; only lines differ. */
Test(pipeline_cases, t1_variants_lines_and_pipe_types) {
  ps_script one = {.lines = 1, .num_pipes = 3, .types = {S, S, S}, .stop_at = 11, T1_RULES};
  ps_expect e1 = {.pipe0 =
                      "0/0@L0 1/0@L0 2/0@L0 D{8} 3/0@L0 4/0@L0 5/0@L0 D{2,7} 6/0@L0 7/0@L0 8/0@L0 "
                      "2/1@L0 5/1@L0 D{9} 9/0@L0 5/2@L0 10/0@L0 11/0@L0 STOP",
                  .accepted = T1_ACCEPTED,
                  .lines = "0 0 0 0 0 0 0 0 0 0 0",
                  .nds = "2:1 5:2",
                  .num_tokens = 11,
                  .status = ORDO_OK,
                  .dropped = ""};
  run_case(&one, &e1, "T1, 1 line");
  ps_script eight = {.lines = 8, .num_pipes = 3, .types = {S, S, S}, .stop_at = 11, T1_RULES};
  ps_expect e8 = {.pipe0 =
                      "0/0@L0 1/0@L1 2/0@L2 D{8} 3/0@L2 4/0@L3 5/0@L4 D{2,7} 6/0@L4 7/0@L5 8/0@L6 "
                      "2/1@L7 5/1@L0 D{9} 9/0@L0 5/2@L1 10/0@L2 11/0@L3 STOP",
                  .accepted = T1_ACCEPTED,
                  .lines = "0 1 2 3 4 5 6 7 0 1 2",
                  .nds = "2:1 5:2",
                  .num_tokens = 11,
                  .status = ORDO_OK,
                  .dropped = ""};
  run_case(&eight, &e8, "T1, 8 lines");
  ps_script sps = {.lines = 4, .num_pipes = 3, .types = {S, P, S}, .stop_at = 11, T1_RULES};
  ps_expect e4 = {.pipe0 =
                      "0/0@L0 1/0@L1 2/0@L2 D{8} 3/0@L2 4/0@L3 5/0@L0 D{2,7} 6/0@L0 7/0@L1 8/0@L2 "
                      "2/1@L3 5/1@L0 D{9} 9/0@L0 5/2@L1 10/0@L2 11/0@L3 STOP",
                  .accepted = T1_ACCEPTED,
                  .lines = "0 1 2 3 0 1 2 3 0 1 2",
                  .nds = "2:1 5:2",
                  .num_tokens = 11,
                  .status = ORDO_OK,
                  .dropped = ""};
  run_case(&sps, &e4, "T1, S-P-S");
  ps_script single = {.lines = 4, .num_pipes = 1, .types = {S}, .stop_at = 11, T1_RULES};
  run_case(&single, &e4, "T1, one pipe");
}

Test(pipeline_cases, t2a_invalid_target_already_accepted) {
  ps_script s = {.lines = 3,
                 .num_pipes = 2,
                 .types = {S, S},
                 .stop_at = 6,
                 .nrules = 5,
                 .rules = {{1, 0, 1, {0}, 0},
                           {2, 0, 1, {1}, 0},
                           {3, 0, 1, {2}, 0},
                           {4, 0, 1, {3}, 0},
                           {5, 0, 1, {4}, 0}}};
  ps_expect e = {.pipe0 =
                     "0/0@L0 1/0@L1 D{0} 1/1@L1 2/0@L2 D{1} 2/1@L2 3/0@L0 D{2} 3/1@L0 "
                     "4/0@L1 D{3} 4/1@L1 5/0@L2 D{4} 5/1@L2 6/0@L0 STOP",
                 .accepted = "0 1 2 3 4 5",
                 .lines = "0 1 2 0 1 2",
                 .nds = "1:1 2:1 3:1 4:1 5:1",
                 .num_tokens = 6,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T2a");
}

Test(pipeline_cases, t2b_invalid_target_self) {
  ps_script s = {.lines = 2,
                 .num_pipes = 2,
                 .types = {S, S},
                 .stop_at = 5,
                 .nrules = 2,
                 .rules = {{2, 0, 1, {2}, 0}, {2, 1, 1, {2}, 0}}};
  ps_expect e = {.pipe0 = "0/0@L0 1/0@L1 2/0@L0 D{2} 2/1@L0 D{2} 2/2@L0 3/0@L1 4/0@L0 5/0@L1 STOP",
                 .accepted = "0 1 2 3 4",
                 .lines = "0 1 0 1 0",
                 .nds = "2:2",
                 .num_tokens = 5,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T2b");
}

Test(pipeline_cases, t3_chain_to_the_next_token) {
  ps_script s = {
      .lines = 3,
      .num_pipes = 2,
      .types = {S, S},
      .stop_at = 5,
      .nrules = 4,
      .rules = {{0, 0, 1, {1}, 0}, {1, 0, 1, {2}, 0}, {2, 0, 1, {3}, 0}, {3, 0, 1, {4}, 0}}};
  ps_expect e = {.pipe0 =
                     "0/0@L0 D{1} 1/0@L0 D{2} 2/0@L0 D{3} 3/0@L0 D{4} 4/0@L0 3/1@L1 2/1@L2 "
                     "1/1@L0 0/1@L1 5/0@L2 STOP",
                 .accepted = "4 3 2 1 0",
                 .lines = "0 1 2 0 1",
                 .nds = "3:1 2:1 1:1 0:1",
                 .num_tokens = 5,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T3");
}

Test(pipeline_cases, t4a_target_never_generated) {
  ps_script s = {.lines = 2,
                 .num_pipes = 3,
                 .types = {S, S, S},
                 .stop_at = 6,
                 .nrules = 1,
                 .rules = {{1, 0, 1, {100}, 0}}};
  ps_expect e = {.pipe0 = "0/0@L0 1/0@L1 D{100} 2/0@L1 3/0@L0 4/0@L1 5/0@L0 6/0@L1 STOP",
                 .accepted = "0 2 3 4 5",
                 .lines = "0 1 0 1 0",
                 .nds = "",
                 .num_tokens = 6,
                 .status = ORDO_ERR_TOKENS_DROPPED,
                 .dropped = "1"};
  run_case(&s, &e, "T4a");
}

Test(pipeline_cases, t4b_target_is_the_stop_id) {
  ps_script s = {.lines = 2,
                 .num_pipes = 3,
                 .types = {S, S, S},
                 .stop_at = 6,
                 .nrules = 1,
                 .rules = {{1, 0, 1, {6}, 0}}};
  ps_expect e = {.pipe0 = "0/0@L0 1/0@L1 D{6} 2/0@L1 3/0@L0 4/0@L1 5/0@L0 6/0@L1 STOP",
                 .accepted = "0 2 3 4 5",
                 .lines = "0 1 0 1 0",
                 .nds = "",
                 .num_tokens = 6,
                 .status = ORDO_ERR_TOKENS_DROPPED,
                 .dropped = "1"};
  run_case(&s, &e, "T4b");
}

Test(pipeline_cases, t4c_every_token_deferred_forever) {
  ps_script s = {.lines = 3,
                 .num_pipes = 2,
                 .types = {S, S},
                 .stop_at = 5,
                 .nrules = 5,
                 .rules = {{0, 0, 1, {1000}, 0},
                           {1, 0, 1, {1000}, 0},
                           {2, 0, 1, {1000}, 0},
                           {3, 0, 1, {1000}, 0},
                           {4, 0, 1, {1000}, 0}}};
  ps_expect e = {.pipe0 =
                     "0/0@L0 D{1000} 1/0@L0 D{1000} 2/0@L0 D{1000} 3/0@L0 D{1000} "
                     "4/0@L0 D{1000} 5/0@L0 STOP",
                 .accepted = "",
                 .lines = "",
                 .nds = "",
                 .num_tokens = 5,
                 .status = ORDO_ERR_TOKENS_DROPPED,
                 .dropped = "0 1 2 3 4"};
  run_case(&s, &e, "T4c");
}

Test(pipeline_cases, t5a_num_deferrals_counts_rounds) {
  ps_script s = {.lines = 2,
                 .num_pipes = 2,
                 .types = {S, S},
                 .stop_at = 9,
                 .nrules = 3,
                 .rules = {{3, 0, 3, {1, 5, 6}, 0}, {3, 1, 1, {7}, 0}, {3, 2, 1, {3}, 0}}};
  ps_expect e = {.pipe0 =
                     "0/0@L0 1/0@L1 2/0@L0 3/0@L1 D{1,5,6} 4/0@L1 5/0@L0 6/0@L1 3/1@L0 D{7} "
                     "7/0@L0 3/2@L1 D{3} 3/3@L1 8/0@L0 9/0@L1 STOP",
                 .accepted = "0 1 2 4 5 6 7 3 8",
                 .lines = "0 1 0 1 0 1 0 1 0",
                 .nds = "3:3",
                 .num_tokens = 9,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T5a");
}

Test(pipeline_cases, t5b_duplicate_targets_count_once) {
  ps_script s = {.lines = 2,
                 .num_pipes = 2,
                 .types = {S, S},
                 .stop_at = 6,
                 .nrules = 1,
                 .rules = {{1, 0, 3, {3, 3, 3}, 0}}};
  ps_expect e = {.pipe0 = "0/0@L0 1/0@L1 D{3,3,3} 2/0@L1 3/0@L0 1/1@L1 4/0@L0 5/0@L1 6/0@L0 STOP",
                 .accepted = "0 2 3 1 4 5",
                 .lines = "0 1 0 1 0 1",
                 .nds = "1:1",
                 .num_tokens = 6,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T5b");
}

Test(pipeline_cases, t6_ready_queue_in_registration_order) {
  ps_script s = {.lines = 3,
                 .num_pipes = 2,
                 .types = {S, S},
                 .stop_at = 7,
                 .nrules = 3,
                 .rules = {{0, 0, 1, {2}, 0}, {1, 0, 1, {4}, 0}, {0, 1, 1, {4}, 0}}};
  ps_expect e = {.pipe0 =
                     "0/0@L0 D{2} 1/0@L0 D{4} 2/0@L0 0/1@L1 D{4} 3/0@L1 4/0@L2 1/1@L0 "
                     "0/2@L1 5/0@L2 6/0@L0 7/0@L1 STOP",
                 .accepted = "2 3 4 1 0 5 6",
                 .lines = "0 1 2 0 1 2 0",
                 .nds = "1:1 0:2",
                 .num_tokens = 7,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T6");
}

Test(pipeline_cases, t7a_parallel_middle_pipe) {
  ps_script s = {
      .lines = 3,
      .num_pipes = 3,
      .types = {S, P, S},
      .stop_at = 8,
      .nrules = 4,
      .rules = {{0, 0, 1, {1}, 0}, {2, 0, 1, {3}, 0}, {4, 0, 1, {5}, 0}, {6, 0, 1, {7}, 0}}};
  ps_expect e = {.pipe0 =
                     "0/0@L0 D{1} 1/0@L0 0/1@L1 2/0@L2 D{3} 3/0@L2 2/1@L0 4/0@L1 D{5} "
                     "5/0@L1 4/1@L2 6/0@L0 D{7} 7/0@L0 6/1@L1 8/0@L2 STOP",
                 .accepted = "1 0 3 2 5 4 7 6",
                 .lines = "0 1 2 0 1 2 0 1",
                 .nds = "0:1 2:1 4:1 6:1",
                 .num_tokens = 8,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T7a");
}

/* T7b: readiness is acceptance by pipe 0, not leaving the pipeline. Token 8 sleeps in pipe 1;
 * token 2, which waits for 8, is invoked again in pipe 0 meanwhile; with a parallel pipe 1 it
 * even runs there before 8 is done; the serial pipe 2 still runs 8 before 2. Needs a second
 * worker (the first sleeps), so 2 and 4 workers. */
Test(pipeline_cases, t7b_ready_when_the_target_is_accepted) {
  for (int variant = 0; variant < 2; variant++) {
    for (int32_t workers = 2; workers <= 4; workers += 2) {
      ps_script s = {.lines = 4,
                     .num_pipes = 3,
                     .types = {S, variant ? P : S, S},
                     .stop_at = 11,
                     T1_RULES,
                     .sleep_pipe = 1,
                     .sleep_token = 8,
                     .sleep_ms = tu_under_valgrind() ? 1000 : 150};
      ps_expect e = {.accepted = T1_ACCEPTED,
                     .lines = "0 1 2 3 0 1 2 3 0 1 2",
                     .nds = "2:1 5:2",
                     .num_tokens = 11,
                     .status = ORDO_OK,
                     .dropped = ""};
      ps_record* r = malloc(sizeof *r);
      ps_pipes pp;
      ps_pipes_make(&pp, r, &s);
      ps_record_init(r, &s);
      r->watch_token = 2;
      ordo_engine* eng = NULL;
      cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, workers, &eng), ORDO_OK);
      ordo_pipeline* p = NULL;
      cr_assert_eq(ordo_pipeline_create(eng, 4, pp.pipes, 3, &p), ORDO_OK);
      ordo_status st = ordo_pipeline_run(p);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "T7b %s, %d workers", variant ? "S-P-S" : "S-S-S", workers);
      ps_check(p, r, &e, st, ctx);
      cr_assert(atomic_load(&r->resumed_before_sleeper),
                "%s: token 2 was not invoked again before token 8 left pipe 1", ctx);
      if (variant) {
        cr_assert(atomic_load(&r->watch_before_sleeper),
                  "%s: parallel pipe 1 did not run token 2 before token 8 finished it", ctx);
      }
      cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
      cr_assert_eq(ordo_engine_destroy(eng), ORDO_OK);
      free(r);
    }
  }
}

/* T8a as ordo defines it: stop() and defer() in a later pipe return INVALID_STATE and the run
 * goes on, every token through every pipe (ps_check checks both statuses). */
Test(pipeline_cases, t8a_stop_and_defer_outside_pipe_0_are_refused) {
  ps_script s = {.lines = 2,
                 .num_pipes = 2,
                 .types = {S, S},
                 .stop_at = 6,
                 .misuse_pipe = 1,
                 .misuse_token = 2};
  ps_expect e = {.pipe0 = "0/0@L0 1/0@L1 2/0@L0 3/0@L1 4/0@L0 5/0@L1 6/0@L0 STOP",
                 .accepted = "0 1 2 3 4 5",
                 .lines = "0 1 0 1 0 1",
                 .nds = "",
                 .num_tokens = 6,
                 .status = ORDO_OK,
                 .dropped = ""};
  run_case(&s, &e, "T8a");
}

/* T8b: Taskflow's ScalablePipeline: the T1 script on 2 pipes, then reset_pipes to 3 pipes
 * (ids from 0 at once, the same order in all three), then to 3 lines; bad pipe lists refused
 * without changing anything. The sequence ps_reps() times on 1, 2 and 4 workers. */
Test(pipeline_cases, t8b_reset_pipes) {
  static const int32_t workers[] = {1, 2, 4};
  ps_script s = {.lines = 4, .num_pipes = 3, .types = {S, S, S}, .stop_at = 11, T1_RULES};
  ps_record* r = malloc(sizeof *r);
  ps_pipes pp;
  ps_pipes_make(&pp, r, &s);
  ordo_pipe bad[3];
  memcpy(bad, pp.pipes, sizeof bad);
  bad[0].type = ORDO_PIPE_PARALLEL;
  for (int w = 0; w < 3; w++) {
    ordo_engine* eng = NULL;
    cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, workers[w], &eng), ORDO_OK);
    ordo_pipeline* p = NULL;
    cr_assert_eq(ordo_pipeline_create(eng, 4, pp.pipes, 2, &p), ORDO_OK);
    for (int rep = 0; rep < ps_reps(); rep++) {
      char ctx[96];
      ps_expect e = {.accepted = T1_ACCEPTED,
                     .lines = "0 1 2 3 0 1 2 3 0 1 2",
                     .nds = "2:1 5:2",
                     .num_tokens = 11,
                     .status = ORDO_OK,
                     .dropped = ""};
      /* the record is checked against num_pipes and lines: a copy of the script per shape */
      ps_script two = s;
      two.num_pipes = 2;
      two.jitter = rep > 0;
      cr_assert_eq(ordo_pipeline_reset_pipes(p, 4, pp.pipes, 2), ORDO_OK);
      ps_record_init(r, &two);
      snprintf(ctx, sizeof ctx, "T8b, 2 pipes, %d workers, run %d", workers[w], rep);
      ps_check(p, r, &e, ordo_pipeline_run(p), ctx);

      /* refused lists change nothing */
      cr_assert_eq(ordo_pipeline_reset_pipes(p, 0, bad, 3), ORDO_ERR_INVALID_ARGUMENT);
      cr_assert_eq(ordo_pipeline_reset_pipes(p, 0, pp.pipes, 0), ORDO_ERR_INVALID_ARGUMENT);
      cr_assert_eq(ordo_pipeline_reset_pipes(p, 0, NULL, 3), ORDO_ERR_INVALID_ARGUMENT);
      uint64_t n = 0;
      cr_assert_eq(ordo_pipeline_num_tokens(p, &n), ORDO_OK);
      cr_assert_eq(n, 11, "a refused reset_pipes changed the pipeline");

      ps_script three = s;
      three.jitter = rep > 0;
      cr_assert_eq(ordo_pipeline_reset_pipes(p, 0, pp.pipes, 3), ORDO_OK);
      cr_assert_eq(ordo_pipeline_num_tokens(p, &n), ORDO_OK);
      cr_assert_eq(n, 0, "reset_pipes must restart the ids at once");
      ps_record_init(r, &three);
      snprintf(ctx, sizeof ctx, "T8b, 3 pipes, %d workers, run %d", workers[w], rep);
      ps_check(p, r, &e, ordo_pipeline_run(p), ctx);

      cr_assert_eq(ordo_pipeline_reset_pipes(p, 3, pp.pipes, 3), ORDO_OK);
      three.lines = 3;
      ps_record_init(r, &three);
      e.lines = "0 1 2 0 1 2 0 1 2 0 1";
      snprintf(ctx, sizeof ctx, "T8b, 3 lines, %d workers, run %d", workers[w], rep);
      ps_check(p, r, &e, ordo_pipeline_run(p), ctx);
    }
    cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(eng), ORDO_OK);
  }
  free(r);
}

/* Every thread of the test on one CPU (the test thread, the engines' workers): each is preempted
 * at arbitrary points while the others run, which is when the handoffs between steps race. A
 * few of the cases above, 50 times each on 2 and 4 workers. */
Test(pipeline_cases, cases_on_one_cpu, .timeout = 120) {
  cr_assert_eq(tu_pin_to_one_cpu(), 0);
  const ps_script t1 = {.lines = 4, .num_pipes = 3, .types = {S, P, S}, .stop_at = 11, T1_RULES};
  const ps_expect e1 = {.accepted = T1_ACCEPTED,
                        .lines = "0 1 2 3 0 1 2 3 0 1 2",
                        .nds = "2:1 5:2",
                        .num_tokens = 11,
                        .status = ORDO_OK,
                        .dropped = ""};
  const ps_script t6 = {.lines = 3,
                        .num_pipes = 2,
                        .types = {S, S},
                        .stop_at = 7,
                        .nrules = 3,
                        .rules = {{0, 0, 1, {2}, 0}, {1, 0, 1, {4}, 0}, {0, 1, 1, {4}, 0}}};
  const ps_expect e6 = {.accepted = "2 3 4 1 0 5 6",
                        .lines = "0 1 2 0 1 2 0",
                        .nds = "1:1 0:2",
                        .num_tokens = 7,
                        .status = ORDO_OK,
                        .dropped = ""};
  const ps_script t4 = {.lines = 2,
                        .num_pipes = 3,
                        .types = {S, P, P},
                        .stop_at = 6,
                        .nrules = 1,
                        .rules = {{1, 0, 1, {100}, 0}}};
  const ps_expect e4 = {.accepted = "0 2 3 4 5",
                        .lines = "0 1 0 1 0",
                        .num_tokens = 6,
                        .status = ORDO_ERR_TOKENS_DROPPED,
                        .dropped = "1"};
  const ps_script* scripts[3] = {&t1, &t6, &t4};
  const ps_expect* expects[3] = {&e1, &e6, &e4};
  ps_record* r = malloc(sizeof *r);
  for (int c = 0; c < 3; c++) {
    ps_script s = *scripts[c];
    ps_pipes pp;
    ps_pipes_make(&pp, r, &s);
    for (int32_t workers = 2; workers <= 4; workers += 2) {
      ordo_engine* e = NULL;
      cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, workers, &e), ORDO_OK);
      ordo_pipeline* p = NULL;
      cr_assert_eq(ordo_pipeline_create(e, s.lines, pp.pipes, (size_t)s.num_pipes, &p), ORDO_OK);
      for (int i = 0; i < (tu_under_valgrind() ? 3 : 50); i++) {
        s.jitter = i > 0;
        ps_record_init(r, &s);
        char ctx[96];
        snprintf(ctx, sizeof ctx, "case %d on one CPU, %d workers, run %d", c, workers, i);
        ps_check(p, r, expects[c], ordo_pipeline_run(p), ctx);
        cr_assert_eq(ordo_pipeline_reset(p), ORDO_OK);
      }
      cr_assert_eq(ordo_pipeline_destroy(p), ORDO_OK);
      cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
    }
  }
  free(r);
}
