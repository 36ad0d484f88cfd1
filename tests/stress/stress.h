/*
 * Shared types of the long stress checker (tests/stress/): the sequential model's vars and ops,
 * the run's options and its counters. See ordo_stress.c for the overall design.
 */
#ifndef ORDO_TESTS_STRESS_STRESS_H
#define ORDO_TESTS_STRESS_STRESS_H

#include <ordo/ordo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

enum { MAX_READS = 4, MAX_WRITES = 3, MAX_TOUCH = MAX_READS + MAX_WRITES };

/* Injected failure codes: FAIL_BASE + a small number, far from every ORDO_ERR_* value. */
enum { FAIL_BASE = 1000, FAIL_CODES = 4 };

/* How long the two readers of a rendezvous wait for each other before calling it a mismatch. */
enum { RENDEZVOUS_TIMEOUT_MS = 10000 };

typedef struct stress_options {
  uint64_t ops;       /* ops pushed in all */
  uint64_t round_ops; /* ops per round; the engine is drained and checked between rounds */
  uint64_t seed;
  int pushers;
  int vars;
  int threads; /* engine CPU workers */
  int completers;
  int waiters;  /* threads that wait on vars outside the model lock, timed and not */
  int32_t kind; /* ORDO_ENGINE_* */
  int watchdog_s;
} stress_options;

/* Parses argv into *out. Returns 0; -1 after printing --help; 2 (usage printed) on a bad flag. */
int stress_parse_options(int argc, char** argv, stress_options* out);
const char* stress_kind_name(int32_t kind);

/*
 * One incarnation of a var: its handle, the "data" running ops check and change, and the model's
 * prediction. A deleted var's cell lives on until the last op that touches it has finished
 * (refcount), because a new cell with a new handle replaces it in the slot at once.
 */
typedef struct var_cell {
  /* data side, touched by running ops on any thread */
  _Atomic uint32_t data_version; /* bumped by each writer that ran */
  atomic_int writers_in;         /* writers inside their callback right now */
  atomic_int readers_in;         /* readers inside their callback right now */
  atomic_int refs;               /* the slot's (until deleted) + one per pushed op */
  atomic_int deferred_in;        /* ops on this var deferred and not yet completed by a completer */
  atomic_int waiters_in;         /* threads inside a wait on this var right now */
  char pad[40];
  /* model side, only under the push lock */
  ordo_var handle;
  int slot;               /* the slot it lives (or lived) in; set before any op can see it */
  int deleted;            /* ordo_var_delete was called on it */
  unsigned long events;   /* pushed writes (run or skipped) and clears: what changes its state */
  uint32_t model_version; /* writes by ops predicted to run, pushed so far */
  int poisoned;           /* predicted error state */
  int32_t code;           /* predicted error code, meaningful when code_known */
  int code_known;         /* 0 when an op inherited one of several different codes */
} var_cell;

/* How a running op reaches completion. */
typedef enum finish_kind {
  FINISH_ON_RETURN = 0,    /* the callback's return value */
  FINISH_BY_COMPLETER = 1, /* ordo_exec_defer, then ordo_complete from a completer thread */
  FINISH_INLINE = 2,       /* ordo_exec_defer, then ordo_complete before the callback returns */
} finish_kind;

/* One pushed op as the model sees it: vars deduplicated, a var in both lists is mutable. */
typedef struct op_rec {
  struct op_rec* next_in_queue; /* completer queue link */
  ordo_completion completion;
  uint64_t seq; /* position in the global push order */
  var_cell* cell[MAX_TOUCH];
  uint32_t expect[MAX_TOUCH]; /* predicted data_version of cell[i] when the op runs */
  uint8_t is_mut[MAX_TOUCH];
  uint8_t n;
  uint8_t predicted_run;  /* 0: must be skipped (a var it touches carries an error) */
  uint8_t finish;         /* finish_kind */
  uint8_t return_garbage; /* deferred: return non-zero, which must be ignored */
  uint8_t linger;         /* spin a little inside the callback, so ops overlap */
  uint8_t rendezvous;     /* one of two readers that must be able to run at the same time */
  int32_t code;           /* injected failure code, 0 = success */
  atomic_uint runs;
} op_rec;

/* Counters updated by running ops, free_fns and completers (any thread). */
typedef struct stress_counters {
  _Alignas(64) atomic_ulong ran;
  _Alignas(64) atomic_ulong finished; /* free_fn calls */
  atomic_ulong checks;
  _Alignas(64) atomic_ulong mismatches;
  atomic_ulong api_errors;
  _Alignas(64) atomic_ulong deferred;
  atomic_ulong completed_by_completer;
  atomic_ulong completed_inline;
  atomic_ulong failed_runs; /* ops that ran and failed (returned or completed non-zero) */
  atomic_ulong reader_overlaps;
  atomic_int max_readers_seen;
  atomic_ulong rendezvous_met;
  atomic_ulong rendezvous_timeouts;
  /* waits outside the model lock (stress_waiter.c), several threads on one var at once */
  _Alignas(64) atomic_ulong waits_polled; /* timeout 0 */
  atomic_ulong waits_poll_timeouts;       /* ... that said ORDO_ERR_TIMEOUT */
  atomic_ulong waits_timed;               /* timeout > 0 */
  atomic_ulong waits_expired;             /* ... that said ORDO_ERR_TIMEOUT */
  atomic_ulong waits_expired_on_deferred; /* ... while a deferred op held the var */
  atomic_ulong waits_untimed;             /* ordo_wait_for_var */
  atomic_ulong waits_done_on_deferred;    /* returned after a completer completed an op
                                             that held the var when the wait began */
  atomic_ulong waits_shared;              /* began while another thread waited on the var */
  atomic_ulong waits_exact;               /* result checked exactly against the model */
  atomic_ulong waits_bounded;             /* only a lower bound on the version checkable */
  atomic_ulong waits_on_deleted;          /* ORDO_ERR_INVALID_HANDLE: deleted meanwhile */
} stress_counters;

extern stress_counters g_count;
extern ordo_engine* g_engine;

/* Diagnostics: the first few are printed, all are counted. */
void stress_mismatch(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void stress_api_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
/* Checks that a call returned `want`; counts a check, reports an API error otherwise. */
int stress_expect_status(ordo_status got, ordo_status want, const char* what);
static inline void stress_count_checks(unsigned long n) {
  atomic_fetch_add_explicit(&g_count.checks, n, memory_order_relaxed);
}

/* ---- var cells (stress_model.c) ---- */
var_cell* cell_new(void); /* ordo_var_new; NULL (after an API error) on failure */
void cell_retain(var_cell* c);
void cell_release(var_cell* c);
long cells_alive(void);

/* ---- running side (stress_exec.c) ---- */
int32_t stress_op_fn(ordo_exec* exec, void* user_data);
void stress_op_free(void* user_data);
/* Bumps what the op wrote and leaves its vars; called just before the op completes. */
void op_leave_vars(const op_rec* op);
/* For pushes that must be refused: report an error if the engine ever calls them. */
int32_t stress_probe_fn(ordo_exec* exec, void* user_data);
void stress_probe_free(void* user_data);
/* The rendezvous pair: armed by the pusher that pushes it, one pair at a time. */
int rendezvous_idle(void);
void rendezvous_arm(void);
int rendezvous_state(void);

/* ---- completer threads (stress_completer.c) ---- */
int completers_start(int n, uint64_t seed);
void completers_stop(void);
void completer_enqueue(op_rec* op);
/* A slot that an op waiting for a completer touches, for waiters to aim at; -1 before any. */
int completer_hint_slot(void);
unsigned long completer_queue_depth(void);

/* ---- watchdog (stress_watchdog.c) ---- */
typedef void (*watchdog_dump_fn)(void);
int watchdog_start(int seconds, watchdog_dump_fn dump);
void watchdog_stop(void);
unsigned long watchdog_progress(void);

#endif /* ORDO_TESTS_STRESS_STRESS_H */
