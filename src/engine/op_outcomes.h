// OpOutcomes: what the engine's ops came to, for ordo_engine_stats and ordo_wait_for_all: how
// many failed (skipped ones included, SPEC §3) and how many of those were skipped, and the first
// failure since the last ordo_wait_for_all, which that wait reports. Off the hot path: only
// failing and skipped ops touch it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "core/error_record.h"

namespace ordo {

class OpOutcomes {
 public:
  OpOutcomes() = default;
  ~OpOutcomes() { ErrorRecord::release(first_failure_); }
  OpOutcomes(const OpOutcomes&) = delete;
  OpOutcomes& operator=(const OpOutcomes&) = delete;

  // An op skipped for an error it inherited; counted before its failure (see failed()).
  void skipped() { skipped_.fetch_add(1, std::memory_order_relaxed); }
  // An op failed (or was skipped) with `r`; the first is kept for ordo_wait_for_all.
  void failed(ErrorRecord* r) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> g(mutex_);
    if (!first_failure_) first_failure_ = ErrorRecord::retain(r);
  }
  // The first failure since the last call (a reference the caller releases), or nullptr.
  ErrorRecord* take_first_failure() {
    std::lock_guard<std::mutex> g(mutex_);
    ErrorRecord* first = first_failure_;
    first_failure_ = nullptr;
    return first;
  }
  // Failed and skipped counts as one consistent pair: skipped <= failed.
  void counts(int64_t* failed, int64_t* skipped) const {
    int64_t s = skipped_.load(std::memory_order_relaxed);
    int64_t f = failures_.load(std::memory_order_relaxed);
    // A skip is counted before its op's failure: a snapshot between the two would show more
    // skipped than failed, which the header rules out.
    if (s > f) s = f;
    *failed = f > 0 ? f : 0;
    *skipped = s > 0 ? s : 0;
  }

 private:
  std::atomic<int64_t> failures_{0};
  std::atomic<int64_t> skipped_{0};
  std::mutex mutex_;
  ErrorRecord* first_failure_ = nullptr;
};

}  // namespace ordo
