#include "api/graph_registry.h"

#include "base/fork_guard.h"
#include "base/last_error.h"

namespace ordo {

namespace {

GraphSlot g_graph_slots[kMaxGraphs];
std::mutex g_lock;
uint32_t g_cursor = 0;  // under g_lock

// Held across fork(), so that a child never inherits it locked by a thread that is not there.
const bool g_fork_handlers =
    on_fork([] { g_lock.lock(); }, [] { g_lock.unlock(); }, [] { g_lock.unlock(); });

// Handle layout: bits 0-3 a tag (0xB), bits 4-19 the slot index, bits 32-63 the generation.
// No handle is 0, and a real object's address is never mistaken for one of a live graph
// unless it matches tag, index and the slot's current generation.
constexpr uintptr_t kTag = 0xB;

uintptr_t encode(uint32_t index, uint32_t gen) {
  return (static_cast<uintptr_t>(gen) << 32) | (static_cast<uintptr_t>(index) << 4) | kTag;
}

}  // namespace

std::mutex& graph_table_lock() {
  return g_lock;
}

ordo_status add_graph(Graph* g, EngineSlot* engine, ordo_graph** out) {
  std::lock_guard<std::mutex> guard(g_lock);
  for (uint32_t n = 0; n < kMaxGraphs; ++n) {
    const uint32_t index = (g_cursor + n) % kMaxGraphs;
    GraphSlot& s = g_graph_slots[index];
    if (s.graph) continue;
    s.graph = g;
    s.engine = engine;
    g_cursor = (index + 1) % kMaxGraphs;
    *out = reinterpret_cast<ordo_graph*>(encode(index, s.gen));
    return ORDO_OK;
  }
  return fail(ORDO_ERR_NO_MEMORY, "%u graphs exist, the most ordo holds", kMaxGraphs);
}

ordo_status find_graph(const char* api, const ordo_graph* h, GraphSlot** out) {
  if (!h) return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: the graph pointer is NULL", api);
  const uintptr_t v = reinterpret_cast<uintptr_t>(h);
  const uint32_t index = static_cast<uint32_t>((v >> 4) & 0xFFFF);
  const uint32_t gen = static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32);
  if ((v & 0xF) != kTag || ((v >> 20) & 0xFFF) != 0 || index >= kMaxGraphs) {
    return fail(ORDO_ERR_INVALID_HANDLE, "%s: %p is not a graph created by ordo", api,
                static_cast<const void*>(h));
  }
  GraphSlot* s = &g_graph_slots[index];
  if (!s->graph || s->gen != gen) {
    return fail(ORDO_ERR_INVALID_HANDLE, "%s: graph %p has been destroyed (or is made up)", api,
                static_cast<const void*>(h));
  }
  *out = s;
  return ORDO_OK;
}

void remove_graph(GraphSlot* s) {
  s->graph = nullptr;
  s->engine = nullptr;
  s->gen = s->gen + 1 == 0 ? 1 : s->gen + 1;
}

}  // namespace ordo
