#include "engine/lane_cache.h"

#include <pthread.h>

#include <new>

#include "base/hot_tls.h"
#include "engine/engine.h"
#include "engine/engine_lookup.h"

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

// Runs `fn(engine)` on the entry's engine if it still lives, checked by tag in the registry and
// then by uid, so that a destroyed engine (or a new one in its slot) is never touched; false
// when it is gone.
template <class F>
bool with_entry_engine(const LaneEntry& e, F&& fn) {
  const EngineLookup& lookup = engine_lookup();
  Engine* engine = lookup.pin ? lookup.pin(e.tag) : nullptr;
  if (!engine) return false;
  const bool result = engine->uid() == e.uid && fn(engine);
  lookup.unpin(e.tag);
  return result;
}

// Gives the entry's lane back (if its engine still lives) and empties the entry.
void give_back(LaneEntry& e) {
  if (e.lane) {
    with_entry_engine(e, [&](Engine*) {
      e.lane->owner.store(0, std::memory_order_release);
      return true;
    });
  }
  e = LaneEntry{};
}

// True when an op (or free_fn) of the entry's engine is on this thread's stack. A frame below
// may then still be using the entry's lane: a pusher that runs ops (ORDO_ENGINE_FLAG_PUSHERS_HELP)
// counts their completions and returns their blocks on it after the op, which may have pushed
// to other engines meanwhile. Given back, the lane could be claimed by another thread and its
// magazine shared.
bool used_below(const LaneEntry& e) {
  return e.lane &&
         with_entry_engine(e, [](Engine* engine) { return engine->called_from_inside(); });
}

struct LaneCache {
  static constexpr unsigned kEntries = 4;
  LaneEntry entries[kEntries];
  unsigned next_victim = 0;
  // The next entry round the cache that may be given back; nullptr when a frame below uses
  // every one (the caller then pushes through the engine's shared lane).
  LaneEntry* pick_victim() {
    for (unsigned tries = 0; tries < kEntries; ++tries) {
      LaneEntry& e = entries[next_victim++ % kEntries];
      if (!used_below(e)) return &e;
    }
    return nullptr;
  }
};

// On the heap, allocated at the thread's first lane claim (lane_cache()): a dlopen'ed library's
// thread-locals come out of glibc's small static TLS surplus, shared by every library loaded that
// way (tests/check_so_limits.sh), and the cache's 104 bytes were the largest of ordo's. Its
// lanes are given back and the cache freed by a pthread key destructor (ThreadExitHook), not a
// thread_local destructor.
ORDO_HOT_TLS LaneCache* tls_lanes = nullptr;

// This thread's cache, allocated on first use; nullptr when out of memory. Out of line: only a
// push that misses the last lane used comes here.
[[gnu::noinline]] LaneCache* lane_cache() {
  if (!tls_lanes) tls_lanes = new (std::nothrow) LaneCache();
  return tls_lanes;
}
ORDO_HOT_TLS uint64_t tls_token = 0;
// Set when ThreadExitHook has given this thread's lanes back. A caller's key destructor may
// still push after that: it must neither use a lane given back (another thread may own it now)
// nor claim one that nothing would give back.
ORDO_HOT_TLS bool tls_lanes_gone = false;

// Gives a thread's lanes back when it exits. A pthread key rather than a thread_local
// destructor: glibc runs thread_local destructors before key destructors, so a thread whose
// first push comes from a key destructor of the caller's would construct its cache after they
// ran, and its lane would never come back. Setting the key's value from inside a key destructor
// makes glibc run another round of them, which gives that lane back too, unless the push came
// in glibc's last round (PTHREAD_DESTRUCTOR_ITERATIONS, 4). libordo.so is linked with
// -z nodelete, so this destructor is never unmapped by a dlclose before it runs.
class ThreadExitHook {
 public:
  static ThreadExitHook& get() {
    static ThreadExitHook hook;
    return hook;
  }
  // Whether this thread's lanes will be given back when it exits; false when no key could be
  // created (the thread then pushes through the shared lanes). Cheap enough to repeat on every
  // lane claimed: the key's value is one store.
  bool arm(LaneCache* cache) { return created_ && pthread_setspecific(key_, cache) == 0; }

 private:
  ThreadExitHook() { created_ = pthread_key_create(&key_, &on_thread_exit) == 0; }
  ~ThreadExitHook() {  // the library is being unloaded, or the process is exiting
    if (created_) pthread_key_delete(key_);
    created_ = false;  // threads that push from now on use the shared lanes
  }
  static void on_thread_exit(void* cache) {
    for (auto& e : static_cast<LaneCache*>(cache)->entries) give_back(e);
    delete static_cast<LaneCache*>(cache);
    tls_lanes = nullptr;
    tls_last_lane_uid = 0;
    tls_last_lane = nullptr;
    tls_lanes_gone = true;
  }
  pthread_key_t key_{};
  bool created_ = false;
};

}  // namespace

ORDO_HOT_TLS_SHARED uint64_t tls_last_lane_uid = 0;
ORDO_HOT_TLS_SHARED PushLane* tls_last_lane = nullptr;

PushLane* claim_lane_slow(Engine* engine) {
  const uint64_t uid = engine->uid();
  if (tls_lanes_gone) return nullptr;  // the thread is exiting: the shared lane
  LaneCache* cached = lane_cache();
  if (!cached) return nullptr;
  LaneCache& cache = *cached;
  for (auto& e : cache.entries) {
    if (e.uid == uid) {
      tls_last_lane_uid = uid;
      tls_last_lane = e.lane;
      return e.lane;
    }
  }
  if (tls_token == 0) tls_token = new_thread_token();
  if (!ThreadExitHook::get().arm(&cache)) return nullptr;
  LaneEntry* victim = cache.pick_victim();
  if (!victim) return nullptr;
  PushLane* lane = engine->claim_external_lane(tls_token);
  if (!lane) return nullptr;
  if (victim->uid == tls_last_lane_uid) tls_last_lane_uid = 0;
  give_back(*victim);
  *victim = LaneEntry{uid, engine->tag(), lane};
  tls_last_lane_uid = uid;
  tls_last_lane = lane;
  return lane;
}

}  // namespace ordo
