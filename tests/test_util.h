/*
 * Small helpers shared by the Criterion test files. Generic on purpose: nothing here asserts, so
 * it is usable from worker-thread callbacks and from any test file. Include after <ordo/ordo.h>
 * or on its own (it includes it).
 */
#ifndef ORDO_TESTS_TEST_UTIL_H
#define ORDO_TESTS_TEST_UTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <fcntl.h>
#include <ordo/ordo.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/** Monotonic clock in nanoseconds. */
static inline uint64_t tu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/** Monotonic clock in milliseconds. */
static inline uint64_t tu_now_ms(void) {
  return tu_now_ns() / 1000000ull;
}

/** Sleeps for ms milliseconds (restarts on EINTR). */
static inline void tu_sleep_ms(uint32_t ms) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ms / 1000u);
  ts.tv_nsec = (long)(ms % 1000u) * 1000000L;
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/** Sleeps for us microseconds. */
static inline void tu_sleep_us(uint32_t us) {
  struct timespec ts;
  ts.tv_sec = (time_t)(us / 1000000u);
  ts.tv_nsec = (long)(us % 1000000u) * 1000L;
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/** Waits until *p >= target or timeout_ms passes. Returns true when the target was reached. */
static inline bool tu_wait_ge(atomic_int* p, int target, uint32_t timeout_ms) {
  uint64_t deadline = tu_now_ms() + timeout_ms;
  for (unsigned spins = 0;; ++spins) {
    if (atomic_load(p) >= target) return true;
    if (tu_now_ms() >= deadline) return atomic_load(p) >= target;
    if (spins > 64) tu_sleep_us(50);
  }
}

/** Waits until *p == target or timeout_ms passes. Returns true when the target was reached. */
static inline bool tu_wait_eq(atomic_int* p, int target, uint32_t timeout_ms) {
  uint64_t deadline = tu_now_ms() + timeout_ms;
  for (unsigned spins = 0;; ++spins) {
    if (atomic_load(p) == target) return true;
    if (tu_now_ms() >= deadline) return atomic_load(p) == target;
    if (spins > 64) tu_sleep_us(50);
  }
}

/* ---- Where another thread is: for tests that must not go on before it blocks. ---------------
 * A flag set right before a blocking call says the thread is about to call, not that it is in
 * the call; a sleep only makes that likely. The kernel says where a thread sleeps: these read
 * /proc/self/task/TID with plain open and read (no FILE, no malloc), so that the watching thread
 * takes no lock the watched one may need. */

/** The calling thread's kernel thread id (what the tu_thread_* functions take). */
static inline int tu_gettid(void) {
  return (int)syscall(SYS_gettid);
}

/** Reads /proc/self/task/TID/<file> into buf (NUL-terminated, cut to cap - 1 bytes). */
static inline bool tu_read_task_file(int tid, const char* file, char* buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/%s", tid, file);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n <= 0) break;
    len += (size_t)n;
    if (len == cap - 1) break;
  }
  close(fd);
  buf[len] = '\0';
  return len > 0;
}

/** The system call (SYS_futex, SYS_openat, ...) that thread tid of this process sleeps in; -1
 *  when it runs, or sleeps outside a system call. Where the kernel does not say (no
 *  /proc/self/task/TID/syscall): -3 when the thread sleeps at all (state S or D), else -1. */
static inline long tu_thread_syscall(int tid) {
  char buf[256];
  if (tu_read_task_file(tid, "syscall", buf, sizeof buf)) {
    if (buf[0] < '0' || buf[0] > '9') return -1; /* "running", or "-1 ..." */
    return strtol(buf, NULL, 10);
  }
  if (!tu_read_task_file(tid, "stat", buf, sizeof buf)) return -1;
  const char* p = strrchr(buf, ')'); /* "tid (name) S ..." */
  return (p && (p[2] == 'S' || p[2] == 'D')) ? -3 : -1;
}

/** How many times thread tid has gone to sleep (voluntary context switches); -1 unknown. */
static inline long tu_thread_sleeps(int tid) {
  char buf[4096];
  if (!tu_read_task_file(tid, "status", buf, sizeof buf)) return -1;
  const char* p = strstr(buf, "\nvoluntary_ctxt_switches:");
  return p ? strtol(p + strlen("\nvoluntary_ctxt_switches:"), NULL, 10) : -1;
}

/**
 * Waits up to timeout_ms for thread tid to be parked in system call nr: asleep in it, and still
 * asleep there, having not woken, a millisecond later (a thread passing through a contended lock
 * sleeps for microseconds). With after_sleeps >= 0, only a sleep begun after the thread had slept
 * after_sleeps times counts (tu_thread_sleeps: it woke and went back to sleep). Where the kernel
 * does not say which call a thread sleeps in, any sleep counts. True when seen.
 */
static inline bool tu_wait_thread_parked(int tid, long nr, long after_sleeps, uint32_t timeout_ms) {
  uint64_t deadline = tu_now_ms() + timeout_ms;
  for (;;) {
    long sc = tu_thread_syscall(tid);
    long sleeps = tu_thread_sleeps(tid);
    if ((sc == nr || sc == -3) && (after_sleeps < 0 || sleeps > after_sleeps)) {
      tu_sleep_ms(1);
      long sc2 = tu_thread_syscall(tid);
      if ((sc2 == nr || sc2 == -3) && tu_thread_sleeps(tid) == sleeps) return true;
    }
    if (tu_now_ms() >= deadline) return false;
    tu_sleep_us(100);
  }
}

/** Records the largest value seen into *max (atomic max). */
static inline void tu_atomic_max(atomic_int* max, int v) {
  int cur = atomic_load(max);
  while (v > cur && !atomic_compare_exchange_weak(max, &cur, v)) {
  }
}

/** Stores s into *slot only when it is still `unset` (keeps the first value recorded). */
static inline void tu_record_first(atomic_int* slot, int unset, int s) {
  int expected = unset;
  atomic_compare_exchange_strong(slot, &expected, s);
}

/**
 * True when the test runs under valgrind (its preload library is in LD_PRELOAD). Valgrind runs
 * one thread at a time and parks the others in the kernel, so counts of context switches or
 * timings mean nothing there; tests that assert on them skip those assertions.
 */
static inline bool tu_under_valgrind(void) {
  const char* p = getenv("LD_PRELOAD");
  return p && strstr(p, "vgpreload") != NULL;
}

/**
 * Creates an engine of the given kind (ORDO_ENGINE_*) with cpu_threads CPU workers (0 = default).
 * Returns the status of ordo_engine_create; *out is NULL on failure.
 */
static inline ordo_status tu_engine_create(int32_t kind, int32_t cpu_threads, ordo_engine** out) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = cpu_threads;
  return ordo_engine_create(&cfg, out);
}

#ifdef _GNU_SOURCE
#include <sched.h>
/**
 * Pins the calling thread, and every thread it creates from now on (an engine's workers too), to
 * the first CPU it may run on: each thread is then preempted at random points whenever another
 * one runs, which is when most of the engine's races show. Returns 0, or -1 when affinity
 * cannot be set.
 */
static inline int tu_pin_to_one_cpu(void) {
  cpu_set_t mine, one;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return -1;
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mine)) cpu++;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one);
}
#endif

/** Unsets the ORDO_* environment variables that override an engine's configuration, so that
 *  the config a test passes is the one it gets. */
static inline void tu_clear_ordo_env(void) {
  unsetenv("ORDO_ENGINE");
  unsetenv("ORDO_CPU_THREADS");
  unsetenv("ORDO_CPU_PRIORITY_THREADS");
  unsetenv("ORDO_COPY_THREADS");
  unsetenv("ORDO_MAX_PENDING");
}

/** Kinds with worker threads that can overlap ops (pooled, per_device). */
static const int32_t tu_threaded_kinds[] = {ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};
#define TU_NUM_THREADED_KINDS 2
/** Every engine kind, the naive one first. */
static const int32_t tu_all_kinds[] = {ORDO_ENGINE_NAIVE, ORDO_ENGINE_POOLED,
                                       ORDO_ENGINE_PER_DEVICE};
#define TU_NUM_ALL_KINDS 3

/** A short readable name for an engine kind, for assertion messages. */
static inline const char* tu_kind_name(int32_t kind) {
  switch (kind) {
    case ORDO_ENGINE_NAIVE:
      return "naive";
    case ORDO_ENGINE_POOLED:
      return "pooled";
    case ORDO_ENGINE_PER_DEVICE:
      return "per_device";
    default:
      return "default";
  }
}

/** Push options with a name (may be NULL) and defaults otherwise. */
static inline ordo_push_opts tu_opts_named(const char* name) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.name = name;
  return o;
}

/** A deferred op's record: tu_defer_fn defers and stores its completion handle here. */
typedef struct tu_deferred {
  _Atomic uint64_t completion; /**< 0 until the op has deferred */
  atomic_int defer_status;     /**< status of ordo_exec_defer */
  atomic_int calls;            /**< times the callback ran */
} tu_deferred;

static inline void tu_deferred_init(tu_deferred* d) {
  atomic_init(&d->completion, 0);
  atomic_init(&d->defer_status, -1);
  atomic_init(&d->calls, 0);
}

/** An op callback (user_data: tu_deferred*) that defers and leaves completion to the caller. */
static inline int32_t tu_defer_fn(ordo_exec* exec, void* user_data) {
  tu_deferred* d = (tu_deferred*)user_data;
  ordo_completion c = 0;
  ordo_status s = ordo_exec_defer(exec, &c);
  atomic_store(&d->defer_status, s);
  atomic_store(&d->completion, c);
  atomic_fetch_add(&d->calls, 1);
  return 0;
}

/** Waits up to timeout_ms for the deferred op to have deferred; returns its handle or 0. */
static inline ordo_completion tu_deferred_wait(tu_deferred* d, uint32_t timeout_ms) {
  uint64_t deadline = tu_now_ms() + timeout_ms;
  for (;;) {
    ordo_completion c = atomic_load(&d->completion);
    if (c != 0 || tu_now_ms() >= deadline) return c;
    tu_sleep_us(50);
  }
}

/** An op callback (user_data: atomic_int*) that counts its calls and succeeds. */
static inline int32_t tu_count_fn(ordo_exec* exec, void* user_data) {
  (void)exec;
  atomic_fetch_add((atomic_int*)user_data, 1);
  return 0;
}

/** A free_fn (user_data: atomic_int*) that counts its calls. */
static inline void tu_count_free(void* user_data) {
  atomic_fetch_add((atomic_int*)user_data, 1);
}

/**
 * A gate: each op running tu_gate_fn (user_data: tu_gate*) counts itself in `in` and holds its
 * worker until the test thread sets `open` (or 20 s pass). Used to keep workers busy while a
 * test queues work behind them.
 */
typedef struct tu_gate {
  atomic_int in;   /**< gate ops running */
  atomic_int open; /**< set to 1 to let them return */
} tu_gate;

static inline void tu_gate_init(tu_gate* g) {
  atomic_init(&g->in, 0);
  atomic_init(&g->open, 0);
}

static inline int32_t tu_gate_fn(ordo_exec* exec, void* user_data) {
  (void)exec;
  tu_gate* g = (tu_gate*)user_data;
  atomic_fetch_add(&g->in, 1);
  tu_wait_ge(&g->open, 1, 20000);
  return 0;
}

/**
 * Criterion helper (expands only where used, so this header does not need Criterion): asserts
 * that expr returns `want`, printing both status names, ctx (a string) and the thread's last
 * error message.
 */
#define TU_ASSERT_ST(expr, want, ctx)                                                          \
  do {                                                                                         \
    ordo_status tu_st_ = (expr);                                                               \
    char tu_msg_[512];                                                                         \
    ordo_last_error_copy(tu_msg_, sizeof tu_msg_);                                             \
    ordo_status tu_want_ = (want);                                                             \
    cr_assert_eq(tu_st_, tu_want_, "%s: %s -> %s, want %s (last error: \"%s\")", (ctx), #expr, \
                 ordo_status_string(tu_st_), ordo_status_string(tu_want_), tu_msg_);           \
  } while (0)

/** One ms in nanoseconds, for the *_timeout waits. */
#define TU_MS_NS(ms) ((uint64_t)(ms)*1000000ull)

#endif /* ORDO_TESTS_TEST_UTIL_H */
