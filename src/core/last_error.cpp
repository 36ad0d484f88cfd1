#include "core/last_error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace ordo {

namespace {
thread_local char tls_message[kLastErrorMax];
}

ordo_status fail(ordo_status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(tls_message, sizeof tls_message, fmt, ap);
  va_end(ap);
  return status;
}

const char* last_error() {
  return tls_message;
}

size_t copy_last_error(char* buf, size_t cap) {
  size_t len = std::strlen(tls_message);
  if (buf && cap) {
    size_t n = len < cap - 1 ? len : cap - 1;
    std::memcpy(buf, tls_message, n);
    buf[n] = '\0';
  }
  return len;
}

KeepLastError::KeepLastError() {
  std::memcpy(saved_, tls_message, sizeof saved_);
}

KeepLastError::~KeepLastError() {
  std::memcpy(tls_message, saved_, sizeof saved_);
}

}  // namespace ordo
