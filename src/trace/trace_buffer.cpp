#include "trace/trace_buffer.h"

#include <new>

namespace ordo {

TraceRecord* TraceBuffer::reserve() {
  uint64_t n = count_.load(std::memory_order_relaxed);
  uint64_t chunk = n / kChunkRecords;
  if (chunk >= kMaxChunks) {
    dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return nullptr;
  }
  if (!chunks_[chunk]) {
    // A reader only touches chunks below size(), and this chunk's first record is published by
    // the commit that follows, so the plain pointer store is ordered by that release.
    chunks_[chunk].reset(new (std::nothrow) TraceRecord[kChunkRecords]);
    if (!chunks_[chunk]) {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return nullptr;
    }
  }
  return &chunks_[chunk][n % kChunkRecords];
}

}  // namespace ordo
