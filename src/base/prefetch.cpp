#include "base/prefetch.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace ordo {

#if defined(__x86_64__)
namespace {
bool cpu_has_prefetchw() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // CPUID 0x80000001, ECX bit 8: PRFCHW (3DNowPrefetch).
  return __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 8)) != 0;
}
}  // namespace

const bool g_has_prefetchw = cpu_has_prefetchw();
#endif

}  // namespace ordo
