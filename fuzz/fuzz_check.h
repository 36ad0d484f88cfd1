// What every harness does when the engine disagrees with its oracle: print why, then abort, so
// that libFuzzer records the input as a crash. Usable from any thread (worker callbacks too).
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ordo/ordo.h"

// Marks a harness's own checking code: libFuzzer gains nothing from its coverage, and its
// comparison tracing would otherwise cost more than the code under test.
#define FUZZ_ORACLE __attribute__((no_sanitize("coverage")))

namespace fuzz {

[[noreturn]] inline void fail_check(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

[[noreturn]] inline void fail_check(const char* file, int line, const char* fmt, ...) {
  std::fprintf(stderr, "\n*** ORACLE FAILURE at %s:%d: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

// ORDO_FUZZ_TRACE=1 makes the harnesses print each step, to read a reproducer by hand.
inline bool tracing() {
  static const bool on = [] {
    const char* s = std::getenv("ORDO_FUZZ_TRACE");
    return s && *s && *s != '0';
  }();
  return on;
}

// ORDO_FUZZ_KNOWN_BUGS=name,name turns off the checks of open findings listed in fuzz/README.md,
// so that a long run can look past them. Nothing sets it by default.
inline bool known_bug(const char* name) {
  const char* list = std::getenv("ORDO_FUZZ_KNOWN_BUGS");
  if (!list) return false;
  size_t n = std::strlen(name);
  for (const char* p = list; (p = std::strstr(p, name)) != nullptr; p += n) {
    bool starts = p == list || p[-1] == ',';
    bool ends = p[n] == '\0' || p[n] == ',';
    if (starts && ends) return true;
  }
  return false;
}

// A set of statuses, one bit per ORDO_* code. The empty set means "must succeed".
using StatusSet = uint32_t;
constexpr StatusSet bit(ordo_status s) {
  return StatusSet{1} << s;
}

// When several documented errors apply to one call, the header does not say which one wins, so
// any of them is accepted; when none applies, only ORDO_OK is.
inline void check_status(const char* file, int line, const char* call, ordo_status got,
                         StatusSet allowed) {
  if (allowed == 0) allowed = bit(ORDO_OK);
  bool known = got >= 0 && got < 32;
  if (known && (allowed & bit(got))) return;
  char want[256] = "";
  size_t used = 0;
  for (int s = 0; s < 32 && used < sizeof want; ++s) {
    if (allowed & bit(s)) {
      used += std::snprintf(want + used, sizeof want - used, "%s ", ordo_status_string(s));
    }
  }
  fail_check(file, line, "%s returned %s (message: \"%s\"), expected one of: %s", call,
             ordo_status_string(got), ordo_last_error_message(), want);
}

}  // namespace fuzz

#define FUZZ_CHECK(cond, ...)                                         \
  do {                                                                \
    if (!(cond)) ::fuzz::fail_check(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

// EXPECT_STATUS(ordo_var_new(e, &v), 0) or EXPECT_STATUS(call, bit(A) | bit(B)).
#define EXPECT_STATUS(call, allowed) \
  ::fuzz::check_status(__FILE__, __LINE__, #call, (call), (allowed))

#define FUZZ_TRACE(...)                                       \
  do {                                                        \
    if (::fuzz::tracing()) std::fprintf(stderr, __VA_ARGS__); \
  } while (0)
