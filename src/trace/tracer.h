// Tracer: per-op trace records of one engine (SPEC §9), kept per worker so that recording takes
// no lock and touches no line another thread writes. Ops that run on threads which are not
// workers (the naive engine, ORDO_PROP_ASYNC ops, inline work) share one row behind a mutex:
// those paths are slow by nature.
//
// Written as Chrome trace JSON (chrome_trace.cpp) when the engine shuts down, or on demand with
// ordo_engine_write_trace.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ordo/ordo.h"
#include "trace/trace_buffer.h"

namespace ordo {

class Tracer {
 public:
  struct Row {
    std::string label;  // "cpu worker 0", "callers"
    std::unique_ptr<TraceBuffer> buffer;
  };
  // A row as the writer sees it: buffers never move and live as long as the tracer.
  struct RowView {
    std::string label;
    const TraceBuffer* buffer;
  };

  explicit Tracer(const char* path);

  const std::string& path() const { return path_; }
  // Renames the trace before anyone reads the path (the engine numbers ORDO_TRACE's path once
  // its create has succeeded, so that a failed create takes no number).
  void set_path(std::string path) { path_ = std::move(path); }
  // Nanoseconds since the tracer was created (the trace's time zero).
  uint64_t now_ns() const;
  // A new row for a worker thread; the worker appends to the buffer without a lock. nullptr when
  // memory ran out (that worker's ops are then counted as dropped).
  TraceBuffer* add_worker_row(const char* role, int32_t index);
  // Records an op that ran on a thread that is not a worker.
  void record_external(const TraceRecord& r);
  void count_dropped() { lost_.fetch_add(1, std::memory_order_relaxed); }

  uint64_t records() const;
  uint64_t dropped() const;
  // Writes every record so far as Chrome trace JSON. INVALID_ARGUMENT when the file cannot be
  // written (the message names it and says why). Holds no lock of the row list while it writes:
  // a slow file (a FIFO nobody reads yet) must not hold up ordo_engine_stats or a worker
  // starting. One engine's writes are serialized: two into one path written in place (a FIFO,
  // /dev/stdout, a file with other hard links) must not interleave. Not across engines: one
  // engine's write stuck on a FIFO must not hold up another engine's destroy.
  ordo_status write(const char* path) const;

 private:
  std::string path_;
  const uint64_t origin_ns_;
  mutable std::mutex rows_mutex_;   // the row list; never held while a worker records
  mutable std::mutex write_mutex_;  // one write() at a time
  std::vector<Row> rows_;
  std::mutex external_mutex_;
  TraceBuffer* external_ = nullptr;  // rows_[0]
  std::atomic<uint64_t> lost_{0};
};

// Monotonic nanoseconds (CLOCK_MONOTONIC).
uint64_t monotonic_ns();
// Writes the rows as Chrome trace JSON to `path` (see chrome_trace.cpp).
ordo_status write_chrome_trace(const std::vector<Tracer::RowView>& rows, const char* path);

}  // namespace ordo
