// The fuzzer's bytes, read front to back. Past the end every read returns 0, so a harness just
// keeps going until `done()` and never reads out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool done() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // A byte reduced to 0..n-1 (n > 0).
  uint32_t below(uint32_t n) { return byte() % n; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(byte()) << (8 * i);
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace fuzz
