// ExecToken: what an op's callback receives as its ordo_exec*. Not the op block's address:
// blocks are pooled, so an exec kept past its callback would equal the exec of a later op that
// reuses the block, and ordo_exec_defer would defer that unrelated op. A token is a number that no
// other callback run in the process is ever given (each thread takes them in blocks of 2^32 from
// one process-wide counter, so taking one is a thread-local increment), and the API accepts an
// exec only while it is the token of the callback running on the calling thread.
//
// Tokens carry the top bit: as addresses they are non-canonical on x86-64 and arm64, so no
// allocator ever hands such a pointer out. A binding's runtime that checks the pointers it holds
// (Go's collector throws on a pointer into its heap that names no object) never mistakes one
// for its own.
#pragma once

#include <cstdint>

#include "ordo/ordo.h"

namespace ordo {

static_assert(sizeof(void*) == sizeof(uint64_t), "an exec token is carried in a 64-bit pointer");

// A thread's current block of tokens, kept in an initial-exec thread-local (engine/thread_state.h):
// trivial, so that it can be a __thread (an extern thread_local would cost a TLS-init check on
// every op). Zero-initialized: the first token takes a block.
struct ExecTokens {
  uint64_t next;
  uint64_t end;
};

// The first token of a fresh block of 2^32.
uint64_t take_exec_token_block();

inline uint64_t next_exec_token(ExecTokens& t) {
  if (__builtin_expect(t.next == t.end, 0)) {
    t.next = take_exec_token_block();
    t.end = t.next + (uint64_t{1} << 32);
  }
  return t.next++;
}

inline ordo_exec* exec_of_token(uint64_t token) {
  return reinterpret_cast<ordo_exec*>(static_cast<uintptr_t>(token));
}
inline uint64_t token_of_exec(const ordo_exec* exec) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(exec));
}

}  // namespace ordo
