/* Engine creation, destruction, draining and effective configuration (SPEC §6). */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

TestSuite(engine_lifecycle, .timeout = 30.0);

static ordo_engine* create_engine(const ordo_engine_config* cfg) {
  ordo_engine* e = NULL;
  ordo_status s = ordo_engine_create(cfg, &e);
  cr_assert_eq(s, ORDO_OK, "create kind %d: %s (%s)", (int)cfg->kind, ordo_status_string(s),
               ordo_last_error_message());
  cr_assert_not_null(e);
  return e;
}

static ordo_engine* make_engine(int32_t kind, int32_t cpu_threads) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = cpu_threads;
  return create_engine(&cfg);
}

/* A per-device engine with these worker counts (normal, CPU-prioritized, each copy direction). */
static ordo_engine* make_per_device_engine(int32_t cpu, int32_t priority, int32_t copy) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  cfg.cpu_threads = cpu;
  cfg.cpu_priority_threads = priority;
  cfg.copy_threads = copy;
  return create_engine(&cfg);
}

static int thread_count(void) {
  FILE* f = fopen("/proc/self/status", "r");
  cr_assert_not_null(f);
  char line[256];
  int n = -1;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  }
  fclose(f);
  cr_assert_gt(n, 0, "no Threads: line in /proc/self/status");
  return n;
}

/* The thread count before a test's engines: after ordo_device_count, whose first call loads the
 * CUDA runtime and initializes the driver where there is one; the threads the driver may start
 * then are the process's, not an engine's. */
static int thread_count_before_engines(void) {
  int32_t gpus = 0;
  cr_assert_eq(ordo_device_count(&gpus), ORDO_OK);
  return thread_count();
}

/* Waits up to ~2 s for the thread count to reach `want` (thread exit is seen slightly after
 * pthread_join returns on some kernels). Returns the last count seen. */
static int thread_count_settles_to(int want) {
  int n = thread_count();
  for (int i = 0; i < 200 && n != want; i++) {
    tu_sleep_ms(10);
    n = thread_count();
  }
  return n;
}

static int32_t op_inc(ordo_exec* x, void* ud) {
  (void)x;
  atomic_fetch_add((atomic_int*)ud, 1);
  return 0;
}

/* The head of what destroy must drain: holds its op until the test thread is asleep in
 * ordo_engine_destroy (up to 5 s), so that destroy is known to find the rest pending. A 50 ms
 * sleep here instead let a test thread that came late find the work done, and check less. */
typedef struct destroy_head {
  atomic_int counter;
  int tid;                /* the test thread */
  atomic_int destroying;  /* set just before ordo_engine_destroy */
  atomic_int seen_asleep; /* the head saw destroy asleep */
} destroy_head;

static void destroy_head_init(destroy_head* h) {
  atomic_init(&h->counter, 0);
  h->tid = tu_gettid();
  atomic_init(&h->destroying, 0);
  atomic_init(&h->seen_asleep, 0);
}

static int32_t op_head_then_inc(ordo_exec* x, void* ud) {
  (void)x;
  destroy_head* h = ud;
  if (tu_wait_eq(&h->destroying, 1, 5000) && tu_wait_thread_parked(h->tid, SYS_futex, -1, 5000)) {
    atomic_store(&h->seen_asleep, 1);
  }
  atomic_fetch_add(&h->counter, 1);
  return 0;
}

static void destroy_after_the_head(ordo_engine* e, destroy_head* h) {
  atomic_store(&h->destroying, 1);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&h->seen_asleep), 1,
               "destroy was not seen waiting for the held head op (the order the test needs)");
}

static atomic_int g_freed;
static void free_count(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_freed, 1);
}

Test(engine_lifecycle, create_null_cfg_and_destroy) {
  tu_clear_ordo_env();
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(NULL, &e), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_not_null(e);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(engine_lifecycle, create_each_kind_and_destroy) {
  tu_clear_ordo_env();
  const int32_t kinds[] = {ORDO_ENGINE_DEFAULT, ORDO_ENGINE_NAIVE, ORDO_ENGINE_POOLED,
                           ORDO_ENGINE_PER_DEVICE};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    ordo_engine* e = make_engine(kinds[i], 0);
    ordo_var v = 0;
    cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
    cr_assert_neq(v, 0u);
    cr_assert_eq(ordo_engine_destroy(e), ORDO_OK, "kind %d", (int)kinds[i]);
  }
}

Test(engine_lifecycle, create_with_null_out) {
  cr_assert_eq(ordo_engine_create(NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cr_assert_eq(ordo_engine_create(&cfg, NULL), ORDO_ERR_INVALID_ARGUMENT);
}

Test(engine_lifecycle, create_failure_sets_out_to_null) {
  tu_clear_ordo_env();
  struct {
    int32_t kind, cpu, prio, copy, max_pending;
  } bad[] = {
      {99, 0, 0, 0, 0},
      {-1, 0, 0, 0, 0},
      {ORDO_ENGINE_POOLED, -1, 0, 0, 0},
      {ORDO_ENGINE_PER_DEVICE, 0, -1, 0, 0},
      {ORDO_ENGINE_PER_DEVICE, 0, 0, -1, 0},
      {ORDO_ENGINE_PER_DEVICE, 0, 0, 0, -2}, /* -1 = no throttle; -2 means nothing */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.kind = bad[i].kind;
    cfg.cpu_threads = bad[i].cpu;
    cfg.cpu_priority_threads = bad[i].prio;
    cfg.copy_threads = bad[i].copy;
    cfg.max_pending = bad[i].max_pending;
    ordo_engine* e = (ordo_engine*)(uintptr_t)0x1;
    ordo_status s = ordo_engine_create(&cfg, &e);
    cr_assert_eq(s, ORDO_ERR_INVALID_ARGUMENT, "case %zu: got %s", i, ordo_status_string(s));
    cr_assert_null(e, "case %zu: *out not set to NULL on failure", i);
    cr_assert_gt(strlen(ordo_last_error_message()), 0u);
  }
}

static void check_destroy_drains_independent(int32_t kind) {
  ordo_engine* e = make_engine(kind, 2);
  atomic_int counter = 0;
  atomic_store(&g_freed, 0);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  for (int i = 0; i < 1000; i++) {
    cr_assert_eq(ordo_opr_push(e, op_inc, &counter, NULL, 0, NULL, 0, &o), ORDO_OK);
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&counter), 1000, "kind %d: %d of 1000 ops ran before destroy returned",
               (int)kind, atomic_load(&counter));
  cr_assert_eq(atomic_load(&g_freed), 1000, "kind %d: free_fn ran %d times", (int)kind,
               atomic_load(&g_freed));
}

Test(engine_lifecycle, destroy_drains_pushed_work_per_device) {
  check_destroy_drains_independent(ORDO_ENGINE_PER_DEVICE);
}
Test(engine_lifecycle, destroy_drains_pushed_work_pooled) {
  check_destroy_drains_independent(ORDO_ENGINE_POOLED);
}
Test(engine_lifecycle, destroy_drains_pushed_work_naive) {
  check_destroy_drains_independent(ORDO_ENGINE_NAIVE);
}

static void check_destroy_drains_chain(int32_t kind) {
  ordo_engine* e = make_engine(kind, 2);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  destroy_head h;
  destroy_head_init(&h);
  /* A held head keeps the whole chain pending when destroy is called. */
  cr_assert_eq(ordo_opr_push(e, op_head_then_inc, &h, NULL, 0, &v, 1, NULL), ORDO_OK);
  for (int i = 0; i < 999; i++) {
    if (i % 2)
      cr_assert_eq(ordo_opr_push(e, op_inc, &h.counter, &v, 1, NULL, 0, NULL), ORDO_OK);
    else
      cr_assert_eq(ordo_opr_push(e, op_inc, &h.counter, NULL, 0, &v, 1, NULL), ORDO_OK);
  }
  destroy_after_the_head(e, &h);
  cr_assert_eq(atomic_load(&h.counter), 1000, "kind %d: %d of 1000 chained ops ran", (int)kind,
               atomic_load(&h.counter));
}

Test(engine_lifecycle, destroy_drains_dependent_chain_per_device) {
  check_destroy_drains_chain(ORDO_ENGINE_PER_DEVICE);
}
Test(engine_lifecycle, destroy_drains_dependent_chain_pooled) {
  check_destroy_drains_chain(ORDO_ENGINE_POOLED);
}

Test(engine_lifecycle, destroy_drains_every_property) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  destroy_head h;
  destroy_head_init(&h);
  atomic_int* counter = &h.counter;
  const int32_t props[] = {ORDO_PROP_NORMAL, ORDO_PROP_CPU_PRIORITIZED, ORDO_PROP_COPY_TO_DEVICE,
                           ORDO_PROP_COPY_FROM_DEVICE, ORDO_PROP_ASYNC};
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_opr_push(e, op_head_then_inc, &h, NULL, 0, &v, 1, NULL), ORDO_OK);
  for (int i = 0; i < 100; i++) {
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.prop = props[i % 5];
    /* Half depend on the held head, half are independent. */
    if (i % 2)
      cr_assert_eq(ordo_opr_push(e, op_inc, counter, &v, 1, NULL, 0, &o), ORDO_OK);
    else
      cr_assert_eq(ordo_opr_push(e, op_inc, counter, NULL, 0, NULL, 0, &o), ORDO_OK);
  }
  destroy_after_the_head(e, &h);
  cr_assert_eq(atomic_load(counter), 101);
}

Test(engine_lifecycle, push_after_destroy_returns_shutdown) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_engine_retain(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);

  atomic_int counter = 0;
  atomic_store(&g_freed, 0);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  cr_assert_eq(ordo_opr_push(e, op_inc, &counter, NULL, 0, NULL, 0, &o), ORDO_ERR_SHUTDOWN);
  cr_assert_eq(ordo_opr_push(e, op_inc, &counter, NULL, 0, &v, 1, &o), ORDO_ERR_SHUTDOWN);
  o.prop = ORDO_PROP_ASYNC;
  cr_assert_eq(ordo_opr_push(e, op_inc, &counter, NULL, 0, NULL, 0, &o), ORDO_ERR_SHUTDOWN);
  cr_assert_gt(strlen(ordo_last_error_message()), 0u);
  ordo_var w = 0;
  cr_assert_eq(ordo_var_new(e, &w), ORDO_ERR_SHUTDOWN);
  cr_assert_eq(ordo_engine_release(e), ORDO_OK);
  cr_assert_eq(atomic_load(&counter), 0, "an op pushed after destroy ran");
  cr_assert_eq(atomic_load(&g_freed), 0, "free_fn called for a push that failed");
}

/* The per-device kind starts a worker group on its first op of that kind: a push after destroy
 * must be refused before any group starts, or its threads would live on until the last
 * release. */
Test(engine_lifecycle, push_after_destroy_starts_no_threads) {
  tu_clear_ordo_env();
  ordo_engine* e = make_per_device_engine(2, 4, 4);
  cr_assert_eq(ordo_engine_retain(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  int before = thread_count();
  atomic_int counter = 0;
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  for (int32_t prop = ORDO_PROP_NORMAL; prop < ORDO_PROP_ASYNC; ++prop) {
    o.prop = prop;
    cr_assert_eq(ordo_opr_push(e, op_inc, &counter, NULL, 0, NULL, 0, &o), ORDO_ERR_SHUTDOWN,
                 "prop %d", (int)prop);
    cr_assert(strstr(ordo_last_error_message(), "shut") != NULL, "prop %d: %s", (int)prop,
              ordo_last_error_message());
  }
  /* Nor a GPU's first op after destroy: its streams and their poller are never made. */
  int32_t gpus = 0;
  cr_assert_eq(ordo_device_count(&gpus), ORDO_OK);
  before = thread_count();
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  for (int32_t gpu = 0; gpu < gpus; ++gpu) {
    o.device_id = gpu;
    cr_assert_eq(ordo_opr_push(e, op_inc, &counter, NULL, 0, NULL, 0, &o), ORDO_ERR_SHUTDOWN,
                 "GPU %d", (int)gpu);
  }
  int after = thread_count();
  cr_assert_eq(after, before, "pushes after destroy started %d threads", after - before);
  cr_assert_eq(ordo_engine_release(e), ORDO_OK);
  cr_assert_eq(atomic_load(&counter), 0);
}

/* The header's promise on engine pointers: with L engines alive, a slot comes back only after
 * 65,535 - L other creations since it was handed out (the round robin skips the slots in use);
 * an engine freed right after its creation keeps its pointer invalid that long. */
Test(engine_lifecycle, a_freed_engine_pointer_stays_invalid_while_the_slots_come_round) {
  enum { kSlots = 65535, kAlive = 1000 };
  static ordo_engine* alive[kAlive];
  for (int i = 0; i < kAlive; ++i) alive[i] = make_engine(ORDO_ENGINE_NAIVE, 0);
  ordo_engine* freed = make_engine(ORDO_ENGINE_NAIVE, 0);
  cr_assert_eq(ordo_engine_destroy(freed), ORDO_OK);
  for (int i = 0; i < kSlots - kAlive - 1; ++i) {
    ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
    cr_assert_neq(e, freed, "the freed engine's slot came back after %d creations", i + 1);
    cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
    if (i % 4096 == 0) cr_assert_eq(ordo_engine_retain(freed), ORDO_ERR_INVALID_HANDLE);
  }
  for (int i = 0; i < kAlive; ++i) cr_assert_eq(ordo_engine_destroy(alive[i]), ORDO_OK);
}

static void create_destroy_loop(int32_t kind, int iterations) {
  for (int i = 0; i < iterations; i++) {
    ordo_engine* e = NULL;
    ordo_status s;
    if (kind == ORDO_ENGINE_DEFAULT) {
      s = ordo_engine_create(NULL, &e);
    } else {
      ordo_engine_config cfg;
      ordo_engine_config_init(&cfg);
      cfg.kind = kind;
      s = ordo_engine_create(&cfg, &e);
    }
    cr_assert_eq(s, ORDO_OK, "iteration %d: %s", i, ordo_last_error_message());
    atomic_int counter = 0;
    if (i % 4 == 0)
      cr_assert_eq(ordo_opr_push(e, op_inc, &counter, NULL, 0, NULL, 0, NULL), ORDO_OK);
    cr_assert_eq(ordo_engine_destroy(e), ORDO_OK, "iteration %d", i);
    cr_assert_eq(atomic_load(&counter), i % 4 == 0 ? 1 : 0);
  }
}

Test(engine_lifecycle, create_destroy_loop_leaks_no_threads) {
  tu_clear_ordo_env();
  int before = thread_count_before_engines();
  create_destroy_loop(ORDO_ENGINE_DEFAULT, 100);
  create_destroy_loop(ORDO_ENGINE_POOLED, 50);
  create_destroy_loop(ORDO_ENGINE_NAIVE, 50);
  int after = thread_count_settles_to(before);
  cr_assert_eq(after, before, "threads before %d, after 200 create/destroy %d", before, after);
}

Test(engine_lifecycle, release_to_zero_leaks_no_threads) {
  tu_clear_ordo_env();
  int before = thread_count_before_engines();
  for (int i = 0; i < 50; i++) {
    ordo_engine* e = NULL;
    cr_assert_eq(ordo_engine_create(NULL, &e), ORDO_OK);
    cr_assert_eq(ordo_engine_release(e), ORDO_OK);
  }
  int after = thread_count_settles_to(before);
  cr_assert_eq(after, before, "threads before %d, after 50 create/release %d", before, after);
}

Test(engine_lifecycle, pooled_engine_starts_its_workers) {
  tu_clear_ordo_env();
  int before = thread_count_before_engines();
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED, 4);
  int during = thread_count();
  cr_assert_geq(during, before + 4, "pooled cpu_threads=4: threads %d -> %d", before, during);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  int after = thread_count_settles_to(before);
  cr_assert_eq(after, before);
}

Test(engine_lifecycle, naive_engine_starts_no_threads) {
  tu_clear_ordo_env();
  int before = thread_count_before_engines();
  ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
  int during = thread_count();
  cr_assert_eq(during, before, "naive engine started %d threads", during - before);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

static ordo_engine_config get_config(ordo_engine* e) {
  ordo_engine_config out;
  ordo_engine_config_init(&out);
  out.kind = -77;
  out.cpu_threads = -77;
  out.cpu_priority_threads = -77;
  out.copy_threads = -77;
  out.max_pending = -77;
  ordo_status s = ordo_engine_get_config(e, &out);
  cr_assert_eq(s, ORDO_OK, "get_config: %s", ordo_last_error_message());
  return out;
}

Test(engine_lifecycle, get_config_explicit_pooled) {
  tu_clear_ordo_env();
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED, 3);
  ordo_engine_config c = get_config(e);
  cr_assert_eq(c.struct_size, (uint32_t)sizeof(ordo_engine_config));
  cr_assert_eq(c.kind, ORDO_ENGINE_POOLED);
  cr_assert_eq(c.cpu_threads, 3);
  cr_assert_eq(c.flags, 0u);
  cr_assert_null(c.next);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(engine_lifecycle, get_config_explicit_per_device) {
  tu_clear_ordo_env();
  ordo_engine* e = make_per_device_engine(3, 2, 2);
  ordo_engine_config c = get_config(e);
  cr_assert_eq(c.kind, ORDO_ENGINE_PER_DEVICE);
  cr_assert_eq(c.cpu_threads, 3);
  cr_assert_eq(c.cpu_priority_threads, 2);
  cr_assert_eq(c.copy_threads, 2);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(engine_lifecycle, get_config_defaults) {
  tu_clear_ordo_env();
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(NULL, &e), ORDO_OK);
  ordo_engine_config c = get_config(e);
  long hw = sysconf(_SC_NPROCESSORS_ONLN);
  int32_t want = hw > 2 ? (int32_t)hw : 2;
  cr_assert_eq(c.kind, ORDO_ENGINE_PER_DEVICE, "default kind %d", (int)c.kind);
  cr_assert_eq(c.cpu_threads, want, "default cpu_threads %d, want %d", (int)c.cpu_threads,
               (int)want);
  cr_assert_eq(c.cpu_priority_threads, 1);
  cr_assert_eq(c.copy_threads, 1);
  cr_assert_eq(c.max_pending, 8192, "default max_pending %d", (int)c.max_pending);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(engine_lifecycle, get_config_max_pending) {
  tu_clear_ordo_env();
  const int32_t values[] = {-1, 100000};
  for (size_t i = 0; i < 2; i++) {
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.kind = ORDO_ENGINE_POOLED;
    cfg.max_pending = values[i];
    ordo_engine* e = NULL;
    cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK, "max_pending %d: %s", (int)values[i],
                 ordo_last_error_message());
    cr_assert_eq(get_config(e).max_pending, values[i]);
    /* Work still flows with either setting. */
    atomic_int counter = 0;
    for (int k = 0; k < 100; k++)
      cr_assert_eq(ordo_opr_push(e, op_inc, &counter, NULL, 0, NULL, 0, NULL), ORDO_OK);
    cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&counter), 100);
    cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  }
}

Test(engine_lifecycle, get_config_naive_kind) {
  tu_clear_ordo_env();
  ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 0);
  ordo_engine_config c = get_config(e);
  cr_assert_eq(c.kind, ORDO_ENGINE_NAIVE);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(engine_lifecycle, get_config_writes_at_most_struct_size) {
  tu_clear_ordo_env();
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED, 3);
  union {
    ordo_engine_config c;
    unsigned char bytes[sizeof(ordo_engine_config)];
  } u;
  memset(&u, 0x5A, sizeof u);
  const size_t small = offsetof(ordo_engine_config, cpu_threads);
  u.c.struct_size = (uint32_t)small;
  cr_assert_eq(ordo_engine_get_config(e, &u.c), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(u.c.kind, ORDO_ENGINE_POOLED);
  for (size_t i = small; i < sizeof u; i++)
    cr_assert_eq(u.bytes[i], 0x5A, "byte %zu beyond struct_size %zu was written", i, small);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
