#include "core/exec_token.h"

#include <atomic>

namespace ordo {

uint64_t take_exec_token_block() {
  // Blocks 1 to 2^31 - 1 of 2^32 tokens each, below the top bit that every token carries (block
  // 0 is never handed out, so no token's low 63 bits are all 0). Past the last block (as many
  // threads that each ran a callback) they come round again.
  static std::atomic<uint64_t> next_block{1};
  const uint64_t n = next_block.fetch_add(1, std::memory_order_relaxed);
  const uint64_t block = (n - 1) % 0x7FFFFFFFu + 1;
  return (uint64_t{1} << 63) | (block << 32);
}

}  // namespace ordo
