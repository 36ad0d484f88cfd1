// How many GPUs this library can drive. The seam where per-GPU worker groups and stream
// managers attach (SPEC §7); builds without CUDA have none.
#pragma once

#include <cstdint>

namespace ordo {

int32_t device_count();

}  // namespace ordo
