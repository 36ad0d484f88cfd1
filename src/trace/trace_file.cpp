#include "trace/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/last_error.h"

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

// Whether `path` should be replaced by renaming a temporary file over it: nothing is there yet,
// or a regular file with no other hard link (renaming over one would leave the other names
// with the old trace). *existing: that file's status, for the replacement to keep.
bool replace_by_rename(const char* path, struct stat* existing, bool* exists) {
  *exists = lstat(path, existing) == 0;
  if (!*exists) return errno == ENOENT;
  return S_ISREG(existing->st_mode) && existing->st_nlink == 1;
}

// A new file beside `path` (the rename must not cross file systems). A new path gets the mode an
// fopen would give it (0666 less the umask, applied by the kernel); a file it replaces keeps its
// permission bits and, where this process may set them, its owner and group, as a write in
// place would.
std::FILE* open_temp_beside(const std::string& path, const struct stat* existing,
                            std::string* temp) {
  static std::atomic<uint64_t> serial{0};
  for (int attempt = 0; attempt < 8; ++attempt) {
    *temp = path + ".tmp-" + std::to_string(getpid()) + "-" +
            std::to_string(serial.fetch_add(1, std::memory_order_relaxed));
    int fd = ::open(temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      if (errno == EEXIST) continue;
      return nullptr;
    }
    if (existing) {
      if (fchown(fd, existing->st_uid, existing->st_gid) != 0) {
        // Not ours to give away (an unprivileged caller): the file stays the caller's.
      }
      if (fchmod(fd, existing->st_mode & 07777) != 0) {
        close(fd);
        unlink(temp->c_str());
        return nullptr;  // written in place instead, which keeps the mode
      }
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

// Copies the file `from` into `to` (truncating it); 0, or the errno of what failed.
int copy_file(const char* from, const char* to) {
  std::FILE* in = std::fopen(from, "r");
  if (!in) return errno;
  std::FILE* out = std::fopen(to, "w");
  if (!out) {
    int err = errno;
    std::fclose(in);
    return err;
  }
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) {
    if (std::fwrite(buf, 1, n, out) != n) break;
  }
  int err = std::ferror(in) || std::ferror(out) ? EIO : 0;
  std::fclose(in);
  if (std::fclose(out) != 0 && err == 0) err = errno;
  return err;
}

}  // namespace

TraceFile::~TraceFile() {
  if (!f_) return;
  std::fclose(f_);
  if (!temp_.empty()) unlink(temp_.c_str());
}

ordo_status TraceFile::open(const char* path) {
  path_ = path;
  struct stat existing;
  bool exists = false;
  if (replace_by_rename(path, &existing, &exists)) {
    f_ = open_temp_beside(path_, exists ? &existing : nullptr, &temp_);
  }
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
  int err = std::ferror(f_) ? EIO : 0;
  if (std::fclose(f_) != 0 && err == 0) err = errno;
  f_ = nullptr;
  if (err == 0 && !temp_.empty() && std::rename(temp_.c_str(), path_.c_str()) != 0) {
    // A path that cannot be renamed over (a bind-mounted file, another user's file in a sticky
    // folder) may still be writable: copy the trace into it, as a direct write would have.
    err = copy_file(temp_.c_str(), path_.c_str());
  }
  if (!temp_.empty()) unlink(temp_.c_str());  // gone when renamed; else copied, or failed
  temp_.clear();
  if (err != 0) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "writing the trace to '%s' failed: %s", path_.c_str(),
                std::strerror(err));
  }
  return ORDO_OK;
}

}  // namespace ordo
