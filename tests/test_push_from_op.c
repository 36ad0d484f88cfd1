/*
 * §2.6: an op may push further ops from inside its callback. Children on the parent's own vars
 * run after the parent completes; recursive chains and trees of pushes all run; and
 * ordo_wait_for_all from outside sees every child.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(push_from_op, .timeout = 30.0);

/* ------------------------------------------------------------------------------------------- */
/* A parent pushes a child on a var it mutates (or reads); the child runs after the parent.     */
/* ------------------------------------------------------------------------------------------- */

typedef struct pc_ctx {
  ordo_engine* e;
  ordo_var v;
  int child_mode;         /* 0: child mutates v, 1: child reads v */
  atomic_int parent_done; /* set just before the parent returns */
  atomic_int child_ran;
  atomic_int child_saw_parent_done;
  atomic_int push_status; /* status of the push made inside the parent */
} pc_ctx;

static int32_t pc_child(ordo_exec* exec, void* ud) {
  (void)exec;
  pc_ctx* c = ud;
  if (atomic_load(&c->parent_done) == 1) atomic_fetch_add(&c->child_saw_parent_done, 1);
  atomic_fetch_add(&c->child_ran, 1);
  return 0;
}

static int32_t pc_parent(ordo_exec* exec, void* ud) {
  (void)exec;
  pc_ctx* c = ud;
  ordo_status s = c->child_mode == 0 ? ordo_opr_push(c->e, pc_child, c, NULL, 0, &c->v, 1, NULL)
                                     : ordo_opr_push(c->e, pc_child, c, &c->v, 1, NULL, 0, NULL);
  atomic_store(&c->push_status, s);
  tu_sleep_ms(30); /* give a wrongly scheduled child time to start */
  atomic_store(&c->parent_done, 1);
  return 0;
}

static void run_parent_child(int32_t kind, int parent_mutates, int child_mode) {
  ordo_engine* e = make_engine(kind);
  pc_ctx c;
  memset(&c, 0, sizeof c);
  c.e = e;
  c.v = new_var(e);
  c.child_mode = child_mode;
  atomic_store(&c.push_status, -1);
  if (parent_mutates) {
    ST(ordo_opr_push(e, pc_parent, &c, NULL, 0, &c.v, 1, NULL), ORDO_OK);
  } else {
    ST(ordo_opr_push(e, pc_parent, &c, &c.v, 1, NULL, 0, NULL), ORDO_OK);
  }
  ST(ordo_wait_for_all(e), ORDO_OK);
  cr_assert_eq(atomic_load(&c.push_status), ORDO_OK, "%s: push from inside an op returned %s",
               tu_kind_name(kind), ordo_status_string(atomic_load(&c.push_status)));
  cr_assert_eq(atomic_load(&c.child_ran), 1,
               "%s: wait_for_all returned before the child pushed by an op had run",
               tu_kind_name(kind));
  cr_assert_eq(atomic_load(&c.child_saw_parent_done), 1,
               "%s: child (%s v) started before its parent (%s v) completed", tu_kind_name(kind),
               child_mode == 0 ? "mutating" : "reading", parent_mutates ? "mutating" : "reading");
  ST(ordo_wait_for_var(e, c.v), ORDO_OK);
  destroy_engine(e);
}

Test(push_from_op, child_on_var_the_parent_mutates_runs_after_parent) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    run_parent_child(tu_all_kinds[k], 1, 0); /* parent writes v, child writes v */
    run_parent_child(tu_all_kinds[k], 1, 1); /* parent writes v, child reads v */
  }
}

Test(push_from_op, child_mutating_a_var_the_parent_reads_runs_after_parent) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) run_parent_child(tu_all_kinds[k], 0, 0);
}

/* A child on an unrelated var runs while the parent is still running (threaded engines). */
typedef struct ind_ctx {
  ordo_engine* e;
  ordo_var w;
  atomic_int child_started;
  atomic_int parent_saw_child;
  atomic_int push_status;
} ind_ctx;

static int32_t ind_child(ordo_exec* exec, void* ud) {
  (void)exec;
  atomic_store(&((ind_ctx*)ud)->child_started, 1);
  return 0;
}

static int32_t ind_parent(ordo_exec* exec, void* ud) {
  (void)exec;
  ind_ctx* c = ud;
  atomic_store(&c->push_status, ordo_opr_push(c->e, ind_child, c, NULL, 0, &c->w, 1, NULL));
  if (tu_wait_eq(&c->child_started, 1, 5000)) atomic_store(&c->parent_saw_child, 1);
  return 0;
}

Test(push_from_op, child_on_independent_var_runs_while_parent_runs) {
  for (int k = 0; k < TU_NUM_THREADED_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_threaded_kinds[k]);
    ind_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.w = new_var(e);
    ordo_var v = new_var(e);
    ST(ordo_opr_push(e, ind_parent, &c, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&c.push_status), ORDO_OK, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.child_started), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.parent_saw_child), 1,
                 "%s: an independent child did not run until its parent returned",
                 tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Recursive chains: each op pushes the next one, depth N.                                     */
/* ------------------------------------------------------------------------------------------- */

enum { CHAIN_MAX = 1000 };

typedef struct chain_ctx {
  ordo_engine* e;
  ordo_var v;
  int use_var;
  int depth;
  atomic_int next;
  atomic_int push_fail;
  int log[CHAIN_MAX];
} chain_ctx;

static chain_ctx* g_chain;

static int32_t chain_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  chain_ctx* c = g_chain;
  int level = (int)(uintptr_t)ud;
  int pos = atomic_fetch_add(&c->next, 1);
  if (pos < CHAIN_MAX) c->log[pos] = level;
  if (level + 1 < c->depth) {
    void* child = (void*)(uintptr_t)(level + 1);
    ordo_status s = c->use_var ? ordo_opr_push(c->e, chain_fn, child, NULL, 0, &c->v, 1, NULL)
                               : ordo_opr_push(c->e, chain_fn, child, NULL, 0, NULL, 0, NULL);
    if (s != ORDO_OK) tu_record_first(&c->push_fail, 0, s);
  }
  return 0;
}

Test(push_from_op, recursive_chains_run_completely_and_in_order) {
  static const int depths[] = {1, 10, CHAIN_MAX};
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    for (int d = 0; d < 3; ++d) {
      for (int use_var = 0; use_var < 2; ++use_var) {
        ordo_engine* e = make_engine(tu_all_kinds[k]);
        chain_ctx* c = calloc(1, sizeof *c);
        cr_assert_not_null(c);
        c->e = e;
        c->v = new_var(e);
        c->use_var = use_var;
        c->depth = depths[d];
        g_chain = c;
        ST(ordo_opr_push(e, chain_fn, (void*)(uintptr_t)0, NULL, 0, use_var ? &c->v : NULL,
                         use_var ? 1u : 0u, NULL),
           ORDO_OK);
        ST(ordo_wait_for_all(e), ORDO_OK);
        cr_assert_eq(atomic_load(&c->push_fail), 0, "%s: a push inside the chain failed: %s",
                     tu_kind_name(g_kind), ordo_status_string(atomic_load(&c->push_fail)));
        cr_assert_eq(atomic_load(&c->next), depths[d],
                     "%s: chain of depth %d (%s): wait_for_all returned after %d ops",
                     tu_kind_name(g_kind), depths[d], use_var ? "on a var" : "no vars",
                     atomic_load(&c->next));
        for (int i = 0; i < depths[d]; ++i) {
          cr_assert_eq(c->log[i], i, "%s: chain level %d ran at position %d", tu_kind_name(g_kind),
                       c->log[i], i);
        }
        if (use_var) ST(ordo_wait_for_var(e, c->v), ORDO_OK);
        destroy_engine(e);
        g_chain = NULL;
        free(c);
      }
    }
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Trees of pushes: each op pushes two children until depth 10 (2047 ops).                     */
/* ------------------------------------------------------------------------------------------- */

typedef struct tree_ctx {
  ordo_engine* e;
  ordo_var v;
  int mode; /* 0: no vars, 1: every op mutates v, 2: every op reads v */
  atomic_int ran;
  atomic_int inside;
  atomic_int overlap;
  atomic_int push_fail;
} tree_ctx;

static tree_ctx* g_tree;
enum { TREE_DEPTH = 10 };

static int32_t tree_fn(ordo_exec* exec, void* ud);

static ordo_status tree_push_child(tree_ctx* c, int level) {
  void* ud = (void*)(uintptr_t)level;
  switch (c->mode) {
    case 1:
      return ordo_opr_push(c->e, tree_fn, ud, NULL, 0, &c->v, 1, NULL);
    case 2:
      return ordo_opr_push(c->e, tree_fn, ud, &c->v, 1, NULL, 0, NULL);
    default:
      return ordo_opr_push(c->e, tree_fn, ud, NULL, 0, NULL, 0, NULL);
  }
}

static int32_t tree_fn(ordo_exec* exec, void* ud) {
  (void)exec;
  tree_ctx* c = g_tree;
  int level = (int)(uintptr_t)ud;
  int in = atomic_fetch_add(&c->inside, 1) + 1;
  if (c->mode == 1 && in != 1) atomic_fetch_add(&c->overlap, 1);
  if (level + 1 < TREE_DEPTH) {
    for (int i = 0; i < 2; ++i) {
      ordo_status s = tree_push_child(c, level + 1);
      if (s != ORDO_OK) tu_record_first(&c->push_fail, 0, s);
    }
  }
  atomic_fetch_sub(&c->inside, 1);
  atomic_fetch_add(&c->ran, 1);
  return 0;
}

Test(push_from_op, trees_of_pushes_are_all_seen_by_wait_for_all) {
  const int total = (1 << TREE_DEPTH) - 1;
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    for (int mode = 0; mode < 3; ++mode) {
      ordo_engine* e = make_engine(tu_all_kinds[k]);
      tree_ctx c;
      memset(&c, 0, sizeof c);
      c.e = e;
      c.v = new_var(e);
      c.mode = mode;
      g_tree = &c;
      ST(tree_push_child(&c, 0), ORDO_OK);
      ST(ordo_wait_for_all(e), ORDO_OK);
      cr_assert_eq(atomic_load(&c.push_fail), 0, "%s mode %d: %s", tu_kind_name(g_kind), mode,
                   ordo_status_string(atomic_load(&c.push_fail)));
      cr_assert_eq(atomic_load(&c.ran), total, "%s mode %d: wait_for_all saw %d of %d ops",
                   tu_kind_name(g_kind), mode, atomic_load(&c.ran), total);
      cr_assert_eq(atomic_load(&c.overlap), 0, "%s: writers of one var overlapped",
                   tu_kind_name(g_kind));
      destroy_engine(e);
      g_tree = NULL;
    }
  }
}

/* ------------------------------------------------------------------------------------------- */
/* wait_for_all from outside while the parent has not pushed its children yet.                 */
/* ------------------------------------------------------------------------------------------- */

typedef struct late_ctx {
  ordo_engine* e;
  int waiter_tid;        /* the test thread, which calls ordo_wait_for_all next (0: naive) */
  atomic_int saw_waiter; /* the parent saw it asleep in that wait before pushing */
  atomic_int children_ran;
  atomic_int push_fail;
} late_ctx;

static int32_t late_child(ordo_exec* exec, void* ud) {
  (void)exec;
  late_ctx* c = ud;
  tu_sleep_us(200);
  atomic_fetch_add(&c->children_ran, 1);
  return 0;
}

/* Pushes its children only once the test thread sleeps in ordo_wait_for_all (a 30 ms sleep made
 * that likely; a test thread that came later found the children pushed, and checked less). The
 * naive kind runs the parent inside its push: nothing to wait for there. */
static int32_t late_parent(ordo_exec* exec, void* ud) {
  (void)exec;
  late_ctx* c = ud;
  if (c->waiter_tid) {
    atomic_store(&c->saw_waiter, tu_wait_thread_parked(c->waiter_tid, SYS_futex, -1, 5000));
  }
  for (int i = 0; i < 50; ++i) {
    ordo_status s = ordo_opr_push(c->e, late_child, c, NULL, 0, NULL, 0, NULL);
    if (s != ORDO_OK) tu_record_first(&c->push_fail, 0, s);
  }
  return 0;
}

Test(push_from_op, wait_for_all_sees_children_pushed_late) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    late_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    const bool naive = tu_all_kinds[k] == ORDO_ENGINE_NAIVE;
    c.waiter_tid = naive ? 0 : tu_gettid();
    ordo_var v = new_var(e);
    ST(ordo_opr_push(e, late_parent, &c, NULL, 0, &v, 1, NULL), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&c.push_fail), 0, "%s", tu_kind_name(g_kind));
    cr_assert(naive || atomic_load(&c.saw_waiter),
              "%s: the parent did not see ordo_wait_for_all asleep before pushing its children",
              tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.children_ran), 50,
                 "%s: wait_for_all returned with %d of 50 children done", tu_kind_name(g_kind),
                 atomic_load(&c.children_ran));
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* A deferred parent pushes a child on its own var: the child waits for ordo_complete.          */
/* ------------------------------------------------------------------------------------------- */

typedef struct dp_ctx {
  ordo_engine* e;
  ordo_var v;
  _Atomic uint64_t completion;
  atomic_int completed;
  atomic_int child_ran;
  atomic_int child_saw_completed;
  atomic_int push_status;
} dp_ctx;

static int32_t dp_child(ordo_exec* exec, void* ud) {
  (void)exec;
  dp_ctx* c = ud;
  if (atomic_load(&c->completed)) atomic_store(&c->child_saw_completed, 1);
  atomic_fetch_add(&c->child_ran, 1);
  return 0;
}

static int32_t dp_parent(ordo_exec* exec, void* ud) {
  dp_ctx* c = ud;
  ordo_completion h = 0;
  if (ordo_exec_defer(exec, &h) != ORDO_OK) return 1;
  atomic_store(&c->push_status, ordo_opr_push(c->e, dp_child, c, NULL, 0, &c->v, 1, NULL));
  atomic_store(&c->completion, h);
  return 0;
}

Test(push_from_op, child_of_deferred_parent_waits_for_completion) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    dp_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.v = new_var(e);
    atomic_store(&c.push_status, -1);
    ST(ordo_opr_push(e, dp_parent, &c, NULL, 0, &c.v, 1, NULL), ORDO_OK);
    uint64_t deadline = tu_now_ms() + 5000;
    while (atomic_load(&c.completion) == 0 && tu_now_ms() < deadline) tu_sleep_us(100);
    ordo_completion h = atomic_load(&c.completion);
    cr_assert_neq(h, 0, "%s: parent never deferred", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.push_status), ORDO_OK, "%s", tu_kind_name(g_kind));
    tu_sleep_ms(30);
    cr_assert_eq(atomic_load(&c.child_ran), 0,
                 "%s: child ran while its deferred parent was not completed", tu_kind_name(g_kind));
    atomic_store(&c.completed, 1);
    ST(ordo_complete(h, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&c.child_ran), 1, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.child_saw_completed), 1, "%s", tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* ------------------------------------------------------------------------------------------- */
/* Pushes from inside an op report errors like pushes from outside.                            */
/* ------------------------------------------------------------------------------------------- */

typedef struct bad_ctx {
  ordo_engine* e;
  ordo_var deleted;
  atomic_int st_zero;
  atomic_int st_deleted;
  atomic_int st_null_fn;
  atomic_int free_calls;
  atomic_int child_ran;
} bad_ctx;

static void bad_free(void* ud) {
  atomic_fetch_add(&((bad_ctx*)ud)->free_calls, 1);
}

static int32_t bad_child(ordo_exec* exec, void* ud) {
  (void)exec;
  atomic_fetch_add(&((bad_ctx*)ud)->child_ran, 1);
  return 0;
}

static int32_t bad_parent(ordo_exec* exec, void* ud) {
  (void)exec;
  bad_ctx* c = ud;
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = bad_free;
  ordo_var zero = 0;
  atomic_store(&c->st_zero, ordo_opr_push(c->e, bad_child, c, NULL, 0, &zero, 1, &o));
  atomic_store(&c->st_deleted, ordo_opr_push(c->e, bad_child, c, &c->deleted, 1, NULL, 0, &o));
  atomic_store(&c->st_null_fn, ordo_opr_push(c->e, NULL, c, NULL, 0, NULL, 0, &o));
  return 0;
}

Test(push_from_op, failed_pushes_inside_an_op_push_nothing) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    ordo_engine* e = make_engine(tu_all_kinds[k]);
    bad_ctx c;
    memset(&c, 0, sizeof c);
    c.e = e;
    c.deleted = new_var(e);
    ST(ordo_var_delete(e, c.deleted), ORDO_OK);
    ST(ordo_opr_push(e, bad_parent, &c, NULL, 0, NULL, 0, NULL), ORDO_OK);
    ST(ordo_wait_for_all(e), ORDO_OK);
    cr_assert_eq(atomic_load(&c.st_zero), ORDO_ERR_INVALID_HANDLE, "%s: var 0 -> %s",
                 tu_kind_name(g_kind), ordo_status_string(atomic_load(&c.st_zero)));
    cr_assert_eq(atomic_load(&c.st_deleted), ORDO_ERR_INVALID_HANDLE, "%s: deleted var -> %s",
                 tu_kind_name(g_kind), ordo_status_string(atomic_load(&c.st_deleted)));
    cr_assert_eq(atomic_load(&c.st_null_fn), ORDO_ERR_INVALID_ARGUMENT, "%s: NULL fn -> %s",
                 tu_kind_name(g_kind), ordo_status_string(atomic_load(&c.st_null_fn)));
    cr_assert_eq(atomic_load(&c.child_ran), 0, "%s", tu_kind_name(g_kind));
    cr_assert_eq(atomic_load(&c.free_calls), 0, "%s: free_fn ran for a failed push",
                 tu_kind_name(g_kind));
    destroy_engine(e);
  }
}

/* The header's promise for inline ops (naive engine, ORDO_PROP_ASYNC): an inline op pushed from
 * inside an inline op of the same engine runs right after the outer op returns, not inside its
 * push, and before the outermost push returns. */
typedef struct {
  ordo_engine* e;
  int32_t prop;
  atomic_int inner_ran;
  atomic_int inner_ran_before_push_returned;
} inline_ctx;

static int32_t inner_inline(ordo_exec* x, void* ud) {
  (void)x;
  atomic_store(&((inline_ctx*)ud)->inner_ran, 1);
  return 0;
}

static int32_t outer_inline(ordo_exec* x, void* ud) {
  (void)x;
  inline_ctx* c = ud;
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.prop = c->prop;
  if (ordo_opr_push(c->e, inner_inline, c, NULL, 0, NULL, 0, &o) == ORDO_OK) {
    atomic_store(&c->inner_ran_before_push_returned, atomic_load(&c->inner_ran));
  }
  return 0;
}

Test(push_from_op, an_inline_op_pushed_from_an_inline_op_runs_after_it) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    inline_ctx c = {.prop = ORDO_PROP_ASYNC};
    atomic_init(&c.inner_ran, 0);
    atomic_init(&c.inner_ran_before_push_returned, -1);
    cr_assert_eq(tu_engine_create(tu_all_kinds[k], 2, &c.e), ORDO_OK);
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.prop = ORDO_PROP_ASYNC;
    cr_assert_eq(ordo_opr_push(c.e, outer_inline, &c, NULL, 0, NULL, 0, &o), ORDO_OK);
    cr_assert_eq(atomic_load(&c.inner_ran_before_push_returned), 0, "%s: inside the inner push",
                 tu_kind_name(tu_all_kinds[k]));
    cr_assert_eq(atomic_load(&c.inner_ran), 1, "%s: not before the outer push returned",
                 tu_kind_name(tu_all_kinds[k]));
    cr_assert_eq(ordo_engine_destroy(c.e), ORDO_OK);
  }
}
