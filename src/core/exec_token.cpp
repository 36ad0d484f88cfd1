#include "core/exec_token.h"

#include <atomic>

namespace ordo {

ORDO_HOT_TLS uint64_t tls_exec_token_next = 0;
ORDO_HOT_TLS uint64_t tls_exec_token_end = 0;

uint64_t take_exec_token_block() {
  // Block 0 is never handed out, so no token is 0 (a NULL exec).
  static std::atomic<uint64_t> next_block{1};
  return next_block.fetch_add(1, std::memory_order_relaxed) << 32;
}

}  // namespace ordo
