// How the waits read a caller's timeout (ordo_wait_for_var_timeout, ordo_wait_for_all_timeout).
#pragma once

#include <cstdint>

namespace ordo {

// Timeouts beyond this (about 36.5 years) mean "forever": adding them to the clock would
// overflow.
constexpr uint64_t kForeverNs = uint64_t{1} << 60;
inline const uint64_t* finite_or_null(const uint64_t* timeout_ns) {
  return (timeout_ns && *timeout_ns < kForeverNs) ? timeout_ns : nullptr;
}

// A timed wait that runs out names the oldest ops still pending (PendingReport), which scans
// every op block the engine made: ~1-3 ms for 16,000 blocks. Shorter timeouts are polls in
// spirit (callers loop on them), so their message stays short and cheap.
constexpr uint64_t kReportTimeoutNs = 1000000;
inline bool worth_a_report(const uint64_t* timeout_ns) {
  return timeout_ns != nullptr && *timeout_ns >= kReportTimeoutNs;
}

}  // namespace ordo
