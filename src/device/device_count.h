// How many GPUs this library can drive, and why none when there are none (SPEC §7): built
// without CUDA, no driver, no device. The seam where per-GPU worker groups and stream managers
// attach (engine/device_table.*).
#pragma once

#include <cstdint>

namespace ordo {

class DeviceApi;

// The device count of `api` (nullptr: 0), at most kMaxGpus; `why` (may be nullptr) gets a static
// sentence when it is 0.
int32_t device_count(DeviceApi* api, const char** why);
// The same for the backend new engines use (device_api()).
int32_t device_count();

constexpr int32_t kMaxGpus = 16;

}  // namespace ordo
