#include "trace/tracer.h"

#include <time.h>

#include <new>

namespace ordo {

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Tracer::Tracer(const char* path) : path_(path ? path : ""), origin_ns_(monotonic_ns()) {
  rows_.push_back(Row{"callers (threads that are not workers)", std::make_unique<TraceBuffer>()});
  external_ = rows_[0].buffer.get();
}

uint64_t Tracer::now_ns() const {
  return monotonic_ns() - origin_ns_;
}

TraceBuffer* Tracer::add_worker_row(const char* role, int32_t index) {
  std::lock_guard<std::mutex> g(rows_mutex_);
  try {
    rows_.push_back(Row{std::string(role) + " worker " + std::to_string(index),
                        std::make_unique<TraceBuffer>()});
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return rows_.back().buffer.get();
}

void Tracer::record_external(const TraceRecord& r) {
  std::lock_guard<std::mutex> g(external_mutex_);
  if (TraceRecord* slot = external_->reserve()) {
    *slot = r;
    external_->commit();
  }
}

uint64_t Tracer::records() const {
  std::lock_guard<std::mutex> g(rows_mutex_);
  uint64_t n = 0;
  for (const Row& r : rows_) n += r.buffer->size();
  return n;
}

uint64_t Tracer::dropped() const {
  std::lock_guard<std::mutex> g(rows_mutex_);
  uint64_t n = lost_.load(std::memory_order_relaxed);
  for (const Row& r : rows_) n += r.buffer->dropped();
  return n;
}

ordo_status Tracer::write(const char* path) const {
  std::lock_guard<std::mutex> one_writer(write_mutex_);
  std::vector<RowView> rows;
  {
    std::lock_guard<std::mutex> g(rows_mutex_);
    rows.reserve(rows_.size());
    for (const Row& r : rows_) rows.push_back(RowView{r.label, r.buffer.get()});
  }
  return write_chrome_trace(rows, path);
}

}  // namespace ordo
