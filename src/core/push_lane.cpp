#include "core/push_lane.h"

#include "api/engine_registry.h"
#include "core/engine.h"
#include "core/hot_tls.h"

namespace ordo {

namespace {

uint64_t new_thread_token() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

struct LaneEntry {
  uint64_t uid = 0;  // the engine's unique id (never reused, unlike its address or tag)
  uint32_t tag = 0;
  PushLane* lane = nullptr;
};

// Gives a lane back if its engine still lives: the registry is checked by tag and the engine by
// uid, so a lane of a destroyed engine is never touched.
void give_back(LaneEntry& e) {
  if (!e.lane) return;
  EngineSlot* slot = slot_for_tag(e.tag);
  if (Engine* engine = slot ? pin_engine(slot) : nullptr) {
    if (engine->uid() == e.uid) e.lane->owner.store(0, std::memory_order_release);
    unpin_engine(slot);
  }
  e = LaneEntry{};
}

struct LaneCache {
  static constexpr unsigned kEntries = 4;
  LaneEntry entries[kEntries];
  unsigned next_victim = 0;
  ~LaneCache() {
    for (auto& e : entries) give_back(e);
  }
};

thread_local LaneCache tls_lanes;
// The last lane used: checked first, without touching tls_lanes (whose destructor makes every
// access go through a TLS wrapper).
ORDO_HOT_TLS uint64_t tls_last_uid = 0;
ORDO_HOT_TLS PushLane* tls_last_lane = nullptr;
ORDO_HOT_TLS uint64_t tls_token = 0;

}  // namespace

PushLane* claim_lane(Engine* engine) {
  const uint64_t uid = engine->uid();
  if (tls_last_uid == uid) return tls_last_lane;
  LaneCache& cache = tls_lanes;
  for (auto& e : cache.entries) {
    if (e.uid == uid) {
      tls_last_uid = uid;
      tls_last_lane = e.lane;
      return e.lane;
    }
  }
  if (tls_token == 0) tls_token = new_thread_token();
  PushLane* lane = engine->claim_external_lane(tls_token);
  if (!lane) return nullptr;
  LaneEntry& victim = cache.entries[cache.next_victim++ % LaneCache::kEntries];
  if (victim.uid == tls_last_uid) tls_last_uid = 0;
  give_back(victim);
  victim = LaneEntry{uid, engine->tag(), lane};
  tls_last_uid = uid;
  tls_last_lane = lane;
  return lane;
}

}  // namespace ordo
