// What the engine's entry points (api.cpp) do for a thread that has a capture open
// (graph/capture.h): record a push instead of making it, or refuse a call that cannot be
// captured. Out of line (graph_api.cpp): the push path only tests the thread-local.
#pragma once

#include <cstddef>

#include "engine/engine.h"
#include "graph/capture.h"
#include "ordo/ordo.h"

namespace ordo {

// A wait, var delete or clear, or destroy of the engine this thread is capturing: INVALID_STATE.
ordo_status refuse_in_capture(const char* api);
// ordo_opr_push and ordo_opr_push_prepared while capturing: recorded, not pushed.
ordo_status record_push(Capture* c, const OpSpec& spec, const ordo_var* const_vars,
                        size_t num_const, const ordo_var* mutable_vars, size_t num_mutable);
ordo_status record_prepared(Capture* c, ordo_opr opr, int32_t priority);

}  // namespace ordo
