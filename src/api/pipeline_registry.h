// The pipeline handle table. An ordo_pipeline* is the address of a slot in a static array, as an
// ordo_engine* is (api/engine_registry.h), so that a pointer ordo never handed out, or one whose
// pipeline was destroyed, is told from a live one without reading freed memory. Slots are
// reused round robin, skipping slots in use.
//
// Every look-up holds the table's lock while it uses the pipeline, except a run, which claims
// the pipeline under the lock (Pipeline::claim) and releases it when the run is over: destroy,
// reset and reset_pipes refuse a claimed pipeline, so a run never sees it change or go.
#pragma once

#include <cstdint>
#include <mutex>

#include "api/engine_registry.h"
#include "ordo/ordo.h"
#include "pipeline/pipeline.h"

namespace ordo {

struct alignas(16) PipelineSlot {
  Pipeline* pipeline = nullptr;
  EngineSlot* engine = nullptr;  // pinned while the pipeline lives (its memory, not its service)
};
static_assert(sizeof(PipelineSlot) == 16, "slot checks divide by a power of two");

constexpr uint32_t kMaxPipelines = 65535;

// The lock every look-up holds. Never held while a callback or the engine runs.
std::mutex& pipeline_table_lock();

// Stores a new pipeline (and the pin on its engine) in a free slot: *out is its handle. NO_MEMORY
// when every slot is in use (the caller still owns both).
ordo_status add_pipeline(Pipeline* p, EngineSlot* engine, ordo_pipeline** out);

// With the lock held: the slot `h` names and its live pipeline, or INVALID_ARGUMENT (NULL) /
// INVALID_HANDLE (not ours, or destroyed) with a message naming `api`; INVALID_STATE (*out set)
// for a pipeline whose engine was created before a fork() this process came from, unless
// `inherited_ok`.
ordo_status find_pipeline(const char* api, const ordo_pipeline* h, PipelineSlot** out,
                          bool inherited_ok = false);

}  // namespace ordo
