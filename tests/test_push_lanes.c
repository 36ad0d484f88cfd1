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

/* Runs on a helping pusher: each push to another engine is a lane-cache miss there. */
static int32_t push_to_others(ordo_exec* x, void* ud) {
  (void)x;
  help_evict_ctx* c = ud;
  for (int i = 0; i < kHelpEngines; ++i) {
    if (ordo_opr_push(c->others[i], bump, &c->nested, NULL, 0, &c->other_vars[i], 1, NULL) !=
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

/* A pthread key destructor runs after the thread's C++ thread_locals are destroyed, so after
 * the thread has given its lanes back; a push from there must not use the lane it gave back
 * (another thread may own it now: two writers on one magazine) nor claim one that nothing would
 * give back. Thread A pushes from its key destructor while thread B, which claimed a lane just
 * after A gave its lane back, pushes too: every op runs once and the counts add up. */
enum { kExitOps = 50000 };

typedef struct {
  ordo_engine* e;
  atomic_long ran;
  atomic_int failures;
  atomic_int a_exiting; /* A's key destructor has started */
  atomic_int b_has_lane;
} exit_ctx;

static exit_ctx g_exit;
static pthread_key_t g_exit_key;

static void push_many(exit_ctx* c) {
  for (int i = 0; i < kExitOps; ++i) {
    if (ordo_opr_push(c->e, bump, &c->ran, NULL, 0, NULL, 0, NULL) != ORDO_OK) {
      atomic_fetch_add(&c->failures, 1);
    }
  }
}

static void exit_key_destructor(void* p) {
  exit_ctx* c = p;
  atomic_store(&c->a_exiting, 1);
  tu_wait_eq(&c->b_has_lane, 1, 10000);
  push_many(c);
}

static void* exiting_thread(void* p) {
  exit_ctx* c = p;
  pthread_setspecific(g_exit_key, c);
  if (ordo_opr_push(c->e, bump, &c->ran, NULL, 0, NULL, 0, NULL) != ORDO_OK) {
    atomic_fetch_add(&c->failures, 1);
  }
  return NULL;
}

static void* lane_taker(void* p) {
  exit_ctx* c = p;
  if (ordo_opr_push(c->e, bump, &c->ran, NULL, 0, NULL, 0, NULL) != ORDO_OK) {
    atomic_fetch_add(&c->failures, 1);
  }
  atomic_store(&c->b_has_lane, 1);
  push_many(c);
  return NULL;
}

Test(push_lanes, pushes_from_a_key_destructor_after_the_lanes_are_given_back) {
  exit_ctx* c = &g_exit;
  c->e = make_engine();
  atomic_init(&c->ran, 0);
  atomic_init(&c->failures, 0);
  atomic_init(&c->a_exiting, 0);
  atomic_init(&c->b_has_lane, 0);
  cr_assert_eq(pthread_key_create(&g_exit_key, exit_key_destructor), 0);
  pthread_t a, b;
  cr_assert_eq(pthread_create(&a, NULL, exiting_thread, c), 0);
  cr_assert(tu_wait_eq(&c->a_exiting, 1, 10000), "the key destructor did not run");
  cr_assert_eq(pthread_create(&b, NULL, lane_taker, c), 0);
  cr_assert_eq(pthread_join(b, NULL), 0);
  cr_assert_eq(pthread_join(a, NULL), 0);
  cr_assert_eq(ordo_wait_for_all_timeout(c->e, 10000000000ull), ORDO_OK, "%s",
               ordo_last_error_message());
  cr_assert_eq(atomic_load(&c->failures), 0);
  cr_assert_eq(atomic_load(&c->ran), 2L * kExitOps + 2);
  ordo_stats st = {.struct_size = sizeof st};
  cr_assert_eq(ordo_engine_stats(c->e, &st), ORDO_OK);
  cr_assert_eq(st.pushed, 2ull * kExitOps + 2);
  cr_assert_eq(st.pending, 0);
  cr_assert_eq(ordo_engine_destroy(c->e), ORDO_OK);
  pthread_key_delete(g_exit_key);
}

/* Lanes are not lost to exiting threads: 70 threads (more than the 64 lanes) each push from a
 * key destructor after their lane cache is gone. A fresh thread must still get a lane of its
 * own, which shows as ORDO_ENGINE_FLAG_PUSHERS_HELP working for it (a thread on the shared lane
 * never helps): with both workers held by gates, ops run on the pushing thread. */
static ordo_engine* g_leak_engine;
static ordo_engine* g_leak_other;
static pthread_key_t g_leak_key;
static atomic_int g_on_pusher;

static int32_t count_if_on_pusher(ordo_exec* x, void* ud) {
  (void)ud;
  ordo_exec_info info = {.struct_size = sizeof info};
  if (ordo_exec_get_info(x, &info) == ORDO_OK && info.worker_index == -1) {
    atomic_fetch_add(&g_on_pusher, 1);
  }
  return 0;
}

static int32_t nothing(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  return 0;
}

static void leak_key_destructor(void* p) {
  (void)p;
  ordo_opr_push(g_leak_engine, nothing, NULL, NULL, 0, NULL, 0, NULL);
}

static void* exits_after_pushing(void* p) {
  (void)p;
  pthread_setspecific(g_leak_key, (void*)1);
  ordo_opr_push(g_leak_other, nothing, NULL, NULL, 0, NULL, 0, NULL); /* its lane cache lives */
  return NULL;
}

static void* helping_thread(void* p) {
  (void)p;
  for (int i = 0; i < 200; ++i) {
    ordo_opr_push(g_leak_engine, count_if_on_pusher, NULL, NULL, 0, NULL, 0, NULL);
  }
  return NULL;
}

/* A thread whose first push is in a key destructor: glibc has already run its thread_local
 * destructors, so the lane it claims there must be given back some other way. */
static void* exits_without_pushing(void* p) {
  (void)p;
  pthread_setspecific(g_leak_key, (void*)1);
  return NULL;
}

/* 70 threads run `thread_fn` and exit through leak_key_destructor, then a fresh thread must
 * still get a lane of its own (see above). */
static void check_exiting_threads_keep_no_lane(void* (*thread_fn)(void*)) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_POOLED;
  cfg.cpu_threads = 2;
  cfg.max_pending = 64;
  cfg.flags = ORDO_ENGINE_FLAG_PUSHERS_HELP;
  cr_assert_eq(ordo_engine_create(&cfg, &g_leak_engine), ORDO_OK);
  cr_assert_eq(tu_engine_create(ORDO_ENGINE_NAIVE, 0, &g_leak_other), ORDO_OK);
  cr_assert_eq(pthread_key_create(&g_leak_key, leak_key_destructor), 0);
  pthread_t t;
  for (int i = 0; i < 70; ++i) {
    cr_assert_eq(pthread_create(&t, NULL, thread_fn, NULL), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
  }
  tu_gate gate;
  tu_gate_init(&gate);
  ordo_var gate_vars[2];
  for (int i = 0; i < 2; ++i) {
    cr_assert_eq(ordo_var_new(g_leak_engine, &gate_vars[i]), ORDO_OK);
    cr_assert_eq(ordo_opr_push(g_leak_engine, tu_gate_fn, &gate, NULL, 0, &gate_vars[i], 1, NULL),
                 ORDO_OK);
  }
  cr_assert(tu_wait_eq(&gate.in, 2, 10000), "the gate ops did not start");
  atomic_store(&g_on_pusher, 0);
  cr_assert_eq(pthread_create(&t, NULL, helping_thread, NULL), 0);
  cr_assert_eq(pthread_join(t, NULL), 0);
  atomic_store(&gate.open, 1);
  cr_assert_eq(ordo_wait_for_all(g_leak_engine), ORDO_OK);
  cr_assert_gt(atomic_load(&g_on_pusher), 0,
               "no op ran on the pushing thread: it found every lane taken by exited threads");
  cr_assert_eq(ordo_engine_destroy(g_leak_engine), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(g_leak_other), ORDO_OK);
  pthread_key_delete(g_leak_key);
}

Test(push_lanes, threads_exiting_through_key_destructors_keep_no_lane) {
  check_exiting_threads_keep_no_lane(exits_after_pushing);
}

Test(push_lanes, threads_first_pushing_from_a_key_destructor_keep_no_lane) {
  check_exiting_threads_keep_no_lane(exits_without_pushing);
}
