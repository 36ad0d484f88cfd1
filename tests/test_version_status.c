/* Version numbers, status names and the thread-local last-error message (SPEC §10). */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(version_status, .timeout = 30.0);

/* Makes one call that must fail with INVALID_ARGUMENT and leave a message on this thread. */
static ordo_status fail_invalid_argument(void) {
  return ordo_engine_create(NULL, NULL);
}

/* Makes one call that must fail with INVALID_HANDLE (a pointer ordo never handed out). */
static ordo_status fail_invalid_handle(void) {
  return ordo_engine_destroy((ordo_engine*)(uintptr_t)0x1234);
}

static char* dup_str(const char* s) {
  size_t n = strlen(s);
  char* p = malloc(n + 1);
  cr_assert_not_null(p);
  memcpy(p, s, n + 1);
  return p;
}

Test(version_status, version_number_matches_header) {
  cr_assert_eq(ordo_version(), (uint32_t)ORDO_VERSION_NUMBER, "ordo_version()=%u header=%u",
               (unsigned)ordo_version(), (unsigned)ORDO_VERSION_NUMBER);
  cr_assert_eq(ORDO_VERSION_NUMBER, 100, "0.1.0 encodes as 100");
}

Test(version_status, version_string_matches_macros) {
  const char* v = ordo_version_string();
  cr_assert_not_null(v);
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", ORDO_VERSION_MAJOR, ORDO_VERSION_MINOR,
           ORDO_VERSION_PATCH);
  cr_assert_str_eq(v, want);
  cr_assert_str_eq(v, "0.1.0");
  /* A static string: the same pointer every time. */
  cr_assert_eq(ordo_version_string(), v);
}

Test(version_status, status_string_names_every_code) {
  static const struct {
    ordo_status code;
    const char* name;
  } table[] = {
      {ORDO_OK, "ORDO_OK"},
      {ORDO_ERR_INVALID_ARGUMENT, "ORDO_ERR_INVALID_ARGUMENT"},
      {ORDO_ERR_INVALID_HANDLE, "ORDO_ERR_INVALID_HANDLE"},
      {ORDO_ERR_OP_FAILED, "ORDO_ERR_OP_FAILED"},
      {ORDO_ERR_TIMEOUT, "ORDO_ERR_TIMEOUT"},
      {ORDO_ERR_NO_DEVICE, "ORDO_ERR_NO_DEVICE"},
      {ORDO_ERR_SHUTDOWN, "ORDO_ERR_SHUTDOWN"},
      {ORDO_ERR_NO_MEMORY, "ORDO_ERR_NO_MEMORY"},
      {ORDO_ERR_INVALID_STATE, "ORDO_ERR_INVALID_STATE"},
      {ORDO_ERR_WOULD_DEADLOCK, "ORDO_ERR_WOULD_DEADLOCK"},
      {ORDO_ERR_UNSUPPORTED, "ORDO_ERR_UNSUPPORTED"},
      {ORDO_ERR_INTERNAL, "ORDO_ERR_INTERNAL"},
      {ORDO_ERR_TOKENS_DROPPED, "ORDO_ERR_TOKENS_DROPPED"},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    const char* s = ordo_status_string(table[i].code);
    cr_assert_not_null(s, "code %d", (int)table[i].code);
    cr_assert_str_eq(s, table[i].name, "code %d", (int)table[i].code);
  }
}

Test(version_status, status_string_unknown_codes) {
  const ordo_status unknown[] = {-1, 13, 14, 100, 10000, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    const char* s = ordo_status_string(unknown[i]);
    cr_assert_not_null(s, "code %d", (int)unknown[i]);
    cr_assert_str_eq(s, "ORDO_ERR_UNKNOWN", "code %d", (int)unknown[i]);
  }
}

Test(version_status, status_string_is_static) {
  const char* a = ordo_status_string(ORDO_ERR_TIMEOUT);
  const char* b = ordo_status_string(ORDO_ERR_TIMEOUT);
  cr_assert_eq(a, b);
  cr_assert_str_eq(a, "ORDO_ERR_TIMEOUT");
}

Test(version_status, last_error_empty_on_fresh_thread) {
  /* The test body runs in a fresh process and no ordo call has failed on this thread yet. */
  const char* m = ordo_last_error_message();
  cr_assert_not_null(m);
  cr_assert_str_eq(m, "");
  char buf[8];
  memset(buf, 'Z', sizeof buf);
  cr_assert_eq(ordo_last_error_copy(buf, sizeof buf), 0u);
  cr_assert_eq(buf[0], '\0');
}

Test(version_status, last_error_set_after_failures) {
  cr_assert_eq(fail_invalid_argument(), ORDO_ERR_INVALID_ARGUMENT);
  const char* m = ordo_last_error_message();
  cr_assert_not_null(m);
  cr_assert_gt(strlen(m), 0u, "message after INVALID_ARGUMENT is empty");

  cr_assert_eq(fail_invalid_handle(), ORDO_ERR_INVALID_HANDLE);
  m = ordo_last_error_message();
  cr_assert_not_null(m);
  cr_assert_gt(strlen(m), 0u, "message after INVALID_HANDLE is empty");

  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(NULL, &v), ORDO_ERR_INVALID_ARGUMENT);
  m = ordo_last_error_message();
  cr_assert_gt(strlen(m), 0u, "message after var_new(NULL) is empty");
}

Test(version_status, last_error_after_bad_var_handle) {
  ordo_engine* e = NULL;
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_POOLED;
  cfg.cpu_threads = 2;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, (ordo_var)0xdeadbeef12345678ull), ORDO_ERR_INVALID_HANDLE);
  cr_assert_gt(strlen(ordo_last_error_message()), 0u);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(version_status, last_error_copy_lengths_and_truncation) {
  cr_assert_eq(fail_invalid_argument(), ORDO_ERR_INVALID_ARGUMENT);
  char* msg = dup_str(ordo_last_error_message());
  size_t len = strlen(msg);
  cr_assert_gt(len, 3u, "message too short to test truncation: '%s'", msg);

  /* NULL buf or cap 0: nothing written, full length returned. */
  cr_assert_eq(ordo_last_error_copy(NULL, 0), len);
  cr_assert_eq(ordo_last_error_copy(NULL, 64), len);
  char buf[512];
  memset(buf, 'Z', sizeof buf);
  cr_assert_eq(ordo_last_error_copy(buf, 0), len);
  for (size_t i = 0; i < sizeof buf; i++)
    cr_assert_eq(buf[i], 'Z', "byte %zu written with cap 0", i);

  /* cap 1: only the NUL. */
  cr_assert_eq(ordo_last_error_copy(buf, 1), len);
  cr_assert_eq(buf[0], '\0');
  cr_assert_eq(buf[1], 'Z', "wrote past cap 1");

  /* cap 4: three characters and a NUL, nothing beyond. */
  memset(buf, 'Z', sizeof buf);
  cr_assert_eq(ordo_last_error_copy(buf, 4), len);
  cr_assert_eq(memcmp(buf, msg, 3), 0);
  cr_assert_eq(buf[3], '\0');
  for (size_t i = 4; i < sizeof buf; i++)
    cr_assert_eq(buf[i], 'Z', "byte %zu written past cap 4", i);

  /* cap == len: truncated by one character. */
  memset(buf, 'Z', sizeof buf);
  if (len < sizeof buf) {
    cr_assert_eq(ordo_last_error_copy(buf, len), len);
    cr_assert_eq(memcmp(buf, msg, len - 1), 0);
    cr_assert_eq(buf[len - 1], '\0');
    cr_assert_eq(buf[len], 'Z');
  }

  /* cap == len + 1 and larger: the whole message. */
  if (len + 1 < sizeof buf) {
    memset(buf, 'Z', sizeof buf);
    cr_assert_eq(ordo_last_error_copy(buf, len + 1), len);
    cr_assert_str_eq(buf, msg);
    cr_assert_eq(buf[len + 1], 'Z');
    memset(buf, 'Z', sizeof buf);
    cr_assert_eq(ordo_last_error_copy(buf, sizeof buf), len);
    cr_assert_str_eq(buf, msg);
  }

  /* Copying does not change the message. */
  cr_assert_str_eq(ordo_last_error_message(), msg);
  free(msg);
}

struct thread_result {
  int initial_empty;     /* message was "" before any ordo call on that thread */
  int initial_copy_zero; /* ordo_last_error_copy returned 0 then */
  ordo_status status;    /* status of the failing call */
  char msg[512];         /* message after the failing call */
};

static void* failing_thread(void* arg) {
  struct thread_result* r = arg;
  const char* m = ordo_last_error_message();
  r->initial_empty = (m != NULL && m[0] == '\0');
  r->initial_copy_zero = (ordo_last_error_copy(NULL, 0) == 0);
  ordo_var v = 0;
  r->status = ordo_var_new(NULL, &v); /* INVALID_ARGUMENT */
  ordo_last_error_copy(r->msg, sizeof r->msg);
  return NULL;
}

Test(version_status, last_error_is_thread_local_fresh_main) {
  /* Main thread has no message; a failure on another thread must not give it one. */
  cr_assert_str_eq(ordo_last_error_message(), "");
  struct thread_result r;
  memset(&r, 0, sizeof r);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, failing_thread, &r), 0);
  cr_assert_eq(pthread_join(t, NULL), 0);
  cr_assert(r.initial_empty, "a fresh thread's message was not empty");
  cr_assert(r.initial_copy_zero, "a fresh thread's ordo_last_error_copy length was not 0");
  cr_assert_eq(r.status, ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_gt(strlen(r.msg), 0u, "the other thread's message is empty");
  cr_assert_str_eq(ordo_last_error_message(), "",
                   "a failure on another thread changed this thread's message");
}

Test(version_status, last_error_is_thread_local_both_failed) {
  cr_assert_eq(fail_invalid_handle(), ORDO_ERR_INVALID_HANDLE);
  char* mine = dup_str(ordo_last_error_message());
  cr_assert_gt(strlen(mine), 0u);

  /* Another thread starts fresh even though this one has a message. */
  struct thread_result r;
  memset(&r, 0, sizeof r);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, failing_thread, &r), 0);
  cr_assert_eq(pthread_join(t, NULL), 0);
  cr_assert(r.initial_empty, "a new thread saw another thread's message");
  cr_assert_eq(r.status, ORDO_ERR_INVALID_ARGUMENT);
  cr_assert_gt(strlen(r.msg), 0u);

  cr_assert_str_eq(ordo_last_error_message(), mine,
                   "this thread's message changed after a failure on another thread");
  free(mine);
}
