/*
 * The last-error message is per thread and lives on the heap (allocated on a thread's first
 * error, freed when it exits; tests/check_so_limits.sh checks that the library's static TLS
 * stays small): a fresh thread reads "", each thread reads its own message, many threads that
 * fail once and exit leave the others' messages alone, and the full length is kept (up to the
 * 1,023-byte buffer).
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "test_util.h"

TestSuite(last_error, .timeout = 30.0);

typedef struct thread_result {
  char before[64];
  char after[256];
  ordo_status status;
  size_t len;
} thread_result;

static void* fail_once(void* arg) {
  thread_result* r = arg;
  snprintf(r->before, sizeof r->before, "%s", ordo_last_error_message());
  ordo_var v;
  r->status = ordo_var_new(NULL, &v);
  r->len = ordo_last_error_copy(r->after, sizeof r->after);
  return NULL;
}

Test(last_error, per_thread_and_freed_with_the_thread) {
  ordo_engine* e = NULL;
  TU_ASSERT_ST(tu_engine_create(ORDO_ENGINE_NAIVE, 0, &e), ORDO_OK, "create");
  TU_ASSERT_ST(ordo_var_delete(e, 12345), ORDO_ERR_INVALID_HANDLE, "delete");
  char mine[256];
  size_t mine_len = ordo_last_error_copy(mine, sizeof mine);
  cr_assert(strstr(mine, "ordo_var_delete") == mine, "%s", mine);
  for (int round = 0; round < 50; ++round) {
    enum { N = 8 };
    pthread_t t[N];
    thread_result r[N];
    memset(r, 0, sizeof r);
    for (int i = 0; i < N; ++i) pthread_create(&t[i], NULL, fail_once, &r[i]);
    for (int i = 0; i < N; ++i) pthread_join(t[i], NULL);
    for (int i = 0; i < N; ++i) {
      cr_assert_str_empty(r[i].before);
      cr_assert_eq(r[i].status, ORDO_ERR_INVALID_ARGUMENT);
      cr_assert(strstr(r[i].after, "ordo_var_new") == r[i].after, "%s", r[i].after);
      cr_assert_eq(r[i].len, strlen(r[i].after));
    }
  }
  char again[256];
  cr_assert_eq(ordo_last_error_copy(again, sizeof again), mine_len);
  cr_assert_str_eq(again, mine);
  cr_assert_str_eq(ordo_last_error_message(), mine);
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}

/* A long message (a long trace path) is cut at the buffer's 1,023 bytes, never overrun. */
Test(last_error, long_message_truncated) {
  char path[2048];
  memset(path, 'x', sizeof path - 1);
  path[0] = '/';
  memcpy(path + 1, "no-such-dir-", 12);
  path[sizeof path - 1] = '\0';
  ordo_engine* e = NULL;
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_NAIVE;
  cfg.trace_path = "/dev/null";
  TU_ASSERT_ST(ordo_engine_create(&cfg, &e), ORDO_OK, "create");
  ordo_status s = ordo_engine_write_trace(e, path);
  cr_assert_eq(s, ORDO_ERR_INVALID_ARGUMENT);
  size_t len = ordo_last_error_copy(NULL, 0);
  cr_assert(len > 0 && len <= 1023, "length %zu", len);
  cr_assert_eq(strlen(ordo_last_error_message()), len);
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}
