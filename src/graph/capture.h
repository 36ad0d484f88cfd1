// The capture open on a thread (ordo_graph_begin_capture .. ordo_graph_end_capture): while it is
// open, that thread's pushes to its engine (ordo_opr_push, ordo_opr_push_prepared) are recorded
// into a Graph instead of made. The engine hands them over routed and resolved, at the point
// where it would count them (engine/push_recorder.h): a capture checks a push exactly as a push
// is checked, and ordinary pushes pay nothing for it. Pushes made from inside an op (a callback
// or free_fn of the engine on this thread's stack) are never recorded: the capture belongs to
// the caller's own code.
#pragma once

#include <memory>

#include "engine/engine.h"
#include "engine/push_recorder.h"
#include "graph/graph.h"

namespace ordo {

struct EngineSlot;  // the API layer's pin on the engine's memory (api/engine_registry.h)

class Capture final : public PushRecorder {
 public:
  Capture(Engine* e, EngineSlot* pin)
      : PushRecorder(e), engine_(e), pin_(pin), graph_(std::make_unique<Graph>(e)) {}
  Engine* engine_of() const { return engine_; }
  EngineSlot* pin() const { return pin_; }  // owned by the capture, then by the graph's slot
  std::unique_ptr<Graph> take_graph() { return std::move(graph_); }

  ordo_status record(const OpSpec& spec, WorkerGroup* group, const VarRef* refs,
                     size_t n) override {
    return graph_->add(spec, group, refs, n);
  }

 private:
  Engine* const engine_;
  EngineSlot* const pin_;
  std::unique_ptr<Graph> graph_;
};

// The capture that records this thread's pushes to `engine` now, or nullptr (none open, another
// engine's, or a call from inside an op).
inline Capture* capture_for(const Engine* engine) {
  return static_cast<Capture*>(recorder_for(engine));
}

// This thread's open capture, of any engine, or nullptr.
inline Capture* open_capture() {
  return static_cast<Capture*>(this_thread::recorder);
}

}  // namespace ordo
