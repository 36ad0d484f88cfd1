/*
 * fork(): an engine created (and pushed to) in the parent is refused in the child with
 * ORDO_ERR_INVALID_STATE by every call that would need its threads, instead of accepting pushes
 * that never run; ordo_engine_destroy in the child returns at once (no drain, no join, no
 * caller code); an engine created in the child works; the parent's engine is unharmed.
 *
 * The child reports through its exit status (the number of failed checks, printed on stderr)
 * and is killed by SIGALRM if anything hangs.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>

#include "test_util.h"

TestSuite(fork, .timeout = 60.0);

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
static int child_main(ordo_engine* e, ordo_var v, ordo_opr prepared, ordo_completion parked) {
  alarm(20);
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
  /* An engine of the child's own. */
  ordo_engine* mine = NULL;
  CHILD_ST(tu_engine_create(ORDO_ENGINE_POOLED, 2, &mine), ORDO_OK);
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
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) _exit(child_main(e, v, prepared, parked));
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status), "%s: the child did not exit (signal %d: %s)", tu_kind_name(kind),
            WIFSIGNALED(status) ? WTERMSIG(status) : 0,
            WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? "it hung" : "it crashed");
  cr_assert_eq(WEXITSTATUS(status), 0, "%s: %d checks failed in the child", tu_kind_name(kind),
               WEXITSTATUS(status));
  /* The parent's engine is unharmed. */
  TU_ASSERT_ST(ordo_complete(parked, 0, NULL), ORDO_OK, "complete");
  TU_ASSERT_ST(ordo_opr_push_prepared(e, prepared, 0), ORDO_OK, "prepared");
  TU_ASSERT_ST(ordo_wait_for_all(e), ORDO_OK, "wait");
  cr_assert_eq(atomic_load(&ran), 21);
  cr_assert_eq(atomic_load(&g_free_calls), 10);
  TU_ASSERT_ST(ordo_opr_delete(e, prepared), ORDO_OK, "delete");
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
Test(fork, grandchild) {
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    alarm(20);
    ordo_engine* e = NULL;
    if (tu_engine_create(ORDO_ENGINE_POOLED, 1, &e) != ORDO_OK) _exit(10);
    ordo_var v = 0;
    if (ordo_var_new(e, &v) != ORDO_OK) _exit(11);
    pid_t g = fork();
    if (g == 0) {
      ordo_var w = 0;
      if (ordo_var_new(e, &w) != ORDO_ERR_INVALID_STATE) _exit(1);
      if (ordo_engine_destroy(e) != ORDO_OK) _exit(2);
      ordo_engine* mine = NULL;
      if (tu_engine_create(ORDO_ENGINE_NAIVE, 0, &mine) != ORDO_OK) _exit(3);
      if (ordo_var_new(mine, &w) != ORDO_OK) _exit(4);
      if (ordo_engine_destroy(mine) != ORDO_OK) _exit(5);
      _exit(0);
    }
    int status = 0;
    if (waitpid(g, &status, 0) != g || !WIFEXITED(status)) _exit(12);
    if (WEXITSTATUS(status) != 0) _exit(20 + WEXITSTATUS(status));
    if (ordo_var_new(e, &v) != ORDO_OK) _exit(13);
    if (ordo_engine_destroy(e) != ORDO_OK) _exit(14);
    _exit(0);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status), "signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  cr_assert_eq(WEXITSTATUS(status), 0);
}
