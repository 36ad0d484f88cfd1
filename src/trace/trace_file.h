// Where a trace goes and how it gets there: the per-engine file name under ORDO_TRACE, and
// writing a file whole (a reader, or another engine writing the same path, never sees half).
#pragma once

#include <cstdio>
#include <string>

#include "ordo/ordo.h"

namespace ordo {

// The path the next engine traced through ORDO_TRACE writes to: the first engine of the process
// gets `env_path` itself, the n-th gets it with "-n" before its extension ("t.json" -> "t-2.json"),
// so that no engine's trace overwrites another's.
std::string next_env_trace_path(const char* env_path);

// A file being written in place of `path`. For a regular file (or none yet) the bytes go to a
// temporary file beside it, renamed over `path` by commit(); anything else (a device such as
// /dev/stdout, a FIFO, a symbolic link) is written directly.
class TraceFile {
 public:
  TraceFile() = default;
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  ~TraceFile();
  // ORDO_OK, or ORDO_ERR_INVALID_ARGUMENT with the reason in the last error message.
  ordo_status open(const char* path);
  std::FILE* stream() const { return f_; }
  // Flushes, closes and puts the file in place; same statuses as open().
  ordo_status commit();

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  std::string temp_;  // empty when writing directly
};

}  // namespace ordo
