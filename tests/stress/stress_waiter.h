/*
 * Waits outside the model lock (stress_waiter.c): polls, timed waits that expire and untimed
 * waits, from several threads on the same var at once, while pushers push on it and completer
 * threads complete the deferred ops that hold it. Each wait's result is checked against the
 * model where the model can tell (see concurrent_wait).
 */
#ifndef ORDO_TESTS_STRESS_STRESS_WAITER_H
#define ORDO_TESTS_STRESS_STRESS_WAITER_H

#include <stdio.h>

#include "stress.h"

typedef enum wait_kind {
  WAIT_POLL = 0,    /* ordo_wait_for_var_timeout(v, 0) */
  WAIT_TIMED = 1,   /* ordo_wait_for_var_timeout(v, 1 ns .. 3 ms) */
  WAIT_UNTIMED = 2, /* ordo_wait_for_var */
} wait_kind;

/* What a thread is waiting on, for the watchdog's dump. */
typedef struct wait_note {
  _Atomic unsigned long long var; /* 0 when not waiting */
  _Atomic long long timeout_ns;   /* -1: untimed */
} wait_note;

/*
 * One wait on a var picked at random (often one that an op deferred to a completer holds, often
 * one of a few hot vars), outside the model lock. Checked: an untimed wait never times out; a
 * wait that returns OK or OP_FAILED finds every write pushed before it done (the var's version
 * at least what the model said when the wait began); when nothing changed the var's state in
 * the model (no write, clear or delete pushed) between the wait's start and the check after it,
 * the status and the version are exactly the model's; INVALID_HANDLE only for a var deleted
 * meanwhile. Timed-out waits are counted, and those that began while a deferred op held the var.
 */
void concurrent_wait(uint64_t* rng, wait_kind kind, wait_note* note);
/* The dedicated waiter threads' step: one wait of a random kind, then a short pause. */
void waiter_step(uint64_t* rng, wait_note* note);
/* "waiting on var 0x.. (timeout ...)" or "between waits". */
void wait_note_print(FILE* to, const wait_note* note);

#endif /* ORDO_TESTS_STRESS_STRESS_WAITER_H */
