// gpu_launch: what ordo adds to a kernel launch. N empty kernels (one block of one thread),
//   - through ordo as GPU ops: independent (each op its own var, so ordo spreads them over the
//     GPU's compute streams) and as one chain (every op mutates the same var, so each starts only
//     after the one before it was reported complete: a host round trip per op, the cost of every
//     dependency between GPU ops today, docs/ARCHITECTURE.md §7);
//   - as raw <<<>>> launches from one thread: round robin over as many streams as ordo used, and
//     all on one stream (the GPU orders them itself).
// Each: wall time from the first push or launch until all have finished, divided by N, in ns per
// launch; the median of --reps runs after one warm-up. `make bench-gpu` runs it.
//
// Usage: gpu_launch [--n N] [--chain-n N] [--reps R] [--device D]
// Defaults: 100,000 independent, 20,000 chained, 3 runs, GPU 0.
// Without a GPU (ordo_device_count 0) it prints "no GPU: <the reason ordo gives>" and exits 0.
#include <cuda_runtime.h>
#include <ordo/ordo.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

__global__ void empty_kernel() {}

[[noreturn]] void die(const char* what, const std::string& why) {
  std::fflush(stdout);
  std::fprintf(stderr, "gpu_launch: %s: %s\n", what, why.c_str());
  std::exit(1);
}

#define CUDA_CHECK(call)                                                             \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess)                                                           \
      die(#call, std::string(cudaGetErrorName(e_)) + ": " + cudaGetErrorString(e_)); \
  } while (0)
#define ORDO_CHECK(call)                                                                        \
  do {                                                                                          \
    ordo_status s_ = (call);                                                                    \
    if (s_ != ORDO_OK)                                                                          \
      die(#call, std::string(ordo_status_string(s_)) + " (" + ordo_last_error_message() + ")"); \
  } while (0)

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

struct Args {
  int n = 100000, chain_n = 20000, reps = 3, device = 0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    const char* f = argv[i];
    int* num = !std::strcmp(f, "--n")         ? &a.n
               : !std::strcmp(f, "--chain-n") ? &a.chain_n
               : !std::strcmp(f, "--reps")    ? &a.reps
               : !std::strcmp(f, "--device")  ? &a.device
                                              : nullptr;
    char* end = nullptr;
    long v = num && i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : -1;
    long min = num == &a.device ? 0 : 1;
    if (!num || !end || *end || !*argv[i + 1] || v < min || v > 100000000) {
      std::fprintf(stderr, "usage: %s [--n N] [--chain-n N] [--reps R] [--device D]\n", argv[0]);
      std::exit(2);
    }
    *num = static_cast<int>(v);
    i++;
  }
  return a;
}

// The callbacks' failures (a launch that failed), reported after the run.
std::atomic<int> g_failures{0};
std::atomic<int> g_first_error{0};

// One op: launches the empty kernel on its stream and notes which stream that was.
int32_t launch_op(ordo_exec* exec, void* user_data) {
  ordo_exec_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(exec, &info) != ORDO_OK) {
    g_failures.fetch_add(1);
    return 1;
  }
  *static_cast<void**>(user_data) = info.stream;
  cudaStream_t stream = static_cast<cudaStream_t>(info.stream);
  empty_kernel<<<1, 1, 0, stream>>>();
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    int expected = 0;
    g_first_error.compare_exchange_strong(expected, static_cast<int>(e));
    g_failures.fetch_add(1);
    return static_cast<int32_t>(e);
  }
  return 0;
}

void check_callbacks() {
  if (g_failures.load() != 0) {
    die("an op's launch", std::to_string(g_failures.load()) + " failed, first with " +
                              cudaGetErrorString(static_cast<cudaError_t>(g_first_error.load())));
  }
}

// N ops through ordo: `chain` true pushes them all on one var, false each on its own. Returns
// the seconds from the first push until ordo_wait_for_all returned; `streams` gets how many
// distinct streams they ran on.
double ordo_run(ordo_engine* e, const std::vector<ordo_var>& vars, int n, bool chain, int device,
                size_t* streams) {
  std::vector<void*> seen(static_cast<size_t>(n), nullptr);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  o.device_id = device;
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    const ordo_var* v = &vars[chain ? 0 : static_cast<size_t>(i)];
    ordo_status s =
        ordo_opr_push(e, launch_op, &seen[static_cast<size_t>(i)], nullptr, 0, v, 1, &o);
    if (s != ORDO_OK) die("ordo_opr_push", ordo_last_error_message());
  }
  ordo_status s = ordo_wait_for_all(e);
  double t = now_s() - t0;
  if (s != ORDO_OK) die("ordo_wait_for_all", ordo_last_error_message());
  check_callbacks();
  std::sort(seen.begin(), seen.end());
  *streams = static_cast<size_t>(std::unique(seen.begin(), seen.end()) - seen.begin());
  return t;
}

// N raw launches round robin over `streams`, then a synchronize of each.
double raw_run(const std::vector<cudaStream_t>& streams, int n) {
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    empty_kernel<<<1, 1, 0, streams[static_cast<size_t>(i) % streams.size()]>>>();
  }
  CUDA_CHECK(cudaGetLastError());
  for (cudaStream_t s : streams) CUDA_CHECK(cudaStreamSynchronize(s));
  return now_s() - t0;
}

std::string no_gpu_reason() {
  ordo_engine* e = nullptr;
  ORDO_CHECK(ordo_engine_create(nullptr, &e));
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  ordo_status s = ordo_opr_push(
      e, [](ordo_exec*, void*) -> int32_t { return 0; }, nullptr, nullptr, 0, nullptr, 0, &o);
  std::string why = s == ORDO_ERR_NO_DEVICE ? ordo_last_error_message()
                                            : "ordo_device_count is 0 but a GPU push gave " +
                                                  std::string(ordo_status_string(s));
  ORDO_CHECK(ordo_engine_destroy(e));
  return why;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  int32_t gpus = 0;
  ORDO_CHECK(ordo_device_count(&gpus));
  if (gpus == 0) {
    std::printf("no GPU: %s\n", no_gpu_reason().c_str());
    return 0;
  }
  if (a.device >= gpus) die("--device", "no GPU " + std::to_string(a.device));
  CUDA_CHECK(cudaSetDevice(a.device));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, a.device));

  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  cfg.max_pending = -1;  // every op pushed at once, as the raw launches are
  ordo_engine* e = nullptr;
  ORDO_CHECK(ordo_engine_create(&cfg, &e));
  std::vector<ordo_var> vars(static_cast<size_t>(a.n));
  for (ordo_var& v : vars) ORDO_CHECK(ordo_var_new(e, &v));

  std::vector<double> ordo_indep, ordo_chain, raw_indep, raw_chain;
  size_t ordo_streams = 0, chain_streams = 0;
  std::vector<cudaStream_t> raw_streams;
  cudaStream_t one_stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&one_stream, cudaStreamNonBlocking));
  for (int rep = -1; rep < a.reps; rep++) {  // rep -1: the warm-up (module load, streams)
    double t = ordo_run(e, vars, a.n, false, a.device, &ordo_streams);
    if (raw_streams.empty()) {  // as many streams as ordo spread the ops over
      raw_streams.resize(ordo_streams);
      for (cudaStream_t& s : raw_streams) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      }
    }
    double tc = ordo_run(e, vars, a.chain_n, true, a.device, &chain_streams);
    double r = raw_run(raw_streams, a.n);
    double rc = raw_run({one_stream}, a.chain_n);
    if (rep >= 0) {
      ordo_indep.push_back(t);
      ordo_chain.push_back(tc);
      raw_indep.push_back(r);
      raw_chain.push_back(rc);
    }
  }
  for (ordo_var v : vars) ORDO_CHECK(ordo_var_delete(e, v));
  ORDO_CHECK(ordo_engine_destroy(e));
  for (cudaStream_t s : raw_streams) CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaStreamDestroy(one_stream));

  double oi = 1e9 * median(ordo_indep) / a.n, ri = 1e9 * median(raw_indep) / a.n;
  double oc = 1e9 * median(ordo_chain) / a.chain_n, rc = 1e9 * median(raw_chain) / a.chain_n;
  std::printf("ordo %s, GPU %d (%s): empty kernels, ns per launch (median of %d runs)\n",
              ordo_version_string(), a.device, prop.name, a.reps);
  std::printf("%-44s %14s %14s %8s\n", "", "ordo GPU ops", "raw <<<>>>", "ordo/raw");
  char label[96];
  std::snprintf(label, sizeof label, "independent: %d ops, %zu streams", a.n, ordo_streams);
  std::printf("%-44s %14.0f %14.0f %7.1fx\n", label, oi, ri, oi / ri);
  std::snprintf(label, sizeof label, "one chain: %d ops, %zu streams (raw: 1)", a.chain_n,
                chain_streams);
  std::printf("%-44s %14.0f %14.0f %7.1fx\n", label, oc, rc, oc / rc);
  std::printf("GPULAUNCH independent %.0f %.0f\nGPULAUNCH chain %.0f %.0f\n", oi, ri, oc, rc);
  return 0;
}
