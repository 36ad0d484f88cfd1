#include "api/pipeline_registry.h"

#include "base/fork_guard.h"
#include "base/last_error.h"

namespace ordo {

namespace {

PipelineSlot g_pipeline_slots[kMaxPipelines];
std::mutex g_lock;
uint32_t g_cursor = 0;  // under g_lock

// Held across fork(), so that a child never inherits it locked by a thread that is not there.
const bool g_fork_handlers =
    on_fork([] { g_lock.lock(); }, [] { g_lock.unlock(); }, [] { g_lock.unlock(); });

}  // namespace

std::mutex& pipeline_table_lock() {
  return g_lock;
}

ordo_status add_pipeline(Pipeline* p, EngineSlot* engine, ordo_pipeline** out) {
  std::lock_guard<std::mutex> g(g_lock);
  for (uint32_t n = 0; n < kMaxPipelines; ++n) {
    PipelineSlot& s = g_pipeline_slots[(g_cursor + n) % kMaxPipelines];
    if (s.pipeline) continue;
    s.pipeline = p;
    s.engine = engine;
    g_cursor = (g_cursor + n + 1) % kMaxPipelines;
    *out = reinterpret_cast<ordo_pipeline*>(&s);
    return ORDO_OK;
  }
  return fail(ORDO_ERR_NO_MEMORY, "%u pipelines exist, the most ordo holds", kMaxPipelines);
}

ordo_status find_pipeline(const char* api, const ordo_pipeline* h, PipelineSlot** out,
                          bool inherited_ok) {
  if (!h) return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: the pipeline pointer is NULL", api);
  // One unsigned compare rejects addresses below the table too (the difference wraps).
  const uintptr_t offset =
      reinterpret_cast<uintptr_t>(h) - reinterpret_cast<uintptr_t>(&g_pipeline_slots[0]);
  if (offset >= sizeof g_pipeline_slots || offset % sizeof(PipelineSlot) != 0) {
    return fail(ORDO_ERR_INVALID_HANDLE, "%s: %p is not a pipeline created by ordo", api,
                static_cast<const void*>(h));
  }
  PipelineSlot* s = &g_pipeline_slots[offset / sizeof(PipelineSlot)];
  if (!s->pipeline) {
    return fail(ORDO_ERR_INVALID_HANDLE, "%s: pipeline %p has been destroyed", api,
                static_cast<const void*>(h));
  }
  *out = s;
  if (!inherited_ok && s->engine && !made_here(s->engine)) {
    return fail(ORDO_ERR_INVALID_STATE,
                "%s: pipeline %p runs on an engine created before a fork(): in this process it "
                "cannot run (ordo_pipeline_destroy still lets go of its handle)",
                api, static_cast<const void*>(h));
  }
  return ORDO_OK;
}

}  // namespace ordo
