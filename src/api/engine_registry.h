// The engine handle table. An ordo_engine* is the address of a slot in a static array, never
// of the engine itself: ordo can therefore tell a pointer it never handed out, or one whose
// engine is gone, from a live one without reading freed memory. Slots are reused round robin,
// skipping slots in use, so a slot comes back only after 65,535 - L other creations since it
// was last handed out (L: the most engines alive meanwhile).
#pragma once

#include <atomic>
#include <cstdint>

#include "base/fork_guard.h"
#include "engine/engine.h"
#include "ordo/ordo.h"

namespace ordo {

// 32 bytes, so that telling a real slot address from a made-up one is a mask, not a division.
//
// Two counts, because two kinds of holder need the engine for different things:
// - `refs` counts the caller's references (the creator's and each ordo_engine_retain). The last
//   one to go drains the engine, on the thread that lets it go, as destroy does.
// - `pins` keeps the memory alive for calls that have no reference of their own (ordo_complete,
//   which finds its engine from the handle alone; a thread giving back its push lane), plus one
//   pin that all the references hold together until the drain is over. A pin never drains:
//   counted as a reference, an ordo_complete in flight could be left holding the last one, and
//   then drain the engine on the completing thread, waiting for ops that only it would complete.
// The engine is deleted when the last pin goes.
struct alignas(32) EngineSlot {
  std::atomic<Engine*> engine{nullptr};
  std::atomic<int32_t> refs{0};  // 0: released (or free)
  std::atomic<int32_t> pins{0};  // 0: free; the engine is deleted as it drops to 0
  std::atomic<bool> creator_ref{false};
  // The fork generation (base/fork_guard.h) and process the engine was created in; set before
  // `engine` is published.
  std::atomic<uint32_t> fork_gen{0};
  std::atomic<int32_t> creator_pid{0};
};
static_assert(sizeof(EngineSlot) == 32, "slot_of() divides by a power of two");

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
// True when the slot's engine was created in this process, not inherited through fork(): its
// threads exist. One relaxed load when the process never forked.
inline bool made_here(const EngineSlot* s) {
  const uint32_t g = fork_generation();
  return __builtin_expect(g == 0, 1) || s->fork_gen.load(std::memory_order_relaxed) == g;
}
// Why an engine inherited through fork() refuses a call: INVALID_STATE, with the message.
ordo_status inherited_engine(const EngineSlot* s);

// The slot for a handle tag (1-based), or nullptr.
EngineSlot* slot_for_tag(uint32_t tag);

ordo_status create_engine(const EngineConfig& cfg, ordo_engine** out);
ordo_status destroy_engine(ordo_engine* e);
ordo_status retain_engine(ordo_engine* e);
ordo_status release_engine(ordo_engine* e);
// Pins the slot's engine (keeps its memory, not the engine's service) if it is not yet deleted;
// nullptr otherwise. Every successful pin is paired with unpin_engine().
Engine* pin_engine(EngineSlot* slot);
void unpin_engine(EngineSlot* slot);

}  // namespace ordo
