/*
 * core_latency: the time for one cache line to go from one core to another and back, measured
 * by two threads pinned to the first two online CPUs bouncing a counter. Printed by bench/run.sh
 * in the table's header, before and after the run.
 *
 * Why: every dependency hand-off between threads costs at least this, and on a virtual machine
 * it is not a constant. On the 2-vCPU development VMs it has been seen to jump between about
 * 70 ns and 350 ns from one minute to the next (the hypervisor moves the vCPUs between
 * physical cores), which moves every number in the table by up to 3x. A table is only
 * comparable with another one taken at a similar round trip.
 *
 * Output: one line, "<median ns> <min ns> <max ns>" over 7 samples; "- - -" when fewer than two
 * CPUs can be used.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kRounds = 20000, kSamples = 7 };

static _Atomic long ball __attribute__((aligned(64)));
static int cpus[2];

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void* bounce_back(void* arg) {
  (void)arg;
  (void)pin(cpus[1]);  // unpinned, it still bounces (the main thread must not wait forever)
  for (long i = 0; i < (long)kSamples * kRounds; i++) {
    while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1) {
    }
    atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(void) {
  cpu_set_t allowed;
  int found = 0;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++) {
      if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
    }
  }
  pthread_t other;
  if (found < 2 || pin(cpus[0]) != 0 || pthread_create(&other, NULL, bounce_back, NULL) != 0) {
    puts("- - -");
    return 0;
  }
  double sample[kSamples];
  long i = 0;
  for (int s = 0; s < kSamples; s++) {
    double t0 = now_ns();
    for (int r = 0; r < kRounds; r++, i++) {
      atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
      while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2) {
      }
    }
    sample[s] = (now_ns() - t0) / kRounds;
  }
  pthread_join(other, NULL);
  qsort(sample, kSamples, sizeof sample[0], by_value);
  printf("%.0f %.0f %.0f\n", sample[kSamples / 2], sample[0], sample[kSamples - 1]);
  return 0;
}
