// The layout shared by var, completion and prepared-op handles (64 bits):
//   [63..48] engine tag (1-based slot in the engine table; tells which engine issued it)
//   [47..46] kind (var, prepared op or completion; 0 is never issued)
//   [45..24] generation (22 bits, never 0; bumped each time the slot is reused)
//   [23..0]  index within that engine's table
// A handle is therefore never 0, a handle from another engine is recognised by its tag, a
// stale handle by its generation, and a handle of one kind passed where another is expected by
// its kind: without the kind, the first var and the first prepared op of an engine had the
// same value, and ordo_opr_delete() given a var handle deleted a prepared op.
#pragma once

#include <cinttypes>
#include <cstdint>

#include "base/last_error.h"

namespace ordo {

enum class HandleKind : uint32_t { kNone = 0, kVar = 1, kPrepared = 2, kCompletion = 3 };

// "var", "prepared op", "completion", for error messages.
inline const char* handle_kind_name(HandleKind k) {
  switch (k) {
    case HandleKind::kVar:
      return "var";
    case HandleKind::kPrepared:
      return "prepared op";
    case HandleKind::kCompletion:
      return "completion";
    case HandleKind::kNone:
      break;
  }
  return "no kind of";
}

constexpr uint32_t kGenerationBits = 22;
constexpr uint32_t kGenerationMask = (1u << kGenerationBits) - 1;

struct HandleBits {
  uint32_t tag;
  HandleKind kind;
  uint32_t gen;
  uint32_t index;

  static HandleBits decode(uint64_t h) {
    return {static_cast<uint32_t>(h >> 48), static_cast<HandleKind>((h >> 46) & 3),
            static_cast<uint32_t>((h >> 24) & kGenerationMask),
            static_cast<uint32_t>(h & 0xFFFFFF)};
  }
  static uint64_t encode(uint32_t tag, HandleKind kind, uint32_t gen, uint32_t index) {
    return (static_cast<uint64_t>(tag) << 48) | (static_cast<uint64_t>(kind) << 46) |
           (static_cast<uint64_t>(gen & kGenerationMask) << 24) | (index & 0xFFFFFF);
  }
};

// When `h` carries a kind other than `expected` (a var handle given to ordo_opr_delete, ...):
// records a message that names both kinds and returns ORDO_ERR_INVALID_HANDLE; else ORDO_OK.
inline ordo_status check_handle_kind(uint64_t h, HandleKind expected) {
  HandleKind got = HandleBits::decode(h).kind;
  if (got == expected || got == HandleKind::kNone) return ORDO_OK;  // kNone: made up, said later
  return fail(ORDO_ERR_INVALID_HANDLE, "handle 0x%016" PRIx64 " is a %s handle, not a %s handle", h,
              handle_kind_name(got), handle_kind_name(expected));
}

// The next generation after `gen`, or 0 when the 22-bit space is spent (the slot retires).
inline uint32_t next_generation(uint32_t gen) {
  return (gen + 1) & kGenerationMask;
}

}  // namespace ordo
