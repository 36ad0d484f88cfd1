/*
 * The in-process runner behind the Criterion shim (criterion/criterion.h next to this file): runs
 * every registered Test one after another in this process, so that ThreadSanitizer and valgrind
 * see the whole suite, and prints each test's name and a final count. Exit status: 0 when every
 * selected test passed or was skipped; 1 on a failure; 2 on bad usage; 124 on a timeout.
 *
 *   ordo_tests_shim [--list] [--filter GLOB] [--exclude GLOB]... [--timeout-scale X]
 *
 * GLOBs match "suite/name" (fnmatch). --timeout-scale (or SHIM_TIMEOUT_SCALE) multiplies each
 * test's .timeout: TSan and memcheck run the code 5 to 50 times slower than a plain build.
 *
 * What a process per test gave the tests under Criterion, and how it is kept here: each test
 * runs on a fresh thread (fresh thread-locals); the environment is restored after each test
 * (some tests set ORDO_* variables). File-scope statics are not reset: the suite passes anyway
 * (each test sets what it reads), and ordo's own process-wide state is then shared by all tests,
 * which checks that it survives many engines in one process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clearenv, flockfile */
#endif
#include <criterion/criterion.h>
#include <fnmatch.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

enum { kMaxTests = 1024, kMaxSuites = 128, kMaxExcludes = 64 };

static struct shim_test* g_tests[kMaxTests];
static int g_num_tests;
static struct shim_suite* g_suites[kMaxSuites];
static int g_num_suites;

/* The running test, read by failure reports that may come from ordo's worker threads. */
static _Atomic(struct shim_test*) g_current;
static atomic_int g_expect_failed;
static jmp_buf g_skip_jump;
static char g_skip_reason[256];

/* ------------------------------------------------------------------------------------------ */
/* Registration (from the constructors that Test/TestSuite expand to) */

void shim_register_test(struct shim_test* t) {
  if (g_num_tests == kMaxTests) {
    fprintf(stderr, "shim: more than %d tests; raise kMaxTests\n", kMaxTests);
    abort();
  }
  g_tests[g_num_tests++] = t;
}

void shim_register_suite(struct shim_suite* s) {
  if (g_num_suites == kMaxSuites) {
    fprintf(stderr, "shim: more than %d suites; raise kMaxSuites\n", kMaxSuites);
    abort();
  }
  g_suites[g_num_suites++] = s;
}

/* ------------------------------------------------------------------------------------------ */
/* Checks */

void shim_fmt_ll(long long v, char* buf) {
  snprintf(buf, 64, "%lld", v);
}
void shim_fmt_ull(unsigned long long v, char* buf) {
  snprintf(buf, 64, "%llu (0x%llx)", v, v);
}
void shim_fmt_double(double v, char* buf) {
  snprintf(buf, 64, "%.17g", v);
}
void shim_fmt_ptr(const volatile void* v, char* buf) {
  snprintf(buf, 64, "%p", (const void*)v);
}

static void print_test_id(FILE* f) {
  struct shim_test* t = atomic_load(&g_current);
  if (t)
    fprintf(f, "%s/%s", t->suite, t->name);
  else
    fprintf(f, "(outside any test)");
}

void shim_check_failed(bool fatal, const char* file, int line, const char* what, const char* lhs,
                       const char* rhs, const char* fmt, ...) {
  flockfile(stderr);
  fprintf(stderr, "[FAIL] ");
  print_test_id(stderr);
  fprintf(stderr, ": %s:%d: %s: %s\n", file, line, fatal ? "assertion" : "expectation", what);
  if (lhs) fprintf(stderr, "         left: %s\n", lhs);
  if (rhs) fprintf(stderr, "        right: %s\n", rhs);
  fprintf(stderr, "      message:");
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  funlockfile(stderr);
  if (!fatal) {
    atomic_store(&g_expect_failed, 1);
    return;
  }
  /* Unwinding the test is not safe: ordo's workers may still run ops that point into its
   * stack. The run has failed anyway, so it ends here. */
  fprintf(stderr, "[FAIL] a fatal assertion failed: the run stops here\n");
  fflush(NULL);
  _exit(1);
}

void shim_skip(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_skip_reason, sizeof g_skip_reason, fmt, ap);
  va_end(ap);
  longjmp(g_skip_jump, 1);
}

/* ------------------------------------------------------------------------------------------ */
/* Timeouts: SIGALRM ends the run, as Criterion's watchdog ends a test's process. */

static void on_timeout(int sig) {
  (void)sig;
  static const char msg[] = "\n[FAIL] timeout: the test above ran past its .timeout\n";
  ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  _exit(124);
}

static double suite_timeout(const char* suite) {
  for (int i = 0; i < g_num_suites; ++i) {
    if (strcmp(g_suites[i]->name, suite) == 0) return g_suites[i]->opts.timeout;
  }
  return 0.0;
}

/* The test's own .timeout, else its suite's (Criterion's order); 0: none. */
static double effective_timeout(const struct shim_test* t) {
  return t->opts.timeout > 0.0 ? t->opts.timeout : suite_timeout(t->suite);
}

/* ------------------------------------------------------------------------------------------ */
/* Environment: saved once, restored after each test, so a setenv in one test stays in it. */

static char** g_saved_env; /* environ points into it after a restore: never freed */

static void save_environment(void) {
  size_t n = 0;
  while (environ[n]) ++n;
  g_saved_env = calloc(n + 1, sizeof *g_saved_env);
  if (!g_saved_env) abort();
  for (size_t i = 0; i < n; ++i) {
    g_saved_env[i] = strdup(environ[i]);
    if (!g_saved_env[i]) abort();
  }
}

static void restore_environment(void) {
  clearenv();
  for (size_t i = 0; g_saved_env[i]; ++i) putenv(g_saved_env[i]);
}

/* ------------------------------------------------------------------------------------------ */
/* Selection and running */

struct options {
  bool list;
  const char* filter;
  const char* excludes[kMaxExcludes];
  int num_excludes;
  double timeout_scale;
};

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [--list] [--filter GLOB] [--exclude GLOB]... [--timeout-scale X]\n"
          "GLOB matches suite/name.\n",
          argv0);
}

static bool parse_args(int argc, char** argv, struct options* o) {
  const char* scale = getenv("SHIM_TIMEOUT_SCALE");
  o->timeout_scale = scale ? atof(scale) : 1.0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    bool has_value = i + 1 < argc;
    if (strcmp(a, "--list") == 0) {
      o->list = true;
    } else if (strcmp(a, "--filter") == 0 && has_value) {
      o->filter = argv[++i];
    } else if (strcmp(a, "--exclude") == 0 && has_value && o->num_excludes < kMaxExcludes) {
      o->excludes[o->num_excludes++] = argv[++i];
    } else if (strcmp(a, "--timeout-scale") == 0 && has_value) {
      o->timeout_scale = atof(argv[++i]);
    } else {
      return false;
    }
  }
  return o->timeout_scale > 0.0;
}

static bool selected(const struct shim_test* t, const struct options* o) {
  char id[256];
  snprintf(id, sizeof id, "%s/%s", t->suite, t->name);
  if (o->filter && fnmatch(o->filter, id, 0) != 0) return false;
  for (int i = 0; i < o->num_excludes; ++i) {
    if (fnmatch(o->excludes[i], id, 0) == 0) return false;
  }
  return true;
}

/* Criterion runs suites and tests in name order; so does the shim, whatever the link order. */
static int by_suite_then_name(const void* pa, const void* pb) {
  const struct shim_test* a = *(const struct shim_test* const*)pa;
  const struct shim_test* b = *(const struct shim_test* const*)pb;
  int c = strcmp(a->suite, b->suite);
  return c != 0 ? c : strcmp(a->name, b->name);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum outcome { kPassed, kFailed, kSkipped };

/* The test body, on a thread of its own (see run_one). Returns its outcome as a pointer-sized
 * integer. */
static void* test_thread_main(void* arg) {
  struct shim_test* t = arg;
  volatile enum outcome result = kPassed; /* volatile: read after a longjmp */
  if (setjmp(g_skip_jump) == 0) {
    t->fn();
    if (atomic_load(&g_expect_failed)) result = kFailed;
  } else {
    result = kSkipped;
  }
  return (void*)(intptr_t)result;
}

/* Each test body runs on a new thread: under Criterion it ran on the main thread of a new
 * process, and some tests check exactly that a thread's state starts empty (ordo's thread-local
 * last error, its per-thread push-lane cache). The thread's exit also runs ordo's thread-exit
 * cleanup once per test, which TSan and memcheck then see. */
static enum outcome run_one(struct shim_test* t, double timeout_scale) {
  double timeout = effective_timeout(t);
  printf("[RUN ] %s/%s\n", t->suite, t->name);
  fflush(stdout);
  atomic_store(&g_expect_failed, 0);
  atomic_store(&g_current, t);
  const double start = now_s();
  if (timeout > 0.0) alarm((unsigned)(timeout * timeout_scale) + 1u); /* rounded up */
  pthread_t thread;
  void* ret = NULL;
  if (pthread_create(&thread, NULL, test_thread_main, t) != 0 || pthread_join(thread, &ret) != 0) {
    fprintf(stderr, "shim: could not run %s/%s on a thread\n", t->suite, t->name);
    exit(1);
  }
  enum outcome result = (enum outcome)(intptr_t)ret;
  alarm(0);
  atomic_store(&g_current, NULL);
  restore_environment();
  const char* tag = result == kPassed ? "PASS" : result == kFailed ? "FAIL" : "SKIP";
  printf("[%s] %s/%s (%.2f s)%s%s\n", tag, t->suite, t->name, now_s() - start,
         result == kSkipped ? ": " : "", result == kSkipped ? g_skip_reason : "");
  fflush(stdout);
  return result;
}

int main(int argc, char** argv) {
  struct options o = {0};
  if (!parse_args(argc, argv, &o)) {
    usage(argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  qsort(g_tests, (size_t)g_num_tests, sizeof g_tests[0], by_suite_then_name);
  if (o.list) {
    for (int i = 0; i < g_num_tests; ++i) {
      if (selected(g_tests[i], &o)) printf("%s/%s\n", g_tests[i]->suite, g_tests[i]->name);
    }
    return 0;
  }
  signal(SIGALRM, on_timeout);
  save_environment();
  int tested = 0, passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < g_num_tests; ++i) {
    if (!selected(g_tests[i], &o)) continue;
    ++tested;
    switch (run_one(g_tests[i], o.timeout_scale)) {
      case kPassed:
        ++passed;
        break;
      case kFailed:
        ++failed;
        break;
      case kSkipped:
        ++skipped;
        break;
    }
  }
  printf(
      "[====] Shim synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d "
      "| Not selected: %d\n",
      tested, passed, failed, skipped, g_num_tests - tested);
  if (tested == 0) {
    fprintf(stderr, "shim: no test matched the filter\n");
    return 2;
  }
  return failed == 0 ? 0 : 1;
}
