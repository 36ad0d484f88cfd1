// The capture open on a thread (ordo_graph_begin_capture .. ordo_graph_end_capture): while it is
// open, that thread's pushes to its engine (ordo_opr_push, ordo_opr_push_prepared) are recorded
// into a Graph instead of run. Pushes made from inside an op (a callback or free_fn of the engine
// on this thread's stack) are never recorded: the capture belongs to the caller's own code.
//
// It costs one pointer of static TLS; the push path tests it once (capture_for), and only a
// capturing thread looks further.
#pragma once

#include <memory>

#include "base/hot_tls.h"
#include "engine/engine.h"
#include "graph/graph.h"

namespace ordo {

struct EngineSlot;  // the API layer's pin on the engine's memory (api/engine_registry.h)

struct Capture {
  Capture(Engine* e, EngineSlot* pin) : engine(e), pin(pin), graph(std::make_unique<Graph>(e)) {}
  Engine* const engine;
  EngineSlot* const pin;  // owned by the capture, then by the graph's handle slot
  std::unique_ptr<Graph> graph;
};

// The calling thread's open capture, or nullptr.
extern ORDO_HOT_TLS_SHARED Capture* t_capture;

// The capture that records this thread's pushes to `engine` now, or nullptr (none open, another
// engine's, or a push from inside an op).
inline Capture* capture_for(const Engine* engine) {
  Capture* c = t_capture;
  if (__builtin_expect(c == nullptr, 1)) return nullptr;
  return c->engine == engine && !engine->called_from_inside() ? c : nullptr;
}

// True when this thread has a capture open on `engine` (waits and deletes refuse it then).
inline bool capturing(const Engine* engine) {
  Capture* c = t_capture;
  return __builtin_expect(c != nullptr, 0) && c->engine == engine;
}

}  // namespace ordo
