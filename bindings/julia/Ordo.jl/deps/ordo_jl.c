/* ordo_jl: the C half of the Julia binding. See ordo_jl.h for the design; in short, nothing here
 * calls Julia: engine threads queue events and poke a uv_async_t, Julia drains the queue. */
#include "ordo_jl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One queued event. Each is embedded in the object that posts it (an op, a call), allocated
 * before the work starts, so posting never allocates and never fails. */
typedef struct jl_node {
  struct jl_node* next;
  int32_t kind, status, code;
  int32_t free_on_pop; /* the node's object belongs to the queue once posted */
  uint64_t id, completion;
  char* msg;
} jl_node;

struct ordo_jl_hub {
  pthread_mutex_t mu;
  int (*send)(void*);
  void* async;
  int closed; /* no more sends: Julia's side is closing or gone */
  int freed;  /* ordo_jl_hub_free was called: the last holder (refs) frees the hub */
  /* What may still post and holds the hub past ordo_jl_hub_free: calls started and not yet
   * answered (each posts exactly one DONE), captures not yet ended, and kept ops not yet
   * released (each posts exactly one RELEASE). The last one out frees a freed hub. */
  long refs;
  jl_node* head;
  jl_node* tail;
};

static void copy_message(char* msg, size_t cap) {
  if (msg != NULL && cap > 0) ordo_last_error_copy(msg, cap);
}

static ordo_status with_message(ordo_status s, char* msg, size_t cap) {
  if (s != ORDO_OK) copy_message(msg, cap);
  return s;
}

static char* dup_message(void) {
  size_t n = ordo_last_error_copy(NULL, 0);
  char* m = (char*)malloc(n + 1);
  if (m != NULL) ordo_last_error_copy(m, n + 1);
  return m;
}

static void drop_queue(ordo_jl_hub* h) {
  jl_node* n = h->head;
  while (n != NULL) {
    jl_node* next = n->next;
    free(n->msg);
    if (n->free_on_pop) free(n);
    n = next;
  }
  h->head = h->tail = NULL;
}

static void hub_destroy(ordo_jl_hub* h) {
  drop_queue(h);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

ordo_jl_hub* ordo_jl_hub_new(void* send, void* async) {
  if (send == NULL || async == NULL) return NULL;
  ordo_jl_hub* h = (ordo_jl_hub*)calloc(1, sizeof *h);
  if (h == NULL) return NULL;
  if (pthread_mutex_init(&h->mu, NULL) != 0) {
    free(h);
    return NULL;
  }
  h->send = (int (*)(void*))send;
  h->async = async;
  return h;
}

void ordo_jl_hub_close(ordo_jl_hub* h) {
  if (h == NULL) return;
  pthread_mutex_lock(&h->mu);
  h->closed = 1;
  pthread_mutex_unlock(&h->mu);
}

void ordo_jl_hub_free(ordo_jl_hub* h) {
  if (h == NULL) return;
  pthread_mutex_lock(&h->mu);
  h->closed = 1;
  h->freed = 1;
  int last = h->refs == 0;
  pthread_mutex_unlock(&h->mu);
  if (last) hub_destroy(h);
}

/* Queues n and wakes Julia. Returns 0 when the hub is closed (n was not queued). `answers` is 1
 * for the last post of a holder of the hub (the DONE of a started call, the RELEASE of a kept
 * op), which then lets go of it and may be its last use (see ordo_jl_hub_free). The
 * send happens under the lock, so that once ordo_jl_hub_close returns no thread is inside
 * uv_async_send and Julia may close the handle. n must not be touched after this returns 1. */
static int post(ordo_jl_hub* h, jl_node* n, int answers) {
  n->next = NULL;
  pthread_mutex_lock(&h->mu);
  int queued = !h->closed;
  if (queued) {
    if (h->tail != NULL)
      h->tail->next = n;
    else
      h->head = n;
    h->tail = n;
    h->send(h->async);
  }
  int destroy = 0;
  if (answers) {
    h->refs--;
    destroy = h->freed && h->refs == 0;
  }
  pthread_mutex_unlock(&h->mu);
  if (destroy) hub_destroy(h);
  return queued;
}

static void hub_ref(ordo_jl_hub* h) {
  pthread_mutex_lock(&h->mu);
  h->refs++;
  pthread_mutex_unlock(&h->mu);
}

/* Lets go of a hold that posts nothing (a call or kept op that never started, a capture). */
static void hub_unref(ordo_jl_hub* h) {
  pthread_mutex_lock(&h->mu);
  h->refs--;
  int destroy = h->freed && h->refs == 0;
  pthread_mutex_unlock(&h->mu);
  if (destroy) hub_destroy(h);
}

int32_t ordo_jl_pop(ordo_jl_hub* h, int32_t* kind, uint64_t* id, uint64_t* completion,
                    int32_t* status, int32_t* code, char** msg) {
  pthread_mutex_lock(&h->mu);
  jl_node* n = h->head;
  if (n != NULL) {
    h->head = n->next;
    if (h->head == NULL) h->tail = NULL;
  }
  pthread_mutex_unlock(&h->mu);
  if (n == NULL) return 0;
  *kind = n->kind;
  *id = n->id;
  *completion = n->completion;
  *status = n->status;
  *code = n->code;
  *msg = n->msg;
  if (n->free_on_pop) free(n);
  return 1;
}

void ordo_jl_free(void* p) {
  free(p);
}

ordo_status ordo_jl_engine_create(int32_t kind, int32_t cpu_threads, ordo_engine** out, char* msg,
                                  size_t cap) {
  ordo_engine_config cfg;
  ordo_engine_config_init_sized(&cfg, sizeof cfg);
  cfg.kind = kind;
  cfg.cpu_threads = cpu_threads;
  cfg.max_pending = -1;
  return with_message(ordo_engine_create(&cfg, out), msg, cap);
}

ordo_status ordo_jl_var_new(ordo_engine* e, ordo_var* out, char* msg, size_t cap) {
  return with_message(ordo_var_new(e, out), msg, cap);
}

ordo_status ordo_jl_var_delete(ordo_engine* e, ordo_var v, char* msg, size_t cap) {
  return with_message(ordo_var_delete(e, v), msg, cap);
}

ordo_status ordo_jl_var_clear_error(ordo_engine* e, ordo_var v, char* msg, size_t cap) {
  return with_message(ordo_var_clear_error(e, v), msg, cap);
}

ordo_status ordo_jl_complete(ordo_completion c, int32_t code, const char* text, char* msg,
                             size_t cap) {
  return with_message(ordo_complete(c, code, text), msg, cap);
}

/* ---- ops ---- */

/* A one-shot op (kept 0) runs at most once: its RUN is its own node, and its free_fn follows.
 * A kept op (pushed through a capture) runs once per launch of its graph, maybe several times at
 * once: each run queues a node of its own (RUN_KEPT) and only reads the op; its free_fn, called
 * once when the graph is destroyed (or the capture ends without one), queues the op's own node
 * as RELEASE. A kept op holds the hub (refs) until then, since a graph may outlive the engine. */
typedef struct jl_op {
  jl_node node; /* first: the node's address is the op's */
  ordo_jl_hub* hub;
  int kept;
  int ran;
} jl_op;

static int32_t op_run(ordo_exec* exec, void* user_data) {
  jl_op* op = (jl_op*)user_data;
  ordo_completion c = 0;
  ordo_status s = ordo_exec_defer(exec, &c);
  if (s != ORDO_OK) return s; /* cannot happen: the exec is ours and fresh */
  jl_node* n = &op->node;
  if (op->kept) {
    n = (jl_node*)calloc(1, sizeof *n);
    if (n == NULL) {
      ordo_complete(c, ORDO_ERR_NO_MEMORY, "ordo_jl: out of memory queueing the op for Julia");
      return 0;
    }
    n->kind = ORDO_JL_RUN_KEPT;
    n->id = op->node.id;
    n->free_on_pop = 1;
  } else {
    op->ran = 1;
    n->kind = ORDO_JL_RUN;
  }
  n->completion = c;
  /* The op stays alive until its free_fn, which follows the completion Julia will make (for a
   * kept op, the completions of every launch: a graph is not destroyed while one is in flight). */
  if (!post(op->hub, n, 0)) {
    if (op->kept) free(n);
    ordo_complete(c, ORDO_ERR_SHUTDOWN, "the Julia side of this engine is gone");
  }
  return 0;
}

static void op_free(void* user_data) {
  jl_op* op = (jl_op*)user_data;
  if (op->kept) {
    op->node.kind = ORDO_JL_RELEASE; /* its graph is gone: Julia forgets the closure */
    op->node.free_on_pop = 1;
    if (!post(op->hub, &op->node, 1)) free(op); /* may free a freed hub: its last holder */
    return;
  }
  if (op->ran) {
    free(op);
    return;
  }
  op->node.kind = ORDO_JL_DROP; /* skipped: Julia forgets the closure */
  op->node.free_on_pop = 1;
  if (!post(op->hub, &op->node, 0)) free(op);
}

static void set_message(char* msg, size_t cap, const char* text) {
  if (msg != NULL && cap > 0) strncpy(msg, text, cap - 1)[cap - 1] = 0;
}

static ordo_status push_op(ordo_jl_hub* h, ordo_engine* e, int kept, uint64_t id,
                           const ordo_var* reads, size_t nreads, const ordo_var* writes,
                           size_t nwrites, int32_t priority, int32_t prop, const char* name,
                           char* msg, size_t cap) {
  jl_op* op = (jl_op*)calloc(1, sizeof *op);
  if (op == NULL) {
    set_message(msg, cap, "ordo_jl_push: out of memory");
    return ORDO_ERR_NO_MEMORY;
  }
  op->node.id = id;
  op->hub = h;
  op->kept = kept;
  if (kept) hub_ref(h); /* before the push: once recorded, its free_fn may run at any time */
  ordo_push_opts opts;
  ordo_push_opts_init_sized(&opts, sizeof opts);
  opts.free_fn = op_free;
  opts.priority = priority;
  opts.prop = prop;
  opts.name = name;
  ordo_status s = ordo_opr_push(e, op_run, op, reads, nreads, writes, nwrites, &opts);
  if (s != ORDO_OK) { /* nothing was pushed or recorded: free_fn will not run */
    copy_message(msg, cap);
    free(op);
    if (kept) hub_unref(h);
  }
  return s;
}

ordo_status ordo_jl_push(ordo_jl_hub* h, ordo_engine* e, uint64_t id, const ordo_var* reads,
                         size_t nreads, const ordo_var* writes, size_t nwrites, int32_t priority,
                         int32_t prop, const char* name, char* msg, size_t cap) {
  return push_op(h, e, 0, id, reads, nreads, writes, nwrites, priority, prop, name, msg, cap);
}

/* ---- captures: one thread each ---- */

/* ordo captures per OS thread, and a Julia task may change threads at any yield, while other
 * tasks may run on its thread meanwhile (their pushes would be recorded too). So each capture has
 * a thread of its own, which begins it, makes every push given to ordo_jl_capture_push (all
 * kept) and ends it. A caller waits for its call there as for a mutex: the thread runs ordo's
 * push or end, which never wait for Julia. */
struct ordo_jl_capture {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  ordo_jl_hub* hub;
  ordo_engine* engine;
  int (*fn)(ordo_jl_capture*, void*); /* the call for the thread to make, NULL when none; it
                                         returns 1 when the capture is over (begin failed, end) */
  void* arg;
};

typedef struct capture_call {
  ordo_status status;
  char* msg;
  size_t cap;
  ordo_graph* graph; /* end */
  /* push */
  uint64_t id;
  const ordo_var* reads;
  size_t nreads;
  const ordo_var* writes;
  size_t nwrites;
  int32_t priority, prop;
  const char* name;
} capture_call;

static void* capture_thread(void* p) {
  ordo_jl_capture* c = (ordo_jl_capture*)p;
  int over = 0;
  pthread_mutex_lock(&c->mu);
  while (!over) {
    while (c->fn == NULL) pthread_cond_wait(&c->cv, &c->mu);
    int (*fn)(ordo_jl_capture*, void*) = c->fn;
    void* arg = c->arg;
    pthread_mutex_unlock(&c->mu);
    over = fn(c, arg);
    pthread_mutex_lock(&c->mu);
    c->fn = NULL;
    pthread_cond_broadcast(&c->cv);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* Makes fn(c, arg) on c's thread and returns once it has returned (the caller's calls on one
 * capture never overlap: see ordo_jl.h). */
static void on_capture_thread(ordo_jl_capture* c, int (*fn)(ordo_jl_capture*, void*), void* arg) {
  pthread_mutex_lock(&c->mu);
  c->fn = fn;
  c->arg = arg;
  pthread_cond_broadcast(&c->cv);
  while (c->fn != NULL) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

/* The calls, on the capture's thread (ordo's message is thread-local: copied there). */
static int capture_begin_fn(ordo_jl_capture* c, void* arg) {
  capture_call* a = (capture_call*)arg;
  a->status = with_message(ordo_graph_begin_capture(c->engine), a->msg, a->cap);
  return a->status != ORDO_OK;
}

static int capture_push_fn(ordo_jl_capture* c, void* arg) {
  capture_call* a = (capture_call*)arg;
  a->status = push_op(c->hub, c->engine, 1, a->id, a->reads, a->nreads, a->writes, a->nwrites,
                      a->priority, a->prop, a->name, a->msg, a->cap);
  return 0;
}

static int capture_end_fn(ordo_jl_capture* c, void* arg) {
  capture_call* a = (capture_call*)arg;
  /* On SHUTDOWN or NO_MEMORY the recorded ops' free_fns run here: their RELEASEs are queued. */
  a->status = with_message(ordo_graph_end_capture(c->engine, &a->graph), a->msg, a->cap);
  return 1;
}

static void capture_free(ordo_jl_capture* c) {
  pthread_join(c->thread, NULL);
  ordo_jl_hub* h = c->hub;
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
  hub_unref(h);
}

ordo_status ordo_jl_capture_begin(ordo_jl_hub* h, ordo_engine* e, ordo_jl_capture** out, char* msg,
                                  size_t cap) {
  if (out != NULL) *out = NULL;
  if (h == NULL || out == NULL) {
    set_message(msg, cap, "ordo_jl_capture_begin: bad hub or out");
    return ORDO_ERR_INVALID_ARGUMENT;
  }
  ordo_jl_capture* c = (ordo_jl_capture*)calloc(1, sizeof *c);
  if (c == NULL) {
    set_message(msg, cap, "ordo_jl_capture_begin: out of memory");
    return ORDO_ERR_NO_MEMORY;
  }
  c->hub = h;
  c->engine = e;
  if (pthread_mutex_init(&c->mu, NULL) != 0 || pthread_cond_init(&c->cv, NULL) != 0 ||
      pthread_create(&c->thread, NULL, capture_thread, c) != 0) {
    free(c); /* only for lack of resources (Linux's mutex and cond inits cannot fail) */
    set_message(msg, cap, "ordo_jl_capture_begin: cannot start the capture's thread");
    return ORDO_ERR_NO_MEMORY;
  }
  hub_ref(h);
  capture_call a = {.msg = msg, .cap = cap};
  on_capture_thread(c, capture_begin_fn, &a);
  if (a.status != ORDO_OK) {
    capture_free(c); /* the thread is over */
    return a.status;
  }
  *out = c;
  return ORDO_OK;
}

ordo_status ordo_jl_capture_push(ordo_jl_capture* c, uint64_t id, const ordo_var* reads,
                                 size_t nreads, const ordo_var* writes, size_t nwrites,
                                 int32_t priority, int32_t prop, const char* name, char* msg,
                                 size_t cap) {
  if (c == NULL) {
    set_message(msg, cap, "ordo_jl_capture_push: no capture");
    return ORDO_ERR_INVALID_ARGUMENT;
  }
  capture_call a = {.msg = msg,
                    .cap = cap,
                    .id = id,
                    .reads = reads,
                    .nreads = nreads,
                    .writes = writes,
                    .nwrites = nwrites,
                    .priority = priority,
                    .prop = prop,
                    .name = name};
  on_capture_thread(c, capture_push_fn, &a);
  return a.status;
}

ordo_status ordo_jl_capture_end(ordo_jl_capture* c, ordo_graph** out, char* msg, size_t cap) {
  if (out != NULL) *out = NULL;
  if (c == NULL || out == NULL) {
    set_message(msg, cap, "ordo_jl_capture_end: no capture or out");
    return ORDO_ERR_INVALID_ARGUMENT;
  }
  capture_call a = {.msg = msg, .cap = cap};
  on_capture_thread(c, capture_end_fn, &a);
  capture_free(c);
  *out = a.graph;
  return a.status;
}

ordo_status ordo_jl_graph_launch(ordo_graph* g, char* msg, size_t cap) {
  return with_message(ordo_graph_launch(g), msg, cap);
}

ordo_status ordo_jl_graph_destroy(ordo_graph* g, char* msg, size_t cap) {
  return with_message(ordo_graph_destroy(g), msg, cap);
}

/* ---- calls that block, and async waits ---- */

typedef struct jl_call {
  jl_node node; /* first */
  ordo_jl_hub* hub;
  int32_t what;
  ordo_engine* engine;
  ordo_var var;
  uint64_t timeout_ns;
} jl_call;

static void finish(jl_call* c, ordo_status s) {
  c->node.kind = ORDO_JL_DONE;
  c->node.status = s;
  if (s != ORDO_OK) {
    c->node.msg = dup_message();
    if (s == ORDO_ERR_OP_FAILED && c->var != 0) {
      int32_t code = 0;
      if (ordo_var_get_error(c->engine, c->var, &code, NULL, 0) == ORDO_OK) c->node.code = code;
    }
  }
  c->node.free_on_pop = 1;
  ordo_jl_hub* h = c->hub;
  if (!post(h, &c->node, 1)) {
    free(c->node.msg);
    free(c);
  }
}

static void* call_thread(void* arg) {
  jl_call* c = (jl_call*)arg;
  ordo_status s;
  int timed = c->timeout_ns != UINT64_MAX;
  switch (c->what) {
    case ORDO_JL_WAIT_VAR:
      s = timed ? ordo_wait_for_var_timeout(c->engine, c->var, c->timeout_ns)
                : ordo_wait_for_var(c->engine, c->var);
      break;
    case ORDO_JL_WAIT_ALL:
      s = timed ? ordo_wait_for_all_timeout(c->engine, c->timeout_ns)
                : ordo_wait_for_all(c->engine);
      break;
    default:
      s = ordo_engine_destroy(c->engine);
      break;
  }
  finish(c, s);
  return NULL;
}

/* ordo_wait_for_var_async's callback: on an engine thread (or inside the start call). */
static void wait_done(void* user_data, ordo_status status) {
  jl_call* c = (jl_call*)user_data;
  c->node.kind = ORDO_JL_DONE;
  c->node.status = status;
  if (status == ORDO_ERR_OP_FAILED) {
    /* The callback gets no message: read the var's error state, as the header suggests. */
    int32_t code = 0;
    char buf[1024];
    buf[0] = 0;
    if (ordo_var_get_error(c->engine, c->var, &code, buf, sizeof buf) == ORDO_OK) {
      c->node.code = code;
      c->node.msg = strdup(buf);
    }
  }
  c->node.free_on_pop = 1;
  if (!post(c->hub, &c->node, 1)) {
    free(c->node.msg);
    free(c);
  }
}

ordo_status ordo_jl_start(ordo_jl_hub* h, uint64_t id, int32_t what, ordo_engine* e, ordo_var v,
                          uint64_t timeout_ns, char* msg, size_t cap) {
  if (h == NULL || what < ORDO_JL_WAIT_VAR || what > ORDO_JL_WAIT_ASYNC) {
    if (msg != NULL && cap > 0)
      strncpy(msg, "ordo_jl_start: bad hub or call", cap - 1)[cap - 1] = 0;
    return ORDO_ERR_INVALID_ARGUMENT;
  }
  jl_call* c = (jl_call*)calloc(1, sizeof *c);
  if (c == NULL) {
    if (msg != NULL && cap > 0) strncpy(msg, "ordo_jl_start: out of memory", cap - 1)[cap - 1] = 0;
    return ORDO_ERR_NO_MEMORY;
  }
  c->node.id = id;
  c->hub = h;
  c->what = what;
  c->engine = e;
  c->var = (what == ORDO_JL_WAIT_VAR || what == ORDO_JL_WAIT_ASYNC) ? v : 0;
  c->timeout_ns = timeout_ns;
  hub_ref(h);
  ordo_status s = ORDO_OK;
  if (what == ORDO_JL_WAIT_ASYNC) {
    s = ordo_wait_for_var_async(e, v, wait_done, c); /* wait_done may run inside */
    if (s != ORDO_OK) copy_message(msg, cap);
  } else {
    pthread_attr_t attr;
    pthread_t t;
    int err = pthread_attr_init(&attr);
    if (err == 0) {
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      err = pthread_create(&t, &attr, call_thread, c);
      pthread_attr_destroy(&attr);
    }
    if (err != 0) {
      s = ORDO_ERR_NO_MEMORY;
      if (msg != NULL && cap > 0)
        strncpy(msg, "ordo_jl_start: cannot start a thread", cap - 1)[cap - 1] = 0;
    }
  }
  if (s != ORDO_OK) {
    free(c);
    hub_unref(h);
  }
  return s;
}
