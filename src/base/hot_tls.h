// Thread-locals read on every push or completion use the initial-exec TLS model: a plain
// %fs-relative load instead of a __tls_get_addr call (docs/PERFORMANCE.md, "Measurements behind
// the code").
// They must stay small: a dlopen'ed library's initial-exec TLS comes from glibc's limited
// static TLS surplus. The 1 KiB error-message buffer therefore keeps the default model.
#pragma once

#define ORDO_HOT_TLS thread_local __attribute__((tls_model("initial-exec")))

// The same for a thread-local shared between translation units (declared `extern` in a header,
// defined in one .cpp): __thread, because an extern C++ thread_local is reached through a
// wrapper call that checks for dynamic initialization on every access. The type must be trivial
// (zero-initialized, no constructor or destructor).
#define ORDO_HOT_TLS_SHARED __thread __attribute__((tls_model("initial-exec")))
