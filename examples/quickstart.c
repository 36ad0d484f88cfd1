/*
 * ordo quickstart: the four things to know about the engine, each shown and checked.
 *   (a) writes to one var run in push order
 *   (b) readers of one var run at the same time
 *   (c) a failed op skips its dependents, the error reaches the waiter, and can be cleared
 *   (d) an asynchronous op completed from another thread, and a timed wait
 * Exits 0 when everything behaved as described, 1 (with a message) otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Every ordo call returns a status; a demo that ignores one would prove nothing. */
#define EXPECT(call, want)                                                                         \
  do {                                                                                             \
    ordo_status s_ = (call);                                                                       \
    if (s_ != (want)) {                                                                            \
      fflush(stdout); /* keep the sections and the failure in order when piped */                  \
      fprintf(stderr, "FAILED: %s returned %s, expected %s (%s)\n", #call, ordo_status_string(s_), \
              ordo_status_string(want), ordo_last_error_message());                                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CHECK(call) EXPECT(call, ORDO_OK)
#define REQUIRE(cond, ...)                     \
  do {                                         \
    if (!(cond)) {                             \
      fflush(stdout);                          \
      fprintf(stderr, "FAILED: " __VA_ARGS__); \
      exit(1);                                 \
    }                                          \
  } while (0)

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- (a) writers: each appends its index to a log. Earlier writers sleep longer, so if the
 * engine let them overlap, the later (faster) ones would land first. */
typedef struct {
  int* log;
  int* len;
  int index;
} writer_arg;
static int32_t writer(ordo_exec* exec, void* p) {
  (void)exec;
  writer_arg* w = p;
  sleep_ms(5 - w->index);
  w->log[(*w->len)++] = w->index; /* no lock: the engine runs writers of one var one by one */
  return 0;
}

/* ---- (b) readers: each waits (up to 2 s) until the other has started. That can only
 * succeed if the engine really runs both at once. */
static atomic_int arrived, inside, max_inside, rendezvous_missed;
static int32_t reader(ordo_exec* exec, void* p) {
  (void)exec;
  (void)p;
  int now = atomic_fetch_add(&inside, 1) + 1;
  int seen = atomic_load(&max_inside);
  while (now > seen && !atomic_compare_exchange_weak(&max_inside, &seen, now)) {
  }
  atomic_fetch_add(&arrived, 1);
  int waited = 0;
  while (atomic_load(&arrived) < 2 && waited < 2000) {
    sleep_ms(1);
    waited++;
  }
  if (atomic_load(&arrived) < 2) atomic_store(&rendezvous_missed, 1);
  atomic_fetch_sub(&inside, 1);
  return 0;
}

/* ---- (c) a failing producer and its consumer. A plain return can only give a code; to attach
 * a message the op defers and completes itself with ordo_complete (allowed inside the callback). */
static int32_t load(ordo_exec* exec, void* p) {
  (void)p;
  ordo_completion c;
  if (ordo_exec_defer(exec, &c) != ORDO_OK) return 1;
  ordo_complete(c, 42, "data.csv: no such file");
  return 0; /* ignored after a defer */
}
static int32_t load_ok(ordo_exec* exec, void* p) {
  (void)exec;
  (void)p;
  return 0;
}
static int32_t train(ordo_exec* exec, void* ran) {
  (void)exec;
  *(int*)ran += 1;
  return 0;
}

/* ---- (d) an async op: it starts "work" and hands its completion handle to another thread,
 * as a callback from an I/O library or a GPU driver would. */
typedef struct {
  ordo_completion handle;
  atomic_int ready;
  ordo_status complete_status;
} async_job;
static int32_t start_async(ordo_exec* exec, void* p) {
  async_job* job = p;
  if (ordo_exec_defer(exec, &job->handle) != ORDO_OK) return 1;
  atomic_store(&job->ready, 1);
  return 0;
}
static void* completer(void* p) {
  async_job* job = p;
  while (!atomic_load(&job->ready)) sleep_ms(1);
  sleep_ms(20);
  job->complete_status = ordo_complete(job->handle, 0, NULL);
  return NULL;
}

/* (b) with two or more workers: both readers must be inside at once. */
static void readers_overlap(ordo_engine* e, ordo_var v) {
  for (int i = 0; i < 2; i++) CHECK(ordo_opr_push(e, reader, NULL, &v, 1, NULL, 0, NULL));
  CHECK(ordo_wait_for_var(e, v));
  /* The wait covers readers too: both must have run by now. */
  REQUIRE(atomic_load(&arrived) == 2, "wait returned with %d of 2 readers run\n",
          atomic_load(&arrived));
  REQUIRE(!atomic_load(&rendezvous_missed), "the readers never overlapped (waited 2 s)\n");
  printf("    both readers were inside at once: yes\n");
  printf("    max concurrent readers seen: %d\n\n", atomic_load(&max_inside));
}

int main(void) {
  ordo_engine* e;
  CHECK(ordo_engine_create(NULL, &e)); /* defaults: per_device, one worker per hardware thread */
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  CHECK(ordo_engine_get_config(e, &cfg));
  static const char* kinds[] = {"default", "naive", "pooled", "per_device"};
  /* ORDO_ENGINE and ORDO_CPU_THREADS may pick an engine that runs one op at a time. */
  int workers = cfg.kind == ORDO_ENGINE_NAIVE ? 0 : (int)cfg.cpu_threads;
  printf("ordo %s, engine %s with %d CPU workers\n\n", ordo_version_string(),
         cfg.kind >= 0 && cfg.kind <= 3 ? kinds[cfg.kind] : "?", workers);

  /* (a) */
  printf("(a) five writers of one var run in push order\n");
  ordo_var v;
  CHECK(ordo_var_new(e, &v));
  int log[5], len = 0;
  writer_arg wargs[5];
  for (int i = 0; i < 5; i++) {
    wargs[i] = (writer_arg){log, &len, i};
    CHECK(ordo_opr_push(e, writer, &wargs[i], NULL, 0, &v, 1, NULL));
  }
  CHECK(ordo_wait_for_var(e, v));
  printf("    sequence:");
  for (int i = 0; i < len; i++) printf(" %d", log[i]);
  printf("\n\n");
  REQUIRE(len == 5, "expected 5 entries, got %d\n", len);
  for (int i = 0; i < 5; i++) REQUIRE(log[i] == i, "writers ran out of order\n");

  /* (b) */
  printf("(b) two readers of one var run in parallel\n");
  if (workers < 2) {
    printf("    skipped: this engine runs one op at a time (%d workers)\n\n", workers);
  } else {
    readers_overlap(e, v);
  }

  /* (c) */
  printf("(c) an error propagates, then is cleared\n");
  ordo_var data, model;
  CHECK(ordo_var_new(e, &data));
  CHECK(ordo_var_new(e, &model));
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  int train_runs = 0;
  opts.name = "load";
  CHECK(ordo_opr_push(e, load, NULL, NULL, 0, &data, 1, &opts)); /* writes data: fails */
  opts.name = "train";
  CHECK(ordo_opr_push(e, train, &train_runs, &data, 1, &model, 1, &opts)); /* reads data */
  EXPECT(ordo_wait_for_var(e, model), ORDO_ERR_OP_FAILED);
  printf("    wait(model): ORDO_ERR_OP_FAILED: %s\n", ordo_last_error_message());
  int32_t code = 0;
  CHECK(ordo_var_get_error(e, model, &code, NULL, 0));
  printf("    error code on model: %d; train ran %d times (skipped)\n", (int)code, train_runs);
  REQUIRE(code == 42 && train_runs == 0, "expected code 42 and train skipped\n");
  /* wait_for_all reports the failure too (once): drain that record so it doesn't linger. */
  EXPECT(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
  /* Clearing is ordered like a write, so ops pushed after it run normally. */
  CHECK(ordo_var_clear_error(e, data));
  CHECK(ordo_var_clear_error(e, model));
  opts.name = "load";
  CHECK(ordo_opr_push(e, load_ok, NULL, NULL, 0, &data, 1, &opts));
  opts.name = "train";
  CHECK(ordo_opr_push(e, train, &train_runs, &data, 1, &model, 1, &opts));
  CHECK(ordo_wait_for_var(e, model));
  REQUIRE(train_runs == 1, "train should have run once, ran %d times\n", train_runs);
  printf("    after ordo_var_clear_error: load and train ran, wait(model) = ORDO_OK\n\n");

  /* (d) */
  printf("(d) an async op completed from another thread, and a timed wait\n");
  ordo_var out;
  CHECK(ordo_var_new(e, &out));
  async_job job = {0, 0, -1};
  CHECK(ordo_opr_push(e, start_async, &job, NULL, 0, &out, 1, NULL));
  /* Nobody can complete the op yet (the completer thread does not exist), so this times out. */
  EXPECT(ordo_wait_for_var_timeout(e, out, 50 * 1000000ull), ORDO_ERR_TIMEOUT);
  printf("    wait(out, 50 ms) before completion: ORDO_ERR_TIMEOUT\n");
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, completer, &job) == 0, "pthread_create\n");
  CHECK(ordo_wait_for_var_timeout(e, out, 5000 * 1000000ull));
  pthread_join(t, NULL);
  REQUIRE(job.complete_status == ORDO_OK, "ordo_complete returned %s\n",
          ordo_status_string(job.complete_status));
  printf("    ordo_complete from another thread, then wait(out, 5 s): ORDO_OK\n\n");

  CHECK(ordo_engine_destroy(e)); /* drains anything left, joins the workers, frees all */
  printf("all four behaved as described.\n");
  return 0;
}
