/* Drives ordo_jl.c the way Ordo.jl does, from C (no Julia on this machine): a "Julia" thread
 * waits for the async handle, drains the hub and runs each op on a thread of its own, which
 * completes it; waits and destroy go through ordo_jl_start. Checks: writes in push order,
 * readers overlapping, a failure skipping a dependent (DROP) and reported by the waits with its
 * code and message, async waits, timed waits, destroy with work pending, and a hub closed while
 * ops are still coming (Julia's exit). Graphs: a capture's kept ops run once per launch, in order,
 * and are released exactly once, at the graph's destroy (or at an end of the capture that makes
 * no graph), never before; destroy refused while a launch is in flight; launches from two threads
 * at once; pushes by other threads during a capture not recorded; a graph outliving its hub.
 * The driver checks the event protocol of ordo_jl.h as Julia relies on it (no event for an op
 * Julia forgot, no RUN_KEPT or RELEASE for a one-shot op, no RUN or DROP for a kept one).
 * Prints "N passed, 0 failed".
 * Build: cc -std=c11 -D_GNU_SOURCE -pthread test_ordo_jl.c ordo_jl.c \
 *          $(pkg-config --cflags --libs ordo) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
  atomic_int live[MAX_IDS]; /* 1 one-shot, 2 kept: what Julia holds (e.jobs), 0 once forgotten */
  atomic_int dropped[MAX_IDS];
  atomic_int runs_kept[MAX_IDS]; /* RUN_KEPT events */
  atomic_int released[MAX_IDS];  /* RELEASE events */
  atomic_int bad_events;         /* events the protocol rules out */
  atomic_int done[MAX_IDS];      /* call id -> 1 + status */
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
    if (kind == ORDO_JL_RUN || kind == ORDO_JL_RUN_KEPT) {
      /* Julia takes the closure (RUN) or looks it up (RUN_KEPT): it must be there, as the right
       * kind; without one Julia would fail the op. */
      int kept = kind == ORDO_JL_RUN_KEPT;
      int was = kept ? atomic_load(&w->live[id]) : atomic_exchange(&w->live[id], 0);
      if (was != (kept ? 2 : 1)) atomic_fetch_add(&w->bad_events, 1);
      if (kept) atomic_fetch_add(&w->runs_kept[id], 1);
      run_args* r = malloc(sizeof *r);
      r->w = w, r->id = id, r->c = c;
      pthread_t t;
      pthread_create(&t, NULL, run_op, r);
      pthread_detach(t);
    } else if (kind == ORDO_JL_DROP) {
      if (atomic_exchange(&w->live[id], 0) != 1) atomic_fetch_add(&w->bad_events, 1);
      atomic_store(&w->dropped[id], 1);
    } else if (kind == ORDO_JL_RELEASE) {
      if (atomic_exchange(&w->live[id], 0) != 2) atomic_fetch_add(&w->bad_events, 1);
      atomic_fetch_add(&w->released[id], 1);
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
  atomic_store(&w->live[id], 1); /* before the push, as Julia does: it may run at once */
  char msg[256];
  ordo_status s = ordo_jl_push(w->hub, w->engine, id, r, nr, wr, nw, 0, 0, name, msg, sizeof msg);
  if (s != ORDO_OK) {
    atomic_store(&w->live[id], 0);
    fprintf(stderr, "push: %s\n", msg);
    return 0;
  }
  return id;
}

/* Records a push through capture c (as Julia's push! inside Ordo.capture). */
static uint64_t cpush(world* w, ordo_jl_capture* c, op_body body, void* arg, ordo_var* r, size_t nr,
                      ordo_var* wr, size_t nw, const char* name) {
  uint64_t id = w->next_id++;
  w->body[id] = body;
  w->arg[id] = arg;
  atomic_store(&w->live[id], 2);
  char msg[256];
  ordo_status s = ordo_jl_capture_push(c, id, r, nr, wr, nw, 0, 0, name, msg, sizeof msg);
  if (s != ORDO_OK) {
    atomic_store(&w->live[id], 0);
    fprintf(stderr, "capture push: %s\n", msg);
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

/* Returns once every event queued before the call was handled (a DONE comes after them). */
static void flush(world* w) {
  uint64_t id;
  if (call(w, ORDO_JL_WAIT_ALL, 0, 0, &id) == ORDO_ERR_INVALID_STATE) failures++;
}

/* Waits up to 10 s for *a to reach n. */
static int reaches(atomic_int* a, int n) {
  for (int i = 0; i < 100000 && atomic_load(a) < n; i++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return atomic_load(a) == n;
}

/* After the engine's destroy: the rest of Julia's close. */
static void world_finish(world* w) {
  ordo_jl_hub_close(w->hub);
  atomic_store(&w->stop, 1);
  fake_send(&w->async);
  pthread_join(w->loop, NULL);
  ordo_jl_hub_free(w->hub);
  if (atomic_load(&w->bad_events) != 0)
    fprintf(stderr, "%d events against the protocol\n", atomic_load(&w->bad_events)), failures++;
  free(w);
}

static void world_close(world* w) {
  ordo_status s = call(w, ORDO_JL_DESTROY, 0, UINT64_MAX, NULL);
  if (s != ORDO_OK) fprintf(stderr, "destroy: %d\n", s), failures++;
  world_finish(w);
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

/* ---- graphs ---- */

static ordo_jl_capture* begin(world* w) {
  ordo_jl_capture* c = NULL;
  char msg[256];
  if (ordo_jl_capture_begin(w->hub, w->engine, &c, msg, sizeof msg) != ORDO_OK)
    fprintf(stderr, "capture begin: %s\n", msg);
  return c;
}

static ordo_graph* end(ordo_jl_capture* c) {
  ordo_graph* g = NULL;
  char msg[256];
  if (ordo_jl_capture_end(c, &g, msg, sizeof msg) != ORDO_OK)
    fprintf(stderr, "capture end: %s\n", msg);
  return g;
}

#define GRAPH_OPS 5
#define LAUNCHES 20

/* A captured program of writes to one var, launched N times: each op runs N times (RUN_KEPT,
 * never RUN), in capture order each time; none runs at capture; each is released exactly once,
 * at destroy, never before; the handle is then dead. */
static void graph_runs_per_launch(int32_t kind) {
  world* w = world_new(kind);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  norder = 0;
  ordo_jl_capture* c = begin(w);
  CHECK(c != NULL);
  uint64_t ids[GRAPH_OPS];
  for (int i = 0; i < GRAPH_OPS; i++)
    CHECK((ids[i] = cpush(w, c, append, (void*)(intptr_t)i, NULL, 0, &v, 1, "step")) != 0);
  ordo_graph* g = end(c);
  CHECK(g != NULL);
  flush(w);
  CHECK(norder == 0); /* recorded, not run */
  char msg[256];
  for (int n = 0; n < LAUNCHES; n++) CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_OK);
  CHECK(call(w, ORDO_JL_WAIT_VAR, v, UINT64_MAX, NULL) == ORDO_OK);
  CHECK(norder == GRAPH_OPS * LAUNCHES);
  for (int k = 0; k < norder; k++) CHECK(order[k] == k % GRAPH_OPS);
  CHECK(call(w, ORDO_JL_WAIT_ALL, 0, UINT64_MAX, NULL) == ORDO_OK);
  flush(w);
  for (int i = 0; i < GRAPH_OPS; i++) {
    CHECK(atomic_load(&w->runs_kept[ids[i]]) == LAUNCHES);
    CHECK(atomic_load(&w->released[ids[i]]) == 0); /* not before destroy */
    CHECK(atomic_load(&w->live[ids[i]]) == 2);
  }
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_OK);
  for (int i = 0; i < GRAPH_OPS; i++) CHECK(reaches(&w->released[ids[i]], 1));
  CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_ERR_INVALID_HANDLE);
  CHECK(strstr(msg, "ordo_graph_launch") != NULL);
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_ERR_INVALID_HANDLE);
  CHECK(strstr(msg, "ordo_graph_destroy") != NULL);
  flush(w);
  for (int i = 0; i < GRAPH_OPS; i++) CHECK(atomic_load(&w->released[ids[i]]) == 1); /* once */
  CHECK(norder == GRAPH_OPS * LAUNCHES);
  world_close(w);
  passes++;
}

/* A launch that fails an op and skips its dependent: the failure reaches the waits; the skipped
 * kept op sends nothing (no DROP: it is still the graph's), and both are released at destroy. */
static void graph_failure_skips(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var a, b;
  CHECK(ordo_var_new(w->engine, &a) == ORDO_OK && ordo_var_new(w->engine, &b) == ORDO_OK);
  ordo_jl_capture* c = begin(w);
  CHECK(c != NULL);
  uint64_t producer = cpush(w, c, fail42, NULL, NULL, 0, &a, 1, "producer");
  uint64_t consumer = cpush(w, c, ok, NULL, &a, 1, &b, 1, "consumer");
  ordo_graph* g = end(c);
  CHECK(producer && consumer && g != NULL);
  char msg[256];
  CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_OK);
  uint64_t id;
  CHECK(call(w, ORDO_JL_WAIT_VAR, b, UINT64_MAX, &id) == ORDO_ERR_OP_FAILED);
  CHECK(w->code[id] == 42 && strstr(w->msg[id], "producer"));
  CHECK(call(w, ORDO_JL_WAIT_ALL, 0, UINT64_MAX, &id) == ORDO_ERR_OP_FAILED);
  flush(w);
  CHECK(atomic_load(&w->runs_kept[producer]) == 1 && atomic_load(&w->runs_kept[consumer]) == 0);
  CHECK(!atomic_load(&w->dropped[consumer]) && atomic_load(&w->live[consumer]) == 2);
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_OK);
  CHECK(reaches(&w->released[producer], 1) && reaches(&w->released[consumer], 1));
  world_close(w);
  passes++;
}

/* Captures that make no launch: ended and destroyed at once (Ordo.capture when its block
 * throws), or ended after the engine was destroyed (SHUTDOWN, no graph). Each recorded op is
 * released exactly once and none runs. */
static void capture_aborted(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  norder = 0;
  ordo_jl_capture* c = begin(w);
  CHECK(c != NULL);
  uint64_t ids[3];
  for (int i = 0; i < 3; i++) CHECK((ids[i] = cpush(w, c, append, NULL, NULL, 0, &v, 1, "x")));
  ordo_graph* g = end(c);
  CHECK(g != NULL);
  char msg[256];
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_OK);
  for (int i = 0; i < 3; i++) CHECK(reaches(&w->released[ids[i]], 1));

  c = begin(w); /* again, and the engine goes while it is open */
  CHECK(c != NULL);
  for (int i = 0; i < 3; i++) CHECK((ids[i] = cpush(w, c, append, NULL, NULL, 0, &v, 1, "y")));
  CHECK(call(w, ORDO_JL_DESTROY, 0, UINT64_MAX, NULL) == ORDO_OK);
  g = (ordo_graph*)&g; /* must be set to NULL */
  CHECK(ordo_jl_capture_end(c, &g, msg, sizeof msg) == ORDO_ERR_SHUTDOWN);
  CHECK(g == NULL && strstr(msg, "ordo_graph_end_capture") != NULL);
  for (int i = 0; i < 3; i++) CHECK(reaches(&w->released[ids[i]], 1)); /* released in end */
  flush(w);
  CHECK(norder == 0);
  for (int i = 0; i < 3; i++) CHECK(atomic_load(&w->runs_kept[ids[i]]) == 0);
  world_finish(w);
  passes++;
}

/* Destroy is refused while a launch is in flight, and changes nothing then. */
static void destroy_in_flight(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  atomic_store(&gate, 0);
  ordo_jl_capture* c = begin(w);
  CHECK(c != NULL);
  uint64_t id = cpush(w, c, wait_gate, NULL, NULL, 0, &v, 1, "gated");
  ordo_graph* g = end(c);
  CHECK(id && g != NULL);
  char msg[256];
  CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_OK);
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_ERR_INVALID_STATE);
  CHECK(strstr(msg, "in flight") != NULL);
  flush(w);
  CHECK(atomic_load(&w->released[id]) == 0);
  atomic_store(&gate, 1);
  CHECK(call(w, ORDO_JL_WAIT_VAR, v, UINT64_MAX, NULL) == ORDO_OK);
  CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_OK); /* still usable */
  CHECK(call(w, ORDO_JL_WAIT_ALL, 0, UINT64_MAX, NULL) == ORDO_OK);
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_OK);
  CHECK(reaches(&w->released[id], 1));
  CHECK(atomic_load(&w->runs_kept[id]) == 2);
  CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_ERR_INVALID_HANDLE);
  world_close(w);
  passes++;
}

/* Two threads launch one graph at once: every launch runs every op; writers of the var never
 * overlap each other or its readers (the plain counter is ordered by it: TSan would see a
 * race), readers may overlap each other, and so may the op on no var. */
static int serial_count;
static atomic_int free_count, read_count;
static int32_t bump(uint64_t id, void* arg) {
  (void)id, (void)arg;
  serial_count++;
  return 0;
}
static int32_t read_serial(uint64_t id, void* arg) {
  (void)id, (void)arg;
  atomic_fetch_add(&read_count, serial_count > 0);
  return 0;
}
static int32_t bump_free(uint64_t id, void* arg) {
  (void)id, (void)arg;
  atomic_fetch_add(&free_count, 1);
  return 0;
}

#define PER_THREAD 50
static void* launcher(void* p) {
  char msg[256];
  for (int i = 0; i < PER_THREAD; i++)
    if (ordo_jl_graph_launch((ordo_graph*)p, msg, sizeof msg) != ORDO_OK) return p;
  return NULL;
}

static void concurrent_launches(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  serial_count = 0;
  atomic_store(&free_count, 0);
  atomic_store(&read_count, 0);
  ordo_jl_capture* c = begin(w);
  CHECK(c != NULL);
  uint64_t ids[4];
  CHECK((ids[0] = cpush(w, c, bump, NULL, NULL, 0, &v, 1, "a")));
  CHECK((ids[1] = cpush(w, c, bump_free, NULL, NULL, 0, NULL, 0, "free")));
  CHECK((ids[2] = cpush(w, c, bump, NULL, NULL, 0, &v, 1, "b")));
  CHECK((ids[3] = cpush(w, c, read_serial, NULL, &v, 1, NULL, 0, "read")));
  ordo_graph* g = end(c);
  CHECK(g != NULL);
  pthread_t t1, t2;
  void *r1, *r2;
  pthread_create(&t1, NULL, launcher, g);
  pthread_create(&t2, NULL, launcher, g);
  pthread_join(t1, &r1);
  pthread_join(t2, &r2);
  CHECK(r1 == NULL && r2 == NULL);
  CHECK(call(w, ORDO_JL_WAIT_ALL, 0, UINT64_MAX, NULL) == ORDO_OK);
  CHECK(call(w, ORDO_JL_WAIT_VAR, v, UINT64_MAX, NULL) == ORDO_OK); /* orders the reads of it */
  CHECK(serial_count == 2 * 2 * PER_THREAD);
  CHECK(atomic_load(&free_count) == 2 * PER_THREAD && atomic_load(&read_count) == 2 * PER_THREAD);
  for (int i = 0; i < 4; i++) CHECK(atomic_load(&w->runs_kept[ids[i]]) == 2 * PER_THREAD);
  char msg[256];
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_OK);
  for (int i = 0; i < 4; i++) CHECK(reaches(&w->released[ids[i]], 1));
  world_close(w);
  passes++;
}

/* During a capture: a push the library refuses records nothing and is never released; pushes
 * by other threads (ordo_jl_push: another Julia task) run as usual, not recorded; begin's
 * errors are the library's. */
static void capture_misuse_and_other_pushes(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v, dead;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK && ordo_var_new(w->engine, &dead) == ORDO_OK);
  CHECK(ordo_var_delete(w->engine, dead) == ORDO_OK);
  char msg[256];
  ordo_jl_capture* c = (ordo_jl_capture*)&msg;
  CHECK(ordo_jl_capture_begin(w->hub, NULL, &c, msg, sizeof msg) == ORDO_ERR_INVALID_ARGUMENT);
  CHECK(c == NULL && strstr(msg, "ordo_graph_begin_capture") != NULL);
  norder = 0;
  c = begin(w);
  CHECK(c != NULL);
  uint64_t bad = w->next_id++;
  CHECK(ordo_jl_capture_push(c, bad, &dead, 1, NULL, 0, 0, 0, "bad", msg, sizeof msg) ==
        ORDO_ERR_INVALID_HANDLE);
  CHECK(strstr(msg, "ordo_opr_push") != NULL);
  uint64_t kept = cpush(w, c, append, (void*)(intptr_t)1, NULL, 0, &v, 1, "kept");
  uint64_t now = push(w, append, (void*)(intptr_t)2, NULL, 0, &v, 1, "now"); /* not recorded */
  CHECK(kept && now);
  CHECK(call(w, ORDO_JL_WAIT_VAR, v, UINT64_MAX, NULL) == ORDO_OK); /* this thread: not refused */
  CHECK(norder == 1 && order[0] == 2);
  ordo_graph* g = end(c);
  CHECK(g != NULL);
  CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_OK);
  CHECK(call(w, ORDO_JL_WAIT_VAR, v, UINT64_MAX, NULL) == ORDO_OK);
  CHECK(norder == 2 && order[1] == 1); /* the graph holds the kept op only */
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_OK);
  CHECK(reaches(&w->released[kept], 1));
  flush(w);
  CHECK(atomic_load(&w->released[bad]) == 0 && atomic_load(&w->released[now]) == 0);
  world_close(w);
  passes++;
}

/* A graph outlives its engine and hub (Julia: close(e) before close(g)): launches are
 * SHUTDOWN, destroy works and frees the hub, which its kept ops held (ASan: no use after free;
 * LeakSanitizer: no leak). */
static void graph_outlives_hub(void) {
  world* w = world_new(ORDO_ENGINE_DEFAULT);
  ordo_var v;
  CHECK(ordo_var_new(w->engine, &v) == ORDO_OK);
  ordo_jl_capture* c = begin(w);
  CHECK(c != NULL);
  CHECK(cpush(w, c, ok, NULL, NULL, 0, &v, 1, "a") && cpush(w, c, ok, NULL, &v, 1, NULL, 0, "b"));
  ordo_graph* g = end(c);
  CHECK(g != NULL);
  char msg[256];
  CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_OK);
  world_close(w); /* destroys the engine (the launch finishes first), closes and frees the hub */
  CHECK(ordo_jl_graph_launch(g, msg, sizeof msg) == ORDO_ERR_SHUTDOWN);
  CHECK(ordo_jl_graph_destroy(g, msg, sizeof msg) == ORDO_OK);
  passes++;
}

int main(void) {
  alarm(120); /* a hang (a lost event, a corrupted queue) fails the run instead of stalling it */
  writes_in_push_order(ORDO_ENGINE_DEFAULT);
  writes_in_push_order(ORDO_ENGINE_NAIVE);
  readers_overlap();
  failure_skips_dependent();
  async_and_timed_waits();
  destroy_with_work_pending();
  hub_closed_under_load();
  graph_runs_per_launch(ORDO_ENGINE_DEFAULT);
  graph_runs_per_launch(ORDO_ENGINE_NAIVE);
  graph_failure_skips();
  capture_aborted();
  destroy_in_flight();
  concurrent_launches();
  capture_misuse_and_other_pushes();
  graph_outlives_hub();
  printf("ordo_jl shim: %d passed, %d failed\n", passes, failures);
  return failures != 0;
}
