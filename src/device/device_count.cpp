#include "device/device_count.h"

namespace ordo {

// This build has no CUDA backend yet (meson option `cuda` is reserved), so there is no GPU to
// use, whatever the machine has. A CUDA build will ask cudaGetDeviceCount here and treat
// "no driver" errors as 0 devices.
int32_t device_count() {
  return 0;
}

}  // namespace ordo
