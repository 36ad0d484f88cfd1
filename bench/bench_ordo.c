/*
 * bench_ordo: measures the engine's overhead per op with empty op bodies, and prints a table.
 * It is a measurement, not a test: it never fails because something is slow. It exits non-zero
 * only when an ordo call fails (then the numbers would mean nothing).
 *
 * Workloads (N = --ops, default 1,000,000):
 *   A independent  N ops, each mutating its own var (vars created before timing)
 *   B chain        N ops mutating one var
 *   C fan-out      N/10 rounds of 1 writer then 8 readers of one var (0.9 N ops)
 *   D random DAG   1,000 vars, N ops each reading 2 random vars and mutating a third
 *                  (fixed seed; var lists computed before timing)
 *   E 2 pushers    two threads pushing N/2 ops each on disjoint vars, one var per op
 * Time: from the first push to the return of ordo_wait_for_all, CLOCK_MONOTONIC. Each workload
 * runs once untimed at N/10 (warm-up), then --reps times; the table shows median, min and max.
 *
 * Usage: bench_ordo [--ops N] [--reps R] [--threads T] [--kind naive|pooled|per_device]
 * Defaults may also come from the environment: ORDO_CPU_THREADS, ORDO_ENGINE. When neither flag
 * nor environment says, the engine is per_device with 2 CPU workers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <ordo/ordo.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DAG_VARS 1000
#define FAN_READERS 8

static void die(const char* what, ordo_status s) {
  fprintf(stderr, "bench_ordo: %s: %s (%s)\n", what, ordo_status_string(s),
          ordo_last_error_message());
  exit(1);
}
#define CHECK(call)                    \
  do {                                 \
    ordo_status s_ = (call);           \
    if (s_ != ORDO_OK) die(#call, s_); \
  } while (0)

static void* xmalloc(size_t n) {
  void* p = malloc(n);
  if (!p) {
    fprintf(stderr, "bench_ordo: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int32_t empty_op(ordo_exec* exec, void* user_data) {
  (void)exec;
  (void)user_data;
  return 0;
}

/* Everything a workload needs, built before any timing starts. */
typedef struct {
  ordo_engine* e;
  size_t n;      /* --ops */
  ordo_var* own; /* n vars: one per op for A, split in halves for E */
  ordo_var one;  /* B and C */
  ordo_var dag[DAG_VARS];
  ordo_var* dag_ops; /* 3 per op for D: two read, then one mutated */
} bench;

/* Each workload pushes `n` ops worth of work and returns how many ops it pushed. */
typedef size_t (*workload_fn)(bench* b, size_t n);

static size_t w_independent(bench* b, size_t n) {
  for (size_t i = 0; i < n; i++)
    CHECK(ordo_opr_push(b->e, empty_op, NULL, NULL, 0, &b->own[i], 1, NULL));
  return n;
}

static size_t w_chain(bench* b, size_t n) {
  for (size_t i = 0; i < n; i++)
    CHECK(ordo_opr_push(b->e, empty_op, NULL, NULL, 0, &b->one, 1, NULL));
  return n;
}

static size_t w_fanout(bench* b, size_t n) {
  size_t rounds = n / 10;
  for (size_t r = 0; r < rounds; r++) {
    CHECK(ordo_opr_push(b->e, empty_op, NULL, NULL, 0, &b->one, 1, NULL));
    for (int k = 0; k < FAN_READERS; k++)
      CHECK(ordo_opr_push(b->e, empty_op, NULL, &b->one, 1, NULL, 0, NULL));
  }
  return rounds * (1 + FAN_READERS);
}

static size_t w_dag(bench* b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const ordo_var* t = &b->dag_ops[3 * i];
    CHECK(ordo_opr_push(b->e, empty_op, NULL, t, 2, t + 2, 1, NULL));
  }
  return n;
}

/* E: two pusher threads, started together by a barrier so both push at once. */
typedef struct {
  bench* b;
  const ordo_var* vars;
  size_t n;
  pthread_barrier_t* go;
} pusher_arg;

static void* pusher(void* p) {
  pusher_arg* a = p;
  pthread_barrier_wait(a->go);
  for (size_t i = 0; i < a->n; i++)
    CHECK(ordo_opr_push(a->b->e, empty_op, NULL, NULL, 0, &a->vars[i], 1, NULL));
  return NULL;
}

/* E has its own timing: it ends only once both threads have pushed everything. */
static uint64_t run_two_pushers(bench* b, size_t n, size_t* ops) {
  size_t half = n / 2;
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 3);
  pusher_arg args[2] = {{b, b->own, half, &go}, {b, b->own + half, half, &go}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    if (pthread_create(&t[i], NULL, pusher, &args[i]) != 0) {
      fprintf(stderr, "bench_ordo: pthread_create failed\n");
      exit(1);
    }
  }
  uint64_t t0 = now_ns();
  pthread_barrier_wait(&go);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CHECK(ordo_wait_for_all(b->e)); /* after the joins: everything is pushed by now */
  uint64_t t1 = now_ns();
  pthread_barrier_destroy(&go);
  *ops = 2 * half;
  return t1 - t0;
}

static uint64_t run_once(bench* b, workload_fn fn, size_t n, size_t* ops) {
  if (!fn) return run_two_pushers(b, n, ops);
  uint64_t t0 = now_ns();
  *ops = fn(b, n);
  CHECK(ordo_wait_for_all(b->e));
  return now_ns() - t0;
}

static int cmp_double(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

/* Machine description for the header line. */
static int online_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set); /* what nproc says */
  return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

static void cpu_model(char* out, size_t cap) {
  snprintf(out, cap, "unknown CPU");
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    /* x86 says "model name"; some ARM kernels only say "Hardware" or "Processor". */
    if (strncmp(line, "model name", 10) && strncmp(line, "Hardware", 8) &&
        strncmp(line, "Processor", 9))
      continue;
    char* v = strchr(line, ':');
    if (!v) continue;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = 0;
    snprintf(out, cap, "%s", v);
    break;
  }
  fclose(f);
}

static size_t parse_size(const char* flag, const char* s) {
  char* end;
  unsigned long long v = strtoull(s ? s : "", &end, 10);
  if (!s || *end || v == 0) {
    fprintf(stderr, "bench_ordo: %s needs a positive integer\n", flag);
    exit(2);
  }
  return (size_t)v;
}

static int32_t parse_kind(const char* s) {
  if (s && !strcmp(s, "naive")) return ORDO_ENGINE_NAIVE;
  if (s && !strcmp(s, "pooled")) return ORDO_ENGINE_POOLED;
  if (s && !strcmp(s, "per_device")) return ORDO_ENGINE_PER_DEVICE;
  fprintf(stderr, "bench_ordo: --kind must be naive, pooled or per_device\n");
  exit(2);
}

static const char* kind_name(int32_t k) {
  switch (k) {
    case ORDO_ENGINE_NAIVE:
      return "naive";
    case ORDO_ENGINE_POOLED:
      return "pooled";
    case ORDO_ENGINE_PER_DEVICE:
      return "per_device";
    default:
      return "?";
  }
}

int main(int argc, char** argv) {
  size_t n = 1000000, reps = 5;
  int32_t threads = 0, kind = 0;
  const char* only = NULL;            /* workload letters to run, e.g. "BD"; NULL: all */
  for (int i = 1; i < argc; i += 2) { /* every flag takes one value */
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--ops")) {
      n = parse_size(a, v);
    } else if (!strcmp(a, "--reps")) {
      reps = parse_size(a, v);
    } else if (!strcmp(a, "--threads")) {
      threads = (int32_t)parse_size(a, v);
    } else if (!strcmp(a, "--kind")) {
      kind = parse_kind(v);
    } else if (!strcmp(a, "--only") && v) {
      only = v;
    } else {
      fprintf(stderr,
              "usage: %s [--ops N] [--reps R] [--threads T] [--kind naive|pooled|per_device] "
              "[--only LETTERS]\n",
              argv[0]);
      return !strcmp(a, "--help") || !strcmp(a, "-h") ? 0 : 2;
    }
  }
  if (n < 20) n = 20; /* so that the warm-up and fan-out rounds are never empty */
  /* Flags win, then the engine's own environment variables, then this benchmark's defaults. */
  const char* env_threads = getenv("ORDO_CPU_THREADS");
  const char* env_kind = getenv("ORDO_ENGINE");
  if (!threads && !(env_threads && *env_threads)) threads = 2;
  if (!kind && !(env_kind && *env_kind)) kind = ORDO_ENGINE_PER_DEVICE;

  bench b;
  memset(&b, 0, sizeof b);
  b.n = n;
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = threads;
  CHECK(ordo_engine_create(&cfg, &b.e));
  ordo_engine_config eff;
  ordo_engine_config_init(&eff);
  CHECK(ordo_engine_get_config(b.e, &eff));

  /* Setup, untimed: vars for A and E, the single var for B and C, and D's random var lists. */
  b.own = xmalloc(n * sizeof *b.own);
  for (size_t i = 0; i < n; i++) CHECK(ordo_var_new(b.e, &b.own[i]));
  CHECK(ordo_var_new(b.e, &b.one));
  for (int i = 0; i < DAG_VARS; i++) CHECK(ordo_var_new(b.e, &b.dag[i]));
  b.dag_ops = xmalloc(3 * n * sizeof *b.dag_ops);
  uint64_t rng = 0x9E3779B97F4A7C15ull; /* fixed seed: every run pushes the same DAG */
  for (size_t i = 0; i < n; i++) {
    int pick[3];
    for (int k = 0; k < 3; k++) {
      int again;
      do { /* xorshift64; three distinct vars so each op really has 2 reads and 1 write */
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        pick[k] = (int)(rng % DAG_VARS);
        again = 0;
        for (int j = 0; j < k; j++) again |= pick[j] == pick[k];
      } while (again);
      b.dag_ops[3 * i + (size_t)k] = b.dag[pick[k]];
    }
  }

  char model[256];
  cpu_model(model, sizeof model);
  printf("ordo %s bench: %d CPUs online (%s)\n", ordo_version_string(), online_cpus(), model);
  printf("engine: %s, cpu_threads=%d, cpu_priority_threads=%d, copy_threads=%d\n",
         kind_name(eff.kind), (int)eff.cpu_threads, (int)eff.cpu_priority_threads,
         (int)eff.copy_threads);
  printf(
      "empty op bodies; time from first push to ordo_wait_for_all; %zu reps after a warm-up "
      "at 1/10 size\n\n",
      reps);

  static const struct {
    const char* name;
    workload_fn fn; /* NULL: the two-pusher workload */
  } workloads[] = {
      {"A independent (1 var/op)", w_independent}, {"B chain (1 var)", w_chain},
      {"C fan-out (1 W + 8 R)", w_fanout},         {"D random DAG (2 R + 1 W of 1000)", w_dag},
      {"E 2 pushers, disjoint vars", NULL},
  };
  /* One column group per system. Peers (StarPU, OpenMP, TBB, MXNet) are to be added as further
   * groups to the right; until they are measured here, they are not shown. */
  printf("%-34s %9s | %s\n", "", "", "ordo, ns/op");
  printf("%-34s %9s | %10s %10s %10s\n", "workload", "ops", "median", "min", "max");
  printf("%-34s-%9s-+-%10s-%10s-%10s\n", "----------------------------------", "---------",
         "----------", "----------", "----------");
  fflush(stdout);

  double* ns = xmalloc(reps * sizeof *ns);
  for (size_t w = 0; w < sizeof workloads / sizeof workloads[0]; w++) {
    if (only && !strchr(only, workloads[w].name[0])) continue;
    size_t ops = 0;
    run_once(&b, workloads[w].fn, n / 10, &ops); /* warm-up: pools, caches, thread wake-up */
    for (size_t r = 0; r < reps; r++) {
      uint64_t t = run_once(&b, workloads[w].fn, n, &ops);
      ns[r] = (double)t / (double)ops;
    }
    qsort(ns, reps, sizeof *ns, cmp_double);
    double median = reps % 2 ? ns[reps / 2] : (ns[reps / 2 - 1] + ns[reps / 2]) / 2;
    printf("%-34s %9zu | %10.1f %10.1f %10.1f\n", workloads[w].name, ops, median, ns[0],
           ns[reps - 1]);
    fflush(stdout);
  }

  free(ns);
  CHECK(ordo_engine_destroy(b.e)); /* the vars go with the engine */
  free(b.dag_ops);
  free(b.own);
  return 0;
}
