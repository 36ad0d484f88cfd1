/*
 * §9 traces: with ordo_engine_config.trace_path (or ORDO_TRACE) set, every op is recorded and
 * written as Chrome trace JSON at shutdown or by ordo_engine_write_trace. The JSON is checked by
 * tests/check_trace.py (Python is always there: meson runs on it): it must parse, and it must
 * hold exactly the expected events.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

TestSuite(trace, .timeout = 60.0);

#define ST(expr, want) TU_ASSERT_ST(expr, want, "trace")

#ifndef ORDO_TEST_SOURCE_DIR
#error "tests/meson.build defines ORDO_TEST_SOURCE_DIR"
#endif

static char g_dir[64];

static const char* temp_path(const char* file) {
  static char path[128];
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ordo-trace-XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
  }
  snprintf(path, sizeof path, "%s/%s", g_dir, file);
  return path;
}

static void make_empty_file(const char* path) {
  FILE* f = fopen(path, "w");
  cr_assert_not_null(f, "cannot create %s", path);
  fclose(f);
}

/* Runs check_trace.py on the file: it parses the JSON and checks the expectations given as
 * arguments (see that script). Returns its exit status. */
static int check_trace(const char* path, const char* expectations) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "python3 %s/check_trace.py %s %s", ORDO_TEST_SOURCE_DIR, path,
           expectations);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static int32_t return_code(ordo_exec* exec, void* user_data) {
  (void)exec;
  return (int32_t)(intptr_t)user_data;
}

static ordo_engine* traced_engine_with(int32_t kind, int32_t cpu_threads, const char* path) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = cpu_threads;
  cfg.trace_path = path;
  ordo_engine* e = NULL;
  ST(ordo_engine_create(&cfg, &e), ORDO_OK);
  return e;
}

static ordo_engine* traced_engine(int32_t kind, const char* path) {
  return traced_engine_with(kind, 2, path);
}

static void push_named(ordo_engine* e, const char* name, intptr_t code, ordo_var* cv, size_t nc,
                       ordo_var* mv, size_t nm) {
  ordo_push_opts o = tu_opts_named(name);
  ST(ordo_opr_push(e, return_code, (void*)code, cv, nc, mv, nm, &o), ORDO_OK);
}

Test(trace, destroy_writes_every_op_with_its_name_and_outcome) {
  for (int k = 0; k < TU_NUM_ALL_KINDS; ++k) {
    char file[32];
    snprintf(file, sizeof file, "ops-%d.json", k);
    const char* path = temp_path(file);
    ordo_engine* e = traced_engine(tu_all_kinds[k], path);
    ordo_var a, b;
    ST(ordo_var_new(e, &a), ORDO_OK);
    ST(ordo_var_new(e, &b), ORDO_OK);
    for (int i = 0; i < 50; ++i) push_named(e, "alpha", 0, NULL, 0, &a, 1);
    for (int i = 0; i < 30; ++i) push_named(e, "beta", 0, &a, 1, NULL, 0);
    push_named(e, "breaks \"b\"", 5, NULL, 0, &b, 1);
    push_named(e, "after\\b", 0, &b, 1, NULL, 0);                                 /* skipped */
    ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, NULL, 0, NULL), ORDO_OK); /* unnamed */
    ST(ordo_wait_for_all(e), ORDO_ERR_OP_FAILED);
    ordo_stats s;
    s.struct_size = sizeof s;
    ST(ordo_engine_stats(e, &s), ORDO_OK);
    cr_assert_eq(s.trace_records, 83, "%s: %llu records", tu_kind_name(tu_all_kinds[k]),
                 (unsigned long long)s.trace_records);
    cr_assert_eq(s.trace_dropped, 0);
    ST(ordo_engine_destroy(e), ORDO_OK);
    int rc = check_trace(path,
                         "events=83 name:alpha=50 name:beta=30 'name:breaks \"b\"=1' "
                         "'name:after\\b=1' name:op=1 outcome:failed=1 outcome:skipped=1 "
                         "outcome:ok=81");
    cr_assert_eq(rc, 0, "%s: check_trace.py failed on %s", tu_kind_name(tu_all_kinds[k]), path);
  }
}

Test(trace, worker_rows_are_named_and_ops_land_on_them) {
  const char* path = temp_path("rows.json");
  ordo_engine* e = traced_engine(ORDO_ENGINE_POOLED, path);
  ordo_var v[64];
  for (int i = 0; i < 64; ++i) ST(ordo_var_new(e, &v[i]), ORDO_OK);
  for (int r = 0; r < 20; ++r)
    for (int i = 0; i < 64; ++i) push_named(e, "indep", 0, NULL, 0, &v[i], 1);
  ST(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(check_trace(path, "events=1280 worker_rows=2 events_on_workers=1280"), 0);
}

Test(trace, write_trace_on_demand_keeps_the_records) {
  char at_exit[128];
  snprintf(at_exit, sizeof at_exit, "%s", temp_path("at-exit.json"));
  ordo_engine* e = traced_engine(ORDO_ENGINE_PER_DEVICE, at_exit);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  for (int i = 0; i < 10; ++i) push_named(e, "first", 0, NULL, 0, &v, 1);
  ST(ordo_wait_for_all(e), ORDO_OK);
  char early[128];
  snprintf(early, sizeof early, "%s", temp_path("early.json"));
  ST(ordo_engine_write_trace(e, early), ORDO_OK);
  for (int i = 0; i < 5; ++i) push_named(e, "second", 0, NULL, 0, &v, 1);
  ST(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(check_trace(early, "events=10 name:first=10"), 0);
  cr_assert_eq(check_trace(at_exit, "events=15 name:first=10 name:second=5"), 0);
}

/* The number ORDO_TRACE gave the engine's file, its path copied to `got`: 1 for `path` itself,
 * n for `path` with "-n" before its ".json", 0 when it is neither. The count is per process, and
 * the sanitizer shim runs every test in one process: a test cannot assume its engine is the
 * process's first. */
static long env_trace_number(ordo_engine* e, const char* path, char* got, size_t cap) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  ST(ordo_engine_get_config(e, &cfg), ORDO_OK);
  snprintf(got, cap, "%s", cfg.trace_path ? cfg.trace_path : "");
  if (strcmp(got, path) == 0) return 1;
  size_t stem = strlen(path) - strlen(".json");
  if (strncmp(got, path, stem) != 0 || got[stem] != '-') return 0;
  char* end;
  long n = strtol(got + stem + 1, &end, 10);
  return n >= 2 && strcmp(end, ".json") == 0 ? n : 0;
}

Test(trace, env_ORDO_TRACE_turns_it_on_and_get_config_reports_the_path) {
  const char* path = temp_path("env.json");
  cr_assert_eq(setenv("ORDO_TRACE", path, 1), 0);
  ordo_engine* e = NULL;
  ST(ordo_engine_create(NULL, &e), ORDO_OK);
  unsetenv("ORDO_TRACE");
  char got[160];
  cr_assert_gt(env_trace_number(e, path, got, sizeof got), 0, "trace path %s", got);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  push_named(e, "from-env", 0, NULL, 0, &v, 1);
  ST(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(check_trace(got, "events=1 name:from-env=1"), 0);
}

Test(trace, the_config_field_copies_the_path) {
  char path[128];
  snprintf(path, sizeof path, "%s", temp_path("copied.json"));
  char scratch[128];
  snprintf(scratch, sizeof scratch, "%s", path);
  ordo_engine* e = traced_engine(ORDO_ENGINE_POOLED, scratch);
  memset(scratch, 'x', sizeof scratch - 1); /* the caller's buffer is gone */
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  push_named(e, "one", 0, NULL, 0, &v, 1);
  ST(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(access(path, R_OK), 0, "the trace went to the path given at create");
}

Test(trace, misuse_is_reported) {
  ordo_engine* e = NULL;
  ST(tu_engine_create(ORDO_ENGINE_POOLED, 2, &e), ORDO_OK);
  ST(ordo_engine_write_trace(e, temp_path("off.json")), ORDO_ERR_INVALID_STATE);
  cr_assert(strstr(ordo_last_error_message(), "tracing is off") != NULL);
  ST(ordo_engine_write_trace(NULL, "x.json"), ORDO_ERR_INVALID_ARGUMENT);
  ST(ordo_engine_destroy(e), ORDO_OK);

  e = traced_engine(ORDO_ENGINE_POOLED, temp_path("misuse.json"));
  ST(ordo_engine_write_trace(e, NULL), ORDO_ERR_INVALID_ARGUMENT);
  ST(ordo_engine_write_trace(e, ""), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(ordo_last_error_message(), "path is empty") != NULL, "%s",
            ordo_last_error_message());
  ST(ordo_engine_write_trace(e, "/dev/null"), ORDO_OK); /* written to, never renamed over */
  struct stat st;
  cr_assert_eq(stat("/dev/null", &st), 0);
  cr_assert(S_ISCHR(st.st_mode), "/dev/null is no longer a device");
  ST(ordo_engine_write_trace(e, "/nonexistent-dir/t.json"), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(ordo_last_error_message(), "/nonexistent-dir/t.json") != NULL,
            "the message names the path: %s", ordo_last_error_message());
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* Names are bytes to the caller; the trace must stay JSON (UTF-8) whatever they hold: a name cut
 * at ORDO_NAME_MAX loses the whole character it would split, and bytes that are not UTF-8 are
 * written as U+FFFD. */
Test(trace, names_that_are_not_utf8_still_give_valid_json) {
  const char* path = temp_path("utf8.json");
  ordo_engine* e = traced_engine(ORDO_ENGINE_POOLED, path);
  char cut[64];
  memset(cut, 'a', 46);
  snprintf(cut + 46, sizeof cut - 46, "\xc3\xa9z"); /* U+00E9 at bytes 46-47: byte 47 is cut */
  push_named(e, cut, 0, NULL, 0, NULL, 0);
  char whole[64]; /* U+00E9 at bytes 45-46, then a stray byte at the cut: the character stays */
  memset(whole, 'b', 45);
  snprintf(whole + 45, sizeof whole - 45, "\xc3\xa9\x80z");
  push_named(e, whole, 0, NULL, 0, NULL, 0);
  push_named(e, "h\xc3\xa9llo \xe2\x9c\x93", 0, NULL, 0, NULL, 0); /* valid UTF-8 kept */
  push_named(e, "\xff\xfe bad \xc0\xaf", 0, NULL, 0, NULL, 0);     /* never UTF-8, overlong */
  push_named(e, "\xed\xa0\x80 surrogate", 0, NULL, 0, NULL, 0);
  ST(ordo_engine_destroy(e), ORDO_OK);
  char want[512];
  snprintf(want, sizeof want,
           "events=5 name:%.46s=1 name:%.47s=1 'name:h\xc3\xa9llo \xe2\x9c\x93=1' "
           "'name:\xef\xbf\xbd\xef\xbf\xbd bad \xef\xbf\xbd\xef\xbf\xbd=1' "
           "'name:\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd surrogate=1'",
           cut, whole);
  cr_assert_eq(check_trace(path, want), 0, "check_trace.py failed on %s", path);
}

/* Rows of workers and of calling threads never share a thread id, however many workers. */
Test(trace, caller_rows_never_share_an_id_with_worker_rows) {
  const char* path = temp_path("many-workers.json");
  ordo_engine* e = traced_engine_with(ORDO_ENGINE_POOLED, 1024, path);
  ordo_push_opts o = tu_opts_named("inline");
  o.prop = ORDO_PROP_ASYNC; /* runs on this thread: a caller row */
  ST(ordo_opr_push(e, return_code, (void*)0, NULL, 0, NULL, 0, &o), ORDO_OK);
  push_named(e, "on-a-worker", 0, NULL, 0, NULL, 0);
  ST(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_eq(check_trace(path, "events=2 events_on_workers=1 worker_rows=1024"), 0);
}

/* With ORDO_TRACE, each engine writes a file of its own: the process's first the path as given,
 * the n-th the path with "-n" before its extension. */
Test(trace, engines_traced_through_the_env_do_not_share_a_file) {
  const char* path = temp_path("env-many.json");
  char stem[128];
  snprintf(stem, sizeof stem, "%s", path);
  cr_assert_eq(setenv("ORDO_TRACE", stem, 1), 0);
  ordo_engine *a = NULL, *b = NULL, *c = NULL;
  ST(ordo_engine_create(NULL, &a), ORDO_OK);
  ST(ordo_engine_create(NULL, &b), ORDO_OK);
  unsetenv("ORDO_TRACE");
  char got_a[160], got_b[160], got_c[160];
  long na = env_trace_number(a, stem, got_a, sizeof got_a);
  long nb = env_trace_number(b, stem, got_b, sizeof got_b);
  cr_assert_gt(na, 0, "trace path %s", got_a);
  cr_assert_eq(nb, na + 1, "trace paths %s then %s", got_a, got_b);
  push_named(a, "in-a", 0, NULL, 0, NULL, 0);
  push_named(b, "in-b", 0, NULL, 0, NULL, 0);
  ST(ordo_engine_destroy(b), ORDO_OK);
  ST(ordo_engine_destroy(a), ORDO_OK);
  cr_assert_eq(setenv("ORDO_TRACE", stem, 1), 0); /* a later engine: the next number */
  ST(ordo_engine_create(NULL, &c), ORDO_OK);
  unsetenv("ORDO_TRACE");
  cr_assert_eq(env_trace_number(c, stem, got_c, sizeof got_c), nb + 1, "trace path %s", got_c);
  push_named(c, "in-c", 0, NULL, 0, NULL, 0);
  ST(ordo_engine_destroy(c), ORDO_OK);
  cr_assert_eq(check_trace(got_a, "events=1 name:in-a=1"), 0);
  cr_assert_eq(check_trace(got_b, "events=1 name:in-b=1"), 0);
  cr_assert_eq(check_trace(got_c, "events=1 name:in-c=1"), 0);
}

/* Two engines given the same path and destroyed at once: the file is one of the two traces,
 * whole, never the two interleaved. */
typedef struct {
  ordo_engine* e;
  ordo_status st;
} destroy_arg;

static void* destroy_on_thread(void* p) {
  destroy_arg* d = p;
  d->st = ordo_engine_destroy(d->e);
  return NULL;
}

Test(trace, engines_writing_one_path_at_once_leave_a_whole_trace) {
  const char* path = temp_path("shared.json");
  for (int round = 0; round < 5; ++round) {
    destroy_arg d[2];
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) {
      d[i].e = traced_engine(ORDO_ENGINE_POOLED, path);
      for (int k = 0; k < 20000; ++k) push_named(d[i].e, i ? "two" : "one", 0, NULL, 0, NULL, 0);
      ST(ordo_wait_for_all(d[i].e), ORDO_OK);
    }
    for (int i = 0; i < 2; ++i)
      cr_assert_eq(pthread_create(&t[i], NULL, destroy_on_thread, &d[i]), 0);
    for (int i = 0; i < 2; ++i) {
      cr_assert_eq(pthread_join(t[i], NULL), 0);
      ST(d[i].st, ORDO_OK);
    }
    cr_assert_eq(check_trace(path, "events=20000"), 0, "round %d", round);
  }
}

/* A trace that cannot be written at destroy is said on stderr; destroy returns ORDO_OK and leaves
 * the thread's last error message alone. */
Test(trace, an_unwritable_trace_at_destroy_keeps_the_last_error_message) {
  ordo_engine* e = traced_engine(ORDO_ENGINE_POOLED, "/nonexistent-dir/at-destroy.json");
  ST(ordo_var_delete(e, 0), ORDO_ERR_INVALID_HANDLE);
  char before[512];
  snprintf(before, sizeof before, "%s", ordo_last_error_message());
  ST(ordo_engine_destroy(e), ORDO_OK);
  cr_assert_str_eq(ordo_last_error_message(), before);
}

/* A regular file that cannot be renamed over (a bind-mounted file, as `docker -v
 * host.json:/trace.json` makes one: rename gives EBUSY) is still written, in place. Needs a
 * private mount namespace (root); skipped where none can be made. */
Test(trace, a_file_that_cannot_be_renamed_over_is_written_in_place) {
  /* The file system types are ignored for these two calls; "none" rather than NULL keeps
   * valgrind from reading through a NULL pointer. */
  if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0) {
    cr_skip_test("no private mount namespace here: %s", strerror(errno));
  }
  char host[128], mounted[128];
  snprintf(host, sizeof host, "%s", temp_path("host.json"));
  snprintf(mounted, sizeof mounted, "%s", temp_path("mounted.json"));
  make_empty_file(host);
  make_empty_file(mounted);
  if (mount(host, mounted, "none", MS_BIND, NULL) != 0) {
    cr_skip_test("cannot bind-mount a file here: %s", strerror(errno));
  }
  ordo_engine* e = traced_engine(ORDO_ENGINE_POOLED, temp_path("unused.json"));
  push_named(e, "through-the-mount", 0, NULL, 0, NULL, 0);
  ST(ordo_wait_for_all(e), ORDO_OK);
  ST(ordo_engine_write_trace(e, mounted), ORDO_OK);
  ST(ordo_engine_destroy(e), ORDO_OK);
  umount(mounted);
  cr_assert_eq(check_trace(host, "events=1 name:through-the-mount=1"), 0,
               "the trace did not reach the mounted file");
}

/* A rewritten trace file keeps its permission bits (op names may be private: 0600 stayed 0600
 * only for a new file before), and a file with another hard link is written in place, so that
 * the other name sees the new trace instead of keeping the old one. */
Test(trace, a_rewritten_file_keeps_its_mode_and_its_hard_links) {
  char path[128], link_path[128];
  snprintf(path, sizeof path, "%s", temp_path("private.json"));
  snprintf(link_path, sizeof link_path, "%s", temp_path("private-link.json"));
  make_empty_file(path);
  cr_assert_eq(chmod(path, 0600), 0);
  ordo_engine* e = traced_engine(ORDO_ENGINE_POOLED, temp_path("unused.json"));
  push_named(e, "private", 0, NULL, 0, NULL, 0);
  ST(ordo_wait_for_all(e), ORDO_OK);
  ST(ordo_engine_write_trace(e, path), ORDO_OK);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0);
  cr_assert_eq(st.st_mode & 07777, 0600, "mode %o after the rewrite", st.st_mode & 07777);

  cr_assert_eq(link(path, link_path), 0, "%s", strerror(errno));
  push_named(e, "second", 0, NULL, 0, NULL, 0);
  ST(ordo_wait_for_all(e), ORDO_OK);
  ST(ordo_engine_write_trace(e, path), ORDO_OK);
  struct stat a, b;
  cr_assert_eq(stat(path, &a), 0);
  cr_assert_eq(stat(link_path, &b), 0);
  cr_assert_eq(a.st_ino, b.st_ino, "the two names no longer share a file");
  cr_assert_eq(check_trace(link_path, "events=2 name:second=1"), 0);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* ordo_engine_write_trace to a FIFO nobody reads yet blocks in open; meanwhile
 * ordo_engine_stats (documented lock-free for pushes, callable from ops) used to wait for it,
 * since the writer held the row list's lock throughout. */
typedef struct fifo_write {
  ordo_engine* e;
  const char* path;
  atomic_int tid;
  atomic_int st;
  atomic_int done;
} fifo_write;

static void* write_to_fifo(void* p) {
  fifo_write* w = p;
  atomic_store(&w->tid, tu_gettid());
  atomic_store(&w->st, ordo_engine_write_trace(w->e, w->path));
  atomic_store(&w->done, 1);
  return NULL;
}

typedef struct stats_call {
  ordo_engine* e;
  atomic_int st;
  atomic_int done;
} stats_call;

static void* call_stats(void* p) {
  stats_call* c = p;
  ordo_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  atomic_store(&c->st, ordo_engine_stats(c->e, &s));
  atomic_store(&c->done, 1);
  return NULL;
}

Test(trace, stats_do_not_wait_for_a_trace_being_written) {
  char path[128];
  snprintf(path, sizeof path, "%s", temp_path("slow.fifo"));
  cr_assert_eq(mkfifo(path, 0600), 0, "%s", strerror(errno));
  ordo_engine* e = traced_engine(ORDO_ENGINE_POOLED, temp_path("unused.json"));
  push_named(e, "before-the-fifo", 0, NULL, 0, NULL, 0);
  ST(ordo_wait_for_all(e), ORDO_OK);
  fifo_write w = {.e = e, .path = path};
  atomic_init(&w.tid, 0);
  atomic_init(&w.st, -1);
  atomic_init(&w.done, 0);
  pthread_t writer;
  cr_assert_eq(pthread_create(&writer, NULL, write_to_fifo, &w), 0);
  /* The writer is blocked opening the FIFO before the stats call (a 100 ms sleep made that only
   * likely: a writer that came later found the call done, and the test checked nothing). */
  uint64_t deadline = tu_now_ms() + 5000;
  while (atomic_load(&w.tid) == 0 && tu_now_ms() < deadline) tu_sleep_us(50);
  bool blocked =
      atomic_load(&w.tid) != 0 && tu_wait_thread_parked(atomic_load(&w.tid), SYS_openat, -1, 5000);
  stats_call c = {.e = e};
  atomic_init(&c.st, -1);
  atomic_init(&c.done, 0);
  pthread_t caller;
  cr_assert_eq(pthread_create(&caller, NULL, call_stats, &c), 0);
  bool returned = tu_wait_eq(&c.done, 1, 2000);
  int reader = open(path, O_RDONLY); /* lets the writer go on, whatever happened */
  cr_assert_geq(reader, 0, "%s", strerror(errno));
  char buf[4096];
  while (read(reader, buf, sizeof buf) > 0) {
  }
  close(reader);
  cr_assert_eq(pthread_join(writer, NULL), 0);
  cr_assert_eq(pthread_join(caller, NULL), 0);
  cr_assert(blocked,
            "the trace writer was not seen blocked opening the FIFO (the order the test "
            "needs)");
  cr_assert(returned, "ordo_engine_stats waited for a trace being written to a FIFO");
  ST(atomic_load(&c.st), ORDO_OK);
  ST(atomic_load(&w.st), ORDO_OK);
  ST(ordo_engine_destroy(e), ORDO_OK);
}

/* Passing getenv("ORDO_TRACE") itself as trace_path is setting the field: the engine writes
 * exactly that path (it used to be taken for the environment's, by pointer, and numbered). */
Test(trace, a_config_path_equal_to_the_env_pointer_is_the_config_path) {
  const char* path = temp_path("env-pointer.json");
  cr_assert_eq(setenv("ORDO_TRACE", path, 1), 0);
  ordo_engine* first = NULL;
  ST(ordo_engine_create(NULL, &first), ORDO_OK); /* the environment's first engine */
  ST(ordo_engine_destroy(first), ORDO_OK);
  ordo_engine* e = traced_engine(ORDO_ENGINE_POOLED, getenv("ORDO_TRACE"));
  unsetenv("ORDO_TRACE");
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  ST(ordo_engine_get_config(e, &cfg), ORDO_OK);
  cr_assert_str_eq(cfg.trace_path, path);
  ST(ordo_engine_destroy(e), ORDO_OK);
}
