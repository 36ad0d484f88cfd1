// The internal tests' one assertion (plain C++ programs, no test framework): a failed check
// prints what failed and is counted; main() returns failed() ? 1 : 0.
#pragma once

#include <cstdio>

namespace internal_test {

inline int& failures() {
  static int count = 0;
  return count;
}

// `detail`, when given, is printed after the check's name (e.g. ordo_last_error_message()).
inline void check(bool ok, const char* what, const char* detail = nullptr) {
  if (ok) return;
  if (detail) {
    std::fprintf(stderr, "FAIL: %s (%s)\n", what, detail);
  } else {
    std::fprintf(stderr, "FAIL: %s\n", what);
  }
  ++failures();
}

inline bool failed() {
  return failures() != 0;
}

}  // namespace internal_test
