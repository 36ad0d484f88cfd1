// The effective engine configuration: the caller's struct, then environment overrides, then
// defaults (explicit field > env > default).
#pragma once

#include <cstdint>

#include "ordo/ordo.h"

namespace ordo {

struct EngineConfig {
  int32_t kind;
  int32_t cpu_threads;
  int32_t cpu_priority_threads;
  int32_t copy_threads;
  int32_t max_pending;  // -1: no throttle
  bool pushers_help;    // ORDO_ENGINE_FLAG_PUSHERS_HELP: throttled pushers run ready ops
  // Where to write the trace at shutdown; nullptr: tracing off. Borrowed from the caller's
  // struct or the environment: the Engine copies it at once.
  const char* trace_path;
  bool trace_from_env;          // trace_path is ORDO_TRACE's: each engine numbers it (trace_file.h)
  int32_t gpu_compute_streams;  // per GPU, 1..kMaxGpuComputeStreams
  bool gpu_stream_waits;        // early release of same-GPU successors (docs/ARCHITECTURE.md §7)
};

constexpr int32_t kMaxGpuComputeStreams = 64;

// The per_device compute group's threads per GPU: the callbacks only enqueue work, so half as
// many as streams (at least one).
inline int32_t gpu_compute_threads(const EngineConfig& cfg) {
  return cfg.gpu_compute_streams < 2 ? 1 : cfg.gpu_compute_streams / 2;
}

// Fills `out` from `cfg` (already size-normalized, may be NULL). ORDO_ERR_INVALID_ARGUMENT
// with a message naming the field or variable on a bad value.
ordo_status resolve_engine_config(const ordo_engine_config* cfg, EngineConfig* out);

}  // namespace ordo
