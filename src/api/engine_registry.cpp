#include "api/engine_registry.h"

#include <mutex>
#include <new>

#include "core/last_error.h"

namespace ordo {

EngineSlot g_engine_slots[kMaxEngines];

namespace {

std::mutex g_create_mutex;  // engine creation only
uint32_t g_cursor = 0;

uint32_t tag_of(const EngineSlot* s) {
  return static_cast<uint32_t>(s - g_engine_slots) + 1;
}

// Reserves a free slot (refs 0 -> 1), or nullptr when all are in use.
EngineSlot* reserve_slot() {
  std::lock_guard<std::mutex> g(g_create_mutex);
  for (uint32_t n = 0; n < kMaxEngines; ++n) {
    EngineSlot* s = &g_engine_slots[(g_cursor + n) % kMaxEngines];
    if (s->refs.load(std::memory_order_acquire) == 0 &&
        s->engine.load(std::memory_order_acquire) == nullptr) {
      s->refs.store(1, std::memory_order_release);
      g_cursor = (g_cursor + n + 1) % kMaxEngines;
      return s;
    }
  }
  return nullptr;
}

}  // namespace

ordo_status bad_engine_handle(ordo_engine* e) {
  if (!e) return fail(ORDO_ERR_INVALID_ARGUMENT, "the engine pointer is NULL");
  if (!slot_of(e)) {
    return fail(ORDO_ERR_INVALID_HANDLE, "%p is not an engine created by ordo", (void*)e);
  }
  return fail(ORDO_ERR_INVALID_HANDLE,
              "engine %p has been destroyed and its last reference released", (void*)e);
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
    s->refs.store(0, std::memory_order_release);
    return st;
  }
  s->creator_ref.store(true, std::memory_order_relaxed);
  s->engine.store(engine, std::memory_order_release);
  *out = reinterpret_cast<ordo_engine*>(s);
  return ORDO_OK;
}

ordo_status destroy_engine(ordo_engine* e) {
  Engine* engine;
  EngineSlot* s;
  if (ordo_status st = resolve_engine(e, &engine, &s)) return st;
  if (engine->called_from_inside()) {
    return fail(ORDO_ERR_WOULD_DEADLOCK,
                "ordo_engine_destroy called from inside an op of the same engine would wait for "
                "itself; nothing was done");
  }
  if (!s->creator_ref.exchange(false, std::memory_order_acq_rel)) {
    return fail(ORDO_ERR_SHUTDOWN, "ordo_engine_destroy: the engine was already destroyed");
  }
  engine->shutdown();
  release_slot(s);
  return ORDO_OK;
}

ordo_status retain_engine(ordo_engine* e) {
  Engine* engine;
  EngineSlot* s;
  if (ordo_status st = resolve_engine(e, &engine, &s)) return st;
  if (!try_retain(s)) {
    return fail(ORDO_ERR_INVALID_HANDLE, "engine %p has been released", (void*)e);
  }
  return ORDO_OK;
}

ordo_status release_engine(ordo_engine* e) {
  Engine* engine;
  EngineSlot* s;
  if (ordo_status st = resolve_engine(e, &engine, &s)) return st;
  if (s->refs.load(std::memory_order_acquire) == 1 && engine->called_from_inside()) {
    return fail(ORDO_ERR_WOULD_DEADLOCK,
                "releasing the last reference from inside an op of the same engine would wait "
                "for itself; the reference is kept");
  }
  release_slot(s);
  return ORDO_OK;
}

Engine* try_retain(EngineSlot* s) {
  int64_t r = s->refs.load(std::memory_order_acquire);
  while (r > 0) {
    if (s->refs.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel)) {
      Engine* engine = s->engine.load(std::memory_order_acquire);
      if (engine) return engine;
      release_slot(s);  // still being created
      return nullptr;
    }
  }
  return nullptr;
}

void release_slot(EngineSlot* s) {
  int64_t r = s->refs.load(std::memory_order_acquire);
  for (;;) {
    if (r == 1) {
      // The last reference drains the engine *before* it lets go: while it still counts, the
      // ordo_complete of a deferred op can take a temporary reference and finish that op, which
      // the drain waits for. Dropping to 0 first would refuse that completion and wait forever.
      if (Engine* engine = s->engine.load(std::memory_order_acquire)) engine->shutdown();
      if (s->refs.compare_exchange_strong(r, 0, std::memory_order_acq_rel)) break;
      continue;  // a completion took a reference meanwhile; it drops it itself
    }
    if (s->refs.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel)) return;
  }
  Engine* engine = s->engine.load(std::memory_order_acquire);
  delete engine;  // already shut down
  s->creator_ref.store(false, std::memory_order_relaxed);
  s->engine.store(nullptr, std::memory_order_release);
}

}  // namespace ordo
