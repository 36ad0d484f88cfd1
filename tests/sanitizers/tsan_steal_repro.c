/*
 * A minimal ThreadSanitizer reproducer for ordo's work-stealing hand-off (not part of the suite;
 * the suite's TSan run covers the same path). Ops that each mutate one of 16 vars and read
 * another, run by a pooled engine with two workers: an op's data (plain counters here, and
 * ordo's own VarSlot::fifo_head) passes from the worker that completed the previous op of a var
 * to the one that runs the next, often through a steal from the first worker's WorkDeque.
 *
 * WorkDeque::push published with a release fence followed by a relaxed store of bottom_. That is
 * correct C++ (fence-to-acquire synchronization), but TSan does not model fences, so without
 * the ORDO_UNDER_TSAN branch in src/exec/work_deque.h it reported the hand-off as a data race
 * (VarSlot::pop at src/core/var_slot.h:142 against VarSlot::complete at var_slot.h:106, and the
 * counter below). With the release store that TSan sees, it reports nothing.
 *
 *   meson setup B -Db_sanitize=thread -Db_lundef=false -Dstatic_libstdcxx=false \
 *     -Dcpp_args=-Wno-tsan && ninja -C B src/libordo.so
 *   cc -fsanitize=thread -g -I include tests/sanitizers/tsan_steal_repro.c -LB/src -lordo \
 *     -Wl,-rpath,B/src -o repro && TSAN_OPTIONS=halt_on_error=1 ./repro
 */
#include <ordo/ordo.h>
#include <stdint.h>
#include <stdio.h>

enum { kOps = 20000, kVars = 16 };

/* Plain on purpose: only ordo's ordering protects them. Op i mutates var w[i], reads var r[i]. */
static long g_value[kVars];
static int g_w[kOps], g_r[kOps];

static int32_t write_one_read_one(ordo_exec* exec, void* user_data) {
  (void)exec;
  int i = (int)(intptr_t)user_data;
  ++g_value[g_w[i]];
  volatile long seen = g_value[g_r[i]]; /* a read of the var it reads */
  (void)seen;
  return 0;
}

int main(void) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_POOLED;
  cfg.cpu_threads = 2;
  ordo_engine* e = NULL;
  ordo_var v[kVars];
  if (ordo_engine_create(&cfg, &e) != ORDO_OK) return 1;
  for (int k = 0; k < kVars; ++k) {
    if (ordo_var_new(e, &v[k]) != ORDO_OK) return 1;
  }
  unsigned rng = 99u;
  for (int i = 0; i < kOps; ++i) {
    rng = rng * 1664525u + 1013904223u;
    g_w[i] = (int)((rng >> 8) % kVars);
    g_r[i] = (int)((rng >> 16) % kVars);
    if (ordo_opr_push(e, write_one_read_one, (void*)(intptr_t)i, &v[g_r[i]], 1, &v[g_w[i]], 1,
                      NULL) != ORDO_OK)
      return 1;
  }
  ordo_status s = ordo_wait_for_all(e);
  long total = 0;
  for (int k = 0; k < kVars; ++k) total += g_value[k];
  ordo_engine_destroy(e);
  int ok = s == ORDO_OK && total == kOps;
  printf("%s: %ld of %d ops ran\n", ok ? "ok" : "FAILED", total, kOps);
  return ok ? 0 : 1;
}
