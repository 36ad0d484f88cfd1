// The thread-local "last error" message behind ordo_last_error_message(). Each thread's buffer
// is allocated on its first error and freed when it exits (a pthread key), not kept in static
// TLS: libordo.so's static TLS is what a dlopen must find room for in glibc's small surplus
// (see base/hot_tls.h). Recording an error never throws: without memory for the buffer the
// message is replaced by a fixed one that says so.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ordo/ordo.h"

namespace ordo {

constexpr size_t kLastErrorMax = 1024;

// Records a printf-style message for this thread and returns `status`, so error paths read
// `return fail(ORDO_ERR_X, "...", ...)`.
ordo_status fail(ordo_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Makes the message of a call that returned `status` name the call: an error message that does
// not start with the call's name gets it in front. An op's failure (OP_FAILED) keeps the op's
// own words. Error paths only: a call that succeeded pays nothing for it.
void name_the_call(const char* call, ordo_status status);
const char* last_error();
size_t copy_last_error(char* buf, size_t cap);

// Keeps this thread's last error message as it was across a scope whose failures are reported
// some other way: destroy, which returns ORDO_OK when the trace cannot be written.
class KeepLastError {
 public:
  KeepLastError();
  ~KeepLastError();
  KeepLastError(const KeepLastError&) = delete;
  KeepLastError& operator=(const KeepLastError&) = delete;

 private:
  char* saved_;  // nullptr: there was no message (or no memory to keep it)
  bool lost_;
};

}  // namespace ordo
