/*
 * Stress test with a sequential-model checker (SPEC §2, §3, §4, §6).
 *
 * Several pusher threads push >= 100,000 random ops on a few dozen shared vars. Each push (and
 * each ordo_var_clear_error) happens under one global mutex together with the model update, so
 * the model's order is exactly the engine's linearization (§2.4). At push time the model
 * predicts, for each op:
 *   - whether it runs or is skipped (a var it touches is poisoned: §3);
 *   - for every var it touches, the "version" the var must have when it runs (the number of
 *     writes by ops that ran, pushed before it on that var).
 * When an op runs it checks, for every var it touches, the current version against the
 * prediction, and that no conflicting op is inside the var at the same time (writers exclude
 * everyone, readers exclude writers). Writers bump the version before they complete (for deferred
 * ops: on a separate completer thread, just before ordo_complete). About 1% of ops fail; the model
 * poisons what they mutate and what skipped ops mutate, and periodically clears errors (ordered
 * like a write). Every disagreement is counted in an atomic on whatever thread sees it, and the
 * test thread asserts at the end (never cr_assert on engine or pusher threads: ABI.md §6).
 * Every op has a free_fn, which counts it as finished: after ordo_wait_for_all, each op pushed
 * must have finished exactly once, and those that finished without running must be exactly the
 * ones the model said are skipped.
 */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stress/stress_rng.h" /* the same xorshift64* as make stress */

#define NV 48            /* vars */
#define NPUSHERS 3       /* pusher threads, all sharing every var */
#define TOTAL_OPS 120000 /* ops pushed in all (>= 100,000) */
#define MAX_READS 3
#define MAX_WRITES 2
#define MAX_TOUCH (MAX_READS + MAX_WRITES)
#define CLEAR_EVERY 250       /* every CLEAR_EVERY ops: clear errors on every poisoned var */
#define CLEAR_SOME_EVERY 5000 /* every CLEAR_SOME_EVERY ops: also clear a few random vars */
#define FAIL_BASE 1000        /* injected failure codes are FAIL_BASE + small number */
#define QUIET_TAIL 1000       /* no clears in the last QUIET_TAIL ops: some vars end poisoned */

/* One op as the model sees it (vars deduplicated; a var in both lists is mutable). */
typedef struct op_rec {
  uint32_t seq;
  uint8_t n;                      /* distinct vars touched */
  uint8_t var[MAX_TOUCH];         /* var indices */
  uint8_t is_mut[MAX_TOUCH];      /* 1 = mutated (exclusive), 0 = read only */
  uint32_t expect_ver[MAX_TOUCH]; /* predicted version of var[i] when the op runs */
  uint8_t predicted_run;          /* 0 = must be skipped */
  uint8_t defer;                  /* 0 = sync, 1 = defer to completer, 2 = defer and complete
                                     from inside the callback */
  uint8_t ret_garbage;            /* deferred: return non-zero from fn (must be ignored) */
  int32_t code;                   /* injected failure code (0 = success) */
} op_rec;

typedef struct model_var {
  uint32_t version; /* writes (by ops that run) pushed so far */
  int poisoned;     /* predicted error state */
  int32_t code;     /* predicted error code when code_known */
  int code_known;   /* the code is determined (not a mix of inherited codes) */
} model_var;

typedef struct completion_item {
  ordo_completion c;
  op_rec* op;
} completion_item;

/* ---- shared state (each Criterion test runs in its own process; reset at test start) ---- */
static ordo_engine* g_engine;
static ordo_var g_vh[NV];
static op_rec g_ops[TOTAL_OPS];
static _Atomic uint32_t g_runs[TOTAL_OPS];
static _Atomic uint32_t g_frees[TOTAL_OPS]; /* free_fn calls per op */

static _Atomic uint32_t g_version[NV]; /* the "data": bumped by writers */
static atomic_int g_writers_in[NV];
static atomic_int g_readers_in[NV];

static atomic_ulong g_mismatch;   /* any model disagreement seen on any thread */
static atomic_ulong g_api_errors; /* an ordo call failed where it must not */
static atomic_ulong g_total_runs;
static atomic_ulong g_total_frees;
static atomic_ulong g_frees_unrun; /* free_fn calls of ops that had not run: skipped */

static pthread_mutex_t g_push_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_seq;                                                  /* under g_push_mu */
static model_var g_model[NV];                                           /* under g_push_mu */
static unsigned long g_pred_runs, g_pred_skips, g_pred_fails, g_clears; /* under g_push_mu */
static int32_t g_prop_choice; /* bit mask of extra props to use */

/* first few diagnostics */
static pthread_mutex_t g_diag_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_diag[4096];
static size_t g_diag_len;
static int g_diag_count;

/* completer queue (capacity: every op defers at most once) */
static pthread_mutex_t g_q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_q_cv = PTHREAD_COND_INITIALIZER;
static completion_item g_q[TOTAL_OPS];
static size_t g_q_head, g_q_tail;
static int g_q_stop;

static void diag(const char* fmt, ...) {
  pthread_mutex_lock(&g_diag_mu);
  if (g_diag_count < 12 && g_diag_len < sizeof g_diag - 1) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_diag + g_diag_len, sizeof g_diag - g_diag_len, fmt, ap);
    va_end(ap);
    if (n > 0) {
      g_diag_len += (size_t)n;
      if (g_diag_len >= sizeof g_diag) g_diag_len = sizeof g_diag - 1;
    }
  }
  g_diag_count++;
  pthread_mutex_unlock(&g_diag_mu);
}

static void mismatch(const op_rec* op, const char* what, int vi, long got, long want) {
  atomic_fetch_add(&g_mismatch, 1);
  diag("  op #%u: %s (var %d: got %ld, expected %ld)\n", op->seq, what, vi, got, want);
}

/* ---- running side ---- */

static void enter_vars(const op_rec* op) {
  for (int i = 0; i < op->n; i++) {
    int v = op->var[i];
    if (op->is_mut[i]) {
      int w = atomic_fetch_add(&g_writers_in[v], 1);
      int r = atomic_load(&g_readers_in[v]);
      if (w != 0) mismatch(op, "writer overlaps another writer", v, w, 0);
      if (r != 0) mismatch(op, "writer overlaps readers", v, r, 0);
    } else {
      atomic_fetch_add(&g_readers_in[v], 1);
      int w = atomic_load(&g_writers_in[v]);
      if (w != 0) mismatch(op, "reader overlaps a writer", v, w, 0);
    }
    uint32_t ver = atomic_load_explicit(&g_version[v], memory_order_relaxed);
    if (ver != op->expect_ver[i]) {
      mismatch(op, op->is_mut[i] ? "writer saw wrong version" : "reader saw wrong version", v,
               (long)ver, (long)op->expect_ver[i]);
    }
  }
}

/* Bumps versions of the vars written and leaves the vars; called before the op completes. */
static void finish_vars(const op_rec* op) {
  for (int i = 0; i < op->n; i++) {
    int v = op->var[i];
    if (op->is_mut[i]) {
      uint32_t ver = atomic_load_explicit(&g_version[v], memory_order_relaxed);
      atomic_store_explicit(&g_version[v], ver + 1, memory_order_relaxed);
      atomic_fetch_sub(&g_writers_in[v], 1);
    } else {
      atomic_fetch_sub(&g_readers_in[v], 1);
    }
  }
}

static void queue_push(ordo_completion c, op_rec* op) {
  pthread_mutex_lock(&g_q_mu);
  g_q[g_q_tail % TOTAL_OPS].c = c;
  g_q[g_q_tail % TOTAL_OPS].op = op;
  g_q_tail++;
  pthread_cond_signal(&g_q_cv);
  pthread_mutex_unlock(&g_q_mu);
}

static void* completer_main(void* arg) {
  (void)arg;
  unsigned long k = 0;
  for (;;) {
    pthread_mutex_lock(&g_q_mu);
    while (g_q_head == g_q_tail && !g_q_stop) pthread_cond_wait(&g_q_cv, &g_q_mu);
    if (g_q_head == g_q_tail && g_q_stop) {
      pthread_mutex_unlock(&g_q_mu);
      break;
    }
    completion_item it = g_q[g_q_head % TOTAL_OPS];
    g_q_head++;
    pthread_mutex_unlock(&g_q_mu);
    /* complete "shortly after": let the deferring callback return first, most of the time */
    if ((++k & 3) != 0) sched_yield();
    finish_vars(it.op);
    ordo_status st =
        ordo_complete(it.c, it.op->code, it.op->code ? "injected async failure" : NULL);
    if (st != ORDO_OK) {
      atomic_fetch_add(&g_api_errors, 1);
      diag("  op #%u: ordo_complete returned %s\n", it.op->seq, ordo_status_string(st));
    }
    /* a second completion of the same handle must be refused */
    if ((k & 63) == 0) {
      st = ordo_complete(it.c, 0, NULL);
      if (st != ORDO_ERR_INVALID_HANDLE) {
        atomic_fetch_add(&g_api_errors, 1);
        diag("  op #%u: second ordo_complete returned %s, expected INVALID_HANDLE\n", it.op->seq,
             ordo_status_string(st));
      }
    }
  }
  return NULL;
}

/* A little work inside some ops, so that ops overlap and queues build up behind them. */
static void linger(const op_rec* op) {
  if ((op->seq & 15) != 0) return;
  for (int i = 0; i < 2000; i++) {
    if (atomic_load_explicit(&g_version[op->var[0]], memory_order_relaxed) == UINT32_MAX) break;
  }
}

static int32_t op_fn(ordo_exec* exec, void* user_data) {
  op_rec* op = (op_rec*)user_data;
  uint32_t prev = atomic_fetch_add(&g_runs[op->seq], 1);
  atomic_fetch_add(&g_total_runs, 1);
  if (!op->predicted_run) mismatch(op, "predicted-skipped op ran", -1, 1, 0);
  if (prev != 0) mismatch(op, "op ran more than once", -1, (long)prev + 1, 1);
  enter_vars(op);
  if (op->n) linger(op);
  if (op->defer) {
    ordo_completion c = 0;
    ordo_status st = ordo_exec_defer(exec, &c);
    if (st != ORDO_OK) {
      atomic_fetch_add(&g_api_errors, 1);
      diag("  op #%u: ordo_exec_defer returned %s\n", op->seq, ordo_status_string(st));
      finish_vars(op);
      return op->code;
    }
    if (op->defer == 2) {
      finish_vars(op);
      st = ordo_complete(c, op->code, op->code ? "injected inline async failure" : NULL);
      if (st != ORDO_OK) {
        atomic_fetch_add(&g_api_errors, 1);
        diag("  op #%u: inline ordo_complete returned %s\n", op->seq, ordo_status_string(st));
      }
    } else {
      queue_push(c, op);
    }
    /* after defer the return value is ignored (SPEC §3) */
    return op->ret_garbage ? 99 : 0;
  }
  finish_vars(op);
  return op->code;
}

/* Runs once per pushed op, after it ran, failed or was skipped (SPEC §3). */
static void op_free(void* user_data) {
  const op_rec* op = (const op_rec*)user_data;
  uint32_t prev = atomic_fetch_add(&g_frees[op->seq], 1);
  if (prev != 0) mismatch(op, "free_fn called more than once", -1, (long)prev + 1, 1);
  if (atomic_load(&g_runs[op->seq]) == 0) atomic_fetch_add(&g_frees_unrun, 1);
  atomic_fetch_add(&g_total_frees, 1);
}

/* ---- pushing side (model updates under g_push_mu) ---- */

static void clear_var_locked(int v) {
  ordo_status st = ordo_var_clear_error(g_engine, g_vh[v]);
  if (st != ORDO_OK) {
    atomic_fetch_add(&g_api_errors, 1);
    diag("  ordo_var_clear_error(var %d) returned %s\n", v, ordo_status_string(st));
  }
  g_model[v].poisoned = 0;
  g_model[v].code = 0;
  g_model[v].code_known = 1;
  g_clears++;
}

typedef struct pusher_arg {
  uint64_t seed;
  unsigned long pushed;
} pusher_arg;

static void* pusher_main(void* argp) {
  pusher_arg* arg = (pusher_arg*)argp;
  uint64_t rng = arg->seed;
  for (;;) {
    /* choose the op's shape outside the lock */
    ordo_var reads[MAX_READS + 1], writes[MAX_WRITES + 1];
    int ridx[MAX_READS + 1], widx[MAX_WRITES + 1];
    size_t nr = rng_below(&rng, MAX_READS + 1);
    size_t nw = rng_below(&rng, MAX_WRITES + 1);
    for (size_t i = 0; i < nr; i++) ridx[i] = (int)rng_below(&rng, NV);
    for (size_t i = 0; i < nw; i++) widx[i] = (int)rng_below(&rng, NV);
    uint32_t r = rng_below(&rng, 1000);
    if (r < 40 && nr >= 2)
      ridx[1] = ridx[0]; /* duplicate read */
    else if (r < 80 && nw >= 2)
      widx[1] = widx[0]; /* duplicate write */
    else if (r < 140 && nr >= 1 && nw >= 1)
      ridx[0] = widx[0]; /* var in both lists */
    for (size_t i = 0; i < nr; i++) reads[i] = g_vh[ridx[i]];
    for (size_t i = 0; i < nw; i++) writes[i] = g_vh[widx[i]];
    uint32_t fr = rng_below(&rng, 1000);
    int32_t code = fr < 10 ? (int32_t)(FAIL_BASE + rng_below(&rng, 3)) : 0; /* ~1% */
    uint32_t dr = rng_below(&rng, 100);
    uint8_t defer = dr < 8 ? 1 : (dr < 10 ? 2 : 0); /* ~10% deferred */
    uint8_t ret_garbage = (uint8_t)(rng_below(&rng, 2));
    ordo_push_opts opts;
    ordo_push_opts_init(&opts);
    opts.priority = (int32_t)rng_below(&rng, 5) - 2;
    uint32_t pr = rng_below(&rng, 100);
    if ((g_prop_choice & 1) && pr < 10)
      opts.prop = ORDO_PROP_CPU_PRIORITIZED;
    else if ((g_prop_choice & 2) && pr < 14)
      opts.prop = ORDO_PROP_ASYNC;
    opts.name = "stress_op";
    opts.free_fn = op_free;

    pthread_mutex_lock(&g_push_mu);
    if (g_seq >= TOTAL_OPS) {
      pthread_mutex_unlock(&g_push_mu);
      break;
    }
    uint32_t seq = g_seq++;
    op_rec* op = &g_ops[seq];
    memset(op, 0, sizeof *op);
    op->seq = seq;
    op->code = code;
    op->defer = defer;
    op->ret_garbage = ret_garbage;
    /* dedup: mutable wins */
    for (size_t i = 0; i < nw; i++) {
      int v = widx[i], dup = 0;
      for (int j = 0; j < op->n; j++) dup |= op->var[j] == v;
      if (!dup) {
        op->var[op->n] = (uint8_t)v;
        op->is_mut[op->n] = 1;
        op->n++;
      }
    }
    for (size_t i = 0; i < nr; i++) {
      int v = ridx[i], dup = 0;
      for (int j = 0; j < op->n; j++) dup |= op->var[j] == v;
      if (!dup) {
        op->var[op->n] = (uint8_t)v;
        op->is_mut[op->n] = 0;
        op->n++;
      }
    }
    /* predict */
    int poisoned = 0, inh_known = 1;
    int32_t inh_code = 0;
    for (int i = 0; i < op->n; i++) {
      model_var* m = &g_model[op->var[i]];
      op->expect_ver[i] = m->version;
      if (m->poisoned) {
        if (!poisoned) {
          inh_code = m->code;
          inh_known = m->code_known;
        } else if (!m->code_known || m->code != inh_code) {
          inh_known = 0;
        }
        poisoned = 1;
      }
    }
    op->predicted_run = (uint8_t)!poisoned;
    if (op->predicted_run) {
      g_pred_runs++;
      if (code) g_pred_fails++;
      for (int i = 0; i < op->n; i++) {
        if (!op->is_mut[i]) continue;
        model_var* m = &g_model[op->var[i]];
        m->version++;
        if (code) {
          m->poisoned = 1;
          m->code = code;
          m->code_known = 1;
        }
      }
    } else {
      g_pred_skips++;
      for (int i = 0; i < op->n; i++) {
        if (!op->is_mut[i]) continue;
        model_var* m = &g_model[op->var[i]];
        m->poisoned = 1;
        m->code = inh_code;
        m->code_known = inh_known;
      }
    }
    ordo_status st =
        ordo_opr_push(g_engine, op_fn, op, nr ? reads : NULL, nr, nw ? writes : NULL, nw, &opts);
    if (st != ORDO_OK) {
      atomic_fetch_add(&g_api_errors, 1);
      diag("  op #%u: ordo_opr_push returned %s: %s\n", seq, ordo_status_string(st),
           ordo_last_error_message());
    } else {
      arg->pushed++; /* accepted: its free_fn must run */
    }
    /* periodic error clearing, ordered like a write at this point of the push order */
    /* (none near the end, so that vars end poisoned and the final check has teeth) */
    int quiet = seq + QUIET_TAIL >= TOTAL_OPS;
    if ((seq + 1) % CLEAR_EVERY == 0 && !quiet) {
      for (int v = 0; v < NV; v++) {
        if (g_model[v].poisoned) clear_var_locked(v);
      }
    }
    if ((seq + 1) % CLEAR_SOME_EVERY == 0 && !quiet) {
      for (int k = 0; k < 6; k++) clear_var_locked((int)rng_below(&rng, NV));
    }
    pthread_mutex_unlock(&g_push_mu);
  }
  return NULL;
}

static void reset_state(void) {
  memset(g_ops, 0, sizeof g_ops);
  for (size_t i = 0; i < TOTAL_OPS; i++) {
    atomic_init(&g_runs[i], 0);
    atomic_init(&g_frees[i], 0);
  }
  for (int v = 0; v < NV; v++) {
    atomic_init(&g_version[v], 0);
    atomic_init(&g_writers_in[v], 0);
    atomic_init(&g_readers_in[v], 0);
    g_model[v].version = 0;
    g_model[v].poisoned = 0;
    g_model[v].code = 0;
    g_model[v].code_known = 1;
  }
  atomic_init(&g_mismatch, 0);
  atomic_init(&g_api_errors, 0);
  atomic_init(&g_total_runs, 0);
  atomic_init(&g_total_frees, 0);
  atomic_init(&g_frees_unrun, 0);
  g_seq = 0;
  g_pred_runs = g_pred_skips = g_pred_fails = g_clears = 0;
  g_diag[0] = 0;
  g_diag_len = 0;
  g_diag_count = 0;
  g_q_head = g_q_tail = 0;
  g_q_stop = 0;
}

static void run_stress(int32_t kind, int32_t cpu_threads, int32_t prop_choice, const char* label) {
  reset_state();
  g_prop_choice = prop_choice;

  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = cpu_threads;
  ordo_status st = ordo_engine_create(&cfg, &g_engine);
  cr_assert_eq(st, ORDO_OK, "ordo_engine_create: %s (%s)", ordo_status_string(st),
               ordo_last_error_message());
  for (int v = 0; v < NV; v++) {
    st = ordo_var_new(g_engine, &g_vh[v]);
    cr_assert_eq(st, ORDO_OK, "ordo_var_new: %s", ordo_status_string(st));
  }

  pthread_t completer;
  cr_assert_eq(pthread_create(&completer, NULL, completer_main, NULL), 0);
  pthread_t pushers[NPUSHERS];
  pusher_arg args[NPUSHERS];
  for (int i = 0; i < NPUSHERS; i++) {
    args[i].seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1) + (uint64_t)kind;
    args[i].pushed = 0;
    cr_assert_eq(pthread_create(&pushers[i], NULL, pusher_main, &args[i]), 0);
  }
  for (int i = 0; i < NPUSHERS; i++) pthread_join(pushers[i], NULL);

  /* clear every even var now, while ops on it are likely still pending: ordered after them, so
     these must end clean; odd vars keep whatever the model predicts */
  pthread_mutex_lock(&g_push_mu);
  for (int v = 0; v < NV; v += 2) clear_var_locked(v);
  pthread_mutex_unlock(&g_push_mu);

  ordo_status wst = ordo_wait_for_all(g_engine);

  pthread_mutex_lock(&g_q_mu);
  g_q_stop = 1;
  pthread_cond_broadcast(&g_q_cv);
  pthread_mutex_unlock(&g_q_mu);
  pthread_join(completer, NULL);

  /* every op: predicted-run ran exactly once, predicted-skip never; each freed exactly once
     (wait_for_all returned: every op pushed before it has finished, free_fn included) */
  unsigned long wrong_runs = 0, wrong_frees = 0;
  for (uint32_t i = 0; i < TOTAL_OPS; i++) {
    uint32_t n = atomic_load(&g_runs[i]);
    uint32_t want = g_ops[i].predicted_run ? 1u : 0u;
    if (n != want) {
      if (wrong_runs < 5) {
        diag("  op #%u: ran %u times, expected %u (vars:%d)\n", i, n, want, g_ops[i].n);
      }
      wrong_runs++;
    }
    uint32_t f = atomic_load(&g_frees[i]);
    if (f != 1) {
      if (wrong_frees < 5) diag("  op #%u: free_fn ran %u times, expected once\n", i, f);
      wrong_frees++;
    }
  }
  unsigned long total_frees = atomic_load(&g_total_frees);
  unsigned long frees_unrun = atomic_load(&g_frees_unrun);

  /* error state of every var */
  unsigned long wrong_err = 0, wrong_code = 0, wrong_wait = 0;
  int poisoned_vars = 0;
  for (int v = 0; v < NV; v++) {
    int32_t code = -1;
    char buf[256];
    st = ordo_var_get_error(g_engine, g_vh[v], &code, buf, sizeof buf);
    if (st != ORDO_OK) {
      atomic_fetch_add(&g_api_errors, 1);
      diag("  ordo_var_get_error(var %d) returned %s\n", v, ordo_status_string(st));
      continue;
    }
    poisoned_vars += g_model[v].poisoned;
    if ((code != 0) != (g_model[v].poisoned != 0)) {
      wrong_err++;
      diag("  var %d: error code %d, model says %s\n", v, (int)code,
           g_model[v].poisoned ? "poisoned" : "clean");
    } else if (g_model[v].poisoned && g_model[v].code_known && code != g_model[v].code) {
      wrong_code++;
      diag("  var %d: error code %d, model says %d (%s)\n", v, (int)code, (int)g_model[v].code,
           buf);
    }
    ordo_status ws = ordo_wait_for_var(g_engine, g_vh[v]);
    ordo_status want_ws = g_model[v].poisoned ? ORDO_ERR_OP_FAILED : ORDO_OK;
    if (ws != want_ws) {
      wrong_wait++;
      diag("  var %d: ordo_wait_for_var returned %s, expected %s\n", v, ordo_status_string(ws),
           ordo_status_string(want_ws));
    }
  }

  unsigned long total_runs = atomic_load(&g_total_runs);
  unsigned long mism = atomic_load(&g_mismatch);
  unsigned long apierr = atomic_load(&g_api_errors);
  int any_failure = g_pred_fails > 0 || g_pred_skips > 0;
  ordo_status want_wst = any_failure ? ORDO_ERR_OP_FAILED : ORDO_OK;
  unsigned long pushed = 0;
  for (int i = 0; i < NPUSHERS; i++) pushed += args[i].pushed;

  fprintf(stderr,
          "[stress %s] ops=%u pushed=%lu predicted: ran=%lu skipped=%lu failed=%lu "
          "clears=%lu poisoned_at_end=%d | observed runs=%lu freed=%lu (of which never ran "
          "%lu) mismatches=%lu api_errors=%lu wrong_runs=%lu wrong_frees=%lu wrong_err=%lu "
          "wrong_code=%lu wrong_wait=%lu wait_for_all=%s\n",
          label, (unsigned)TOTAL_OPS, pushed, g_pred_runs, g_pred_skips, g_pred_fails, g_clears,
          poisoned_vars, total_runs, total_frees, frees_unrun, mism, apierr, wrong_runs,
          wrong_frees, wrong_err, wrong_code, wrong_wait, ordo_status_string(wst));
  if (g_diag_count) fprintf(stderr, "[stress %s] first diagnostics:\n%s", label, g_diag);

  st = ordo_engine_destroy(g_engine);
  g_engine = NULL;

  /* pushes accepted; then what the engine did with them, counted from its free_fn calls */
  cr_expect_eq(pushed, (unsigned long)TOTAL_OPS, "%lu pushes accepted of %u", pushed,
               (unsigned)TOTAL_OPS);
  cr_expect_eq(total_frees, (unsigned long)TOTAL_OPS, "%lu ops finished (free_fn) of %u pushed",
               total_frees, (unsigned)TOTAL_OPS);
  cr_expect_eq(wrong_frees, 0, "%lu ops freed a wrong number of times", wrong_frees);
  cr_expect_eq(frees_unrun, g_pred_skips, "%lu ops finished without running, model skipped %lu",
               frees_unrun, g_pred_skips);
  cr_expect_eq(total_runs + frees_unrun, (unsigned long)TOTAL_OPS,
               "%lu ran + %lu skipped != %u pushed", total_runs, frees_unrun, (unsigned)TOTAL_OPS);
  cr_expect_eq(apierr, 0, "%lu ordo calls failed unexpectedly", apierr);
  cr_expect_eq(mism, 0, "%lu model mismatches while ops ran", mism);
  cr_expect_eq(wrong_runs, 0, "%lu ops ran a wrong number of times", wrong_runs);
  cr_expect_eq(total_runs, g_pred_runs, "runs %lu, model predicted %lu", total_runs, g_pred_runs);
  cr_expect_eq(wrong_err, 0, "%lu vars with a wrong error state", wrong_err);
  cr_expect_eq(wrong_code, 0, "%lu vars with a wrong error code", wrong_code);
  cr_expect_eq(wrong_wait, 0, "%lu wrong ordo_wait_for_var results", wrong_wait);
  cr_expect_eq(wst, want_wst, "ordo_wait_for_all returned %s, expected %s", ordo_status_string(wst),
               ordo_status_string(want_wst));
  cr_expect_eq(st, ORDO_OK, "ordo_engine_destroy: %s", ordo_status_string(st));
  /* the run must have exercised both sides of the model */
  cr_expect_gt(g_pred_runs, TOTAL_OPS / 2);
  cr_expect_gt(g_pred_skips, 0);
  cr_expect_gt(g_pred_fails, 0);
}

TestSuite(stress, .timeout = 120.0);

Test(stress, model_per_device_normal_props, .timeout = 120.0) {
  run_stress(ORDO_ENGINE_PER_DEVICE, 2, 0, "per_device");
}

Test(stress, model_per_device_mixed_props, .timeout = 120.0) {
  run_stress(ORDO_ENGINE_PER_DEVICE, 2, 1 | 2, "per_device+props");
}

Test(stress, model_pooled, .timeout = 120.0) {
  run_stress(ORDO_ENGINE_POOLED, 2, 1 | 2, "pooled");
}
