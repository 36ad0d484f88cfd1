// What the engine's entry points (api.cpp, pipeline_api.cpp) do for a thread that has a capture
// open (graph/capture.h): refuse a call that cannot be captured. (Pushes are recorded by the
// engine itself: engine/push_recorder.h.)
#pragma once

#include <cstddef>

#include "engine/engine.h"
#include "graph/capture.h"
#include "ordo/ordo.h"

namespace ordo {

// A wait, var delete or clear, or destroy of the engine this thread is capturing: INVALID_STATE.
ordo_status refuse_in_capture(const char* api);

}  // namespace ordo
