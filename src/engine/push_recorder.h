// PushRecorder: what a thread that captures an engine's pushes (src/graph/,
// ordo_graph_begin_capture) puts in this_thread::recorder. A push from such a thread (its own code,
// not an op on its stack) is recorded instead of made: PushPath::push_resolved hands the routed op,
// its resolved vars and its spec to record() before it counts the push.
//
// It costs the push path nothing: the engine counts its open captures in the word whose test
// every push already makes for shutdown (PushPath::gate_), and only while one is open does a
// push look for its thread's recorder.
#pragma once

#include <cstddef>

#include "core/var_refs.h"
#include "engine/thread_state.h"
#include "exec/worker_host.h"
#include "ordo/ordo.h"

namespace ordo {

class WorkerGroup;
struct OpSpec;

class PushRecorder {
 public:
  explicit PushRecorder(const WorkerHost* engine) : engine_(engine) {}
  virtual ~PushRecorder() = default;
  PushRecorder(const PushRecorder&) = delete;
  PushRecorder& operator=(const PushRecorder&) = delete;

  const WorkerHost* engine() const { return engine_; }
  // Records the push. ORDO_OK: recorded, nothing pushed (a prepared op's reference taken for
  // the push, spec.internal, now belongs to the recorder); else nothing recorded.
  virtual ordo_status record(const OpSpec& spec, WorkerGroup* group, const VarRef* refs,
                             size_t n) = 0;

 private:
  const WorkerHost* const engine_;
};

namespace this_thread {
// The calling thread's open capture, or nullptr.
extern ORDO_HOT_TLS_SHARED PushRecorder* recorder;
}  // namespace this_thread

// The recorder that takes this thread's pushes to `engine` now, or nullptr (none open, another
// engine's, or a push from inside an op: those are never recorded).
inline PushRecorder* recorder_for(const WorkerHost* engine) {
  PushRecorder* r = this_thread::recorder;
  return r && r->engine() == engine && !this_thread::busy_with(engine) ? r : nullptr;
}

}  // namespace ordo
