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
  int closed;   /* no more sends: Julia's side is closing or gone */
  int freed;    /* ordo_jl_hub_free was called: the last poster frees the hub */
  long posters; /* calls started and not yet answered (each posts exactly one DONE) */
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
  int last = h->posters == 0;
  pthread_mutex_unlock(&h->mu);
  if (last) hub_destroy(h);
}

/* Queues n and wakes Julia. Returns 0 when the hub is closed (n was not queued). `answers` is 1
 * for the DONE of a started call, which may be the hub's last use (see ordo_jl_hub_free). The
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
    h->posters--;
    destroy = h->freed && h->posters == 0;
  }
  pthread_mutex_unlock(&h->mu);
  if (destroy) hub_destroy(h);
  return queued;
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

typedef struct jl_op {
  jl_node node; /* first: the node's address is the op's */
  ordo_jl_hub* hub;
  int ran;
} jl_op;

static int32_t op_run(ordo_exec* exec, void* user_data) {
  jl_op* op = (jl_op*)user_data;
  ordo_completion c = 0;
  ordo_status s = ordo_exec_defer(exec, &c);
  if (s != ORDO_OK) return s; /* cannot happen: the exec is ours and fresh */
  op->ran = 1;
  op->node.kind = ORDO_JL_RUN;
  op->node.completion = c;
  /* The op stays alive until its free_fn, which follows the completion Julia will make. */
  if (!post(op->hub, &op->node, 0))
    ordo_complete(c, ORDO_ERR_SHUTDOWN, "the Julia side of this engine is gone");
  return 0;
}

static void op_free(void* user_data) {
  jl_op* op = (jl_op*)user_data;
  if (op->ran) {
    free(op);
    return;
  }
  op->node.kind = ORDO_JL_DROP; /* skipped: Julia forgets the closure */
  op->node.free_on_pop = 1;
  if (!post(op->hub, &op->node, 0)) free(op);
}

ordo_status ordo_jl_push(ordo_jl_hub* h, ordo_engine* e, uint64_t id, const ordo_var* reads,
                         size_t nreads, const ordo_var* writes, size_t nwrites, int32_t priority,
                         int32_t prop, const char* name, char* msg, size_t cap) {
  jl_op* op = (jl_op*)calloc(1, sizeof *op);
  if (op == NULL) {
    if (msg != NULL && cap > 0) strncpy(msg, "ordo_jl_push: out of memory", cap - 1)[cap - 1] = 0;
    return ORDO_ERR_NO_MEMORY;
  }
  op->node.id = id;
  op->hub = h;
  ordo_push_opts opts;
  ordo_push_opts_init_sized(&opts, sizeof opts);
  opts.free_fn = op_free;
  opts.priority = priority;
  opts.prop = prop;
  opts.name = name;
  ordo_status s = ordo_opr_push(e, op_run, op, reads, nreads, writes, nwrites, &opts);
  if (s != ORDO_OK) {
    copy_message(msg, cap);
    free(op);
  }
  return s;
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
  pthread_mutex_lock(&h->mu);
  h->posters++;
  pthread_mutex_unlock(&h->mu);
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
    pthread_mutex_lock(&h->mu);
    h->posters--;
    int destroy = h->freed && h->posters == 0;
    pthread_mutex_unlock(&h->mu);
    if (destroy) hub_destroy(h);
  }
  return s;
}
