/*
 * The public structs as an FFI sees them: no padding anywhere (the sizes of the fields add up
 * to the struct's size, so every byte inside a caller's struct_size is a field a binding
 * declares and zero-fills), ordo_struct_size reports the library's sizes, and the reserved
 * fields that fill the former holes must be 0.
 */
#include <criterion/criterion.h>
#include <ordo/pipeline.h>
#include <stddef.h>

#include "test_util.h"

#define FSIZE(type, field) sizeof(((type*)0)->field)

/* Checked at compile time: a padding hole (or a field added without updating this list) fails
 * the build of the test suite. */
#define SUM_ENGINE_CONFIG                                                                     \
  (FSIZE(ordo_engine_config, struct_size) + FSIZE(ordo_engine_config, kind) +                 \
   FSIZE(ordo_engine_config, cpu_threads) + FSIZE(ordo_engine_config, cpu_priority_threads) + \
   FSIZE(ordo_engine_config, copy_threads) + FSIZE(ordo_engine_config, max_pending) +         \
   FSIZE(ordo_engine_config, flags) + FSIZE(ordo_engine_config, reserved0) +                  \
   FSIZE(ordo_engine_config, next) + FSIZE(ordo_engine_config, trace_path) +                  \
   FSIZE(ordo_engine_config, gpu_compute_streams) + FSIZE(ordo_engine_config, gpu_stream_waits))
_Static_assert(SUM_ENGINE_CONFIG == sizeof(ordo_engine_config), "ordo_engine_config has padding");
_Static_assert(sizeof(ordo_engine_config) == 56, "ordo_engine_config changed size");
_Static_assert(offsetof(ordo_engine_config, gpu_compute_streams) == 48,
               "ordo_engine_config grows at its end");
_Static_assert(offsetof(ordo_engine_config, next) == 32, "ordo_engine_config.next moved");

#define SUM_PUSH_OPTS                                                     \
  (FSIZE(ordo_push_opts, struct_size) + FSIZE(ordo_push_opts, priority) + \
   FSIZE(ordo_push_opts, prop) + FSIZE(ordo_push_opts, device_type) +     \
   FSIZE(ordo_push_opts, device_id) + FSIZE(ordo_push_opts, reserved0) +  \
   FSIZE(ordo_push_opts, free_fn) + FSIZE(ordo_push_opts, name) + FSIZE(ordo_push_opts, next))
_Static_assert(SUM_PUSH_OPTS == sizeof(ordo_push_opts), "ordo_push_opts has padding");
_Static_assert(sizeof(ordo_push_opts) == 48, "ordo_push_opts changed size");
_Static_assert(offsetof(ordo_push_opts, free_fn) == 24, "ordo_push_opts.free_fn moved");

#define SUM_STATS                                                                             \
  (FSIZE(ordo_stats, struct_size) + FSIZE(ordo_stats, workers) + FSIZE(ordo_stats, pushed) +  \
   FSIZE(ordo_stats, completed) + FSIZE(ordo_stats, failed) + FSIZE(ordo_stats, skipped) +    \
   FSIZE(ordo_stats, pending) + FSIZE(ordo_stats, ready) + FSIZE(ordo_stats, trace_records) + \
   FSIZE(ordo_stats, trace_dropped) + FSIZE(ordo_stats, queue_ready))
_Static_assert(SUM_STATS == sizeof(ordo_stats), "ordo_stats has padding");

#define SUM_QUEUE_STATS                                                        \
  (FSIZE(ordo_queue_stats, struct_size) + FSIZE(ordo_queue_stats, queues) +    \
   FSIZE(ordo_queue_stats, device_type) + FSIZE(ordo_queue_stats, device_id) + \
   FSIZE(ordo_queue_stats, prop) + FSIZE(ordo_queue_stats, workers) +          \
   FSIZE(ordo_queue_stats, ready) + FSIZE(ordo_queue_stats, name))
_Static_assert(SUM_QUEUE_STATS == sizeof(ordo_queue_stats), "ordo_queue_stats has padding");

#define SUM_EXEC_INFO                                                                              \
  (FSIZE(ordo_exec_info, struct_size) + FSIZE(ordo_exec_info, device_type) +                       \
   FSIZE(ordo_exec_info, device_id) + FSIZE(ordo_exec_info, worker_index) +                        \
   FSIZE(ordo_exec_info, priority) + FSIZE(ordo_exec_info, prop) + FSIZE(ordo_exec_info, stream) + \
   FSIZE(ordo_exec_info, engine) + FSIZE(ordo_exec_info, name))
_Static_assert(SUM_EXEC_INFO == sizeof(ordo_exec_info), "ordo_exec_info has padding");

#define SUM_PIPE (FSIZE(ordo_pipe, type) + FSIZE(ordo_pipe, fn) + FSIZE(ordo_pipe, user_data))
_Static_assert(SUM_PIPE == sizeof(ordo_pipe), "ordo_pipe has padding");
_Static_assert(sizeof(ordo_pipe) == 24, "ordo_pipe changed size");

TestSuite(abi_layout, .timeout = 30.0);

Test(abi_layout, struct_size_reports_the_library_sizes) {
  cr_assert_eq(ordo_struct_size(ORDO_STRUCT_ENGINE_CONFIG), sizeof(ordo_engine_config));
  cr_assert_eq(ordo_struct_size(ORDO_STRUCT_STATS), sizeof(ordo_stats));
  cr_assert_eq(ordo_struct_size(ORDO_STRUCT_QUEUE_STATS), sizeof(ordo_queue_stats));
  cr_assert_eq(ordo_struct_size(ORDO_STRUCT_PUSH_OPTS), sizeof(ordo_push_opts));
  cr_assert_eq(ordo_struct_size(ORDO_STRUCT_EXEC_INFO), sizeof(ordo_exec_info));
  cr_assert_eq(ordo_struct_size(0), 0);
  cr_assert_eq(ordo_struct_size(6), 0);
  cr_assert_eq(ordo_struct_size(-1), 0);
  cr_assert_eq(ordo_struct_size(INT32_MAX), 0);
}

/* Sized with ordo_struct_size, as a binding that declares the struct itself does. */
Test(abi_layout, init_sized_with_the_library_size) {
  unsigned char buf[256];
  memset(buf, 0xAB, sizeof buf);
  size_t n = ordo_struct_size(ORDO_STRUCT_PUSH_OPTS);
  ordo_push_opts_init_sized((ordo_push_opts*)buf, n);
  ordo_push_opts* o = (ordo_push_opts*)buf;
  cr_assert_eq(o->struct_size, n);
  cr_assert_eq(o->reserved0, 0);
  cr_assert_eq(buf[n], 0xAB, "wrote past the size");
  for (size_t i = 4; i < n; ++i) {
    /* every default of ordo_push_opts is 0 (ORDO_PROP_NORMAL, ORDO_DEVICE_CPU, NULLs) */
    cr_assert_eq(buf[i], 0, "byte %zu of the defaults is not 0", i);
  }
  memset(buf, 0xAB, sizeof buf);
  n = ordo_struct_size(ORDO_STRUCT_ENGINE_CONFIG);
  ordo_engine_config_init_sized((ordo_engine_config*)buf, n);
  cr_assert_eq(((ordo_engine_config*)buf)->reserved0, 0);
  cr_assert_eq(buf[n], 0xAB, "wrote past the size");
}

static int32_t noop(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  return 0;
}

Test(abi_layout, reserved_fields_must_be_zero) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_NAIVE;
  cfg.reserved0 = 1;
  ordo_engine* e = (ordo_engine*)&cfg;
  TU_ASSERT_ST(ordo_engine_create(&cfg, &e), ORDO_ERR_UNSUPPORTED, "config");
  cr_assert_null(e);
  cr_assert(strstr(ordo_last_error_message(), "reserved0") != NULL, "%s",
            ordo_last_error_message());
  cfg.reserved0 = 0;
  TU_ASSERT_ST(ordo_engine_create(&cfg, &e), ORDO_OK, "config");
  ordo_var v;
  TU_ASSERT_ST(ordo_var_new(e, &v), ORDO_OK, "var");
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.reserved0 = 0x80000000u;
  TU_ASSERT_ST(ordo_opr_push(e, noop, NULL, NULL, 0, &v, 1, &o), ORDO_ERR_UNSUPPORTED, "opts");
  cr_assert(strstr(ordo_last_error_message(), "reserved0") != NULL, "%s",
            ordo_last_error_message());
  ordo_opr p = 0;
  TU_ASSERT_ST(ordo_opr_new(e, noop, NULL, NULL, 0, &v, 1, &o, &p), ORDO_ERR_UNSUPPORTED, "opts");
  o.reserved0 = 0;
  TU_ASSERT_ST(ordo_opr_push(e, noop, NULL, NULL, 0, &v, 1, &o), ORDO_OK, "opts");
  TU_ASSERT_ST(ordo_engine_destroy(e), ORDO_OK, "destroy");
}
