// Internal test of GPU ops (issue #25) on the simulated device (src/device/sim_device.*): a plain
// C++ program linked with the library's own objects and the test-only simulation, installed with
// set_device_api_for_tests (not exported by libordo.so). It runs the engine's real GPU path:
// DeviceTable's GPU entries, the StreamManager's streams and event poller, OpRunner's event
// completion. Covered: device count and the no-GPU reason, round robin over the compute streams,
// the copy streams, the current device and ordo_exec_get_info in the callback, completion only
// once the stream reached the op's event, injected errors (a failing kernel, a failed
// cudaSetDevice, a failed cudaEventRecord) poisoning vars with CUDA's message, two GPUs, the
// three engine kinds, queue stats, the configured number of compute streams, cross-stream
// dependencies with gpu_stream_waits off (released when the producer's event fired; a failed
// producer poisons its consumer uncalled) and on (early release: the consumer starts once the
// producer's event is recorded and its stream waits for it; chains, WAR, prepared ops, what
// still waits for the producer's work, a failing producer, destroy, a randomized model checked
// against push order), and destroy with GPU work in flight.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "device/device_api.h"
#include "device/sim_device.h"
#include "device/stream_manager.h"
#include "engine/early_release.h"
#include "internal_check.h"
#include "ordo/ordo.h"

namespace {

using internal_test::check;
using ordo::SimDevice;

SimDevice* g_sim = nullptr;

// `streams`, `waits`: ordo_engine_config.gpu_compute_streams and gpu_stream_waits (0: env, else
// the default).
ordo_engine* make_engine(int32_t kind, int32_t streams = 0, int32_t waits = 0) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  cfg.gpu_compute_streams = streams;
  cfg.gpu_stream_waits = waits;
  ordo_engine* e = nullptr;
  ordo_status s = ordo_engine_create(&cfg, &e);
  check(s == ORDO_OK, "ordo_engine_create", ordo_last_error_message());
  return e;
}

ordo_push_opts gpu_opts(int32_t device, int32_t prop = ORDO_PROP_NORMAL) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  o.device_id = device;
  o.prop = prop;
  return o;
}

// What a GPU op saw, and a "kernel" it enqueues on its stream.
struct Seen {
  std::mutex mu;
  std::map<void*, int> streams;  // stream -> ops run on it
  std::set<int32_t> devices;
  int mismatched = 0;  // current device or stream device != info.device_id
  std::atomic<int> kernels_done{0};
  int kernel_sleep_ms = 0;
  int kernel_error = 0;
};

int32_t gpu_op(ordo_exec* exec, void* ud) {
  auto* seen = static_cast<Seen*>(ud);
  ordo_exec_info info;
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(exec, &info) != ORDO_OK) return 99;
  {
    std::lock_guard<std::mutex> g(seen->mu);
    seen->streams[info.stream]++;
    seen->devices.insert(info.device_id);
    if (info.device_type != ORDO_DEVICE_GPU || SimDevice::current_device() != info.device_id ||
        g_sim->device_of(info.stream) != info.device_id) {
      ++seen->mismatched;
    }
  }
  const int sleep_ms = seen->kernel_sleep_ms;
  g_sim->launch(
      info.stream,
      [seen, sleep_ms] {
        if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
        seen->kernels_done.fetch_add(1);
      },
      seen->kernel_error);
  return 0;
}

void test_device_count() {
  int32_t n = -1;
  ordo::set_device_api_for_tests(nullptr);
  check(ordo_device_count(&n) == ORDO_OK, "ordo_device_count with the real backend");
  Seen seen;
  ordo_push_opts o = gpu_opts(0);
  ordo_engine* e = nullptr;
  if (n == 0) {
    e = make_engine(ORDO_ENGINE_PER_DEVICE);
    check(ordo_opr_push(e, gpu_op, &seen, nullptr, 0, nullptr, 0, &o) == ORDO_ERR_NO_DEVICE,
          "a GPU push without a GPU is NO_DEVICE");
    const char* msg = ordo_last_error_message();
    check(std::strstr(msg, "CUDA") != nullptr || std::strstr(msg, "driver") != nullptr ||
              std::strstr(msg, "GPU was found") != nullptr,
          "the NO_DEVICE message says why", msg);
    std::printf("  no GPU: %s\n", msg);
    ordo_engine_destroy(e);
  } else {
    // A real GPU: its pushes are tests/test_gpu_kernels.c's; gpu_op would hand this simulation
    // a real stream.
    std::printf("  this machine has %d GPU(s): the no-GPU checks are skipped\n", (int)n);
  }

  ordo::set_device_api_for_tests(g_sim);
  check(ordo_device_count(&n) == ORDO_OK && n == 2, "the simulation's 2 GPUs are counted");
  e = make_engine(ORDO_ENGINE_PER_DEVICE);
  o = gpu_opts(2);
  check(ordo_opr_push(e, gpu_op, &seen, nullptr, 0, nullptr, 0, &o) == ORDO_ERR_NO_DEVICE,
        "GPU 2 of 2 is NO_DEVICE");
  check(std::strstr(ordo_last_error_message(), "GPUs 0 to 1") != nullptr,
        "the message names the GPUs there are", ordo_last_error_message());
  ordo_engine_destroy(e);
}

// `streams`: gpu_compute_streams (0: env, else 4); `n`: the compute streams expected, all used
// round robin.
void test_round_robin_and_info(int32_t kind, const char* kind_name, int32_t streams = 0,
                               int n = 4) {
  const size_t before = g_sim->live_streams();
  ordo_engine* e = make_engine(kind, streams);
  check(g_sim->live_streams() == before, "no stream before the first GPU op", kind_name);
  ordo_engine_config got;
  ordo_engine_config_init(&got);
  check(ordo_engine_get_config(e, &got) == ORDO_OK && got.gpu_compute_streams == n,
        "get_config reports the compute streams", kind_name);
  Seen seen;
  const int kOps = 8 * n;
  for (int i = 0; i < kOps; ++i) {
    ordo_push_opts o = gpu_opts(0);
    check(ordo_opr_push(e, gpu_op, &seen, nullptr, 0, nullptr, 0, &o) == ORDO_OK, "GPU push",
          ordo_last_error_message());
  }
  check(ordo_wait_for_all(e) == ORDO_OK, "wait_for_all after GPU ops", ordo_last_error_message());
  check(g_sim->live_streams() == before + static_cast<size_t>(n + 2),
        "GPU 0's first op made its n compute streams and 2 copy streams, GPU 1 none", kind_name);
  // Completed means the stream reached the op's event: every kernel has run.
  check(seen.kernels_done.load() == kOps, "every kernel ran before the ops completed", kind_name);
  check(seen.streams.size() == static_cast<size_t>(n), "round robin over n compute streams",
        kind_name);
  for (auto& [stream, count] : seen.streams) {
    check(count == 8, "each compute stream got 1/n of the ops", kind_name);
  }
  check(seen.mismatched == 0, "callback runs with its GPU current, on its GPU's stream", kind_name);
  ordo_engine_destroy(e);
}

void test_copy_streams() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  Seen compute, up, down;
  for (int i = 0; i < 8; ++i) {
    ordo_push_opts o = gpu_opts(1);
    ordo_opr_push(e, gpu_op, &compute, nullptr, 0, nullptr, 0, &o);
    o = gpu_opts(1, ORDO_PROP_COPY_TO_DEVICE);
    ordo_opr_push(e, gpu_op, &up, nullptr, 0, nullptr, 0, &o);
    o = gpu_opts(1, ORDO_PROP_COPY_FROM_DEVICE);
    ordo_opr_push(e, gpu_op, &down, nullptr, 0, nullptr, 0, &o);
  }
  check(ordo_wait_for_all(e) == ORDO_OK, "wait_for_all after copies");
  check(up.streams.size() == 1 && down.streams.size() == 1, "one stream per copy direction");
  void* h2d = up.streams.begin()->first;
  void* d2h = down.streams.begin()->first;
  check(h2d != d2h && !compute.streams.count(h2d) && !compute.streams.count(d2h),
        "copy streams differ from each other and from the compute streams");
  check(up.devices == std::set<int32_t>{1} && up.mismatched == 0 && down.mismatched == 0 &&
            compute.mismatched == 0,
        "GPU 1's ops run with GPU 1 current, on GPU 1's streams");
  // The per_device engine lists the CPU's 4 queues and GPU 0's and 1's 3 each.
  uint32_t queues = 0;
  ordo_engine_queue_count(e, &queues);
  check(queues == 4 + 2 * 3, "queue stats list each GPU's compute, h2d and d2h queues");
  ordo_queue_stats qs;
  qs.struct_size = sizeof qs;
  check(ordo_engine_queue_stats(e, 4, &qs) == ORDO_OK && qs.device_type == ORDO_DEVICE_GPU &&
            qs.device_id == 0 && std::strcmp(qs.name, "gpu0") == 0,
        "queue 4 is GPU 0's compute queue");
  ordo_engine_destroy(e);
}

// A CPU op after a GPU op on the same var starts only once the GPU op's kernel has finished.
std::atomic<int> g_order_seen{-1};
int32_t reader(ordo_exec*, void* ud) {
  g_order_seen.store(static_cast<Seen*>(ud)->kernels_done.load());
  return 0;
}

void test_event_completion() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v;
  ordo_var_new(e, &v);
  Seen seen;
  seen.kernel_sleep_ms = 50;
  ordo_push_opts o = gpu_opts(0);
  ordo_opr_push(e, gpu_op, &seen, nullptr, 0, &v, 1, &o);
  ordo_opr_push(e, reader, &seen, &v, 1, nullptr, 0, nullptr);
  check(ordo_wait_for_var(e, v) == ORDO_OK, "wait for the var");
  check(g_order_seen.load() == 1, "the reader ran after the GPU op's kernel finished");
  ordo_engine_destroy(e);
}

// Counts its calls into *ud (a std::atomic<int>): the tests check how often it ran, 0 included.
int32_t count_call(ordo_exec*, void* ud) {
  static_cast<std::atomic<int>*>(ud)->fetch_add(1);
  return 0;
}

void expect_var_error(ordo_engine* e, ordo_var v, const char* needle, const char* what) {
  int32_t code = 0;
  char buf[512] = {0};
  ordo_var_get_error(e, v, &code, buf, sizeof buf);
  check(code == ORDO_ERR_OP_FAILED, what, buf);
  check(std::strstr(buf, needle) != nullptr, what, buf);
}

void test_injected_errors() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  std::atomic<int> later_ran{0};

  // A kernel that fails: its error comes back through the op's event.
  ordo_var v;
  ordo_var_new(e, &v);
  Seen failing;
  failing.kernel_error = SimDevice::kErrLaunchFailure;
  ordo_push_opts o = gpu_opts(0);
  ordo_opr_push(e, gpu_op, &failing, nullptr, 0, &v, 1, &o);
  ordo_opr_push(e, count_call, &later_ran, &v, 1, nullptr, 0, nullptr);
  check(ordo_wait_for_var(e, v) == ORDO_ERR_OP_FAILED, "a failed kernel fails its op");
  expect_var_error(e, v, "unspecified launch failure", "the var holds CUDA's message");
  expect_var_error(e, v, "cudaErrorLaunchFailure", "the var holds CUDA's error name");
  check(later_ran.load() == 0, "the op after it is skipped");

  // cudaSetDevice fails: the callback is not called.
  ordo_var w;
  ordo_var_new(e, &w);
  g_sim->fail_next(SimDevice::Call::kSetDevice, SimDevice::kErrInvalidValue);
  std::atomic<int> called{0};
  ordo_opr_push(e, count_call, &called, nullptr, 0, &w, 1, &o);
  check(ordo_wait_for_var(e, w) == ORDO_ERR_OP_FAILED, "a failed cudaSetDevice fails the op");
  expect_var_error(e, w, "cudaSetDevice", "the message names cudaSetDevice");
  check(called.load() == 0, "the callback of an op whose device could not be set is not called");

  // cudaEventRecord fails: the op fails at once, with the message.
  ordo_var x;
  ordo_var_new(e, &x);
  g_sim->fail_next(SimDevice::Call::kEventRecord, SimDevice::kErrInvalidValue);
  Seen ok;
  ordo_opr_push(e, gpu_op, &ok, nullptr, 0, &x, 1, &o);
  check(ordo_wait_for_var(e, x) == ORDO_ERR_OP_FAILED, "a failed event record fails the op");
  expect_var_error(e, x, "cudaEventRecord", "the message names cudaEventRecord");

  // The error stays on its own vars: the next GPU op runs.
  ordo_var y;
  ordo_var_new(e, &y);
  Seen fine;
  ordo_opr_push(e, gpu_op, &fine, nullptr, 0, &y, 1, &o);
  check(ordo_wait_for_var(e, y) == ORDO_OK, "a GPU op after the failures succeeds");
  ordo_wait_for_all(e);  // the first failure is reported once
  ordo_engine_destroy(e);
}

// A GPU's streams are made by its first op, not at engine create: CPU work never touches the
// device, and a GPU whose streams cannot be made (CUDA refuses: a child forked after its parent
// used CUDA, say) fails its own ops with NO_DEVICE and CUDA's message, while the CPU and the
// other GPUs go on working.
void test_streams_made_by_the_first_gpu_op() {
  for (int32_t kind : {ORDO_ENGINE_PER_DEVICE, ORDO_ENGINE_POOLED, ORDO_ENGINE_NAIVE}) {
    const char* name = kind == ORDO_ENGINE_PER_DEVICE ? "per_device"
                       : kind == ORDO_ENGINE_POOLED   ? "pooled"
                                                      : "naive";
    const size_t before = g_sim->live_streams();
    ordo_engine* e = make_engine(kind);
    std::atomic<int> cpu_ran{0};
    ordo_var v;
    ordo_var_new(e, &v);
    for (int i = 0; i < 16; ++i) {
      ordo_opr_push(e, count_call, &cpu_ran, nullptr, 0, &v, 1, nullptr);
    }
    check(ordo_wait_for_all(e) == ORDO_OK && cpu_ran.load() == 16, "CPU ops ran", name);
    check(g_sim->live_streams() == before, "CPU ops made no stream", name);

    // GPU 0's streams cannot be made: its op is refused, now and at every later try.
    g_sim->fail_next(SimDevice::Call::kStreamCreate, SimDevice::kErrInvalidValue);
    Seen refused;
    ordo_push_opts o = gpu_opts(0);
    for (int attempt = 0; attempt < 2; ++attempt) {
      check(ordo_opr_push(e, gpu_op, &refused, nullptr, 0, &v, 1, &o) == ORDO_ERR_NO_DEVICE,
            "a GPU whose streams could not be made refuses its ops (NO_DEVICE)", name);
      const char* msg = ordo_last_error_message();
      check(std::strstr(msg, "could not make GPU 0's streams") != nullptr &&
                std::strstr(msg, "cudaStreamCreate") != nullptr,
            "the message names the GPU and the CUDA call", msg);
    }
    check(g_sim->live_streams() == before, "a failed start leaves no stream behind", name);
    check(refused.streams.empty(), "a refused GPU op never runs", name);

    // The CPU and GPU 1 still work, and GPU 1's streams are made by its first op.
    Seen fine;
    o = gpu_opts(1);
    check(ordo_opr_push(e, gpu_op, &fine, nullptr, 0, &v, 1, &o) == ORDO_OK, "GPU 1 works",
          ordo_last_error_message());
    ordo_opr_push(e, count_call, &cpu_ran, &v, 1, nullptr, 0, nullptr);
    check(ordo_wait_for_all(e) == ORDO_OK && fine.kernels_done.load() == 1 && cpu_ran.load() == 17,
          "the CPU and GPU 1 go on working", name);
    check(g_sim->live_streams() == before + 6, "GPU 1's first op made its 6 streams", name);
    ordo_engine_destroy(e);
    check(g_sim->live_streams() == before, "destroy destroyed them", name);

    // Threads racing to make one GPU's streams with their first ops: made once, every op runs.
    e = make_engine(kind);
    Seen raced;
    std::vector<std::thread> pushers;
    std::atomic<int> not_ok{0};
    for (int t = 0; t < 4; ++t) {
      pushers.emplace_back([&] {
        ordo_push_opts po = gpu_opts(0);
        for (int i = 0; i < 8; ++i) {
          if (ordo_opr_push(e, gpu_op, &raced, nullptr, 0, nullptr, 0, &po) != ORDO_OK) {
            not_ok.fetch_add(1);
          }
        }
      });
    }
    for (auto& t : pushers) t.join();
    check(ordo_wait_for_all(e) == ORDO_OK && not_ok.load() == 0 && raced.kernels_done.load() == 32,
          "racing first ops all run", name);
    check(g_sim->live_streams() == before + 6, "racing first ops made GPU 0's streams once", name);
    ordo_engine_destroy(e);
  }
}

// In a forked child, a GPU whose streams cannot be made says that the fork may be why (CUDA
// refuses a child forked after its parent used CUDA, with a message that does not say so); in
// the parent, the same failure does not.
void test_failed_start_in_a_forked_child() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v;
  ordo_var_new(e, &v);
  ordo_push_opts o = gpu_opts(0);
  Seen seen;
  g_sim->fail_next(SimDevice::Call::kStreamCreate, SimDevice::kErrInvalidValue);
  check(ordo_opr_push(e, gpu_op, &seen, nullptr, 0, &v, 1, &o) == ORDO_ERR_NO_DEVICE &&
            std::strstr(ordo_last_error_message(), "fork") == nullptr,
        "in the parent, a failed start names no fork", ordo_last_error_message());
  ordo_engine_destroy(e);
  std::fflush(nullptr);
  const pid_t pid = fork();
  check(pid >= 0, "fork", std::strerror(errno));
  if (pid == 0) {
    e = make_engine(ORDO_ENGINE_PER_DEVICE);
    ordo_var_new(e, &v);
    g_sim->fail_next(SimDevice::Call::kStreamCreate, SimDevice::kErrInvalidValue);
    const bool refused =
        ordo_opr_push(e, gpu_op, &seen, nullptr, 0, &v, 1, &o) == ORDO_ERR_NO_DEVICE;
    const char* msg = ordo_last_error_message();
    const bool hinted = std::strstr(msg, "could not make GPU 0's streams") != nullptr &&
                        std::strstr(msg, "fork() child") != nullptr;
    if (!refused || !hinted) std::fprintf(stderr, "forked child: %s\n", msg);
    ordo_engine_destroy(e);
    _exit(refused && hinted ? 0 : 1);
  }
  int status = 0;
  check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "in a forked child, a failed start's message says the fork may be why",
        "see the child's message above");
}

void test_shutdown_in_flight() {
  for (int32_t kind : {ORDO_ENGINE_PER_DEVICE, ORDO_ENGINE_POOLED, ORDO_ENGINE_NAIVE}) {
    const size_t streams_before = g_sim->live_streams();
    ordo_engine* e = make_engine(kind);
    Seen seen;
    seen.kernel_sleep_ms = 5;
    ordo_var v;
    ordo_var_new(e, &v);
    constexpr int kOps = 40;
    for (int i = 0; i < kOps; ++i) {
      ordo_push_opts o = gpu_opts(i % 2, i % 3 == 0 ? ORDO_PROP_COPY_TO_DEVICE : ORDO_PROP_NORMAL);
      // Half chained through one var, half free.
      if (i % 2) {
        ordo_opr_push(e, gpu_op, &seen, nullptr, 0, &v, 1, &o);
      } else {
        ordo_opr_push(e, gpu_op, &seen, nullptr, 0, nullptr, 0, &o);
      }
    }
    check(g_sim->live_streams() == streams_before + 2 * 6, "6 streams per GPU, both GPUs used");
    check(ordo_engine_destroy(e) == ORDO_OK, "destroy with GPU work in flight");
    check(seen.kernels_done.load() == kOps, "destroy waited for every GPU op's work");
    check(g_sim->live_streams() == streams_before, "destroy destroyed the engine's streams");
    check(g_sim->live_events() == 0, "destroy destroyed the engine's events");
  }
}

// Cross-stream dependencies with gpu_stream_waits off (-1, or ORDO_GPU_STREAM_WAITS=0): a GPU op
// that reads a var written by a GPU op on another stream of the same GPU is released when the
// producer's event has *fired* (a host round trip through the polling thread), not when it is
// recorded; so its callback sees the producer's kernel finished, and its own kernel runs after
// it. With the switch on (the default), test_early_release.inc covers early release.
struct Chain {
  std::mutex mu;
  std::vector<std::string> order;  // "P kernel", "C callback", "C kernel", in the order they ran
  std::atomic<int> producer_done{0};
  int producer_seen_by_consumer = -1;
  void* producer_stream = nullptr;
  void* consumer_stream = nullptr;
  int producer_error = 0;
  void note(const char* what) {
    std::lock_guard<std::mutex> g(mu);
    order.push_back(what);
  }
};

void* stream_of(ordo_exec* exec) {
  ordo_exec_info info;
  info.struct_size = sizeof info;
  return ordo_exec_get_info(exec, &info) == ORDO_OK ? info.stream : nullptr;
}

int32_t chain_producer(ordo_exec* exec, void* ud) {
  auto* c = static_cast<Chain*>(ud);
  c->producer_stream = stream_of(exec);
  g_sim->launch(
      c->producer_stream,
      [c] {
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
        c->note("P kernel");
        c->producer_done.store(1);
      },
      c->producer_error);
  return 0;
}

int32_t chain_consumer(ordo_exec* exec, void* ud) {
  auto* c = static_cast<Chain*>(ud);
  c->consumer_stream = stream_of(exec);
  c->producer_seen_by_consumer = c->producer_done.load();
  c->note("C callback");
  g_sim->launch(c->consumer_stream, [c] { c->note("C kernel"); });
  return 0;
}

// `waits`: gpu_stream_waits; -1 (off) restores the release at the fired event exactly.
void test_cross_stream_dependency(int32_t kind, const char* kind_name, int32_t waits) {
  ordo_engine* e = make_engine(kind, 0, waits);
  ordo_var v;
  ordo_var_new(e, &v);
  Chain c;
  ordo_push_opts o = gpu_opts(0);
  check(ordo_opr_push(e, chain_producer, &c, nullptr, 0, &v, 1, &o) == ORDO_OK, "producer push");
  check(ordo_opr_push(e, chain_consumer, &c, &v, 1, nullptr, 0, &o) == ORDO_OK, "consumer push");
  check(ordo_wait_for_var(e, v) == ORDO_OK, "wait for the chain", kind_name);
  check(c.producer_stream && c.consumer_stream && c.producer_stream != c.consumer_stream,
        "producer and consumer on two compute streams (round robin)", kind_name);
  check(c.producer_seen_by_consumer == 1,
        "the consumer is released once the producer's event fired (no early start)", kind_name);
  check(c.order == std::vector<std::string>{"P kernel", "C callback", "C kernel"},
        "producer kernel, then consumer callback, then consumer kernel", kind_name);
  ordo_engine_destroy(e);
}

void test_cross_stream_failing_producer() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 0, -1);
  ordo_var v, out;
  ordo_var_new(e, &v);
  ordo_var_new(e, &out);
  Chain c;
  c.producer_error = SimDevice::kErrLaunchFailure;
  ordo_push_opts o = gpu_opts(0);
  ordo_opr_push(e, chain_producer, &c, nullptr, 0, &v, 1, &o);
  ordo_opr_push(e, chain_consumer, &c, &v, 1, &out, 1, &o);
  check(ordo_wait_for_var(e, out) == ORDO_ERR_OP_FAILED,
        "the consumer's output is poisoned by the failed producer");
  expect_var_error(e, out, "unspecified launch failure", "the consumer's var holds CUDA's message");
  check(c.consumer_stream == nullptr && c.producer_seen_by_consumer == -1,
        "the consumer of a failed GPU producer is not called");
  check(c.order == std::vector<std::string>{"P kernel"}, "only the producer's kernel ran");
  ordo_wait_for_all(e);
  ordo_engine_destroy(e);
}

// The simulation's stream_wait_event really orders two streams: what early release would rely
// on. Stream B waits for an event recorded on stream A after a long kernel.
void test_sim_stream_wait_event() {
  g_sim->set_device(0);
  void* a = nullptr;
  void* b = nullptr;
  void* ev = nullptr;
  check(g_sim->stream_create(&a) == 0 && g_sim->stream_create(&b) == 0, "sim streams");
  check(g_sim->event_create(&ev) == 0, "sim event");
  std::mutex mu;
  std::vector<std::string> order;
  auto note = [&](const char* s) {
    std::lock_guard<std::mutex> g(mu);
    order.push_back(s);
  };
  g_sim->launch(a, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    note("A");
  });
  check(g_sim->event_record(ev, a) == 0, "record on A");
  check(g_sim->stream_wait_event(b, ev) == 0, "B waits for A's event");
  g_sim->launch(b, [&] { note("B"); });
  void* done = nullptr;
  g_sim->event_create(&done);
  g_sim->event_record(done, b);
  while (g_sim->event_query(done) == ordo::DeviceApi::kNotReady) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  check(order == std::vector<std::string>{"A", "B"}, "B's kernel ran after A's");
  g_sim->stream_destroy(a);
  g_sim->stream_destroy(b);
  g_sim->event_destroy(ev);
  g_sim->event_destroy(done);
}

// ---- Early release (gpu_stream_waits on, the default; docs/ARCHITECTURE.md §7) ----
// A producer's kernel blocks on a gate that the test opens later, so the producer's event has
// surely not fired while the test looks at what already ran.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> g(mu);
      open = true;
    }
    cv.notify_all();
  }
};

// What ran, in order: "<name> callback" on the host, "<name> kernel" on the op's stream.
struct Log {
  std::mutex mu;
  std::vector<std::string> events;
  std::map<std::string, void*> streams;
  void note(const std::string& what) {
    std::lock_guard<std::mutex> g(mu);
    events.push_back(what);
  }
  bool has(const std::string& what) {
    std::lock_guard<std::mutex> g(mu);
    for (auto& e : events) {
      if (e == what) return true;
    }
    return false;
  }
  // The position of `what` in the order (-1: not there).
  int at(const std::string& what) {
    std::lock_guard<std::mutex> g(mu);
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i] == what) return static_cast<int>(i);
    }
    return -1;
  }
};

// A GPU op: notes its callback, then enqueues a kernel that waits for `gate` (when given),
// notes itself and fails with `error` (0: succeeds).
struct Step {
  Log* log;
  std::string name;
  Gate* gate = nullptr;
  int error = 0;
};

int32_t step_op(ordo_exec* exec, void* ud) {
  auto* st = static_cast<Step*>(ud);
  void* stream = stream_of(exec);
  {
    std::lock_guard<std::mutex> g(st->log->mu);
    st->log->streams[st->name] = stream;
  }
  st->log->note(st->name + " callback");
  g_sim->launch(
      stream,
      [st] {
        if (st->gate) st->gate->wait();
        st->log->note(st->name + " kernel");
      },
      st->error);
  return 0;
}

// A CPU op: notes itself.
int32_t cpu_step(ordo_exec*, void* ud) {
  auto* st = static_cast<Step*>(ud);
  st->log->note(st->name + " cpu");
  return 0;
}

// Polls until `what` is noted (true) or 5 s have passed (false).
bool eventually(Log& log, const std::string& what) {
  for (int i = 0; i < 5000; ++i) {
    if (log.has(what)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Nothing noted `what` within 100 ms.
bool not_within_100ms(Log& log, const std::string& what) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return !log.has(what);
}

void push_step(ordo_engine* e, Step* st, int32_t device, const ordo_var* reads, size_t nr,
               const ordo_var* writes, size_t nw) {
  ordo_push_opts o = gpu_opts(device);
  check(ordo_opr_push(e, step_op, st, reads, nr, writes, nw, &o) == ORDO_OK, "GPU push",
        ordo_last_error_message());
}

// A consumer on another stream of the same GPU starts before the producer's event fired; its
// kernel runs after the producer's (its stream waited for the producer's event).
void test_early_consumer(int32_t kind, const char* kind_name) {
  ordo_engine* e = make_engine(kind);
  ordo_var v;
  ordo_var_new(e, &v);
  Log log;
  Gate gate;
  Step p{&log, "P", &gate};
  Step c{&log, "C"};
  push_step(e, &p, 0, nullptr, 0, &v, 1);
  push_step(e, &c, 0, &v, 1, nullptr, 0);
  check(eventually(log, "C callback"), "the consumer's callback ran before the producer's event",
        kind_name);
  check(!log.has("P kernel") && !log.has("C kernel"),
        "meanwhile the producer's kernel is held and the consumer's waits for it", kind_name);
  check(ordo_wait_for_var_timeout(e, v, 20000000) == ORDO_ERR_TIMEOUT,
        "ordo_wait_for_var still waits for the producer's work", kind_name);
  gate.release();
  check(ordo_wait_for_var(e, v) == ORDO_OK, "wait for the chain", kind_name);
  check(ordo_wait_for_all(e) == ORDO_OK, "wait for all", kind_name);
  check(log.streams["P"] != log.streams["C"], "producer and consumer on two streams", kind_name);
  check(log.at("C callback") < log.at("P kernel") && log.at("P kernel") < log.at("C kernel"),
        "consumer callback, producer kernel, consumer kernel", kind_name);
  ordo_engine_destroy(e);
}

// A prepared GPU op (ordo_opr_push_prepared) is started early like a pushed one.
void test_early_prepared() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v;
  ordo_var_new(e, &v);
  Log log;
  Gate gate;
  Step p{&log, "P", &gate};
  Step c{&log, "C"};
  ordo_push_opts o = gpu_opts(0);
  ordo_opr prepared = 0;
  check(ordo_opr_new(e, step_op, &c, &v, 1, nullptr, 0, &o, &prepared) == ORDO_OK,
        "prepare a GPU op", ordo_last_error_message());
  push_step(e, &p, 0, nullptr, 0, &v, 1);
  check(ordo_opr_push_prepared(e, prepared, 0) == ORDO_OK, "push the prepared GPU op");
  check(eventually(log, "C callback") && !log.has("P kernel"),
        "the prepared consumer started before the producer's event");
  gate.release();
  check(ordo_wait_for_var(e, v) == ORDO_OK, "wait (prepared)");
  check(log.at("P kernel") < log.at("C kernel"), "prepared: kernels in push order");
  ordo_opr_delete(e, prepared);
  ordo_engine_destroy(e);
}

// A captured graph's GPU ops are released early like pushed ones (Engine::push_resolved, the
// launch's push): the consumer's callback runs while the producer's kernel is held.
void test_early_graph_launch() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v;
  ordo_var_new(e, &v);
  Log log;
  Gate gate;
  Step p{&log, "P", &gate};
  Step c{&log, "C"};
  check(ordo_graph_begin_capture(e) == ORDO_OK, "begin a capture", ordo_last_error_message());
  push_step(e, &p, 0, nullptr, 0, &v, 1);
  push_step(e, &c, 0, &v, 1, nullptr, 0);
  ordo_graph* g = nullptr;
  check(ordo_graph_end_capture(e, &g) == ORDO_OK, "end the capture", ordo_last_error_message());
  check(!log.has("P callback"), "captured GPU ops are recorded, not run");
  check(ordo_graph_launch(g) == ORDO_OK, "launch", ordo_last_error_message());
  check(eventually(log, "C callback") && !log.has("P kernel"),
        "the launched consumer started before the producer's event");
  gate.release();
  check(ordo_wait_for_var(e, v) == ORDO_OK, "wait for the launch");
  check(log.at("P kernel") < log.at("C kernel"), "launched kernels in capture order");
  check(ordo_graph_destroy(g) == ORDO_OK, "destroy the graph", ordo_last_error_message());
  ordo_engine_destroy(e);
}

// A chain of three (write, read-write, read) on one var: all three callbacks run before the
// first kernel may, and the kernels run in push order on three streams.
void test_early_chain_of_3(int32_t kind, const char* kind_name) {
  ordo_engine* e = make_engine(kind);
  ordo_var v;
  ordo_var_new(e, &v);
  Log log;
  Gate gate;
  Step p{&log, "P", &gate};
  Step c{&log, "C"};
  Step d{&log, "D"};
  push_step(e, &p, 0, nullptr, 0, &v, 1);
  push_step(e, &c, 0, nullptr, 0, &v, 1);
  push_step(e, &d, 0, &v, 1, nullptr, 0);
  check(eventually(log, "D callback") && log.has("C callback"),
        "the chain's callbacks all ran while the first kernel is held", kind_name);
  check(!log.has("C kernel") && !log.has("D kernel"), "no kernel of the chain ran yet", kind_name);
  gate.release();
  check(ordo_wait_for_var(e, v) == ORDO_OK, "wait for the chain of 3", kind_name);
  check(log.at("P kernel") < log.at("C kernel") && log.at("C kernel") < log.at("D kernel"),
        "kernels in push order", kind_name);
  check(log.streams["P"] != log.streams["C"] && log.streams["C"] != log.streams["D"] &&
            log.streams["P"] != log.streams["D"],
        "three streams", kind_name);
  ordo_engine_destroy(e);
}

// What must still see the producer's work finished: a CPU op, ordo_wait_for_var, a GPU op of
// another device, and a GPU op that follows one of those.
void test_early_others_wait() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v;
  ordo_var_new(e, &v);
  Log log;
  Gate gate;
  Step p{&log, "P", &gate};
  Step cpu{&log, "X"};
  Step other{&log, "G1"};
  Step same{&log, "G0"};
  push_step(e, &p, 0, nullptr, 0, &v, 1);
  check(ordo_opr_push(e, cpu_step, &cpu, &v, 1, nullptr, 0, nullptr) == ORDO_OK, "CPU push");
  push_step(e, &other, 1, &v, 1, nullptr, 0);
  push_step(e, &same, 0, nullptr, 0, &v, 1);  // a writer after the readers
  check(eventually(log, "P callback"), "the producer ran");
  check(not_within_100ms(log, "X cpu"), "a CPU reader waits for the producer's work");
  check(!log.has("G1 callback"), "another GPU's reader waits for the producer's work");
  check(!log.has("G0 callback"), "a same-GPU writer after a CPU reader waits too");
  check(ordo_wait_for_var_timeout(e, v, 20000000) == ORDO_ERR_TIMEOUT,
        "ordo_wait_for_var waits for the producer's work");
  gate.release();
  check(ordo_wait_for_all(e) == ORDO_OK, "wait for all");
  check(log.at("P kernel") < log.at("X cpu") && log.at("P kernel") < log.at("G1 callback"),
        "the CPU op and the other GPU's op ran after the producer's kernel");
  check(log.at("X cpu") < log.at("G0 callback") && log.at("G1 kernel") < log.at("G0 kernel"),
        "the writer ran after the readers");
  ordo_engine_destroy(e);
}

// Readers on two streams, then a writer (WAR): the writer starts once both readers' events are
// recorded, and its kernel runs after both readers' kernels.
void test_early_war() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v;
  ordo_var_new(e, &v);
  Log log;
  Gate gate;
  Step r1{&log, "R1", &gate};
  Step r2{&log, "R2"};
  Step w{&log, "W"};
  push_step(e, &r1, 0, &v, 1, nullptr, 0);
  push_step(e, &r2, 0, &v, 1, nullptr, 0);
  push_step(e, &w, 0, nullptr, 0, &v, 1);
  check(eventually(log, "W callback"), "the writer started while a reader's kernel is held");
  check(eventually(log, "R2 kernel") && !log.has("W kernel"),
        "the writer's kernel waits for the held reader's");
  gate.release();
  check(ordo_wait_for_var(e, v) == ORDO_OK, "wait for the WAR chain");
  check(log.at("R1 kernel") < log.at("W kernel") && log.at("R2 kernel") < log.at("W kernel"),
        "the writer's kernel after both readers' kernels");
  check(log.streams["R1"] != log.streams["R2"] && log.streams["W"] != log.streams["R1"] &&
            log.streams["W"] != log.streams["R2"],
        "three streams");
  ordo_engine_destroy(e);
}

// The switch off: the consumer's callback is not called before the producer's event fired.
void test_early_switch_off() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE, 0, -1);
  ordo_var v;
  ordo_var_new(e, &v);
  Log log;
  Gate gate;
  Step p{&log, "P", &gate};
  Step c{&log, "C"};
  push_step(e, &p, 0, nullptr, 0, &v, 1);
  push_step(e, &c, 0, &v, 1, nullptr, 0);
  check(eventually(log, "P callback"), "the producer ran (switch off)");
  check(not_within_100ms(log, "C callback"), "switch off: the consumer waits for the event");
  gate.release();
  check(ordo_wait_for_var(e, v) == ORDO_OK, "wait (switch off)");
  check(log.at("P kernel") < log.at("C callback"), "switch off: callback after the kernel");
  ordo_engine_destroy(e);
}

// A producer whose kernel fails after its consumers started: each consumer's outcome is the
// producer's error (its callback ran; on the simulation its kernel ran too); their written
// vars are poisoned with the producer's message, a CPU op after them is skipped uncalled, and
// the consumers count as skipped.
void test_early_failing_producer() {
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v, out, out2;
  ordo_var_new(e, &v);
  ordo_var_new(e, &out);
  ordo_var_new(e, &out2);
  ordo_stats before;
  before.struct_size = sizeof before;
  ordo_engine_stats(e, &before);
  Log log;
  Gate gate;
  Step p{&log, "P", &gate, SimDevice::kErrLaunchFailure};
  Step c{&log, "C"};
  Step d{&log, "D"};
  Step x{&log, "X"};
  push_step(e, &p, 0, nullptr, 0, &v, 1);
  push_step(e, &c, 0, &v, 1, &out, 1);
  push_step(e, &d, 0, &out, 1, &out2, 1);
  check(ordo_opr_push(e, cpu_step, &x, &out2, 1, nullptr, 0, nullptr) == ORDO_OK, "CPU push");
  check(eventually(log, "D callback"), "the consumers started before the failure is known");
  gate.release();
  check(ordo_wait_for_var(e, out2) == ORDO_ERR_OP_FAILED, "the chain's end is poisoned");
  expect_var_error(e, v, "unspecified launch failure", "the producer's var holds its error");
  expect_var_error(e, out, "unspecified launch failure", "the consumer's var holds it too");
  expect_var_error(e, out2, "unspecified launch failure", "so does the next consumer's");
  check(!log.has("X cpu"), "the CPU op after them is skipped, not called");
  check(ordo_wait_for_all(e) == ORDO_ERR_OP_FAILED, "wait_for_all reports the failure");
  ordo_stats after;
  after.struct_size = sizeof after;
  ordo_engine_stats(e, &after);
  check(after.failed - before.failed == 4 && after.skipped - before.skipped == 3,
        "the producer failed; both consumers and the CPU op were skipped");
  ordo_engine_destroy(e);
}

// Destroy with early-released chains in flight drains them: it returns once the held kernels
// ran, with every stream and event gone.
void test_early_destroy_in_flight() {
  const size_t streams_before = g_sim->live_streams();
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  Log log;
  Gate gate;
  std::vector<std::unique_ptr<Step>> steps;
  ordo_var vars[3];
  for (auto& v : vars) ordo_var_new(e, &v);
  // Only the first kernel is held: an op that lands on its stream waits behind it too, so the
  // ops of other chains may be held as well, but S3 (a GPU 0 reader of S0's var) starts early.
  for (int i = 0; i < 30; ++i) {
    steps.push_back(std::make_unique<Step>(Step{&log, "S" + std::to_string(i)}));
    if (i == 0) steps.back()->gate = &gate;
    ordo_var& v = vars[i % 3];
    if (i % 4 == 3) {
      push_step(e, steps.back().get(), (i / 4) % 2, &v, 1, nullptr, 0);
    } else {
      push_step(e, steps.back().get(), 0, nullptr, 0, &v, 1);
    }
  }
  check(eventually(log, "S3 callback") && !log.has("S0 kernel"),
        "a chain started behind a held kernel");
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.release();
  });
  check(ordo_engine_destroy(e) == ORDO_OK, "destroy with early chains in flight");
  opener.join();
  int kernels = 0;
  for (auto& st : steps) kernels += log.has(st->name + " kernel") ? 1 : 0;
  check(kernels == 30, "destroy waited for every kernel");
  check(g_sim->live_streams() == streams_before, "destroy destroyed the engine's streams");
  check(g_sim->live_events() == 0, "destroy destroyed the engine's events");
}

// Many random chains over a few vars, GPU ops of two devices and CPU ops mixed: every op's
// work (a GPU op's kernel, a CPU op's callback) must see exactly what sequential execution in
// push order gives. Each write folds its index into the var's value, each read records it.
struct Model {
  static constexpr int kVars = 4;
  std::atomic<uint64_t> value[kVars];
  std::vector<uint64_t> seen;  // per op: the value read (reads) or 0
};
struct ModelOp {
  Model* m;
  int index;
  int var;
  bool write;
};

void model_work(ModelOp* op) {
  uint64_t& slot = op->m->seen[static_cast<size_t>(op->index)];
  const uint64_t v = op->m->value[op->var].load(std::memory_order_relaxed);
  if (op->write) {
    op->m->value[op->var].store(v * 31 + static_cast<uint64_t>(op->index) + 1,
                                std::memory_order_relaxed);
  } else {
    slot = v;
  }
}

int32_t model_gpu(ordo_exec* exec, void* ud) {
  auto* op = static_cast<ModelOp*>(ud);
  g_sim->launch(stream_of(exec), [op] { model_work(op); });
  return 0;
}

int32_t model_cpu(ordo_exec*, void* ud) {
  model_work(static_cast<ModelOp*>(ud));
  return 0;
}

void test_early_model(int32_t kind, int rounds) {
  uint64_t seed = 12345;
  auto rnd = [&] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>(seed >> 33);
  };
  int mismatches = 0;
  for (int round = 0; round < rounds; ++round) {
    ordo_engine* e = make_engine(kind);
    ordo_var vars[Model::kVars];
    for (auto& v : vars) ordo_var_new(e, &v);
    constexpr int kOps = 200;
    Model m;
    for (auto& v : m.value) v.store(0);
    m.seen.assign(kOps, 0);
    std::vector<ModelOp> ops(kOps);
    uint64_t expect_value[Model::kVars] = {0, 0, 0, 0};
    std::vector<uint64_t> expect_seen(kOps, 0);
    for (int i = 0; i < kOps; ++i) {
      const int var = rnd() % Model::kVars;
      const int what = rnd() % 10;  // 0-5 GPU 0, 6-7 GPU 1, 8-9 CPU
      const bool write = rnd() % 2 == 0;
      ops[static_cast<size_t>(i)] = ModelOp{&m, i, var, write};
      if (write) {
        expect_value[var] = expect_value[var] * 31 + static_cast<uint64_t>(i) + 1;
      } else {
        expect_seen[static_cast<size_t>(i)] = expect_value[var];
      }
      const ordo_var* reads = write ? nullptr : &vars[var];
      const ordo_var* writes = write ? &vars[var] : nullptr;
      if (what < 8) {
        ordo_push_opts o = gpu_opts(what < 6 ? 0 : 1);
        ordo_opr_push(e, model_gpu, &ops[static_cast<size_t>(i)], reads, write ? 0 : 1, writes,
                      write ? 1 : 0, &o);
      } else {
        ordo_opr_push(e, model_cpu, &ops[static_cast<size_t>(i)], reads, write ? 0 : 1, writes,
                      write ? 1 : 0, nullptr);
      }
      if (rnd() % 50 == 0) ordo_wait_for_var(e, vars[var]);
    }
    check(ordo_wait_for_all(e) == ORDO_OK, "model: wait for all");
    for (int v = 0; v < Model::kVars; ++v) {
      if (m.value[v].load() != expect_value[v]) ++mismatches;
    }
    for (int i = 0; i < kOps; ++i) {
      if (m.seen[static_cast<size_t>(i)] != expect_seen[static_cast<size_t>(i)]) ++mismatches;
    }
    ordo_engine_destroy(e);
  }
  check(mismatches == 0, "model: every op saw push order", std::to_string(mismatches).c_str());
}

// Out of memory, early release grants less, never wrongly (EarlyRelease::alloc_fault_for_test
// makes its allocations fail): with every one failing, a consumer waits for its producer's
// event as with the switch off; with about one in four failing (some grants half prepared), the
// random model still sees push order and nothing hangs.
std::atomic<uint64_t> g_early_allocs{0};
std::atomic<uint64_t> g_early_allocs_failed{0};
bool every_allocation_fails() {
  g_early_allocs_failed.fetch_add(1);
  return true;
}
// Pseudo-random, about one in four: a strict "every third" pattern would fail every new front
// (three allocations in a row), so that nothing would be granted early at all.
bool one_allocation_in_four_fails() {
  uint64_t x = g_early_allocs.fetch_add(1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  if ((x & 3) != 0) return false;
  g_early_allocs_failed.fetch_add(1);
  return true;
}

void test_early_out_of_memory(int rounds) {
  ordo::EarlyRelease::alloc_fault_for_test.fails.store(every_allocation_fails);
  test_cross_stream_dependency(ORDO_ENGINE_PER_DEVICE, "per_device, no memory for early release",
                               1);
  test_cross_stream_dependency(ORDO_ENGINE_POOLED, "pooled, no memory for early release", 1);
  check(g_early_allocs_failed.load() > 0, "early release tried to allocate, and failed");
  ordo::EarlyRelease::alloc_fault_for_test.fails.store(one_allocation_in_four_fails);
  g_early_allocs_failed.store(0);
  test_early_model(ORDO_ENGINE_PER_DEVICE, rounds);
  test_early_model(ORDO_ENGINE_POOLED, rounds / 2);
  ordo::EarlyRelease::alloc_fault_for_test.fails.store(nullptr);
  check(g_early_allocs_failed.load() > 10, "allocations failed in the model runs",
        std::to_string(g_early_allocs_failed.load()).c_str());
}

// Out of host memory in a GPU's stream manager (StreamManager::alloc_fault_for_test): an op whose
// event cannot be tracked fails with the backend's "out of memory" instead of ending the process
// or hanging; once memory is back, GPU ops run as before; with about one in four allocations
// failing (the poller's included), every op runs or fails, the engine drains, and its events are
// all destroyed with it.
bool sm_every_allocation_fails() {
  return true;
}
std::atomic<uint64_t> g_sm_allocs{0};
std::atomic<uint64_t> g_sm_allocs_failed{0};
bool sm_one_allocation_in_four_fails() {
  uint64_t x = g_sm_allocs.fetch_add(1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  if ((x & 3) != 0) return false;
  g_sm_allocs_failed.fetch_add(1);
  return true;
}

std::atomic<int> g_oom_kernels{0};
int32_t oom_gpu_op(ordo_exec* exec, void*) {
  g_sim->launch(stream_of(exec), [] { g_oom_kernels.fetch_add(1); });
  return 0;
}

void test_stream_manager_out_of_memory() {
  using ordo::StreamManager;
  ordo_engine* e = make_engine(ORDO_ENGINE_PER_DEVICE);
  ordo_var v;
  ordo_var_new(e, &v);
  ordo_push_opts o = gpu_opts(0);
  StreamManager::alloc_fault_for_test.fails.store(sm_every_allocation_fails);
  check(ordo_opr_push(e, oom_gpu_op, nullptr, nullptr, 0, &v, 1, &o) == ORDO_OK, "oom: push");
  const ordo_status s = ordo_wait_for_var(e, v);
  check(s == ORDO_ERR_OP_FAILED && std::strstr(ordo_last_error_message(), "out of memory"),
        "oom: the op fails with the backend's out of memory", ordo_last_error_message());
  StreamManager::alloc_fault_for_test.fails.store(nullptr);
  ordo_var_clear_error(e, v);
  check(ordo_opr_push(e, oom_gpu_op, nullptr, nullptr, 0, &v, 1, &o) == ORDO_OK, "oom: push");
  check(ordo_wait_for_var(e, v) == ORDO_OK, "oom: memory back, the next op runs",
        ordo_last_error_message());
  ordo_wait_for_all(e);  // takes the first failure's record

  constexpr int kOwn = 100, kShared = 4, kChained = 100;
  std::vector<ordo_var> own(kOwn), shared(kShared);
  for (auto& x : own) ordo_var_new(e, &x);
  for (auto& x : shared) ordo_var_new(e, &x);
  StreamManager::alloc_fault_for_test.fails.store(sm_one_allocation_in_four_fails);
  for (int i = 0; i < kOwn; ++i) {
    ordo_opr_push(e, oom_gpu_op, nullptr, nullptr, 0, &own[static_cast<size_t>(i)], 1, &o);
  }
  for (int i = 0; i < kChained; ++i) {  // readers and writers: pins for early release too
    const ordo_var* x = &shared[static_cast<size_t>(i % kShared)];
    const bool write = i % 3 == 0;
    ordo_opr_push(e, oom_gpu_op, nullptr, write ? nullptr : x, write ? 0 : 1, write ? x : nullptr,
                  write ? 1 : 0, &o);
  }
  const ordo_status all = ordo_wait_for_all_timeout(e, 30ull * 1000 * 1000 * 1000);
  StreamManager::alloc_fault_for_test.fails.store(nullptr);
  check(all == ORDO_OK || all == ORDO_ERR_OP_FAILED, "oom: the engine drains",
        ordo_last_error_message());
  int failed = 0;
  for (const ordo_var& x : own) {
    int32_t code = 0;
    ordo_var_get_error(e, x, &code, nullptr, 0);
    failed += code != 0 ? 1 : 0;
  }
  check(failed > 0 && failed < kOwn, "oom: some independent ops failed, the others ran",
        std::to_string(failed).c_str());
  check(g_sm_allocs_failed.load() > 0, "oom: allocations failed");
  ordo_engine_destroy(e);
  check(g_sim->live_events() == 0, "oom: destroy destroyed every event");
}

void early_release_tests() {
  test_early_consumer(ORDO_ENGINE_PER_DEVICE, "per_device");
  test_early_consumer(ORDO_ENGINE_POOLED, "pooled");
  test_early_consumer(ORDO_ENGINE_NAIVE, "naive");
  test_early_prepared();
  test_early_graph_launch();
  test_early_chain_of_3(ORDO_ENGINE_PER_DEVICE, "per_device");
  test_early_chain_of_3(ORDO_ENGINE_NAIVE, "naive");
  test_early_others_wait();
  test_early_war();
  test_early_switch_off();
  test_early_failing_producer();
  std::printf("early release: done\n");
  test_early_destroy_in_flight();
  const char* r = std::getenv("ORDO_GPU_SIM_ROUNDS");
  const int rounds = r && *r ? std::atoi(r) : 20;
  test_early_model(ORDO_ENGINE_PER_DEVICE, rounds);
  test_early_model(ORDO_ENGINE_POOLED, rounds / 2);
  test_early_model(ORDO_ENGINE_NAIVE, rounds / 2);
  std::printf("early release model: done\n");
  test_early_out_of_memory(rounds);
  std::printf("early release out of memory: done\n");
  test_stream_manager_out_of_memory();
  std::printf("stream manager out of memory: done\n");
}

}  // namespace

int main() {
  SimDevice sim(2);
  g_sim = &sim;
  test_device_count();
  std::printf("device count: done\n");
  ordo::set_device_api_for_tests(&sim);
  test_round_robin_and_info(ORDO_ENGINE_PER_DEVICE, "per_device");
  test_round_robin_and_info(ORDO_ENGINE_POOLED, "pooled");
  test_round_robin_and_info(ORDO_ENGINE_NAIVE, "naive");
  test_round_robin_and_info(ORDO_ENGINE_PER_DEVICE, "per_device, 3 streams", 3, 3);
  test_round_robin_and_info(ORDO_ENGINE_NAIVE, "naive, 1 stream", 1, 1);
  test_round_robin_and_info(ORDO_ENGINE_POOLED, "pooled, 64 streams", 64, 64);
  setenv("ORDO_GPU_STREAMS", "5", 1);
  test_round_robin_and_info(ORDO_ENGINE_PER_DEVICE, "per_device, ORDO_GPU_STREAMS=5", 0, 5);
  test_round_robin_and_info(ORDO_ENGINE_PER_DEVICE, "per_device, field beats env", 2, 2);
  unsetenv("ORDO_GPU_STREAMS");
  std::printf("round robin: done\n");
  test_copy_streams();
  std::printf("copy streams: done\n");
  test_event_completion();
  std::printf("event completion: done\n");
  test_injected_errors();
  std::printf("injected errors: done\n");
  test_sim_stream_wait_event();
  test_cross_stream_dependency(ORDO_ENGINE_PER_DEVICE, "per_device, waits off", -1);
  test_cross_stream_dependency(ORDO_ENGINE_POOLED, "pooled, waits off", -1);
  setenv("ORDO_GPU_STREAM_WAITS", "0", 1);
  test_cross_stream_dependency(ORDO_ENGINE_PER_DEVICE, "per_device, ORDO_GPU_STREAM_WAITS=0", 0);
  unsetenv("ORDO_GPU_STREAM_WAITS");
  test_cross_stream_failing_producer();
  std::printf("cross-stream dependencies, waits off: done\n");
  early_release_tests();
  std::printf("cross-stream dependencies: done\n");
  test_streams_made_by_the_first_gpu_op();
  std::printf("streams made by the first GPU op: done\n");
  test_shutdown_in_flight();
  std::printf("shutdown in flight: done\n");
  test_failed_start_in_a_forked_child();
  std::printf("failed start in a forked child: done\n");
  ordo::set_device_api_for_tests(nullptr);
  if (internal_test::failed()) {
    std::fprintf(stderr, "test_gpu_sim: %d check(s) failed\n", internal_test::failures());
    return 1;
  }
  std::printf("test_gpu_sim: all checks passed\n");
  return 0;
}
