/*
 * Error paths the other files leave out (issue #21): ORDO_ERR_NO_MEMORY at the var cap and when
 * worker threads cannot be made, ORDO_ERR_INVALID_HANDLE through the pointer of a freed engine,
 * and a timed wait on a var that another thread deletes while the wait is in progress. Each
 * checks the status and that ordo_last_error_message() names the call and is readable text.
 *
 * Callbacks and forked children never assert: they record, and the test thread asserts.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_engine_helpers.h"
#include "test_util.h"

TestSuite(error_paths, .timeout = 30.0);

/* Under TSan (only ever on the shim, whose tests run on threads of their own), a forked child of
 * the multi-threaded process dies when it starts a thread (die_after_fork), and TSan's shadow of
 * a var table filled to the cap takes 14 GiB. */
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

/* What a failed call left in msg (copied on the thread that made it) must be: the call's name
 * and a colon first (the header's convention; `call` ordo_wait_for_var stands for the _timeout
 * variant too, whose messages may start either way), then text: no control characters, and
 * shorter than the buffer. */
static void check_message_text(const char* msg, size_t len, const char* call, const char* ctx) {
  cr_assert_gt(len, 0u, "%s: %s left no message", ctx, call);
  cr_assert_lt(len, 1000u, "%s: %s left a message of %zu bytes", ctx, call, len);
  cr_assert_eq(strlen(msg), len, "%s: %s: the message has a NUL inside", ctx, call);
  size_t n = strlen(call);
  cr_assert_eq(strncmp(msg, call, n), 0,
               "%s: the message of %s does not start with its name: \"%s\"", ctx, call, msg);
  if (strcmp(call, "ordo_wait_for_var") == 0 && strncmp(msg + n, "_timeout:", 9) == 0) n += 8;
  cr_assert_eq(msg[n], ':', "%s: the message of %s does not start with its name: \"%s\"", ctx, call,
               msg);
  cr_assert_gt(len, n + 2, "%s: %s: the message says nothing after the name: \"%s\"", ctx, call,
               msg);
  for (size_t i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)msg[i];
    cr_assert(c >= 0x20 && c != 0x7f, "%s: %s: byte %zu of the message is 0x%02x: \"%s\"", ctx,
              call, i, c, msg);
  }
}

/* The calling thread's last error message, checked as above. */
static void check_message(const char* call, const char* ctx) {
  char msg[1024];
  size_t len = ordo_last_error_copy(msg, sizeof msg);
  cr_assert_str_eq(ordo_last_error_message(), msg, "%s: %s", ctx, call);
  check_message_text(msg, len, call, ctx);
}

/* expr must fail with `want`, and leave a readable message that names `call`. */
#define EXPECT_ERR(expr, want, call, ctx) \
  do {                                    \
    TU_ASSERT_ST(expr, want, ctx);        \
    check_message(call, ctx);             \
  } while (0)

/* ------------------------------------------------------------------------------------------- */
/* NO_MEMORY at the var cap.                                                                   */
/* ------------------------------------------------------------------------------------------- */

/* VarTable::kMaxVars (src/core/var_table.h), as the header states it for ordo_var_new. */
enum { kVarCap = 16777216 };

/* Fills one engine with vars until ordo_var_new refuses: exactly kVarCap succeed, then
 * NO_MEMORY, again and again; ops on the vars still run; a deleted var makes room for one more.
 * About 2 s and 2 GiB (128-byte var slots) on the 2-core machine the suite was written on. */
Test(error_paths, var_new_at_the_var_cap_is_no_memory, .timeout = 60.0) {
  if (UNDER_TSAN) {
    cr_skip_test("under TSan, 16,777,216 vars took 40 s and 14 GiB (shadow memory)");
  }
  ordo_engine* e = make_engine(ORDO_ENGINE_POOLED);
  ordo_var first = 0, last = 0, v = 0;
  uint32_t made = 0;
  ordo_status s;
  while ((s = ordo_var_new(e, &v)) == ORDO_OK) {
    if (made == 0) first = v;
    last = v;
    if (++made > kVarCap) break;
  }
  cr_assert_eq(made, kVarCap, "ordo_var_new succeeded %u times, the cap is %u", made,
               (unsigned)kVarCap);
  TU_ASSERT_ST(s, ORDO_ERR_NO_MEMORY, "at the cap");
  check_message("ordo_var_new", "at the cap");
  EXPECT_ERR(ordo_var_new(e, &v), ORDO_ERR_NO_MEMORY, "ordo_var_new", "at the cap, again");

  /* The engine still works at the cap. */
  atomic_int ran;
  atomic_init(&ran, 0);
  ordo_var both[2] = {first, last};
  ST(ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, both, 2, NULL), ORDO_OK);
  ST(ordo_wait_for_var(e, last), ORDO_OK);
  cr_assert_eq(atomic_load(&ran), 1);

  /* A var deleted (with nothing pending on it) makes room for exactly one. */
  ST(ordo_wait_for_all(e), ORDO_OK);
  ST(ordo_var_delete(e, first), ORDO_OK);
  ordo_var again = 0;
  ST(ordo_var_new(e, &again), ORDO_OK);
  cr_assert_neq(again, first, "a deleted var's handle was handed out again");
  EXPECT_ERR(ordo_var_new(e, &v), ORDO_ERR_NO_MEMORY, "ordo_var_new", "at the cap after a delete");
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* ------------------------------------------------------------------------------------------- */
/* NO_MEMORY when worker threads cannot be made.                                               */
/* ------------------------------------------------------------------------------------------- */

/* A forked child runs the calls under RLIMIT_NPROC, which limits the threads (tasks) of its
 * real user: below what that user already runs, no thread can be made (pthread_create: EAGAIN).
 * Root (and a process with CAP_SYS_RESOURCE or CAP_SYS_ADMIN) is exempt, so a child running as
 * root becomes nobody first; the limit is the child's alone and goes with it. Each child reports
 * through a pipe what it saw; where a thread can still be made under the limit (probed first),
 * the test is skipped, saying why. */
enum { kMaxCalls = 12 };

typedef struct child_call {
  ordo_status st;
  char msg[256];
  size_t len;
  int out_null; /* engine create: *out was NULL afterwards */
} child_call;

typedef struct child_report {
  int setup_failed; /* errno of a failed setrlimit */
  int root_kept;    /* errno of a failed setgroups/setgid/setuid: still root */
  char root_what[32];
  int probe; /* pthread_create's result under the limit: 0 means threads could still be made */
  int calls;
  child_call call[kMaxCalls];
  atomic_int ran;    /* ops that ran */
  atomic_int freed;  /* free_fns that ran */
  int ran_limited;   /* of them, while no thread could be made */
  int freed_limited; /* (push_without_threads) */
  int done;          /* the child reached its end */
} child_report;

static child_report* g_report; /* the child's own copy */

static void record(ordo_status st) {
  child_call* c = &g_report->call[g_report->calls++];
  c->st = st;
  c->len = ordo_last_error_copy(c->msg, sizeof c->msg);
}

static int set_nproc_soft(rlim_t soft) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NPROC, &r) != 0) return errno;
  r.rlim_cur = soft == RLIM_INFINITY ? r.rlim_max : soft;
  return setrlimit(RLIMIT_NPROC, &r) == 0 ? 0 : errno;
}

static void* probe_thread(void* p) {
  return p;
}

/* Root is exempt from RLIMIT_NPROC: a root child becomes nobody (root_kept says why not). */
static void drop_root(void) {
  if (geteuid() != 0) return;
  const char* what = NULL;
  if (setgroups(0, NULL) != 0) {
    what = "setgroups";
  } else if (setgid(65534) != 0) {
    what = "setgid(65534)";
  } else if (setuid(65534) != 0) {
    what = "setuid(65534)";
  }
  if (what) {
    g_report->root_kept = errno;
    snprintf(g_report->root_what, sizeof g_report->root_what, "%s", what);
  }
}

/* Limits this user's tasks to 1, which the child itself is. True when no thread can be made
 * then (probe: pthread_create's result under the limit). */
static bool limit_threads(void) {
  int err = set_nproc_soft(1);
  if (err) {
    g_report->setup_failed = err;
    return false;
  }
  pthread_t th;
  g_report->probe = pthread_create(&th, NULL, probe_thread, NULL);
  if (g_report->probe == 0) pthread_join(th, NULL);
  return g_report->probe != 0;
}

/* Runs body in a forked child and returns its report. */
static void run_in_child(void (*body)(void), child_report* out) {
  if (UNDER_TSAN) {
    cr_skip_test(
        "under TSan a child forked from this multi-threaded process cannot start "
        "threads (die_after_fork)");
  }
  int fds[2];
  cr_assert_eq(pipe(fds), 0, "%s", strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    alarm(10); /* a child stuck in a call dies (SIGALRM) rather than outlive the test */
    static child_report r;
    memset(&r, 0, sizeof r);
    g_report = &r;
    body();
    const char* p = (const char*)&r;
    size_t left = sizeof r;
    while (left > 0) {
      ssize_t n = write(fds[1], p, left);
      if (n <= 0) _exit(3);
      p += n;
      left -= (size_t)n;
    }
    _exit(0);
  }
  close(fds[1]);
  memset(out, 0, sizeof *out);
  char* p = (char*)out;
  size_t got = 0;
  while (got < sizeof *out) {
    ssize_t n = read(fds[0], p + got, sizeof *out - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child %s %d (%s)",
            WIFSIGNALED(status) ? "died of signal" : "exited with",
            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
            WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? "stuck for 10 s" : "");
  cr_assert_eq(got, sizeof *out, "the child's report was cut short");
}

/* Skips the test where the limit cannot keep threads from being made here. */
static void skip_unless_limited(const child_report* r) {
  if (r->setup_failed) {
    cr_skip_test("cannot limit the child's threads: setrlimit(RLIMIT_NPROC): %s",
                 strerror(r->setup_failed));
  }
  if (r->probe == 0) {
    cr_skip_test("threads can still be made under RLIMIT_NPROC here (a privileged user%s%s%s)",
                 r->root_kept ? ": root, as " : "", r->root_kept ? r->root_what : "",
                 r->root_kept ? " failed" : "");
  }
  cr_assert_eq(r->probe, EAGAIN, "pthread_create under RLIMIT_NPROC: %s", strerror(r->probe));
  cr_assert_eq(r->done, 1, "the child stopped half-way");
}

static void check_child_call(const child_report* r, int i, ordo_status want, const char* call,
                             const char* ctx) {
  cr_assert_lt(i, r->calls, "%s: the child made %d calls", ctx, r->calls);
  const child_call* c = &r->call[i];
  cr_assert_eq(c->st, want, "%s: %s -> %s, want %s (message \"%s\")", ctx, call,
               ordo_status_string(c->st), ordo_status_string(want), c->msg);
  if (want != ORDO_OK) check_message_text(c->msg, c->len, call, ctx);
}

static void create_in(int32_t kind) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  ordo_engine* e = (ordo_engine*)&cfg; /* anything but NULL: a failed create must set NULL */
  ordo_status st = ordo_engine_create(&cfg, &e);
  record(st);
  g_report->call[g_report->calls - 1].out_null = e == NULL;
  if (st == ORDO_OK) {
    atomic_int ran;
    atomic_init(&ran, 0);
    if (ordo_opr_push(e, tu_count_fn, &ran, NULL, 0, NULL, 0, NULL) == ORDO_OK &&
        ordo_wait_for_all(e) == ORDO_OK) {
      atomic_fetch_add(&g_report->ran, atomic_load(&ran));
    }
    ordo_engine_destroy(e);
  }
}

static void create_without_threads(void) {
  drop_root();
  if (!limit_threads()) return;
  create_in(ORDO_ENGINE_POOLED);     /* 0 */
  create_in(ORDO_ENGINE_PER_DEVICE); /* 1 */
  create_in(ORDO_ENGINE_NAIVE);      /* 2: needs no thread */
  if (set_nproc_soft(RLIM_INFINITY) != 0) return;
  create_in(ORDO_ENGINE_POOLED); /* 3: threads can be made again */
  g_report->done = 1;
}

/* ordo_engine_create of a kind with workers, when no thread can be made: NO_MEMORY ("memory,
 * threads or engine slots ran out"), *out NULL, a message naming the call; the naive kind (no
 * workers) is still created; and once threads can be made again, so is a pooled engine (the
 * failed creates left nothing behind that stops it). */
Test(error_paths, engine_create_without_worker_threads_is_no_memory) {
  child_report r;
  run_in_child(create_without_threads, &r);
  skip_unless_limited(&r);
  check_child_call(&r, 0, ORDO_ERR_NO_MEMORY, "ordo_engine_create", "pooled, no threads");
  cr_assert(r.call[0].out_null, "pooled: *out was not set to NULL");
  check_child_call(&r, 1, ORDO_ERR_NO_MEMORY, "ordo_engine_create", "per_device, no threads");
  cr_assert(r.call[1].out_null, "per_device: *out was not set to NULL");
  check_child_call(&r, 2, ORDO_OK, "ordo_engine_create", "naive, no threads");
  check_child_call(&r, 3, ORDO_OK, "ordo_engine_create", "pooled, threads allowed again");
  cr_assert_eq(atomic_load(&r.ran), 2, "%d of the 2 ops pushed into the engines created ran",
               atomic_load(&r.ran));
}

static void free_count(void* ud) {
  atomic_fetch_add(&((child_report*)ud)->freed, 1);
}

static int32_t run_count(ordo_exec* x, void* ud) {
  (void)x;
  atomic_fetch_add(&((child_report*)ud)->ran, 1);
  return 0;
}

static ordo_status push_prop(ordo_engine* e, int32_t prop) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.prop = prop;
  o.free_fn = free_count;
  return ordo_opr_push(e, run_count, g_report, NULL, 0, NULL, 0, &o);
}

static ordo_status new_prepared(ordo_engine* e, int32_t prop, ordo_opr* out) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.prop = prop;
  o.free_fn = free_count;
  return ordo_opr_new(e, run_count, g_report, NULL, 0, NULL, 0, &o, out);
}

static void push_without_threads(void) {
  /* The engine first, while threads can be made: per_device starts its CPU workers at create,
   * the others at the first op that needs them. */
  drop_root();
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  cfg.cpu_threads = 1;
  cfg.cpu_priority_threads = 1;
  cfg.copy_threads = 1;
  ordo_engine* e = NULL;
  record(ordo_engine_create(&cfg, &e)); /* 0 */
  if (!e) return;
  if (!limit_threads()) {
    ordo_engine_destroy(e);
    return;
  }
  record(push_prop(e, ORDO_PROP_CPU_PRIORITIZED)); /* 1 */
  record(push_prop(e, ORDO_PROP_COPY_TO_DEVICE));  /* 2 */
  ordo_opr p = 0;
  record(new_prepared(e, ORDO_PROP_COPY_FROM_DEVICE, &p)); /* 3 */
  record(push_prop(e, ORDO_PROP_NORMAL));                  /* 4: its workers run */
  record(push_prop(e, ORDO_PROP_ASYNC));                   /* 5: runs inline */
  record(ordo_wait_for_all(e));                            /* 6 */
  g_report->ran_limited = atomic_load(&g_report->ran);
  g_report->freed_limited = atomic_load(&g_report->freed);
  if (set_nproc_soft(RLIM_INFINITY) != 0) {
    ordo_engine_destroy(e);
    return;
  }
  record(push_prop(e, ORDO_PROP_CPU_PRIORITIZED));         /* 7 */
  record(new_prepared(e, ORDO_PROP_COPY_FROM_DEVICE, &p)); /* 8 */
  record(p ? ordo_opr_push_prepared(e, p, 0) : -1);        /* 9 */
  record(p ? ordo_opr_delete(e, p) : -1);                  /* 10 */
  record(ordo_wait_for_all(e));                            /* 11 */
  ordo_engine_destroy(e);
  g_report->done = 1;
}

/* A push (or ordo_opr_new) for a property whose workers have not started yet, when no thread
 * can be made: NO_MEMORY and nothing pushed (the op does not run, its free_fn is not called),
 * while ops for workers already running, and inline ones, still run; once threads can be made
 * again, the same pushes start their workers and run. */
Test(error_paths, a_push_whose_workers_cannot_start_is_no_memory) {
  child_report r;
  run_in_child(push_without_threads, &r);
  skip_unless_limited(&r);
  check_child_call(&r, 0, ORDO_OK, "ordo_engine_create", "before the limit");
  check_child_call(&r, 1, ORDO_ERR_NO_MEMORY, "ordo_opr_push", "CPU_PRIORITIZED, no threads");
  check_child_call(&r, 2, ORDO_ERR_NO_MEMORY, "ordo_opr_push", "COPY_TO_DEVICE, no threads");
  check_child_call(&r, 3, ORDO_ERR_NO_MEMORY, "ordo_opr_new", "COPY_FROM_DEVICE, no threads");
  check_child_call(&r, 4, ORDO_OK, "ordo_opr_push", "NORMAL, its workers run");
  check_child_call(&r, 5, ORDO_OK, "ordo_opr_push", "ASYNC, inline");
  check_child_call(&r, 6, ORDO_OK, "ordo_wait_for_all", "while limited");
  /* While limited: the two pushes that succeeded ran and were freed; the refused ones not. */
  cr_assert_eq(r.ran_limited, 2, "%d ops ran while threads were limited, want 2", r.ran_limited);
  cr_assert_eq(r.freed_limited, 2, "%d free_fns ran while threads were limited, want 2",
               r.freed_limited);
  check_child_call(&r, 7, ORDO_OK, "ordo_opr_push", "CPU_PRIORITIZED, threads allowed again");
  check_child_call(&r, 8, ORDO_OK, "ordo_opr_new", "COPY_FROM_DEVICE, threads allowed again");
  check_child_call(&r, 9, ORDO_OK, "ordo_opr_push_prepared", "threads allowed again");
  check_child_call(&r, 10, ORDO_OK, "ordo_opr_delete", "threads allowed again");
  check_child_call(&r, 11, ORDO_OK, "ordo_wait_for_all", "threads allowed again");
  /* In all: 2 + the priority push + the prepared push ran; 2 + 1 + the prepared op freed. */
  cr_assert_eq(atomic_load(&r.ran), 4, "%d ops ran in all, want 4", atomic_load(&r.ran));
  cr_assert_eq(atomic_load(&r.freed), 4, "%d free_fns ran in all, want 4", atomic_load(&r.freed));
}

/* ------------------------------------------------------------------------------------------- */
/* INVALID_HANDLE through a freed engine's pointer.                                            */
/* ------------------------------------------------------------------------------------------- */

/* A freed engine's pointer stays invalid until 65,535 - L other engines have been created (the
 * header's slot table), so it is safe to pass here: no engine is created in between. */
static char g_trace_dir[64];

static const char* trace_file(const char* name) {
  static char path[128];
  if (!g_trace_dir[0]) {
    snprintf(g_trace_dir, sizeof g_trace_dir, "/tmp/ordo-error-paths-XXXXXX");
    cr_assert_not_null(mkdtemp(g_trace_dir), "%s", strerror(errno));
  }
  snprintf(path, sizeof path, "%s/%s", g_trace_dir, name);
  return path;
}

typedef struct freed_case {
  ordo_engine* e;
  ordo_var v;       /* a var of it, still live when it was freed */
  ordo_opr p;       /* a prepared op of it, never deleted */
  atomic_int runs;  /* of the prepared op */
  atomic_int frees; /* of its user_data */
} freed_case;

static int32_t count_run(ordo_exec* x, void* ud) {
  (void)x;
  atomic_fetch_add(&((freed_case*)ud)->runs, 1);
  return 0;
}

static void count_free(void* ud) {
  atomic_fetch_add(&((freed_case*)ud)->frees, 1);
}

/* A traced engine (so that ordo_engine_write_trace would succeed on it), with a var and a
 * prepared op; the calls below all work on it before it is freed. */
static void make_freed_case(freed_case* c, int32_t kind) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  cfg.trace_path = trace_file("at-destroy.json");
  g_kind = kind;
  c->e = NULL;
  ST(ordo_engine_create(&cfg, &c->e), ORDO_OK);
  c->v = new_var(c->e);
  atomic_init(&c->runs, 0);
  atomic_init(&c->frees, 0);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = count_free;
  ST(ordo_opr_new(c->e, count_run, c, NULL, 0, &c->v, 1, &o, &c->p), ORDO_OK);
  ST(ordo_opr_push_prepared(c->e, c->p, 0), ORDO_OK);
  ST(ordo_wait_for_var(c->e, c->v), ORDO_OK);
  ST(ordo_engine_write_trace(c->e, trace_file("live.json")), ORDO_OK);
  ordo_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  ST(ordo_engine_stats(c->e, &st), ORDO_OK);
  int32_t code = -1;
  ST(ordo_var_get_error(c->e, c->v, &code, NULL, 0), ORDO_OK);
}

/* Every call of the list on the freed pointer: INVALID_HANDLE, with a message naming the call.
 * The calls alternate, so that each message checked is the one its call left. */
static void check_freed(freed_case* c, const char* how) {
  char ctx[96];
  snprintf(ctx, sizeof ctx, "%s, %s", tu_kind_name(g_kind), how);
  ordo_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_ERR(ordo_engine_stats(c->e, &st), ORDO_ERR_INVALID_HANDLE, "ordo_engine_stats", ctx);
  EXPECT_ERR(ordo_engine_write_trace(c->e, trace_file("freed.json")), ORDO_ERR_INVALID_HANDLE,
             "ordo_engine_write_trace", ctx);
  EXPECT_ERR(ordo_var_delete(c->e, c->v), ORDO_ERR_INVALID_HANDLE, "ordo_var_delete", ctx);
  EXPECT_ERR(ordo_var_clear_error(c->e, c->v), ORDO_ERR_INVALID_HANDLE, "ordo_var_clear_error",
             ctx);
  int32_t code = -1;
  char buf[64] = "";
  EXPECT_ERR(ordo_var_get_error(c->e, c->v, &code, buf, sizeof buf), ORDO_ERR_INVALID_HANDLE,
             "ordo_var_get_error", ctx);
  EXPECT_ERR(ordo_wait_for_var(c->e, c->v), ORDO_ERR_INVALID_HANDLE, "ordo_wait_for_var", ctx);
  EXPECT_ERR(ordo_opr_push_prepared(c->e, c->p, 0), ORDO_ERR_INVALID_HANDLE,
             "ordo_opr_push_prepared", ctx);
  EXPECT_ERR(ordo_wait_for_var_timeout(c->e, c->v, TU_MS_NS(100)), ORDO_ERR_INVALID_HANDLE,
             "ordo_wait_for_var", ctx);
  EXPECT_ERR(ordo_opr_delete(c->e, c->p), ORDO_ERR_INVALID_HANDLE, "ordo_opr_delete", ctx);
  EXPECT_ERR(ordo_wait_for_var_timeout(c->e, c->v, 0), ORDO_ERR_INVALID_HANDLE, "ordo_wait_for_var",
             ctx);
  /* The prepared op ran once, before, and was freed once, by the last reference's drain. */
  cr_assert_eq(atomic_load(&c->runs), 1, "%s: the prepared op ran %d times", ctx,
               atomic_load(&c->runs));
  cr_assert_eq(atomic_load(&c->frees), 1, "%s: the prepared op was freed %d times", ctx,
               atomic_load(&c->frees));
  struct stat sb;
  cr_assert_neq(stat(trace_file("freed.json"), &sb), 0, "%s: a freed engine wrote a trace", ctx);
}

/* Freed by ordo_engine_destroy (the creator's reference was the only one), and by the last
 * ordo_engine_release after a destroy (through which the same calls still worked), for each
 * kind: every call takes the pointer for what it is, a freed engine's. */
Test(error_paths, calls_on_a_freed_engine_are_invalid_handle) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    freed_case c;
    make_freed_case(&c, tu_all_kinds[k]);
    ST(ordo_engine_destroy(c.e), ORDO_OK);
    check_freed(&c, "freed by destroy");

    make_freed_case(&c, tu_all_kinds[k]);
    ST(ordo_engine_retain(c.e), ORDO_OK);
    ST(ordo_engine_destroy(c.e), ORDO_OK);
    /* Shut down but still referenced: the read-only calls and ordo_opr_delete still work. */
    ordo_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    ST(ordo_engine_stats(c.e, &st), ORDO_OK);
    ST(ordo_engine_write_trace(c.e, trace_file("shut-down.json")), ORDO_OK);
    int32_t code = -1;
    ST(ordo_var_get_error(c.e, c.v, &code, NULL, 0), ORDO_OK);
    ST(ordo_engine_release(c.e), ORDO_OK);
    check_freed(&c, "freed by the last release");
  }
  unlink(trace_file("at-destroy.json"));
  unlink(trace_file("live.json"));
  unlink(trace_file("shut-down.json"));
  rmdir(g_trace_dir);
}

/* ------------------------------------------------------------------------------------------- */
/* A timed wait on a var that another thread deletes while the wait is in progress.           */
/* ------------------------------------------------------------------------------------------- */

/* The header: INVALID_HANDLE when v "was deleted ... while the wait was in progress; in that
 * second case only once the delete, and so every op pushed on v before the wait, has finished (a
 * timed wait whose timeout comes first returns TIMEOUT)". The order each step needs is made, not
 * slept for: the test thread deletes only once the waiting thread is parked in the kernel
 * (tu_wait_thread_parked), and completes the ops the wait waits for one by one, each only once
 * the wait is known to be asleep (again). A step whose order could not be seen is not checked
 * less: the scenario is run again (kAttempts in all), and the test fails if it never could be. */
enum { kAttempts = 3 };

/* How far the test thread has got; the waiter reads it as its wait returns. */
enum {
  kSetUp = 0,
  kDeleted = 1,          /* ordo_var_delete(v) has returned */
  kFirstCompleting = 2,  /* ordo_complete of the op before the mark (or the wait) has begun */
  kSecondCompleting = 3, /* ordo_complete of the op between the mark and the wait has begun */
};

typedef struct del_waiter {
  ordo_engine* e;
  ordo_var v;
  uint64_t timeout_ns;
  atomic_int* stage;
  atomic_int tid;
  atomic_int calling;
  atomic_int returned;
  atomic_int status;
  int stage_at_return;
  uint64_t took_ns;
  char msg[1024];
  size_t len;
  pthread_t th;
  bool joined;
} del_waiter;

static void* del_waiter_main(void* p) {
  del_waiter* w = p;
  atomic_store(&w->tid, tu_gettid());
  atomic_store(&w->calling, 1);
  const uint64_t t0 = tu_now_ns();
  ordo_status s = ordo_wait_for_var_timeout(w->e, w->v, w->timeout_ns);
  w->took_ns = tu_now_ns() - t0;
  w->stage_at_return = atomic_load(w->stage);
  w->len = ordo_last_error_copy(w->msg, sizeof w->msg);
  atomic_store(&w->status, s);
  atomic_store(&w->returned, 1);
  return NULL;
}

/* Up to timeout_ms for the waiter to be parked in a futex (after more than after_sleeps sleeps
 * when >= 0); false at once when its wait has returned. */
static bool waiter_parked(del_waiter* w, long after_sleeps, uint32_t timeout_ms) {
  const uint64_t deadline = tu_now_ms() + timeout_ms;
  while (!atomic_load(&w->returned)) {
    if (tu_wait_thread_parked(atomic_load(&w->tid), SYS_futex, after_sleeps, 20)) {
      return !atomic_load(&w->returned);
    }
    if (tu_now_ms() >= deadline) return false;
  }
  return false;
}

/* Starts the waiter; true once it is parked in its wait. */
static bool start_del_waiter(del_waiter* w, ordo_engine* e, ordo_var v, uint64_t timeout_ns,
                             atomic_int* stage) {
  memset(w, 0, sizeof *w);
  w->e = e;
  w->v = v;
  w->timeout_ns = timeout_ns;
  w->stage = stage;
  atomic_init(&w->status, -1);
  cr_assert_eq(pthread_create(&w->th, NULL, del_waiter_main, w), 0);
  cr_assert(tu_wait_eq(&w->calling, 1, 5000), "%s: the waiting thread never ran",
            tu_kind_name(g_kind));
  return waiter_parked(w, -1, 5000);
}

static void join_del_waiter(del_waiter* w) {
  if (w->joined) return;
  cr_assert(tu_wait_eq(&w->returned, 1, 10000), "%s: the wait never returned",
            tu_kind_name(g_kind));
  pthread_join(w->th, NULL);
  w->joined = true;
}

/* The returned wait said `want`, having seen the test at `stage`. */
static void check_del_wait(const del_waiter* w, ordo_status want, int stage, const char* ctx) {
  ordo_status s = atomic_load(&w->status);
  cr_assert_eq(s, want, "%s, %s: the wait returned %s, want %s (\"%s\")", tu_kind_name(g_kind), ctx,
               ordo_status_string(s), ordo_status_string(want), w->msg);
  cr_assert_eq(w->stage_at_return, stage,
               "%s, %s: the wait returned %s at step %d of the test, want step %d",
               tu_kind_name(g_kind), ctx, ordo_status_string(s), w->stage_at_return, stage);
  if (want == ORDO_ERR_TIMEOUT) {
    cr_assert_geq(w->took_ns + TU_MS_NS(1), w->timeout_ns,
                  "%s, %s: a %llu ms timeout expired after %llu us", tu_kind_name(g_kind), ctx,
                  (unsigned long long)(w->timeout_ns / 1000000u),
                  (unsigned long long)(w->took_ns / 1000u));
  }
  if (want != ORDO_OK) check_message_text(w->msg, w->len, "ordo_wait_for_var", ctx);
}

/* A deferred writer of v, and its completion once it has deferred. */
typedef struct held {
  tu_deferred d;
  bool completed;
} held;

static void push_held(ordo_engine* e, ordo_var v, held* h) {
  tu_deferred_init(&h->d);
  h->completed = false;
  ST(ordo_opr_push(e, tu_defer_fn, &h->d, NULL, 0, &v, 1, NULL), ORDO_OK);
}

static void complete_held(held* h) {
  if (h->completed) return;
  ordo_completion c = tu_deferred_wait(&h->d, 5000);
  cr_assert_neq(c, 0, "%s: a deferred op never ran", tu_kind_name(g_kind));
  h->completed = true;
  ST(ordo_complete(c, 0, NULL), ORDO_OK);
}

/* Where the wait of check_wait_behind_a_mark ends. */
typedef enum behind_end {
  kDeleteFirst,          /* both ops complete in time: INVALID_HANDLE once the delete is done */
  kTimeoutBehindTheMark, /* the timeout comes before the op before the mark completes */
  kTimeoutBeforeDelete,  /* ... after that, but before the op between the mark and the wait */
} behind_end;

/* v is held by a deferred writer d1; a wait that timed out left its mark behind d1; a deferred
 * writer d2 was pushed after it. The waiting thread's wait then waits behind that mark and, once
 * it has fired, for every op pushed until the wait (d2). The test thread deletes v while that
 * wait is in progress, then completes d1, then d2 (after which the delete runs). Returns false,
 * with `why`, when an order could not be established (nothing was checked: run it again). */
static bool check_wait_behind_a_mark(int32_t kind, behind_end end, char* why, size_t cap) {
  ordo_engine* e = make_engine(kind);
  const char* ctx = end == kDeleteFirst            ? "delete first"
                    : end == kTimeoutBehindTheMark ? "timeout behind the mark"
                                                   : "timeout before the delete";
  ordo_var v = new_var(e);
  held d1, d2;
  push_held(e, v, &d1);
  cr_assert_neq(tu_deferred_wait(&d1.d, 5000), 0, "%s: d1 never deferred", tu_kind_name(kind));
  ST(ordo_wait_for_var_timeout(e, v, TU_MS_NS(1)), ORDO_ERR_TIMEOUT); /* its mark stays */
  push_held(e, v, &d2);

  atomic_int stage;
  atomic_init(&stage, kSetUp);
  const uint64_t timeout = end == kDeleteFirst            ? TU_MS_NS(5000)
                           : end == kTimeoutBehindTheMark ? TU_MS_NS(100)
                                                          : TU_MS_NS(250);
  del_waiter w;
  bool ok = start_del_waiter(&w, e, v, timeout, &stage);
  if (!ok) {
    cr_assert_eq(atomic_load(&w.returned), 0,
                 "%s, %s: the wait returned %s (\"%s\") with d1 pending", tu_kind_name(kind), ctx,
                 ordo_status_string(atomic_load(&w.status)), w.msg);
    snprintf(why, cap, "%s, %s: the waiting thread was not seen asleep in its wait",
             tu_kind_name(kind), ctx);
  } else {
    ST(ordo_var_delete(e, v), ORDO_OK);
    atomic_store(&stage, kDeleted);
    EXPECT_ERR(ordo_wait_for_var_timeout(e, v, 0), ORDO_ERR_INVALID_HANDLE, "ordo_wait_for_var",
               ctx);
    if (end == kTimeoutBehindTheMark) {
      join_del_waiter(&w);
      check_del_wait(&w, ORDO_ERR_TIMEOUT, kDeleted, ctx);
    }
  }
  if (ok && end != kTimeoutBehindTheMark) {
    /* The mark fires: the wait wakes, begins again, finds v deleted, and sleeps again until the
     * delete has run. Only once it sleeps again does d2 complete (ordo wakes it as the mark
     * fires, in ordo_complete: a new sleep is what shows it has passed that point). */
    const long slept = tu_thread_sleeps(atomic_load(&w.tid));
    atomic_store(&stage, kFirstCompleting);
    complete_held(&d1);
    cr_assert_neq(tu_deferred_wait(&d2.d, 5000), 0, "%s: d2 never deferred", tu_kind_name(kind));
    ok = slept >= 0 && waiter_parked(&w, slept, 2000);
    if (atomic_load(&w.returned) &&
        !(end == kTimeoutBeforeDelete && atomic_load(&w.status) == ORDO_ERR_TIMEOUT)) {
      cr_assert_fail(
          "%s, %s: the wait returned %s (\"%s\") once the op before the mark was "
          "done, while d2, pushed before the wait, was still pending",
          tu_kind_name(kind), ctx, ordo_status_string(atomic_load(&w.status)), w.msg);
    }
    if (!ok) {
      snprintf(why, cap, "%s, %s: the wait was not seen asleep again after the mark fired",
               tu_kind_name(kind), ctx);
    } else if (end == kTimeoutBeforeDelete) {
      join_del_waiter(&w);
      check_del_wait(&w, ORDO_ERR_TIMEOUT, kFirstCompleting, ctx);
    } else {
      atomic_store(&stage, kSecondCompleting);
      complete_held(&d2); /* the delete runs */
      join_del_waiter(&w);
      check_del_wait(&w, ORDO_ERR_INVALID_HANDLE, kSecondCompleting, ctx);
    }
  }
  /* Whatever happened: let everything finish. */
  complete_held(&d1);
  complete_held(&d2);
  join_del_waiter(&w);
  ST(ordo_wait_for_all(e), ORDO_OK);
  ST(ordo_wait_for_var(e, v), ORDO_ERR_INVALID_HANDLE);
  cr_assert_eq(atomic_load(&d1.d.calls), 1, "%s", tu_kind_name(kind));
  cr_assert_eq(atomic_load(&d2.d.calls), 1, "%s", tu_kind_name(kind));
  ST(ordo_engine_destroy(e), ORDO_OK);
  return ok;
}

static void run_wait_behind_a_mark(behind_end end) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    char why[256] = "";
    int attempt = 0;
    while (attempt < kAttempts &&
           !check_wait_behind_a_mark(tu_all_kinds[k], end, why, sizeof why)) {
      fprintf(stderr, "error_paths: %s; running it again\n", why);
      ++attempt;
    }
    cr_assert_lt(attempt, kAttempts, "%d attempts, none could be checked: %s", kAttempts, why);
  }
}

/* The wait, behind a mark, of a var deleted meanwhile: INVALID_HANDLE, and only once d2 (pushed
 * before the wait) has been completed, so that the delete could run: not when the mark fired. */
Test(error_paths, a_wait_on_a_var_deleted_while_it_waits_is_invalid_handle_once_the_delete_ran) {
  run_wait_behind_a_mark(kDeleteFirst);
}

/* The same wait with a timeout that comes first: TIMEOUT, both while it waits behind the mark
 * and once it waits for the delete. */
Test(error_paths, a_wait_on_a_var_deleted_while_it_waits_times_out_when_the_timeout_comes_first) {
  run_wait_behind_a_mark(kTimeoutBehindTheMark);
  run_wait_behind_a_mark(kTimeoutBeforeDelete);
}

/* A wait whose own mark sits behind a deferred writer d, on a var deleted meanwhile: it returns
 * only once d has been completed. The header leaves its status open in this case: the mark fires
 * (every op before the wait is done) before the delete runs, and ordo returns ORDO_OK today;
 * INVALID_HANDLE would also be within the header's words. A timeout that comes first: TIMEOUT. */
static bool check_own_mark(int32_t kind, bool timeout_first, char* why, size_t cap) {
  ordo_engine* e = make_engine(kind);
  const char* ctx = timeout_first ? "own mark, timeout first" : "own mark";
  ordo_var v = new_var(e);
  held d;
  push_held(e, v, &d);
  cr_assert_neq(tu_deferred_wait(&d.d, 5000), 0, "%s: d never deferred", tu_kind_name(kind));
  atomic_int stage;
  atomic_init(&stage, kSetUp);
  del_waiter w;
  bool ok = start_del_waiter(&w, e, v, timeout_first ? TU_MS_NS(100) : TU_MS_NS(5000), &stage);
  if (!ok) {
    cr_assert_eq(atomic_load(&w.returned), 0,
                 "%s, %s: the wait returned %s (\"%s\") with d pending", tu_kind_name(kind), ctx,
                 ordo_status_string(atomic_load(&w.status)), w.msg);
    snprintf(why, cap, "%s, %s: the waiting thread was not seen asleep in its wait",
             tu_kind_name(kind), ctx);
  } else {
    ST(ordo_var_delete(e, v), ORDO_OK);
    atomic_store(&stage, kDeleted);
    if (timeout_first) {
      join_del_waiter(&w);
      check_del_wait(&w, ORDO_ERR_TIMEOUT, kDeleted, ctx);
    } else {
      /* Asleep after the delete (it did not end the wait), then d completes. */
      ok = waiter_parked(&w, -1, 2000);
      cr_assert_eq(atomic_load(&w.returned), 0,
                   "%s, %s: the wait returned %s (\"%s\") at the delete, with d pending",
                   tu_kind_name(kind), ctx, ordo_status_string(atomic_load(&w.status)), w.msg);
      if (!ok) {
        snprintf(why, cap, "%s, %s: the wait was not seen asleep after the delete",
                 tu_kind_name(kind), ctx);
      } else {
        atomic_store(&stage, kFirstCompleting);
        complete_held(&d);
        join_del_waiter(&w);
        /* The wait's own mark came before the delete, which is ordered after it (header). */
        check_del_wait(&w, ORDO_OK, kFirstCompleting, ctx);
      }
    }
  }
  complete_held(&d);
  join_del_waiter(&w);
  ST(ordo_wait_for_all(e), ORDO_OK);
  ST(ordo_wait_for_var(e, v), ORDO_ERR_INVALID_HANDLE);
  ST(ordo_engine_destroy(e), ORDO_OK);
  return ok;
}

Test(error_paths, a_wait_with_its_own_mark_on_a_var_deleted_meanwhile_returns_after_the_op) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    for (int timeout_first = 0; timeout_first <= 1; ++timeout_first) {
      char why[256] = "";
      int attempt = 0;
      while (attempt < kAttempts &&
             !check_own_mark(tu_all_kinds[k], timeout_first, why, sizeof why)) {
        fprintf(stderr, "error_paths: %s; running it again\n", why);
        ++attempt;
      }
      cr_assert_lt(attempt, kAttempts, "%d attempts, none could be checked: %s", kAttempts, why);
    }
  }
}
