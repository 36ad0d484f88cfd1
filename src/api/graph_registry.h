// The graph handle table. An ordo_graph* is not an address: it packs a slot index and the slot's
// generation (graph_registry.cpp), so that a destroyed graph's handle, one of a slot used again
// since, or a made-up pointer is told from a live graph without reading freed memory
// (INVALID_HANDLE), however often slots are reused.
//
// Every look-up holds the table's lock while it uses the slot. A launch takes a hold on the
// graph (Graph::hold) under the lock and drops it when its pushes are done; destroy refuses a
// graph with a hold or ops in flight, so neither a launch nor a running op sees it go.
#pragma once

#include <cstdint>
#include <mutex>

#include "api/engine_registry.h"
#include "graph/graph.h"
#include "ordo/ordo.h"

namespace ordo {

struct GraphSlot {
  Graph* graph = nullptr;
  EngineSlot* engine = nullptr;  // pinned while the graph lives (its memory, not its service)
  uint32_t gen = 1;              // bumped when the graph goes
};

constexpr uint32_t kMaxGraphs = 65535;

std::mutex& graph_table_lock();

// Stores a new graph (and the pin on its engine) in a free slot: *out is its handle. NO_MEMORY
// when every slot is in use (the caller still owns both).
ordo_status add_graph(Graph* g, EngineSlot* engine, ordo_graph** out);

// With the lock held: the slot `h` names, or INVALID_ARGUMENT (NULL) / INVALID_HANDLE (made up,
// or destroyed) with a message naming `api`.
ordo_status find_graph(const char* api, const ordo_graph* h, GraphSlot** out);

// With the lock held: empties the slot (its handle is invalid from now on).
void remove_graph(GraphSlot* s);

}  // namespace ordo
