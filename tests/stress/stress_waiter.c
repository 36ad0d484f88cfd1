/*
 * Waits outside the model lock (see stress_waiter.h). Ordered waits (stress_model.c) hold the
 * lock, so their result is exact but no two of them ever wait on one var at once; these do not,
 * so several threads (the waiter threads, pushers now and then, an ordered wait, main at a
 * round's end) wait on one var together, with timeouts short enough to expire while the ops
 * before them still run or wait for a completer thread's ordo_complete (issue #21's race).
 */
#include "stress_waiter.h"

#include <sched.h>

#include "../test_util.h"
#include "stress_model.h"
#include "stress_rng.h"

enum { WAIT_HOT_VARS = 4 }; /* waiters bunch up on these, so that waits share a var */

/* What the model said when the wait began. */
typedef struct wait_snapshot {
  var_cell* cell;
  uint32_t version;
  int poisoned;
  unsigned long events;
} wait_snapshot;

/* Timed waits: half on a var that an op deferred to a completer holds, half on a few hot vars
 * (so that waits share vars). Untimed ones stay off the hot vars: waits that time out keep
 * marks pending on them, and a wait that finds one pending also waits for every op pushed since
 * (ordo.h), so an untimed wait there could chase the pushers to the round's end. */
static int pick_wait_slot(uint64_t* rng, wait_kind kind) {
  int hint = completer_hint_slot();
  if (hint >= 0 && hint < g_model.nslots && (kind == WAIT_UNTIMED || rng_below(rng, 2) == 0)) {
    return hint;
  }
  uint32_t n = (uint32_t)g_model.nslots;
  if (kind == WAIT_UNTIMED) return (int)rng_below(rng, n);
  return (int)rng_below(rng, n < WAIT_HOT_VARS ? n : WAIT_HOT_VARS);
}

static void take_snapshot(uint64_t* rng, wait_kind kind, wait_snapshot* snap) {
  pthread_mutex_lock(&g_model.mu);
  var_cell* c = g_model.slot[pick_wait_slot(rng, kind)];
  cell_retain(c); /* the cell outlives a delete of its var while we wait */
  snap->cell = c;
  snap->version = c->model_version;
  snap->poisoned = c->poisoned;
  snap->events = c->events;
  pthread_mutex_unlock(&g_model.mu);
}

/* 3 in 8 under 1 us (the wait's mark is pushed, then abandoned at once), 3 in 8 of a few us
 * (expiring about when a completer completes the op before it), the rest up to 3 ms. Short
 * ones mostly: a wait on a busy var lasts its whole timeout, and more waits meet more races. */
static uint64_t pick_timeout_ns(uint64_t* rng) {
  uint32_t r = rng_below(rng, 8);
  if (r < 3) return 1 + rng_below(rng, 1000);
  if (r < 6) return 1000 + rng_below(rng, 50000);
  return 1000 + rng_below(rng, 3000000);
}

static void count(atomic_ulong* counter) {
  atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* After a wait that returned (no time-out). Under the lock, so that no push, clear or delete on
 * the var is half done (pushed to the engine, not yet in the model) while we look. */
static void check_returned(const wait_snapshot* snap, ordo_status st, const char* what) {
  var_cell* c = snap->cell;
  pthread_mutex_lock(&g_model.mu);
  int deleted = c->deleted;
  int stable = !deleted && c->events == snap->events;
  uint32_t ver = atomic_load(&c->data_version);
  ordo_status want = snap->poisoned ? ORDO_ERR_OP_FAILED : ORDO_OK;
  pthread_mutex_unlock(&g_model.mu);
  stress_count_checks(1);
  if (st == ORDO_ERR_INVALID_HANDLE) {
    if (deleted) {
      count(&g_count.waits_on_deleted);
    } else {
      stress_api_error("%s on var 0x%llx returned INVALID_HANDLE; the var was not deleted", what,
                       (unsigned long long)c->handle);
    }
  } else if (st != ORDO_OK && st != ORDO_ERR_OP_FAILED) {
    stress_api_error("%s on var 0x%llx returned %s (%s)", what, (unsigned long long)c->handle,
                     ordo_status_string(st), ordo_last_error_message());
  } else if (stable) {
    /* every op before the wait is done and none since changes the var: the model's state */
    count(&g_count.waits_exact);
    if (st != want || ver != snap->version) {
      stress_mismatch(
          "%s on var 0x%llx returned %s at version %u; nothing changed the var since "
          "it began, and the model says %s at version %u",
          what, (unsigned long long)c->handle, ordo_status_string(st), ver,
          ordo_status_string(want), snap->version);
    }
  } else {
    count(&g_count.waits_bounded);
    if ((int32_t)(ver - snap->version) < 0) {
      stress_mismatch(
          "%s on var 0x%llx returned %s at version %u, before the %u writes pushed "
          "ahead of it were done",
          what, (unsigned long long)c->handle, ordo_status_string(st), ver, snap->version);
    }
  }
}

void concurrent_wait(uint64_t* rng, wait_kind kind, wait_note* note) {
  static const char* const what[] = {"a poll (ordo_wait_for_var_timeout 0)",
                                     "ordo_wait_for_var_timeout", "ordo_wait_for_var"};
  wait_snapshot snap;
  take_snapshot(rng, kind, &snap);
  var_cell* c = snap.cell;
  uint64_t timeout_ns = kind == WAIT_TIMED ? pick_timeout_ns(rng) : 0;
  atomic_store(&note->timeout_ns, kind == WAIT_UNTIMED ? -1 : (long long)timeout_ns);
  atomic_store(&note->var, (unsigned long long)c->handle);
  if (atomic_fetch_add(&c->waiters_in, 1) > 0) count(&g_count.waits_shared);
  /* an op that holds the var and waits for a completer: pushed before the wait, so waited for */
  int held = atomic_load(&c->deferred_in) > 0;
  ordo_status st = kind == WAIT_UNTIMED
                       ? ordo_wait_for_var(g_engine, c->handle)
                       : ordo_wait_for_var_timeout(g_engine, c->handle, timeout_ns);
  atomic_fetch_sub(&c->waiters_in, 1);
  atomic_store(&note->var, 0);
  count(kind == WAIT_POLL    ? &g_count.waits_polled
        : kind == WAIT_TIMED ? &g_count.waits_timed
                             : &g_count.waits_untimed);
  if (st == ORDO_ERR_TIMEOUT) {
    stress_count_checks(1);
    if (kind == WAIT_UNTIMED) {
      stress_api_error("ordo_wait_for_var on var 0x%llx returned ORDO_ERR_TIMEOUT",
                       (unsigned long long)c->handle);
    } else if (kind == WAIT_POLL) {
      count(&g_count.waits_poll_timeouts);
    } else {
      count(&g_count.waits_expired);
      if (held) count(&g_count.waits_expired_on_deferred);
    }
  } else {
    if (held) count(&g_count.waits_done_on_deferred);
    check_returned(&snap, st, what[kind]);
  }
  cell_release(c);
}

void waiter_step(uint64_t* rng, wait_note* note) {
  uint32_t r = rng_below(rng, 16);
  concurrent_wait(rng, r < 3 ? WAIT_POLL : r < 4 ? WAIT_UNTIMED : WAIT_TIMED, note);
  /* leave the cores to the pushers and workers now and then (2 cores: all are shared) */
  if (rng_below(rng, 4) == 0) {
    tu_sleep_us(20 + rng_below(rng, 100));
  } else {
    sched_yield();
  }
}

void wait_note_print(FILE* to, const wait_note* note) {
  unsigned long long var = atomic_load(&note->var);
  long long timeout = atomic_load(&note->timeout_ns);
  if (!var) {
    fprintf(to, "between waits");
  } else if (timeout < 0) {
    fprintf(to, "in ordo_wait_for_var(0x%llx)", var);
  } else {
    fprintf(to, "in ordo_wait_for_var_timeout(0x%llx, %lld ns)", var, timeout);
  }
}
