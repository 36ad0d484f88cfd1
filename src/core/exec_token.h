// ExecToken: what an op's callback receives as its ordo_exec*. Not the op block's address:
// blocks are pooled, so an exec kept past its callback would equal the exec of a later op that
// reuses the block, and ordo_exec_defer would defer that unrelated op. A token is a number that no
// other callback run in the process is ever given (each thread takes them in blocks of 2^32 from
// one process-wide counter, so taking one is a thread-local increment), and the API accepts an
// exec only while it is the token of the callback running on the calling thread.
#pragma once

#include <cstdint>

#include "core/hot_tls.h"
#include "ordo/ordo.h"

namespace ordo {

static_assert(sizeof(void*) == sizeof(uint64_t), "an exec token is carried in a 64-bit pointer");

// The next token of this thread's block, refilling the block when it is spent.
uint64_t take_exec_token_block();

extern ORDO_HOT_TLS uint64_t tls_exec_token_next;
extern ORDO_HOT_TLS uint64_t tls_exec_token_end;

inline uint64_t next_exec_token() {
  if (__builtin_expect(tls_exec_token_next == tls_exec_token_end, 0)) {
    tls_exec_token_next = take_exec_token_block();
    tls_exec_token_end = tls_exec_token_next + (uint64_t{1} << 32);
  }
  return tls_exec_token_next++;
}

inline ordo_exec* exec_of_token(uint64_t token) {
  return reinterpret_cast<ordo_exec*>(static_cast<uintptr_t>(token));
}
inline uint64_t token_of_exec(const ordo_exec* exec) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(exec));
}

}  // namespace ordo
