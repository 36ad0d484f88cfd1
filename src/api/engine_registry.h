// The engine handle table. An ordo_engine* is the address of a slot in a static array, never
// of the engine itself: ordo can therefore tell a pointer it never handed out, or one whose
// engine is gone, from a live one without reading freed memory. Slots are reused round robin,
// so a stale pointer stays invalid until 65,535 more engines have been created.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/engine.h"
#include "ordo/ordo.h"

namespace ordo {

// 32 bytes, so that telling a real slot address from a made-up one is a mask, not a division.
struct alignas(32) EngineSlot {
  std::atomic<Engine*> engine{nullptr};
  std::atomic<int64_t> refs{0};  // 0: free (or freed)
  std::atomic<bool> creator_ref{false};
};

constexpr uint32_t kMaxEngines = 65535;  // tags are 16 bits, 0 excluded

// The table itself (engine_registry.cpp); read here by slot_of, on every call's fast path.
extern EngineSlot g_engine_slots[kMaxEngines];

// Says why `e` names no live engine: INVALID_ARGUMENT (NULL) or INVALID_HANDLE (not ours, or
// freed), with the message.
ordo_status bad_engine_handle(ordo_engine* e);

// The slot `e` points at, or nullptr when it points at none (NULL, made up, misaligned).
inline EngineSlot* slot_of(ordo_engine* e) {
  // One unsigned compare rejects addresses below the table too (the difference wraps).
  const uintptr_t offset =
      reinterpret_cast<uintptr_t>(e) - reinterpret_cast<uintptr_t>(&g_engine_slots[0]);
  if (offset >= sizeof g_engine_slots || offset % sizeof(EngineSlot) != 0) return nullptr;
  return reinterpret_cast<EngineSlot*>(e);
}

// ORDO_OK with *out set, or INVALID_ARGUMENT (NULL) / INVALID_HANDLE (not ours, or freed).
// Inline: every call into ordo starts here, and a push is a few hundred instructions in all.
inline ordo_status resolve_engine(ordo_engine* e, Engine** out, EngineSlot** slot_out = nullptr) {
  if (EngineSlot* s = slot_of(e)) {
    Engine* engine = s->engine.load(std::memory_order_acquire);
    if (engine && s->refs.load(std::memory_order_acquire) != 0) {
      *out = engine;
      if (slot_out) *slot_out = s;
      return ORDO_OK;
    }
  }
  *out = nullptr;  // never left unset, whatever the caller then reads
  if (slot_out) *slot_out = nullptr;
  return bad_engine_handle(e);
}
// The slot for a handle tag (1-based), or nullptr.
EngineSlot* slot_for_tag(uint32_t tag);

ordo_status create_engine(const EngineConfig& cfg, ordo_engine** out);
ordo_status destroy_engine(ordo_engine* e);
ordo_status retain_engine(ordo_engine* e);
ordo_status release_engine(ordo_engine* e);
// Takes a reference if the slot is live; used by ordo_complete, which has no engine argument.
Engine* try_retain(EngineSlot* slot);
void release_slot(EngineSlot* slot);

}  // namespace ordo
