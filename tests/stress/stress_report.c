/*
 * Counters and diagnostics shared by every thread of the stress checker. Nothing here aborts:
 * a disagreement is counted and the first few are printed, so one run shows as many kinds of
 * failure as it meets, and main decides the exit code.
 */
#include <stdarg.h>
#include <stdio.h>

#include "stress.h"

enum { MAX_PRINTED = 25 };

stress_counters g_count;
ordo_engine* g_engine;

static pthread_mutex_t g_print_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long g_printed;

static void vreport(const char* kind, const char* fmt, va_list ap) {
  pthread_mutex_lock(&g_print_mu);
  if (g_printed < MAX_PRINTED) {
    fprintf(stderr, "ordo_stress: %s: ", kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
  } else if (g_printed == MAX_PRINTED) {
    fprintf(stderr, "ordo_stress: (further diagnostics counted, not printed)\n");
  }
  g_printed++;
  pthread_mutex_unlock(&g_print_mu);
}

void stress_mismatch(const char* fmt, ...) {
  atomic_fetch_add(&g_count.mismatches, 1);
  va_list ap;
  va_start(ap, fmt);
  vreport("MISMATCH", fmt, ap);
  va_end(ap);
}

void stress_api_error(const char* fmt, ...) {
  atomic_fetch_add(&g_count.api_errors, 1);
  va_list ap;
  va_start(ap, fmt);
  vreport("API ERROR", fmt, ap);
  va_end(ap);
}

int stress_expect_status(ordo_status got, ordo_status want, const char* what) {
  stress_count_checks(1);
  if (got == want) return 1;
  stress_api_error("%s returned %s, expected %s (%s)", what, ordo_status_string(got),
                   ordo_status_string(want), ordo_last_error_message());
  return 0;
}
