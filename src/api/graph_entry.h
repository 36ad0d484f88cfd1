// What the engine's entry points (api.cpp, pipeline_api.cpp) do for a thread that has a capture
// open (graph/capture.h): refuse a call that cannot be captured. (Pushes are recorded by the
// engine itself: engine/push_recorder.h.) Declarations only, defined in graph_api.cpp: api.cpp
// then compiles as it did before captures existed (its push entry points are measured per
// instruction: docs/PERFORMANCE.md).
#pragma once

#include "ordo/ordo.h"

namespace ordo {

class Engine;

// True when this thread captures `engine`'s pushes now (not from inside an op of it).
bool capturing(const Engine* engine);
// A wait, var delete or clear, or destroy of the engine this thread is capturing: INVALID_STATE.
ordo_status refuse_in_capture(const char* api);

}  // namespace ordo
