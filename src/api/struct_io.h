// Reading and writing the size-versioned structs of the ABI (struct_size first), following the
// Linux kernel's copy_struct_from_user rule: a smaller caller struct is read as if its missing
// tail were the defaults; a larger one is accepted only when every byte this library does not
// know is zero (else ORDO_ERR_UNSUPPORTED: the caller asked for something we cannot do).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/last_error.h"
#include "ordo/ordo.h"

namespace ordo {

// No struct of this ABI will ever grow this large. A struct_size above it is a struct that was
// never initialised, and taking it at its word would read or zero that much of the caller's
// memory (a garbage size of 0xABABABAB crashed ordo_engine_get_config).
constexpr uint32_t kMaxStructSize = 4096;

// Whether a caller's struct_size (or the size given to an _init_sized function) may be used:
// room for struct_size itself, and no more than any struct of this ABI will ever need.
inline bool struct_size_ok(size_t size) {
  return size >= sizeof(uint32_t) && size <= kMaxStructSize;
}

// `out` holds the defaults on entry and the caller's values on return.
template <class T>
ordo_status read_struct(const T* in, T* out, const char* type_name) {
  static_assert(sizeof(T) <= kMaxStructSize, "kMaxStructSize bounds every struct");
  uint32_t size = in->struct_size;
  if (size < sizeof(uint32_t)) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "%s.struct_size=%u is too small; initialize it with %s_init()", type_name,
                static_cast<unsigned>(size), type_name);
  }
  if (size > kMaxStructSize) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "%s.struct_size=%u is more than %u: the struct was not initialized; use %s_init()",
                type_name, static_cast<unsigned>(size), static_cast<unsigned>(kMaxStructSize),
                type_name);
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = sizeof(T); i < size; ++i) {
    if (bytes[i] != 0) {
      return fail(ORDO_ERR_UNSUPPORTED,
                  "%s has %u bytes, this library knows %zu, and the unknown tail is not zero: "
                  "it asks for features this version of ordo lacks",
                  type_name, static_cast<unsigned>(size), sizeof(T));
    }
  }
  std::memcpy(out, in, std::min<size_t>(size, sizeof(T)));
  out->struct_size = sizeof(T);
  return ORDO_OK;
}

// Writes `value` into the caller's struct of `size` bytes: known fields, zeroed unknown tail,
// struct_size = the caller's size. Writes nothing outside those `size` bytes.
template <class T>
void write_struct(const T& value, void* dst, size_t size) {
  std::memset(dst, 0, size);
  std::memcpy(dst, &value, std::min(size, sizeof(T)));
  uint32_t s = static_cast<uint32_t>(size);
  std::memcpy(dst, &s, sizeof s);
}

}  // namespace ordo
