// The layout shared by var, completion and prepared-op handles (64 bits):
//   [63..48] engine tag (1-based slot in the engine table; tells which engine issued it)
//   [47..24] generation (24 bits, never 0; bumped each time the slot is reused)
//   [23..0]  index within that engine's table
// A handle is therefore never 0, a handle from another engine is recognised by its tag, and a
// stale handle by its generation.
#pragma once

#include <cstdint>

namespace ordo {

struct HandleBits {
  uint32_t tag;
  uint32_t gen;
  uint32_t index;

  static HandleBits decode(uint64_t h) {
    return {static_cast<uint32_t>(h >> 48), static_cast<uint32_t>((h >> 24) & 0xFFFFFF),
            static_cast<uint32_t>(h & 0xFFFFFF)};
  }
  static uint64_t encode(uint32_t tag, uint32_t gen, uint32_t index) {
    return (static_cast<uint64_t>(tag) << 48) | (static_cast<uint64_t>(gen & 0xFFFFFF) << 24) |
           (index & 0xFFFFFF);
  }
};

// The next generation after `gen`, or 0 when the 24-bit space is spent (the slot retires).
inline uint32_t next_generation(uint32_t gen) {
  return (gen + 1) & 0xFFFFFF;
}

}  // namespace ordo
