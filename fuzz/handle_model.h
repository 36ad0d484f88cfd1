// The handle bookkeeping behind fuzz_handles: which engines, vars, prepared ops and completion
// handles are live, by value, and therefore what every handle-taking function must answer.
//
// Validity is decided by value only. A made-up number that happens to equal a live handle of the
// engine it is passed to *is* that handle: the contract is about values, and so is the check.
// Var, prepared-op and completion handles carry their kind in their bits, so a handle of one
// kind never equals a live handle of another, and passing it where the other is expected is
// ORDO_ERR_INVALID_HANDLE like any other value that names nothing.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "fuzz_check.h"
#include "ordo/ordo.h"

namespace fuzz_handles {

using fuzz::bit;
using fuzz::StatusSet;

// Counts what the engine does with one pushed op or one prepared op.
struct Tally {
  std::atomic<int> runs{0};
  std::atomic<int> frees{0};
  std::atomic<ordo_completion> completion{0};  // deferring ops publish their handle here
  std::atomic<ordo_exec*> exec{nullptr};
  int expected_runs = 0;  // successful pushes (prepared ops: of the prepared op)
  bool expect_free = false;
};

struct Prepared {
  ordo_opr handle;
  std::vector<ordo_var> vars;
  Tally* tally;
  bool live = true;
};

struct EngineRec {
  ordo_engine* ptr = nullptr;
  int32_t kind = 0;
  int64_t refs = 1;        // references the harness holds, the creator's included
  bool destroyed = false;  // ordo_engine_destroy returned OK: calls get ORDO_ERR_SHUTDOWN
  bool freed = false;      // the last reference is gone: the pointer is stale
  bool failure = false;    // a completion failed since the last successful wait_for_all
  std::vector<ordo_var> live_vars;
  std::vector<Prepared> oprs;
  std::vector<std::pair<ordo_completion, Tally*>> armed;  // deferred, not yet completed

  bool has_var(ordo_var v) const {
    return v != 0 && std::find(live_vars.begin(), live_vars.end(), v) != live_vars.end();
  }
  Prepared* find_opr(ordo_opr h) {
    for (Prepared& p : oprs) {
      if (p.live && p.handle == h) return &p;
    }
    return nullptr;
  }
};

// How a call must treat its engine argument.
enum class EState { kNull, kStale, kLive, kShutDown };

struct EnginePick {
  ordo_engine* ptr;
  EngineRec* rec;  // the live (not freed) engine with that pointer value, if any
  EState state;
};

// The error the engine argument alone implies, if any.
inline StatusSet engine_errors(const EnginePick& p) {
  switch (p.state) {
    case EState::kNull:
      return bit(ORDO_ERR_INVALID_ARGUMENT);
    case EState::kStale:
      return bit(ORDO_ERR_INVALID_HANDLE);
    case EState::kShutDown:
      return bit(ORDO_ERR_SHUTDOWN);
    default:
      return 0;
  }
}

// For calls whose other handle is `valid` or not: on a live engine an invalid handle is
// INVALID_HANDLE; after destroy, SHUTDOWN, or INVALID_HANDLE too when the handle is bad; on a
// NULL or stale engine, only the engine's error.
inline StatusSet expected_with_handle(const EnginePick& p, bool valid) {
  switch (p.state) {
    case EState::kLive:
      return valid ? 0 : bit(ORDO_ERR_INVALID_HANDLE);
    case EState::kShutDown:
      return valid ? bit(ORDO_ERR_SHUTDOWN) : bit(ORDO_ERR_SHUTDOWN) | bit(ORDO_ERR_INVALID_HANDLE);
    default:
      return engine_errors(p);
  }
}

}  // namespace fuzz_handles
