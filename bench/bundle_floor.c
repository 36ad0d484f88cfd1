/* bundle_floor: a floor for issue #26's "bundle" of independent graph ops (docs/ARCHITECTURE.md
 * section 10), on workload E: two pushers, each launching a prebuilt graph of `half` ops on
 * distinct vars. Not ordo: a model of the least work such a design must do, timed like E.
 * The launch takes each member's var (push lock, idle test, mark held, unlock: what a bundle
 * must do so that later pushes queue behind the member) and posts one bundle; two workers claim
 * members one at a time from an atomic cursor (constraint 3), call the op, and release its var
 * (a CAS, as a grant with nobody waiting). No exec token, deferral, error state, stats, trace,
 * pool or OpLife: everything a real member also needs is left out, so this is a floor.
 * Idle workers spin a little, then sleep on a futex, as ordo's do. Run it beside the peers:
 *   build/bench/bundle_floor --ops 200000 --reps 5 --only E
 * BUNDLE_FLOOR_CHUNK=N claims N members at a time (default 1); the system name says which.
 * (docs/PERFORMANCE.md, "What would make it faster"). */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_pushers.h"

typedef struct {
  _Alignas(64) atomic_int lock;
  atomic_uintptr_t state; /* 0 idle, else the holder */
} var_t;

typedef struct {
  _Alignas(64) int32_t (*fn)(void*, void*);
  void* ud;
  var_t* var;
} node_t;

typedef struct {
  _Alignas(64) atomic_size_t cursor;
  _Alignas(64) atomic_size_t left;
  node_t* nodes;
  size_t n;
} bundle_t;

static bundle_t g_bundle[2];
static atomic_int g_posted; /* futex word: bumped per post */
static atomic_int g_sleepers;
static atomic_int g_quit;
static var_t* g_vars;
static node_t* g_nodes;

#if defined(__x86_64__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

static int32_t empty_op(void* x, void* u) {
  (void)x;
  (void)u;
  return 0;
}

static void futex_wait(atomic_int* w, int v) {
  syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void futex_wake(atomic_int* w) {
  syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1 << 30, NULL, NULL, 0);
}

/* Members claimed at a time: 1 keeps constraint 3 (an idle worker can always take the next
 * member); more is what a design with per-worker deques could claim without giving it up. */
static size_t g_chunk = 1;

static int run_some(bundle_t* b) {
  const size_t first = atomic_fetch_add_explicit(&b->cursor, g_chunk, memory_order_relaxed);
  if (first >= b->n) return 0;
  const size_t end = first + g_chunk < b->n ? first + g_chunk : b->n;
  for (size_t i = first; i < end; i++) {
    node_t* nd = &b->nodes[i];
    nd->fn(NULL, nd->ud);
    uintptr_t held = (uintptr_t)nd;
    atomic_compare_exchange_strong_explicit(&nd->var->state, &held, 0, memory_order_release,
                                            memory_order_relaxed);
  }
  atomic_fetch_sub_explicit(&b->left, end - first, memory_order_release);
  return 1;
}

static void* worker(void* arg) {
  int me = (int)(intptr_t)arg;
  for (;;) {
    int seen = atomic_load(&g_posted);
    int ran = 0;
    for (int k = 0; k < 2; k++) {
      bundle_t* b = &g_bundle[(me + k) & 1]; /* its own bundle first */
      while (atomic_load_explicit(&b->cursor, memory_order_relaxed) < b->n && run_some(b)) ran = 1;
    }
    if (ran) continue;
    if (atomic_load(&g_quit)) return NULL;
    int spins = 0;
    while (atomic_load(&g_posted) == seen && ++spins < 4000) cpu_relax();
    if (atomic_load(&g_posted) == seen) {
      atomic_fetch_add(&g_sleepers, 1);
      futex_wait(&g_posted, seen);
      atomic_fetch_sub(&g_sleepers, 1);
    }
  }
}

static void launch_half(void* ctx, int which, size_t half) {
  (void)ctx;
  node_t* nodes = g_nodes + (size_t)which * half;
  for (size_t i = 0; i < half; i++) {
    var_t* v = nodes[i].var;
    while (atomic_exchange_explicit(&v->lock, 1, memory_order_acquire)) cpu_relax();
    if (atomic_load_explicit(&v->state, memory_order_relaxed) != 0) abort(); /* would queue */
    atomic_store_explicit(&v->state, (uintptr_t)&nodes[i], memory_order_relaxed);
    atomic_store_explicit(&v->lock, 0, memory_order_release);
  }
  bundle_t* b = &g_bundle[which];
  atomic_store(&b->cursor, SIZE_MAX / 2); /* nothing to claim while it is refilled */
  b->nodes = nodes;
  atomic_store_explicit(&b->left, half, memory_order_relaxed);
  b->n = half;
  atomic_store_explicit(&b->cursor, 0, memory_order_release);
  atomic_fetch_add(&g_posted, 1);
  if (atomic_load(&g_sleepers)) futex_wake(&g_posted);
}

static bench_pushers* g_two;

static size_t run_e(void* ctx, size_t n) {
  (void)ctx;
  size_t half = n / 2;
  for (size_t i = 0; i < 2 * half; i++) {
    g_nodes[i].fn = empty_op;
    g_nodes[i].ud = NULL;
    g_nodes[i].var = &g_vars[i];
  }
  size_t pushed = bench_pushers_run(g_two, n);
  for (int k = 0; k < 2; k++)
    while (atomic_load_explicit(&g_bundle[k].left, memory_order_acquire) != 0) sched_yield();
  return pushed;
}

int main(int argc, char** argv) {
  bench_args a = bench_parse_args(argc, argv);
  const char* chunk = getenv("BUNDLE_FLOOR_CHUNK");
  if (chunk && atoi(chunk) > 0) g_chunk = (size_t)atoi(chunk);
  for (int k = 0; k < 2; k++) g_bundle[k].n = 0;
  g_vars = aligned_alloc(64, a.ops * sizeof(var_t));
  g_nodes = aligned_alloc(64, a.ops * sizeof(node_t));
  memset(g_vars, 0, a.ops * sizeof(var_t));
  pthread_t w[2];
  for (int i = 0; i < 2; i++) pthread_create(&w[i], NULL, worker, (void*)(intptr_t)i);
  g_two = bench_pushers_start(launch_half, NULL);
  char system[32];
  snprintf(system, sizeof system, "bundle-floor-%zu", g_chunk);
  bench_run_workload(system, 'E', &a, run_e, NULL);
  atomic_store(&g_quit, 1);
  atomic_fetch_add(&g_posted, 1);
  futex_wake(&g_posted);
  for (int i = 0; i < 2; i++) pthread_join(w[i], NULL);
  return 0;
}
