#include "trace/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/last_error.h"

namespace ordo {

std::string next_env_trace_path(const char* env_path) {
  static std::atomic<uint64_t> engines{0};
  const uint64_t n = engines.fetch_add(1, std::memory_order_relaxed) + 1;
  std::string path(env_path);
  if (n == 1) return path;
  const size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  const bool has_ext =
      dot != std::string::npos && dot > (slash == std::string::npos ? 0 : slash + 1);
  if (!has_ext) dot = path.size();
  return path.substr(0, dot) + "-" + std::to_string(n) + path.substr(dot);
}

namespace {

// Whether `path` should be replaced by renaming a temporary file over it: it is a regular file,
// or nothing is there yet.
bool replace_by_rename(const char* path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT;
  return S_ISREG(st.st_mode);
}

// A new file beside `path` (the rename must not cross file systems), created with the mode an
// fopen would give it (0666 less the umask, applied by the kernel).
std::FILE* open_temp_beside(const std::string& path, std::string* temp) {
  static std::atomic<uint64_t> serial{0};
  for (int attempt = 0; attempt < 8; ++attempt) {
    *temp = path + ".tmp-" + std::to_string(getpid()) + "-" +
            std::to_string(serial.fetch_add(1, std::memory_order_relaxed));
    int fd = ::open(temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return nullptr;
    }
    std::FILE* f = fdopen(fd, "w");
    if (!f) {
      close(fd);
      unlink(temp->c_str());
    }
    return f;
  }
  return nullptr;
}

}  // namespace

TraceFile::~TraceFile() {
  if (!f_) return;
  std::fclose(f_);
  if (!temp_.empty()) unlink(temp_.c_str());
}

ordo_status TraceFile::open(const char* path) {
  path_ = path;
  if (replace_by_rename(path)) f_ = open_temp_beside(path_, &temp_);
  if (!f_) {  // not a regular file, or no temporary file could be made beside it
    temp_.clear();
    f_ = std::fopen(path, "w");
  }
  if (!f_) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "cannot write the trace to '%s': %s", path,
                std::strerror(errno));
  }
  return ORDO_OK;
}

ordo_status TraceFile::commit() {
  bool ok = std::ferror(f_) == 0;
  ok = (std::fclose(f_) == 0) && ok;
  f_ = nullptr;
  int err = errno;
  if (ok && !temp_.empty() && std::rename(temp_.c_str(), path_.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!temp_.empty() && !ok) unlink(temp_.c_str());
  temp_.clear();
  if (!ok) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "writing the trace to '%s' failed: %s", path_.c_str(),
                std::strerror(err));
  }
  return ORDO_OK;
}

}  // namespace ordo
