// The push lane a thread that is not a worker owns in each engine it pushes to: claimed on its
// first push, remembered in a small thread-local cache keyed by the engine's unique id, and
// given back when the thread exits or the cache evicts it (see core/push_lane.h for the lane).
#pragma once

#include "core/push_lane.h"

namespace ordo {

class Engine;

// The lane the calling (non-worker) thread owns in `engine`, claiming one if needed; nullptr
// when every lane is taken (the caller then uses the engine's shared lane).
PushLane* claim_lane(Engine* engine);

}  // namespace ordo
