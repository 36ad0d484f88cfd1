/* A graph launch's bundle (issue #26, workloads A and E): captured ops of one var whose var no
 * earlier op of the graph uses are run by the workers together inside one engine op. Each test
 * checks one thing the dynamic path gives every op and a bundle must keep (docs/ARCHITECTURE.md
 * section 10): members run at the same time (one may wait for another), a member whose var is
 * busy at launch does not hold the others up, a member's var is released when it finishes, and
 * each member defers, fails, is skipped, is named and is counted as an op of its own. */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

TestSuite(graph_bundle, .timeout = 60.0);

#define MAX_MEMBERS 256

static ordo_engine* make_engine(int32_t kind, int32_t threads) {
  ordo_engine* e = NULL;
  cr_assert_eq(tu_engine_create(kind, threads, &e), ORDO_OK, "%s", ordo_last_error_message());
  return e;
}

static void make_vars(ordo_engine* e, ordo_var* v, int n) {
  for (int i = 0; i < n; i++) TU_ASSERT_ST(ordo_var_new(e, &v[i]), ORDO_OK, "var_new");
}

/* Captures one op per var (mutating it), fn(ud[i]), named "m<i>". */
static ordo_graph* capture_one_per_var(ordo_engine* e, const ordo_var* v, int n, ordo_fn fn,
                                       void** ud) {
  TU_ASSERT_ST(ordo_graph_begin_capture(e), ORDO_OK, "begin_capture");
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "m%d", i);
    ordo_push_opts o = tu_opts_named(name);
    TU_ASSERT_ST(ordo_opr_push(e, fn, ud[i], NULL, 0, &v[i], 1, &o), ORDO_OK, "push");
  }
  ordo_graph* g = NULL;
  TU_ASSERT_ST(ordo_graph_end_capture(e, &g), ORDO_OK, "end_capture");
  return g;
}

/* Captures one op per var (mutating it) that counts its calls in *count. */
static ordo_graph* capture_counting(ordo_engine* e, const ordo_var* v, int n, atomic_int* count) {
  void* ud[MAX_MEMBERS];
  for (int i = 0; i < n; i++) ud[i] = count;
  return capture_one_per_var(e, v, n, tu_count_fn, ud);
}

/* ---- members run at the same time: one may wait for another claimed by the same worker ---- */

struct meet {
  atomic_int arrived; /* member 1 ran */
  atomic_int waited;  /* member 0 saw it */
  atomic_int ran;
};

static int32_t wait_for_second(ordo_exec* x, void* ud) {
  (void)x;
  struct meet* m = ud;
  atomic_fetch_add(&m->ran, 1);
  atomic_store(&m->waited, tu_wait_ge(&m->arrived, 1, 20000) ? 1 : -1);
  return 0;
}
static int32_t arrive_second(ordo_exec* x, void* ud) {
  (void)x;
  struct meet* m = ud;
  atomic_fetch_add(&m->ran, 1);
  atomic_store(&m->arrived, 1);
  return 0;
}
static int32_t count_meet(ordo_exec* x, void* ud) {
  (void)x;
  atomic_fetch_add(&((struct meet*)ud)->ran, 1);
  return 0;
}

Test(graph_bundle, a_member_may_wait_for_the_next_one_while_a_worker_is_idle) {
  /* 256 members on 2 workers: the first worker claims a chunk of several members, and member 0
   * spins until member 1, in the same chunk, has run: the other worker must steal it. */
  for (int k = 0; k < TU_NUM_THREADED_KINDS; k++) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k], 2);
    ordo_var v[MAX_MEMBERS];
    make_vars(e, v, MAX_MEMBERS);
    struct meet m;
    atomic_init(&m.arrived, 0);
    atomic_init(&m.waited, 0);
    atomic_init(&m.ran, 0);
    TU_ASSERT_ST(ordo_graph_begin_capture(e), ORDO_OK, "begin_capture");
    for (int i = 0; i < MAX_MEMBERS; i++) {
      ordo_fn fn = i == 0 ? wait_for_second : i == 1 ? arrive_second : count_meet;
      TU_ASSERT_ST(ordo_opr_push(e, fn, &m, NULL, 0, &v[i], 1, NULL), ORDO_OK, "push");
    }
    ordo_graph* g = NULL;
    TU_ASSERT_ST(ordo_graph_end_capture(e, &g), ORDO_OK, "end_capture");
    for (int round = 0; round < 20; round++) {
      atomic_store(&m.arrived, 0);
      atomic_store(&m.waited, 0);
      atomic_store(&m.ran, 0);
      TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
      TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_for_all");
      cr_assert_eq(atomic_load(&m.waited), 1, "%s round %d: member 0 never saw member 1 run",
                   tu_kind_name(tu_threaded_kinds[k]), round);
      cr_assert_eq(atomic_load(&m.ran), MAX_MEMBERS);
    }
    TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
  }
}

/* ---- a member whose var is busy at launch holds nobody up ---- */

struct relay {
  tu_deferred held;    /* the op pushed before the launch that holds var 0 */
  atomic_int order[4]; /* what ran, in order: 1 held completed, 2 member 0, 3 member 1 */
  atomic_int next;
};

static int32_t member0_after_held(ordo_exec* x, void* ud) {
  (void)x;
  struct relay* r = ud;
  r->order[atomic_fetch_add(&r->next, 1)] = 2;
  return 0;
}
static int32_t member1_completes_held(ordo_exec* x, void* ud) {
  (void)x;
  struct relay* r = ud;
  r->order[atomic_fetch_add(&r->next, 1)] = 3;
  /* The op before the launch is completed only once this member has run (a send after a
   * receive): a bundle that waited for all its vars would never run this. */
  ordo_completion c = tu_deferred_wait(&r->held, 5000);
  r->order[atomic_fetch_add(&r->next, 1)] = 1;
  return c && ordo_complete(c, 0, NULL) == ORDO_OK ? 0 : 99;
}

Test(graph_bundle, a_member_whose_var_is_held_at_launch_waits_alone) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; k++) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k], 2);
    ordo_var v[2];
    make_vars(e, v, 2);
    struct relay r;
    memset(&r, 0, sizeof r);
    void* ud[2] = {&r, &r};
    TU_ASSERT_ST(ordo_graph_begin_capture(e), ORDO_OK, "begin_capture");
    TU_ASSERT_ST(ordo_opr_push(e, member0_after_held, ud[0], NULL, 0, &v[0], 1, NULL), ORDO_OK,
                 "push 0");
    TU_ASSERT_ST(ordo_opr_push(e, member1_completes_held, ud[1], NULL, 0, &v[1], 1, NULL), ORDO_OK,
                 "push 1");
    ordo_graph* g = NULL;
    TU_ASSERT_ST(ordo_graph_end_capture(e, &g), ORDO_OK, "end_capture");
    tu_deferred_init(&r.held);
    TU_ASSERT_ST(ordo_opr_push(e, tu_defer_fn, &r.held, NULL, 0, &v[0], 1, NULL), ORDO_OK, "held");
    cr_assert_neq(tu_deferred_wait(&r.held, 5000), 0, "the held op never deferred");
    TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
    TU_ASSERT_ST(ordo_wait_for_all_timeout(e, TU_MS_NS(10000)), ORDO_OK, "wait_for_all");
    cr_assert_eq(atomic_load(&r.next), 3);
    cr_assert_eq(r.order[0], 3, "member 1 runs first");
    cr_assert_eq(r.order[1], 1, "then the held op completes");
    cr_assert_eq(r.order[2], 2, "and only then member 0 runs");
    TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
  }
}

/* ---- a member's var is released when it finishes, not when the bundle does ---- */

struct late_pair {
  tu_deferred deferred; /* member 0 defers */
  atomic_int completed_by_follower;
};

static int32_t complete_member0(ordo_exec* x, void* ud) {
  (void)x;
  struct late_pair* p = ud;
  ordo_completion c = tu_deferred_wait(&p->deferred, 5000);
  atomic_store(&p->completed_by_follower, c && ordo_complete(c, 0, NULL) == ORDO_OK);
  return 0;
}
static int32_t quick(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  return 0;
}

Test(graph_bundle, an_op_after_the_launch_on_one_members_var_can_complete_another_member) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; k++) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k], 2);
    ordo_var v[8];
    make_vars(e, v, 8);
    struct late_pair p;
    memset(&p, 0, sizeof p);
    tu_deferred_init(&p.deferred);
    void* ud[8] = {&p.deferred, 0, 0, 0, 0, 0, 0, 0};
    TU_ASSERT_ST(ordo_graph_begin_capture(e), ORDO_OK, "begin_capture");
    TU_ASSERT_ST(ordo_opr_push(e, tu_defer_fn, ud[0], NULL, 0, &v[0], 1, NULL), ORDO_OK, "m0");
    for (int i = 1; i < 8; i++) {
      TU_ASSERT_ST(ordo_opr_push(e, quick, NULL, NULL, 0, &v[i], 1, NULL), ORDO_OK, "m");
    }
    ordo_graph* g = NULL;
    TU_ASSERT_ST(ordo_graph_end_capture(e, &g), ORDO_OK, "end_capture");
    TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
    /* Behind member 1 on its var: runs once member 1 has finished, while member 0 is still
     * deferred, and completes member 0. */
    TU_ASSERT_ST(ordo_opr_push(e, complete_member0, &p, NULL, 0, &v[1], 1, NULL), ORDO_OK,
                 "follower");
    TU_ASSERT_ST(ordo_wait_for_var(e, v[2]), ORDO_OK, "a finished member's var, while 0 defers");
    TU_ASSERT_ST(ordo_wait_for_all_timeout(e, TU_MS_NS(10000)), ORDO_OK, "wait_for_all");
    cr_assert_eq(atomic_load(&p.completed_by_follower), 1);
    ordo_stats st;
    st.struct_size = sizeof st;
    TU_ASSERT_ST(ordo_engine_stats(e, &st), ORDO_OK, "stats");
    cr_assert_eq(st.pushed, 9);
    cr_assert_eq(st.completed, 9);
    cr_assert_eq(st.pending, 0);
    TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
  }
}

/* ---- each member defers, fails, is skipped and is named as an op of its own ---- */

struct member_log {
  atomic_int calls;
  char name[32];
  int32_t worker;
  int32_t ret;
  int defer; /* 1: defer and complete inside the callback; 2: defer, completed by the test */
  _Atomic ordo_completion handle;
};

static int32_t logging_member(ordo_exec* x, void* ud) {
  struct member_log* l = ud;
  atomic_fetch_add(&l->calls, 1);
  ordo_exec_info info;
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(x, &info) == ORDO_OK) {
    snprintf(l->name, sizeof l->name, "%s", info.name ? info.name : "");
    l->worker = info.worker_index;
  }
  if (l->defer) {
    ordo_completion c = 0;
    if (ordo_exec_defer(x, &c) != ORDO_OK) return 77;
    if (l->defer == 1)
      return ordo_complete(c, l->ret, "failed in the callback") == ORDO_OK ? 0 : 78;
    atomic_store(&l->handle, c);
    return 0;
  }
  return l->ret;
}

Test(graph_bundle, members_fail_defer_skip_and_name_themselves_as_pushes_do) {
  enum { N = 12 };
  for (int k = 0; k < TU_NUM_THREADED_KINDS; k++) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k], 2);
    ordo_var v[N];
    make_vars(e, v, N);
    struct member_log log[N];
    void* ud[N];
    memset(log, 0, sizeof log);
    for (int i = 0; i < N; i++) ud[i] = &log[i];
    log[3].ret = 5;                   /* fails */
    log[4].defer = 1;                 /* defers, completes in its callback */
    log[5].defer = 1, log[5].ret = 6; /* same, failing */
    log[6].defer = 2;                 /* defers, completed later */
    log[7].defer = 2, log[7].ret = 7; /* same, failing */
    ordo_graph* g = capture_one_per_var(e, v, N, logging_member, ud);
    /* var 8 carries an error before the launch: member 8 is skipped and inherits it. */
    log[N - 1].ret = 9;
    TU_ASSERT_ST(ordo_opr_push(e, logging_member, &log[N - 1], NULL, 0, &v[8], 1, NULL), ORDO_OK,
                 "poison");
    TU_ASSERT_ST(ordo_wait_for_var(e, v[8]), ORDO_ERR_OP_FAILED, "poisoned");
    atomic_store(&log[N - 1].calls, 0);
    log[N - 1].ret = 0;
    TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
    for (int i = 6; i <= 7; i++) {
      for (int t = 0; t < 5000 && !atomic_load(&log[i].handle); t++) tu_sleep_us(1000);
      cr_assert_neq(atomic_load(&log[i].handle), 0, "member %d never deferred", i);
    }
    TU_ASSERT_ST(ordo_wait_for_var(e, v[0]), ORDO_OK, "a member beside the deferred ones");
    /* The dump shows the bundle, and each deferred member by its own name. */
    char* dump = NULL;
    size_t dump_len = 0;
    FILE* f = open_memstream(&dump, &dump_len);
    TU_ASSERT_ST(ordo_engine_dump(e, f), ORDO_OK, "dump");
    fclose(f);
    cr_assert(strstr(dump, "graph bundle") != NULL, "dump: %s", dump);
    cr_assert(strstr(dump, "'m6'") != NULL && strstr(dump, "'m7'") != NULL, "dump: %s", dump);
    cr_assert(strstr(dump, "deferred") != NULL, "dump: %s", dump);
    free(dump);
    TU_ASSERT_ST(ordo_complete(atomic_load(&log[6].handle), 0, NULL), ORDO_OK, "complete 6");
    TU_ASSERT_ST(ordo_complete(atomic_load(&log[7].handle), 7, "failed later"), ORDO_OK,
                 "complete 7");
    TU_ASSERT_ST(ordo_complete(atomic_load(&log[7].handle), 0, NULL), ORDO_ERR_INVALID_HANDLE,
                 "used handle");
    TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED, "wait_for_all");
    for (int i = 0; i < N; i++) {
      int32_t code = -1;
      TU_ASSERT_ST(ordo_var_get_error(e, v[i], &code, NULL, 0), ORDO_OK, "get_error");
      const int32_t want = i == 3 ? 5 : i == 5 ? 6 : i == 7 ? 7 : i == 8 ? 9 : 0;
      cr_assert_eq(code, want, "var %d: error %d, want %d", i, code, want);
      cr_assert_eq(atomic_load(&log[i].calls), i == 8 ? 0 : 1, "member %d calls", i);
      if (i != 8) {
        char want_name[16];
        snprintf(want_name, sizeof want_name, "m%d", i);
        cr_assert_str_eq(log[i].name, want_name, "member %d's exec names it", i);
        cr_assert(log[i].worker >= 0 && log[i].worker < 2, "member %d on worker %d", i,
                  log[i].worker);
      }
    }
    ordo_stats st;
    st.struct_size = sizeof st;
    TU_ASSERT_ST(ordo_engine_stats(e, &st), ORDO_OK, "stats");
    cr_assert_eq(st.pushed, N + 1);
    cr_assert_eq(st.completed, N + 1);
    cr_assert_eq(st.failed, 5, "the poison, 3, 5, 7 and the skipped 8");
    cr_assert_eq(st.skipped, 1);
    TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
  }
}

/* ---- waiting for a member's var is enough to destroy the graph ---- */

Test(graph_bundle, a_graph_can_be_destroyed_once_its_members_vars_are_waited_for) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v[3];
  make_vars(e, v, 3);
  for (int round = 0; round < 2000; round++) {
    TU_ASSERT_ST(ordo_graph_begin_capture(e), ORDO_OK, "begin_capture");
    for (int i = 0; i < 3; i++) {
      TU_ASSERT_ST(ordo_opr_push(e, quick, NULL, NULL, 0, &v[i], 1, NULL), ORDO_OK, "push");
    }
    ordo_graph* g = NULL;
    TU_ASSERT_ST(ordo_graph_end_capture(e, &g), ORDO_OK, "end_capture");
    TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
    for (int i = 0; i < 3; i++) TU_ASSERT_ST(ordo_wait_for_var(e, v[i]), ORDO_OK, "wait");
    TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "destroy right after the members' waits");
  }
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
}

/* ---- launches overlap: each is its own bundle ---- */

Test(graph_bundle, overlapping_launches_of_one_graph_each_run_every_member) {
  enum { N = 64, LAUNCHES = 200 };
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v[N];
  make_vars(e, v, N);
  atomic_int count;
  atomic_init(&count, 0);
  ordo_graph* g = capture_counting(e, v, N, &count);
  for (int i = 0; i < LAUNCHES; i++) TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
  TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_for_all");
  cr_assert_eq(atomic_load(&count), N * LAUNCHES);
  TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
}

/* ---- a member that ends its thread fails; the others still run ---- */

static atomic_int g_exits;
static int32_t exit_thread_member(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  atomic_fetch_add(&g_exits, 1);
  pthread_exit(NULL);
  return 0;
}

Test(graph_bundle, a_member_that_ends_its_thread_fails_and_the_rest_run) {
  enum { N = 40 };
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v[N];
  make_vars(e, v, N);
  atomic_int count;
  atomic_init(&count, 0);
  atomic_init(&g_exits, 0);
  TU_ASSERT_ST(ordo_graph_begin_capture(e), ORDO_OK, "begin_capture");
  for (int i = 0; i < N; i++) {
    ordo_fn fn = i == 1 ? exit_thread_member : tu_count_fn;
    TU_ASSERT_ST(ordo_opr_push(e, fn, &count, NULL, 0, &v[i], 1, NULL), ORDO_OK, "push");
  }
  ordo_graph* g = NULL;
  TU_ASSERT_ST(ordo_graph_end_capture(e, &g), ORDO_OK, "end_capture");
  TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
  TU_ASSERT_ST(ordo_wait_for_all_timeout(e, TU_MS_NS(20000)), ORDO_ERR_OP_FAILED, "wait_for_all");
  cr_assert_eq(atomic_load(&count), N - 1);
  cr_assert_eq(atomic_load(&g_exits), 1);
  int32_t code = 0;
  TU_ASSERT_ST(ordo_var_get_error(e, v[1], &code, NULL, 0), ORDO_OK, "get_error");
  cr_assert_eq(code, ORDO_ERR_OP_FAILED);
  TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
}

/* ---- a var deleted since the capture stops the launch where the pushes would stop ---- */

Test(graph_bundle, a_member_var_deleted_after_capture_stops_the_launch_there) {
  enum { N = 6 };
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v[N];
  make_vars(e, v, N);
  atomic_int count;
  atomic_init(&count, 0);
  ordo_graph* g = capture_counting(e, v, N, &count);
  TU_ASSERT_ST(ordo_var_delete(e, v[3]), ORDO_OK, "delete");
  ordo_status s = ordo_graph_launch(g);
  char msg[512];
  ordo_last_error_copy(msg, sizeof msg);
  cr_assert_eq(s, ORDO_ERR_INVALID_HANDLE, "%s", ordo_status_string(s));
  cr_assert(strstr(msg, "op 3 of 6") != NULL, "message: %s", msg);
  TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_for_all");
  cr_assert_eq(atomic_load(&count), 3, "the ops before it ran, the rest did not");
  TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
}

/* ---- a throttled, helping launcher may run members itself ---- */

Test(graph_bundle, a_helping_launcher_throttled_by_the_window_runs_members_too) {
  /* 256 members, then a second op on each of their vars (not members: they follow one): the
   * launch pushes those 256 ops after posting the bundle, the window of 64 throttles it, and a
   * helping pusher takes ready work from the queue, the bundle's carrier included, which it
   * runs one member at a time beside the workers. */
  enum { N = 256, LAUNCHES = 20 };
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  cfg.cpu_threads = 2;
  cfg.max_pending = 64;
  cfg.flags = ORDO_ENGINE_FLAG_PUSHERS_HELP;
  ordo_engine* e = NULL;
  TU_ASSERT_ST(ordo_engine_create(&cfg, &e), ORDO_OK, "engine_create");
  ordo_var v[N];
  make_vars(e, v, N);
  atomic_int count;
  atomic_init(&count, 0);
  TU_ASSERT_ST(ordo_graph_begin_capture(e), ORDO_OK, "begin_capture");
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < N; i++) {
      TU_ASSERT_ST(ordo_opr_push(e, tu_count_fn, &count, NULL, 0, &v[i], 1, NULL), ORDO_OK, "push");
    }
  }
  ordo_graph* g = NULL;
  TU_ASSERT_ST(ordo_graph_end_capture(e, &g), ORDO_OK, "end_capture");
  for (int i = 0; i < LAUNCHES; i++) TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
  TU_ASSERT_ST(ordo_wait_for_all_timeout(e, TU_MS_NS(20000)), ORDO_OK, "wait_for_all");
  cr_assert_eq(atomic_load(&count), 2 * N * LAUNCHES);
  ordo_stats st;
  st.struct_size = sizeof st;
  TU_ASSERT_ST(ordo_engine_stats(e, &st), ORDO_OK, "stats");
  cr_assert_eq(st.pushed, 2 * N * LAUNCHES);
  cr_assert_eq(st.completed, 2 * N * LAUNCHES);
  TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
}

/* ---- launches race with another thread's pushes on the members' vars ---- */

#define RACE_VARS 1024
struct race_op {
  struct race* r;
  int var;
};
struct race {
  atomic_int inside[RACE_VARS];      /* writers running on each var: never more than one */
  struct race_op outside[RACE_VARS]; /* the other thread's ops (filled before it starts) */
  atomic_int overlaps;
  atomic_int runs;
  atomic_int stop;
  ordo_engine* e;
  ordo_var* v;
};

static int32_t exclusive_writer(ordo_exec* x, void* ud) {
  (void)x;
  struct race_op* o = ud;
  if (atomic_fetch_add(&o->r->inside[o->var], 1) != 0) atomic_fetch_add(&o->r->overlaps, 1);
  for (volatile int spin = 0; spin < 20; spin++) {
  }
  atomic_fetch_sub(&o->r->inside[o->var], 1);
  atomic_fetch_add(&o->r->runs, 1);
  return 0;
}

static void* push_on_member_vars(void* p) {
  struct race* r = p;
  uint64_t s = 88172645463325252ull;
  int pushed = 0;
  while (!atomic_load(&r->stop)) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const int i = (int)(s % RACE_VARS);
    if (ordo_opr_push(r->e, exclusive_writer, &r->outside[i], NULL, 0, &r->v[i], 1, NULL) ==
        ORDO_OK) {
      pushed++;
    }
  }
  return (void*)(intptr_t)pushed;
}

Test(graph_bundle, members_never_overlap_an_outside_writer_on_their_var) {
  /* Another thread keeps pushing writers on the members' vars while the graph (one writer per
   * var, all members) is launched again and again: each member must join only a var that is
   * free at its arrival, and every op on a var must run alone. */
  enum { LAUNCHES = 30 };
  for (int k = 0; k < TU_NUM_THREADED_KINDS; k++) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k], 2);
    static ordo_var v[RACE_VARS];
    static struct race r;
    static struct race_op mine[RACE_VARS];
    memset(&r, 0, sizeof r);
    r.e = e;
    r.v = v;
    for (int i = 0; i < RACE_VARS; i++) {
      TU_ASSERT_ST(ordo_var_new(e, &v[i]), ORDO_OK, "var_new");
      mine[i].r = r.outside[i].r = &r;
      mine[i].var = r.outside[i].var = i;
    }
    TU_ASSERT_ST(ordo_graph_begin_capture(e), ORDO_OK, "begin_capture");
    for (int i = 0; i < RACE_VARS; i++) {
      TU_ASSERT_ST(ordo_opr_push(e, exclusive_writer, &mine[i], NULL, 0, &v[i], 1, NULL), ORDO_OK,
                   "push");
    }
    ordo_graph* g = NULL;
    TU_ASSERT_ST(ordo_graph_end_capture(e, &g), ORDO_OK, "end_capture");
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, push_on_member_vars, &r), 0);
    for (int i = 0; i < LAUNCHES; i++) TU_ASSERT_ST(ordo_graph_launch(g), ORDO_OK, "launch");
    TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_for_all (launches)");
    atomic_store(&r.stop, 1);
    void* pushed = NULL;
    pthread_join(t, &pushed);
    TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait_for_all");
    cr_assert_eq(atomic_load(&r.overlaps), 0, "%s: two writers ran at once on a var",
                 tu_kind_name(tu_threaded_kinds[k]));
    cr_assert_eq(atomic_load(&r.runs), RACE_VARS * LAUNCHES + (int)(intptr_t)pushed);
    TU_ASSERT_ST(ordo_graph_destroy(g), ORDO_OK, "graph_destroy");
    TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "engine_destroy");
  }
}
