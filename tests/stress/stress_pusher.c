/*
 * Pusher threads (see stress_pusher.h). An op's shape is chosen outside the lock; the model
 * update and the ordo call happen together under it, so the model sees pushes, clears, deletes
 * and ordered waits in exactly the order the engine linearizes them. Waiter threads run the
 * rounds with the pushers, waiting on vars outside the lock (stress_waiter.h) until the last
 * pusher of the round is done.
 */
#include "stress_pusher.h"

#include <stdlib.h>
#include <string.h>

#include "stress_model.h"
#include "stress_rng.h"
#include "stress_waiter.h"

enum { MAX_PUSHERS = 64, MAX_WAITERS = 64, HOT_VARS = 16 };

typedef enum pusher_state {
  PS_PARKED = 0,
  PS_PUSHING = 1,
  PS_ORDERED_WAIT = 2,
  PS_PROBING = 3,
  PS_TIMED_WAIT = 4,
} pusher_state;

typedef struct pusher {
  _Alignas(64) pthread_t thread;
  int id;
  uint64_t rng;
  atomic_int state;
  atomic_ulong pushed;
  unsigned long dead_probes;
  wait_note note;
} pusher;

/* A thread that only waits on vars (stress_waiter.c) while the pushers of a round push. */
typedef struct waiter {
  _Alignas(64) pthread_t thread;
  uint64_t rng;
  atomic_ulong waits;
  wait_note note;
} waiter;

/* A random op, chosen before taking the lock. */
typedef struct op_shape {
  int widx[MAX_WRITES];
  int ridx[MAX_READS];
  size_t nw, nr;
  int32_t code;
  uint8_t finish, return_garbage, linger, rendezvous;
  ordo_push_opts opts;
} op_shape;

round_plan g_plan;

static pusher g_pushers[MAX_PUSHERS];
static int g_npushers;
static waiter g_waiters[MAX_WAITERS];
static int g_nwaiters;
static atomic_int g_pushing; /* pushers still pushing in this round: waiters wait until 0 */
static pthread_barrier_t g_round_start;
static pthread_barrier_t g_round_end;

/* ---- choosing ---- */

/* Half the picks go to a few hot vars, so long dependency chains form beside parallel work. */
static int pick_slot(uint64_t* rng) {
  uint32_t n = (uint32_t)g_model.nslots;
  if (rng_below(rng, 2) == 0) return (int)rng_below(rng, n < HOT_VARS ? n : HOT_VARS);
  return (int)rng_below(rng, n);
}

static void choose_vars(uint64_t* rng, op_shape* sh, int readers_only) {
  sh->nw = readers_only ? 0 : rng_below(rng, MAX_WRITES + 1);
  sh->nr = readers_only ? 1 + rng_below(rng, MAX_READS) : rng_below(rng, MAX_READS + 1);
  for (size_t i = 0; i < sh->nw; i++) sh->widx[i] = pick_slot(rng);
  for (size_t i = 0; i < sh->nr; i++) sh->ridx[i] = pick_slot(rng);
  uint32_t r = rng_below(rng, 1000);
  if (r < 40 && sh->nr >= 2) {
    sh->ridx[1] = sh->ridx[0]; /* a var read twice counts once */
  } else if (r < 80 && sh->nw >= 2) {
    sh->widx[1] = sh->widx[0]; /* written twice */
  } else if (r < 140 && sh->nr >= 1 && sh->nw >= 1) {
    sh->ridx[0] = sh->widx[0]; /* in both lists: mutable */
  }
}

static void choose_prop_and_finish(uint64_t* rng, op_shape* sh) {
  uint32_t p = rng_below(rng, 100);
  sh->opts.prop = p < 10   ? ORDO_PROP_CPU_PRIORITIZED
                  : p < 15 ? ORDO_PROP_COPY_TO_DEVICE
                  : p < 20 ? ORDO_PROP_COPY_FROM_DEVICE
                  : p < 32 ? ORDO_PROP_ASYNC
                           : ORDO_PROP_NORMAL;
  uint32_t f = rng_below(rng, 100);
  if (sh->opts.prop == ORDO_PROP_ASYNC) { /* what async ops are for: start work, defer */
    sh->finish = f < 70 ? FINISH_BY_COMPLETER : f < 80 ? FINISH_INLINE : FINISH_ON_RETURN;
  } else {
    sh->finish = f < 5 ? FINISH_BY_COMPLETER : f < 7 ? FINISH_INLINE : FINISH_ON_RETURN;
  }
  sh->return_garbage = (uint8_t)rng_below(rng, 2);
}

static void choose_shape(uint64_t* rng, op_shape* sh, round_kind kind) {
  int readers_only = kind == ROUND_READERS;
  memset(sh, 0, sizeof *sh);
  ordo_push_opts_init(&sh->opts);
  sh->opts.free_fn = stress_op_free;
  sh->opts.name = "stress_op";
  sh->opts.priority = (int32_t)rng_below(rng, 5) - 2;
  choose_vars(rng, sh, readers_only);
  choose_prop_and_finish(rng, sh);
  uint32_t fail_per_mille = kind == ROUND_CLEAN ? 0 : readers_only ? 3 : 4;
  if (rng_below(rng, 1000) < fail_per_mille) {
    sh->code = FAIL_BASE + (int32_t)rng_below(rng, FAIL_CODES);
  }
  sh->linger = (uint8_t)(rng_below(rng, readers_only ? 4 : 16) == 0);
}

/* Two plain readers of one clean var that wait for each other inside their callbacks. */
static void rendezvous_shape(op_shape* sh, int slot) {
  memset(sh, 0, sizeof *sh);
  ordo_push_opts_init(&sh->opts);
  sh->opts.free_fn = stress_op_free;
  sh->opts.name = "stress_rendezvous";
  sh->nr = 1;
  sh->ridx[0] = slot;
  sh->rendezvous = 1;
}

/* ---- pushing (under g_model.mu) ---- */

static op_rec* new_op(const op_shape* sh) {
  op_rec* op = (op_rec*)malloc(sizeof *op);
  if (!op) {
    stress_api_error("out of memory for an op record");
    exit(1);
  }
  memset(op, 0, sizeof *op);
  atomic_init(&op->runs, 0);
  op->code = sh->code;
  op->finish = sh->finish;
  op->return_garbage = sh->return_garbage;
  op->linger = sh->linger;
  op->rendezvous = sh->rendezvous;
  return op;
}

/* p: the pusher to credit, NULL for main */
static void push_op_locked(pusher* p, op_rec* op, const op_shape* sh) {
  ordo_var writes[MAX_WRITES], reads[MAX_READS];
  model_fill_op(op, sh->widx, sh->nw, sh->ridx, sh->nr, writes, reads);
  /* the op may run and be freed before the push returns: commit from a copy */
  op_rec snapshot;
  memcpy(&snapshot, op, sizeof snapshot);
  ordo_status st = ordo_opr_push(g_engine, stress_op_fn, op, sh->nr ? reads : NULL, sh->nr,
                                 sh->nw ? writes : NULL, sh->nw, &sh->opts);
  if (!stress_expect_status(st, ORDO_OK, "ordo_opr_push")) {
    model_abandon_op(op); /* nothing was pushed: free_fn will not run */
    free(op);
    return;
  }
  model_commit_op(&snapshot);
  if (p) atomic_fetch_add_explicit(&p->pushed, 1, memory_order_relaxed);
}

void push_failing_op_locked(int slot, int32_t code) {
  op_shape sh;
  memset(&sh, 0, sizeof sh);
  ordo_push_opts_init(&sh.opts);
  sh.opts.free_fn = stress_op_free;
  sh.opts.name = "stress_poisoner";
  sh.nw = slot >= 0;
  sh.widx[0] = slot;
  sh.code = code;
  push_op_locked(NULL, new_op(&sh), &sh);
}

static void clear_all_poisoned_locked(void) {
  for (int s = 0; s < g_model.nslots; s++) {
    if (g_model.slot[s]->poisoned) model_clear(s);
  }
}

/* Clears, deletes and ordered waits, at random points of the push order. */
static void maintenance_locked(pusher* p) {
  uint32_t r = rng_below(&p->rng, 10000);
  if (r < 40) {
    model_clear(pick_slot(&p->rng));
  } else if (r < 240) {
    clear_all_poisoned_locked();
  } else if (r < 250) {
    model_replace((int)rng_below(&p->rng, (uint32_t)g_model.nslots));
  } else if (r < 253) {
    atomic_store(&p->state, PS_ORDERED_WAIT);
    model_ordered_wait(pick_slot(&p->rng));
    atomic_store(&p->state, PS_PUSHING);
  }
}

/* Each readers-only round starts with a pair (g_plan.rendezvous_due), then one now and then. */
static void maybe_rendezvous_locked(pusher* p) {
  if (!g_plan.rendezvous_ok || !rendezvous_idle()) return;
  if (!g_plan.rendezvous_due && rng_below(&p->rng, 1000) != 0) return;
  int slot = model_clean_slot(&p->rng);
  if (slot < 0) return;
  op_shape sh;
  rendezvous_shape(&sh, slot);
  rendezvous_arm();
  push_op_locked(p, new_op(&sh), &sh);
  push_op_locked(p, new_op(&sh), &sh);
  g_model.rendezvous_pairs++;
  g_plan.rendezvous_due = 0;
}

/* ---- misuse probes: every use of a deleted handle is INVALID_HANDLE (SPEC §5) ---- */

static ordo_status use_dead(uint32_t how, ordo_var dead, ordo_var live) {
  ordo_var pair[2] = {live, dead};
  int32_t code = 0;
  ordo_opr opr = 0;
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = stress_probe_free;
  switch (how) {
    case 0:
      return ordo_opr_push(g_engine, stress_probe_fn, NULL, &dead, 1, NULL, 0, &opts);
    case 1: /* one bad var among good ones: nothing is pushed */
      return ordo_opr_push(g_engine, stress_probe_fn, NULL, pair, 1, pair + 1, 1, &opts);
    case 2:
      return ordo_wait_for_var(g_engine, dead);
    case 3:
      return ordo_wait_for_var_timeout(g_engine, dead, 1000000);
    case 4:
      return ordo_var_clear_error(g_engine, dead);
    case 5:
      return ordo_var_delete(g_engine, dead);
    case 6:
      return ordo_var_get_error(g_engine, dead, &code, NULL, 0);
    default: {
      ordo_status st = ordo_opr_new(g_engine, stress_probe_fn, NULL, &dead, 1, NULL, 0, NULL, &opr);
      if (st == ORDO_OK) ordo_opr_delete(g_engine, opr);
      return st;
    }
  }
}

static void probe_dead(pusher* p, ordo_var dead, ordo_var live) {
  static const char* const names[] = {"push(dead)",
                                      "push(live, dead)",
                                      "wait_for_var(dead)",
                                      "wait_for_var_timeout(dead)",
                                      "var_clear_error(dead)",
                                      "var_delete(dead)",
                                      "var_get_error(dead)",
                                      "opr_new(dead)"};
  uint32_t how = rng_below(&p->rng, 8);
  atomic_store(&p->state, PS_PROBING);
  ordo_status st = use_dead(how, dead, live);
  if (stress_expect_status(st, ORDO_ERR_INVALID_HANDLE, names[how]) &&
      ordo_last_error_message()[0] == 0) {
    stress_api_error("%s failed without a message", names[how]);
  }
  p->dead_probes++;
  atomic_store(&p->state, PS_PUSHING);
}

/* ---- the loop ---- */

/* One op (plus whatever rides along); 0 once the round's quota is pushed. */
static int push_step(pusher* p) {
  op_shape sh;
  choose_shape(&p->rng, &sh, g_plan.kind);
  op_rec* op = new_op(&sh);
  int probe = rng_below(&p->rng, 500) == 0;
  int timed_wait = rng_below(&p->rng, 256) == 0;
  ordo_var dead = 0, live = 0;
  pthread_mutex_lock(&g_model.mu);
  if (g_model.next_seq >= g_plan.end) {
    pthread_mutex_unlock(&g_model.mu);
    free(op);
    return 0;
  }
  push_op_locked(p, op, &sh);
  if (g_plan.kind == ROUND_READERS) {
    maybe_rendezvous_locked(p);
  } else {
    maintenance_locked(p);
  }
  if (probe) {
    dead = model_dead_handle(rng_next(&p->rng));
    live = g_model.slot[pick_slot(&p->rng)]->handle;
  }
  pthread_mutex_unlock(&g_model.mu);
  if (dead) probe_dead(p, dead, live); /* outside the lock: races with pushes and deletes */
  if (timed_wait) {                    /* beside the waiter threads, on the vars they wait on */
    atomic_store(&p->state, PS_TIMED_WAIT);
    concurrent_wait(&p->rng, WAIT_TIMED, &p->note);
    atomic_store(&p->state, PS_PUSHING);
  }
  return 1;
}

static void* pusher_main(void* arg) {
  pusher* p = (pusher*)arg;
  for (;;) {
    pthread_barrier_wait(&g_round_start);
    if (g_plan.stop) break;
    atomic_store(&p->state, PS_PUSHING);
    while (push_step(p)) {
    }
    atomic_fetch_sub(&g_pushing, 1);
    atomic_store(&p->state, PS_PARKED);
    pthread_barrier_wait(&g_round_end);
  }
  return NULL;
}

static void* waiter_main(void* arg) {
  waiter* w = (waiter*)arg;
  for (;;) {
    pthread_barrier_wait(&g_round_start);
    if (g_plan.stop) break;
    while (atomic_load(&g_pushing) > 0) {
      waiter_step(&w->rng, &w->note);
      atomic_fetch_add_explicit(&w->waits, 1, memory_order_relaxed);
    }
    pthread_barrier_wait(&g_round_end);
  }
  return NULL;
}

static int waiters_start(int n, uint64_t seed) {
  for (g_nwaiters = 0; g_nwaiters < n; g_nwaiters++) {
    waiter* w = &g_waiters[g_nwaiters];
    w->rng = rng_seed(seed, 500 + (uint64_t)g_nwaiters);
    atomic_init(&w->waits, 0);
    if (pthread_create(&w->thread, NULL, waiter_main, w) != 0) return -1;
  }
  return 0;
}

int pushers_start(int n, int waiters, uint64_t seed) {
  if (n > MAX_PUSHERS) n = MAX_PUSHERS;
  if (waiters > MAX_WAITERS) waiters = MAX_WAITERS;
  pthread_barrier_init(&g_round_start, NULL, (unsigned)(n + waiters) + 1);
  pthread_barrier_init(&g_round_end, NULL, (unsigned)(n + waiters) + 1);
  if (waiters_start(waiters, seed) != 0) return -1;
  for (g_npushers = 0; g_npushers < n; g_npushers++) {
    pusher* p = &g_pushers[g_npushers];
    p->id = g_npushers;
    p->rng = rng_seed(seed, (uint64_t)g_npushers);
    atomic_init(&p->state, PS_PARKED);
    atomic_init(&p->pushed, 0);
    if (pthread_create(&p->thread, NULL, pusher_main, p) != 0) return -1;
  }
  return 0;
}

void pushers_run_round(void) {
  atomic_store(&g_pushing, g_npushers);
  pthread_barrier_wait(&g_round_start);
  pthread_barrier_wait(&g_round_end);
}

void pushers_finish(pusher_totals* totals) {
  g_plan.stop = 1;
  pthread_barrier_wait(&g_round_start);
  memset(totals, 0, sizeof *totals);
  for (int i = 0; i < g_npushers; i++) {
    pthread_join(g_pushers[i].thread, NULL);
    totals->dead_probes += g_pushers[i].dead_probes;
  }
  for (int i = 0; i < g_nwaiters; i++) pthread_join(g_waiters[i].thread, NULL);
  pthread_barrier_destroy(&g_round_start);
  pthread_barrier_destroy(&g_round_end);
}

void pushers_dump(FILE* to) {
  static const char* const states[] = {"parked", "pushing", "in an ordered wait_for_var",
                                       "probing a dead handle", "in a timed wait"};
  for (int i = 0; i < g_npushers; i++) {
    int s = atomic_load(&g_pushers[i].state);
    fprintf(to, "  pusher %d: %s, %lu ops pushed", i, states[s], atomic_load(&g_pushers[i].pushed));
    if (s == PS_TIMED_WAIT) {
      fprintf(to, ": ");
      wait_note_print(to, &g_pushers[i].note);
    }
    fputc('\n', to);
  }
  for (int i = 0; i < g_nwaiters; i++) {
    fprintf(to, "  waiter %d: %lu waits, now ", i, atomic_load(&g_waiters[i].waits));
    wait_note_print(to, &g_waiters[i].note);
    fputc('\n', to);
  }
}
