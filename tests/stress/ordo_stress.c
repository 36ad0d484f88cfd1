/*
 * ordo_stress: a long stress checker of the engine against a sequential model (`make stress`).
 *
 * Several pusher threads push millions of random ops over a few hundred vars: random reads and
 * writes, random failures (a callback returning non-zero, a deferred op completed with a
 * non-zero code), ops that defer and are completed later by separate completer threads,
 * ORDO_PROP_ASYNC ops, every op property and priority, ordo_var_clear_error, ordo_var_delete
 * with a new var replacing the deleted one, and uses of deleted handles. Every push, clear,
 * delete and ordered wait happens under one lock together with the model's update, so the
 * model's order is the engine's linearization of the pushes (SPEC §2.4); the engine's workers
 * still run the ops concurrently.
 *
 * The model predicts, per op, whether it runs or is skipped (a var it touches carries an
 * error: SPEC §3) and the version each var it touches must have when it runs. Each op checks
 * that when it runs; its free_fn checks that it ran exactly when predicted. The run goes in
 * rounds; between rounds main drains the engine and checks every var's error state, wait
 * status and version, the ordo_wait_for_all status, and the counts. Every fourth round pushes
 * only readers, with pairs of readers that must meet inside their callbacks (SPEC §2.2); by
 * default a run has at least eight rounds, so every kind of round comes.
 *
 * Waiter threads (and pushers now and then) also wait on vars outside the lock while the
 * pushers push: polls, timed waits of a nanosecond to 3 ms that often expire while a
 * deferred op holds the var, and untimed waits, several threads on one var at once. Their
 * results are checked against the model where it can tell (stress_waiter.h).
 *
 * At the end the coverage check fails the run if anything it claims to exercise (each kind of
 * round, rendezvous pairs, expired timed waits, completions from completer threads, ...) never
 * happened.
 *
 * Exit status: 0 when every check passed, 1 on any mismatch or unexpected ordo status, 2 on
 * bad usage, 3 when the watchdog saw no progress.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../test_util.h"
#include "stress.h"
#include "stress_model.h"
#include "stress_pusher.h"
#include "stress_rng.h"

typedef enum main_state { MS_SETUP, MS_ROUND, MS_WAIT_ALL, MS_CHECKING, MS_SHUTDOWN } main_state;

static atomic_int g_main_state;
static atomic_ulong g_round;
/* rounds run, per round_kind */
static unsigned long g_rounds_of_kind[3];
/* ordo_wait_for_all results predicted at round ends: {ORDO_OK, ORDO_ERR_OP_FAILED} */
static unsigned long g_wait_all_predicted[2];

static void dump_state(void) {
  static const char* const states[] = {"setting up", "running a round",
                                       "in ordo_wait_for_all after a round",
                                       "checking vars after a round", "shutting down"};
  fprintf(stderr, "  main: %s (round %lu)\n", states[atomic_load(&g_main_state)],
          atomic_load(&g_round));
  fprintf(stderr,
          "  ops: ran %lu, finished (free_fn) %lu, deferred %lu, completed by completers %lu, "
          "inline %lu, waiting in the completer queue %lu\n",
          atomic_load(&g_count.ran), atomic_load(&g_count.finished), atomic_load(&g_count.deferred),
          atomic_load(&g_count.completed_by_completer), atomic_load(&g_count.completed_inline),
          completer_queue_depth());
  fprintf(stderr, "  rendezvous: %d (-1 idle, else readers arrived)\n", rendezvous_state());
  fprintf(stderr,
          "  waits outside the lock: %lu timed (%lu expired), %lu polls, %lu untimed, %lu on a "
          "var another thread waited on\n",
          atomic_load(&g_count.waits_timed), atomic_load(&g_count.waits_expired),
          atomic_load(&g_count.waits_polled), atomic_load(&g_count.waits_untimed),
          atomic_load(&g_count.waits_shared));
  fprintf(stderr, "  mismatches so far %lu, api errors %lu\n", atomic_load(&g_count.mismatches),
          atomic_load(&g_count.api_errors));
  pushers_dump(stderr);
}

static ordo_engine* create_engine(const stress_options* o) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = o->kind;
  cfg.cpu_threads = o->threads;
  ordo_engine* e = NULL;
  ordo_status st = ordo_engine_create(&cfg, &e);
  if (st != ORDO_OK) {
    fprintf(stderr, "ordo_stress: ordo_engine_create: %s (%s)\n", ordo_status_string(st),
            ordo_last_error_message());
    return NULL;
  }
  return e;
}

/* ---- between rounds (pushers parked, so the model is stable) ---- */

static void check_wait_for_all(void) {
  atomic_store(&g_main_state, MS_WAIT_ALL);
  ordo_status st = ordo_wait_for_all(g_engine);
  ordo_status want = g_model.failures_since_wait_all ? ORDO_ERR_OP_FAILED : ORDO_OK;
  g_wait_all_predicted[want == ORDO_ERR_OP_FAILED]++;
  if (st != want) {
    stress_mismatch("ordo_wait_for_all returned %s, model says %s (%lu failed or skipped ops)",
                    ordo_status_string(st), ordo_status_string(want),
                    g_model.failures_since_wait_all);
  }
  g_model.failures_since_wait_all = 0;
  /* the failure record was cleared by that wait, and nothing failed since */
  st = ordo_wait_for_all(g_engine);
  if (st != ORDO_OK) {
    stress_mismatch("a second ordo_wait_for_all returned %s, expected ORDO_OK",
                    ordo_status_string(st));
  }
  stress_count_checks(2);
}

static void check_counts(void) {
  unsigned long finished = atomic_load(&g_count.finished), ran = atomic_load(&g_count.ran);
  if (finished != g_model.next_seq) {
    stress_mismatch("%lu free_fn calls after %llu pushes", finished,
                    (unsigned long long)g_model.next_seq);
  }
  if (ran != g_model.pred_runs) {
    stress_mismatch("%lu ops ran, model says %lu", ran, g_model.pred_runs);
  }
  unsigned long deferred = atomic_load(&g_count.deferred);
  unsigned long completed =
      atomic_load(&g_count.completed_by_completer) + atomic_load(&g_count.completed_inline);
  if (deferred != completed || completer_queue_depth() != 0) {
    stress_mismatch("%lu ops deferred, %lu completed, %lu still queued", deferred, completed,
                    completer_queue_depth());
  }
  unsigned long met = atomic_load(&g_count.rendezvous_met);
  if (met != 2 * g_model.rendezvous_pairs) {
    stress_mismatch("%lu rendezvous readers met their partner, expected %lu", met,
                    2 * g_model.rendezvous_pairs);
  }
  stress_count_checks(4);
}

/* Some errors survive into the next round (readers then meet poisoned vars), some are cleared. */
static void clear_some_errors(uint64_t* rng) {
  for (int s = 0; s < g_model.nslots; s++) {
    if (g_model.slot[s]->poisoned && rng_below(rng, 2) == 0) model_clear(s);
  }
}

/* Readers alone never poison a var: give a readers-only round some errors to be skipped for. */
static void poison_some_vars(uint64_t* rng) {
  for (int k = 0; k < 1 + g_model.nslots / 32; k++) {
    int slot = (int)rng_below(rng, (uint32_t)g_model.nslots);
    push_failing_op_locked(slot, FAIL_BASE + (int32_t)rng_below(rng, FAIL_CODES));
  }
}

/* Rounds cycle: mixed, clean, mixed, readers-only. */
static round_kind kind_of_round(uint64_t round) {
  static const round_kind cycle[] = {ROUND_MIXED, ROUND_CLEAN, ROUND_MIXED, ROUND_READERS};
  return cycle[round % 4];
}

static void clear_all_errors(void) {
  for (int s = 0; s < g_model.nslots; s++) {
    if (g_model.slot[s]->poisoned) model_clear(s);
  }
}

/* The errors the next round starts with. */
static void prepare_round(round_kind next, uint64_t* rng) {
  if (next == ROUND_CLEAN) {
    clear_all_errors();
    return;
  }
  clear_some_errors(rng);
  if (next == ROUND_READERS) poison_some_vars(rng);
}

static void check_round(uint64_t round, int last, uint64_t* rng) {
  pthread_mutex_lock(&g_model.mu);
  check_wait_for_all();
  if (kind_of_round(round) == ROUND_CLEAN) {
    /* OK above; now one failing op that touches no var: the next wait must report it */
    push_failing_op_locked(-1, FAIL_BASE);
    check_wait_for_all();
  }
  atomic_store(&g_main_state, MS_CHECKING);
  check_counts();
  model_check_quiescent();
  model_check_idle_polls();
  if (!last) prepare_round(kind_of_round(round + 1), rng);
  pthread_mutex_unlock(&g_model.mu);
}

/* ---- the run ---- */

static void print_progress(uint64_t done, uint64_t total, uint64_t t0_ns) {
  double s = (double)(tu_now_ns() - t0_ns) / 1e9;
  printf("ordo_stress: round %lu: %llu/%llu ops, %.1f s, %.0f ops/s, skipped %lu, mismatches %lu\n",
         atomic_load(&g_round), (unsigned long long)done, (unsigned long long)total, s,
         (double)done / s, g_model.pred_skips,
         atomic_load(&g_count.mismatches) + atomic_load(&g_count.api_errors));
  fflush(stdout);
}

static void run_rounds(const stress_options* o, uint64_t* rng) {
  uint64_t rounds = (o->ops + o->round_ops - 1) / o->round_ops;
  uint64_t print_every = rounds > 20 ? rounds / 20 : 1;
  uint64_t t0 = tu_now_ns();
  for (uint64_t r = 0, done = 0; done < o->ops; r++) {
    uint64_t end = done + o->round_ops < o->ops ? done + o->round_ops : o->ops;
    g_plan.end = end;
    g_plan.kind = kind_of_round(r);
    g_plan.rendezvous_due = g_plan.kind == ROUND_READERS;
    g_rounds_of_kind[g_plan.kind]++;
    atomic_store(&g_round, r);
    atomic_store(&g_main_state, MS_ROUND);
    pushers_run_round();
    check_round(r, end == o->ops, rng);
    done = end;
    if ((r + 1) % print_every == 0 || done == o->ops) print_progress(done, o->ops, t0);
  }
}

/* One thing the run claims to exercise, and how often it happened. */
typedef struct claim {
  const char* what;
  unsigned long n;
  int claimed; /* 0: this configuration cannot do it (said in the summary instead) */
} claim;

/* The run must have exercised what it claims to check: a claim with no occurrence fails it. */
static unsigned long coverage_gaps(const stress_options* o, const pusher_totals* t) {
  if (o->ops < 100000) return 0; /* too short to promise anything */
  int waiters = o->waiters > 0;  /* polls, untimed waits, ...: pushers only do timed ones */
  const claim need[] = {
      {"failed ops", g_model.pred_fails, 1},
      {"skipped ops", g_model.pred_skips, 1},
      {"deferred ops", atomic_load(&g_count.deferred), 1},
      {"deferred ops completed by completer threads", atomic_load(&g_count.completed_by_completer),
       1},
      {"deferred ops completed inside their callback", atomic_load(&g_count.completed_inline), 1},
      {"clears", g_model.clears, 1},
      {"deletes", g_model.deletes, 1},
      {"ordered waits", g_model.var_waits, 1},
      {"dead-handle probes", t->dead_probes, 1},
      {"ordo_wait_for_all predicted ORDO_OK", g_wait_all_predicted[0], 1},
      {"ordo_wait_for_all predicted ORDO_ERR_OP_FAILED", g_wait_all_predicted[1], 1},
      {"mixed rounds", g_rounds_of_kind[ROUND_MIXED], 1},
      {"clean rounds", g_rounds_of_kind[ROUND_CLEAN], 1},
      {"readers-only rounds", g_rounds_of_kind[ROUND_READERS], 1},
      {"readers overlapping", atomic_load(&g_count.reader_overlaps), 1},
      {"rendezvous pairs met", atomic_load(&g_count.rendezvous_met) / 2, g_plan.rendezvous_ok},
      {"timed waits that expired", atomic_load(&g_count.waits_expired), 1},
      {"timed waits that expired while a deferred op held the var",
       atomic_load(&g_count.waits_expired_on_deferred), 1},
      {"waits that returned once a completer completed the op holding the var",
       atomic_load(&g_count.waits_done_on_deferred), waiters},
      {"waits checked exactly against the model", atomic_load(&g_count.waits_exact), waiters},
      {"polls (timed waits of 0 ns)", atomic_load(&g_count.waits_polled), waiters},
      {"untimed waits outside the lock", atomic_load(&g_count.waits_untimed), waiters},
      {"waits on a var another thread was waiting on", atomic_load(&g_count.waits_shared), waiters},
  };
  unsigned long gaps = 0;
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    if (need[i].claimed && need[i].n == 0) {
      fprintf(stderr, "ordo_stress: COVERAGE: no %s in %llu ops\n", need[i].what,
              (unsigned long long)o->ops);
      gaps++;
    }
  }
  return gaps;
}

static void print_summary(const stress_options* o, const pusher_totals* t, double secs) {
  printf(
      "ordo_stress: kind=%s threads=%d pushers=%d vars=%d completers=%d waiters=%d "
      "round=%llu seed=%llu\n",
      stress_kind_name(o->kind), o->threads, o->pushers, o->vars, o->completers, o->waiters,
      (unsigned long long)o->round_ops, (unsigned long long)o->seed);
  unsigned long pushed = (unsigned long)g_model.next_seq; /* pushers' and main's */
  printf("  ops:         %lu pushed in %.2f s = %.0f ops/s (%lu rounds)\n", pushed, secs,
         (double)pushed / secs, atomic_load(&g_round) + 1);
  printf("  checks:      %lu done, mismatches = %lu, api errors = %lu\n",
         atomic_load(&g_count.checks), atomic_load(&g_count.mismatches),
         atomic_load(&g_count.api_errors));
  printf("  runs:        %lu ran, %lu skipped (model: %lu ran, %lu skipped)\n",
         atomic_load(&g_count.ran), pushed - atomic_load(&g_count.ran), g_model.pred_runs,
         g_model.pred_skips);
  printf("  failures:    %lu ops failed (model: %lu)\n", atomic_load(&g_count.failed_runs),
         g_model.pred_fails);
  printf("  async:       %lu deferred: %lu completed by completer threads, %lu inline\n",
         atomic_load(&g_count.deferred), atomic_load(&g_count.completed_by_completer),
         atomic_load(&g_count.completed_inline));
  printf("  wait_all:    %lu round-end waits predicted ORDO_OK, %lu ORDO_ERR_OP_FAILED\n",
         g_wait_all_predicted[0], g_wait_all_predicted[1]);
  printf("  vars:        %lu clears, %lu deletes, %lu ordered waits, %lu dead-handle probes\n",
         g_model.clears, g_model.deletes, g_model.var_waits, t->dead_probes);
  printf("  rounds:      %lu mixed, %lu clean, %lu readers-only\n", g_rounds_of_kind[ROUND_MIXED],
         g_rounds_of_kind[ROUND_CLEAN], g_rounds_of_kind[ROUND_READERS]);
  printf("  readers:     %lu overlaps seen (max %d at once), ",
         atomic_load(&g_count.reader_overlaps), atomic_load(&g_count.max_readers_seen));
  if (g_plan.rendezvous_ok) {
    printf("%lu rendezvous pairs met\n", atomic_load(&g_count.rendezvous_met) / 2);
  } else {
    printf("no rendezvous pairs (readers cannot meet: naive, pushers help, or 1 worker)\n");
  }
  printf(
      "  waits:       %lu timed: %lu expired (%lu while a deferred op held the var); %lu polls: "
      "%lu timed out; %lu untimed (%d waiter threads)\n",
      atomic_load(&g_count.waits_timed), atomic_load(&g_count.waits_expired),
      atomic_load(&g_count.waits_expired_on_deferred), atomic_load(&g_count.waits_polled),
      atomic_load(&g_count.waits_poll_timeouts), atomic_load(&g_count.waits_untimed), o->waiters);
  printf(
      "               %lu began beside another wait on the var, %lu returned once a completer "
      "completed the op holding it; checked: %lu exactly, %lu for a lower bound, %lu found the "
      "var deleted\n",
      atomic_load(&g_count.waits_shared), atomic_load(&g_count.waits_done_on_deferred),
      atomic_load(&g_count.waits_exact), atomic_load(&g_count.waits_bounded),
      atomic_load(&g_count.waits_on_deleted));
}

static void shut_down(void) {
  atomic_store(&g_main_state, MS_SHUTDOWN);
  completers_stop();
  stress_expect_status(ordo_engine_destroy(g_engine), ORDO_OK, "ordo_engine_destroy");
  g_engine = NULL;
  model_release_slots();
  /* every op dropped its references in its free_fn, exactly once */
  if (cells_alive() != 0) stress_mismatch("%ld var cells still referenced", cells_alive());
}

/* Whether two readers that one pusher pushes in a row can always meet (SPEC §2.2): not on the
 * naive engine (each op runs inside its push), nor with ORDO_ENGINE_FLAG_PUSHERS_HELP (a
 * throttled push may run the first reader on the pushing thread, which then never pushes the
 * second: the flag's documented trade). */
static int readers_can_meet(const stress_options* o) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  stress_expect_status(ordo_engine_get_config(g_engine, &cfg), ORDO_OK, "ordo_engine_get_config");
  return o->threads >= 2 && o->kind != ORDO_ENGINE_NAIVE &&
         (cfg.flags & ORDO_ENGINE_FLAG_PUSHERS_HELP) == 0;
}

int main(int argc, char** argv) {
  stress_options o;
  int rc = stress_parse_options(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc; /* --help: 0 */
  setvbuf(stdout, NULL, _IOLBF, 0);
  g_engine = create_engine(&o);
  if (!g_engine || model_init(o.vars) != 0) return 1;
  g_plan.rendezvous_ok = readers_can_meet(&o);
  if (completers_start(o.completers, o.seed) || watchdog_start(o.watchdog_s, dump_state) ||
      pushers_start(o.pushers, o.waiters, o.seed)) {
    fprintf(stderr, "ordo_stress: cannot start threads\n");
    return 1;
  }
  uint64_t rng = rng_seed(o.seed, 999);
  uint64_t t0 = tu_now_ns();
  run_rounds(&o, &rng);
  pusher_totals totals;
  pushers_finish(&totals);
  double secs = (double)(tu_now_ns() - t0) / 1e9;
  shut_down();
  watchdog_stop();
  print_summary(&o, &totals, secs);
  unsigned long bad = atomic_load(&g_count.mismatches) + atomic_load(&g_count.api_errors) +
                      coverage_gaps(&o, &totals);
  printf("ordo_stress: %s\n", bad ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
