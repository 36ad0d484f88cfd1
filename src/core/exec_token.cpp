#include "core/exec_token.h"

#include <atomic>

namespace ordo {

uint64_t take_exec_token_block() {
  // Block 0 is never handed out, so the low bits of a token are never all 0; 2^31 blocks of 2^32
  // tokens fit below the top bit, which every token carries.
  static std::atomic<uint64_t> next_block{1};
  // Past 2^31 - 1 blocks (as many threads that each ran a callback, or 2^63 callbacks) the
  // blocks come round again, never reaching into the top bit or block 0.
  const uint64_t n = next_block.fetch_add(1, std::memory_order_relaxed);
  const uint64_t block = (n - 1) % 0x7FFFFFFFu + 1;
  return (uint64_t{1} << 63) | (block << 32);
}

}  // namespace ordo
