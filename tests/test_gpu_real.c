/*
 * Real-GPU tests (issue #25 item 7, first part): GPU ops on a machine with a GPU and a CUDA
 * driver. Where there is none (ordo_device_count is 0: built without CUDA, no runtime, no
 * driver, no device), every test is skipped with the reason a GPU push gives. The simulated
 * device (tests/internal/test_gpu_sim.cpp) covers the engine's GPU path on machines without one.
 * This file runs no kernel (its GPU ops enqueue no work, which still exercises streams and
 * events) and needs no CUDA library; the tests with real kernels (vector add, H2D -> kernel ->
 * D2H chains, failing kernels) are tests/test_gpu_kernels.c, a program of its own linked with
 * the CUDA runtime, built where the toolkit is.
 *
 * Callbacks never assert: they record into atomics and the test thread asserts afterwards.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "ordo/ordo.h"

TestSuite(gpu_real, .timeout = 60.0);

typedef struct {
  atomic_int calls;
  atomic_int null_streams;
  atomic_int wrong_device;
  int32_t want_device;
} gpu_seen;

static int32_t record_info(ordo_exec* exec, void* ud) {
  gpu_seen* s = ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(exec, &info) != ORDO_OK) return 1;
  atomic_fetch_add(&s->calls, 1);
  if (info.stream == NULL) atomic_fetch_add(&s->null_streams, 1);
  if (info.device_type != ORDO_DEVICE_GPU || info.device_id != s->want_device) {
    atomic_fetch_add(&s->wrong_device, 1);
  }
  return 0;
}

static char g_why[512];

/* The number of GPUs; 0 with g_why set from the ORDO_ERR_NO_DEVICE of a GPU push. */
static int32_t gpus_or_reason(void) {
  int32_t n = 0;
  cr_assert_eq(ordo_device_count(&n), ORDO_OK);
  if (n > 0) return n;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(NULL, &e), ORDO_OK, "%s", ordo_last_error_message());
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  gpu_seen unused = {0};
  ordo_status s = ordo_opr_push(e, record_info, &unused, NULL, 0, NULL, 0, &o);
  snprintf(g_why, sizeof g_why, "%s",
           s == ORDO_ERR_NO_DEVICE ? ordo_last_error_message() : "GPU push was not NO_DEVICE");
  cr_assert_eq(s, ORDO_ERR_NO_DEVICE, "device count 0 but a GPU push gave %d", (int)s);
  ordo_engine_destroy(e);
  return 0;
}

#define NEED_GPU()                                                \
  do {                                                            \
    if (gpus_or_reason() == 0) cr_skip_test("no GPU: %s", g_why); \
  } while (0)

Test(gpu_real, device_count_positive) {
  NEED_GPU();
  int32_t n = 0;
  cr_assert_eq(ordo_device_count(&n), ORDO_OK);
  cr_assert(n > 0 && n <= 16, "device count %d", n);
}

Test(gpu_real, exec_info_has_stream) {
  NEED_GPU();
  int32_t n = 0;
  ordo_device_count(&n);
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(NULL, &e), ORDO_OK, "%s", ordo_last_error_message());
  for (int32_t d = 0; d < n; ++d) {
    gpu_seen seen = {0};
    seen.want_device = d;
    ordo_var v;
    cr_assert_eq(ordo_var_new(e, &v), ORDO_OK);
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.device_type = ORDO_DEVICE_GPU;
    o.device_id = d;
    for (int i = 0; i < 16; ++i) {
      cr_assert_eq(ordo_opr_push(e, record_info, &seen, NULL, 0, &v, 1, &o), ORDO_OK, "%s",
                   ordo_last_error_message());
    }
    cr_assert_eq(ordo_wait_for_var(e, v), ORDO_OK, "%s", ordo_last_error_message());
    cr_assert_eq(atomic_load(&seen.calls), 16);
    cr_assert_eq(atomic_load(&seen.null_streams), 0, "a GPU op saw a NULL stream");
    cr_assert_eq(atomic_load(&seen.wrong_device), 0, "a GPU op saw the wrong device");
    ordo_var_delete(e, v);
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
