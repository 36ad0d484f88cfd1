// Built as C++17 with -Wall -Wextra -Werror: the public header must be usable from C++ as is.
#include <ordo/pipeline.h>  // first: it must stand on its own
#include <ordo/ordo.h>

#include <cstdio>
#include <type_traits>

static_assert(std::is_same<ordo_var, uint64_t>::value, "ordo_var is a 64-bit integer handle");
static_assert(std::is_trivially_copyable<ordo_engine_config>::value, "config is plain data");
static_assert(std::is_trivially_copyable<ordo_pipe>::value, "a pipe is plain data");
static_assert(std::is_same<decltype(&ordo_pipeflow_token), uint64_t (*)(const ordo_pipeflow*)>::value,
              "ordo_pipeflow_token's signature");

int main() {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  bool ok = ordo_version() == ORDO_VERSION_NUMBER && cfg.struct_size == sizeof cfg;
  std::printf("header-c++17: %d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
  return ok ? 0 : 1;
}
