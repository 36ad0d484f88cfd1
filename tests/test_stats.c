/*
 * §9 counters: ordo_engine_stats counts the caller's ops (pushed, completed, failed, skipped,
 * pending, ready) and leaves out the internal ops of var deletes, clear_error and waits.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

TestSuite(stats, .timeout = 30.0);

static int32_t g_kind;
#define ST(expr, want) TU_ASSERT_ST(expr, want, tu_kind_name(g_kind))

static ordo_engine* make_engine(int32_t kind) {
  ordo_engine* e = NULL;
  g_kind = kind;
  ST(tu_engine_create(kind, 2, &e), ORDO_OK);
  return e;
}

static ordo_stats stats_of(ordo_engine* e) {
  ordo_stats s;
  memset(&s, 0xAB, sizeof s);
  s.struct_size = sizeof s;
  ST(ordo_engine_stats(e, &s), ORDO_OK);
  return s;
}

static int32_t return_code(ordo_exec* exec, void* user_data) {
  (void)exec;
  return (int32_t)(intptr_t)user_data;
}

/* Says it started (gate[1] = 1), then blocks until gate[0] is non-zero: keeps later ops on its
 * var pending. */
static int32_t gate_fn(ordo_exec* exec, void* user_data) {
  (void)exec;
  atomic_int* gate = (atomic_int*)user_data;
  atomic_store(&gate[1], 1);
  tu_wait_ge(&gate[0], 1, 10000);
  return 0;
}

Test(stats, fresh_engine_counts_nothing_and_reports_its_workers) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_stats s = stats_of(e);
    cr_assert_eq(s.struct_size, sizeof s);
    cr_assert_eq(s.pushed, 0);
    cr_assert_eq(s.completed, 0);
    cr_assert_eq(s.failed, 0);
    cr_assert_eq(s.skipped, 0);
    cr_assert_eq(s.pending, 0);
    cr_assert_eq(s.ready, 0);
    cr_assert_eq(s.trace_records, 0, "tracing is off");
    cr_assert_eq(s.workers, tu_all_kinds[k] == ORDO_ENGINE_NAIVE ? 0u : 2u, "%s: %u workers",
                 tu_kind_name(tu_all_kinds[k]), s.workers);
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

Test(stats, counts_pushes_completions_failures_and_skips) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var a, b;
    ST(ordo_var_new(e, &a), ORDO_OK);
    ST(ordo_var_new(e, &b), ORDO_OK);
    for (int i = 0; i < 100; ++i) {
      ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, &a, 1, NULL), ORDO_OK);
    }
    ST(ordo_opr_push(e, return_code, (void*)7, NULL, 0, &b, 1, NULL), ORDO_OK); /* fails */
    ST(ordo_opr_push(e, return_code, (void*)0, &b, 1, NULL, 0, NULL), ORDO_OK); /* skipped */
    ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, &b, 1, NULL), ORDO_OK); /* skipped */
    ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
    ordo_stats s = stats_of(e);
    cr_assert_eq(s.pushed, 103, "%s: pushed %llu", tu_kind_name(g_kind),
                 (unsigned long long)s.pushed);
    cr_assert_eq(s.completed, 103);
    /* SPEC 3: a skipped op is counted as failed; `skipped` says how many of those never ran */
    cr_assert_eq(s.failed, 3, "%s: failed %llu (the failure and the two skips)",
                 tu_kind_name(g_kind), (unsigned long long)s.failed);
    cr_assert_eq(s.skipped, 2);
    cr_assert_eq(s.pending, 0);
    cr_assert_eq(s.ready, 0);
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

Test(stats, internal_ops_of_deletes_clears_and_waits_are_not_counted) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v, w;
    ST(ordo_var_new(e, &v), ORDO_OK);
    ST(ordo_var_new(e, &w), ORDO_OK);
    ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_var(e, v), ORDO_OK);
    ST(ordo_var_clear_error(e, v), ORDO_OK);
    ST(ordo_var_delete(e, v), ORDO_OK);
    ST(ordo_var_delete(e, w), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    ordo_stats s = stats_of(e);
    cr_assert_eq(s.pushed, 1, "%s: pushed %llu", tu_kind_name(g_kind),
                 (unsigned long long)s.pushed);
    cr_assert_eq(s.completed, 1);
    cr_assert_eq(s.pending, 0);
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

Test(stats, pending_and_ready_while_ops_wait) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  atomic_int gate[2];
  atomic_init(&gate[0], 0);
  atomic_init(&gate[1], 0);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  ST(ordo_opr_push(e, gate_fn, gate, NULL, 0, &v, 1, NULL), ORDO_OK);
  for (int i = 0; i < 5; ++i) {
    ST(ordo_opr_push(e, return_code, (void*)0, &v, 1, NULL, 0, NULL), ORDO_OK);
  }
  cr_assert(tu_wait_eq(&gate[1], 1, 10000), "the gate op never started");
  ordo_stats s = stats_of(e);
  cr_assert_eq(s.pushed, 6);
  cr_assert_eq(s.pending, 6, "the gate holds every reader behind it");
  cr_assert_eq(s.completed, 0);
  cr_assert_eq(s.ready, 0, "the gate runs, the readers wait on the var: nothing is queued");
  atomic_store(&gate[0], 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  s = stats_of(e);
  cr_assert_eq(s.pending, 0);
  cr_assert_eq(s.completed, 6);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(stats, failing_async_completion_counts_as_failed) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  tu_deferred d;
  tu_deferred_init(&d);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &v, 1, NULL), ORDO_OK);
  ordo_completion c = tu_deferred_wait(&d, 5000);
  cr_assert_neq(c, 0);
  ordo_stats s = stats_of(e);
  cr_assert_eq(s.pending, 1, "a deferred op is pending until ordo_complete");
  ST(ordo_complete(c, 9, "device lost"), ORDO_OK);
  ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
  s = stats_of(e);
  cr_assert_eq(s.failed, 1);
  cr_assert_eq(s.completed, 1);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(stats, writes_no_more_than_the_callers_struct_size) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, &v, 1, NULL), ORDO_OK);
  ST(ordo_wait_for_all(e), ORDO_OK);
  /* An older caller whose struct ends after `pushed`. */
  size_t old_size = offsetof(ordo_stats, pushed) + sizeof(uint64_t);
  unsigned char buf[sizeof(ordo_stats)];
  memset(buf, 0xCD, sizeof buf);
  uint32_t size32 = (uint32_t)old_size;
  memcpy(buf, &size32, sizeof size32);
  ST(ordo_engine_stats(e, (ordo_stats*)(void*)buf), ORDO_OK);
  uint64_t pushed;
  memcpy(&pushed, buf + offsetof(ordo_stats, pushed), sizeof pushed);
  cr_assert_eq(pushed, 1);
  for (size_t i = old_size; i < sizeof buf; ++i) {
    cr_assert_eq(buf[i], 0xCD, "byte %zu past the caller's struct was written", i);
  }
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(stats, bad_arguments_are_reported) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_stats s;
  s.struct_size = sizeof s;
  ST(ordo_engine_stats(NULL, &s), ORDO_ERR_INVALID_ARGUMENT);
  ST(ordo_engine_stats(e, NULL), ORDO_ERR_INVALID_ARGUMENT);
  s.struct_size = 0;
  ST(ordo_engine_stats(e, &s), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(ordo_last_error_message(), "struct_size") != NULL);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(stats, readable_after_destroy_while_retained) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, &v, 1, NULL), ORDO_OK);
  ST(ordo_engine_retain(e), ORDO_OK);
  ST(ordo_engine_destroy(e), ORDO_OK); /* drains: the op completes */
  ordo_stats s = stats_of(e);
  cr_assert_eq(s.pushed, 1);
  cr_assert_eq(s.completed, 1);
  cr_assert_eq(s.workers, 0, "the workers are joined");
  /* The header: work-adding calls say SHUTDOWN, read-only queries still answer. */
  int32_t code = -1;
  ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_OK);
  cr_assert_eq(code, 0);
  ordo_engine_config got;
  ordo_engine_config_init(&got);
  ST(ordo_engine_get_config(e, &got), ORDO_OK);
  ordo_var w;
  ST(ordo_var_new(e, &w), ORDO_ERR_SHUTDOWN);
  ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, &v, 1, NULL), ORDO_ERR_SHUTDOWN);
  ST(ordo_wait_for_all(e), ORDO_ERR_SHUTDOWN);
  ST(ordo_engine_release(e), ORDO_OK);
}

Test(stats, rejected_pushes_are_not_counted) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    ordo_var v, live;
    ST(ordo_var_new(e, &v), ORDO_OK);
    ST(ordo_var_new(e, &live), ORDO_OK);
    ST(ordo_var_delete(e, v), ORDO_OK);
    /* Stale: caught under the var's lock, after the push was counted on its lane. */
    ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, &v, 1, NULL), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_opr_push(e, return_code, (void*)0, &live, 1, &v, 1, NULL), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_var_clear_error(e, v), ORDO_ERR_INVALID_HANDLE);
    ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, &live, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    ordo_stats s = stats_of(e);
    cr_assert_eq(s.pushed, 1, "%s: pushed %llu", tu_kind_name(g_kind),
                 (unsigned long long)s.pushed);
    cr_assert_eq(s.completed, 1, "%s: completed %llu", tu_kind_name(g_kind),
                 (unsigned long long)s.completed);
    cr_assert_eq(s.pending, 0);
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

/* SPEC §9's per-queue depth: ready ops are counted per worker group, at the ORDO_PROP_* whose
 * ops the group runs. Each group here has one worker, held by a gate op, so what is pushed after
 * it waits in that group's queue. The pooled kind runs every property on its one group. */
static ordo_engine* engine_with_one_worker_per_group(int32_t kind) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 1;
  cfg.cpu_priority_threads = 1;
  cfg.copy_threads = 1;
  ordo_engine* e = NULL;
  g_kind = kind;
  ST(ordo_engine_create(&cfg, &e), ORDO_OK);
  return e;
}

static void push_with_prop(ordo_engine* e, ordo_fn fn, void* ud, int32_t prop) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.prop = prop;
  ST(ordo_opr_push(e, fn, ud, NULL, 0, NULL, 0, &o), ORDO_OK);
}

Test(stats, ready_ops_are_counted_per_queue) {
  for (int pooled = 0; pooled < 2; ++pooled) {
    ordo_engine* e =
        engine_with_one_worker_per_group(pooled ? ORDO_ENGINE_POOLED : ORDO_ENGINE_PER_DEVICE);
    const int groups = pooled ? 1 : ORDO_STATS_QUEUES;
    atomic_int gate[ORDO_STATS_QUEUES][2];
    for (int p = 0; p < groups; ++p) {
      atomic_init(&gate[p][0], 0);
      atomic_init(&gate[p][1], 0);
      push_with_prop(e, gate_fn, gate[p], p);
      cr_assert(tu_wait_eq(&gate[p][1], 1, 10000), "%s: the gate of queue %d never started",
                tu_kind_name(g_kind), p);
    }
    /* 1 op of ORDO_PROP_NORMAL, 2 of CPU_PRIORITIZED, 3 of COPY_TO, 4 of COPY_FROM. */
    for (int p = 0; p < ORDO_STATS_QUEUES; ++p) {
      for (int i = 0; i <= p; ++i) push_with_prop(e, return_code, (void*)0, p);
    }
    ordo_stats s = stats_of(e);
    cr_assert_eq(s.ready, 10, "%s: %llu ready", tu_kind_name(g_kind), (unsigned long long)s.ready);
    for (int p = 0; p < ORDO_STATS_QUEUES; ++p) {
      uint64_t want = pooled ? (p == ORDO_PROP_NORMAL ? 10u : 0u) : (uint64_t)(p + 1);
      cr_assert_eq(s.queue_ready[p], want, "%s: queue %d has %llu ready, want %llu",
                   tu_kind_name(g_kind), p, (unsigned long long)s.queue_ready[p],
                   (unsigned long long)want);
    }
    for (int p = 0; p < groups; ++p) atomic_store(&gate[p][0], 1);
    ST(ordo_wait_for_all(e), ORDO_OK);
    s = stats_of(e);
    for (int p = 0; p < ORDO_STATS_QUEUES; ++p) cr_assert_eq(s.queue_ready[p], 0);
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

/* ordo_engine_queue_stats: the engine's ready queues, device by device, as a list that can grow
 * with devices (ordo_stats.queue_ready keeps its four fixed entries). */
static ordo_queue_stats queue_of(ordo_engine* e, uint32_t index) {
  ordo_queue_stats q;
  memset(&q, 0xAB, sizeof q);
  q.struct_size = sizeof q;
  ST(ordo_engine_queue_stats(e, index, &q), ORDO_OK);
  return q;
}

Test(stats, queues_are_listed_device_by_device) {
  static const char* const per_device_names[4] = {"cpu", "prio", "h2d", "d2h"};
  static const char* const gpu_suffix[3] = {"", "-h2d", "-d2h"};
  int32_t gpus = 0;
  ST(ordo_device_count(&gpus), ORDO_OK);
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    uint32_t n = 99;
    ST(ordo_engine_queue_count(e, &n), ORDO_OK);
    /* per_device: the CPU's 4 queues, then each GPU's compute, h2d and d2h queues; the other
     * kinds run GPU ops inline (naive) or on the CPU's one queue (pooled). */
    const uint32_t want = g_kind == ORDO_ENGINE_NAIVE    ? 0
                          : g_kind == ORDO_ENGINE_POOLED ? 1
                                                         : 4 + 3 * (uint32_t)gpus;
    cr_assert_eq(n, want, "%s: %u queues (%d GPUs)", tu_kind_name(g_kind), n, (int)gpus);
    for (uint32_t i = 0; i < n; ++i) {
      ordo_queue_stats q = queue_of(e, i);
      cr_assert_eq(q.struct_size, sizeof q);
      cr_assert_eq(q.queues, n);
      cr_assert_eq(q.ready, 0, "%s: queue %u of an idle engine", tu_kind_name(g_kind), i);
      cr_assert_not_null(q.name);
      cr_assert_eq(q.workers, i == 0 ? 2u : 0u,
                   "%s: queue %u: the CPU's 2 workers run from the start, the others start "
                   "with their first op",
                   tu_kind_name(g_kind), i);
      if (i >= 4) { /* per_device, GPU (i - 4) / 3 */
        char name[32];
        snprintf(name, sizeof name, "gpu%u%s", (i - 4) / 3, gpu_suffix[(i - 4) % 3]);
        cr_assert_eq(q.device_type, ORDO_DEVICE_GPU);
        cr_assert_eq(q.device_id, (int32_t)((i - 4) / 3));
        cr_assert_str_eq(q.name, name);
        continue;
      }
      cr_assert_eq(q.device_type, ORDO_DEVICE_CPU);
      cr_assert_eq(q.device_id, 0);
      if (g_kind == ORDO_ENGINE_POOLED) {
        cr_assert_eq(q.prop, -1, "the pooled kind's one queue runs every property");
        cr_assert_str_eq(q.name, "cpu");
      } else {
        cr_assert_eq(q.prop, (int32_t)i, "per_device: queue %u runs ORDO_PROP_* %u", i, i);
        cr_assert_str_eq(q.name, per_device_names[i]);
      }
    }
    ordo_queue_stats q;
    memset(&q, 0, sizeof q);
    q.struct_size = sizeof q;
    ST(ordo_engine_queue_stats(e, n, &q), ORDO_ERR_INVALID_ARGUMENT);
    char how_many[32];
    snprintf(how_many, sizeof how_many, "has %u queue", n);
    cr_assert(strstr(ordo_last_error_message(), how_many) != NULL, "%s", ordo_last_error_message());
    ST(ordo_engine_destroy(e), ORDO_OK);
  }
}

Test(stats, queue_stats_count_ready_ops_like_queue_ready) {
  ordo_engine* e = NULL;
  g_kind = ORDO_ENGINE_PER_DEVICE;
  ST(tu_engine_create(g_kind, 1, &e), ORDO_OK); /* one CPU worker: a gate holds it */
  tu_gate g;
  tu_gate_init(&g);
  ST(ordo_opr_push(e, tu_gate_fn, &g, NULL, 0, NULL, 0, NULL), ORDO_OK);
  cr_assert(tu_wait_ge(&g.in, 1, 10000), "the gate op never ran");
  atomic_int ran;
  atomic_init(&ran, 0);
  for (int i = 0; i < 3; i++)
    ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, NULL, 0, NULL), ORDO_OK);
  ordo_queue_stats q = queue_of(e, 0);
  ordo_stats s = stats_of(e);
  cr_assert_eq(q.ready, 3, "three ops ready behind the gate");
  cr_assert_eq(q.ready, s.queue_ready[ORDO_PROP_NORMAL]);
  cr_assert_eq(q.workers, 1);
  /* A queue whose workers start with their first op. */
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.prop = ORDO_PROP_COPY_TO_DEVICE;
  ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, NULL, 0, &o), ORDO_OK);
  cr_assert_eq(queue_of(e, ORDO_PROP_COPY_TO_DEVICE).workers, 1, "started by its first op");
  atomic_store(&g.open, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&ran), 4);
  cr_assert_eq(queue_of(e, 0).ready, 0);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

Test(stats, queue_stats_refuse_bad_arguments) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_queue_stats q;
  memset(&q, 0, sizeof q);
  q.struct_size = sizeof q;
  uint32_t n;
  ST(ordo_engine_queue_stats(NULL, 0, &q), ORDO_ERR_INVALID_ARGUMENT);
  ST(ordo_engine_queue_stats(e, 0, NULL), ORDO_ERR_INVALID_ARGUMENT);
  ST(ordo_engine_queue_count(NULL, &n), ORDO_ERR_INVALID_ARGUMENT);
  ST(ordo_engine_queue_count(e, NULL), ORDO_ERR_INVALID_ARGUMENT);
  q.struct_size = 0;
  ST(ordo_engine_queue_stats(e, 0, &q), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(ordo_last_error_message(), "struct_size") != NULL, "%s",
            ordo_last_error_message());
  /* A caller compiled against a smaller struct gets only what fits. */
  unsigned char small[sizeof(ordo_queue_stats) + 8];
  memset(small, 0xCD, sizeof small);
  uint32_t size = (uint32_t)offsetof(ordo_queue_stats, device_id);
  memcpy(small, &size, sizeof size);
  ST(ordo_engine_queue_stats(e, 0, (ordo_queue_stats*)(void*)small), ORDO_OK);
  for (size_t i = size; i < sizeof small; ++i) cr_assert_eq(small[i], 0xCD, "byte %zu written", i);
  ST(ordo_engine_destroy(e), ORDO_OK);
  q.struct_size = sizeof q;
  ST(ordo_engine_queue_stats(e, 0, &q), ORDO_ERR_INVALID_HANDLE);
  ST(ordo_engine_queue_count(e, &n), ORDO_ERR_INVALID_HANDLE);
}
