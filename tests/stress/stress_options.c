/*
 * Command-line flags of ordo_stress. Numbers are parsed strictly (a typo must not silently run
 * a different test).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress.h"

static void usage(FILE* to) {
  fprintf(to,
          "usage: ordo_stress [--ops N] [--pushers P] [--vars V] [--seed S] [--threads T]\n"
          "                   [--completers C] [--waiters W] [--kind per_device|pooled|naive]\n"
          "                   [--round R] [--watchdog SECONDS]\n"
          "  --ops N         ops to push in all (default 10000000)\n"
          "  --pushers P     pusher threads (default 4)\n"
          "  --vars V        vars alive at any time (default 256)\n"
          "  --seed S        seeds each thread's random choices; thread timing still varies "
          "(default 1)\n"
          "  --threads T     engine CPU workers (default 2)\n"
          "  --completers C  threads completing deferred ops (default 2)\n"
          "  --waiters W     threads waiting on vars (polls, timed, untimed) while pushers push "
          "(default 2)\n"
          "  --kind K        engine kind (default per_device)\n"
          "  --round R       ops between full drains and checks (default N/8, within "
          "1000..100000:\n"
          "                  every kind of round comes twice)\n"
          "  --watchdog S    exit 3 with a state dump after S seconds without progress "
          "(default 60)\n"
          "Exit status: 0 all checks passed, 1 a mismatch or API error, 2 bad usage, "
          "3 watchdog.\n");
}

static int parse_u64(const char* s, uint64_t lo, uint64_t hi, uint64_t* out) {
  if (!s || !*s || *s == '-') return -1;
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_kind(const char* s, int32_t* out) {
  if (!s) return -1;
  if (strcmp(s, "per_device") == 0) {
    *out = ORDO_ENGINE_PER_DEVICE;
  } else if (strcmp(s, "pooled") == 0) {
    *out = ORDO_ENGINE_POOLED;
  } else if (strcmp(s, "naive") == 0) {
    *out = ORDO_ENGINE_NAIVE;
  } else {
    return -1;
  }
  return 0;
}

const char* stress_kind_name(int32_t kind) {
  switch (kind) {
    case ORDO_ENGINE_PER_DEVICE:
      return "per_device";
    case ORDO_ENGINE_POOLED:
      return "pooled";
    case ORDO_ENGINE_NAIVE:
      return "naive";
    default:
      return "?";
  }
}

static void set_defaults(stress_options* o) {
  o->ops = 10000000;
  o->round_ops = 0; /* auto: see auto_round_ops */
  o->seed = 1;
  o->pushers = 4;
  o->vars = 256;
  o->threads = 2;
  o->completers = 2;
  o->waiters = 2;
  o->kind = ORDO_ENGINE_PER_DEVICE;
  o->watchdog_s = 60;
}

/* One "--name value" or "--name=value" pair; 0 when understood. */
static int apply(stress_options* o, const char* name, const char* value) {
  uint64_t v = 0;
  if (strcmp(name, "--kind") == 0) return parse_kind(value, &o->kind);
  if (strcmp(name, "--ops") == 0) return parse_u64(value, 1, UINT64_MAX / 2, &o->ops);
  if (strcmp(name, "--round") == 0) return parse_u64(value, 1, UINT64_MAX / 2, &o->round_ops);
  if (strcmp(name, "--seed") == 0) return parse_u64(value, 0, UINT64_MAX, &o->seed);
  int rc = -1;
  if (strcmp(name, "--pushers") == 0 && (rc = parse_u64(value, 1, 64, &v)) == 0) {
    o->pushers = (int)v;
  } else if (strcmp(name, "--vars") == 0 && (rc = parse_u64(value, 8, 1000000, &v)) == 0) {
    o->vars = (int)v;
  } else if (strcmp(name, "--threads") == 0 && (rc = parse_u64(value, 1, 256, &v)) == 0) {
    o->threads = (int)v;
  } else if (strcmp(name, "--completers") == 0 && (rc = parse_u64(value, 1, 64, &v)) == 0) {
    o->completers = (int)v;
  } else if (strcmp(name, "--waiters") == 0 && (rc = parse_u64(value, 0, 64, &v)) == 0) {
    o->waiters = (int)v;
  } else if (strcmp(name, "--watchdog") == 0 && (rc = parse_u64(value, 1, 86400, &v)) == 0) {
    o->watchdog_s = (int)v;
  }
  return rc;
}

/* Rounds cycle through four kinds (ordo_stress.c): by default a run has at least two cycles, and
 * rounds of at most 100,000 ops so that long runs drain and check often. */
static uint64_t auto_round_ops(uint64_t ops) {
  enum { MIN_ROUNDS = 8, MAX_ROUND_OPS = 100000, MIN_ROUND_OPS = 1000 };
  uint64_t r = (ops + MIN_ROUNDS - 1) / MIN_ROUNDS;
  if (r > MAX_ROUND_OPS) r = MAX_ROUND_OPS;
  if (r < MIN_ROUND_OPS) r = MIN_ROUND_OPS;
  return r;
}

int stress_parse_options(int argc, char** argv, stress_options* out) {
  set_defaults(out);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return -1;
    }
    char name[32];
    const char* value;
    const char* eq = strchr(argv[i], '=');
    if (eq && (size_t)(eq - argv[i]) < sizeof name) {
      memcpy(name, argv[i], (size_t)(eq - argv[i]));
      name[eq - argv[i]] = 0;
      value = eq + 1;
    } else {
      snprintf(name, sizeof name, "%s", argv[i]);
      value = i + 1 < argc ? argv[++i] : NULL;
    }
    if (apply(out, name, value) != 0) {
      fprintf(stderr, "ordo_stress: bad flag or value: %s %s\n", name, value ? value : "");
      usage(stderr);
      return 2;
    }
  }
  if (out->round_ops == 0) out->round_ops = auto_round_ops(out->ops);
  return 0;
}
