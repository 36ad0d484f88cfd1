/*
 * core_latency: the time for one cache line to go from one core to another and back, measured
 * by two threads pinned to the first two online CPUs bouncing a counter. Printed by bench/run.sh
 * in the table's header, before and after the run.
 *
 * Why it matters, and how it is measured: bench_c2c.h. A table is only comparable with another
 * one taken at a similar round trip.
 *
 * Output: one line, "<median ns> <min ns> <max ns>" over 7 samples; "- - -" when fewer than two
 * CPUs can be used.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* before any libc header: bench_c2c.h pins threads */
#endif
#include <stdio.h>
#include <stdlib.h>

#include "bench_c2c.h"

enum { kRounds = 20000, kSamples = 7 };

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(void) {
  double sample[kSamples];
  if (bench_c2c_samples(kRounds, kSamples, sample) != kSamples) {
    puts("- - -");
    return 0;
  }
  qsort(sample, kSamples, sizeof sample[0], by_value);
  printf("%.0f %.0f %.0f\n", sample[kSamples / 2], sample[0], sample[kSamples - 1]);
  return 0;
}
