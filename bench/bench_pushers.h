/*
 * bench_pushers: workload E's two pushing threads, for every system alike. They are started once,
 * before any timed repetition, and released together for each one by a barrier, so that no
 * system pays for creating threads inside its timer (an audit found ordo's pushers persistent
 * while StarPU's, MXNet's and oneTBB's were created in every repetition). Each repetition,
 * thread `which` (0 or 1) runs push_half(ctx, which, half); bench_pushers_run returns once both
 * have returned, and the caller then waits for the work as its system does.
 */
#ifndef ORDO_BENCH_PUSHERS_H
#define ORDO_BENCH_PUSHERS_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*bench_push_half_fn)(void* ctx, int which, size_t half);

typedef struct bench_pushers bench_pushers;

typedef struct {
  bench_pushers* pushers;
  int which;
} bench_pusher_arg;

struct bench_pushers {
  bench_push_half_fn push_half; /* may change between repetitions: published by the barrier */
  void* ctx;
  pthread_t thread[2];
  bench_pusher_arg arg[2];
  pthread_barrier_t go, done; /* 3 parties each: the two pushers and the timing thread */
  size_t half;
  int quit;
};

static void* bench_pusher_main(void* arg) {
  bench_pusher_arg* a = (bench_pusher_arg*)arg;
  bench_pushers* p = a->pushers;
  for (;;) {
    pthread_barrier_wait(&p->go);
    if (p->quit) return NULL;
    p->push_half(p->ctx, a->which, p->half);
    pthread_barrier_wait(&p->done);
  }
}

static inline bench_pushers* bench_pushers_start(bench_push_half_fn push_half, void* ctx) {
  bench_pushers* p = (bench_pushers*)malloc(sizeof *p);
  if (!p) {
    fprintf(stderr, "bench: out of memory\n");
    exit(1);
  }
  memset(p, 0, sizeof *p);
  p->push_half = push_half;
  p->ctx = ctx;
  pthread_barrier_init(&p->go, NULL, 3);
  pthread_barrier_init(&p->done, NULL, 3);
  for (int i = 0; i < 2; i++) {
    p->arg[i].pushers = p;
    p->arg[i].which = i;
    if (pthread_create(&p->thread[i], NULL, bench_pusher_main, &p->arg[i]) != 0) {
      fprintf(stderr, "bench: pthread_create failed\n");
      exit(1);
    }
  }
  return p;
}

/* Runs one repetition: n / 2 ops per pusher. Returns the ops pushed (2 * (n / 2)). */
static inline size_t bench_pushers_run(bench_pushers* p, size_t n) {
  p->half = n / 2;
  pthread_barrier_wait(&p->go);
  pthread_barrier_wait(&p->done);
  return 2 * p->half;
}

static inline void bench_pushers_stop(bench_pushers* p) {
  p->quit = 1; /* published to the pushers by the barrier */
  pthread_barrier_wait(&p->go);
  for (int i = 0; i < 2; i++) pthread_join(p->thread[i], NULL);
  pthread_barrier_destroy(&p->go);
  pthread_barrier_destroy(&p->done);
  free(p);
}

#endif
