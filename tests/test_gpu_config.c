/* The GPU fields of ordo_engine_config (issue #25): gpu_compute_streams and gpu_stream_waits,
 * their defaults, environment overrides, explicit values, rejected values and what
 * ordo_engine_get_config reports. The streams themselves are tested on the simulated GPU
 * (tests/internal/test_gpu_sim.cpp): this machine may have none. */
#include <criterion/criterion.h>
#include <ordo/ordo.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

TestSuite(gpu_config, .timeout = 30.0);

static void clear_gpu_env(void) {
  unsetenv("ORDO_GPU_STREAMS");
  unsetenv("ORDO_GPU_STREAM_WAITS");
}

static ordo_engine_config config(int32_t streams, int32_t waits) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_POOLED;
  cfg.cpu_threads = 2;
  cfg.gpu_compute_streams = streams;
  cfg.gpu_stream_waits = waits;
  return cfg;
}

/* Creates an engine from (streams, waits) and returns what get_config reports. */
static ordo_engine_config effective(int32_t streams, int32_t waits) {
  ordo_engine_config cfg = config(streams, waits);
  ordo_engine* e = NULL;
  ordo_status s = ordo_engine_create(&cfg, &e);
  cr_assert_eq(s, ORDO_OK, "create: %s", ordo_last_error_message());
  ordo_engine_config out;
  ordo_engine_config_init(&out);
  out.gpu_compute_streams = -77;
  out.gpu_stream_waits = -77;
  cr_assert_eq(ordo_engine_get_config(e, &out), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  return out;
}

static void expect_rejected(int32_t streams, int32_t waits, const char* needle) {
  ordo_engine_config cfg = config(streams, waits);
  ordo_engine* e = (ordo_engine*)&cfg;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_ERR_INVALID_ARGUMENT,
               "streams %d waits %d accepted", (int)streams, (int)waits);
  cr_assert_null(e);
  cr_assert(strstr(ordo_last_error_message(), needle) != NULL, "message '%s' lacks '%s'",
            ordo_last_error_message(), needle);
}

Test(gpu_config, init_leaves_both_at_zero) {
  ordo_engine_config cfg;
  memset(&cfg, 0xAB, sizeof cfg);
  ordo_engine_config_init(&cfg);
  cr_assert_eq(cfg.gpu_compute_streams, 0);
  cr_assert_eq(cfg.gpu_stream_waits, 0);
}

Test(gpu_config, defaults_are_4_streams_and_waits_on) {
  clear_gpu_env();
  ordo_engine_config c = effective(0, 0);
  cr_assert_eq(c.gpu_compute_streams, 4);
  cr_assert_eq(c.gpu_stream_waits, 1);
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(NULL, &e), ORDO_OK);
  ordo_engine_config out;
  ordo_engine_config_init(&out);
  cr_assert_eq(ordo_engine_get_config(e, &out), ORDO_OK);
  cr_assert_eq(out.gpu_compute_streams, 4, "a NULL config takes the defaults too");
  cr_assert_eq(out.gpu_stream_waits, 1);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

Test(gpu_config, environment_overrides_the_default) {
  clear_gpu_env();
  setenv("ORDO_GPU_STREAMS", "7", 1);
  setenv("ORDO_GPU_STREAM_WAITS", "0", 1);
  ordo_engine_config c = effective(0, 0);
  cr_assert_eq(c.gpu_compute_streams, 7);
  cr_assert_eq(c.gpu_stream_waits, -1);
  setenv("ORDO_GPU_STREAM_WAITS", "1", 1);
  cr_assert_eq(effective(0, 0).gpu_stream_waits, 1);
}

Test(gpu_config, explicit_field_beats_the_environment) {
  clear_gpu_env();
  setenv("ORDO_GPU_STREAMS", "7", 1);
  setenv("ORDO_GPU_STREAM_WAITS", "0", 1);
  ordo_engine_config c = effective(2, 1);
  cr_assert_eq(c.gpu_compute_streams, 2);
  cr_assert_eq(c.gpu_stream_waits, 1);
  clear_gpu_env();
  c = effective(64, -1);
  cr_assert_eq(c.gpu_compute_streams, 64);
  cr_assert_eq(c.gpu_stream_waits, -1);
  cr_assert_eq(effective(1, 0).gpu_compute_streams, 1);
}

Test(gpu_config, bad_fields_are_invalid_argument) {
  clear_gpu_env();
  expect_rejected(-1, 0, "gpu_compute_streams=-1");
  expect_rejected(65, 0, "gpu_compute_streams=65");
  expect_rejected(INT32_MIN, 0, "0..64");
  expect_rejected(0, 2, "gpu_stream_waits=2");
  expect_rejected(0, -2, "gpu_stream_waits=-2");
  expect_rejected(0, INT32_MAX, "use 1 (on), -1 (off)");
}

Test(gpu_config, bad_environment_is_invalid_argument) {
  const char* streams[] = {"0", "65", "-1", "4x", " 4", "lots"};
  for (size_t i = 0; i < sizeof streams / sizeof *streams; i++) {
    clear_gpu_env();
    setenv("ORDO_GPU_STREAMS", streams[i], 1);
    expect_rejected(0, 0, "ORDO_GPU_STREAMS");
    /* An explicit field does not read the variable. */
    cr_assert_eq(effective(3, 0).gpu_compute_streams, 3);
  }
  const char* waits[] = {"2", "-1", "on", "yes", "01"};
  for (size_t i = 0; i < sizeof waits / sizeof *waits; i++) {
    clear_gpu_env();
    setenv("ORDO_GPU_STREAM_WAITS", waits[i], 1);
    expect_rejected(0, 0, "ORDO_GPU_STREAM_WAITS");
    cr_assert_eq(effective(0, -1).gpu_stream_waits, -1);
  }
}

/* A caller compiled against the 48-byte struct (before these fields) gets the defaults, and
 * get_config writes no byte past its struct_size. */
Test(gpu_config, older_callers_get_the_defaults) {
  clear_gpu_env();
  unsigned char buf[sizeof(ordo_engine_config) + 8];
  memset(buf, 0xCD, sizeof buf);
  ordo_engine_config_init_sized((ordo_engine_config*)buf, 48);
  cr_assert_eq(buf[48], 0xCD, "init wrote past the old size");
  ((ordo_engine_config*)buf)->kind = ORDO_ENGINE_POOLED;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create((ordo_engine_config*)buf, &e), ORDO_OK, "%s",
               ordo_last_error_message());
  memset(buf, 0xCD, sizeof buf);
  ((ordo_engine_config*)buf)->struct_size = 48;
  cr_assert_eq(ordo_engine_get_config(e, (ordo_engine_config*)buf), ORDO_OK);
  cr_assert_eq(buf[48], 0xCD, "get_config wrote past the caller's size");
  ordo_engine_config full;
  ordo_engine_config_init(&full);
  cr_assert_eq(ordo_engine_get_config(e, &full), ORDO_OK);
  cr_assert_eq(full.gpu_compute_streams, 4);
  cr_assert_eq(full.gpu_stream_waits, 1);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}
