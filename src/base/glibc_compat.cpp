// libordo.so must load on glibc 2.34 (Ubuntu 22.04, RHEL 9; SPEC §11), and links libstdc++
// statically (src/meson.build). This toolchain's libstdc++.a was built against glibc 2.36, and
// its std::random_device calls arc4random (GLIBC_2.36). ordo never uses random_device, but the
// linker pulls random.o in all the same (libstdc++'s copy-on-write string instantiations,
// needed by its exception classes, refer to it), and with it a dynamic reference to
// arc4random@GLIBC_2.36 that keeps the library from loading on older glibc. A definition here
// satisfies that reference inside the library (hidden, like every symbol not named ordo_*), so
// the library imports nothing newer than GLIBC_2.34; tests/check_so_limits.sh checks it.
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <ctime>

namespace {

// Fills buf with random bytes: getrandom (GLIBC_2.25, Linux 3.17), else /dev/urandom, else
// (neither available: a sandbox) the clock and an address, which is enough for what
// random_device could be asked here (nothing in ordo asks).
void random_bytes(void* buf, size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(p + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (got == n) return;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    while (got < n) {
      ssize_t r = read(fd, p + got, n - got);
      if (r > 0) {
        got += static_cast<size_t>(r);
      } else if (!(r < 0 && errno == EINTR)) {
        break;
      }
    }
    close(fd);
  }
  if (got == n) return;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t x = static_cast<uint64_t>(ts.tv_nsec) ^ (static_cast<uint64_t>(ts.tv_sec) << 30) ^
               reinterpret_cast<uintptr_t>(&ts);
  for (; got < n; ++got) {
    x ^= x << 13;  // xorshift64
    x ^= x >> 7;
    x ^= x << 17;
    p[got] = static_cast<unsigned char>(x);
  }
}

}  // namespace

extern "C" uint32_t arc4random(void) noexcept {
  uint32_t v;
  random_bytes(&v, sizeof v);
  return v;
}
