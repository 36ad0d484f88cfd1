// UTF-8, as far as op names need it: they are whatever bytes the caller gave, cut at
// ORDO_NAME_MAX when copied (op_block.h) and written into JSON, which must be UTF-8 (the trace).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ordo {

// Length of the well-formed UTF-8 sequence at `s` (1 to 4), or 0 when the bytes there are not
// one: a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or cut short
// (it stops at a NUL, which is never a continuation byte).
inline size_t utf8_sequence_length(const unsigned char* s) {
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2, cp = c & 0x1fu;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, cp = c & 0x0fu;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4, cp = c & 0x07u;
  } else {
    return 0;
  }
  for (size_t i = 1; i < n; ++i) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3fu);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Where to cut `s`, longer than `len` bytes, so as not to split a UTF-8 character: before a
// well-formed character that runs past `len`, else at `len` (bytes that are not UTF-8 are left
// to the trace writer, which replaces them).
inline size_t whole_utf8_prefix(const char* str, size_t len) {
  const auto* s = reinterpret_cast<const unsigned char*>(str);
  size_t start = len;  // back to the byte that would start the character at the cut
  for (int back = 0; back < 3 && start > 0 && (s[start] & 0xc0) == 0x80; ++back) --start;
  return start < len && start + utf8_sequence_length(s + start) > len ? start : len;
}

}  // namespace ordo
