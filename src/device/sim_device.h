// SimDevice: a host-thread simulation of CUDA streams and events, for the tests only (built into
// a test-only static library, src/meson.build; installed with set_device_api_for_tests, which
// libordo.so does not export). Each stream is a FIFO run by a thread of its own; an event fires
// when its stream reaches its record; a wait-event blocks its stream until the event fires; a
// host func runs on the stream's thread. Tests put "kernels" on a stream (launch), and inject
// errors: a kernel that fails (its error is reported by the next event its stream reaches, as an
// asynchronous CUDA error is), or the next call of a kind failing at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "device/device_api.h"

namespace ordo {

class SimDevice final : public DeviceApi {
 public:
  // Error codes the simulation reports (CUDA's numbers, so messages read alike).
  static constexpr int kErrInvalidValue = 1;
  static constexpr int kErrLaunchFailure = 719;

  enum class Call { kSetDevice, kEventRecord, kEventQuery, kStreamCreate };

  explicit SimDevice(int32_t devices);
  ~SimDevice() override;

  int32_t device_count(const char** why) override;
  int set_device(int32_t device) override;
  int stream_create(void** out) override;
  int stream_destroy(void* stream) override;
  int event_create(void** out) override;
  int event_destroy(void* event) override;
  int event_record(void* event, void* stream) override;
  int event_query(void* event) override;
  int stream_wait_event(void* stream, void* event) override;
  int launch_host_func(void* stream, void (*fn)(void*), void* arg) override;
  void clear_error() override {}
  const char* error_name(int code) override;
  const char* error_string(int code) override;

  // ---- for the tests ----
  // A kernel: fn runs on the stream's thread when the stream reaches it; a non-zero `error` is
  // then reported by the next event the stream reaches.
  void launch(void* stream, std::function<void()> fn, int error = 0);
  // The next call of this kind fails with `code` (once).
  void fail_next(Call call, int code);
  // The calling thread's current device (-1: never set).
  static int32_t current_device();
  // The device a stream was created on (-1: not a stream of this simulation).
  int32_t device_of(void* stream);
  // Streams created and not destroyed; events created and not destroyed.
  size_t live_streams();
  size_t live_events();

 private:
  struct Event;
  struct Stream;
  struct Item;
  int take_failure(Call call);
  void run_stream(Stream* s);

  const int32_t devices_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Event>> events_;
  int fail_code_[4] = {0, 0, 0, 0};
};

}  // namespace ordo
