#include "engine/engine_config.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/last_error.h"

namespace ordo {

namespace {

constexpr int32_t kMaxThreads = 1024;

int32_t default_cpu_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n < 2 ? 2 : static_cast<int32_t>(n > kMaxThreads ? kMaxThreads : n);
}

ordo_status parse_kind(const char* s, int32_t* out) {
  if (!std::strcmp(s, "naive"))
    *out = ORDO_ENGINE_NAIVE;
  else if (!std::strcmp(s, "pooled"))
    *out = ORDO_ENGINE_POOLED;
  else if (!std::strcmp(s, "per_device"))
    *out = ORDO_ENGINE_PER_DEVICE;
  else {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "ORDO_ENGINE='%s' is not one of naive, pooled, per_device", s);
  }
  return ORDO_OK;
}

// A whole decimal integer, an optional '-' then digits with nothing before or after them, or
// false (strtol alone would take leading blanks and a '+', but not trailing blanks).
bool parse_long(const char* s, long* out) {
  const char* digits = s[0] == '-' ? s + 1 : s;
  if (*digits < '0' || *digits > '9') return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtol(s, &end, 10);
  return errno == 0 && end != s && *end == '\0';
}

ordo_status parse_threads(const char* var, const char* s, int32_t* out) {
  long v;
  if (!parse_long(s, &v) || v < 1 || v > kMaxThreads) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "%s='%s' is not a thread count in 1..%d", var, s,
                kMaxThreads);
  }
  *out = static_cast<int32_t>(v);
  return ORDO_OK;
}

// field > env > fallback, with range checks for explicit fields.
ordo_status pick_threads(const char* field, int32_t value, const char* env, int32_t fallback,
                         int32_t* out) {
  if (value < 0 || value > kMaxThreads) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "ordo_engine_config.%s=%d is outside 0..%d", field,
                static_cast<int>(value), kMaxThreads);
  }
  if (value > 0) {
    *out = value;
    return ORDO_OK;
  }
  const char* s = std::getenv(env);
  if (s && *s) return parse_threads(env, s, out);
  *out = fallback;
  return ORDO_OK;
}

// The default window: docs/PERFORMANCE.md, "Measurements behind the code".
constexpr int32_t kDefaultMaxPending = 8192;
constexpr int32_t kMinMaxPending = 64;

ordo_status pick_max_pending(int32_t value, int32_t* out) {
  if (value == -1 || value >= kMinMaxPending) {
    *out = value;
    return ORDO_OK;
  }
  if (value != 0) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "ordo_engine_config.max_pending=%d: use -1 (no throttle), 0 (default) or >= %d",
                static_cast<int>(value), kMinMaxPending);
  }
  const char* s = std::getenv("ORDO_MAX_PENDING");
  if (!s || !*s) {
    *out = kDefaultMaxPending;
    return ORDO_OK;
  }
  long v;
  if (!parse_long(s, &v) || (v != -1 && (v < kMinMaxPending || v > INT32_MAX))) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "ORDO_MAX_PENDING='%s': use -1 or a count >= %d", s,
                kMinMaxPending);
  }
  *out = static_cast<int32_t>(v);
  return ORDO_OK;
}

// The flag, or else env ORDO_PUSHERS_HELP=1 (0 or unset: off).
ordo_status pick_pushers_help(uint32_t flags, bool* out) {
  *out = (flags & ORDO_ENGINE_FLAG_PUSHERS_HELP) != 0;
  const char* s = std::getenv("ORDO_PUSHERS_HELP");
  if (*out || !s || !*s) return ORDO_OK;
  if (std::strcmp(s, "0") != 0 && std::strcmp(s, "1") != 0) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "ORDO_PUSHERS_HELP='%s': use 0 or 1", s);
  }
  *out = s[0] == '1';
  return ORDO_OK;
}

// field (0: env ORDO_GPU_STREAMS, else 4) or INVALID_ARGUMENT.
ordo_status pick_gpu_streams(int32_t value, int32_t* out) {
  if (value < 0 || value > kMaxGpuComputeStreams) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "ordo_engine_config.gpu_compute_streams=%d is outside 0..%d (0: env "
                "ORDO_GPU_STREAMS, else 4)",
                static_cast<int>(value), static_cast<int>(kMaxGpuComputeStreams));
  }
  *out = value;
  if (value > 0) return ORDO_OK;
  *out = 4;
  const char* s = std::getenv("ORDO_GPU_STREAMS");
  if (!s || !*s) return ORDO_OK;
  long v;
  if (!parse_long(s, &v) || v < 1 || v > kMaxGpuComputeStreams) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "ORDO_GPU_STREAMS='%s' is not a stream count in 1..%d",
                s, static_cast<int>(kMaxGpuComputeStreams));
  }
  *out = static_cast<int32_t>(v);
  return ORDO_OK;
}

// field 1 (on) or -1 (off); 0: env ORDO_GPU_STREAM_WAITS=1|0, else on.
ordo_status pick_gpu_stream_waits(int32_t value, bool* out) {
  if (value == 1 || value == -1) {
    *out = value == 1;
    return ORDO_OK;
  }
  if (value != 0) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "ordo_engine_config.gpu_stream_waits=%d: use 1 (on), -1 (off) or 0 (env "
                "ORDO_GPU_STREAM_WAITS, else on)",
                static_cast<int>(value));
  }
  *out = true;
  const char* s = std::getenv("ORDO_GPU_STREAM_WAITS");
  if (!s || !*s) return ORDO_OK;
  if (std::strcmp(s, "0") != 0 && std::strcmp(s, "1") != 0) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "ORDO_GPU_STREAM_WAITS='%s': use 0 or 1", s);
  }
  *out = s[0] == '1';
  return ORDO_OK;
}

}  // namespace

ordo_status resolve_engine_config(const ordo_engine_config* cfg, EngineConfig* out) {
  ordo_engine_config zero{};
  if (!cfg) cfg = &zero;
  if (cfg->kind < 0 || cfg->kind > ORDO_ENGINE_PER_DEVICE) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "ordo_engine_config.kind=%d is not an ORDO_ENGINE_*",
                static_cast<int>(cfg->kind));
  }
  out->kind = cfg->kind;
  const char* env_trace = std::getenv("ORDO_TRACE");
  const bool explicit_trace = cfg->trace_path && *cfg->trace_path;
  out->trace_path = explicit_trace              ? cfg->trace_path
                    : (env_trace && *env_trace) ? env_trace
                                                : nullptr;
  // By which field won, not by pointer: a caller may pass getenv("ORDO_TRACE") itself.
  out->trace_from_env = !explicit_trace && out->trace_path;
  if (out->kind == ORDO_ENGINE_DEFAULT) {
    const char* s = std::getenv("ORDO_ENGINE");
    out->kind = ORDO_ENGINE_PER_DEVICE;
    if (s && *s) {
      if (ordo_status st = parse_kind(s, &out->kind)) return st;
    }
  }
  if (ordo_status s = pick_threads("cpu_threads", cfg->cpu_threads, "ORDO_CPU_THREADS",
                                   default_cpu_threads(), &out->cpu_threads)) {
    return s;
  }
  if (ordo_status s = pick_threads("cpu_priority_threads", cfg->cpu_priority_threads,
                                   "ORDO_CPU_PRIORITY_THREADS", 1, &out->cpu_priority_threads)) {
    return s;
  }
  if (ordo_status s = pick_threads("copy_threads", cfg->copy_threads, "ORDO_COPY_THREADS", 1,
                                   &out->copy_threads)) {
    return s;
  }
  if (ordo_status s = pick_max_pending(cfg->max_pending, &out->max_pending)) return s;
  if (ordo_status s = pick_gpu_streams(cfg->gpu_compute_streams, &out->gpu_compute_streams)) {
    return s;
  }
  if (ordo_status s = pick_gpu_stream_waits(cfg->gpu_stream_waits, &out->gpu_stream_waits)) {
    return s;
  }
  return pick_pushers_help(cfg->flags, &out->pushers_help);
}

}  // namespace ordo
