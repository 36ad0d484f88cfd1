#include "device/device_count.h"

#include <atomic>

#include "device/device_api.h"

namespace ordo {

namespace {
std::atomic<DeviceApi*> g_test_api{nullptr};
}  // namespace

DeviceApi* device_api() {
  if (DeviceApi* api = g_test_api.load(std::memory_order_acquire)) return api;
  return cuda_device_api();
}

void set_device_api_for_tests(DeviceApi* api) {
  g_test_api.store(api, std::memory_order_release);
}

#ifndef ORDO_WITH_CUDA
DeviceApi* cuda_device_api() {
  return nullptr;
}
#endif

int32_t device_count(DeviceApi* api, const char** why) {
  const char* reason = "this build of ordo has no CUDA support (built without the CUDA toolkit)";
  int32_t n = api ? api->device_count(&reason) : 0;
  if (n > kMaxGpus) n = kMaxGpus;
  if (n < 0) n = 0;
  if (why) *why = n == 0 ? reason : nullptr;
  return n;
}

int32_t device_count() {
  return device_count(device_api(), nullptr);
}

}  // namespace ordo
