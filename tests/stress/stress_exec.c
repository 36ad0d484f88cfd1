/*
 * The running side: what every op does when the engine calls it. It checks, for each var it
 * touches, that the var is at the version the model predicted and that no conflicting op is
 * inside the var at the same time (writers exclude everyone, readers exclude writers), then
 * bumps what it writes just before it completes, whichever way it completes. Its free_fn checks
 * that it ran exactly when the model said it would.
 */
#include <sched.h>
#include <stdlib.h>

#include "../test_util.h"
#include "stress.h"

/* ---- the rendezvous: two readers of one var that wait for each other (SPEC §2.2) ---- */

static atomic_int g_rdv_busy;
static atomic_int g_rdv_arrived;
static atomic_int g_rdv_left;

int rendezvous_idle(void) {
  return atomic_load(&g_rdv_busy) == 0;
}

void rendezvous_arm(void) {
  atomic_store(&g_rdv_arrived, 0);
  atomic_store(&g_rdv_left, 0);
  atomic_store(&g_rdv_busy, 1);
}

int rendezvous_state(void) {
  return atomic_load(&g_rdv_busy) ? atomic_load(&g_rdv_arrived) : -1;
}

static void meet_partner(const op_rec* op) {
  atomic_fetch_add(&g_rdv_arrived, 1);
  uint64_t deadline = tu_now_ms() + RENDEZVOUS_TIMEOUT_MS;
  for (unsigned spins = 0; atomic_load(&g_rdv_arrived) < 2; spins++) {
    if (spins > 64) sched_yield(); /* 2 cores: let the partner's worker run */
    if ((spins & 63) == 0 && tu_now_ms() >= deadline) {
      atomic_fetch_add(&g_count.rendezvous_timeouts, 1);
      stress_mismatch("op #%llu: two ready readers of one var never ran at the same time (%d s)",
                      (unsigned long long)op->seq, RENDEZVOUS_TIMEOUT_MS / 1000);
      break;
    }
  }
  if (atomic_load(&g_rdv_arrived) >= 2) atomic_fetch_add(&g_count.rendezvous_met, 1);
  if (atomic_fetch_add(&g_rdv_left, 1) == 1) atomic_store(&g_rdv_busy, 0);
}

/* ---- entering and leaving vars ---- */

static void note_readers(int readers) {
  atomic_fetch_add_explicit(&g_count.reader_overlaps, 1, memory_order_relaxed);
  int seen = atomic_load_explicit(&g_count.max_readers_seen, memory_order_relaxed);
  while (readers > seen &&
         !atomic_compare_exchange_weak(&g_count.max_readers_seen, &seen, readers)) {
  }
}

static void enter_var(const op_rec* op, int i) {
  var_cell* c = op->cell[i];
  if (op->is_mut[i]) {
    int w = atomic_fetch_add(&c->writers_in, 1);
    int r = atomic_load(&c->readers_in);
    if (w != 0 || r != 0) {
      stress_mismatch("op #%llu: writer of var 0x%llx runs beside %d writers and %d readers",
                      (unsigned long long)op->seq, (unsigned long long)c->handle, w, r);
    }
  } else {
    int r = atomic_fetch_add(&c->readers_in, 1);
    int w = atomic_load(&c->writers_in);
    if (w != 0) {
      stress_mismatch("op #%llu: reader of var 0x%llx runs beside %d writers",
                      (unsigned long long)op->seq, (unsigned long long)c->handle, w);
    }
    if (r > 0) note_readers(r + 1);
  }
  uint32_t ver = atomic_load_explicit(&c->data_version, memory_order_relaxed);
  if (ver != op->expect[i]) {
    stress_mismatch("op #%llu: %s of var 0x%llx saw version %u, model says %u",
                    (unsigned long long)op->seq, op->is_mut[i] ? "writer" : "reader",
                    (unsigned long long)c->handle, ver, op->expect[i]);
  }
}

/* Called just before the op completes: the next op on a written var must see the bump. */
void op_leave_vars(const op_rec* op) {
  for (int i = 0; i < op->n; i++) {
    var_cell* c = op->cell[i];
    if (op->is_mut[i]) {
      /* from the prediction, not the observation: one wrong version is reported once */
      atomic_store_explicit(&c->data_version, op->expect[i] + 1, memory_order_relaxed);
      atomic_fetch_sub(&c->writers_in, 1);
    } else {
      atomic_fetch_sub(&c->readers_in, 1);
    }
  }
}

/* A little work inside the callback, so that ops overlap and queues build up behind them. */
static void linger(const op_rec* op) {
  for (int i = 0; i < 400; i++) {
    if (op->n &&
        atomic_load_explicit(&op->cell[0]->data_version, memory_order_relaxed) == UINT32_MAX) {
      break;
    }
  }
}

/* ---- the callback and its free_fn ---- */

static void count_failure(const op_rec* op) {
  if (op->code) atomic_fetch_add_explicit(&g_count.failed_runs, 1, memory_order_relaxed);
}

static int32_t defer_op(ordo_exec* exec, op_rec* op) {
  int32_t ignored = op->return_garbage ? 77 : 0; /* read before a completer may finish op */
  ordo_completion c = 0;
  ordo_status st = ordo_exec_defer(exec, &c);
  if (!stress_expect_status(st, ORDO_OK, "ordo_exec_defer")) {
    op_leave_vars(op);
    return op->code;
  }
  atomic_fetch_add_explicit(&g_count.deferred, 1, memory_order_relaxed);
  if (op->finish == FINISH_INLINE) {
    op_leave_vars(op);
    count_failure(op);
    atomic_fetch_add_explicit(&g_count.completed_inline, 1, memory_order_relaxed);
    st = ordo_complete(c, op->code, op->code ? "injected inline async failure" : NULL);
    stress_expect_status(st, ORDO_OK, "ordo_complete (inside the callback)");
  } else {
    op->completion = c;
    completer_enqueue(op);
  }
  return ignored; /* after a defer the return value is ignored (SPEC §3) */
}

int32_t stress_op_fn(ordo_exec* exec, void* user_data) {
  op_rec* op = (op_rec*)user_data;
  unsigned prev = atomic_fetch_add(&op->runs, 1);
  atomic_fetch_add_explicit(&g_count.ran, 1, memory_order_relaxed);
  if (!op->predicted_run) {
    stress_mismatch("op #%llu ran, but a var it touches carries an error: it must be skipped",
                    (unsigned long long)op->seq);
  }
  if (prev != 0) stress_mismatch("op #%llu ran %u times", (unsigned long long)op->seq, prev + 1);
  for (int i = 0; i < op->n; i++) enter_var(op, i);
  if (op->rendezvous) meet_partner(op);
  if (op->linger) linger(op);
  if (op->finish != FINISH_ON_RETURN) return defer_op(exec, op);
  op_leave_vars(op);
  count_failure(op);
  return op->code;
}

void stress_op_free(void* user_data) {
  op_rec* op = (op_rec*)user_data;
  unsigned runs = atomic_load(&op->runs);
  if (op->predicted_run && runs == 0) {
    stress_mismatch("op #%llu was skipped, but the model says it runs",
                    (unsigned long long)op->seq);
  }
  /* run-or-skip here, plus, when it ran, exclusion and version per var and the run count */
  stress_count_checks(1 + (runs ? 2u * op->n + 1 : 0));
  for (int i = 0; i < op->n; i++) cell_release(op->cell[i]);
  free(op);
  atomic_fetch_add_explicit(&g_count.finished, 1, memory_order_release);
}

int32_t stress_probe_fn(ordo_exec* exec, void* user_data) {
  (void)exec;
  (void)user_data;
  stress_api_error("an op pushed with a deleted var handle ran");
  return 0;
}

void stress_probe_free(void* user_data) {
  (void)user_data;
  stress_api_error("free_fn called for a push that was refused");
}
