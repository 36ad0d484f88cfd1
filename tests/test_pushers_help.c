/*
 * ORDO_ENGINE_FLAG_PUSHERS_HELP: a push held by the submission throttle runs ready ops on the
 * pushing thread. Without the flag no op ever runs there; with it, ops run there behave exactly
 * as on a worker (failures, skips, pushes from inside, waits from inside refused), every op
 * runs once, and the counts add up.
 *
 * Both workers are held by gate ops while the test pushes, so the only thread that can run the
 * other ops before the gates open is the pushing one. Callbacks never assert: they record into
 * atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>

#include "test_util.h"

TestSuite(pushers_help, .timeout = 60.0);

#define ST(expr, want) TU_ASSERT_ST(expr, want, "pushers_help")

enum { kMaxPending = 64, kFillers = 1000, kFromInside = 300 };

static pthread_t g_pusher;

typedef struct {
  tu_gate gate;         /* holds both workers until opened */
  atomic_int ran;       /* filler ops run */
  atomic_int on_pusher; /* filler ops run on the pushing thread */
} help_ctx;

static void help_ctx_init(help_ctx* h) {
  tu_gate_init(&h->gate);
  atomic_init(&h->ran, 0);
  atomic_init(&h->on_pusher, 0);
}

static int on_pusher(void) {
  return pthread_equal(pthread_self(), g_pusher) != 0;
}

static int32_t filler_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  help_ctx* h = ud;
  atomic_fetch_add(&h->ran, 1);
  if (on_pusher()) atomic_fetch_add(&h->on_pusher, 1);
  return 0;
}

static ordo_engine* make_engine_of_kind(int32_t kind, int help) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  cfg.max_pending = kMaxPending;
  cfg.flags = help ? ORDO_ENGINE_FLAG_PUSHERS_HELP : 0;
  ordo_engine* e = NULL;
  ST(ordo_engine_create(&cfg, &e), ORDO_OK);
  return e;
}

static ordo_engine* make_engine(int help) {
  return make_engine_of_kind(ORDO_ENGINE_PER_DEVICE, help);
}

/* Pushes two gate ops and returns once both hold a worker. */
static void close_gates(ordo_engine* e, help_ctx* h) {
  ST(ordo_opr_push(e, tu_gate_fn, &h->gate, NULL, 0, NULL, 0, NULL), ORDO_OK);
  ST(ordo_opr_push(e, tu_gate_fn, &h->gate, NULL, 0, NULL, 0, NULL), ORDO_OK);
  cr_assert(tu_wait_ge(&h->gate.in, 2, 20000), "the two gate ops did not both start");
}

/* An engine of `kind`, helping or not, whose two workers are both held by gate ops (ctx h). */
static ordo_engine* engine_of_kind_with_workers_held(int32_t kind, int help, help_ctx* h) {
  g_pusher = pthread_self();
  ordo_engine* e = make_engine_of_kind(kind, help);
  help_ctx_init(h);
  close_gates(e, h);
  return e;
}

static ordo_engine* engine_with_workers_held(int help, help_ctx* h) {
  return engine_of_kind_with_workers_held(ORDO_ENGINE_PER_DEVICE, help, h);
}

static void push_fillers(ordo_engine* e, help_ctx* h) {
  for (int i = 0; i < kFillers; ++i)
    ST(ordo_opr_push(e, filler_fn, h, NULL, 0, NULL, 0, NULL), ORDO_OK);
}

static void expect_all_counted(ordo_engine* e, uint64_t ops) {
  ordo_stats st;
  st.struct_size = sizeof st;
  ST(ordo_engine_stats(e, &st), ORDO_OK);
  cr_assert_eq(st.pushed, ops, "pushed %llu, want %llu", (unsigned long long)st.pushed,
               (unsigned long long)ops);
  cr_assert_eq(st.completed, ops, "completed %llu, want %llu", (unsigned long long)st.completed,
               (unsigned long long)ops);
  cr_assert_eq(st.pending, 0);
}

Test(pushers_help, a_throttled_pusher_runs_ready_ops_itself) {
  help_ctx h;
  ordo_engine* e = engine_with_workers_held(1, &h);
  push_fillers(e, &h);
  int during = atomic_load(&h.ran);
  atomic_store(&h.gate.open, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&h.ran), kFillers, "%d of %d ops ran", atomic_load(&h.ran), kFillers);
  cr_assert_gt(during, 0, "no op ran while both workers were held: the pusher did not help");
  cr_assert_eq(atomic_load(&h.on_pusher), during,
               "%d ops ran before the gates opened, %d of them on the pushing thread", during,
               atomic_load(&h.on_pusher));
  expect_all_counted(e, kFillers + 2);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(pushers_help, without_the_flag_no_op_runs_on_the_pusher) {
  unsetenv("ORDO_PUSHERS_HELP"); /* it would turn helping on */
  help_ctx h;
  ordo_engine* e = engine_with_workers_held(0, &h);
  push_fillers(e, &h); /* the throttle holds some of these pushes (about 1 ms each) */
  cr_assert_eq(atomic_load(&h.ran), 0, "%d ops ran while both workers were held",
               atomic_load(&h.ran));
  atomic_store(&h.gate.open, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&h.ran), kFillers);
  cr_assert_eq(atomic_load(&h.on_pusher), 0);
  expect_all_counted(e, kFillers + 2);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* ---- ops run by a helping pusher behave as on a worker ---- */

typedef struct {
  ordo_engine* e;
  help_ctx* h;
  atomic_int failer_on_pusher;
  atomic_int skipped_ran;      /* the reader of the failed var ran (it must be skipped) */
  atomic_int inside_pushes_ok; /* pushes made from inside an op that returned ORDO_OK */
  atomic_int inside_ran;       /* ops pushed from inside that ran */
  atomic_int wait_status;      /* what ordo_wait_for_all returned from inside an op */
} inside_ctx;

static int32_t failing_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  inside_ctx* c = ud;
  atomic_store(&c->failer_on_pusher, on_pusher());
  return 7;
}

/* Pushes more ops than the throttle checks for (256 per lane): a push from inside an op is
 * never held, so this must neither help recursively nor wait. */
static int32_t pushing_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  inside_ctx* c = ud;
  for (int i = 0; i < kFromInside; ++i) {
    if (ordo_opr_push(c->e, tu_count_fn, &c->inside_ran, NULL, 0, NULL, 0, NULL) == ORDO_OK)
      atomic_fetch_add(&c->inside_pushes_ok, 1);
  }
  return 0;
}

static int32_t waiting_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  inside_ctx* c = ud;
  atomic_store(&c->wait_status, ordo_wait_for_all(c->e));
  return 0;
}

Test(pushers_help, helped_ops_fail_skip_push_and_refuse_waits_as_on_workers) {
  help_ctx h;
  ordo_engine* e = engine_with_workers_held(1, &h);
  inside_ctx c = {.e = e, .h = &h};
  atomic_init(&c.failer_on_pusher, 0);
  atomic_init(&c.skipped_ran, 0);
  atomic_init(&c.inside_pushes_ok, 0);
  atomic_init(&c.inside_ran, 0);
  atomic_init(&c.wait_status, -1);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  /* Pushed first, so a helping pusher takes them before the fillers. */
  ST(ordo_opr_push(e, failing_fn, &c, NULL, 0, &v, 1, NULL), ORDO_OK);
  ST(ordo_opr_push(e, tu_count_fn, &c.skipped_ran, &v, 1, NULL, 0, NULL), ORDO_OK);
  ST(ordo_opr_push(e, pushing_fn, &c, NULL, 0, NULL, 0, NULL), ORDO_OK);
  ST(ordo_opr_push(e, waiting_fn, &c, NULL, 0, NULL, 0, NULL), ORDO_OK);
  push_fillers(e, &h);
  cr_assert_gt(atomic_load(&h.on_pusher), 0, "the pusher did not help");
  atomic_store(&h.gate.open, 1);
  ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
  cr_assert_eq(atomic_load(&c.failer_on_pusher), 1, "the failing op did not run on the pusher");
  cr_assert_eq(atomic_load(&c.skipped_ran), 0, "the reader of the failed var ran");
  int32_t code = 0;
  ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 7, "the var's error code is %d, want 7", code);
  cr_assert_eq(atomic_load(&c.inside_pushes_ok), kFromInside);
  cr_assert_eq(atomic_load(&c.inside_ran), kFromInside);
  cr_assert_eq(atomic_load(&c.wait_status), ORDO_ERR_WOULD_DEADLOCK);
  cr_assert_eq(atomic_load(&h.ran), kFillers);
  expect_all_counted(e, 2 + 4 + kFillers + kFromInside);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* ---- while over the window, a push whose op is ready at once runs it on the spot ---- */

typedef struct {
  atomic_int ran;
  atomic_int on_pusher;
} probe;

static int32_t probe_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  probe* p = ud;
  atomic_store(&p->on_pusher, on_pusher());
  atomic_store(&p->ran, 1);
  return 0;
}

static void probe_init(probe* p) {
  atomic_init(&p->ran, 0);
  atomic_init(&p->on_pusher, 0);
}

/* Over the window, only a ready op of the normal CPU property at priority 0 runs inside its
 * push; on the pooled kind every property shares the workers, and still only those. */
static void only_plain_ops_run_inside_their_push(int32_t kind) {
  help_ctx h;
  ordo_engine* e = engine_of_kind_with_workers_held(kind, 1, &h);
  /* Fillers until one runs on this thread: a check (every max_pending / 8 = 8 pushes) found the
   * engine over its window of 64, both workers being held, so the pusher helped; until its next
   * check, which will find the engine below half the window, it runs what it pushes. */
  int fillers = 0;
  while (atomic_load(&h.on_pusher) == 0 && fillers < kFillers) {
    ST(ordo_opr_push(e, filler_fn, &h, NULL, 0, NULL, 0, NULL), ORDO_OK);
    ++fillers;
  }
  cr_assert_gt(atomic_load(&h.on_pusher), 0, "%d pushes over a window of %d never helped", fillers,
               kMaxPending);
  cr_assert_leq(fillers, kMaxPending + kMaxPending / 8, "the pusher first helped at push %d",
                fillers);
  probe plain, prioritized_prop, with_priority;
  probe_init(&plain);
  probe_init(&prioritized_prop);
  probe_init(&with_priority);
  ST(ordo_opr_push(e, probe_fn, &plain, NULL, 0, NULL, 0, NULL), ORDO_OK);
  int plain_ran_in_push = atomic_load(&plain.ran);
  /* Not for the normal CPU workers, or not at priority 0: these are never run on the spot. */
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.prop = ORDO_PROP_CPU_PRIORITIZED;
  ST(ordo_opr_push(e, probe_fn, &prioritized_prop, NULL, 0, NULL, 0, &o), ORDO_OK);
  /* On per_device its own (free) worker may run it at once: what counts is where it ran. */
  int prioritized_ran_in_push = atomic_load(&prioritized_prop.on_pusher);
  ordo_push_opts_init(&o);
  o.priority = 5;
  ST(ordo_opr_push(e, probe_fn, &with_priority, NULL, 0, NULL, 0, &o), ORDO_OK);
  int priority_ran_in_push = atomic_load(&with_priority.ran);
  atomic_store(&h.gate.open, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(plain_ran_in_push, 1, "a ready op pushed over the window did not run in its push");
  cr_assert_eq(atomic_load(&plain.on_pusher), 1);
  cr_assert_eq(atomic_load(&prioritized_prop.ran), 1);
  cr_assert_eq(prioritized_ran_in_push, 0,
               "an ORDO_PROP_CPU_PRIORITIZED op ran on the pushing thread inside its push");
  if (kind == ORDO_ENGINE_PER_DEVICE) { /* its own workers: no pusher ever runs it */
    cr_assert_eq(atomic_load(&prioritized_prop.on_pusher), 0,
                 "an ORDO_PROP_CPU_PRIORITIZED op ran on the pushing thread");
  }
  cr_assert_eq(priority_ran_in_push, 0, "an op with a priority ran inside its push");
  cr_assert_eq(atomic_load(&with_priority.ran), 1);
  expect_all_counted(e, 2 + (uint64_t)fillers + 3);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(pushers_help, over_the_window_a_ready_op_runs_inside_its_push) {
  only_plain_ops_run_inside_their_push(ORDO_ENGINE_PER_DEVICE);
}

Test(pushers_help, pooled_over_the_window_only_plain_ops_run_inside_their_push) {
  only_plain_ops_run_inside_their_push(ORDO_ENGINE_POOLED);
}

/* The window is "more than max_pending": exactly max_pending pending holds no push. Over it, a
 * helping pusher stops once half the window is pending (checking every max_pending / 8 ops),
 * not after a fixed 64. Both workers are held, so only the pusher runs fillers. */
Test(pushers_help, helping_starts_over_the_window_and_stops_near_half_of_it) {
  help_ctx h;
  ordo_engine* e = engine_with_workers_held(1, &h); /* 2 ops pending */
  for (int i = 0; i < kMaxPending - 2; ++i)
    ST(ordo_opr_push(e, filler_fn, &h, NULL, 0, NULL, 0, NULL), ORDO_OK);
  int at_the_window = atomic_load(&h.ran); /* the 64th push checked: 64 pending, not more */
  for (int i = 0; i < kMaxPending / 8; ++i)
    ST(ordo_opr_push(e, filler_fn, &h, NULL, 0, NULL, 0, NULL), ORDO_OK);
  int over_it = atomic_load(&h.ran); /* the 72nd checked: 72 pending, so it helped */
  atomic_store(&h.gate.open, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(at_the_window, 0, "%d ops ran on the pusher with exactly max_pending pending",
               at_the_window);
  const int pending = kMaxPending + kMaxPending / 8, low = kMaxPending / 2;
  cr_assert(
      over_it >= pending - low - kMaxPending / 8 && over_it <= pending - low + kMaxPending / 8,
      "the pusher ran %d ops from %d pending: it should stop at about %d", over_it, pending, low);
  expect_all_counted(e, 2 + (uint64_t)pending - 2);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* On the naive kind, a push from inside an op runs right after that op returns; helping over
 * the window must not run it inside the op instead. Deferred ops keep the engine over it. */
static ordo_engine* g_naive;
static atomic_int g_parent_running, g_child_ran, g_child_ran_inside;
static ordo_completion g_deferred[80];
static int g_num_deferred;

static int32_t deferring_fn(ordo_exec* exec, void* ud) {
  (void)ud;
  ST(ordo_exec_defer(exec, &g_deferred[g_num_deferred++]), ORDO_OK);
  return 0;
}

static int32_t child_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  atomic_fetch_add(&g_child_ran, 1);
  if (atomic_load(&g_parent_running)) atomic_fetch_add(&g_child_ran_inside, 1);
  return 0;
}

static int32_t parent_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  atomic_store(&g_parent_running, 1);
  ST(ordo_opr_push(g_naive, child_fn, NULL, NULL, 0, NULL, 0, NULL), ORDO_OK);
  atomic_store(&g_parent_running, 0);
  return 0;
}

Test(pushers_help, naive_over_the_window_an_op_pushed_from_an_op_runs_after_it) {
  g_naive = make_engine_of_kind(ORDO_ENGINE_NAIVE, 1);
  for (int i = 0; i < 80; ++i)
    ST(ordo_opr_push(g_naive, deferring_fn, NULL, NULL, 0, NULL, 0, NULL), ORDO_OK);
  for (int i = 0; i < 16; ++i)
    ST(ordo_opr_push(g_naive, parent_fn, NULL, NULL, 0, NULL, 0, NULL), ORDO_OK);
  for (int i = 0; i < g_num_deferred; ++i) ST(ordo_complete(g_deferred[i], 0, NULL), ORDO_OK);
  ST(ordo_wait_for_all(g_naive), ORDO_OK);
  cr_assert_eq(atomic_load(&g_child_ran), 16);
  cr_assert_eq(atomic_load(&g_child_ran_inside), 0, "%d of 16 children ran inside their parent",
               atomic_load(&g_child_ran_inside));
  ST(ordo_engine_destroy(g_naive), ORDO_OK);
}

/* ---- the environment and ordo_engine_get_config ---- */

static uint32_t effective_flags(ordo_engine_config* cfg) {
  ordo_engine* e = NULL;
  ST(ordo_engine_create(cfg, &e), ORDO_OK);
  ordo_engine_config got;
  ordo_engine_config_init(&got);
  ST(ordo_engine_get_config(e, &got), ORDO_OK);
  ST(ordo_engine_destroy(e), ORDO_OK);
  return got.flags;
}

Test(pushers_help, env_turns_it_on_and_get_config_reports_it) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.cpu_threads = 2;
  unsetenv("ORDO_PUSHERS_HELP");
  cr_assert_eq(effective_flags(&cfg), 0);
  cfg.flags = ORDO_ENGINE_FLAG_PUSHERS_HELP;
  cr_assert_eq(effective_flags(&cfg), ORDO_ENGINE_FLAG_PUSHERS_HELP);
  cfg.flags = 0;
  setenv("ORDO_PUSHERS_HELP", "1", 1);
  cr_assert_eq(effective_flags(&cfg), ORDO_ENGINE_FLAG_PUSHERS_HELP);
  setenv("ORDO_PUSHERS_HELP", "0", 1);
  cr_assert_eq(effective_flags(&cfg), 0);
  setenv("ORDO_PUSHERS_HELP", "yes", 1);
  ordo_engine* e = (ordo_engine*)(uintptr_t)0x1;
  ST(ordo_engine_create(&cfg, &e), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_null(e);
  unsetenv("ORDO_PUSHERS_HELP");
}

/* ---- helping only from outside every op, and only in ordo_opr_push ---- */

/* An op of another engine pushes to the helping engine past its window: the pushes wait for
 * the window like any push from inside an op, but no op of the helping engine runs on that
 * thread (such an op could wait for what the outer op does after its pushes, forever). */
typedef struct {
  ordo_engine* helping;
  help_ctx* h;
  atomic_int pushes_ok;
} outer_ctx;

static int32_t outer_op(ordo_exec* exec, void* ud) {
  (void)exec;
  outer_ctx* c = ud;
  g_pusher = pthread_self(); /* filler_fn counts the ops that run on this thread */
  for (int i = 0; i < 256; ++i) {
    if (ordo_opr_push(c->helping, filler_fn, c->h, NULL, 0, NULL, 0, NULL) == ORDO_OK) {
      atomic_fetch_add(&c->pushes_ok, 1);
    }
  }
  return 0;
}

Test(pushers_help, pushes_from_inside_an_op_of_another_engine_never_help) {
  help_ctx h;
  ordo_engine* e = engine_with_workers_held(1, &h);
  ordo_engine* other = NULL;
  ST(tu_engine_create(ORDO_ENGINE_POOLED, 2, &other), ORDO_OK);
  outer_ctx c = {.helping = e, .h = &h};
  atomic_init(&c.pushes_ok, 0);
  ST(ordo_opr_push(other, outer_op, &c, NULL, 0, NULL, 0, NULL), ORDO_OK);
  ST(ordo_wait_for_all(other), ORDO_OK);
  cr_assert_eq(atomic_load(&c.pushes_ok), 256);
  cr_assert_eq(atomic_load(&h.on_pusher), 0,
               "%d ops of the helping engine ran inside an op of another engine",
               atomic_load(&h.on_pusher));
  atomic_store(&h.gate.open, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&h.ran), 256);
  expect_all_counted(e, 256 + 2);
  ST(ordo_engine_destroy(other), ORDO_OK);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* ordo_var_clear_error, ordo_wait_for_var_timeout and ordo_var_delete queue internal ops; past
 * the window they must not run the caller's callbacks on the calling thread (the header names
 * only the two push calls). Another thread leaves ready ops behind first: with priority 1, a
 * push never runs its own op, and a throttled pusher helps only until half the window is left. */
static void* filling_thread(void* p) {
  outer_ctx* c = p;
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.priority = 1;
  for (int i = 0; i < kFillers; ++i) {
    if (ordo_opr_push(c->helping, filler_fn, c->h, NULL, 0, NULL, 0, &o) != ORDO_OK) break;
  }
  return NULL;
}

Test(pushers_help, internal_ops_never_run_callbacks_on_the_caller) {
  help_ctx h;
  help_ctx_init(&h);
  g_pusher = pthread_self();
  ordo_engine* e = make_engine(1);
  /* The gates hold the workers and the vars the internal ops queue behind. */
  ordo_var held[2];
  for (int i = 0; i < 2; ++i) {
    ST(ordo_var_new(e, &held[i]), ORDO_OK);
    ST(ordo_opr_push(e, tu_gate_fn, &h.gate, NULL, 0, &held[i], 1, NULL), ORDO_OK);
  }
  cr_assert(tu_wait_ge(&h.gate.in, 2, 20000), "the two gate ops did not both start");
  outer_ctx c = {.helping = e, .h = &h};
  pthread_t filler;
  cr_assert_eq(pthread_create(&filler, NULL, filling_thread, &c), 0);
  cr_assert_eq(pthread_join(filler, NULL), 0);
  cr_assert_lt(atomic_load(&h.ran), kFillers, "no ready op was left for the test");
  int before = atomic_load(&h.on_pusher); /* 0: the filler is not g_pusher */
  for (int i = 0; i < 300; ++i) {
    ST(ordo_var_clear_error(e, held[0]), ORDO_OK);
    ST(ordo_wait_for_var_timeout(e, held[0], 0), ORDO_ERR_TIMEOUT);
  }
  ST(ordo_var_delete(e, held[1]), ORDO_OK);
  cr_assert_eq(atomic_load(&h.on_pusher), before,
               "%d callbacks ran on this thread inside clear_error, wait_for_var or delete",
               atomic_load(&h.on_pusher) - before);
  atomic_store(&h.gate.open, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&h.ran), kFillers);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* The window counts the caller's ops, as ordo_engine_stats does: internal ops (clear_error
 * markers, here, queued behind an op that has not finished) never put a pusher over it. Each
 * filler is waited for, so at most one of the caller's ops is pending besides the held one; a
 * pusher that thought itself over the window would run the next filler inside its push. */
Test(pushers_help, internal_ops_do_not_count_toward_the_window) {
  g_pusher = pthread_self();
  ordo_engine* e = make_engine(1);
  ordo_var v, w;
  ST(ordo_var_new(e, &v), ORDO_OK);
  ST(ordo_var_new(e, &w), ORDO_OK);
  tu_deferred held;
  tu_deferred_init(&held);
  ST(ordo_opr_push(e, tu_defer_fn, &held, NULL, 0, &v, 1, NULL), ORDO_OK);
  ordo_completion c = tu_deferred_wait(&held, 20000);
  cr_assert_neq(c, 0, "the held op never deferred");
  for (int i = 0; i < 4 * kMaxPending; ++i) ST(ordo_var_clear_error(e, v), ORDO_OK);
  help_ctx h;
  help_ctx_init(&h);
  for (int i = 0; i < kFillers / 4; ++i) {
    ST(ordo_opr_push(e, filler_fn, &h, NULL, 0, &w, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, w), ORDO_OK);
  }
  cr_assert_eq(atomic_load(&h.ran), kFillers / 4);
  cr_assert_eq(atomic_load(&h.on_pusher), 0,
               "%d of %d fillers ran inside their push: %d internal ops counted as pending",
               atomic_load(&h.on_pusher), kFillers / 4, 4 * kMaxPending);
  ST(ordo_complete(c, 0, NULL), ORDO_OK);
  ST(ordo_wait_for_all(e), ORDO_OK);
  expect_all_counted(e, 1 + (uint64_t)kFillers / 4);
  ST(ordo_engine_destroy(e), ORDO_OK);
}
