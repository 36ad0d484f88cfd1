/*
 * Pusher threads: each picks random ops (and clears, deletes, ordered waits, misuse probes)
 * and pushes them under the model's lock, round after round. Between rounds they park on a
 * barrier while main drains the engine and checks everything.
 */
#ifndef ORDO_TESTS_STRESS_STRESS_PUSHER_H
#define ORDO_TESTS_STRESS_STRESS_PUSHER_H

#include <stdio.h>

#include "stress.h"

typedef enum round_kind {
  ROUND_MIXED = 0,   /* everything: reads, writes, failures, clears, deletes, ordered waits */
  ROUND_CLEAN = 1,   /* as mixed, without injected failures: ordo_wait_for_all must say OK */
  ROUND_READERS = 2, /* only readers: no writes, clears, deletes or ordered waits */
} round_kind;

/* What main tells the pushers for the next round; written only while they are parked. */
typedef struct round_plan {
  uint64_t end; /* push until the model's next_seq reaches this */
  round_kind kind;
  int stop;           /* no more rounds: leave */
  int rendezvous_ok;  /* two readers can run at the same time (>= 2 workers, not naive) */
  int rendezvous_due; /* readers-only round: the first pusher to get the lock pushes a pair */
} round_plan;

extern round_plan g_plan;

/* Per-pusher totals, summed after the pushers are joined. */
typedef struct pusher_totals {
  unsigned long dead_probes;
} pusher_totals;

/* n pushers, and `waiters` threads that wait on vars while the pushers push (stress_waiter.h). */
int pushers_start(int n, int waiters, uint64_t seed);
/* Lets the parked pushers (and waiters) run one round (g_plan) and waits until all of them are
 * parked. */
void pushers_run_round(void);
/* Stops and joins them; fills totals. */
void pushers_finish(pusher_totals* totals);
/* Main, between rounds, under g_model.mu: an op that fails with `code`, writing `slot` (so the
 * next round meets an error that ops must be skipped for), or no var when slot < 0. */
void push_failing_op_locked(int slot, int32_t code);
/* For the watchdog: what each pusher and waiter is doing. */
void pushers_dump(FILE* to);

#endif /* ORDO_TESTS_STRESS_STRESS_PUSHER_H */
