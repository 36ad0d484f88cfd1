// Prefetching a cache line that this thread is about to write.
//
// Why not __builtin_prefetch(p, 1): without -mprfchw gcc emits PREFETCHT0 for it on x86-64, which
// fetches the line in the shared state; the locked write that follows (a var's push lock, its
// state word) then has to ask the other core for ownership a second time. PREFETCHW fetches it
// owned in one step. Its CPUID bit is checked once at load time (every x86-64 CPU of the last
// decade has it); elsewhere the builtin's own write hint is used.
#pragma once

namespace ordo {

#if defined(__x86_64__)
extern const bool g_has_prefetchw;
#endif

inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  if (g_has_prefetchw) {
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
    return;
  }
#endif
  __builtin_prefetch(p, 1);
}

}  // namespace ordo
