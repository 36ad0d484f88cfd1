// The error state a failed op leaves on the vars it mutates. Shared (reference counted) because
// a skipped op passes the very same record on to its own mutable vars, so every var downstream
// of one failure names the original op, code and message. Allocated only on the failure path.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

namespace ordo {

struct ErrorRecord {
  static constexpr size_t kTextMax = 480;

  std::atomic<int32_t> refs{1};
  int32_t code = 0;
  char text[kTextMax];  // "op 'NAME' failed (code N): MESSAGE"

  // Never throws: without memory it returns a shared static record that says so.
  static ErrorRecord* make(int32_t code, const char* op_name, const char* message) {
    auto* r = new (std::nothrow) ErrorRecord();
    if (!r) return retain(out_of_memory());
    r->code = code;
    const char* name = (op_name && op_name[0]) ? op_name : "(unnamed)";
    if (message && message[0]) {
      std::snprintf(r->text, kTextMax, "op '%s' failed (code %d): %s", name, code, message);
    } else {
      std::snprintf(r->text, kTextMax, "op '%s' failed (code %d)", name, code);
    }
    return r;
  }
  static ErrorRecord* out_of_memory() {
    static ErrorRecord r;
    static const bool ready = [] {
      r.refs.store(1 << 30);  // never reaches zero: static storage
      r.code = 7;             // ORDO_ERR_NO_MEMORY
      std::snprintf(r.text, kTextMax, "an op failed, and recording its error ran out of memory");
      return true;
    }();
    (void)ready;
    return &r;
  }
  static ErrorRecord* retain(ErrorRecord* r) {
    if (r) r->refs.fetch_add(1, std::memory_order_relaxed);
    return r;
  }
  static void release(ErrorRecord* r) {
    if (r && r->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete r;
  }
};

}  // namespace ordo
