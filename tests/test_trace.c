/*
 * §9 traces: with ordo_engine_config.trace_path (or ORDO_TRACE) set, every op is recorded and
 * written as Chrome trace JSON at shutdown or by ordo_engine_write_trace. The JSON is checked by
 * tests/check_trace.py (Python is always there: meson runs on it): it must parse, and it must
 * hold exactly the expected events.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static ordo_engine* traced_engine(int32_t kind, const char* path) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  cfg.trace_path = path;
  ordo_engine* e = NULL;
  ST(ordo_engine_create(&cfg, &e), ORDO_OK);
  return e;
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

Test(trace, env_ORDO_TRACE_turns_it_on_and_get_config_reports_the_path) {
  const char* path = temp_path("env.json");
  cr_assert_eq(setenv("ORDO_TRACE", path, 1), 0);
  ordo_engine* e = NULL;
  ST(ordo_engine_create(NULL, &e), ORDO_OK);
  ordo_engine_config got;
  ordo_engine_config_init(&got);
  ST(ordo_engine_get_config(e, &got), ORDO_OK);
  cr_assert_not_null(got.trace_path);
  cr_assert_str_eq(got.trace_path, path);
  ordo_var v;
  ST(ordo_var_new(e, &v), ORDO_OK);
  push_named(e, "from-env", 0, NULL, 0, &v, 1);
  ST(ordo_engine_destroy(e), ORDO_OK);
  unsetenv("ORDO_TRACE");
  cr_assert_eq(check_trace(path, "events=1 name:from-env=1"), 0);
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
  ST(ordo_engine_write_trace(e, "/nonexistent-dir/t.json"), ORDO_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(ordo_last_error_message(), "/nonexistent-dir/t.json") != NULL,
            "the message names the path: %s", ordo_last_error_message());
  ST(ordo_engine_destroy(e), ORDO_OK);
}
