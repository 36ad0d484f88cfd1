/*
 * fork(): an engine created (and pushed to) in the parent is refused in the child with
 * ORDO_ERR_INVALID_STATE by every call that would need its threads, instead of accepting pushes
 * that never run; ordo_engine_destroy in the child returns at once (no drain, no join, no
 * caller code); an engine created in the child works; the parent's engine is unharmed.
 *
 * The child reports through a pipe (the number of failed checks, printed on stderr) and is
 * killed by SIGALRM if anything hangs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>

#include "test_util.h"

TestSuite(fork, .timeout = 60.0);

/* Under TSan (only ever on the shim, whose tests run on threads of their own), a forked child of
 * a multi-threaded process dies when it starts a thread (die_after_fork): the children here then
 * start no engine of their own. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

/* Runs fn(arg) in a forked child (killed by SIGALRM after 20 s) and returns what it returned,
 * sent through a pipe: -1 when it sent nothing, -100 - N when signal N ended it. The child's
 * exit status is not used under valgrind: --error-exitcode counts memory that only threads
 * left behind by the fork held (an engine's worker not yet started) as lost. */
static int run_forked(int (*fn)(void*), void* arg) {
  int fds[2];
  if (pipe(fds) != 0) return -2;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -3;
  if (pid == 0) {
    close(fds[0]);
    alarm(20);
    int result = fn(arg);
    ssize_t n = write(fds[1], &result, sizeof result);
    _exit(n == (ssize_t)sizeof result ? 0 : 1);
  }
  close(fds[1]);
  int result = -1;
  ssize_t n;
  while ((n = read(fds[0], &result, sizeof result)) < 0 && errno == EINTR) {
  }
  if (n != (ssize_t)sizeof result) result = -1;
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return -100 - WTERMSIG(status);
  if (!tu_under_valgrind() && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) return -4;
  return result;
}

/* Under ASan a thread allocates as it starts (ASan reads its stack bounds with
 * pthread_getattr_np, which callocs) under a lock of ASan's allocator, and GCC 12's ASan has no
 * fork handler: a fork while one of the engine's workers is still starting can hand the child
 * that lock held, and the child's first allocation of that size class hangs (seen once in
 * about 25 runs under load: the child's new workers stuck in
 * SizeClassAllocator64::GetFromAllocator). glibc's own malloc is fork-safe; this is the
 * sanitizer's. So a test forks only once each of its engine's `threads` workers is running an
 * op: they meet (each op waits, at most 10 s, until all have started). True when they met. */
typedef struct {
  atomic_int arrived;
  int want;
} meeting;

static int32_t meet(ordo_exec* x, void* ud) {
  (void)x;
  meeting* m = ud;
  atomic_fetch_add(&m->arrived, 1);
  tu_wait_ge(&m->arrived, m->want, 10000);
  return 0;
}

static int all_workers_started(ordo_engine* e, int threads) {
  meeting m;
  atomic_init(&m.arrived, 0);
  m.want = threads;
  ordo_var vars[8] = {0};
  for (int i = 0; i < threads && i < 8; ++i) {
    if (ordo_var_new(e, &vars[i]) != ORDO_OK) return 0;
    if (ordo_opr_push(e, meet, &m, NULL, 0, &vars[i], 1, NULL) != ORDO_OK) return 0;
  }
  for (int i = 0; i < threads && i < 8; ++i) {
    if (ordo_wait_for_var(e, vars[i]) != ORDO_OK || ordo_var_delete(e, vars[i]) != ORDO_OK) {
      return 0;
    }
  }
  return atomic_load(&m.arrived) == threads;
}

static int g_child_failures;

#define CHILD_CHECK(cond, ...)                                           \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "child: " __VA_ARGS__);                            \
      fprintf(stderr, " (last error: %s)\n", ordo_last_error_message()); \
      g_child_failures++;                                                \
    }                                                                    \
  } while (0)

#define CHILD_ST(expr, want)                                                        \
  do {                                                                              \
    ordo_status st_ = (expr);                                                       \
    CHILD_CHECK(st_ == (want), "%s -> %s, want %s", #expr, ordo_status_string(st_), \
                ordo_status_string(want));                                          \
  } while (0)

static atomic_int g_free_calls;

static void count_free(void* ud) {
  (void)ud;
  atomic_fetch_add(&g_free_calls, 1);
}

static void on_wait(void* ud, ordo_status status) {
  (void)status;
  atomic_fetch_add((atomic_int*)ud, 1);
}

/* The child: every call on the parent's engine is refused, destroy returns, and a new engine
 * works. */
typedef struct parent_state {
  ordo_engine* e;
  ordo_var v;
  ordo_opr prepared;
  ordo_completion parked;
  ordo_pipeline* pipeline;
} parent_state;

static int32_t stop_at_3(ordo_pipeflow* pf, void* ud) {
  (void)ud;
  return ordo_pipeflow_token(pf) == 3 ? ordo_pipeflow_stop(pf) : 0;
}

static int child_main(void* arg) {
  const parent_state* ps = arg;
  ordo_engine* e = ps->e;
  ordo_var v = ps->v;
  ordo_opr prepared = ps->prepared;
  ordo_completion parked = ps->parked;
  g_child_failures = 0;
  atomic_int ran;
  atomic_init(&ran, 0);
  ordo_var nv = 0;
  CHILD_ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, &v, 1, NULL), ORDO_ERR_INVALID_STATE);
  CHILD_CHECK(strstr(ordo_last_error_message(), "ordo_opr_push") &&
                  strstr(ordo_last_error_message(), "fork"),
              "message names the call and fork");
  CHILD_ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, NULL, 0, NULL), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_opr_push_prepared(e, prepared, 0), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_wait_for_var(e, v), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_wait_for_var_timeout(e, v, 0), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_wait_for_all(e), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_wait_for_all_timeout(e, TU_MS_NS(10)), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_wait_for_var_async(e, v, on_wait, &ran), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_var_new(e, &nv), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_var_delete(e, v), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_var_clear_error(e, v), ORDO_ERR_INVALID_STATE);
  int32_t code = 0;
  CHILD_ST(ordo_var_get_error(e, v, &code, NULL, 0), ORDO_ERR_INVALID_STATE);
  ordo_opr p2 = 0;
  CHILD_ST(ordo_opr_new(e, tu_count_fn, &ran, NULL, 0, &v, 1, NULL, &p2), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_opr_delete(e, prepared), ORDO_ERR_INVALID_STATE);
  ordo_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  CHILD_ST(ordo_engine_stats(e, &st), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_complete(parked, 0, NULL), ORDO_ERR_INVALID_STATE);
  /* A pipeline on the parent's engine: refused too; destroy only lets go of the handle. */
  uint64_t tokens = 0;
  CHILD_ST(ordo_pipeline_run(ps->pipeline), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_pipeline_push(ps->pipeline, NULL, 0, NULL, 0, NULL), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_pipeline_num_tokens(ps->pipeline, &tokens), ORDO_ERR_INVALID_STATE);
  CHILD_ST(ordo_pipeline_destroy(ps->pipeline), ORDO_OK);
  CHILD_ST(ordo_pipeline_destroy(ps->pipeline), ORDO_ERR_INVALID_HANDLE);
  /* Handle lifetime still works, and never drains or joins: */
  CHILD_ST(ordo_engine_retain(e), ORDO_OK);
  CHILD_ST(ordo_engine_release(e), ORDO_OK);
  uint64_t t0 = tu_now_ms();
  CHILD_ST(ordo_engine_destroy(e), ORDO_OK);
  CHILD_CHECK(tu_now_ms() - t0 < 1000, "destroy took %llu ms",
              (unsigned long long)(tu_now_ms() - t0));
  CHILD_ST(ordo_engine_destroy(e), ORDO_ERR_INVALID_HANDLE);
  CHILD_ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, NULL, 0, NULL), ORDO_ERR_INVALID_HANDLE);
  CHILD_CHECK(atomic_load(&ran) == 0, "a parent op ran in the child");
  CHILD_CHECK(atomic_load(&g_free_calls) == 0, "a parent free_fn ran in the child");
  /* An engine of the child's own (naive under TSan: no thread). */
  ordo_engine* mine = NULL;
  CHILD_ST(tu_engine_create(UNDER_TSAN ? ORDO_ENGINE_NAIVE : ORDO_ENGINE_POOLED, 2, &mine),
           ORDO_OK);
  if (mine) {
    ordo_var w = 0;
    CHILD_ST(ordo_var_new(mine, &w), ORDO_OK);
    for (int i = 0; i < 100; ++i) {
      CHILD_ST(ordo_opr_push(mine, tu_count_fn, &ran, NULL, 0, &w, 1, NULL), ORDO_OK);
    }
    CHILD_ST(ordo_wait_for_var(mine, w), ORDO_OK);
    CHILD_CHECK(atomic_load(&ran) == 100, "the child's engine ran %d of 100", atomic_load(&ran));
    CHILD_ST(ordo_engine_destroy(mine), ORDO_OK);
  }
  return g_child_failures;
}

static void fork_with_pending_work(int32_t kind) {
  ordo_engine* e = NULL;
  TU_ASSERT_ST(tu_engine_create(kind, 2, &e), ORDO_OK, tu_kind_name(kind));
  cr_assert(all_workers_started(e, kind == ORDO_ENGINE_NAIVE ? 0 : 2),
            "%s: the 2 workers did not all start", tu_kind_name(kind));
  ordo_var v = 0, u = 0;
  TU_ASSERT_ST(ordo_var_new(e, &v), ORDO_OK, "var");
  TU_ASSERT_ST(ordo_var_new(e, &u), ORDO_OK, "var");
  atomic_int ran;
  atomic_init(&ran, 0);
  atomic_init(&g_free_calls, 0);
  /* Work in flight at the fork: a deferred op parked on u (its completion is handed to the
   * child), and ops queued behind it. */
  tu_deferred d;
  tu_deferred_init(&d);
  TU_ASSERT_ST(ordo_opr_push(e, tu_defer_fn, &d, NULL, 0, &u, 1, NULL), ORDO_OK, "defer");
  ordo_completion parked = tu_deferred_wait(&d, 5000);
  cr_assert_neq(parked, 0);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = count_free;
  for (int i = 0; i < 10; ++i) {
    TU_ASSERT_ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, &u, 1, &o), ORDO_OK, "push");
  }
  for (int i = 0; i < 10; ++i) {
    TU_ASSERT_ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, &v, 1, NULL), ORDO_OK, "push");
  }
  ordo_opr prepared = 0;
  TU_ASSERT_ST(ordo_opr_new(e, tu_count_fn, &ran, NULL, 0, &v, 1, NULL, &prepared), ORDO_OK,
               "prepared");
  ordo_pipe pipes[1] = {{ORDO_PIPE_SERIAL, stop_at_3, NULL}};
  ordo_pipeline* pipeline = NULL;
  TU_ASSERT_ST(ordo_pipeline_create(e, 2, pipes, 1, &pipeline), ORDO_OK, "pipeline");
  parent_state ps = {e, v, prepared, parked, pipeline};
  int failures = run_forked(child_main, &ps);
  cr_assert(failures != -1 && failures > -100, "%s: the child %s", tu_kind_name(kind),
            failures == -100 - SIGALRM ? "hung" : "crashed or exited early");
  cr_assert_eq(failures, 0, "%s: %d checks failed in the child", tu_kind_name(kind), failures);
  /* The parent's engine is unharmed. */
  TU_ASSERT_ST(ordo_complete(parked, 0, NULL), ORDO_OK, "complete");
  TU_ASSERT_ST(ordo_opr_push_prepared(e, prepared, 0), ORDO_OK, "prepared");
  TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_assert_eq(atomic_load(&ran), 21);
  cr_assert_eq(atomic_load(&g_free_calls), 10);
  TU_ASSERT_ST(ordo_opr_delete(e, prepared), ORDO_OK, "delete");
  TU_ASSERT_ST(ordo_pipeline_run(pipeline), ORDO_OK, "pipeline run");
  TU_ASSERT_ST(ordo_pipeline_destroy(pipeline), ORDO_OK, "pipeline destroy");
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}

Test(fork, parent_engine_refused_in_child_pooled) {
  fork_with_pending_work(ORDO_ENGINE_POOLED);
}

Test(fork, parent_engine_refused_in_child_per_device) {
  fork_with_pending_work(ORDO_ENGINE_PER_DEVICE);
}

Test(fork, parent_engine_refused_in_child_naive) {
  fork_with_pending_work(ORDO_ENGINE_NAIVE);
}

/* A grandchild: engines of the child are refused there too, the grandchild's own work. */
static ordo_engine* g_child_engine;

static int grandchild_main(void* arg) {
  (void)arg;
  ordo_var w = 0;
  if (ordo_var_new(g_child_engine, &w) != ORDO_ERR_INVALID_STATE) return 1;
  if (ordo_engine_destroy(g_child_engine) != ORDO_OK) return 2;
  ordo_engine* mine = NULL;
  if (tu_engine_create(ORDO_ENGINE_NAIVE, 0, &mine) != ORDO_OK) return 3;
  if (ordo_var_new(mine, &w) != ORDO_OK) return 4;
  if (ordo_engine_destroy(mine) != ORDO_OK) return 5;
  return 0;
}

static int fork_child_main(void* arg) {
  (void)arg;
  if (tu_engine_create(ORDO_ENGINE_POOLED, 1, &g_child_engine) != ORDO_OK) return 10;
  if (!all_workers_started(g_child_engine, 1)) return 12;
  ordo_var v = 0;
  if (ordo_var_new(g_child_engine, &v) != ORDO_OK) return 11;
  int g = run_forked(grandchild_main, NULL);
  if (g != 0) return 20 + (g < 0 ? 0 : g);
  if (ordo_var_new(g_child_engine, &v) != ORDO_OK) return 13;
  if (ordo_engine_destroy(g_child_engine) != ORDO_OK) return 14;
  return 0;
}

Test(fork, grandchild) {
  if (UNDER_TSAN) cr_skip_test("under TSan, a forked child may start no thread");
  int r = run_forked(fork_child_main, NULL);
  cr_assert_eq(r, 0, "child: %d (20 + N: the grandchild's check N failed)", r);
}
