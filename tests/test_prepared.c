/* Prepared ops: ordo_opr_new / ordo_opr_push_prepared / ordo_opr_delete (SPEC §1). */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

TestSuite(prepared, .timeout = 30.0);

static int wait_flag(atomic_int* a, int want, long timeout_ms) {
  uint64_t end = tu_now_ms() + (uint64_t)timeout_ms;
  while (atomic_load(a) < want) {
    if (tu_now_ms() > end) return 0;
    tu_sleep_ms(1);
  }
  return 1;
}

static ordo_engine* make_engine(int32_t kind, int32_t threads) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = threads;
  ordo_engine* e = NULL;
  ordo_status s = ordo_engine_create(&cfg, &e);
  cr_assert_eq(s, ORDO_OK, "create: %s", ordo_last_error_message());
  cr_assert_not_null(e);
  return e;
}

/* A log of which op ran, in order. Ops sharing a mutable var are serialized, so plain writes
 * through an atomic index are enough. */
struct log {
  atomic_int n;
  atomic_int inside;
  atomic_int overlap;
  int entries[1024];
};

struct tagged {
  struct log* log;
  int tag;
};

static int32_t op_log(ordo_exec* x, void* ud) {
  (void)x;
  struct tagged* t = ud;
  if (atomic_fetch_add(&t->log->inside, 1) != 0) atomic_store(&t->log->overlap, 1);
  int i = atomic_fetch_add(&t->log->n, 1);
  if (i < 1024) t->log->entries[i] = t->tag;
  atomic_fetch_sub(&t->log->inside, 1);
  return 0;
}

static atomic_int g_freed;
static atomic_int g_runs_at_free;
static atomic_int g_runs;

static void free_count(void* ud) {
  (void)ud;
  atomic_store(&g_runs_at_free, atomic_load(&g_runs));
  atomic_fetch_add(&g_freed, 1);
}

static int32_t op_run(ordo_exec* x, void* ud) {
  (void)x;
  (void)ud;
  atomic_fetch_add(&g_runs, 1);
  return 0;
}

static void reset(void) {
  atomic_store(&g_freed, 0);
  atomic_store(&g_runs_at_free, -1);
  atomic_store(&g_runs, 0);
}

static void check_prepared_many_in_order(int32_t kind) {
  ordo_engine* e = make_engine(kind, 2);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  static struct log log;
  memset(&log, 0, sizeof log);
  static struct tagged prep_tag, plain_tags[200];
  prep_tag.log = &log;
  prep_tag.tag = -1;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_log, &prep_tag, NULL, 0, &v, 1, NULL, &p), ORDO_OK, "%s",
               ordo_last_error_message());
  cr_assert_neq(p, 0u);
  /* P, 0, P, 1, ... interleaved with ordinary pushes on the same var. */
  for (int i = 0; i < 200; i++) {
    cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK, "push_prepared #%d: %s", i,
                 ordo_last_error_message());
    plain_tags[i].log = &log;
    plain_tags[i].tag = i;
    cr_assert_eq(ordo_opr_push(e, op_log, &plain_tags[i], NULL, 0, &v, 1, NULL), ORDO_OK);
  }
  /* Then 300 more prepared pushes alone. */
  for (int i = 0; i < 300; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(atomic_load(&log.n), 700, "kind %d: %d runs, want 700", (int)kind,
               atomic_load(&log.n));
  cr_assert_eq(atomic_load(&log.overlap), 0, "writers of one var overlapped");
  for (int i = 0; i < 200; i++) {
    cr_assert_eq(log.entries[2 * i], -1, "kind %d: position %d is %d, want the prepared op",
                 (int)kind, 2 * i, log.entries[2 * i]);
    cr_assert_eq(log.entries[2 * i + 1], i, "kind %d: position %d is %d, want %d", (int)kind,
                 2 * i + 1, log.entries[2 * i + 1], i);
  }
  for (int i = 400; i < 700; i++) cr_assert_eq(log.entries[i], -1);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(prepared, many_pushes_in_order_per_device) {
  check_prepared_many_in_order(ORDO_ENGINE_PER_DEVICE);
}
Test(prepared, many_pushes_in_order_pooled) {
  check_prepared_many_in_order(ORDO_ENGINE_POOLED);
}
Test(prepared, many_pushes_in_order_naive) {
  check_prepared_many_in_order(ORDO_ENGINE_NAIVE);
}

/* ---- readers ---- */

struct readers {
  atomic_int count;  /* reader runs */
  atomic_int inside; /* readers running right now */
  atomic_int met;    /* readers that saw another reader running at the same time */
  atomic_int seen_by_writer;
  atomic_int writer_ran;
};

static int32_t op_reader(ordo_exec* x, void* ud) {
  (void)x;
  struct readers* r = ud;
  atomic_fetch_add(&r->inside, 1);
  /* Wait (bounded) for a second reader to be inside too: readers must be able to overlap. */
  uint64_t end = tu_now_ms() + 2000;
  while (atomic_load(&r->inside) < 2 && tu_now_ms() < end) tu_sleep_ms(1);
  if (atomic_load(&r->inside) >= 2) atomic_fetch_add(&r->met, 1);
  atomic_fetch_add(&r->count, 1);
  /* Stay until the partner has seen us too (bounded), however late the scheduler runs it. */
  while (atomic_load(&r->met) < 2 && tu_now_ms() < end) tu_sleep_ms(1);
  atomic_fetch_sub(&r->inside, 1);
  return 0;
}

static int32_t op_writer_after_readers(ordo_exec* x, void* ud) {
  (void)x;
  struct readers* r = ud;
  atomic_store(&r->seen_by_writer, atomic_load(&r->count));
  atomic_store(&r->writer_ran, 1);
  return 0;
}

Test(prepared, readers_only_prepared_op) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED, 2);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  struct readers r;
  memset(&r, 0, sizeof r);
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_reader, &r, &v, 1, NULL, 0, NULL, &p), ORDO_OK);
  for (int i = 0; i < 2; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
  cr_assert_eq(ordo_opr_push(e, op_writer_after_readers, &r, NULL, 0, &v, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(atomic_load(&r.count), 2);
  cr_assert_eq(atomic_load(&r.met), 2,
               "two pushes of a readers-only prepared op did not "
               "overlap (%d of 2 saw the other)",
               atomic_load(&r.met));
  cr_assert_eq(atomic_load(&r.writer_ran), 1);
  cr_assert_eq(atomic_load(&r.seen_by_writer), 2, "the writer ran before the readers finished");
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

static int32_t op_count_reader(ordo_exec* x, void* ud) {
  (void)x;
  atomic_fetch_add((atomic_int*)ud, 1);
  return 0;
}

struct snap {
  atomic_int* counter;
  atomic_int seen;
};

static int32_t op_snap(ordo_exec* x, void* ud) {
  (void)x;
  struct snap* s = ud;
  atomic_store(&s->seen, atomic_load(s->counter));
  return 0;
}

Test(prepared, readers_prepared_then_writer_many) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  atomic_int counter = 0;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_count_reader, &counter, &v, 1, NULL, 0, NULL, &p), ORDO_OK);
  struct snap snaps[10];
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 20; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
    snaps[round].counter = &counter;
    atomic_store(&snaps[round].seen, -1);
    cr_assert_eq(ordo_opr_push(e, op_snap, &snaps[round], NULL, 0, &v, 1, NULL), ORDO_OK);
  }
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(atomic_load(&counter), 200);
  for (int round = 0; round < 10; round++)
    cr_assert_eq(atomic_load(&snaps[round].seen), 20 * (round + 1),
                 "writer %d saw %d reader runs, want %d", round, atomic_load(&snaps[round].seen),
                 20 * (round + 1));
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* ---- delete ---- */

struct blocker {
  atomic_int started;
  atomic_int release;
  atomic_int timed_out;
};

static int32_t op_block(ordo_exec* x, void* ud) {
  (void)x;
  struct blocker* b = ud;
  atomic_store(&b->started, 1);
  if (!wait_flag(&b->release, 1, 5000)) atomic_store(&b->timed_out, 1);
  return 0;
}

static void check_delete_while_pending(int32_t kind) {
  reset();
  ordo_engine* e = make_engine(kind, 2);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  struct blocker b;
  memset(&b, 0, sizeof b);
  cr_assert_eq(ordo_opr_push(e, op_block, &b, NULL, 0, &v, 1, NULL), ORDO_OK);
  cr_assert(wait_flag(&b.started, 1, 5000));

  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, &v, 1, &o, &p), ORDO_OK);
  for (int i = 0; i < 5; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  /* Invalid at once. */
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_ERR_INVALID_HANDLE);
  /* A made-up handle one generation ahead (bits 24-47 of a handle) names nothing either, even
   * while the deleted op's pushes are in flight (found by fuzz_handles: deleting used to bump
   * the generation at once, which made this handle look live). */
  ordo_opr ahead = p + ((ordo_opr)1 << 24);
  cr_assert_eq(ordo_opr_push_prepared(e, ahead, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_opr_delete(e, ahead), ORDO_ERR_INVALID_HANDLE);
  /* But the pushes already made are still pending behind the blocker, and free_fn waits. */
  cr_assert_eq(atomic_load(&g_runs), 0);
  cr_assert_eq(atomic_load(&g_freed), 0, "free_fn ran before the pending pushes finished");
  atomic_store(&b.release, 1);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(atomic_load(&g_runs), 5, "pushes made before delete: %d of 5 ran",
               atomic_load(&g_runs));
  /* free_fn is not promised before waiters wake for prepared ops; give it a moment. */
  cr_assert(wait_flag(&g_freed, 1, 2000), "free_fn never ran after delete and the last push");
  cr_assert_eq(atomic_load(&g_runs_at_free), 5, "free_fn ran after %d of 5 pushes",
               atomic_load(&g_runs_at_free));
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 1, "free_fn ran %d times", atomic_load(&g_freed));
  cr_assert_eq(atomic_load(&b.timed_out), 0);
}

Test(prepared, delete_invalidates_at_once_pending_still_run_per_device) {
  check_delete_while_pending(ORDO_ENGINE_PER_DEVICE);
}
Test(prepared, delete_invalidates_at_once_pending_still_run_pooled) {
  check_delete_while_pending(ORDO_ENGINE_POOLED);
}

Test(prepared, free_fn_once_after_delete_without_pushes) {
  reset();
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, NULL, 0, &o, &p), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 0, "free_fn ran before delete");
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert(wait_flag(&g_freed, 1, 2000), "free_fn never ran after delete");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 1);
  cr_assert_eq(atomic_load(&g_runs), 0);
}

Test(prepared, free_fn_not_before_delete) {
  reset();
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, NULL, 0, &o, &p), ORDO_OK);
  for (int i = 0; i < 50; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  tu_sleep_ms(20);
  cr_assert_eq(atomic_load(&g_runs), 50);
  cr_assert_eq(atomic_load(&g_freed), 0, "free_fn ran before ordo_opr_delete");
  /* Still usable. */
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_runs), 51);
  cr_assert_eq(atomic_load(&g_freed), 1);
  cr_assert_eq(atomic_load(&g_runs_at_free), 51);
}

Test(prepared, free_fn_at_destroy_when_never_deleted) {
  reset();
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, NULL, 0, &o, &p), ORDO_OK);
  for (int i = 0; i < 3; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_runs), 3);
  cr_assert_eq(atomic_load(&g_freed), 1,
               "free_fn of a never-deleted prepared op ran %d times "
               "by destroy",
               atomic_load(&g_freed));
  cr_assert_eq(atomic_load(&g_runs_at_free), 3);
}

/* With another reference alive, destroy leaves a never-deleted prepared op to its holder, who
 * may still delete it; else its free_fn runs in the last release, on the releasing thread, not on
 * whichever thread happens to let go of the engine's memory. */
static atomic_int g_freed_on_main;
static pthread_t g_main_thread;

static void free_count_where(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_freed, 1);
  if (pthread_equal(pthread_self(), g_main_thread)) atomic_fetch_add(&g_freed_on_main, 1);
}

Test(prepared, free_fn_of_a_never_deleted_op_with_another_reference) {
  reset();
  atomic_store(&g_freed_on_main, 0);
  g_main_thread = pthread_self();
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count_where;
  ordo_opr kept = 0, deleted_late = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, NULL, 0, &o, &kept), ORDO_OK);
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, NULL, 0, &o, &deleted_late), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(e, kept, 0), ORDO_OK);
  cr_assert_eq(ordo_engine_retain(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_runs), 1);
  cr_assert_eq(atomic_load(&g_freed), 0, "destroy freed ops another reference may still delete");
  cr_assert_eq(ordo_opr_delete(e, deleted_late), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(atomic_load(&g_freed), 1);
  cr_assert_eq(ordo_engine_release(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 2, "the last release did not free the op never deleted");
  cr_assert_eq(atomic_load(&g_freed_on_main), 2);
}

Test(prepared, var_deleted_since) {
  reset();
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v = 0, w = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_var_new(e, &w), ORDO_OK);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, &w, 1, &v, 1, &o, &p), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_ERR_INVALID_HANDLE,
               "push_prepared after its mutable var was deleted");
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(atomic_load(&g_runs), 1);
  /* The prepared op itself still exists and can be deleted. */
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 1);

  /* Same with a const var. */
  reset();
  e = make_engine(ORDO_ENGINE_POOLED, 2);
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, &v, 1, NULL, 0, &o, &p), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, v), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_runs), 0);
  cr_assert_eq(atomic_load(&g_freed), 1, "never-deleted prepared op: free_fn at destroy");
}

/* A prepared op over more vars than a push copies (16): such a push keeps the op alive with a
 * reference of its own while it enqueues. Pushes behind a blocker, a delete while they wait, a
 * push refused for a deleted var: every accepted push runs, and free_fn runs once, after them. */
Test(prepared, long_var_list_pushes_delete_and_refusal) {
  enum { kVars = 40 };
  reset();
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v[kVars];
  for (int i = 0; i < kVars; i++) cr_assert_eq(ordo_var_new(e, &v[i]), ORDO_OK);
  struct blocker b;
  memset(&b, 0, sizeof b);
  cr_assert_eq(ordo_opr_push(e, op_block, &b, NULL, 0, &v[kVars - 1], 1, NULL), ORDO_OK);
  cr_assert(wait_flag(&b.started, 1, 5000));
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, v, kVars / 2, v + kVars / 2, kVars / 2, &o, &p),
               ORDO_OK, "%s", ordo_last_error_message());
  for (int i = 0; i < 5; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_OK);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 0, "free_fn ran before the pending pushes finished");
  atomic_store(&b.release, 1);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert(wait_flag(&g_freed, 1, 2000), "free_fn never ran after delete and the last push");
  cr_assert_eq(atomic_load(&g_runs_at_free), 5, "free_fn ran after %d of 5 pushes",
               atomic_load(&g_runs_at_free));

  /* A refused push gives both of its references back: the handle's stays until delete. */
  reset();
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, v, kVars / 2, v + kVars / 2, kVars / 2, &o, &p),
               ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, v[kVars - 1]), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  tu_sleep_ms(10);
  cr_assert_eq(atomic_load(&g_freed), 0, "free_fn ran while the handle was live");
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert(wait_flag(&g_freed, 1, 2000), "free_fn never ran after delete");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_freed), 1, "free_fn ran %d times", atomic_load(&g_freed));
  cr_assert_eq(atomic_load(&g_runs), 0);
  cr_assert_eq(atomic_load(&b.timed_out), 0);
}

Test(prepared, opr_new_bad_arguments) {
  reset();
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_engine* other = make_engine(ORDO_ENGINE_POOLED, 2);
  ordo_var v = 0, foreign = 0, dead = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  cr_assert_eq(ordo_var_new(e, &dead), ORDO_OK);
  cr_assert_eq(ordo_var_delete(e, dead), ORDO_OK);
  cr_assert_eq(ordo_var_new(other, &foreign), ORDO_OK);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_count;
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(NULL, op_run, NULL, NULL, 0, &v, 1, &o, &p), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_new(e, NULL, NULL, NULL, 0, &v, 1, &o, &p), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, &v, 1, &o, NULL), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 1, &v, 1, &o, &p), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, &v, 1, NULL, 1, &o, &p), ORDO_ERR_INVALID_ARGUMENT);
  const ordo_var bad[] = {0, (ordo_var)0xdeadbeef12345678ull, foreign, dead};
  for (size_t i = 0; i < 4; i++) {
    ordo_var pair[2] = {v, bad[i]};
    cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, pair, 2, &o, &p), ORDO_ERR_INVALID_HANDLE,
                 "bad var %zu (mutable)", i);
    cr_assert_eq(ordo_opr_new(e, op_run, NULL, pair, 2, NULL, 0, &o, &p), ORDO_ERR_INVALID_HANDLE,
                 "bad var %zu (const)", i);
  }
  o.prop = 99;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, &v, 1, &o, &p), ORDO_ERR_INVALID_ARGUMENT);
  o.prop = ORDO_PROP_NORMAL;
  int dummy = 0;
  o.next = &dummy;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, &v, 1, &o, &p), ORDO_ERR_UNSUPPORTED);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(other), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(atomic_load(&g_runs), 0);
  cr_assert_eq(atomic_load(&g_freed), 0, "free_fn called for a failed opr_new");
}

Test(prepared, push_prepared_bad_handles) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_engine* other = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_opr mine = 0, foreign = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, NULL, 0, NULL, &mine), ORDO_OK);
  cr_assert_eq(ordo_opr_new(other, op_run, NULL, NULL, 0, NULL, 0, NULL, &foreign), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(NULL, mine, 0), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_push_prepared(e, 0, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_opr_push_prepared(e, (ordo_opr)0xdeadbeef12345678ull, 0),
               ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_opr_push_prepared(e, foreign, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_opr_delete(e, foreign), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_opr_delete(e, 0), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(ordo_opr_delete(NULL, mine), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_eq(ordo_opr_delete(e, mine), ORDO_OK);
  cr_assert_eq(ordo_opr_delete(other, foreign), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(other), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(prepared, push_prepared_after_shutdown) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_run, NULL, NULL, 0, NULL, 0, NULL, &p), ORDO_OK);
  cr_assert_eq(ordo_engine_retain(e), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(e, p, 0), ORDO_ERR_SHUTDOWN);
  cr_assert_eq(ordo_engine_release(e), ORDO_OK);
}

/* ---- priority and info ---- */

struct info_rec {
  atomic_int n;
  int32_t priority[8];
  int32_t prop[8];
  char name[8][64];
};

static int32_t op_info(ordo_exec* x, void* ud) {
  struct info_rec* r = ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  int i = atomic_load(&r->n);
  if (i < 8 && ordo_exec_get_info(x, &info) == ORDO_OK) {
    r->priority[i] = info.priority;
    r->prop[i] = info.prop;
    strncpy(r->name[i], info.name ? info.name : "<NULL>", 63);
  }
  atomic_store(&r->n, i + 1);
  return 0;
}

Test(prepared, priority_argument_visible_in_exec_info) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
  static struct info_rec r;
  memset(&r, 0, sizeof r);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.priority = 3;
  o.prop = ORDO_PROP_CPU_PRIORITIZED;
  o.name = "prepared-op";
  ordo_opr p = 0;
  /* Mutable v serializes the runs, so the record array is written by one op at a time. */
  cr_assert_eq(ordo_opr_new(e, op_info, &r, NULL, 0, &v, 1, &o, &p), ORDO_OK);
  const int32_t prios[] = {9, -4, 0, INT32_MAX};
  for (int i = 0; i < 4; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, prios[i]), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK);
  cr_assert_eq(atomic_load(&r.n), 4);
  for (int i = 0; i < 4; i++) {
    cr_assert_eq(r.priority[i], prios[i], "push %d: info.priority %d want %d", i,
                 (int)r.priority[i], (int)prios[i]);
    cr_assert_eq(r.prop[i], ORDO_PROP_CPU_PRIORITIZED);
    cr_assert_str_eq(r.name[i], "prepared-op");
  }
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

struct prio_log {
  atomic_int n;
  int32_t seen[64];
};

static int32_t op_prio_log(ordo_exec* x, void* ud) {
  struct prio_log* l = ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  int32_t pr = -999;
  if (ordo_exec_get_info(x, &info) == ORDO_OK) pr = info.priority;
  int i = atomic_fetch_add(&l->n, 1);
  if (i < 64) l->seen[i] = pr;
  return 0;
}

Test(prepared, push_prepared_priority_orders_ready_ops) {
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED, 1);
  struct blocker b;
  memset(&b, 0, sizeof b);
  cr_assert_eq(ordo_opr_push(e, op_block, &b, NULL, 0, NULL, 0, NULL), ORDO_OK);
  cr_assert(wait_flag(&b.started, 1, 5000));
  static struct prio_log l;
  memset(&l, 0, sizeof l);
  ordo_opr p = 0;
  cr_assert_eq(ordo_opr_new(e, op_prio_log, &l, NULL, 0, NULL, 0, NULL, &p), ORDO_OK);
  const int32_t prios[] = {1, 8, -2, 5, 3, 8, 0};
  for (int i = 0; i < 7; i++) cr_assert_eq(ordo_opr_push_prepared(e, p, prios[i]), ORDO_OK);
  atomic_store(&b.release, 1);
  cr_assert_eq(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&l.n), 7);
  const int32_t want[] = {8, 8, 5, 3, 1, 0, -2};
  for (int i = 0; i < 7; i++)
    cr_assert_eq(l.seen[i], want[i], "position %d ran priority %d, want %d", i, (int)l.seen[i],
                 (int)want[i]);
  cr_assert_eq(ordo_opr_delete(e, p), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* One prepared op pushed from several threads at once while another thread pushes plain ops on
 * the same vars listed the other way round. The prepared op's vars are a short list out of
 * address order, which pushes lock as listed and, when a lock is taken, in address order from a
 * private sorted copy: the prepared op's own list, read by every pushing thread, is never
 * changed. Every push must succeed, nothing may deadlock, and the writers of b never overlap. */
enum { kSharedPushers = 3, kSharedPushes = 2000 };

struct shared_push {
  ordo_engine* e;
  ordo_opr opr;       /* for the prepared pushers */
  ordo_var vars[3];   /* a, b, c: for the plain pusher */
  atomic_int* failed; /* the first push that did not return ORDO_OK */
  atomic_int* b_inside;
  atomic_int* b_overlap;
  atomic_int* ran;
};

static int32_t writes_b(ordo_exec* x, void* ud) {
  (void)x;
  struct shared_push* s = ud;
  if (atomic_fetch_add(s->b_inside, 1) != 0) atomic_store(s->b_overlap, 1);
  atomic_fetch_sub(s->b_inside, 1);
  atomic_fetch_add(s->ran, 1);
  return 0;
}

static void* push_prepared_many(void* arg) {
  struct shared_push* s = arg;
  for (int i = 0; i < kSharedPushes; ++i) {
    ordo_status st = ordo_opr_push_prepared(s->e, s->opr, 0);
    if (st != ORDO_OK) {
      atomic_store(s->failed, (int)st);
      break;
    }
  }
  return NULL;
}

static void* push_plain_reversed(void* arg) {
  struct shared_push* s = arg;
  ordo_var reads[2] = {s->vars[0], s->vars[2]}; /* a, c: the prepared op lists c, a */
  for (int i = 0; i < kSharedPushes; ++i) {
    ordo_status st = ordo_opr_push(s->e, writes_b, s, reads, 2, &s->vars[1], 1, NULL);
    if (st != ORDO_OK) {
      atomic_store(s->failed, (int)st);
      break;
    }
  }
  return NULL;
}

Test(prepared, one_prepared_op_pushed_from_several_threads_against_reversed_pushes) {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
  atomic_int failed, b_inside, b_overlap, ran;
  atomic_init(&failed, 0);
  atomic_init(&b_inside, 0);
  atomic_init(&b_overlap, 0);
  atomic_init(&ran, 0);
  struct shared_push s = {e, 0, {0, 0, 0}, &failed, &b_inside, &b_overlap, &ran};
  for (int i = 0; i < 3; ++i) cr_assert_eq(ordo_var_new(e, &s.vars[i]), ORDO_OK);
  ordo_var reads[2] = {s.vars[2], s.vars[0]}; /* c, a: out of creation (address) order */
  cr_assert_eq(ordo_opr_new(e, writes_b, &s, reads, 2, &s.vars[1], 1, NULL, &s.opr), ORDO_OK, "%s",
               ordo_last_error_message());
  pthread_t th[kSharedPushers + 1];
  for (int t = 0; t < kSharedPushers; ++t) {
    cr_assert_eq(pthread_create(&th[t], NULL, push_prepared_many, &s), 0);
  }
  cr_assert_eq(pthread_create(&th[kSharedPushers], NULL, push_plain_reversed, &s), 0);
  for (int t = 0; t <= kSharedPushers; ++t) pthread_join(th[t], NULL);
  cr_assert_eq(atomic_load(&failed), 0, "a push returned %s",
               ordo_status_string((ordo_status)atomic_load(&failed)));
  cr_assert_eq(ordo_wait_for_all_timeout(e, 20000000000ull), ORDO_OK, "deadlocked: %d ops ran",
               atomic_load(&ran));
  cr_assert_eq(atomic_load(&ran), (kSharedPushers + 1) * kSharedPushes);
  cr_assert_eq(atomic_load(&b_overlap), 0, "two writers of b ran at the same time");
  cr_assert_eq(ordo_opr_delete(e, s.opr), ORDO_OK);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* A prepared op's free_fn run by ordo_opr_delete is "inside an op" of its engine (the header's
 * rule for free_fns): releasing the last reference or destroying the engine from it is refused
 * with WOULD_DEADLOCK, and the engine stays usable. Both freed the engine under the delete. */
static ordo_engine* g_self_engine;
static int g_destroy_in_free_fn;
static atomic_int g_free_fn_status;

static void release_or_destroy_engine(void* ud) {
  (void)ud;
  ordo_status s = g_destroy_in_free_fn ? ordo_engine_destroy(g_self_engine)
                                       : ordo_engine_release(g_self_engine);
  atomic_store(&g_free_fn_status, s);
}

static void check_free_fn_cannot_drop_its_engine(int destroy) {
  g_self_engine = make_engine(ORDO_ENGINE_POOLED, 2);
  g_destroy_in_free_fn = destroy;
  atomic_store(&g_free_fn_status, -1);
  ordo_var v;
  cr_assert_eq(ordo_var_new(g_self_engine, &v), ORDO_OK);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = release_or_destroy_engine;
  ordo_opr p;
  cr_assert_eq(ordo_opr_new(g_self_engine, op_run, NULL, NULL, 0, &v, 1, &o, &p), ORDO_OK);
  cr_assert_eq(ordo_opr_push_prepared(g_self_engine, p, 0), ORDO_OK);
  cr_assert_eq(ordo_wait_for_all(g_self_engine), ORDO_OK);
  cr_assert_eq(ordo_opr_delete(g_self_engine, p), ORDO_OK); /* runs the free_fn here */
  cr_assert_eq(atomic_load(&g_free_fn_status), ORDO_ERR_WOULD_DEADLOCK, "%s from the free_fn: %s",
               destroy ? "destroy" : "release", ordo_status_string(atomic_load(&g_free_fn_status)));
  cr_assert_eq(ordo_opr_push(g_self_engine, op_run, NULL, NULL, 0, &v, 1, NULL), ORDO_OK,
               "the engine is still usable");
  cr_assert_eq(ordo_engine_destroy(g_self_engine), ORDO_OK);
}

Test(prepared, a_free_fn_run_by_delete_cannot_release_its_engine) {
  check_free_fn_cannot_drop_its_engine(0);
}

Test(prepared, a_free_fn_run_by_delete_cannot_destroy_its_engine) {
  check_free_fn_cannot_drop_its_engine(1);
}

/* The header documents the cap on prepared ops alive at once (262,144); the message names it, and
 * deleting one makes room again. */
static int32_t noop_fn(ordo_exec* x, void* ud) {
  (void)x, (void)ud;
  return 0;
}

Test(prepared, the_cap_on_prepared_ops_is_as_documented) {
  enum { kCap = 262144 };
  ordo_engine* e = make_engine(ORDO_ENGINE_NAIVE, 1);
  ordo_opr* all = malloc(sizeof *all * kCap);
  cr_assert_not_null(all);
  for (int i = 0; i < kCap; ++i) {
    ordo_status s = ordo_opr_new(e, noop_fn, NULL, NULL, 0, NULL, 0, NULL, &all[i]);
    cr_assert_eq(s, ORDO_OK, "prepared op %d: %s", i, ordo_last_error_message());
  }
  ordo_opr extra = 0;
  cr_assert_eq(ordo_opr_new(e, noop_fn, NULL, NULL, 0, NULL, 0, NULL, &extra), ORDO_ERR_NO_MEMORY);
  cr_assert_not_null(strstr(ordo_last_error_message(), "262144"), "message: %s",
                     ordo_last_error_message());
  cr_assert_eq(ordo_opr_delete(e, all[7]), ORDO_OK);
  cr_assert_eq(ordo_opr_new(e, noop_fn, NULL, NULL, 0, NULL, 0, NULL, &all[7]), ORDO_OK, "%s",
               ordo_last_error_message());
  for (int i = 0; i < kCap; ++i) cr_assert_eq(ordo_opr_delete(e, all[i]), ORDO_OK);
  free(all);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
