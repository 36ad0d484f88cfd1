/*
 * Reproducer (found by fuzz_api): calls that are rejected with ORDO_ERR_INVALID_HANDLE because a
 * var was deleted are counted by ordo_engine_stats as caller ops pushed and completed. The
 * header says `pushed` counts "ops accepted", and not the internal ops of waits and deletes.
 *
 * Build and run against any build of the library, e.g.:
 *   cc -std=c11 -Iinclude fuzz/repro/stats_count_rejected_pushes.c -Lbuild/src -lordo \
 *      -Wl,-rpath,$PWD/build/src -o /tmp/repro && /tmp/repro
 * Exits 0 when the counters are right, 1 (printing them) when they are not.
 */
#include <ordo/ordo.h>
#include <stdio.h>
#include <string.h>

static int32_t noop(ordo_exec* x, void* u) {
  (void)x;
  (void)u;
  return 0;
}

static ordo_stats stats_of(ordo_engine* e) {
  ordo_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  ordo_engine_stats(e, &s);
  return s;
}

int main(void) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_NAIVE;
  ordo_engine* e = NULL;
  if (ordo_engine_create(&cfg, &e) != ORDO_OK) return 2;
  ordo_var v = 0;
  ordo_var_new(e, &v);
  ordo_var_delete(e, v);
  ordo_wait_for_all(e);
  ordo_stats before = stats_of(e);

  /* Four calls, all rejected: nothing is accepted. */
  ordo_status s1 = ordo_opr_push(e, noop, NULL, &v, 1, NULL, 0, NULL);
  ordo_status s2 = ordo_wait_for_var(e, v);
  ordo_status s3 = ordo_var_clear_error(e, v);
  ordo_status s4 = ordo_var_delete(e, v);
  ordo_wait_for_all(e);
  ordo_stats after = stats_of(e);

  printf("statuses: %s %s %s %s\n", ordo_status_string(s1), ordo_status_string(s2),
         ordo_status_string(s3), ordo_status_string(s4));
  printf("pushed +%llu, completed +%llu (expected +0, +0)\n",
         (unsigned long long)(after.pushed - before.pushed),
         (unsigned long long)(after.completed - before.completed));
  int bad = after.pushed != before.pushed || after.completed != before.completed;
  ordo_engine_destroy(e);
  return bad;
}
