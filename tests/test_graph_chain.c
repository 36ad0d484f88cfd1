/* Bulk execution of graph chains (issue #26 item 2): a launch runs a chain of captured ops that
 * can only run one after another as one engine op, back to back on one worker. Each test runs
 * the same program twice, pushed directly and captured then launched, and checks that both give
 * the same ops run, var errors and stats, and that those are what SPEC §3 says. */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

TestSuite(graph_chain, .timeout = 60.0);

static const int32_t kKinds[] = {ORDO_ENGINE_NAIVE, ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};

static ordo_engine* make_engine(int32_t kind) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK, "%s", ordo_last_error_message());
  return e;
}

#define MAX_OPS 8
#define NVARS 5

/* One op of a test program: vars by index, what its callback returns. */
struct op_desc {
  int mut[3], nmut;
  int rd[3], nrd;
  int32_t ret;
};

struct run_result {
  int ran[MAX_OPS];
  int32_t err[NVARS];
  ordo_stats stats;
};

struct op_ctx {
  struct run_result* r;
  int index;
  int32_t ret;
};

static int32_t record_op(ordo_exec* x, void* ud) {
  (void)x;
  struct op_ctx* c = ud;
  c->r->ran[c->index] = 1;
  return c->ret;
}

static int32_t fail5(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  return 5;
}

static void push_desc(ordo_engine* e, const ordo_var* v, const struct op_desc* d,
                      struct op_ctx* c) {
  ordo_var m[3], r[3];
  for (int k = 0; k < d->nmut; k++) m[k] = v[d->mut[k]];
  for (int k = 0; k < d->nrd; k++) r[k] = v[d->rd[k]];
  cr_assert_eq(ordo_opr_push(e, record_op, c, r, (size_t)d->nrd, m, (size_t)d->nmut, NULL), ORDO_OK,
               "%s", ordo_last_error_message());
}

/* Runs ops[0..n) on a fresh engine of `kind`: pushed directly, or captured and launched. Var
 * `poisoned` (or -1) gets error 5 from an op pushed before the program. */
static void run_program(int32_t kind, const struct op_desc* ops, int n, int poisoned, int launch,
                        struct run_result* out) {
  memset(out, 0, sizeof *out);
  ordo_engine* e = make_engine(kind);
  ordo_var v[NVARS];
  for (int i = 0; i < NVARS; i++) cr_assert_eq(ordo_var_new(e, &v[i]), ORDO_OK);
  if (poisoned >= 0) {
    cr_assert_eq(ordo_opr_push(e, fail5, NULL, NULL, 0, &v[poisoned], 1, NULL), ORDO_OK);
  }
  struct op_ctx ctx[MAX_OPS];
  for (int i = 0; i < n; i++) ctx[i] = (struct op_ctx){out, i, ops[i].ret};
  ordo_graph* g = NULL;
  if (launch) cr_assert_eq(ordo_graph_begin_capture(e), ORDO_OK);
  for (int i = 0; i < n; i++) push_desc(e, v, &ops[i], &ctx[i]);
  if (launch) {
    cr_assert_eq(ordo_graph_end_capture(e, &g), ORDO_OK);
    cr_assert_eq(ordo_graph_launch(g), ORDO_OK, "%s", ordo_last_error_message());
  }
  ordo_wait_for_all(e);
  for (int i = 0; i < NVARS; i++) {
    char buf[64];
    cr_assert_eq(ordo_var_get_error(e, v[i], &out->err[i], buf, sizeof buf), ORDO_OK);
  }
  out->stats.struct_size = sizeof out->stats;
  cr_assert_eq(ordo_engine_stats(e, &out->stats), ORDO_OK);
  if (g) cr_assert_eq(ordo_graph_destroy(g), ORDO_OK);
  ordo_engine_destroy(e);
}

/* Both ways, on every engine kind: the same outcome, and the one expected. */
static void check_program(const struct op_desc* ops, int n, int poisoned, const int* want_ran,
                          const int32_t* want_err, uint64_t want_failed, uint64_t want_skipped) {
  for (size_t k = 0; k < sizeof kKinds / sizeof kKinds[0]; k++) {
    struct run_result direct, launched;
    run_program(kKinds[k], ops, n, poisoned, 0, &direct);
    run_program(kKinds[k], ops, n, poisoned, 1, &launched);
    for (int i = 0; i < n; i++) {
      cr_expect_eq(direct.ran[i], want_ran[i], "kind %d direct: op %d ran %d", kKinds[k], i,
                   direct.ran[i]);
      cr_expect_eq(launched.ran[i], want_ran[i], "kind %d launched: op %d ran %d", kKinds[k], i,
                   launched.ran[i]);
    }
    for (int i = 0; i < NVARS; i++) {
      cr_expect_eq(direct.err[i], want_err[i], "kind %d direct: var %d error %d", kKinds[k], i,
                   direct.err[i]);
      cr_expect_eq(launched.err[i], want_err[i], "kind %d launched: var %d error %d", kKinds[k], i,
                   launched.err[i]);
    }
    const uint64_t outside = poisoned >= 0 ? 1 : 0;
    cr_expect_eq(launched.stats.pushed, n + outside, "kind %d: pushed %llu", kKinds[k],
                 (unsigned long long)launched.stats.pushed);
    cr_expect_eq(launched.stats.completed, n + outside, "kind %d: completed %llu", kKinds[k],
                 (unsigned long long)launched.stats.completed);
    cr_expect_eq(launched.stats.failed, want_failed + outside, "kind %d: failed %llu", kKinds[k],
                 (unsigned long long)launched.stats.failed);
    cr_expect_eq(launched.stats.skipped, want_skipped, "kind %d: skipped %llu", kKinds[k],
                 (unsigned long long)launched.stats.skipped);
    cr_expect_eq(direct.stats.failed, launched.stats.failed);
    cr_expect_eq(direct.stats.skipped, launched.stats.skipped);
    cr_expect_eq(direct.stats.pushed, launched.stats.pushed);
  }
}

/* a=0 b=1 c=2 d=3 e=4. A chain (every op reads c and mutates a and b): op 1 fails; 2 and 3 are
 * skipped and inherit its error; a and b carry it; c, d and e are untouched. */
Test(graph_chain, a_failure_mid_chain_poisons_what_the_dynamic_path_does) {
  const struct op_desc ops[] = {
      {{0, 1}, 2, {2}, 1, 0},
      {{0, 1}, 2, {2}, 1, 7},
      {{1, 0}, 2, {2}, 1, 0},
      {{0, 1}, 2, {2}, 1, 0},
  };
  const int ran[] = {1, 1, 0, 0};
  const int32_t err[NVARS] = {7, 7, 0, 0, 0};
  check_program(ops, 4, -1, ran, err, 3, 2);
}

/* d carries error 5 from an op before the launch; every op of the chain reads d and mutates a:
 * all are skipped, and a gets 5. */
Test(graph_chain, a_var_poisoned_before_the_launch_skips_the_ops_that_touch_it) {
  const struct op_desc ops[] = {
      {{0}, 1, {3}, 1, 0},
      {{0}, 1, {3}, 1, 0},
      {{0}, 1, {3}, 1, 0},
  };
  const int ran[] = {0, 0, 0};
  const int32_t err[NVARS] = {5, 0, 0, 5, 0};
  check_program(ops, 3, 3, ran, err, 3, 3);
}

/* a carries error 5 from before the launch and the chain mutates a: every op is skipped and a
 * keeps 5 (the chain op, which itself "succeeds", must not clear it). */
Test(graph_chain, a_chain_never_clears_an_error_set_from_outside) {
  const struct op_desc ops[] = {
      {{0}, 1, {0}, 0, 0},
      {{0}, 1, {0}, 0, 0},
  };
  const int ran[] = {0, 0};
  const int32_t err[NVARS] = {5, 0, 0, 0, 0};
  check_program(ops, 2, 0, ran, err, 2, 2);
}

/* e carries error 5; a chain that never touches e runs and leaves e's error as it was. */
Test(graph_chain, a_chain_that_succeeds_keeps_errors_set_from_outside) {
  const struct op_desc ops[] = {
      {{0, 1}, 2, {0}, 0, 0},
      {{0, 1}, 2, {0}, 0, 0},
      {{0, 1}, 2, {0}, 0, 0},
  };
  const int ran[] = {1, 1, 1};
  const int32_t err[NVARS] = {0, 0, 0, 0, 5};
  check_program(ops, 3, 4, ran, err, 0, 0);
}

/* ---- observing the bulk: while a chain's first op runs, the engine has one op pending ---- */

static atomic_int g_gate;
static atomic_int g_inside;
static int32_t hold_op(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  atomic_store(&g_inside, 1);
  while (!atomic_load(&g_gate)) usleep(1000);
  return 0;
}
static int32_t noop(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  return 0;
}

static void wait_flag(atomic_int* f) {
  for (int i = 0; i < 10000 && !atomic_load(f); i++) usleep(1000);
  cr_assert(atomic_load(f), "timed out");
}

Test(graph_chain, a_chain_is_one_engine_op_and_counts_as_its_ops) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var a;
  cr_assert_eq(ordo_var_new(e, &a), ORDO_OK);
  atomic_store(&g_gate, 0);
  atomic_store(&g_inside, 0);
  cr_assert_eq(ordo_graph_begin_capture(e), ORDO_OK);
  ordo_opr_push(e, hold_op, NULL, NULL, 0, &a, 1, NULL);
  for (int i = 0; i < 5; i++) ordo_opr_push(e, noop, NULL, NULL, 0, &a, 1, NULL);
  ordo_graph* g = NULL;
  cr_assert_eq(ordo_graph_end_capture(e, &g), ORDO_OK);
  cr_assert_eq(ordo_graph_launch(g), ORDO_OK);
  wait_flag(&g_inside);
  char* text = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  cr_assert_eq(ordo_engine_dump(e, f), ORDO_OK);
  fclose(f);
  cr_expect(strstr(text, "1 ops pending") != NULL, "%s", text);
  cr_expect(strstr(text, "graph chain") != NULL, "%s", text);
  free(text);
  atomic_store(&g_gate, 1);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  ordo_stats st = {0};
  st.struct_size = sizeof st;
  cr_assert_eq(ordo_engine_stats(e, &st), ORDO_OK);
  cr_expect_eq(st.pushed, 6);
  cr_expect_eq(st.completed, 6);
  cr_assert_eq(ordo_graph_destroy(g), ORDO_OK);
  ordo_engine_destroy(e);
}

/* ---- deferred nodes ---- */

struct defer_log {
  atomic_int n;
  int tags[16];
  atomic_int completed[2]; /* set just before each deferred node's ordo_complete */
  _Atomic ordo_completion handle[2];
  atomic_int deferred[2];
  int32_t code;   /* what the first deferred node completes with */
  atomic_int bad; /* checks made off the test's thread: Criterion asserts on its own */
};
static struct defer_log g_dl;

struct dnode {
  int tag;
  int defer_slot; /* -1: runs synchronously */
};

static int32_t defer_node(ordo_exec* x, void* ud) {
  const struct dnode* d = ud;
  int i = atomic_fetch_add(&g_dl.n, 1);
  g_dl.tags[i] = d->tag;
  if (d->tag == 2 && !atomic_load(&g_dl.completed[0])) atomic_store(&g_dl.bad, 1);
  if (d->defer_slot >= 0) {
    ordo_completion h;
    if (ordo_exec_defer(x, &h) != ORDO_OK) atomic_store(&g_dl.bad, 2);
    atomic_store(&g_dl.handle[d->defer_slot], h);
    atomic_store(&g_dl.deferred[d->defer_slot], 1);
  }
  return 0;
}

static void* complete_first(void* arg) {
  (void)arg;
  for (int i = 0; i < 10000 && !atomic_load(&g_dl.deferred[0]); i++) usleep(1000);
  usleep(20000);
  atomic_store(&g_dl.completed[0], 1);
  if (ordo_complete(atomic_load(&g_dl.handle[0]), g_dl.code, "deferred failure") != ORDO_OK) {
    atomic_store(&g_dl.bad, 3);
  }
  return NULL;
}

/* Ops 1 and 3 defer and are completed from another thread; op 2 must wait for op 1's
 * completion. The first handle, used up, must not complete op 3 (the chain's block defers
 * twice). With `code` != 0, op 1 fails at completion and the rest of the chain is skipped. */
static void run_deferred_chain(int32_t kind, int launch, int32_t code) {
  memset(&g_dl, 0, sizeof g_dl);
  g_dl.code = code;
  ordo_engine* e = make_engine(kind);
  ordo_var a;
  cr_assert_eq(ordo_var_new(e, &a), ORDO_OK);
  static const struct dnode nodes[4] = {{0, -1}, {1, 0}, {2, -1}, {3, 1}};
  ordo_graph* g = NULL;
  if (launch) cr_assert_eq(ordo_graph_begin_capture(e), ORDO_OK);
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(ordo_opr_push(e, defer_node, (void*)&nodes[i], NULL, 0, &a, 1, NULL), ORDO_OK);
  }
  pthread_t t;
  if (launch) {
    cr_assert_eq(ordo_graph_end_capture(e, &g), ORDO_OK);
    cr_assert_eq(pthread_create(&t, NULL, complete_first, NULL), 0);
    cr_assert_eq(ordo_graph_launch(g), ORDO_OK);
  } else {
    cr_assert_eq(pthread_create(&t, NULL, complete_first, NULL), 0);
  }
  pthread_join(t, NULL);
  if (code == 0) {
    wait_flag(&g_dl.deferred[1]);
    cr_expect_eq(ordo_complete(atomic_load(&g_dl.handle[0]), 0, NULL), ORDO_ERR_INVALID_HANDLE,
                 "a used completion handle completed a later op of the chain");
    cr_expect_eq(ordo_complete(atomic_load(&g_dl.handle[1]), 0, NULL), ORDO_OK);
  }
  cr_assert_eq(ordo_wait_for_all(e), code ? ORDO_ERR_OP_FAILED : ORDO_OK, "%s",
               ordo_last_error_message());
  cr_expect_eq(atomic_load(&g_dl.bad), 0, "kind %d launch %d: check %d failed", kind, launch,
               atomic_load(&g_dl.bad));
  const int want_n = code ? 2 : 4;
  cr_expect_eq(atomic_load(&g_dl.n), want_n, "kind %d launch %d: %d ops ran", kind, launch,
               atomic_load(&g_dl.n));
  for (int i = 0; i < want_n; i++) cr_expect_eq(g_dl.tags[i], i);
  int32_t err = -1;
  char buf[64];
  cr_assert_eq(ordo_var_get_error(e, a, &err, buf, sizeof buf), ORDO_OK);
  cr_expect_eq(err, code);
  ordo_stats st = {0};
  st.struct_size = sizeof st;
  cr_assert_eq(ordo_engine_stats(e, &st), ORDO_OK);
  cr_expect_eq(st.completed, 4);
  cr_expect_eq(st.failed, code ? 3 : 0);
  cr_expect_eq(st.skipped, code ? 2 : 0);
  if (g) cr_assert_eq(ordo_graph_destroy(g), ORDO_OK);
  ordo_engine_destroy(e);
}

Test(graph_chain, a_deferred_node_mid_chain_completed_from_another_thread) {
  for (size_t k = 1; k < sizeof kKinds / sizeof kKinds[0]; k++) { /* naive: completes inline */
    run_deferred_chain(kKinds[k], 0, 0);
    run_deferred_chain(kKinds[k], 1, 0);
    run_deferred_chain(kKinds[k], 0, 9);
    run_deferred_chain(kKinds[k], 1, 9);
  }
}

/* ---- the chain against the outside ---- */

struct tag_log {
  atomic_int n;
  int tags[256];
};
struct tag_op {
  struct tag_log* log;
  int tag;
};
static int32_t append(ordo_exec* x, void* ud) {
  (void)x;
  struct tag_op* t = ud;
  int i = atomic_fetch_add(&t->log->n, 1);
  if (i < 256) t->log->tags[i] = t->tag;
  return 0;
}

/* Launch, direct push, launch, on the chain's var: the direct op runs between the launches. */
Test(graph_chain, direct_pushes_between_launches_run_between_their_chains) {
  for (size_t k = 0; k < sizeof kKinds / sizeof kKinds[0]; k++) {
    ordo_engine* e = make_engine(kKinds[k]);
    ordo_var a, b;
    cr_assert_eq(ordo_var_new(e, &a), ORDO_OK);
    cr_assert_eq(ordo_var_new(e, &b), ORDO_OK);
    static struct tag_log log;
    memset(&log, 0, sizeof log);
    struct tag_op ops[4] = {{&log, 0}, {&log, 1}, {&log, 2}, {&log, 100}};
    cr_assert_eq(ordo_graph_begin_capture(e), ORDO_OK);
    ordo_var ab[2] = {a, b};
    for (int i = 0; i < 3; i++) ordo_opr_push(e, append, &ops[i], NULL, 0, ab, 2, NULL);
    ordo_graph* g = NULL;
    cr_assert_eq(ordo_graph_end_capture(e, &g), ORDO_OK);
    for (int round = 0; round < 20; round++) {
      cr_assert_eq(ordo_graph_launch(g), ORDO_OK);
      cr_assert_eq(ordo_opr_push(e, append, &ops[3], NULL, 0, round % 2 ? &a : &b, 1, NULL),
                   ORDO_OK);
    }
    cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&log.n), 80);
    for (int i = 0; i < 80; i++) {
      const int want = (i % 4 == 3) ? 100 : i % 4;
      cr_expect_eq(log.tags[i], want, "kind %d: entry %d is %d, want %d", kKinds[k], i, log.tags[i],
                   want);
    }
    cr_assert_eq(ordo_graph_destroy(g), ORDO_OK);
    ordo_engine_destroy(e);
  }
}

/* An outside op reads r and waits, while it runs, for the chain's first op (which also only
 * reads r) to have run: the chain must take r as a reader, beside it. */
static atomic_int g_chain_read;
static int32_t outside_reader(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  for (int i = 0; i < 10000 && !atomic_load(&g_chain_read); i++) usleep(1000);
  return atomic_load(&g_chain_read) ? 0 : 3;
}
static int32_t chain_reader(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  atomic_store(&g_chain_read, 1);
  return 0;
}

Test(graph_chain, a_var_the_chain_only_reads_is_shared_with_outside_readers) {
  for (size_t k = 1; k < sizeof kKinds / sizeof kKinds[0]; k++) { /* naive runs one at a time */
    atomic_store(&g_chain_read, 0);
    ordo_engine* e = make_engine(kKinds[k]);
    ordo_var r, a;
    cr_assert_eq(ordo_var_new(e, &r), ORDO_OK);
    cr_assert_eq(ordo_var_new(e, &a), ORDO_OK);
    cr_assert_eq(ordo_graph_begin_capture(e), ORDO_OK);
    ordo_opr_push(e, chain_reader, NULL, &r, 1, &a, 1, NULL);
    ordo_opr_push(e, noop, NULL, &r, 1, &a, 1, NULL);
    ordo_opr_push(e, noop, NULL, &r, 1, &a, 1, NULL);
    ordo_graph* g = NULL;
    cr_assert_eq(ordo_graph_end_capture(e, &g), ORDO_OK);
    cr_assert_eq(ordo_opr_push(e, outside_reader, NULL, &r, 1, NULL, 0, NULL), ORDO_OK);
    cr_assert_eq(ordo_graph_launch(g), ORDO_OK);
    cr_expect_eq(ordo_wait_for_all(e), ORDO_OK, "kind %d: %s", kKinds[k],
                 ordo_last_error_message());
    int32_t code = -1;
    char buf[64];
    cr_assert_eq(ordo_var_get_error(e, r, &code, buf, sizeof buf), ORDO_OK);
    cr_expect_eq(code, 0);
    cr_assert_eq(ordo_graph_destroy(g), ORDO_OK);
    ordo_engine_destroy(e);
  }
}

/* Each op of a chain sees its own name in ordo_exec_get_info, and its failure carries it. */
static char g_seen[3][ORDO_NAME_MAX + 1];
static int32_t note_name(ordo_exec* x, void* ud) {
  int i = (int)(intptr_t)ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(x, &info) == ORDO_OK && info.name) {
    snprintf(g_seen[i], sizeof g_seen[i], "%s", info.name);
  }
  return i == 2 ? 4 : 0;
}

Test(graph_chain, each_op_of_a_chain_keeps_its_own_name) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var a;
  cr_assert_eq(ordo_var_new(e, &a), ORDO_OK);
  memset(g_seen, 0, sizeof g_seen);
  static const char* const names[3] = {"first", "", "third"};
  cr_assert_eq(ordo_graph_begin_capture(e), ORDO_OK);
  for (int i = 0; i < 3; i++) {
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.name = names[i];
    ordo_opr_push(e, note_name, (void*)(intptr_t)i, NULL, 0, &a, 1, &o);
  }
  ordo_graph* g = NULL;
  cr_assert_eq(ordo_graph_end_capture(e, &g), ORDO_OK);
  cr_assert_eq(ordo_graph_launch(g), ORDO_OK);
  cr_expect_eq(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
  cr_expect(strstr(ordo_last_error_message(), "third") != NULL, "%s", ordo_last_error_message());
  for (int i = 0; i < 3; i++) {
    cr_expect(strcmp(g_seen[i], names[i]) == 0, "op %d saw '%s'", i, g_seen[i]);
  }
  cr_assert_eq(ordo_graph_destroy(g), ORDO_OK);
  ordo_engine_destroy(e);
}
