/* What the two StarPU programs (bench_starpu, cholesky_starpu) share. */
#ifndef ORDO_BENCH_STARPU_COMMON_H
#define ORDO_BENCH_STARPU_COMMON_H

#include <starpu.h>
#include <string.h>

/* Whether StarPU has a scheduler of that name: given an unknown one, starpu_init would quietly
 * fall back to its default and the result would carry the wrong name. */
static inline int starpu_scheduler_exists(const char* name) {
  struct starpu_sched_policy** p = starpu_sched_get_predefined_policies();
  for (; *p; p++)
    if (!strcmp((*p)->policy_name, name)) return 1;
  return 0;
}

#endif /* ORDO_BENCH_STARPU_COMMON_H */
