/*
 * bench_c2c.h: the cache-line round trip between two cores, measured by two threads pinned to
 * the first two CPUs this process may use, bouncing a counter. bench/core_latency prints it
 * before and after a suite run; every A-E repetition (bench_common.h) probes it before and
 * after itself, so that bench/compare.py can tell which repetitions ran while the machine was
 * fast.
 *
 * Why: every dependency hand-off between threads costs at least this, and on a virtual machine
 * it is not a constant. On the 2-vCPU development VMs it jumps between about 50-60 ns and about
 * 340-370 ns, in spells of 10 to 20 seconds (a sample a second for a minute: 44 s fast, 9 s
 * slow, fast again), as the hypervisor moves the vCPUs between physical cores. That moves every
 * number in the table by up to 3x, and a benchmark process of a second or two lands in one
 * spell or the other.
 *
 * The calling thread is pinned to the first CPU while it measures, and its own CPU set is put
 * back afterwards. The two CPUs are the first two of the calling thread's own set: a caller
 * bound to one CPU (libgomp's main thread under OMP_PROC_BIND=true, which bench/run.sh does
 * not set) gets -1, no probe. Valid C99 and C++ (bench_tbb.cpp includes it through
 * bench_common.h).
 */
#ifndef ORDO_BENCH_C2C_H
#define ORDO_BENCH_C2C_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* only takes effect when no system header came first: see the check below */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#ifndef CPU_SETSIZE
#error "bench_c2c.h needs _GNU_SOURCE defined before the first system header"
#endif

typedef struct {
  long ball __attribute__((aligned(64))); /* the line that bounces */
  int cpu;                                /* the bouncing thread's CPU */
  long trips;                             /* round trips it answers, in all (read once) */
  char pad[64];                           /* no other data shares ball's line */
} bench_c2c_court;

static inline double bench_c2c_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static inline int bench_c2c_pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static inline void* bench_c2c_bounce_back(void* arg) {
  bench_c2c_court* c = (bench_c2c_court*)arg;
  (void)bench_c2c_pin(c->cpu); /* unpinned (the caller's CPU set), it still bounces */
  const long trips = c->trips;
  for (long i = 0; i < trips; i++) {
    while (__atomic_load_n(&c->ball, __ATOMIC_ACQUIRE) != 2 * i + 1) {
    }
    __atomic_store_n(&c->ball, 2 * i + 2, __ATOMIC_RELEASE);
  }
  return NULL;
}

/* Measures `samples` samples of `rounds` round trips each into out[] (ns per round trip, in
 * the order measured). Returns the number of samples taken: 0 when fewer than two CPUs can be
 * used or the second thread cannot start. */
static inline int bench_c2c_samples(int rounds, int samples, double* out) {
  cpu_set_t mine;
  if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) != 0) return 0;
  int cpus[2], found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; c++) {
    if (CPU_ISSET(c, &mine)) cpus[found++] = c;
  }
  if (found < 2) return 0;
  static bench_c2c_court court; /* one probe at a time per process: callers are the main thread */
  court.ball = 0;
  court.cpu = cpus[1];
  court.trips = (long)rounds * samples;
  /* The bouncing thread starts before the caller pins itself, so that it inherits the caller's
   * whole CPU set: were its own pin to fail, it would still not be stuck on the caller's CPU
   * (where every round trip would wait for a time slice). */
  pthread_t other;
  if (pthread_create(&other, NULL, bench_c2c_bounce_back, &court) != 0) return 0;
  (void)bench_c2c_pin(cpus[0]); /* unpinned, it still bounces */
  long i = 0;
  for (int s = 0; s < samples; s++) {
    double t0 = bench_c2c_now_ns();
    for (int r = 0; r < rounds; r++, i++) {
      __atomic_store_n(&court.ball, 2 * i + 1, __ATOMIC_RELEASE);
      while (__atomic_load_n(&court.ball, __ATOMIC_ACQUIRE) != 2 * i + 2) {
      }
    }
    out[s] = (bench_c2c_now_ns() - t0) / rounds;
  }
  pthread_join(other, NULL);
  (void)pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
  return samples;
}

/* A quick probe (under a millisecond while the machine is fast, a few while it is slow): the
 * fastest of 5 samples of 300 round trips, in ns; -1 when it cannot be measured. The fastest,
 * not the median: a sample during which another thread held one of the two CPUs (a peer's
 * spinning worker, say) is slower than the hardware, never faster. */
static inline double bench_c2c_quick_ns(void) {
  double s[5];
  int n = bench_c2c_samples(300, 5, s);
  if (n == 0) return -1;
  double best = s[0];
  for (int i = 1; i < n; i++) best = s[i] < best ? s[i] : best;
  return best;
}

#endif
