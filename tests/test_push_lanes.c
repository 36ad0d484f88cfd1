/* Pushing threads that come and go: each non-worker thread gets a private push lane per
 * engine (64 per engine, then a shared fallback), given back when the thread exits or when its
 * small lane cache evicts it. These tests check that no push is lost on any of those paths and
 * that a thread outliving an engine does not touch it. */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "test_util.h"

TestSuite(push_lanes, .timeout = 60.0);

static ordo_engine* make_engine(void) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_PER_DEVICE, 2, &e), ORDO_OK, "%s",
               ordo_last_error_message());
  return e;
}

static int32_t bump(ordo_exec* x, void* ud) {
  (void)x;
  atomic_fetch_add((atomic_long*)ud, 1);
  return 0;
}

typedef struct {
  ordo_engine* e;
  ordo_var shared;
  atomic_long* counter;
  int ops;
  atomic_int* failures;
  atomic_int* ready;
  int wait_for;
} pusher_args;

static void* pusher(void* p) {
  pusher_args* a = p;
  if (a->ready) { /* start together, so that all threads hold a lane at once */
    atomic_fetch_add(a->ready, 1);
    while (atomic_load(a->ready) < a->wait_for) sched_yield();
  }
  ordo_var own;
  if (ordo_var_new(a->e, &own) != ORDO_OK) {
    atomic_fetch_add(a->failures, 1);
    return NULL;
  }
  for (int i = 0; i < a->ops; ++i) {
    ordo_var mut[2] = {own, a->shared};
    /* Every 8th op also mutates the shared var, so threads' ops interleave on it. */
    size_t nm = (i % 8 == 0) ? 2 : 1;
    if (ordo_opr_push(a->e, bump, a->counter, NULL, 0, mut, nm, NULL) != ORDO_OK) {
      atomic_fetch_add(a->failures, 1);
    }
  }
  return NULL;
}

Test(push_lanes, short_lived_threads_one_after_another) {
  ordo_engine* e = make_engine();
  ordo_var shared;
  cr_assert_eq(ordo_var_new(e, &shared), ORDO_OK);
  atomic_long counter = 0;
  atomic_int failures = 0;
  const int threads = 300, ops = 100;
  for (int t = 0; t < threads; ++t) {
    pusher_args a = {e, shared, &counter, ops, &failures, NULL, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, pusher, &a), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
  }
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(atomic_load(&failures), 0);
  cr_assert_eq(atomic_load(&counter), (long)threads * ops);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(push_lanes, more_concurrent_threads_than_lanes) {
  ordo_engine* e = make_engine();
  ordo_var shared;
  cr_assert_eq(ordo_var_new(e, &shared), ORDO_OK);
  atomic_long counter = 0;
  atomic_int failures = 0, ready = 0;
  enum { kThreads = 96, kOps = 300 }; /* more than the 64 lanes: some use the shared lane */
  pusher_args args[kThreads];
  pthread_t th[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    args[t] = (pusher_args){e, shared, &counter, kOps, &failures, &ready, kThreads};
    cr_assert_eq(pthread_create(&th[t], NULL, pusher, &args[t]), 0);
  }
  for (int t = 0; t < kThreads; ++t) cr_assert_eq(pthread_join(th[t], NULL), 0);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(atomic_load(&failures), 0);
  cr_assert_eq(atomic_load(&counter), (long)kThreads * kOps);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* A thread pushes to engine A, A is destroyed, the thread pushes to B, then exits: giving its
 * lanes back must skip the dead engine and still work for the live one. */
typedef struct {
  ordo_engine* first;
  ordo_engine* _Atomic second;
  atomic_int stage;
  atomic_long counter;
  atomic_int failures;
} outlive_ctx;

static void* outlive_thread(void* p) {
  outlive_ctx* c = p;
  ordo_var v;
  if (ordo_var_new(c->first, &v) != ORDO_OK ||
      ordo_opr_push(c->first, bump, &c->counter, NULL, 0, &v, 1, NULL) != ORDO_OK) {
    atomic_fetch_add(&c->failures, 1);
  }
  atomic_store(&c->stage, 1);
  while (atomic_load(&c->stage) != 2) sched_yield();
  ordo_engine* b = atomic_load(&c->second);
  if (ordo_var_new(b, &v) != ORDO_OK ||
      ordo_opr_push(b, bump, &c->counter, NULL, 0, &v, 1, NULL) != ORDO_OK) {
    atomic_fetch_add(&c->failures, 1);
  }
  return NULL;
}

Test(push_lanes, thread_outlives_an_engine) {
  outlive_ctx c;
  c.first = make_engine();
  atomic_init(&c.second, NULL);
  atomic_init(&c.stage, 0);
  atomic_init(&c.counter, 0);
  atomic_init(&c.failures, 0);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, outlive_thread, &c), 0);
  while (atomic_load(&c.stage) != 1) sched_yield();
  cr_assert_eq(ordo_engine_destroy(c.first), ORDO_OK);
  ordo_engine* b = make_engine();
  atomic_store(&c.second, b);
  atomic_store(&c.stage, 2);
  cr_assert_eq(pthread_join(th, NULL), 0); /* its lane cache is released here */
  cr_assert_eq(ordo_wait_for_all(b), ORDO_OK);
  cr_assert_eq(atomic_load(&c.failures), 0);
  cr_assert_eq(atomic_load(&c.counter), 2);
  cr_assert_eq(ordo_engine_destroy(b), ORDO_OK);
}

/* One thread rotating through more engines than its lane cache holds: evicted lanes are given
 * back and claimed again, round after round, and every push still runs. */
Test(push_lanes, one_thread_rotating_through_many_engines) {
  enum { kEngines = 7, kRounds = 300 };
  ordo_engine* e[kEngines];
  ordo_var v[kEngines];
  atomic_long counter = 0;
  for (int i = 0; i < kEngines; ++i) {
    e[i] = make_engine();
    cr_assert_eq(ordo_var_new(e[i], &v[i]), ORDO_OK);
  }
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kEngines; ++i) {
      cr_assert_eq(ordo_opr_push(e[i], bump, &counter, NULL, 0, &v[i], 1, NULL), ORDO_OK,
                   "round %d engine %d: %s", r, i, ordo_last_error_message());
    }
  }
  for (int i = 0; i < kEngines; ++i) {
    cr_assert_eq(ordo_wait_for_all(e[i]), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(e[i]), ORDO_OK);
  }
  cr_assert_eq(atomic_load(&counter), (long)kEngines * kRounds);
}

/* A pushing thread that runs ops itself (ORDO_ENGINE_FLAG_PUSHERS_HELP) counts their completions
 * on its lane and returns their blocks to its magazine. When such an op pushes to as many other
 * engines as the lane cache holds, the cache must not evict (and give back) the lane the helper
 * below it is still using: another thread would claim it and share its magazine. Two threads
 * both help, each rotating through 5 engines so every lane lookup misses; the engine's workers
 * are held by gates so that only the pushers run its ops. Checked by the counts here, and by
 * TSan in the sanitizer run (a shared magazine is a data race). */
enum { kHelpEngines = 4, kHelpOps = 3000 };

typedef struct {
  ordo_engine* helped;               /* the engine whose ops the pushers run */
  ordo_engine* others[kHelpEngines]; /* naive engines the pushers' ops push to */
  ordo_var other_vars[kHelpEngines];
  atomic_long ran;    /* ops of `helped` run */
  atomic_long nested; /* ops on the other engines run */
  atomic_int failures;
} help_evict_ctx;

static int32_t nested_bump(ordo_exec* x, void* ud) {
  (void)x;
  atomic_fetch_add(&((help_evict_ctx*)ud)->nested, 1);
  return 0;
}

/* Runs on a helping pusher: each push to another engine is a lane-cache miss there. */
static int32_t push_to_others(ordo_exec* x, void* ud) {
  (void)x;
  help_evict_ctx* c = ud;
  for (int i = 0; i < kHelpEngines; ++i) {
    if (ordo_opr_push(c->others[i], nested_bump, c, NULL, 0, &c->other_vars[i], 1, NULL) !=
        ORDO_OK) {
      atomic_fetch_add(&c->failures, 1);
    }
  }
  atomic_fetch_add(&c->ran, 1);
  return 0;
}

static void* helping_pusher(void* p) {
  help_evict_ctx* c = p;
  ordo_var own[8];
  for (int i = 0; i < 8; ++i) {
    if (ordo_var_new(c->helped, &own[i]) != ORDO_OK) atomic_fetch_add(&c->failures, 1);
  }
  for (int i = 0; i < kHelpOps; ++i) {
    if (ordo_opr_push(c->helped, push_to_others, c, NULL, 0, &own[i % 8], 1, NULL) != ORDO_OK) {
      atomic_fetch_add(&c->failures, 1);
    }
  }
  return NULL;
}

Test(push_lanes, a_helping_pusher_keeps_its_lane_while_its_op_pushes_elsewhere) {
  help_evict_ctx c;
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  cfg.cpu_threads = 2;
  cfg.max_pending = 64; /* the smallest window: checked every 8 pushes */
  cfg.flags = ORDO_ENGINE_FLAG_PUSHERS_HELP;
  cr_assert_eq(ordo_engine_create(&cfg, &c.helped), ORDO_OK, "%s", ordo_last_error_message());
  for (int i = 0; i < kHelpEngines; ++i) {
    cr_assert_eq(tu_engine_create(ORDO_ENGINE_NAIVE, 0, &c.others[i]), ORDO_OK);
    cr_assert_eq(ordo_var_new(c.others[i], &c.other_vars[i]), ORDO_OK);
  }
  atomic_init(&c.ran, 0);
  atomic_init(&c.nested, 0);
  atomic_init(&c.failures, 0);
  tu_gate gate;
  tu_gate_init(&gate);
  ordo_var gate_vars[2];
  for (int i = 0; i < 2; ++i) {
    cr_assert_eq(ordo_var_new(c.helped, &gate_vars[i]), ORDO_OK);
    cr_assert_eq(ordo_opr_push(c.helped, tu_gate_fn, &gate, NULL, 0, &gate_vars[i], 1, NULL),
                 ORDO_OK);
  }
  cr_assert(tu_wait_eq(&gate.in, 2, 10000), "the gate ops did not start");
  pthread_t th[2];
  for (int t = 0; t < 2; ++t) cr_assert_eq(pthread_create(&th[t], NULL, helping_pusher, &c), 0);
  for (int t = 0; t < 2; ++t) cr_assert_eq(pthread_join(th[t], NULL), 0);
  atomic_store(&gate.open, 1);
  cr_assert_eq(ordo_wait_for_all(c.helped), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(atomic_load(&c.failures), 0);
  cr_assert_eq(atomic_load(&c.ran), 2L * kHelpOps);
  cr_assert_eq(atomic_load(&c.nested), 2L * kHelpOps * kHelpEngines);
  ordo_stats st = {.struct_size = sizeof st};
  cr_assert_eq(ordo_engine_stats(c.helped, &st), ORDO_OK);
  cr_assert_eq(st.pending, 0, "pending %llu after wait_for_all", (unsigned long long)st.pending);
  cr_assert_eq(st.completed, 2 + 2ull * kHelpOps);
  cr_assert_eq(ordo_engine_destroy(c.helped), ORDO_OK);
  for (int i = 0; i < kHelpEngines; ++i) cr_assert_eq(ordo_engine_destroy(c.others[i]), ORDO_OK);
}
