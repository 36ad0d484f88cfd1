/*
 * gpu_kernels.h: the real-GPU tests' CUDA code (tests/gpu_kernels.cu, compiled by nvcc), behind
 * plain C functions so that the Criterion tests (tests/test_gpu_kernels.c) stay C. Every function
 * returns a cudaError_t as int: 0 for success. Streams are ordo's (ordo_exec_info.stream), passed
 * as void*. Launches never synchronize: the caller's GPU op returns and ordo completes it when the
 * stream reaches the event it records.
 *
 * Linked into the test programs only, with the shared cudart that libordo.so dlopens (one CUDA
 * runtime in the process); never into libordo.so.
 */
#ifndef ORDO_TESTS_GPU_KERNELS_H
#define ORDO_TESTS_GPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[i] = a * i + b for i < n. */
int gk_iota(float* x, float a, float b, int n, void* stream);
/* c[i] = a[i] + b[i] for i < n. */
int gk_vector_add(const float* a, const float* b, float* c, int n, void* stream);
/* x[i] = x[i] * a + b for i < n. */
int gk_axpb(float* x, float a, float b, int n, void* stream);
/* x[i] = v for i < n. */
int gk_fill(float* x, float v, int n, void* stream);
/* An empty kernel: one block of one thread. */
int gk_empty(void* stream);
/* One thread: spins about `ns` nanoseconds (the GPU's global timer), then checks that *counter
 * holds `expect` (else sets *mismatch to 1) and stores expect + 1 into it. counter and mismatch
 * are mapped host memory (gk_host_alloc_mapped), so the host sees them with no CUDA call. */
int gk_spin_then_bump(volatile int32_t* counter, volatile int32_t* mismatch, int32_t expect,
                      uint64_t ns, void* stream);
/* A kernel that traps: the launch succeeds, the work fails (cudaErrorLaunchFailure, sticky:
 * the context is unusable afterwards, so only in a test process of its own). */
int gk_trap(void* stream);
/* A launch with 4096 threads per block, above every GPU's 1024: the launch itself fails, not
 * sticky (cudaErrorInvalidConfiguration up to CUDA 12; CUDA 13 on an H200 gave
 * cudaErrorInvalidValue). Returns that error. */
int gk_bad_launch(void* stream);

/* Memory. gk_malloc makes `device` current first. */
int gk_malloc(int device, void** p, size_t bytes);
int gk_free(int device, void* p);
/* Pinned host memory, so that the copies on ordo's copy streams are really asynchronous. */
int gk_host_alloc(void** p, size_t bytes);
int gk_host_free(void* p);
/* Pinned host memory mapped into every device's address space (UVA: the same pointer). */
int gk_host_alloc_mapped(void** p, size_t bytes);
int gk_memcpy_h2d_async(void* dst, const void* src, size_t bytes, void* stream);
int gk_memcpy_d2h_async(void* dst, const void* src, size_t bytes, void* stream);

/* cudaGetErrorString's message for a code (static). */
const char* gk_error_string(int code);

#ifdef __cplusplus
}
#endif

#endif /* ORDO_TESTS_GPU_KERNELS_H */
