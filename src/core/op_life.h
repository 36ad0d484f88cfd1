// OpLife: where a pushed op is in its life, and since when it has been pending, in one word per
// block, so that a wait that times out (and ordo_engine_dump) can say which ops are still
// pending, in what state and for how long: a user hunting a missing ordo_complete needs that
// more than anything else.
//
// The word lives on the block's first link line (LinkLine::life), which every push writes
// anyway and every run reads, so keeping it costs a few stores to lines already in the cache,
// never a shared write. Bits 0-7 hold the state, bits 8-15 the low bits of the push count of
// the lane that pushed it, the rest a time in ticks of the CPU's cycle counter (its low 16 bits
// dropped), converted to nanoseconds only when someone reads it (calibrated against the steady
// clock then). Reading that counter costs an eighth of a push on this project's VMs
// (docs/PERFORMANCE.md), so a push stamps its op with the engine's last reading
// (PushPath::recent_ticks_, refreshed every 256 pushes of a lane, when a push wakes a sleeping
// worker, when a worker wakes, and when a wait begins): an op's age is its time since that
// reading, which is at most a few microseconds before its push while ops flow.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace ordo {

enum class OpState : uint8_t {
  kFree = 0,      // in the pool
  kPending = 1,   // pushed: waiting for its vars, or ready and waiting for a worker
  kRunning = 2,   // its callback is running (or an internal op is being executed)
  kDeferred = 3,  // its callback deferred: waiting for ordo_complete
};

// The CPU's cycle counter where reading it is one cheap instruction; the steady clock elsewhere.
inline uint64_t life_ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

inline uint64_t steady_now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

struct OpLife {
  static constexpr uint64_t kStateMask = 0xFF;
  static constexpr uint64_t kSeqTickMask = 0xFFFF;  // state and push-count bits

  // A pending op's word, stamped with `ticks` (a recent reading of life_ticks(), which several
  // pushes share) and the low bits of its lane's push count in bits 8-15 (so that two uses of a
  // block stamped with one reading still differ: a diagnostic scan tells them apart by the word).
  static uint64_t pending_at(uint64_t ticks, uint64_t push_seq) {
    return (ticks & ~kSeqTickMask) | ((push_seq & 0xFF) << 8) |
           static_cast<uint64_t>(OpState::kPending);
  }
  static OpState state(uint64_t word) { return static_cast<OpState>(word & kStateMask); }
  static uint64_t ticks(uint64_t word) { return word & ~kSeqTickMask; }
  // The whole stamp (time and push count): equal for one use of a block only.
  static uint64_t stamp(uint64_t word) { return word & ~kStateMask; }
  static uint64_t with_state(uint64_t word, OpState s) {
    return (word & ~kStateMask) | static_cast<uint64_t>(s);
  }
};

// Turns life ticks into nanoseconds: one pair of readings taken when the engine was made, one
// when asked, so the conversion needs no calibration loop and is exact to the steady clock.
class LifeClock {
 public:
  LifeClock() : ticks0_(life_ticks()), ns0_(steady_now_ns()) {}
  // Nanoseconds from `ticks` (a push time) to now.
  uint64_t age_ns(uint64_t ticks) const {
    const uint64_t now_ticks = life_ticks();
    const uint64_t now_ns = steady_now_ns();
    if (now_ticks <= ticks) return 0;
    const double span_ticks = static_cast<double>(now_ticks - ticks0_);
    const double span_ns = static_cast<double>(now_ns - ns0_);
    const double ns_per_tick = span_ticks > 0 && span_ns > 0 ? span_ns / span_ticks : 1.0;
    return static_cast<uint64_t>(static_cast<double>(now_ticks - ticks) * ns_per_tick);
  }

 private:
  uint64_t ticks0_;
  uint64_t ns0_;
};

}  // namespace ordo
