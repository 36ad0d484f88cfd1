/*
 * The sequential model: what a one-op-at-a-time engine would do with the same pushes, clears
 * and deletes, in the same global order. Every function here runs under g_model.mu, held
 * around "choose, predict, call ordo" so that the model's order is the engine's linearization
 * of pushes from several threads (SPEC §2.4).
 */
#ifndef ORDO_TESTS_STRESS_STRESS_MODEL_H
#define ORDO_TESTS_STRESS_STRESS_MODEL_H

#include <stddef.h>

#include "stress.h"

enum { DEAD_RING = 64 }; /* recently deleted handles kept for misuse probes */

typedef struct stress_model {
  pthread_mutex_t mu;
  var_cell** slot; /* current incarnation of each var slot */
  int nslots;
  uint64_t next_seq; /* ops pushed so far: the next op's place in the global order */
  unsigned long failures_since_wait_all; /* ops predicted to fail or be skipped */
  ordo_var dead[DEAD_RING];
  unsigned long dead_total;
  /* what the model predicted, in all */
  unsigned long pred_runs, pred_skips, pred_fails;
  unsigned long clears, deletes, var_waits;
  unsigned long rendezvous_pairs;
} stress_model;

extern stress_model g_model;

/* Creates nslots vars. 0 on success. */
int model_init(int nslots);
/* Drops the slots' references (after the engine is destroyed). */
void model_release_slots(void);

/*
 * Fills op's var list from slot indices (deduplicated, a var in both lists is mutable), the
 * handles to push (duplicates kept, so the engine's merging is exercised too), the versions
 * each var must have when the op runs, and whether it runs at all. Takes one cell reference
 * per var (the op's free_fn drops them).
 */
void model_fill_op(op_rec* op, const int* widx, size_t nw, const int* ridx, size_t nr,
                   ordo_var* writes, ordo_var* reads);
/* After a successful push: the op's effect on the model (versions, error states). */
void model_commit_op(const op_rec* op);
/* After a failed push: give back what model_fill_op took. */
void model_abandon_op(op_rec* op);

/* ordo_var_clear_error on a slot, ordered like a write. */
void model_clear(int slot);
/* ordo_var_delete on a slot, checks the handle is dead at once, puts a new var in the slot. */
void model_replace(int slot);
/* ordo_wait_for_var on a slot and the settled state it must leave: status, error code,
 * data version, nobody inside. */
void model_ordered_wait(int slot);
/* A random recently deleted handle, 0 when none. */
ordo_var model_dead_handle(uint64_t r);
/* A slot whose var is clean, or -1 after a few tries. */
int model_clean_slot(uint64_t* rng);
/* Checks every slot once the engine is idle: error state, wait status, version, occupancy.
 * Returns the number of slots checked. */
int model_check_quiescent(void);
/* Then a poll and a timed wait on every slot: the same state, at once. Returns the slots. */
int model_check_idle_polls(void);

#endif /* ORDO_TESTS_STRESS_STRESS_MODEL_H */
