#include "api/engine_registry.h"

#include <unistd.h>

#include <mutex>
#include <new>

#include "base/last_error.h"
#include "engine/engine_lookup.h"

namespace ordo {

EngineSlot g_engine_slots[kMaxEngines];

namespace {

std::mutex g_create_mutex;  // engine creation only
uint32_t g_cursor = 0;

// The create lock is held across fork(), so that a child never inherits it locked by a thread
// that does not exist there (engines created in the child must work).
const bool g_fork_handlers = on_fork([] { g_create_mutex.lock(); }, [] { g_create_mutex.unlock(); },
                                     [] { g_create_mutex.unlock(); });

uint32_t tag_of(const EngineSlot* s) {
  return static_cast<uint32_t>(s - g_engine_slots) + 1;
}

// Reserves a free slot (refs 0 -> 1, and the references' pin), or nullptr when all are in use.
EngineSlot* reserve_slot() {
  std::lock_guard<std::mutex> g(g_create_mutex);
  for (uint32_t n = 0; n < kMaxEngines; ++n) {
    EngineSlot* s = &g_engine_slots[(g_cursor + n) % kMaxEngines];
    // Free: no pin, and the last one has finished deleting the engine (it clears `engine` last).
    if (s->pins.load(std::memory_order_acquire) == 0 &&
        s->engine.load(std::memory_order_acquire) == nullptr) {
      s->refs.store(1, std::memory_order_relaxed);
      s->pins.store(1, std::memory_order_release);
      g_cursor = (g_cursor + n + 1) % kMaxEngines;
      return s;
    }
  }
  return nullptr;
}

// Drops one of the caller's references. The last one drains the engine on this thread, then
// lets go of the references' pin. Refused (WOULD_DEADLOCK, the reference kept) when it would be
// the last and this thread runs an op of the engine: the drain would wait for that op. The test
// is made on the count it is about to drop, so two threads releasing at once cannot leave the
// last reference to the one inside an op.
ordo_status drop_reference(EngineSlot* s, Engine* engine) {
  int32_t r = s->refs.load(std::memory_order_acquire);
  if (!made_here(s)) {
    // An engine inherited through fork(): its threads are the parent's, so there is nothing to
    // drain or join here, and its memory (locks other threads held, ops they ran) is left as it
    // is: the last reference only makes the handle invalid. No caller code of it runs.
    do {
      if (r <= 0) {
        return fail(ORDO_ERR_INVALID_HANDLE, "engine %p has been released", static_cast<void*>(s));
      }
    } while (!s->refs.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel));
    return ORDO_OK;
  }
  for (;;) {
    if (r <= 0) {
      return fail(ORDO_ERR_INVALID_HANDLE, "engine %p has been released", static_cast<void*>(s));
    }
    if (r == 1) {
      if (engine->called_from_inside()) {
        return fail(ORDO_ERR_WOULD_DEADLOCK,
                    "releasing the last reference from inside an op of the same engine would "
                    "wait for itself; the reference is kept");
      }
      // Drain while still counted, so that calls made meanwhile (an op that pushes, a waiter)
      // find a live engine that says SHUTDOWN rather than a freed handle.
      engine->shutdown();
      if (s->refs.compare_exchange_strong(r, 0, std::memory_order_acq_rel)) break;
      continue;  // ordo_engine_retain took one meanwhile: that holder now has the last one
    }
    if (s->refs.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel)) return ORDO_OK;
  }
  // Here, not when the last pin goes (possibly on a thread that only completed a stale handle,
  // or one that is exiting): the free_fns run on the thread that released the engine. The pin
  // goes in a destructor: a free_fn may end the thread with a forced unwind.
  struct Unpin {
    EngineSlot* slot;
    ~Unpin() { unpin_engine(slot); }
  } unpin{s};
  engine->free_prepared_ops();
  return ORDO_OK;
}

}  // namespace

namespace {

// The registry is how core code (push lanes given back at thread exit) finds a live engine by
// its tag: installed when the library loads, before any engine can exist.
Engine* pin_by_tag(uint32_t tag) {
  EngineSlot* slot = slot_for_tag(tag);
  return slot && made_here(slot) ? pin_engine(slot) : nullptr;
}
void unpin_by_tag(uint32_t tag) {
  unpin_engine(slot_for_tag(tag));
}
const bool g_lookup_installed = [] {
  install_engine_lookup(EngineLookup{pin_by_tag, unpin_by_tag});
  return true;
}();

}  // namespace

ordo_status bad_engine_handle(ordo_engine* e) {
  if (!e) return fail(ORDO_ERR_INVALID_ARGUMENT, "the engine pointer is NULL");
  if (!slot_of(e)) {
    return fail(ORDO_ERR_INVALID_HANDLE, "%p is not an engine created by ordo", (void*)e);
  }
  return fail(ORDO_ERR_INVALID_HANDLE,
              "engine %p has been destroyed and its last reference released", (void*)e);
}

ordo_status inherited_engine(const EngineSlot* s) {
  return fail(ORDO_ERR_INVALID_STATE,
              "engine %p was created by process %d before a fork(); in this process (%d) it has no "
              "threads and cannot be used: create an engine here (ordo_engine_destroy and "
              "ordo_engine_release still let go of its handle)",
              static_cast<const void*>(s), static_cast<int>(s->creator_pid.load()),
              static_cast<int>(getpid()));
}

EngineSlot* slot_for_tag(uint32_t tag) {
  return (tag >= 1 && tag <= kMaxEngines) ? &g_engine_slots[tag - 1] : nullptr;
}

ordo_status create_engine(const EngineConfig& cfg, ordo_engine** out) {
  EngineSlot* s = reserve_slot();
  if (!s) return fail(ORDO_ERR_NO_MEMORY, "%u engines exist, the most ordo holds", kMaxEngines);
  auto* engine = new (std::nothrow) Engine(tag_of(s), cfg);
  ordo_status st = engine ? engine->start() : fail(ORDO_ERR_NO_MEMORY, "out of memory");
  if (st != ORDO_OK) {
    delete engine;
    s->refs.store(0, std::memory_order_relaxed);
    unpin_engine(s);  // a pin taken meanwhile found no engine and lets go by itself
    return st;
  }
  s->creator_ref.store(true, std::memory_order_relaxed);
  s->fork_gen.store(fork_generation(), std::memory_order_relaxed);
  s->creator_pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  s->engine.store(engine, std::memory_order_release);
  *out = reinterpret_cast<ordo_engine*>(s);
  return ORDO_OK;
}

ordo_status destroy_engine(ordo_engine* e) {
  Engine* engine;
  EngineSlot* s;
  if (ordo_status st = resolve_engine(e, &engine, &s)) return st;
  if (made_here(s) && engine->called_from_inside()) {
    return fail(ORDO_ERR_WOULD_DEADLOCK,
                "ordo_engine_destroy called from inside an op of the same engine would wait for "
                "itself; nothing was done");
  }
  if (!s->creator_ref.exchange(false, std::memory_order_acq_rel)) {
    return fail(ORDO_ERR_SHUTDOWN, "ordo_engine_destroy: the engine was already destroyed");
  }
  if (made_here(s)) engine->shutdown();
  return drop_reference(s, engine);  // not from inside an op: checked above
}

ordo_status retain_engine(ordo_engine* e) {
  Engine* engine;
  EngineSlot* s;
  if (ordo_status st = resolve_engine(e, &engine, &s)) return st;
  int32_t r = s->refs.load(std::memory_order_acquire);
  do {
    if (r <= 0) return fail(ORDO_ERR_INVALID_HANDLE, "engine %p has been released", (void*)e);
    if (r == INT32_MAX) {  // one more would wrap the count negative: the engine would look freed
      return fail(ORDO_ERR_NO_MEMORY,
                  "ordo_engine_retain: engine %p already holds %d references, the most it counts",
                  (void*)e, static_cast<int>(INT32_MAX));
    }
  } while (!s->refs.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel));
  return ORDO_OK;
}

ordo_status release_engine(ordo_engine* e) {
  Engine* engine;
  EngineSlot* s;
  if (ordo_status st = resolve_engine(e, &engine, &s)) return st;
  return drop_reference(s, engine);
}

Engine* pin_engine(EngineSlot* s) {
  int32_t p = s->pins.load(std::memory_order_acquire);
  do {
    if (p <= 0) return nullptr;  // deleted, or never created
  } while (!s->pins.compare_exchange_weak(p, p + 1, std::memory_order_acq_rel));
  if (Engine* engine = s->engine.load(std::memory_order_acquire)) return engine;
  unpin_engine(s);  // still being created (or failed to be)
  return nullptr;
}

void unpin_engine(EngineSlot* s) {
  if (s->pins.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The last pin: every reference is gone and the drain is over (the references' pin is dropped
  // only after it), so nothing runs in the engine any more. `engine` is cleared last: until
  // then reserve_slot() does not hand the slot out again.
  delete s->engine.load(std::memory_order_acquire);
  s->creator_ref.store(false, std::memory_order_relaxed);
  s->engine.store(nullptr, std::memory_order_release);
}

}  // namespace ordo
