/*
 * Completer threads: foreign threads (not engine workers) that finish deferred ops some time
 * after their callback returned, the way a GPU runtime or an I/O library would. Several of them
 * take from one FIFO, so completions also come out of push order.
 */
#include <sched.h>
#include <stdlib.h>

#include "../test_util.h"
#include "stress.h"
#include "stress_rng.h"

enum { MAX_COMPLETERS = 64 };

static pthread_mutex_t g_q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_q_cv = PTHREAD_COND_INITIALIZER;
static op_rec* g_q_head;
static op_rec* g_q_tail;
static unsigned long g_q_depth;
static int g_q_stop;

static atomic_int g_hint_slot = -1;

static pthread_t g_threads[MAX_COMPLETERS];
static uint64_t g_seeds[MAX_COMPLETERS];
static int g_nthreads;

void completer_enqueue(op_rec* op) {
  /* the op holds its vars until a completer completes it: waits on them must outlast that */
  for (int i = 0; i < op->n; i++) atomic_fetch_add(&op->cell[i]->deferred_in, 1);
  if (op->n)
    atomic_store_explicit(&g_hint_slot, op->cell[op->seq % op->n]->slot, memory_order_relaxed);
  op->next_in_queue = NULL;
  pthread_mutex_lock(&g_q_mu);
  if (g_q_tail) {
    g_q_tail->next_in_queue = op;
  } else {
    g_q_head = op;
  }
  g_q_tail = op;
  g_q_depth++;
  pthread_cond_signal(&g_q_cv);
  pthread_mutex_unlock(&g_q_mu);
}

int completer_hint_slot(void) {
  return atomic_load_explicit(&g_hint_slot, memory_order_relaxed);
}

unsigned long completer_queue_depth(void) {
  pthread_mutex_lock(&g_q_mu);
  unsigned long d = g_q_depth;
  pthread_mutex_unlock(&g_q_mu);
  return d;
}

/* NULL once stopped and drained. */
static op_rec* dequeue(void) {
  pthread_mutex_lock(&g_q_mu);
  while (!g_q_head && !g_q_stop) pthread_cond_wait(&g_q_cv, &g_q_mu);
  op_rec* op = g_q_head;
  if (op) {
    g_q_head = op->next_in_queue;
    if (!g_q_head) g_q_tail = NULL;
    g_q_depth--;
  }
  pthread_mutex_unlock(&g_q_mu);
  return op;
}

/* "Later": usually a yield, now and then a real sleep that holds the op's vars for a while. */
static void delay(uint64_t* rng) {
  uint32_t r = rng_below(rng, 64);
  if (r == 0) {
    tu_sleep_us(50 + rng_below(rng, 200));
  } else if (r < 32) {
    sched_yield();
  }
}

static void complete_one(op_rec* op, uint64_t* rng) {
  delay(rng);
  /* op may be freed by the engine as soon as ordo_complete runs: copy what comes after */
  ordo_completion c = op->completion;
  int32_t code = op->code;
  op->next_in_queue = NULL;
  op_leave_vars(op); /* the writes are done before the engine can start the next op */
  for (int i = 0; i < op->n; i++) atomic_fetch_sub(&op->cell[i]->deferred_in, 1);
  /* counted before the call: a waiter may wake, and check the counts, as soon as it runs */
  if (code) atomic_fetch_add_explicit(&g_count.failed_runs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_count.completed_by_completer, 1, memory_order_relaxed);
  ordo_status st = ordo_complete(c, code, code ? "injected async failure" : NULL);
  stress_expect_status(st, ORDO_OK, "ordo_complete (completer thread)");
  if (rng_below(rng, 32) == 0) { /* a handle completes once (SPEC §3) */
    st = ordo_complete(c, 0, NULL);
    stress_expect_status(st, ORDO_ERR_INVALID_HANDLE, "a second ordo_complete of one handle");
  }
}

static void* completer_main(void* arg) {
  uint64_t* rng = (uint64_t*)arg;
  for (op_rec* op; (op = dequeue()) != NULL;) complete_one(op, rng);
  return NULL;
}

int completers_start(int n, uint64_t seed) {
  if (n > MAX_COMPLETERS) n = MAX_COMPLETERS;
  g_q_stop = 0;
  for (g_nthreads = 0; g_nthreads < n; g_nthreads++) {
    g_seeds[g_nthreads] = rng_seed(seed, 1000 + (uint64_t)g_nthreads);
    if (pthread_create(&g_threads[g_nthreads], NULL, completer_main, &g_seeds[g_nthreads])) {
      return -1;
    }
  }
  return 0;
}

/* Drains the queue, then joins. */
void completers_stop(void) {
  pthread_mutex_lock(&g_q_mu);
  g_q_stop = 1;
  pthread_cond_broadcast(&g_q_cv);
  pthread_mutex_unlock(&g_q_mu);
  for (int i = 0; i < g_nthreads; i++) pthread_join(g_threads[i], NULL);
  g_nthreads = 0;
}
