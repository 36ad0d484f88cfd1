/*
 * Scripted pipelines for the pipeline tests, in the notation of pipeline.md §6: a case fixes the
 * lines, the pipe types, a stop rule ("pipe 0 stops when a fresh token id equals K") and a
 * deferral script (token, num_deferrals) -> targets; a pipe-0 invocation the script does not name
 * accepts its token. A run records
 *   - the pipe-0 invocation sequence, as "token/nd@Lline" with " D{targets}" when it deferred
 *     and " STOP" when it stopped (the spec's strings, compared as strings),
 *   - per later pipe, the tokens in the order the pipe ran them, with their line and nd.
 * Callbacks never assert (they run on worker threads): they record, and count anything wrong in
 * `bad` with a note; the test thread checks after the run (ps_check). Random delays (a yield or a
 * short spin in some callbacks) shake the schedule when `jitter` is set.
 */
#ifndef ORDO_TESTS_PIPELINE_SCRIPT_H
#define ORDO_TESTS_PIPELINE_SCRIPT_H

#include <criterion/criterion.h>
#include <sched.h>
#include <stdarg.h>

#include "test_util.h"

#define PS_MAX_RULES 16
#define PS_MAX_TARGETS 4
#define PS_MAX_PIPES 4
#define PS_MAX_EVENTS 256

/* One line of a deferral script: in the invocation of `token` whose num_deferrals is `nd`, call
 * defer on each target (in order), then stop when `then_stop`. */
typedef struct ps_rule {
  uint64_t token;
  uint32_t nd;
  int ntargets;
  uint64_t targets[PS_MAX_TARGETS];
  int then_stop;
} ps_rule;

typedef struct ps_script {
  uint32_t lines;
  int num_pipes;
  int32_t types[PS_MAX_PIPES];
  uint64_t stop_at; /* pipe 0 stops when the fresh token id equals this */
  int nrules;
  ps_rule rules[PS_MAX_RULES];
  /* A pipe (>= 1; 0 for none) that fails with fail_code at fail_token. */
  int fail_pipe;
  uint64_t fail_token;
  int32_t fail_code;
  /* A pipe (>= 1; 0 for none) that calls ordo_pipeflow_stop and ordo_pipeflow_defer at
   * misuse_token and records what they return. */
  int misuse_pipe;
  uint64_t misuse_token;
  /* A pipe (>= 1; 0 for none) that sleeps sleep_ms at sleep_token. */
  int sleep_pipe;
  uint64_t sleep_token;
  uint32_t sleep_ms;
  int jitter;
} ps_script;

typedef struct ps_event {
  uint64_t token;
  uint32_t line;
  uint32_t nd;
} ps_event;

typedef struct ps_record {
  const ps_script* s;
  /* pipe 0: its steps never overlap, so plain writes (ordered by the pipeline's handoffs) */
  char pipe0[8192];
  size_t pipe0_len;
  ps_event accepted[PS_MAX_EVENTS];
  int num_accepted;
  /* later pipes: parallel ones run callbacks at once, so an atomic slot counter */
  atomic_int n[PS_MAX_PIPES];
  ps_event ev[PS_MAX_PIPES][PS_MAX_EVENTS];
  atomic_int running[PS_MAX_PIPES]; /* callbacks of the pipe running now */
  atomic_int bad;
  char bad_note[256];
  atomic_int misuse_stop, misuse_defer; /* statuses; -1 until called */
  atomic_int sleeper_done;              /* the sleeping callback has returned */
  atomic_int resumed_before_sleeper;    /* pipe 0 saw a resumed token while the sleeper slept */
  uint64_t watch_token;                 /* resumed token whose invocation is watched (T7b) */
  atomic_int watch_before_sleeper;      /* its pipe-1 callback ran while the sleeper slept */
} ps_record;

typedef struct ps_ctx {
  ps_record* r;
  int pipe;
} ps_ctx;

static inline void ps_note_bad(ps_record* r, const char* what) {
  if (atomic_fetch_add(&r->bad, 1) == 0) snprintf(r->bad_note, sizeof r->bad_note, "%s", what);
}

/* A cheap thread-local random number for delays. */
static inline uint32_t ps_rand(void) {
  static _Thread_local uint64_t x = 0;
  if (x == 0) x = tu_now_ns() ^ ((uint64_t)tu_gettid() << 32) ^ 0x9E3779B97F4A7C15ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return (uint32_t)(x >> 16);
}

/* Now and then a yield, or a spin of up to ~20 us: enough to reorder workers. */
static inline void ps_jitter(const ps_script* s) {
  if (!s->jitter) return;
  uint32_t r = ps_rand() % 100;
  if (r < 15) {
    sched_yield();
  } else if (r < 25) {
    uint64_t until = tu_now_ns() + (ps_rand() % 20000);
    while (tu_now_ns() < until) {
    }
  }
}

static inline void ps_append(ps_record* r, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void ps_append(ps_record* r, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = sizeof r->pipe0 - r->pipe0_len;
  int n = vsnprintf(r->pipe0 + r->pipe0_len, room, fmt, ap);
  va_end(ap);
  if (n > 0) r->pipe0_len += (size_t)n < room ? (size_t)n : room - 1;
}

static inline const ps_rule* ps_rule_for(const ps_script* s, uint64_t token, uint32_t nd) {
  for (int i = 0; i < s->nrules; i++) {
    if (s->rules[i].token == token && s->rules[i].nd == nd) return &s->rules[i];
  }
  return NULL;
}

static int32_t ps_pipe0(ordo_pipeflow* pf, void* user_data) {
  ps_ctx* c = (ps_ctx*)user_data;
  ps_record* r = c->r;
  const ps_script* s = r->s;
  if (atomic_fetch_add(&r->running[0], 1) != 0) ps_note_bad(r, "two pipe-0 callbacks at once");
  ps_jitter(s);
  uint64_t t = ordo_pipeflow_token(pf);
  uint32_t nd = ordo_pipeflow_num_deferrals(pf);
  uint32_t line = ordo_pipeflow_line(pf);
  if (ordo_pipeflow_pipe(pf) != 0) ps_note_bad(r, "pipe 0 told another pipe index");
  if (line >= s->lines) ps_note_bad(r, "pipe 0 told a line out of range");
  ps_append(r, "%s%llu/%u@L%u", r->pipe0_len ? " " : "", (unsigned long long)t, nd, line);
  if (t == r->watch_token && nd > 0 && !atomic_load(&r->sleeper_done)) {
    atomic_store(&r->resumed_before_sleeper, 1);
  }
  const ps_rule* rule = ps_rule_for(s, t, nd);
  if (t == s->stop_at && nd == 0) {
    if (ordo_pipeflow_stop(pf) != ORDO_OK) ps_note_bad(r, "stop failed in pipe 0");
    ps_append(r, " STOP");
  } else if (rule) {
    if (rule->ntargets) ps_append(r, " D{");
    for (int i = 0; i < rule->ntargets; i++) {
      if (ordo_pipeflow_defer(pf, rule->targets[i]) != ORDO_OK) ps_note_bad(r, "defer failed");
      ps_append(r, "%s%llu", i ? "," : "", (unsigned long long)rule->targets[i]);
    }
    if (rule->ntargets) ps_append(r, "}");
    if (rule->then_stop) {
      if (ordo_pipeflow_stop(pf) != ORDO_OK) ps_note_bad(r, "stop failed in pipe 0");
      ps_append(r, " STOP");
    }
  } else if (r->num_accepted < PS_MAX_EVENTS) {
    r->accepted[r->num_accepted++] = (ps_event){t, line, nd};
  }
  atomic_fetch_sub(&r->running[0], 1);
  return 0;
}

static int32_t ps_later(ordo_pipeflow* pf, void* user_data) {
  ps_ctx* c = (ps_ctx*)user_data;
  ps_record* r = c->r;
  const ps_script* s = r->s;
  const int f = c->pipe;
  int was = atomic_fetch_add(&r->running[f], 1);
  if (was != 0 && s->types[f] == ORDO_PIPE_SERIAL)
    ps_note_bad(r, "a serial pipe ran twice at once");
  if (was >= (int)s->lines) ps_note_bad(r, "more callbacks of a pipe at once than lines");
  ps_jitter(s);
  uint64_t t = ordo_pipeflow_token(pf);
  if (ordo_pipeflow_pipe(pf) != (uint32_t)f) ps_note_bad(r, "a later pipe told the wrong index");
  if (f == 1 && t == r->watch_token && !atomic_load(&r->sleeper_done)) {
    atomic_store(&r->watch_before_sleeper, 1);
  }
  int i = atomic_fetch_add(&r->n[f], 1);
  if (i < PS_MAX_EVENTS) {
    r->ev[f][i] = (ps_event){t, ordo_pipeflow_line(pf), ordo_pipeflow_num_deferrals(pf)};
  }
  if (f == s->misuse_pipe && t == s->misuse_token) {
    atomic_store(&r->misuse_stop, ordo_pipeflow_stop(pf));
    atomic_store(&r->misuse_defer, ordo_pipeflow_defer(pf, t + 1));
  }
  if (f == s->sleep_pipe && t == s->sleep_token) {
    tu_sleep_ms(s->sleep_ms);
    atomic_store(&r->sleeper_done, 1);
  }
  ps_jitter(s);
  atomic_fetch_sub(&r->running[f], 1);
  if (f == s->fail_pipe && t == s->fail_token) return s->fail_code;
  return 0;
}

/* The ordo_pipe list of a script, with its contexts. */
typedef struct ps_pipes {
  ordo_pipe pipes[PS_MAX_PIPES];
  ps_ctx ctx[PS_MAX_PIPES];
} ps_pipes;

static inline void ps_pipes_make(ps_pipes* pp, ps_record* r, const ps_script* s) {
  for (int f = 0; f < s->num_pipes; f++) {
    pp->ctx[f] = (ps_ctx){r, f};
    pp->pipes[f] = (ordo_pipe){s->types[f], f == 0 ? ps_pipe0 : ps_later, &pp->ctx[f]};
  }
}

static inline void ps_record_init(ps_record* r, const ps_script* s) {
  memset(r, 0, sizeof *r);
  r->s = s;
  r->watch_token = UINT64_MAX;
  atomic_store(&r->misuse_stop, -1);
  atomic_store(&r->misuse_defer, -1);
}

/* "0 1 3" from the tokens of events, or their lines, or "t:nd" for those with nd > 0. */
enum ps_what { PS_TOKENS, PS_LINES, PS_NDS };
static inline void ps_format(const ps_event* ev, int n, enum ps_what what, char* out, size_t cap) {
  size_t len = 0;
  out[0] = 0;
  for (int i = 0; i < n && len < cap; i++) {
    int w = 0;
    if (what == PS_TOKENS) {
      w = snprintf(out + len, cap - len, "%s%llu", len ? " " : "", (unsigned long long)ev[i].token);
    } else if (what == PS_LINES) {
      w = snprintf(out + len, cap - len, "%s%u", len ? " " : "", ev[i].line);
    } else if (ev[i].nd > 0) {
      w = snprintf(out + len, cap - len, "%s%llu:%u", len ? " " : "",
                   (unsigned long long)ev[i].token, ev[i].nd);
    }
    if (w > 0) len += (size_t)w;
  }
}

static inline int ps_cmp_event(const void* a, const void* b) {
  const ps_event* x = a;
  const ps_event* y = b;
  return (x->token > y->token) - (x->token < y->token);
}

/* What a case must produce. NULL strings are not checked. */
typedef struct ps_expect {
  const char* pipe0;
  const char* accepted; /* the tokens in accepted order (= every serial pipe's order) */
  const char* lines;    /* their lines */
  const char* nds;      /* "token:nd" for each token with nd > 0 */
  uint64_t num_tokens;
  ordo_status status;
  const char* dropped; /* the dropped ids, ascending, "" for none */
} ps_expect;

/* Checks one run's record against e: every later pipe saw exactly the accepted tokens, serial
 * ones in accepted order, each with its accepted line and nd. */
static inline void ps_check(ordo_pipeline* p, const ps_record* r, const ps_expect* e,
                            ordo_status status, const char* ctx) {
  const ps_script* s = r->s;
  char got[2048], want[2048];
  cr_assert_eq(atomic_load(&r->bad), 0, "%s: a callback saw: %s", ctx, r->bad_note);
  if (s->misuse_pipe) { /* stop and defer in a later pipe: refused, and the run went on */
    cr_assert_eq(atomic_load(&r->misuse_stop), ORDO_ERR_INVALID_STATE, "%s: stop in pipe %d", ctx,
                 s->misuse_pipe);
    cr_assert_eq(atomic_load(&r->misuse_defer), ORDO_ERR_INVALID_STATE, "%s: defer in pipe %d", ctx,
                 s->misuse_pipe);
  }
  cr_assert_eq(status, e->status, "%s: run returned %s, want %s (%s)", ctx,
               ordo_status_string(status), ordo_status_string(e->status),
               ordo_last_error_message());
  if (e->pipe0) cr_assert_str_eq(r->pipe0, e->pipe0, "%s: pipe-0 invocations", ctx);
  const int na = r->num_accepted;
  if (e->accepted) {
    ps_format(r->accepted, na, PS_TOKENS, got, sizeof got);
    cr_assert_str_eq(got, e->accepted, "%s: accepted order", ctx);
  }
  if (e->lines) {
    ps_format(r->accepted, na, PS_LINES, got, sizeof got);
    cr_assert_str_eq(got, e->lines, "%s: lines of the accepted tokens", ctx);
  }
  if (e->nds) {
    ps_format(r->accepted, na, PS_NDS, got, sizeof got);
    cr_assert_str_eq(got, e->nds, "%s: num_deferrals of the accepted tokens", ctx);
  }
  for (int f = 1; f < s->num_pipes; f++) {
    int n = atomic_load(&r->n[f]);
    cr_assert_eq(n, na, "%s: pipe %d ran %d tokens, pipe 0 accepted %d", ctx, f, n, na);
    ps_event mine[PS_MAX_EVENTS], acc[PS_MAX_EVENTS];
    memcpy(mine, r->ev[f], sizeof(ps_event) * (size_t)n);
    memcpy(acc, r->accepted, sizeof(ps_event) * (size_t)na);
    if (s->types[f] == ORDO_PIPE_PARALLEL) { /* any order: compare as sets */
      qsort(mine, (size_t)n, sizeof mine[0], ps_cmp_event);
      qsort(acc, (size_t)na, sizeof acc[0], ps_cmp_event);
    }
    for (int k = 0; k < 3; k++) {
      ps_format(mine, n, (enum ps_what)k, got, sizeof got);
      ps_format(acc, na, (enum ps_what)k, want, sizeof want);
      cr_assert_str_eq(got, want, "%s: pipe %d (%s) against pipe 0's acceptances (%s)", ctx, f,
                       s->types[f] == ORDO_PIPE_SERIAL ? "serial" : "parallel",
                       k == 0   ? "tokens"
                       : k == 1 ? "lines"
                                : "num_deferrals");
    }
  }
  uint64_t nt = 0;
  cr_assert_eq(ordo_pipeline_num_tokens(p, &nt), ORDO_OK);
  cr_assert_eq(nt, e->num_tokens, "%s: num_tokens %llu, want %llu", ctx, (unsigned long long)nt,
               (unsigned long long)e->num_tokens);
  if (e->dropped) {
    uint64_t count = 0, ids[64];
    cr_assert_eq(ordo_pipeline_dropped(p, &count, ids, 64), ORDO_OK);
    ps_event ev[64];
    for (uint64_t i = 0; i < count && i < 64; i++) ev[i] = (ps_event){ids[i], 0, 0};
    ps_format(ev, (int)(count < 64 ? count : 64), PS_TOKENS, got, sizeof got);
    cr_assert_str_eq(got, e->dropped, "%s: dropped ids", ctx);
  }
}

/* How many times each case runs per worker count: 200 (issue #23), fewer where the code runs
 * tens of times slower and one thread at a time (valgrind), so the suite stays within its time. */
static inline int ps_reps(void) {
  return tu_under_valgrind() ? 5 : 200;
}

#endif /* ORDO_TESTS_PIPELINE_SCRIPT_H */
