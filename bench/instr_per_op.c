/* instr_per_op: the driver bench/instr_per_op.sh runs under callgrind to count ordo's
 * instructions per op (push + run + complete), issue #26 item 5. It pushes N ops of one
 * workload to an engine of 2 workers, waits for all and exits; the script runs it at two sizes
 * and divides the difference by the extra ops, so that creating the engine and the vars cancels
 * out. Callgrind serializes the threads, so the count is the work, not the waiting.
 *
 * Usage: instr_per_op KIND WORKLOAD N [LAUNCHES]
 *   KIND     naive | pooled | per_device
 *   WORKLOAD A (each op writes a var of its own, out of kVarsOfA made for every N, so that
 *            making them cancels out), B (every op writes one var: a chain),
 *            D (each op reads two vars and writes a third, bench_common.h's fixed sequence)
 *   LAUNCHES capture the N pushes once and launch the graph that many times (the script counts
 *            the second launch: instructions per replayed op)
 */
#define _GNU_SOURCE /* bench_common.h's core-to-core probe pins threads */
#include <ordo/ordo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

enum { kVarsOfA = 200000 }; /* the script's largest N */

static int32_t empty_op(ordo_exec* exec, void* user_data) {
  (void)exec;
  (void)user_data;
  return 0;
}

static int32_t kind_of(const char* name) {
  if (!strcmp(name, "naive")) return ORDO_ENGINE_NAIVE;
  if (!strcmp(name, "pooled")) return ORDO_ENGINE_POOLED;
  if (!strcmp(name, "per_device")) return ORDO_ENGINE_PER_DEVICE;
  fprintf(stderr, "instr_per_op: unknown kind '%s'\n", name);
  exit(2);
}

static void check(ordo_status s, const char* what) {
  if (s != ORDO_OK) {
    fprintf(stderr, "instr_per_op: %s: %s\n", what, ordo_last_error_message());
    exit(1);
  }
}

static void push_ops(ordo_engine* e, char workload, size_t n, const ordo_var* vars,
                     const uint32_t* dag) {
  for (size_t k = 0; k < n; k++) {
    if (workload == 'A') {
      check(ordo_opr_push(e, empty_op, NULL, NULL, 0, &vars[k % kVarsOfA], 1, NULL), "push");
    } else if (workload == 'B') {
      check(ordo_opr_push(e, empty_op, NULL, NULL, 0, &vars[0], 1, NULL), "push");
    } else {
      const ordo_var reads[2] = {vars[dag[3 * k]], vars[dag[3 * k + 1]]};
      check(ordo_opr_push(e, empty_op, NULL, reads, 2, &vars[dag[3 * k + 2]], 1, NULL), "push");
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 4 || !strchr("ABD", argv[2][0]) || argv[2][1] != '\0') {
    fprintf(stderr, "usage: instr_per_op naive|pooled|per_device A|B|D N [LAUNCHES]\n");
    return 2;
  }
  const char workload = argv[2][0];
  const size_t n = strtoul(argv[3], NULL, 10);
  const int launches = argc > 4 ? atoi(argv[4]) : 0;
  ordo_engine_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.kind = kind_of(argv[1]);
  cfg.cpu_threads = 2;
  ordo_engine* e = NULL;
  check(ordo_engine_create(&cfg, &e), "ordo_engine_create");
  const size_t num_vars = workload == 'A' ? kVarsOfA : BENCH_DAG_VARS;
  ordo_var* vars = malloc(sizeof *vars * num_vars);
  uint32_t* dag = workload == 'D' ? bench_dag_indices(n) : NULL;
  if (!vars) return 1;
  for (size_t i = 0; i < num_vars; i++) check(ordo_var_new(e, &vars[i]), "ordo_var_new");
  if (launches > 0) {
    ordo_graph* g = NULL;
    check(ordo_graph_begin_capture(e), "ordo_graph_begin_capture");
    push_ops(e, workload, n, vars, dag);
    check(ordo_graph_end_capture(e, &g), "ordo_graph_end_capture");
    for (int launch = 0; launch < launches; launch++) {
      check(ordo_graph_launch(g), "ordo_graph_launch");
      check(ordo_wait_for_all(e), "ordo_wait_for_all");
    }
    check(ordo_graph_destroy(g), "ordo_graph_destroy");
  } else {
    push_ops(e, workload, n, vars, dag);
    check(ordo_wait_for_all(e), "ordo_wait_for_all");
  }
  check(ordo_engine_destroy(e), "ordo_engine_destroy");
  free(dag);
  free(vars);
  return 0;
}
