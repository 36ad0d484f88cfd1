#include "base/last_error.h"

#include <pthread.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ordo {

namespace {

// Shown when a thread's buffer could not be allocated (its message is lost).
const char kNoMemory[] = "ordo: out of memory for the error message";

// The key whose destructor frees a thread's buffer when it exits. Never deleted: libordo.so is
// never unmapped (-z nodelete), so the destructor stays valid for every thread. A destructor
// round that finds an error recorded by a later key destructor of the caller's frees that
// buffer too (glibc runs up to PTHREAD_DESTRUCTOR_ITERATIONS rounds).
struct MessageKey {
  pthread_key_t key{};
  bool created = false;
  MessageKey() { created = pthread_key_create(&key, &std::free) == 0; }
};

MessageKey& message_key() {
  static MessageKey k;
  return k;
}

// This thread's buffer (kLastErrorMax bytes), or nullptr when it has none yet.
char* buffer_if_any() {
  MessageKey& k = message_key();
  return k.created ? static_cast<char*>(pthread_getspecific(k.key)) : nullptr;
}

// This thread's buffer, allocated on first use; nullptr without memory (or without a key).
char* buffer() {
  if (char* b = buffer_if_any()) return b;
  MessageKey& k = message_key();
  if (!k.created) return nullptr;
  auto* b = static_cast<char*>(std::calloc(1, kLastErrorMax));
  if (b && pthread_setspecific(k.key, b) != 0) {
    std::free(b);
    b = nullptr;
  }
  return b;
}

// True when the message starts with "ordo_x:" and ordo_x is `call` or the start of its name
// (ordo_wait_for_var for ordo_wait_for_var_timeout).
bool names_the_call(const char* message, const char* call) {
  const char* colon = std::strchr(message, ':');
  if (!colon || std::strncmp(message, "ordo_", 5) != 0) return false;
  const size_t head = static_cast<size_t>(colon - message);
  return head <= std::strlen(call) && std::strncmp(message, call, head) == 0;
}

// Set on a thread whose buffer could not be allocated, so that last_error() says so instead of
// showing nothing. One byte of static TLS.
thread_local bool tls_lost = false;

}  // namespace

ordo_status fail(ordo_status status, const char* fmt, ...) {
  char* b = buffer();
  tls_lost = b == nullptr;
  if (!b) return status;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(b, kLastErrorMax, fmt, ap);
  va_end(ap);
  return status;
}

void name_the_call(const char* call, ordo_status status) {
  if (status == ORDO_OK) return;
  char* b = buffer_if_any();
  if (!b) return;
  // An op's failure (a wait's OP_FAILED) is reported in the op's own words.
  if (status == ORDO_ERR_OP_FAILED || names_the_call(b, call)) return;
  // "call: " in front, moving the message along (its end is cut if it no longer fits).
  const size_t call_len = std::strlen(call);
  const size_t prefix = call_len + 2;
  if (prefix >= kLastErrorMax) return;
  const size_t kept = std::min(std::strlen(b), kLastErrorMax - 1 - prefix);
  std::memmove(b + prefix, b, kept);
  b[prefix + kept] = '\0';
  std::memcpy(b, call, call_len);
  b[call_len] = ':';
  b[call_len + 1] = ' ';
}

const char* last_error() {
  if (tls_lost) return kNoMemory;
  const char* b = buffer_if_any();
  return b ? b : "";
}

size_t copy_last_error(char* buf, size_t cap) {
  const char* message = last_error();
  size_t len = std::strlen(message);
  if (buf && cap) {
    size_t n = len < cap - 1 ? len : cap - 1;
    std::memcpy(buf, message, n);
    buf[n] = '\0';
  }
  return len;
}

KeepLastError::KeepLastError() : saved_(nullptr), lost_(tls_lost) {
  if (const char* b = buffer_if_any()) {
    saved_ = static_cast<char*>(std::malloc(kLastErrorMax));
    if (saved_) std::memcpy(saved_, b, kLastErrorMax);
  }
}

KeepLastError::~KeepLastError() {
  tls_lost = lost_;
  char* b = buffer_if_any();
  if (b) {
    if (saved_) {
      std::memcpy(b, saved_, kLastErrorMax);
    } else {
      b[0] = '\0';  // there was no message (or none could be kept)
    }
  }
  std::free(saved_);
}

}  // namespace ordo
