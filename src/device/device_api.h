// DeviceApi: the CUDA calls the engine makes, behind one small interface, so that the stream
// manager and the engine's GPU path run the same code on a real GPU (cuda_device.cpp, built when
// the meson option `cuda` finds the toolkit) and, in the tests only, on a host-thread simulation
// of streams and events (tests/internal/sim_device.*, installed with set_device_api_for_tests;
// never selectable by users: the hook is not exported).
//
// Streams and events are opaque pointers (cudaStream_t and cudaEvent_t on CUDA). Every call
// returns 0 on success or the backend's error code (a cudaError_t on CUDA), which error_string
// turns into the backend's own message.
#pragma once

#include <cstdint>

namespace ordo {

class DeviceApi {
 public:
  // event_query's answer while the work before the event has not finished (cudaErrorNotReady
  // on CUDA: 600).
  static constexpr int kNotReady = 600;
  // What the engine reports when host memory ran out around a device call
  // (cudaErrorMemoryAllocation on CUDA: 2), so that the op fails with the backend's "out of memory"
  // like any device error.
  static constexpr int kOutOfMemory = 2;

  virtual ~DeviceApi() = default;
  // The number of devices, or 0 with `why` set to a static sentence saying why.
  virtual int32_t device_count(const char** why) = 0;
  // Makes `device` the calling thread's current device.
  virtual int set_device(int32_t device) = 0;
  // Streams of the calling thread's current device (non-blocking with respect to the legacy
  // default stream on CUDA).
  virtual int stream_create(void** out) = 0;
  virtual int stream_destroy(void* stream) = 0;
  // Events without timing (the cheapest kind on CUDA).
  virtual int event_create(void** out) = 0;
  virtual int event_destroy(void* event) = 0;
  virtual int event_record(void* event, void* stream) = 0;
  // 0: everything enqueued before the event's last record has finished; kNotReady: not yet;
  // anything else: an error (for CUDA, also an error of the work itself, sticky or not).
  virtual int event_query(void* event) = 0;
  virtual int stream_wait_event(void* stream, void* event) = 0;
  // fn(arg) runs on a backend thread once the stream reaches it; fn must make no device call.
  virtual int launch_host_func(void* stream, void (*fn)(void*), void* arg) = 0;
  // Clears a non-sticky error the backend remembers for this thread (cudaGetLastError).
  virtual void clear_error() = 0;
  // The backend's name and message for `code` (static strings).
  virtual const char* error_name(int code) = 0;
  virtual const char* error_string(int code) = 0;
};

// The backend engines created from now on use: the test hook's when one is installed, else the
// CUDA one in a CUDA build, else nullptr (no devices).
DeviceApi* device_api();
// For tests only (tests/internal/): installs `api` (nullptr: back to the build's own backend).
// Engines created before keep the backend they started with.
void set_device_api_for_tests(DeviceApi* api);
// The CUDA backend (cuda_device.cpp), or nullptr in a build without CUDA.
DeviceApi* cuda_device_api();

}  // namespace ordo
