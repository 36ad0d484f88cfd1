// The push lane a thread that is not a worker owns in each engine it pushes to: claimed on its
// first push, remembered in a small thread-local cache keyed by the engine's unique id, and
// given back when the thread exits or the cache evicts it (see core/push_lane.h for the lane).
#pragma once

#include <cstdint>

#include "base/hot_tls.h"
#include "core/push_lane.h"

namespace ordo {

class Engine;

// The last lane this thread used, and its engine's uid: nearly every push finds its lane here.
extern ORDO_HOT_TLS_SHARED uint64_t tls_last_lane_uid;
extern ORDO_HOT_TLS_SHARED PushLane* tls_last_lane;

// claim_lane() past the last lane used: the thread's cache, or a new claim.
PushLane* claim_lane_slow(Engine* engine);

// The lane the calling (non-worker) thread owns in `engine` (whose uid() is `uid`), claiming one
// if needed; nullptr when every lane is taken (the caller then uses the engine's shared lane).
// Inline: it is on every push of a thread that is not a worker.
[[gnu::always_inline]] inline PushLane* claim_lane(Engine* engine, uint64_t uid) {
  if (tls_last_lane_uid == uid) return tls_last_lane;
  return claim_lane_slow(engine);
}

}  // namespace ordo
