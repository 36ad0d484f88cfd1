// The real-GPU tests' kernels and CUDA calls (declared in gpu_kernels.h). Compiled by nvcc
// (tests/meson.build), linked into the test programs with the shared cudart.
#include <cuda_runtime.h>

#include "gpu_kernels.h"

namespace {

constexpr int kBlock = 256;

int blocks_for(int n) {
  return (n + kBlock - 1) / kBlock;
}

// A launch's own error (bad configuration, no kernel image for this GPU) is reported by
// cudaGetLastError right after it, and cleared by that call so the next caller does not see it.
int launched() {
  return static_cast<int>(cudaGetLastError());
}

__global__ void iota_kernel(float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * static_cast<float>(i) + b;
}

__global__ void vector_add_kernel(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void axpb_kernel(float* x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}

__global__ void fill_kernel(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

__global__ void empty_kernel() {}

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_then_bump_kernel(volatile int32_t* counter, volatile int32_t* mismatch,
                                      int32_t expect, uint64_t ns) {
  const uint64_t start = global_ns();
  while (global_ns() - start < ns) __nanosleep(1000);
  if (*counter != expect) *mismatch = 1;
  *counter = expect + 1;
  // Makes the store visible to the host before the kernel's completion is (the event after it).
  __threadfence_system();
}

__global__ void trap_kernel() {
  __trap();
}

}  // namespace

extern "C" {

int gk_iota(float* x, float a, float b, int n, void* stream) {
  iota_kernel<<<blocks_for(n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(x, a, b, n);
  return launched();
}

int gk_vector_add(const float* a, const float* b, float* c, int n, void* stream) {
  vector_add_kernel<<<blocks_for(n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(a, b, c, n);
  return launched();
}

int gk_axpb(float* x, float a, float b, int n, void* stream) {
  axpb_kernel<<<blocks_for(n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(x, a, b, n);
  return launched();
}

int gk_fill(float* x, float v, int n, void* stream) {
  fill_kernel<<<blocks_for(n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(x, v, n);
  return launched();
}

int gk_empty(void* stream) {
  empty_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>();
  return launched();
}

int gk_spin_then_bump(volatile int32_t* counter, volatile int32_t* mismatch, int32_t expect,
                      uint64_t ns, void* stream) {
  spin_then_bump_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(counter, mismatch, expect,
                                                                        ns);
  return launched();
}

int gk_trap(void* stream) {
  trap_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>();
  return launched();
}

int gk_bad_launch(void* stream) {
  empty_kernel<<<1, 4096, 0, static_cast<cudaStream_t>(stream)>>>();
  return launched();
}

int gk_malloc(int device, void** p, size_t bytes) {
  *p = nullptr;
  if (cudaError_t e = cudaSetDevice(device)) return static_cast<int>(e);
  return static_cast<int>(cudaMalloc(p, bytes));
}

int gk_free(int device, void* p) {
  if (cudaError_t e = cudaSetDevice(device)) return static_cast<int>(e);
  return static_cast<int>(cudaFree(p));
}

int gk_host_alloc(void** p, size_t bytes) {
  *p = nullptr;
  return static_cast<int>(cudaMallocHost(p, bytes));
}

int gk_host_free(void* p) {
  return static_cast<int>(cudaFreeHost(p));
}

int gk_host_alloc_mapped(void** p, size_t bytes) {
  *p = nullptr;
  // Portable: pinned for every device, not only the current one. With unified addressing (every
  // 64-bit platform CUDA 13 supports) the device pointer is the host pointer.
  return static_cast<int>(cudaHostAlloc(p, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
}

int gk_memcpy_h2d_async(void* dst, const void* src, size_t bytes, void* stream) {
  return static_cast<int>(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)));
}

int gk_memcpy_d2h_async(void* dst, const void* src, size_t bytes, void* stream) {
  return static_cast<int>(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)));
}

const char* gk_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

}  // extern "C"
