#include "base/last_error.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace ordo {

namespace {
thread_local char tls_message[kLastErrorMax];

// True when the message starts with "ordo_x:" and ordo_x is `call` or the start of its name
// (ordo_wait_for_var for ordo_wait_for_var_timeout).
bool names_the_call(const char* message, const char* call) {
  const char* colon = std::strchr(message, ':');
  if (!colon || std::strncmp(message, "ordo_", 5) != 0) return false;
  const size_t head = static_cast<size_t>(colon - message);
  return head <= std::strlen(call) && std::strncmp(message, call, head) == 0;
}
}  // namespace

ordo_status fail(ordo_status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(tls_message, sizeof tls_message, fmt, ap);
  va_end(ap);
  return status;
}

void name_the_call(const char* call, ordo_status status) {
  if (status == ORDO_OK) return;
  // An op's failure (a wait's OP_FAILED) is reported in the op's own words.
  if (status == ORDO_ERR_OP_FAILED || names_the_call(tls_message, call)) return;
  // "call: " in front, moving the message along (its end is cut if it no longer fits).
  const size_t call_len = std::strlen(call);
  const size_t prefix = call_len + 2;
  if (prefix >= kLastErrorMax) return;
  const size_t kept = std::min(std::strlen(tls_message), kLastErrorMax - 1 - prefix);
  std::memmove(tls_message + prefix, tls_message, kept);
  tls_message[prefix + kept] = '\0';
  std::memcpy(tls_message, call, call_len);
  tls_message[call_len] = ':';
  tls_message[call_len + 1] = ' ';
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
