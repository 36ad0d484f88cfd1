/* Capture and replay against the dynamic path (issue #26 item 3): the same random programs
 * (reads, writes, priorities, prepared ops, failures, deferred completions inline and from other
 * threads), pushed directly twice and captured once then launched twice, must give the same
 * orders (the version of each var every op saw), the same ops run, the same errors on every
 * var, the same failed and skipped counts and the same ordo_wait_for_all status, on the naive,
 * pooled and per_device engines. */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "test_util.h"

TestSuite(graph_equiv, .timeout = 120.0);

#define MAX_OPS 40
#define MAX_VARS 6
#define ROUNDS 2

enum { DEFER_NONE, DEFER_INLINE, DEFER_THREAD };

struct prog_op {
  int nr, nw;
  int reads[3], writes[3];
  int32_t code; /* 0: succeeds */
  int defer;
  int prepared;
  int has_free;
  int32_t priority;
};

struct program {
  int nvars, nops;
  struct prog_op ops[MAX_OPS];
};

/* What one execution mode saw. */
struct obs {
  int version[MAX_VARS]; /* per var: bumped by each writer (writers never overlap) */
  atomic_int calls[MAX_OPS];
  int seen[MAX_OPS][ROUNDS][MAX_VARS]; /* the version of each var the call saw, -1: none */
  int32_t var_code[MAX_VARS];
  ordo_status wait_all;
  uint64_t failed, skipped;
};

struct op_ctx {
  struct obs* obs;
  const struct program* prog;
  int op;
};

static atomic_int g_frees;
static void count_free(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_frees, 1);
}

static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int pick_distinct(uint64_t* s, int nvars, int n, int* out, const int* avoid, int navoid) {
  int k = 0;
  for (int tries = 0; tries < 16 && k < n; tries++) {
    int v = (int)(rng_next(s) % (uint64_t)nvars), dup = 0;
    for (int j = 0; j < k; j++) dup |= out[j] == v;
    for (int j = 0; j < navoid; j++) dup |= avoid[j] == v;
    if (!dup) out[k++] = v;
  }
  return k;
}

static void make_program(uint64_t seed, struct program* p) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  memset(p, 0, sizeof *p);
  p->nvars = 2 + (int)(rng_next(&s) % (MAX_VARS - 1));
  p->nops = 8 + (int)(rng_next(&s) % (MAX_OPS - 7));
  for (int i = 0; i < p->nops; i++) {
    struct prog_op* o = &p->ops[i];
    o->nw = pick_distinct(&s, p->nvars, (int)(rng_next(&s) % 3), o->writes, NULL, 0);
    o->nr = pick_distinct(&s, p->nvars, (int)(rng_next(&s) % 3), o->reads, o->writes, o->nw);
    o->code = rng_next(&s) % 12 == 0 ? 3 + (int32_t)(rng_next(&s) % 5) : 0;
    int d = (int)(rng_next(&s) % 10);
    o->defer = d == 0 ? DEFER_INLINE : d == 1 ? DEFER_THREAD : DEFER_NONE;
    o->prepared = rng_next(&s) % 5 == 0;
    o->has_free = rng_next(&s) % 3 == 0;
    o->priority = (int32_t)(rng_next(&s) % 3) - 1;
  }
}

struct late {
  ordo_completion c;
  int32_t code;
};
static void* complete_late(void* p) {
  struct late l = *(struct late*)p;
  free(p);
  tu_sleep_us(200);
  ordo_complete(l.c, l.code, "late failure");
  return NULL;
}

static int32_t program_op(ordo_exec* x, void* ud) {
  struct op_ctx* c = ud;
  const struct prog_op* o = &c->prog->ops[c->op];
  struct obs* obs = c->obs;
  int call = atomic_fetch_add(&obs->calls[c->op], 1);
  if (call < ROUNDS) {
    for (int i = 0; i < o->nr; i++) obs->seen[c->op][call][o->reads[i]] = obs->version[o->reads[i]];
    for (int i = 0; i < o->nw; i++) {
      int v = o->writes[i];
      obs->seen[c->op][call][v] = obs->version[v];
      obs->version[v] = obs->version[v] + 1;
    }
  }
  if (o->defer == DEFER_NONE) return o->code;
  ordo_completion done = 0;
  if (ordo_exec_defer(x, &done) != ORDO_OK) return 99;
  if (o->defer == DEFER_INLINE) {
    ordo_complete(done, o->code, "inline failure");
  } else {
    struct late* l = malloc(sizeof *l);
    l->c = done;
    l->code = o->code;
    pthread_t t;
    pthread_create(&t, NULL, complete_late, l);
    pthread_detach(t);
  }
  return 0;
}

struct trial {
  ordo_engine* e;
  const struct program* prog;
  struct obs* obs;
  ordo_var vars[MAX_VARS];
  ordo_opr oprs[MAX_OPS];
  struct op_ctx ctx[MAX_OPS];
};

static void trial_setup(struct trial* t, ordo_engine* e, const struct program* p, struct obs* obs) {
  memset(obs, 0, sizeof *obs);
  memset(obs->seen, 0xff, sizeof obs->seen);
  t->e = e;
  t->prog = p;
  t->obs = obs;
  for (int v = 0; v < p->nvars; v++) cr_assert_eq(ordo_var_new(e, &t->vars[v]), ORDO_OK);
  for (int i = 0; i < p->nops; i++) {
    const struct prog_op* o = &p->ops[i];
    t->ctx[i] = (struct op_ctx){obs, p, i};
    t->oprs[i] = 0;
    if (!o->prepared) continue;
    ordo_var r[3], w[3];
    for (int k = 0; k < o->nr; k++) r[k] = t->vars[o->reads[k]];
    for (int k = 0; k < o->nw; k++) w[k] = t->vars[o->writes[k]];
    cr_assert_eq(ordo_opr_new(e, program_op, &t->ctx[i], r, (size_t)o->nr, w, (size_t)o->nw, NULL,
                              &t->oprs[i]),
                 ORDO_OK);
  }
}

/* Pushes the program once (directly, or into an open capture). */
static void push_program(struct trial* t) {
  const struct program* p = t->prog;
  for (int i = 0; i < p->nops; i++) {
    const struct prog_op* o = &p->ops[i];
    if (o->prepared) {
      cr_assert_eq(ordo_opr_push_prepared(t->e, t->oprs[i], o->priority), ORDO_OK, "%s",
                   ordo_last_error_message());
      continue;
    }
    ordo_var r[3], w[3];
    for (int k = 0; k < o->nr; k++) r[k] = t->vars[o->reads[k]];
    for (int k = 0; k < o->nw; k++) w[k] = t->vars[o->writes[k]];
    ordo_push_opts opts;
    ordo_push_opts_init(&opts);
    opts.priority = o->priority;
    opts.name = "prog";
    if (o->has_free) opts.free_fn = count_free;
    cr_assert_eq(
        ordo_opr_push(t->e, program_op, &t->ctx[i], r, (size_t)o->nr, w, (size_t)o->nw, &opts),
        ORDO_OK, "%s", ordo_last_error_message());
  }
}

static void stats_now(ordo_engine* e, uint64_t* failed, uint64_t* skipped) {
  ordo_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  cr_assert_eq(ordo_engine_stats(e, &st), ORDO_OK);
  *failed = st.failed;
  *skipped = st.skipped;
}

static void trial_finish(struct trial* t, uint64_t failed0, uint64_t skipped0) {
  t->obs->wait_all = ordo_wait_for_all(t->e);
  stats_now(t->e, &t->obs->failed, &t->obs->skipped);
  t->obs->failed -= failed0;
  t->obs->skipped -= skipped0;
  for (int v = 0; v < t->prog->nvars; v++) {
    cr_assert_eq(ordo_var_get_error(t->e, t->vars[v], &t->obs->var_code[v], NULL, 0), ORDO_OK);
    cr_assert_eq(ordo_var_delete(t->e, t->vars[v]), ORDO_OK);
  }
  for (int i = 0; i < t->prog->nops; i++) {
    if (t->oprs[i]) cr_assert_eq(ordo_opr_delete(t->e, t->oprs[i]), ORDO_OK);
  }
}

static void run_dynamic(ordo_engine* e, const struct program* p, struct obs* obs) {
  struct trial t;
  trial_setup(&t, e, p, obs);
  uint64_t f0, s0;
  stats_now(e, &f0, &s0);
  for (int r = 0; r < ROUNDS; r++) push_program(&t);
  trial_finish(&t, f0, s0);
}

static void run_replayed(ordo_engine* e, const struct program* p, struct obs* obs) {
  struct trial t;
  trial_setup(&t, e, p, obs);
  int with_free = 0;
  for (int i = 0; i < p->nops; i++) with_free += !p->ops[i].prepared && p->ops[i].has_free;
  atomic_store(&g_frees, 0);
  uint64_t f0, s0;
  stats_now(e, &f0, &s0);
  cr_assert_eq(ordo_graph_begin_capture(e), ORDO_OK, "%s", ordo_last_error_message());
  push_program(&t);
  ordo_graph* g = NULL;
  cr_assert_eq(ordo_graph_end_capture(e, &g), ORDO_OK, "%s", ordo_last_error_message());
  for (int r = 0; r < ROUNDS; r++) {
    cr_assert_eq(ordo_graph_launch(g), ORDO_OK, "%s", ordo_last_error_message());
  }
  trial_finish(&t, f0, s0);
  cr_expect_eq(atomic_load(&g_frees), 0, "free_fns run at destroy, not per launch");
  cr_assert_eq(ordo_graph_destroy(g), ORDO_OK, "%s", ordo_last_error_message());
  cr_expect_eq(atomic_load(&g_frees), with_free);
}

/* Read-only ops of two rounds may run in either order: compare each op's calls as a set. */
static void sorted_pair(const int* a, const int* b, int out[2]) {
  out[0] = *a < *b ? *a : *b;
  out[1] = *a < *b ? *b : *a;
}

static void compare(uint64_t seed, const struct program* p, const struct obs* d,
                    const struct obs* g) {
  cr_expect_eq(d->wait_all, g->wait_all, "seed %llu: wait_for_all %s vs %s",
               (unsigned long long)seed, ordo_status_string(d->wait_all),
               ordo_status_string(g->wait_all));
  cr_expect_eq(d->failed, g->failed, "seed %llu: failed", (unsigned long long)seed);
  cr_expect_eq(d->skipped, g->skipped, "seed %llu: skipped", (unsigned long long)seed);
  for (int v = 0; v < p->nvars; v++) {
    cr_expect_eq(d->var_code[v], g->var_code[v], "seed %llu: var %d error",
                 (unsigned long long)seed, v);
    cr_expect_eq(d->version[v], g->version[v], "seed %llu: var %d writes", (unsigned long long)seed,
                 v);
  }
  for (int i = 0; i < p->nops; i++) {
    cr_expect_eq(atomic_load(&d->calls[i]), atomic_load(&g->calls[i]), "seed %llu: op %d calls",
                 (unsigned long long)seed, i);
    for (int v = 0; v < p->nvars; v++) {
      int a[2], b[2];
      sorted_pair(&d->seen[i][0][v], &d->seen[i][1][v], a);
      sorted_pair(&g->seen[i][0][v], &g->seen[i][1][v], b);
      cr_expect(a[0] == b[0] && a[1] == b[1],
                "seed %llu: op %d saw var %d at versions {%d,%d} pushed, {%d,%d} replayed",
                (unsigned long long)seed, i, v, a[0], a[1], b[0], b[1]);
    }
  }
}

static void equivalence(int32_t kind, int trials) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK);
  static struct program prog;
  static struct obs dyn, rep;
  for (int s = 1; s <= trials; s++) {
    make_program((uint64_t)s + (uint64_t)kind * 1000u, &prog);
    run_dynamic(e, &prog, &dyn);
    run_replayed(e, &prog, &rep);
    compare((uint64_t)s, &prog, &dyn, &rep);
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(graph_equiv, naive) {
  equivalence(ORDO_ENGINE_NAIVE, 60);
}
Test(graph_equiv, pooled) {
  equivalence(ORDO_ENGINE_POOLED, 60);
}
Test(graph_equiv, per_device) {
  equivalence(ORDO_ENGINE_PER_DEVICE, 60);
}
