/* Drives ordo_jl.c the way Ordo.jl does, from C (no Julia on this machine): a "Julia" thread
 * waits for the async handle, drains the hub and runs each op on a thread of its own, which
 * completes it; waits and destroy go through ordo_jl_start. Checks: writes in push order,
 * readers overlapping, a failure skipping a dependent (DROP) and reported by the waits with its
 * code and message, async waits, timed waits, destroy with work pending, and a hub closed while
 * ops are still coming (Julia's exit). Prints "N passed, 0 failed".
 * Build: cc -std=c11 -D_GNU_SOURCE -pthread test_ordo_jl.c ordo_jl.c \
 *          $(pkg-config --cflags --libs ordo) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ordo_jl.h"

static int failures, passes;
#define CHECK(c)                                                            \
  do {                                                                      \
    if (!(c)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); \
      failures++;                                                           \
      return;                                                               \
    }                                                                       \
  } while (0)

/* ---- the fake uv_async_t: a counter and a condition variable ---- */
typedef struct fake_async {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int set;
} fake_async;

static int fake_send(void* p) {
  fake_async* a = (fake_async*)p;
  pthread_mutex_lock(&a->mu);
  a->set = 1;
  pthread_cond_signal(&a->cv);
  pthread_mutex_unlock(&a->mu);
  return 0;
}

/* ---- what Julia keeps: closures by op id, results by call id ---- */
#define MAX_IDS 4096
typedef int32_t (*op_body)(uint64_t id, void* arg);
typedef struct world {
  fake_async async;
  ordo_jl_hub* hub;
  ordo_engine* engine;
  op_body body[MAX_IDS];
  void* arg[MAX_IDS];
  atomic_int dropped[MAX_IDS];
  atomic_int done[MAX_IDS]; /* call id -> 1 + status */
  int32_t code[MAX_IDS];
  char msg[MAX_IDS][256];
  atomic_int stop;
  pthread_t loop;
  uint64_t next_id;
} world;

typedef struct run_args {
  world* w;
  uint64_t id;
  ordo_completion c;
} run_args;

static void* run_op(void* p) { /* a Julia task running the closure, then ordo_complete */
  run_args* r = (run_args*)p;
  int32_t code = r->w->body[r->id](r->id, r->w->arg[r->id]);
  ordo_complete(r->c, code, code ? "closure failed" : NULL);
  free(r);
  return NULL;
}

static void drain(world* w) {
  int32_t kind, status, code;
  uint64_t id, c;
  char* msg;
  while (ordo_jl_pop(w->hub, &kind, &id, &c, &status, &code, &msg)) {
    if (kind == ORDO_JL_RUN) {
      run_args* r = malloc(sizeof *r);
      r->w = w, r->id = id, r->c = c;
      pthread_t t;
      pthread_create(&t, NULL, run_op, r);
      pthread_detach(t);
    } else if (kind == ORDO_JL_DROP) {
      atomic_store(&w->dropped[id], 1);
    } else {
      w->code[id] = code;
      snprintf(w->msg[id], sizeof w->msg[id], "%s", msg ? msg : "");
      ordo_jl_free(msg);
      atomic_store(&w->done[id], 1 + status);
    }
  }
}

static void* julia_loop(void* p) { /* the task woken by the AsyncCondition */
  world* w = (world*)p;
  for (;;) {
    pthread_mutex_lock(&w->async.mu);
    while (!w->async.set && !atomic_load(&w->stop)) pthread_cond_wait(&w->async.cv, &w->async.mu);
    w->async.set = 0;
    pthread_mutex_unlock(&w->async.mu);
    drain(w);
    if (atomic_load(&w->stop)) return NULL;
  }
}

static world* world_new(int32_t kind) {
  world* w = calloc(1, sizeof *w);
  pthread_mutex_init(&w->async.mu, NULL);
  pthread_cond_init(&w->async.cv, NULL);
  w->hub = ordo_jl_hub_new((void*)fake_send, &w->async);
  char msg[256];
  if (ordo_jl_engine_create(kind, 2, &w->engine, msg, sizeof msg) != ORDO_OK) {
    fprintf(stderr, "engine: %s\n", msg);
    exit(1);
  }
  w->next_id = 1;
  pthread_create(&w->loop, NULL, julia_loop, w);
  return w;
}

static uint64_t push(world* w, op_body body, void* arg, ordo_var* r, size_t nr, ordo_var* wr,
                     size_t nw, const char* name) {
  uint64_t id = w->next_id++;
  w->body[id] = body;
  w->arg[id] = arg;
  char msg[256];
  ordo_status s = ordo_jl_push(w->hub, w->engine, id, r, nr, wr, nw, 0, 0, name, msg, sizeof msg);
  if (s != ORDO_OK) {
    fprintf(stderr, "push: %s\n", msg);
    return 0;
  }
  return id;
}

/* Starts a call and waits for its DONE (as a Julia task would, yielding). Returns the status. */
static ordo_status call(world* w, int32_t what, ordo_var v, uint64_t timeout_ns, uint64_t* idp) {
  uint64_t id = w->next_id++;
  char msg[256];
  ordo_status s = ordo_jl_start(w->hub, id, what, w->engine, v, timeout_ns, msg, sizeof msg);
  if (s != ORDO_OK) return s;
  while (!atomic_load(&w->done[id])) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if (idp) *idp = id;
  return atomic_load(&w->done[id]) - 1;
}

static void world_close(world* w) {
  ordo_status s = call(w, ORDO_JL_DESTROY, 0, UINT64_MAX, NULL);
  if (s != ORDO_OK) fprintf(stderr, "destroy: %d\n", s), failures++;
  ordo_jl_hub_close(w->hub);
  atomic_store(&w->stop, 1);
  fake_send(&w->async);
  pthread_join(w->loop, NULL);
  ordo_jl_hub_free(w->hub);
  free(w);
}

/* ---- scenarios ---- */
static int order[1000], norder;
static int32_t append(uint64_t id, void* arg) {
  (void)id;
  order[norder++] = (int)(intptr_t)arg;
  return 0;
}

static void writes_in_push_order(int32_t kind) {
  world* w = world_new(kind);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  norder = 0;
  for (int i = 0; i < 1000; i++) CHECK(push(w, append, (void*)(intptr_t)i, NULL, 0, &v, 1, "w"));
  CHECK(call(w, ORDO_JL_WAIT_VAR, v, UINT64_MAX, NULL) == ORDO_OK);
  CHECK(norder == 1000);
  for (int i = 0; i < 1000; i++) CHECK(order[i] == i);
  world_close(w);
  passes++;
}

static atomic_int arrived;
static int32_t reader(uint64_t id, void* arg) {
  (void)id, (void)arg;
  atomic_fetch_add(&arrived, 1);
  for (int i = 0; i < 20000 && atomic_load(&arrived) < 2; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&arrived) >= 2 ? 0 : 99;
}

static void readers_overlap(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  atomic_store(&arrived, 0);
  CHECK(push(w, reader, NULL, &v, 1, NULL, 0, "r1"));
  CHECK(push(w, reader, NULL, &v, 1, NULL, 0, "r2"));
  CHECK(call(w, ORDO_JL_WAIT_VAR, v, UINT64_MAX, NULL) == ORDO_OK);
  world_close(w);
  passes++;
}

static int32_t fail42(uint64_t id, void* arg) {
  return (void)id, (void)arg, 42;
}
static int32_t ok(uint64_t id, void* arg) {
  return (void)id, (void)arg, 0;
}

static void failure_skips_dependent(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var a, b;
  CHECK(ordo_var_new(w->engine, &a) == ORDO_OK && ordo_var_new(w->engine, &b) == ORDO_OK);
  CHECK(push(w, fail42, NULL, NULL, 0, &a, 1, "producer"));
  uint64_t dep = push(w, ok, NULL, &a, 1, &b, 1, "consumer");
  CHECK(dep);
  uint64_t id;
  CHECK(call(w, ORDO_JL_WAIT_VAR, b, UINT64_MAX, &id) == ORDO_ERR_OP_FAILED);
  CHECK(w->code[id] == 42);
  CHECK(strstr(w->msg[id], "producer") && strstr(w->msg[id], "closure failed"));
  for (int i = 0; i < 10000 && !atomic_load(&w->dropped[dep]); i++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  CHECK(atomic_load(&w->dropped[dep])); /* skipped: Julia was told to forget the closure */
  CHECK(call(w, ORDO_JL_WAIT_ASYNC, b, 0, &id) == ORDO_ERR_OP_FAILED);
  CHECK(w->code[id] == 42 && strstr(w->msg[id], "producer"));
  CHECK(call(w, ORDO_JL_WAIT_ALL, 0, UINT64_MAX, &id) == ORDO_ERR_OP_FAILED);
  CHECK(strstr(w->msg[id], "producer"));
  world_close(w);
  passes++;
}

static atomic_int gate;
static int32_t wait_gate(uint64_t id, void* arg) {
  (void)id, (void)arg;
  while (!atomic_load(&gate)) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static void async_and_timed_waits(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  atomic_store(&gate, 0);
  CHECK(push(w, wait_gate, NULL, NULL, 0, &v, 1, "gated"));
  CHECK(call(w, ORDO_JL_WAIT_VAR, v, 5000000, NULL) == ORDO_ERR_TIMEOUT);
  CHECK(call(w, ORDO_JL_WAIT_ALL, 0, 0, NULL) == ORDO_ERR_TIMEOUT);
  uint64_t id = w->next_id++;
  char msg[256];
  CHECK(ordo_jl_start(w->hub, id, ORDO_JL_WAIT_ASYNC, w->engine, v, 0, msg, sizeof msg) == ORDO_OK);
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
  CHECK(!atomic_load(&w->done[id]));
  atomic_store(&gate, 1);
  while (!atomic_load(&w->done[id])) nanosleep(&ts, NULL);
  CHECK(atomic_load(&w->done[id]) - 1 == ORDO_OK);
  /* errors come back at once, with nothing queued */
  ordo_var dead;
  CHECK(ordo_var_new(w->engine, &dead) == ORDO_OK && ordo_var_delete(w->engine, dead) == ORDO_OK);
  CHECK(ordo_jl_start(w->hub, w->next_id++, ORDO_JL_WAIT_ASYNC, w->engine, dead, 0, msg,
                      sizeof msg) == ORDO_ERR_INVALID_HANDLE);
  CHECK(strstr(msg, "ordo_wait_for_var_async") != NULL);
  CHECK(ordo_jl_push(w->hub, w->engine, w->next_id++, &dead, 1, NULL, 0, 0, 0, NULL, msg,
                     sizeof msg) == ORDO_ERR_INVALID_HANDLE);
  CHECK(strstr(msg, "ordo_opr_push") != NULL);
  world_close(w);
  passes++;
}

static void destroy_with_work_pending(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  norder = 0;
  for (int i = 0; i < 200; i++) CHECK(push(w, append, (void*)(intptr_t)i, NULL, 0, &v, 1, "w"));
  world_close(w); /* destroy drains: every op ran, through the hub */
  CHECK(norder == 200);
  passes++;
}

/* Julia exits: the hub is closed with ops still coming; they complete with SHUTDOWN, nothing is
 * sent any more, and the engine can still be destroyed. */
static void hub_closed_under_load(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  atomic_store(&gate, 0);
  CHECK(push(w, wait_gate, NULL, NULL, 0, &v, 1, "gated"));
  for (int i = 0; i < 100; i++) CHECK(push(w, ok, NULL, NULL, 0, &v, 1, "after"));
  ordo_jl_hub_close(w->hub);
  atomic_store(&gate, 1);
  CHECK(ordo_wait_for_var(w->engine, v) == ORDO_ERR_OP_FAILED);
  CHECK(strstr(ordo_last_error_message(), "Julia side") != NULL);
  CHECK(ordo_engine_destroy(w->engine) == ORDO_OK);
  atomic_store(&w->stop, 1);
  fake_send(&w->async);
  pthread_join(w->loop, NULL);
  ordo_jl_hub_free(w->hub);
  free(w);
  passes++;
}

int main(void) {
  writes_in_push_order(ORDO_ENGINE_DEFAULT);
  writes_in_push_order(ORDO_ENGINE_NAIVE);
  readers_overlap();
  failure_skips_dependent();
  async_and_timed_waits();
  destroy_with_work_pending();
  hub_closed_under_load();
  printf("ordo_jl shim: %d passed, %d failed\n", passes, failures);
  return failures != 0;
}
