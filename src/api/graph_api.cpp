// The exported ordo_graph_* functions (capture and replay): the capture's thread-local, handle
// look-up and the misuse rules, around a Graph (src/graph/). Everything here runs inside
// guarded(): no C++ exception crosses the C ABI.
#include <memory>
#include <mutex>
#include <new>

#include "api/engine_registry.h"
#include "api/entry.h"
#include "api/graph_entry.h"
#include "api/graph_registry.h"
#include "base/last_error.h"
#include "graph/capture.h"
#include "graph/graph.h"
#include "ordo/ordo.h"

using namespace ordo;

namespace ordo {

bool capturing(const Engine* engine) {
  return capture_for(engine) != nullptr;
}

ordo_status refuse_in_capture(const char* api) {
  return fail(ORDO_ERR_INVALID_STATE,
              "%s: this thread is capturing the engine's pushes (ordo_graph_begin_capture): waits, "
              "var deletes and clears, engine destroy, graph launches and pipeline runs cannot "
              "be captured; call ordo_graph_end_capture first",
              api);
}

}  // namespace ordo

namespace {

ordo_status no_capture(const char* api) {
  return fail(ORDO_ERR_INVALID_STATE,
              "%s: no capture is open on this thread (ordo_graph_begin_capture was not called, or "
              "was called on another thread: a capture ends on the thread that began it)",
              api);
}

// Plans what the graph's launches push (Graph::seal): its chains, found once.
ordo_status seal(const char* api, Graph* graph) {
  try {
    graph->seal();
  } catch (const std::bad_alloc&) {
    return fail(ORDO_ERR_NO_MEMORY,
                "%s: no memory to plan the graph's launches; its %zu recorded ops were dropped "
                "(their free_fns ran)",
                api, graph->size());
  }
  return ORDO_OK;
}

// Ends this thread's capture and gives its graph a handle. The capture is over whatever happens:
// a graph that gets no handle is dropped (its free_fns run now).
ordo_status finish_capture(const char* api, std::unique_ptr<Capture> c, ordo_graph** out) {
  this_thread::recorder = nullptr;
  c->engine_of()->capture_closed();
  std::unique_ptr<Graph> graph = c->take_graph();
  EngineSlot* pin = c->pin();
  ordo_status s;
  if (graph->engine()->shutting_down()) {
    s = fail(ORDO_ERR_SHUTDOWN,
             "%s: the engine was destroyed while the capture was open; its %zu recorded ops were "
             "dropped (their free_fns ran)",
             api, graph->size());
  } else if ((s = seal(api, graph.get())) == ORDO_OK &&
             (s = add_graph(graph.get(), pin, out)) == ORDO_OK) {
    graph.release();  // the table's slot holds the graph and the pin from here
    return ORDO_OK;
  }
  graph.reset();
  unpin_engine(pin);
  return s;
}

}  // namespace

extern "C" {

ORDO_API ordo_status ordo_graph_begin_capture(ordo_engine* e) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (open_capture()) {
      return fail(ORDO_ERR_INVALID_STATE,
                  "%s: a capture is already open on this thread (captures do not nest); end it "
                  "with ordo_graph_end_capture first",
                  api);
    }
    if (engine->called_from_inside()) {
      return fail(ORDO_ERR_INVALID_STATE,
                  "%s: called from inside an op of the engine; pushes from inside ops are never "
                  "captured: begin the capture from the caller's own code",
                  api);
    }
    if (engine->shutting_down()) {
      return fail(ORDO_ERR_SHUTDOWN, "%s: the engine is shut down (destroyed)", api);
    }
    EngineSlot* slot = slot_for_tag(engine->tag());
    if (!slot || !pin_engine(slot)) return bad_engine_handle(e);
    try {
      this_thread::recorder = new Capture(engine, slot);
    } catch (...) {
      unpin_engine(slot);
      throw;
    }
    engine->capture_opened();  // from now on its pushes look for this thread's capture
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_graph_end_capture(ordo_engine* e, ordo_graph** out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&](const char* api) -> ordo_status {
    if (!e) return null_arg(api, "e");
    if (!out) return null_arg(api, "out");
    Capture* c = open_capture();
    if (!c) return no_capture(api);
    // Compared by slot, not resolved: the engine may be destroyed meanwhile (the capture pins
    // its memory), and ending the capture must still work then.
    if (slot_of(e) != c->pin()) {
      return fail(ORDO_ERR_INVALID_STATE,
                  "%s: the capture open on this thread records another engine's pushes", api);
    }
    return finish_capture(api, std::unique_ptr<Capture>(c), out);
  });
}

ORDO_API ordo_status ordo_graph_launch(ordo_graph* g) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    Graph* graph = nullptr;
    {
      std::lock_guard<std::mutex> lock(graph_table_lock());
      GraphSlot* slot = nullptr;
      if (ordo_status s = find_graph(api, g, &slot)) return s;
      graph = slot->graph;
      if (!made_here(slot->engine)) return inherited_engine(slot->engine);
      if (graph->engine()->shutting_down()) {
        return fail(ORDO_ERR_SHUTDOWN, "%s: the graph's engine is shut down (destroyed)", api);
      }
      if (capture_for(graph->engine())) {
        return fail(ORDO_ERR_INVALID_STATE,
                    "%s: this thread is capturing the graph's engine; graphs are not captured "
                    "inside graphs (end the capture first)",
                    api);
      }
      graph->hold();
    }
    struct Unhold {
      Graph* g;
      ~Unhold() { g->release(); }
    } unhold{graph};
    return graph->launch(api);
  });
}

ORDO_API ordo_status ordo_graph_destroy(ordo_graph* g) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    Graph* graph = nullptr;
    EngineSlot* engine = nullptr;
    {
      std::lock_guard<std::mutex> lock(graph_table_lock());
      GraphSlot* slot = nullptr;
      if (ordo_status s = find_graph(api, g, &slot)) return s;
      if (!made_here(slot->engine)) {
        // In a child of fork(): the engine's threads stayed in the parent. The handle goes;
        // the memory stays as the fork left it, and no caller code runs.
        remove_graph(slot);
        return ORDO_OK;
      }
      if (slot->graph->in_flight()) {
        return fail(ORDO_ERR_INVALID_STATE,
                    "%s: a launch of this graph is in flight (being pushed, or ops of it not yet "
                    "finished); wait for them first (ordo_wait_for_all)",
                    api);
      }
      graph = slot->graph;
      engine = slot->engine;
      remove_graph(slot);
    }
    delete graph;          // the caller's free_fns run here, on this thread
    unpin_engine(engine);  // may free the engine, if it is gone otherwise
    return ORDO_OK;
  });
}

}  // extern "C"
