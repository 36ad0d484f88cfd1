// Internal unit test, a plain C++ program linked with the library's own objects: an engine whose
// ordo_engine_create fails must not write its trace. create_engine() deletes an Engine whose
// start() failed (no worker thread could be started), and ~Engine shuts it down; that shutdown
// used to write the trace file, replacing whatever the path held (an earlier run's trace) with
// an empty one for an engine the caller never got, and under ORDO_TRACE it took a file number.
// Making thread creation fail through the public API needs a process limit that does not bind root,
// so the failure path is taken here directly: an Engine built and deleted without a successful
// start().
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "engine/engine.h"
#include "engine/engine_config.h"
#include "internal_check.h"
#include "ordo/ordo.h"

namespace {

using internal_test::check;

std::string read_file(const std::string& path) {
  std::string text;
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

ordo::EngineConfig traced_config(const char* path) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_POOLED;
  cfg.cpu_threads = 1;
  cfg.trace_path = path;
  ordo::EngineConfig out;
  check(ordo::resolve_engine_config(&cfg, &out) == ORDO_OK, "resolve the config");
  return out;
}

}  // namespace

int main() {
  char dir[] = "/tmp/ordo-failed-create-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  const std::string path = std::string(dir) + "/earlier-run.json";
  const std::string earlier = "{\"an earlier run's trace\":1}\n";
  if (std::FILE* f = std::fopen(path.c_str(), "w")) {
    std::fputs(earlier.c_str(), f);
    std::fclose(f);
  }

  delete new ordo::Engine(1, traced_config(path.c_str()));  // as create_engine on a failed start
  check(read_file(path) == earlier, "a failed create left the file at its path alone");

  auto* started = new ordo::Engine(2, traced_config(path.c_str()));
  check(started->start() == ORDO_OK, "start");
  delete started;
  check(read_file(path).find("traceEvents") != std::string::npos,
        "an engine that started writes its trace at shutdown");

  unlink(path.c_str());

  // Under ORDO_TRACE each engine numbers the path (path.json, path-2.json, ...): a failed create
  // must not take a number, or the first engine that works would write path-2.json.
  const std::string env_path = std::string(dir) + "/env.json";
  ordo::EngineConfig env_cfg = traced_config(env_path.c_str());
  env_cfg.trace_from_env = true;
  delete new ordo::Engine(3, env_cfg);  // a failed create
  auto* first = new ordo::Engine(4, env_cfg);
  check(first->start() == ORDO_OK, "start");
  check(first->config().trace_path && env_path == first->config().trace_path,
        "the first engine that starts under ORDO_TRACE writes path.json");
  delete first;
  unlink(env_path.c_str());
  rmdir(dir);
  if (!internal_test::failed()) std::printf("ordo_failed_create_trace_test: ok\n");
  return internal_test::failed() ? 1 : 0;
}
