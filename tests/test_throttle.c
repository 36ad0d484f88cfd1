/*
 * Waiting threads are woken when what they wait for holds, not on every batch of completions.
 *
 * A push that finds max_pending ops pending sleeps until half the window has drained, and
 * ordo_wait_for_all sleeps until nothing is pending. Workers announce completions in batches
 * of 64; waking the sleeper on each batch made it wake, find its condition false and sleep
 * again up to max_pending / 128 times per wait (and cost a futex wake on a worker each time).
 *
 * The tests count the waiting thread's voluntary context switches (getrusage RUSAGE_THREAD:
 * one per sleep that blocked), which is what each needless wake-up costs it. The bounds leave
 * several times the expected count, so a slow or loaded machine stays inside them, and sit
 * well below what waking on every batch costs.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

#include "test_util.h"

TestSuite(throttle, .timeout = 120.0);

#define ST(expr, want) TU_ASSERT_ST(expr, want, "throttle")

enum {
  kWindow = 2048,       /* max_pending: a throttled push sleeps until 1024 remain */
  kThrottledOps = 24000 /* about 23 windows of half a window each */
};

/* About 1 us of work: half a window drains in about 0.5 ms on 2 workers, inside the 1 ms that
 * bounds a throttle wait (a wait that bound ends early only lowers the count). */
static int32_t spin_1us(ordo_exec* exec, void* user_data) {
  (void)exec;
  atomic_int* ran = user_data;
  uint64_t until = tu_now_ns() + 1000;
  while (tu_now_ns() < until) {
  }
  atomic_fetch_add(ran, 1);
  return 0;
}

/* Valgrind parks every thread but one in the kernel: there the counts say nothing. */
static void skip_counts_under_valgrind(long slept) {
  if (tu_under_valgrind()) {
    cr_skip_test(
        "every op ran; the %ld sleeps are not checked under valgrind, which parks "
        "all threads but one",
        slept);
  }
}

static long voluntary_switches(void) {
  struct rusage u;
  cr_assert_eq(getrusage(RUSAGE_THREAD, &u), 0);
  return u.ru_nvcsw;
}

static ordo_engine* make_engine(int32_t max_pending) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.cpu_threads = 2;
  cfg.max_pending = max_pending;
  ordo_engine* e = NULL;
  ST(ordo_engine_create(&cfg, &e), ORDO_OK);
  return e;
}

Test(throttle, a_throttled_push_sleeps_about_once_per_wait) {
  ordo_engine* e = make_engine(kWindow);
  ordo_var v[64];
  for (int i = 0; i < 64; i++) ST(ordo_var_new(e, &v[i]), ORDO_OK);
  atomic_int ran;
  atomic_init(&ran, 0);
  long before = voluntary_switches();
  for (int i = 0; i < kThrottledOps; i++) {
    ST(ordo_opr_push(e, spin_1us, &ran, NULL, 0, &v[i % 64], 1, NULL), ORDO_OK);
  }
  long slept = voluntary_switches() - before;
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&ran), kThrottledOps);
  skip_counts_under_valgrind(slept);
  /* Each wait ends once 1,024 ops have drained (or after 1 ms): about one sleep per 1,024
   * pushes, 23 in all. Woken on every batch of 64 it slept about 16 times per wait (~370). */
  const long waits = kThrottledOps / (kWindow / 2);
  cr_assert_leq(slept, 4 * waits,
                "the pushing thread slept %ld times for %d pushes (about %ld "
                "throttle waits): woken before the window had drained",
                slept, kThrottledOps, waits);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(throttle, wait_for_all_sleeps_about_once) {
  ordo_engine* e = make_engine(-1); /* no throttle: every op is pending when the wait starts */
  ordo_var v[64];
  for (int i = 0; i < 64; i++) ST(ordo_var_new(e, &v[i]), ORDO_OK);
  atomic_int ran;
  atomic_init(&ran, 0);
  enum { kOps = 12000 }; /* about 6 ms of work on 2 workers: ~190 batches of 64 */
  for (int i = 0; i < kOps; i++) {
    ST(ordo_opr_push(e, spin_1us, &ran, NULL, 0, &v[i % 64], 1, NULL), ORDO_OK);
  }
  long before = voluntary_switches();
  ST(ordo_wait_for_all(e), ORDO_OK);
  long slept = voluntary_switches() - before;
  cr_assert_eq(atomic_load(&ran), kOps);
  skip_counts_under_valgrind(slept);
  cr_assert_leq(slept, 16,
                "ordo_wait_for_all slept %ld times while %d ops drained: woken "
                "before nothing was pending",
                slept, kOps);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* The last two completions of a wait land at the same moment on two threads: a worker finishing
 * an op (counted on its own lane) and another thread calling ordo_complete (counted on the
 * engine's shared count). Whichever announcer sees nothing pending must wake the waiter; if
 * each missed the other's count, ordo_wait_for_all would sleep on (here: time out). */
typedef struct {
  pthread_barrier_t go;
  ordo_completion handle;
  atomic_int gate;   /* the round whose gate op may finish */
  atomic_int inside; /* the round whose gate op is running */
} race;

static race g_race;

static int32_t gate_op(ordo_exec* exec, void* user_data) {
  (void)exec;
  int round = (int)(intptr_t)user_data;
  atomic_store(&g_race.inside, round);
  while (atomic_load(&g_race.gate) < round) {
    sched_yield(); /* 2 cores, and valgrind runs one thread at a time: let the others run */
  }
  return 0;
}

static void* complete_each_round(void* arg) {
  int rounds = (int)(intptr_t)arg;
  for (int r = 1; r <= rounds; ++r) {
    pthread_barrier_wait(&g_race.go); /* the handle is published; go with the gate */
    if (ordo_complete(g_race.handle, 0, NULL) != ORDO_OK) abort(); /* checked by the wait */
  }
  return NULL;
}

Test(throttle, completions_landing_together_on_two_threads_wake_the_waiter) {
  const int kRounds = tu_under_valgrind() ? 30 : 300; /* valgrind: ~100x slower */
  ordo_engine* e = make_engine(0);
  ordo_var v[2];
  for (int i = 0; i < 2; i++) ST(ordo_var_new(e, &v[i]), ORDO_OK);
  atomic_init(&g_race.gate, 0);
  atomic_init(&g_race.inside, 0);
  cr_assert_eq(pthread_barrier_init(&g_race.go, NULL, 2), 0);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, complete_each_round, (void*)(intptr_t)kRounds), 0);
  for (int r = 1; r <= kRounds; ++r) {
    tu_deferred d;
    tu_deferred_init(&d);
    ST(ordo_opr_push(e, gate_op, (void*)(intptr_t)r, NULL, 0, &v[0], 1, NULL), ORDO_OK);
    ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v[1], 1, NULL), ORDO_OK);
    g_race.handle = tu_deferred_wait(&d, 10000);
    cr_assert_neq(g_race.handle, 0, "round %d: the op never deferred", r);
    cr_assert(tu_wait_eq(&g_race.inside, r, 10000), "round %d: the gate op never ran", r);
    pthread_barrier_wait(&g_race.go);
    atomic_store(&g_race.gate, r);
    ST(ordo_wait_for_all_timeout(e, TU_MS_NS(10000)), ORDO_OK);
  }
  pthread_join(t, NULL);
  pthread_barrier_destroy(&g_race.go);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

enum { kSmall = 64, kPushes = 200 };

/* Waits for `gate`, an op holding v, to defer; pushes kPushes writers of v from this thread
 * behind it, so that nothing drains; then completes the gate and checks that every op ran, none
 * before it. A push that finds more than kSmall ops pending sleeps its whole bound (about 1 ms).
 * 1 + i ops are pending at push i: more than the window from push 64 on, and a check every
 * kSmall / 8 = 8 pushes finds it so from push 71 on, 16 times in pushes 72-199; at least 12 of
 * the pushes made past kSmall + kSmall / 8 must have slept. Only lower bounds are checked: on a
 * loaded machine (or under a sanitizer) any push may be slow. `pusher` says who pushed, for the
 * message. */
static void assert_window_held_behind(ordo_engine* e, ordo_var v, tu_deferred* gate,
                                      const char* pusher) {
  ordo_completion c = tu_deferred_wait(gate, 10000);
  cr_assert_neq(c, 0, "the gate op never deferred");
  atomic_int ran;
  atomic_init(&ran, 0);
  int slow = 0, slow_once_full = 0;
  for (int i = 0; i < kPushes; i++) {
    uint64_t t0 = tu_now_ns();
    ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, &v, 1, NULL), ORDO_OK);
    if (tu_now_ns() - t0 >= 500000) {
      ++slow;
      if (i >= kSmall + kSmall / 8) ++slow_once_full;
    }
  }
  cr_assert_eq(atomic_load(&ran), 0, "ops ran behind an uncompleted writer");
  ST(ordo_complete(c, 0, NULL), ORDO_OK);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&ran), kPushes);
  cr_assert(slow_once_full >= 12,
            "%s: %d of the %d pushes made once the window of %d was full slept (%d in all): "
            "the window was not enforced every %d pushes",
            pusher, slow_once_full, kPushes - (kSmall + kSmall / 8), kSmall, slow, kSmall / 8);
}

/* The window is held at every size. Pushes check it every so often, not on every push (the
 * check sums all lanes); with a fixed interval of 256 pushes, a window of 64 let 256 ops pile up
 * before the first check and was never enforced for a caller pushing fewer. Here every op waits
 * behind a deferred one, so nothing drains: each push that finds the window full sleeps its
 * full bound (about 1 ms), and such pushes must start well before the 200th. */
Test(throttle, a_small_window_is_held_within_an_eighth_of_it) {
  ordo_engine* e = make_engine(kSmall);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  tu_deferred gate;
  tu_deferred_init(&gate);
  ST(ordo_opr_push(e, tu_defer_fn, &gate, NULL, 0, &v, 1, NULL), ORDO_OK);
  assert_window_held_behind(e, v, &gate, "a pusher on its own lane");
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* Past 64 pushing threads, the extra ones share one lane under a lock; the window must hold for
 * them too. 64 threads each push once (each keeps its lane while it lives), one of them a
 * deferred op that blocks var v; then this thread, the 65th, pushes behind it. */
enum { kLaneHolders = 64 };

typedef struct {
  ordo_engine* e;
  ordo_var own;
  ordo_var blocked; /* thread 0 pushes the gate on it */
  tu_deferred* gate;
  pthread_barrier_t* pushed;
  pthread_barrier_t* leave;
} lane_holder;

static void* hold_a_lane(void* arg) {
  lane_holder* h = arg;
  static atomic_int holders_ran;
  ordo_status s = h->gate
                      ? ordo_opr_push(h->e, tu_defer_fn, h->gate, NULL, 0, &h->blocked, 1, NULL)
                      : ordo_opr_push(h->e, tu_count_fn, &holders_ran, NULL, 0, &h->own, 1, NULL);
  if (s != ORDO_OK) abort(); /* the main thread's counts would then be off */
  pthread_barrier_wait(h->pushed);
  pthread_barrier_wait(h->leave);
  return NULL;
}

Test(throttle, the_window_holds_for_pushers_past_the_last_lane) {
  ordo_engine* e = make_engine(kSmall);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  tu_deferred gate;
  tu_deferred_init(&gate);
  pthread_barrier_t pushed, leave;
  cr_assert_eq(pthread_barrier_init(&pushed, NULL, kLaneHolders + 1), 0);
  cr_assert_eq(pthread_barrier_init(&leave, NULL, kLaneHolders + 1), 0);
  static lane_holder holders[kLaneHolders];
  pthread_t threads[kLaneHolders];
  for (int i = 0; i < kLaneHolders; i++) {
    holders[i] = (lane_holder){e, 0, v, i == 0 ? &gate : NULL, &pushed, &leave};
    ST(ordo_var_new(e, &holders[i].own), ORDO_OK);
    cr_assert_eq(pthread_create(&threads[i], NULL, hold_a_lane, &holders[i]), 0);
  }
  pthread_barrier_wait(&pushed);
  /* The holders' ops have long finished; the shared lane counts this thread's pushes alone. */
  assert_window_held_behind(e, v, &gate, "a thread past the last lane");
  pthread_barrier_wait(&leave);
  for (int i = 0; i < kLaneHolders; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&pushed);
  pthread_barrier_destroy(&leave);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* Ops slower than the pusher: each takes 0.5 or 3 ms, so 2 workers finish 4 or 0.7 per ms while
 * the pusher could push thousands. A throttle wait that gave up after 1 ms whatever happened let
 * a pusher add max_pending / 8 = 8 ops per ms and the pending count grow without bound (to about
 * 200 of 400 ops with a window of 64); one that gave up after 1 ms without a completion still
 * did so for ops finishing more than 1 ms apart (about 290 of 400 at 2.5 ms). The wait now keeps
 * on while the count falls, for as long as a few completions take. */
static int32_t sleep_op(ordo_exec* exec, void* user_data) {
  (void)exec;
  tu_sleep_us(*(const int*)user_data);
  return 0;
}

static ordo_engine* make_pooled_engine(int32_t workers, int32_t max_pending) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_POOLED;
  cfg.cpu_threads = workers;
  cfg.max_pending = max_pending;
  ordo_engine* e = NULL;
  ST(ordo_engine_create(&cfg, &e), ORDO_OK);
  return e;
}

/* `bound`: the most ops pending at once that passes (the window is kSmall). */
static void window_holds_for_ops_of(int workers, int op_us, int ops, uint64_t bound) {
  ordo_engine* e = make_pooled_engine(workers, kSmall);
  uint64_t most_pending = 0;
  for (int i = 0; i < ops; i++) {
    ST(ordo_opr_push(e, sleep_op, &op_us, NULL, 0, NULL, 0, NULL), ORDO_OK);
    ordo_stats st;
    st.struct_size = sizeof st;
    ST(ordo_engine_stats(e, &st), ORDO_OK);
    if (st.pending > most_pending) most_pending = st.pending;
  }
  ST(ordo_wait_for_all(e), ORDO_OK);
  ordo_stats st;
  st.struct_size = sizeof st;
  ST(ordo_engine_stats(e, &st), ORDO_OK);
  cr_assert_eq(st.completed, (uint64_t)ops);
  /* A window and its eighth, with room for the waits a stalled machine (a sanitizer, a preempted
   * worker) or the first estimate of the pace ends early: well below what no hold gives. */
  cr_assert_leq(most_pending, bound,
                "%llu ops of %d us on %d workers were pending at once with a window of %d",
                (unsigned long long)most_pending, op_us, workers, kSmall);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(throttle, the_window_holds_for_ops_slower_than_the_pusher) {
  window_holds_for_ops_of(2, 500, 400, 2 * kSmall);
  window_holds_for_ops_of(2, 3000, 240, 2 * kSmall);
}

/* Sixteen workers running 10 ms ops finish them in bursts, one burst per op length: a limit of
 * a few *average* intervals between completions (op length / 16) ended the wait between two
 * bursts, and 272-351 ops were pending at once. Until the first burst measures the gap, the
 * pusher still gives up every 1 ms, hence the larger bound (143 measured). */
Test(throttle, the_window_holds_when_completions_come_in_bursts) {
  window_holds_for_ops_of(16, 10000, 800, 3 * kSmall);
}

/* The give-up exists for an op that waits for its own pusher: a limit learned from slow ops must
 * not stay long once nothing completes. Here 12 ms ops on 2 workers, pushed a little faster
 * than they run, teach it (about 25 ms); then an op blocks until the pusher has pushed 400 more
 * ops behind it, each throttled push check (every 8 pushes) waiting for it. With the learned
 * limit kept, those pushes took over a second. */
static int32_t blocked_until_set(ordo_exec* exec, void* user_data) {
  (void)exec;
  tu_wait_eq((atomic_int*)user_data, 1, 60000);
  return 0;
}

static int32_t no_op(ordo_exec* exec, void* user_data) {
  (void)exec;
  (void)user_data;
  return 0;
}

Test(throttle, a_limit_learned_from_slow_ops_does_not_stall_a_blocked_pusher) {
  ordo_engine* e = make_pooled_engine(2, kSmall);
  int slow_us = 12000;
  for (int i = 0; i < 120; i++) {
    ST(ordo_opr_push(e, sleep_op, &slow_us, NULL, 0, NULL, 0, NULL), ORDO_OK);
    tu_sleep_us(1000);
  }
  ST(ordo_wait_for_all(e), ORDO_OK);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  atomic_int go;
  atomic_init(&go, 0);
  ST(ordo_opr_push(e, blocked_until_set, &go, NULL, 0, &v, 1, NULL), ORDO_OK);
  uint64_t t0 = tu_now_ns();
  for (int i = 0; i < 400; i++) ST(ordo_opr_push(e, no_op, NULL, NULL, 0, &v, 1, NULL), ORDO_OK);
  uint64_t took_ms = (tu_now_ns() - t0) / 1000000u;
  atomic_store(&go, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_lt(took_ms, 600, "400 pushes behind a blocked op took %llu ms",
               (unsigned long long)took_ms);
  ST(ordo_engine_destroy(e), ORDO_OK);
}
