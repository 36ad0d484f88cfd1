// The CUDA backend of DeviceApi. The CUDA runtime is loaded at run time (dlopen of
// libcudart.so.<major> of the toolkit ordo was built with), not linked: libcudart_static.a
// brings 8 KB of initial-exec thread-locals (4 KB aligned), which no dlopen'ed library may have
// (glibc's static TLS surplus is 1,664 bytes: Python's ctypes failed to load such a libordo.so
// with "cannot allocate memory in static TLS block"; tests/check_so_limits.sh). So libordo.so
// needs nothing of CUDA to load, and where the runtime, the driver or a GPU is missing the count
// is 0 with the reason. Compiled only when the meson option `cuda` found the toolkit's headers.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "device/device_api.h"

namespace ordo {

namespace {

#define ORDO_CUDART_FNS(X)     \
  X(cudaGetDeviceCount)        \
  X(cudaSetDevice)             \
  X(cudaStreamCreateWithFlags) \
  X(cudaStreamDestroy)         \
  X(cudaEventCreateWithFlags)  \
  X(cudaEventDestroy)          \
  X(cudaEventRecord)           \
  X(cudaEventQuery)            \
  X(cudaStreamWaitEvent)       \
  X(cudaLaunchHostFunc)        \
  X(cudaGetLastError)          \
  X(cudaGetErrorName)          \
  X(cudaGetErrorString)

struct Cudart {
#define ORDO_CUDART_PTR(name) decltype(&::name) name = nullptr;
  ORDO_CUDART_FNS(ORDO_CUDART_PTR)
#undef ORDO_CUDART_PTR
};

class CudaDevice final : public DeviceApi {
 public:
  CudaDevice() { probe(); }
  int32_t device_count(const char** why) override {
    if (count_ == 0 && why) *why = why_;
    return count_;
  }
  int set_device(int32_t device) override { return rt_.cudaSetDevice(device); }
  int stream_create(void** out) override {
    cudaStream_t s = nullptr;
    cudaError_t e = rt_.cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    *out = s;
    return e;
  }
  int stream_destroy(void* stream) override {
    return rt_.cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  }
  int event_create(void** out) override {
    cudaEvent_t ev = nullptr;
    cudaError_t e = rt_.cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    *out = ev;
    return e;
  }
  int event_destroy(void* event) override {
    return rt_.cudaEventDestroy(static_cast<cudaEvent_t>(event));
  }
  int event_record(void* event, void* stream) override {
    return rt_.cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream));
  }
  int event_query(void* event) override {
    return rt_.cudaEventQuery(static_cast<cudaEvent_t>(event));
  }
  int stream_wait_event(void* stream, void* event) override {
    return rt_.cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                   static_cast<cudaEvent_t>(event), 0);
  }
  int launch_host_func(void* stream, void (*fn)(void*), void* arg) override {
    return rt_.cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, arg);
  }
  void clear_error() override { (void)rt_.cudaGetLastError(); }
  const char* error_name(int code) override {
    return rt_.cudaGetErrorName(static_cast<cudaError_t>(code));
  }
  const char* error_string(int code) override {
    return rt_.cudaGetErrorString(static_cast<cudaError_t>(code));
  }

 private:
  // Loads the runtime and asks for the device count, once: the answer does not change while the
  // process lives. Every other call is made only with a count above 0.
  void probe() {
    char soname[32];
    std::snprintf(soname, sizeof soname, "libcudart.so.%d", CUDART_VERSION / 1000);
    void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    // A toolkit that is not registered with the loader (no ldconfig entry, no LD_LIBRARY_PATH)
    // is found where the user says it lives: $CUDA_HOME/lib64.
    const char* home = std::getenv("CUDA_HOME");
    if (!lib && home && *home) {
      char path[512];
      std::snprintf(path, sizeof path, "%s/lib64/%s", home, soname);
      lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
      std::snprintf(why_buf_, sizeof why_buf_,
                    "the CUDA runtime library (%s) was found neither on the loader's path nor "
                    "in $CUDA_HOME/lib64",
                    soname);
      why_ = why_buf_;
      return;
    }
#define ORDO_CUDART_SYM(name)                                                    \
  rt_.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name));             \
  if (!rt_.name) {                                                               \
    why_ = "the CUDA runtime library found lacks " #name " (too old a version)"; \
    return;                                                                      \
  }
    ORDO_CUDART_FNS(ORDO_CUDART_SYM)
#undef ORDO_CUDART_SYM
    int n = 0;  // cudaGetDeviceCount leaves it unwritten when it fails (ABI.md §5)
    switch (rt_.cudaGetDeviceCount(&n)) {
      case cudaSuccess:
        count_ = n;
        why_ = "the CUDA runtime found no GPU";
        return;
      case cudaErrorNoDevice:
        why_ = "no CUDA-capable GPU was found (cudaErrorNoDevice)";
        break;
      case cudaErrorInsufficientDriver:
        why_ =
            "no usable CUDA driver: none is installed, or it is older than the CUDA runtime "
            "(cudaErrorInsufficientDriver)";
        break;
      case cudaErrorStubLibrary:
        why_ =
            "the CUDA driver found is the toolkit's stub library, not a real driver "
            "(cudaErrorStubLibrary)";
        break;
      default:
        why_ = "the CUDA runtime could not be initialized (cudaGetDeviceCount failed)";
        break;
    }
    (void)rt_.cudaGetLastError();
  }

  Cudart rt_;
  int32_t count_ = 0;
  const char* why_ = nullptr;
  char why_buf_[256] = {};
};

}  // namespace

DeviceApi* cuda_device_api() {
  // Never destroyed: engines may outlive exit. Made on first use (not at load time).
  static CudaDevice* const api = new CudaDevice;
  return api;
}

}  // namespace ordo
