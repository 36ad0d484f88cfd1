// TraceBuffer: the op records of one row of the trace (one worker thread, or the threads that
// are not workers). One thread appends; another may read at the same time (ordo_engine_write_trace
// while ops run), so records live in fixed chunks that never move, and `count` is published with
// release after each record is complete. Appending allocates only when a chunk fills, and only
// when tracing is on; past kMaxRecords, records are counted as dropped instead of kept, so a
// long traced run cannot eat the machine's memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "ordo/ordo.h"

namespace ordo {

enum class TraceOutcome : uint8_t { kOk, kFailed, kSkipped, kDeferred };

// The outcome of a callback that ran: it deferred, failed (`failed`) or succeeded.
inline TraceOutcome ran_outcome(bool deferred, bool failed) {
  return deferred ? TraceOutcome::kDeferred : (failed ? TraceOutcome::kFailed : TraceOutcome::kOk);
}

struct TraceRecord {
  uint64_t start_ns;  // steady clock, relative to the tracer's origin
  uint64_t end_ns;
  uint32_t thread;  // the row's thread id for external rows (0 for worker rows)
  uint8_t device_type;
  uint8_t device_id;
  TraceOutcome outcome;
  char name[ORDO_NAME_MAX + 1];
};

class TraceBuffer {
 public:
  static constexpr uint64_t kChunkRecords = 4096;
  static constexpr uint64_t kMaxChunks = 256;  // at most 1,048,576 records per row
  static constexpr uint64_t kMaxRecords = kChunkRecords * kMaxChunks;

  TraceBuffer() = default;
  TraceBuffer(const TraceBuffer&) = delete;
  TraceBuffer& operator=(const TraceBuffer&) = delete;

  // The slot for the next record, or nullptr when it must be dropped (full, or out of memory).
  // Fill it, then call commit(). Single writer.
  TraceRecord* reserve();
  void commit() {
    count_.store(count_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // Records committed so far; any thread.
  uint64_t size() const { return count_.load(std::memory_order_acquire); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  const TraceRecord& at(uint64_t i) const { return chunks_[i / kChunkRecords][i % kChunkRecords]; }

 private:
  std::unique_ptr<TraceRecord[]> chunks_[kMaxChunks];
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace ordo
