/*
 * Real-GPU tests with real kernels (issue #25 item 7): vector adds on ordo's streams, H2D ->
 * kernel -> D2H chains over the copy streams, many concurrent ops over up to two GPUs, and event
 * completion (a wait returns only once the kernel's result is visible; a failing kernel or
 * launch fails its op with CUDA's message and poisons its vars). The kernels are in
 * tests/gpu_kernels.cu (nvcc); this program is built only when CUDA is (tests/meson.build), and
 * runs apart from the main suite because it links the CUDA runtime. Where ordo has no GPU
 * (ordo_device_count is 0: no driver, no device) every test is skipped with the reason a GPU
 * push gives.
 *
 * Callbacks never assert: they record what they saw into their task (read by the test thread
 * after the wait, which orders it) or count failures into atomics; the test thread asserts.
 * Host results are read right after ordo's wait with no CUDA call in between: the wait itself
 * must guarantee that the GPU's work (and the copy back) has finished.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpu_kernels.h"
#include "ordo/ordo.h"

TestSuite(gpu_kernels, .timeout = 120.0);

/* ------------------------------------------------------------------------------------------- */
/* Skipping without a GPU                                                                      */
/* ------------------------------------------------------------------------------------------- */

/* Counts its calls into *ud (an atomic_int): how often it ran, 0 included. */
static int32_t count_call(ordo_exec* exec, void* ud) {
  (void)exec;
  atomic_fetch_add((atomic_int*)ud, 1);
  return 0;
}

static char g_why[512];

/* The number of GPUs; 0 with g_why set from the ORDO_ERR_NO_DEVICE of a GPU push. */
static int32_t gpus_or_reason(void) {
  int32_t n = 0;
  cr_assert_eq(ordo_device_count(&n), ORDO_OK);
  if (n > 0) return n;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(NULL, &e), ORDO_OK, "%s", ordo_last_error_message());
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  atomic_int unused = 0;
  ordo_status s = ordo_opr_push(e, count_call, &unused, NULL, 0, NULL, 0, &o);
  snprintf(g_why, sizeof g_why, "%s",
           s == ORDO_ERR_NO_DEVICE ? ordo_last_error_message() : "GPU push was not NO_DEVICE");
  cr_assert_eq(s, ORDO_ERR_NO_DEVICE, "device count 0 but a GPU push gave %d", (int)s);
  ordo_engine_destroy(e);
  return 0;
}

#define NEED_GPU()                                                \
  do {                                                            \
    if (gpus_or_reason() == 0) cr_skip_test("no GPU: %s", g_why); \
  } while (0)

/* The GPUs a test spreads its work over: two when there are two or more, else the one. */
static int devices_used(void) {
  int32_t n = 0;
  cr_assert_eq(ordo_device_count(&n), ORDO_OK);
  return n >= 2 ? 2 : (int)n;
}

/* ------------------------------------------------------------------------------------------- */
/* Tasks: one op's work, and what its callback saw                                             */
/* ------------------------------------------------------------------------------------------- */

typedef enum { T_IOTA, T_ADD, T_AXPB, T_FILL, T_H2D, T_D2H } task_kind;

typedef struct {
  task_kind kind;
  float* x;       /* output (device memory; host memory for T_D2H) */
  const float* a; /* inputs: T_ADD a and b; T_H2D and T_D2H the source in a */
  const float* b;
  float p, q; /* T_IOTA x[i] = p * i + q; T_AXPB x = x * p + q; T_FILL x = p */
  int n;      /* elements */
  /* What the callback saw. */
  void* stream;
  int32_t device_type, device_id, prop;
  int status; /* the CUDA error of its launch or copy, 0 when it worked */
} gpu_task;

static atomic_int g_failed_calls;

static int32_t run_task(ordo_exec* exec, void* ud) {
  gpu_task* t = ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(exec, &info) != ORDO_OK) {
    atomic_fetch_add(&g_failed_calls, 1);
    return 1;
  }
  t->stream = info.stream;
  t->device_type = info.device_type;
  t->device_id = info.device_id;
  t->prop = info.prop;
  size_t bytes = (size_t)t->n * sizeof(float);
  switch (t->kind) {
    case T_IOTA:
      t->status = gk_iota(t->x, t->p, t->q, t->n, info.stream);
      break;
    case T_ADD:
      t->status = gk_vector_add(t->a, t->b, t->x, t->n, info.stream);
      break;
    case T_AXPB:
      t->status = gk_axpb(t->x, t->p, t->q, t->n, info.stream);
      break;
    case T_FILL:
      t->status = gk_fill(t->x, t->p, t->n, info.stream);
      break;
    case T_H2D:
      t->status = gk_memcpy_h2d_async(t->x, t->a, bytes, info.stream);
      break;
    case T_D2H:
      t->status = gk_memcpy_d2h_async(t->x, t->a, bytes, info.stream);
      break;
  }
  if (t->status != 0) atomic_fetch_add(&g_failed_calls, 1);
  return t->status;
}

/* Pushes t as a GPU op on `device` with property `prop`. */
static void push_task(ordo_engine* e, gpu_task* t, int device, int32_t prop, const ordo_var* reads,
                      size_t num_reads, const ordo_var* writes, size_t num_writes) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  o.device_id = device;
  o.prop = prop;
  cr_assert_eq(ordo_opr_push(e, run_task, t, reads, num_reads, writes, num_writes, &o), ORDO_OK,
               "%s", ordo_last_error_message());
}

/* The per_device engine: a compute group and one group per copy direction for each GPU. */
static ordo_engine* new_engine(void) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK, "%s", ordo_last_error_message());
  atomic_store(&g_failed_calls, 0);
  return e;
}

static void* device_alloc(int device, size_t bytes) {
  void* p = NULL;
  int rc = gk_malloc(device, &p, bytes);
  cr_assert_eq(rc, 0, "cudaMalloc of %zu bytes on GPU %d: %s", bytes, device, gk_error_string(rc));
  return p;
}

static void* pinned_alloc(size_t bytes) {
  void* p = NULL;
  int rc = gk_host_alloc(&p, bytes);
  cr_assert_eq(rc, 0, "cudaMallocHost of %zu bytes: %s", bytes, gk_error_string(rc));
  return p;
}

static void device_free(int device, void* p) {
  int rc = gk_free(device, p);
  cr_assert_eq(rc, 0, "cudaFree on GPU %d: %s", device, gk_error_string(rc));
}

static void pinned_free(void* p) {
  int rc = gk_host_free(p);
  cr_assert_eq(rc, 0, "cudaFreeHost: %s", gk_error_string(rc));
}

static ordo_var new_var(ordo_engine* e) {
  ordo_var v = 0;
  cr_assert_eq(ordo_var_new(e, &v), ORDO_OK, "%s", ordo_last_error_message());
  return v;
}

/* Push options for a GPU op on `device`. */
static ordo_push_opts gpu_opts(int device) {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  o.device_id = device;
  return o;
}

/* n int32s of pinned host memory mapped into every GPU (gk_host_alloc_mapped), zeroed. */
static int32_t* mapped_ints(size_t n) {
  int32_t* mem = NULL;
  int rc = gk_host_alloc_mapped((void**)&mem, n * sizeof(int32_t));
  cr_assert_eq(rc, 0, "cudaHostAlloc: %s", gk_error_string(rc));
  memset(mem, 0, n * sizeof(int32_t));
  return mem;
}

static void wait_all_ok(ordo_engine* e) {
  ordo_status s = ordo_wait_for_all(e);
  cr_assert_eq(s, ORDO_OK, "wait_for_all: %s (%s)", ordo_status_string(s),
               ordo_last_error_message());
  cr_assert_eq(atomic_load(&g_failed_calls), 0, "a CUDA call inside an op failed");
}

/* Whether stream s is one of streams[0..n). */
static int stream_in(void* s, void* const* streams, int n) {
  for (int i = 0; i < n; i++) {
    if (streams[i] == s) return 1;
  }
  return 0;
}

/* Adds s to the set streams[0..*n) (capacity cap); returns the new size. */
static int stream_add(void* s, void** streams, int* n, int cap) {
  if (!stream_in(s, streams, *n) && *n < cap) streams[(*n)++] = s;
  return *n;
}

/* Checks what a task's callback saw: a GPU op on `device` with property `prop` and a stream. */
static void expect_seen(const gpu_task* t, int device, int32_t prop) {
  cr_assert_eq(t->device_type, ORDO_DEVICE_GPU);
  cr_assert_eq(t->device_id, device, "op for GPU %d ran on GPU %d", device, t->device_id);
  cr_assert_eq(t->prop, prop);
  cr_assert_not_null(t->stream, "a GPU op got no stream");
}

/* ------------------------------------------------------------------------------------------- */
/* Vector add on the compute streams                                                           */
/* ------------------------------------------------------------------------------------------- */

#define ADD_OPS 32
#define ADD_N (1 << 16)

/* Per device, ADD_OPS independent chains: iota(a) and iota(b) (two ops), c = a + b, and c copied
 * back on the device-to-host stream. Every element checked on the host. */
Test(gpu_kernels, vector_add_on_streams) {
  NEED_GPU();
  int ndev = devices_used();
  ordo_engine* e = new_engine();
  size_t bytes = (size_t)ADD_N * sizeof(float);
  enum { PER = 4 }; /* tasks per chain */
  gpu_task* tasks = calloc((size_t)ndev * ADD_OPS * PER, sizeof *tasks);
  float** dev = calloc((size_t)ndev * ADD_OPS, sizeof *dev);
  float** host = calloc((size_t)ndev * ADD_OPS, sizeof *host);
  cr_assert(tasks && dev && host);
  for (int d = 0; d < ndev; d++) {
    for (int k = 0; k < ADD_OPS; k++) {
      int c = d * ADD_OPS + k;
      dev[c] = device_alloc(d, 3 * bytes); /* a, b, c */
      host[c] = pinned_alloc(bytes);
      memset(host[c], 0xff, bytes); /* NaN: an element never copied back fails the check */
      float *a = dev[c], *b = a + ADD_N, *out = b + ADD_N;
      ordo_var va = new_var(e), vb = new_var(e), vc = new_var(e), vh = new_var(e);
      gpu_task* t = &tasks[(size_t)c * PER];
      t[0] = (gpu_task){.kind = T_IOTA, .x = a, .p = 1.0f, .q = (float)k, .n = ADD_N};
      t[1] = (gpu_task){.kind = T_IOTA, .x = b, .p = 2.0f, .q = (float)(d * 1000), .n = ADD_N};
      t[2] = (gpu_task){.kind = T_ADD, .x = out, .a = a, .b = b, .n = ADD_N};
      t[3] = (gpu_task){.kind = T_D2H, .x = host[c], .a = out, .n = ADD_N};
      push_task(e, &t[0], d, ORDO_PROP_NORMAL, NULL, 0, &va, 1);
      push_task(e, &t[1], d, ORDO_PROP_NORMAL, NULL, 0, &vb, 1);
      ordo_var ab[2] = {va, vb};
      push_task(e, &t[2], d, ORDO_PROP_NORMAL, ab, 2, &vc, 1);
      push_task(e, &t[3], d, ORDO_PROP_COPY_FROM_DEVICE, &vc, 1, &vh, 1);
    }
  }
  wait_all_ok(e);
  for (int d = 0; d < ndev; d++) {
    void* compute[64];
    int ncompute = 0;
    for (int k = 0; k < ADD_OPS; k++) {
      int c = d * ADD_OPS + k;
      const gpu_task* t = &tasks[(size_t)c * PER];
      for (int j = 0; j < 3; j++) {
        expect_seen(&t[j], d, ORDO_PROP_NORMAL);
        stream_add(t[j].stream, compute, &ncompute, 64);
      }
      expect_seen(&t[3], d, ORDO_PROP_COPY_FROM_DEVICE);
      for (int i = 0; i < ADD_N; i++) {
        float want = 3.0f * (float)i + (float)k + (float)(d * 1000);
        cr_assert_eq(host[c][i], want, "GPU %d chain %d element %d: %g, want %g", d, k, i,
                     (double)host[c][i], (double)want);
      }
    }
    /* The compute ops went round robin over the GPU's compute streams. */
    cr_assert_geq(ncompute, 2, "GPU %d: %d ops ran on %d compute stream(s)", d, 3 * ADD_OPS,
                  ncompute);
    for (int k = 0; k < ADD_OPS; k++) {
      const gpu_task* t = &tasks[(size_t)(d * ADD_OPS + k) * PER];
      cr_assert(!stream_in(t[3].stream, compute, ncompute),
                "a device-to-host copy ran on a compute stream");
    }
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  for (int d = 0; d < ndev; d++) {
    for (int k = 0; k < ADD_OPS; k++) {
      device_free(d, dev[d * ADD_OPS + k]);
      pinned_free(host[d * ADD_OPS + k]);
    }
  }
  free(tasks);
  free(dev);
  free(host);
}

/* ------------------------------------------------------------------------------------------- */
/* H2D -> kernels -> D2H chains across streams                                                 */
/* ------------------------------------------------------------------------------------------- */

#define CHAINS 64
#define CHAIN_N (1 << 14)
#define CHAIN_ROUNDS 3

/* 64 buffers spread over the GPUs; each: uploaded on the host-to-device stream, CHAIN_ROUNDS
 * kernels (x = 2x + 1, then x = x + k) on the compute streams (round robin, so consecutive
 * kernels of one buffer usually run on different streams), downloaded on the device-to-host
 * stream. Pushed stage by stage over all buffers, so uploads, kernels and downloads of different
 * buffers overlap. Values stay small integers: every float operation is exact. */
Test(gpu_kernels, h2d_kernel_d2h_chains) {
  NEED_GPU();
  int ndev = devices_used();
  ordo_engine* e = new_engine();
  size_t bytes = (size_t)CHAIN_N * sizeof(float);
  enum { PER = 2 + 2 * CHAIN_ROUNDS };
  gpu_task* tasks = calloc((size_t)CHAINS * PER, sizeof *tasks);
  float *in[CHAINS], *out[CHAINS], *dev[CHAINS];
  ordo_var v[CHAINS], vout[CHAINS];
  cr_assert_not_null(tasks);
  for (int k = 0; k < CHAINS; k++) {
    int d = k % ndev;
    in[k] = pinned_alloc(bytes);
    out[k] = pinned_alloc(bytes);
    dev[k] = device_alloc(d, bytes);
    for (int i = 0; i < CHAIN_N; i++) in[k][i] = (float)((i * 7 + k) % 1000);
    memset(out[k], 0xff, bytes);
    v[k] = new_var(e);
    vout[k] = new_var(e);
    gpu_task* t = &tasks[(size_t)k * PER];
    t[0] = (gpu_task){.kind = T_H2D, .x = dev[k], .a = in[k], .n = CHAIN_N};
    for (int r = 0; r < CHAIN_ROUNDS; r++) {
      t[1 + 2 * r] = (gpu_task){.kind = T_AXPB, .x = dev[k], .p = 2.0f, .q = 1.0f, .n = CHAIN_N};
      t[2 + 2 * r] =
          (gpu_task){.kind = T_AXPB, .x = dev[k], .p = 1.0f, .q = (float)k, .n = CHAIN_N};
    }
    t[PER - 1] = (gpu_task){.kind = T_D2H, .x = out[k], .a = dev[k], .n = CHAIN_N};
  }
  for (int k = 0; k < CHAINS; k++) {
    push_task(e, &tasks[(size_t)k * PER], k % ndev, ORDO_PROP_COPY_TO_DEVICE, NULL, 0, &v[k], 1);
  }
  for (int j = 1; j < PER - 1; j++) {
    for (int k = 0; k < CHAINS; k++) {
      push_task(e, &tasks[(size_t)k * PER + j], k % ndev, ORDO_PROP_NORMAL, NULL, 0, &v[k], 1);
    }
  }
  for (int k = 0; k < CHAINS; k++) {
    push_task(e, &tasks[(size_t)k * PER + PER - 1], k % ndev, ORDO_PROP_COPY_FROM_DEVICE, &v[k], 1,
              &vout[k], 1);
  }
  wait_all_ok(e);

  for (int k = 0; k < CHAINS; k++) {
    int d = k % ndev;
    const gpu_task* t = &tasks[(size_t)k * PER];
    expect_seen(&t[0], d, ORDO_PROP_COPY_TO_DEVICE);
    expect_seen(&t[PER - 1], d, ORDO_PROP_COPY_FROM_DEVICE);
    cr_assert_neq(t[0].stream, t[PER - 1].stream, "uploads and downloads share a stream");
    for (int j = 1; j < PER - 1; j++) {
      expect_seen(&t[j], d, ORDO_PROP_NORMAL);
      cr_assert_neq(t[j].stream, t[0].stream, "a kernel ran on the upload stream");
      cr_assert_neq(t[j].stream, t[PER - 1].stream, "a kernel ran on the download stream");
    }
    for (int i = 0; i < CHAIN_N; i++) {
      float want = in[k][i];
      for (int r = 0; r < CHAIN_ROUNDS; r++) want = (want * 2.0f + 1.0f) + (float)k;
      cr_assert_eq(out[k][i], want, "chain %d (GPU %d) element %d: %g, want %g", k, d, i,
                   (double)out[k][i], (double)want);
    }
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  for (int k = 0; k < CHAINS; k++) {
    pinned_free(in[k]);
    pinned_free(out[k]);
    device_free(k % ndev, dev[k]);
  }
  free(tasks);
}

/* ------------------------------------------------------------------------------------------- */
/* Many concurrent ops over every GPU's streams                                                */
/* ------------------------------------------------------------------------------------------- */

#define MANY_OPS 1024 /* per device */
#define MANY_SEG 256  /* elements each op writes */

/* Per device: one op zeroes a buffer; MANY_OPS ops, all reading that op's var (so all released
 * at once by it) and each mutating its own var, fill their own segment with their number; one
 * download op reads all MANY_OPS vars. Every segment checked: a lost, doubled or misplaced op
 * shows. */
Test(gpu_kernels, many_concurrent_ops_all_devices) {
  NEED_GPU();
  int ndev = devices_used();
  ordo_engine* e = new_engine();
  size_t total = (size_t)MANY_OPS * MANY_SEG;
  gpu_task* tasks = calloc((size_t)ndev * (MANY_OPS + 2), sizeof *tasks);
  ordo_var* vars = calloc((size_t)MANY_OPS, sizeof *vars);
  float* dev[2] = {NULL, NULL};
  float* host[2] = {NULL, NULL};
  cr_assert(tasks && vars);
  for (int d = 0; d < ndev; d++) {
    dev[d] = device_alloc(d, total * sizeof(float));
    host[d] = pinned_alloc(total * sizeof(float));
    memset(host[d], 0xff, total * sizeof(float));
  }
  /* Pushed interleaved over the devices, so both GPUs' workers and streams are busy at once. */
  ordo_var zeroed[2], done[2];
  gpu_task* t = tasks;
  for (int d = 0; d < ndev; d++) {
    zeroed[d] = new_var(e);
    done[d] = new_var(e);
    *t = (gpu_task){.kind = T_FILL, .x = dev[d], .p = 0.0f, .n = (int)total};
    push_task(e, t++, d, ORDO_PROP_NORMAL, NULL, 0, &zeroed[d], 1);
  }
  ordo_var* dvars[2] = {vars, NULL};
  if (ndev == 2) {
    dvars[1] = calloc((size_t)MANY_OPS, sizeof *vars);
    cr_assert_not_null(dvars[1]);
  }
  for (int k = 0; k < MANY_OPS; k++) {
    for (int d = 0; d < ndev; d++) {
      dvars[d][k] = new_var(e);
      *t = (gpu_task){.kind = T_FILL,
                      .x = dev[d] + (size_t)k * MANY_SEG,
                      .p = (float)(k + 1 + d * MANY_OPS),
                      .n = MANY_SEG};
      push_task(e, t++, d, ORDO_PROP_NORMAL, &zeroed[d], 1, &dvars[d][k], 1);
    }
  }
  for (int d = 0; d < ndev; d++) {
    *t = (gpu_task){.kind = T_D2H, .x = host[d], .a = dev[d], .n = (int)total};
    push_task(e, t++, d, ORDO_PROP_COPY_FROM_DEVICE, dvars[d], MANY_OPS, &done[d], 1);
  }
  wait_all_ok(e);

  for (int d = 0; d < ndev; d++) {
    void* streams[64];
    int nstreams = 0;
    for (int k = 0; k < MANY_OPS; k++) {
      const gpu_task* op = &tasks[ndev + (size_t)k * ndev + d];
      expect_seen(op, d, ORDO_PROP_NORMAL);
      stream_add(op->stream, streams, &nstreams, 64);
      for (int i = 0; i < MANY_SEG; i++) {
        float got = host[d][(size_t)k * MANY_SEG + i];
        cr_assert_eq(got, (float)(k + 1 + d * MANY_OPS), "GPU %d op %d element %d: %g", d, k, i,
                     (double)got);
      }
    }
    cr_assert_geq(nstreams, 2, "GPU %d: %d ops on %d stream(s)", d, MANY_OPS, nstreams);
  }
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  for (int d = 0; d < ndev; d++) {
    device_free(d, dev[d]);
    pinned_free(host[d]);
  }
  free(dvars[1]);
  free(tasks);
  free(vars);
}

/* ------------------------------------------------------------------------------------------- */
/* Event completion                                                                            */
/* ------------------------------------------------------------------------------------------- */

#define SPIN_OPS 8
#define SPIN_NS 20000000ull /* 20 ms per kernel */

typedef struct {
  volatile int32_t* counter;
  volatile int32_t* mismatch;
  int32_t expect;
  uint64_t ns;      /* how long the kernel spins */
  void* stream;     /* the stream its callback got */
  double called_at; /* when its callback ran (now_s) */
} spin_task;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int32_t run_spin(ordo_exec* exec, void* ud) {
  spin_task* t = ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  t->called_at = now_s();
  if (ordo_exec_get_info(exec, &info) != ORDO_OK) return 1;
  t->stream = info.stream;
  int rc = gk_spin_then_bump(t->counter, t->mismatch, t->expect, t->ns, info.stream);
  if (rc != 0) atomic_fetch_add(&g_failed_calls, 1);
  return rc;
}

/* A chain of SPIN_OPS kernels on one var (alternating GPUs when there are two, and over the
 * compute streams), each spinning 20 ms and then bumping a counter in mapped host memory after
 * checking that the one before it had bumped it. ordo_wait_for_var must return only after the
 * last kernel's store: the host reads the counter right after the wait with no CUDA call. */
Test(gpu_kernels, wait_returns_after_the_kernel) {
  NEED_GPU();
  int ndev = devices_used();
  ordo_engine* e = new_engine();
  int32_t* mem = mapped_ints(2);
  volatile int32_t* counter = mem;
  volatile int32_t* mismatch = mem + 1;
  ordo_var v = new_var(e);
  spin_task tasks[SPIN_OPS];
  double t0 = now_s();
  for (int j = 0; j < SPIN_OPS; j++) {
    tasks[j] = (spin_task){.counter = counter, .mismatch = mismatch, .expect = j, .ns = SPIN_NS};
    ordo_push_opts o = gpu_opts(j % ndev);
    cr_assert_eq(ordo_opr_push(e, run_spin, &tasks[j], NULL, 0, &v, 1, &o), ORDO_OK, "%s",
                 ordo_last_error_message());
  }
  ordo_status s = ordo_wait_for_var(e, v);
  int32_t seen = *counter;
  double elapsed = now_s() - t0;
  cr_assert_eq(s, ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(seen, SPIN_OPS, "the wait returned with the counter at %d of %d", seen, SPIN_OPS);
  cr_assert_eq(*mismatch, 0, "a kernel ran before the one it depends on had finished");
  cr_assert_eq(atomic_load(&g_failed_calls), 0);
  /* The kernels ran one after another: the wait cannot have returned sooner. */
  cr_assert_geq(elapsed, 0.95 * SPIN_OPS * (double)SPIN_NS * 1e-9, "waited only %.3f s", elapsed);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  pinned_free(mem);
}

/* ------------------------------------------------------------------------------------------- */
/* Compute streams at once, early release, graphs of GPU ops                                   */
/* ------------------------------------------------------------------------------------------- */

/* Pushes a spin kernel of ns = 0 on its own var and waits for it: the first launch of a kernel
 * loads the test's module (lazy loading), which must not count in a timed test. */
static void warm_up_spin(ordo_engine* e, volatile int32_t* counter, volatile int32_t* mismatch) {
  spin_task warm = {.counter = counter, .mismatch = mismatch, .expect = 0, .ns = 0};
  ordo_var w = new_var(e);
  ordo_push_opts o = gpu_opts(0);
  cr_assert_eq(ordo_opr_push(e, run_spin, &warm, NULL, 0, &w, 1, &o), ORDO_OK, "%s",
               ordo_last_error_message());
  cr_assert_eq(ordo_wait_for_var(e, w), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(*counter, 1, "the warm-up kernel did not run");
}

#define OVERLAP_OPS 4
#define OVERLAP_NS 100000000ull /* 100 ms per kernel */

/* OVERLAP_OPS independent kernels of 100 ms on GPU 0 (a var each), with as many compute
 * streams: each runs on a stream of its own, all at the same time, so the wait returns after
 * about 100 ms, not 400. Fails if ordo's streams serialize (a blocking stream syncs with the
 * legacy default stream) or if a worker waits for an op's kernel before it launches the next
 * (SPEC §7: completion through events, no worker parked). */
Test(gpu_kernels, independent_kernels_overlap_on_the_compute_streams) {
  NEED_GPU();
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  cfg.gpu_compute_streams = OVERLAP_OPS;
  ordo_engine* e = NULL;
  cr_assert_eq(ordo_engine_create(&cfg, &e), ORDO_OK, "%s", ordo_last_error_message());
  atomic_store(&g_failed_calls, 0);
  int32_t* mem = mapped_ints(2 * OVERLAP_OPS + 2);
  warm_up_spin(e, mem + 2 * OVERLAP_OPS, mem + 2 * OVERLAP_OPS + 1);

  spin_task tasks[OVERLAP_OPS];
  ordo_var vars[OVERLAP_OPS];
  ordo_push_opts o = gpu_opts(0);
  double t0 = now_s();
  for (int k = 0; k < OVERLAP_OPS; k++) {
    vars[k] = new_var(e);
    tasks[k] = (spin_task){
        .counter = mem + k, .mismatch = mem + OVERLAP_OPS + k, .expect = 0, .ns = OVERLAP_NS};
    cr_assert_eq(ordo_opr_push(e, run_spin, &tasks[k], NULL, 0, &vars[k], 1, &o), ORDO_OK, "%s",
                 ordo_last_error_message());
  }
  wait_all_ok(e);
  double elapsed = now_s() - t0;

  void* streams[OVERLAP_OPS];
  int nstreams = 0;
  for (int k = 0; k < OVERLAP_OPS; k++) {
    cr_assert_eq(mem[k], 1, "kernel %d did not run", k);
    cr_assert_eq(mem[OVERLAP_OPS + k], 0);
    stream_add(tasks[k].stream, streams, &nstreams, OVERLAP_OPS);
  }
  cr_assert_eq(nstreams, OVERLAP_OPS, "%d ops on %d streams", OVERLAP_OPS, nstreams);
  const double one = (double)OVERLAP_NS * 1e-9;
  cr_assert_geq(elapsed, 0.95 * one, "waited only %.3f s", elapsed);
  cr_assert_lt(elapsed, 2.5 * one,
               "%d kernels of %.0f ms on %d streams took %.3f s (one after another: %.3f s): "
               "they did not run at the same time",
               OVERLAP_OPS, one * 1e3, nstreams, elapsed, OVERLAP_OPS * one);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  pinned_free(mem);
}

/* Early release (docs/ARCHITECTURE.md §7) on a real GPU: in a chain of GPU ops on one var on
 * one GPU, each op starts as soon as the op before it has *recorded* its event (its stream
 * waits for that event on the device), not once the kernel before it has finished. So every
 * callback has run long before the SPIN_OPS kernels of 20 ms are done, the ops use several
 * streams, and the kernels still run in order: each checks that the one before it had bumped
 * the counter, and the wait returns only after the last one. */
Test(gpu_kernels, same_gpu_chain_starts_before_the_kernels_finish) {
  NEED_GPU();
  ordo_engine* e = new_engine();
  int32_t* mem = mapped_ints(4);
  warm_up_spin(e, mem + 2, mem + 3);

  ordo_var v = new_var(e);
  spin_task tasks[SPIN_OPS];
  ordo_push_opts o = gpu_opts(0);
  double t0 = now_s();
  for (int j = 0; j < SPIN_OPS; j++) {
    tasks[j] = (spin_task){.counter = mem, .mismatch = mem + 1, .expect = j, .ns = SPIN_NS};
    cr_assert_eq(ordo_opr_push(e, run_spin, &tasks[j], NULL, 0, &v, 1, &o), ORDO_OK, "%s",
                 ordo_last_error_message());
  }
  ordo_status s = ordo_wait_for_var(e, v);
  int32_t seen = mem[0];
  double elapsed = now_s() - t0;
  cr_assert_eq(s, ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(seen, SPIN_OPS, "the wait returned with the counter at %d of %d", seen, SPIN_OPS);
  cr_assert_eq(mem[1], 0, "a kernel ran before the one it depends on had finished");
  cr_assert_eq(atomic_load(&g_failed_calls), 0);
  const double kernels = SPIN_OPS * (double)SPIN_NS * 1e-9;
  cr_assert_geq(elapsed, 0.95 * kernels, "waited only %.3f s", elapsed);

  double last_call = 0;
  void* streams[SPIN_OPS];
  int nstreams = 0;
  for (int j = 0; j < SPIN_OPS; j++) {
    if (tasks[j].called_at - t0 > last_call) last_call = tasks[j].called_at - t0;
    stream_add(tasks[j].stream, streams, &nstreams, SPIN_OPS);
  }
  cr_assert_geq(nstreams, 2, "the chain ran on %d stream(s)", nstreams);
  cr_assert_lt(last_call, 0.5 * kernels,
               "the last op's callback ran %.3f s after the first push, and the kernels take "
               "%.3f s: the ops waited for the kernels before them instead of starting early",
               last_call, kernels);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  pinned_free(mem);
}

#define GRAPH_LAUNCHES 20
#define GRAPH_N 4096

/* A graph of GPU ops replayed on a real GPU: a fill, two axpbs and a download of one buffer,
 * captured once (nothing runs at capture) and launched twice back to back in each of
 * GRAPH_LAUNCHES rounds (the second launch's fill waits for the first's download: write after
 * read). Every launch computes (1 * 3 + 1) * 2 = 8 in every element; an op run out of order
 * gives another number. */
Test(gpu_kernels, captured_gpu_graph_replays) {
  NEED_GPU();
  ordo_engine* e = new_engine();
  size_t bytes = GRAPH_N * sizeof(float);
  float* dev = device_alloc(0, bytes);
  float* host = pinned_alloc(bytes);
  ordo_var v = new_var(e), done = new_var(e);
  gpu_task fill = {.kind = T_FILL, .x = dev, .p = 1.0f, .n = GRAPH_N};
  gpu_task axpb1 = {.kind = T_AXPB, .x = dev, .p = 3.0f, .q = 1.0f, .n = GRAPH_N};
  gpu_task axpb2 = {.kind = T_AXPB, .x = dev, .p = 2.0f, .q = 0.0f, .n = GRAPH_N};
  gpu_task back = {.kind = T_D2H, .x = host, .a = dev, .n = GRAPH_N};
  cr_assert_eq(ordo_graph_begin_capture(e), ORDO_OK, "%s", ordo_last_error_message());
  push_task(e, &fill, 0, ORDO_PROP_NORMAL, NULL, 0, &v, 1);
  push_task(e, &axpb1, 0, ORDO_PROP_NORMAL, NULL, 0, &v, 1);
  push_task(e, &axpb2, 0, ORDO_PROP_NORMAL, NULL, 0, &v, 1);
  push_task(e, &back, 0, ORDO_PROP_COPY_FROM_DEVICE, &v, 1, &done, 1);
  ordo_graph* g = NULL;
  cr_assert_eq(ordo_graph_end_capture(e, &g), ORDO_OK, "%s", ordo_last_error_message());
  wait_all_ok(e);
  cr_assert_null(fill.stream, "a captured op ran at capture");

  for (int r = 0; r < GRAPH_LAUNCHES; r++) {
    memset(host, 0, bytes);
    cr_assert_eq(ordo_graph_launch(g), ORDO_OK, "%s", ordo_last_error_message());
    cr_assert_eq(ordo_graph_launch(g), ORDO_OK, "%s", ordo_last_error_message());
    ordo_status s = ordo_wait_for_var(e, done);
    cr_assert_eq(s, ORDO_OK, "round %d: %s", r, ordo_last_error_message());
    for (int i = 0; i < GRAPH_N; i++) {
      cr_assert_eq(host[i], 8.0f, "round %d element %d: %g", r, i, (double)host[i]);
    }
  }
  wait_all_ok(e);
  expect_seen(&fill, 0, ORDO_PROP_NORMAL);
  expect_seen(&axpb2, 0, ORDO_PROP_NORMAL);
  expect_seen(&back, 0, ORDO_PROP_COPY_FROM_DEVICE);
  cr_assert_eq(ordo_graph_destroy(g), ORDO_OK, "%s", ordo_last_error_message());
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  device_free(0, dev);
  pinned_free(host);
}

/* ------------------------------------------------------------------------------------------- */
/* A child forked after its parent used the GPU                                                */
/* ------------------------------------------------------------------------------------------- */

/* CUDA cannot be used in a child forked after its parent initialized it. There an engine is
 * still made and runs CPU ops (a GPU's streams are made by its first op, not at create), and a
 * GPU op is refused with NO_DEVICE and CUDA's message (which says the fork may be why), at every
 * try. Returns 0, or the number of
 * the check that failed (the child's stderr says more). */
static int forked_child_checks(void) {
  ordo_engine* e = NULL;
  if (ordo_engine_create(NULL, &e) != ORDO_OK) {
    fprintf(stderr, "child: ordo_engine_create: %s\n", ordo_last_error_message());
    return 1;
  }
  atomic_int ran = 0;
  ordo_var v = 0;
  if (ordo_var_new(e, &v) != ORDO_OK) return 2;
  if (ordo_opr_push(e, count_call, &ran, NULL, 0, &v, 1, NULL) != ORDO_OK ||
      ordo_wait_for_all(e) != ORDO_OK || atomic_load(&ran) != 1) {
    return 3;
  }
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  for (int i = 0; i < 2; i++) {
    ordo_status s = ordo_opr_push(e, count_call, &ran, NULL, 0, &v, 1, &o);
    const char* msg = ordo_last_error_message();
    fprintf(stderr, "child: GPU push %d: %s: %s\n", i, ordo_status_string(s), msg);
    if (s != ORDO_ERR_NO_DEVICE) return 4;
    if (!strstr(msg, "could not make GPU 0's streams") || !strstr(msg, "CUDA error") ||
        !strstr(msg, "fork() child")) {
      return 5;
    }
  }
  if (ordo_opr_push(e, count_call, &ran, NULL, 0, &v, 1, NULL) != ORDO_OK ||
      ordo_wait_for_all(e) != ORDO_OK || atomic_load(&ran) != 2) {
    return 6;
  }
  return ordo_engine_destroy(e) == ORDO_OK ? 0 : 7;
}

Test(gpu_kernels, forked_child_runs_cpu_ops_and_refuses_gpu_ops) {
  NEED_GPU();
  ordo_engine* e = new_engine();
  float* dev = device_alloc(0, 64 * sizeof(float));
  ordo_var v = new_var(e);
  gpu_task fill = {.kind = T_FILL, .x = dev, .p = 1.0f, .n = 64};
  push_task(e, &fill, 0, ORDO_PROP_NORMAL, NULL, 0, &v, 1); /* the parent uses the GPU first */
  wait_all_ok(e);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    alarm(20);
    _exit(forked_child_checks());
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  cr_assert(WIFEXITED(status), "the child died (signal %d)",
            WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  cr_assert_eq(WEXITSTATUS(status), 0, "the child's check %d failed (see its stderr)",
               WEXITSTATUS(status));
  /* The parent's engine and GPU are unharmed. */
  push_task(e, &fill, 0, ORDO_PROP_NORMAL, NULL, 0, &v, 1);
  wait_all_ok(e);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  device_free(0, dev);
}

static int32_t run_trap(ordo_exec* exec, void* ud) {
  (void)ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(exec, &info) != ORDO_OK) return 1;
  return gk_trap(info.stream);
}

/* A kernel that traps: its launch works, the work fails, and ordo learns it from the op's event.
 * The op fails with CUDA's message, its var is poisoned, the op after it is skipped uncalled.
 * The error is sticky (the GPU's context is unusable afterwards), which is why this test needs a
 * process of its own: Criterion runs each test in one. */
Test(gpu_kernels, failing_kernel_fails_its_op_with_cuda_message) {
  NEED_GPU();
  ordo_engine* e = new_engine();
  ordo_var v = new_var(e), w = new_var(e);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  o.name = "trap";
  cr_assert_eq(ordo_opr_push(e, run_trap, NULL, NULL, 0, &v, 1, &o), ORDO_OK);
  atomic_int later_ran = 0;
  cr_assert_eq(ordo_opr_push(e, count_call, &later_ran, &v, 1, &w, 1, NULL), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_ERR_OP_FAILED);
  const char* msg = ordo_last_error_message();
  cr_assert(strstr(msg, "CUDA error") && strstr(msg, "on GPU 0"), "wait's message: %s", msg);
  int32_t code = 0;
  char buf[512] = {0};
  cr_assert_eq(ordo_var_get_error(e, v, &code, buf, sizeof buf), ORDO_OK);
  cr_assert_eq(code, ORDO_ERR_OP_FAILED, "var error code %d (%s)", (int)code, buf);
  cr_assert(strstr(buf, "'trap'") && strstr(buf, "CUDA error"), "var error: %s", buf);
  cr_assert_eq(ordo_wait_for_var(e, w), ORDO_ERR_OP_FAILED,
               "the failure reaches the next op's var");
  cr_assert_eq(atomic_load(&later_ran), 0, "the op after the failed kernel was called");
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
}

/* The launch itself fails (4096 threads per block): the callback learns it at once and fails the
 * op with CUDA's code and message through ordo_complete (a GPU op that deferred has no event).
 * Which code depends on the CUDA version (cudaErrorInvalidConfiguration, 9, up to CUDA 12;
 * CUDA 13 on an H200 returned cudaErrorInvalidValue, 1): the test compares what the launch
 * returned. The error is not sticky: the GPU goes on working, as the next op shows. */
static atomic_int g_bad_launch_code;

static int32_t run_bad_launch(ordo_exec* exec, void* ud) {
  (void)ud;
  ordo_exec_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(exec, &info) != ORDO_OK) return 1;
  int rc = gk_bad_launch(info.stream);
  atomic_store(&g_bad_launch_code, rc);
  if (rc == 0) return 0; /* the test sees the var without an error, and fails */
  ordo_completion c = 0;
  if (ordo_exec_defer(exec, &c) != ORDO_OK) return rc;
  ordo_complete(c, rc, gk_error_string(rc));
  return 0; /* ignored after a defer */
}

Test(gpu_kernels, bad_launch_fails_its_op_with_cuda_message) {
  NEED_GPU();
  ordo_engine* e = new_engine();
  ordo_var v = new_var(e), w = new_var(e), ok = new_var(e);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  o.name = "bad launch";
  cr_assert_eq(ordo_opr_push(e, run_bad_launch, NULL, NULL, 0, &v, 1, &o), ORDO_OK);
  atomic_int later_ran = 0;
  o.name = "after it";
  cr_assert_eq(ordo_opr_push(e, count_call, &later_ran, &v, 1, &w, 1, &o), ORDO_OK);
  cr_assert_eq(ordo_wait_for_var(e, v), ORDO_ERR_OP_FAILED);
  int32_t code = 0;
  char buf[512] = {0};
  cr_assert_eq(ordo_var_get_error(e, v, &code, buf, sizeof buf), ORDO_OK);
  const int launch_code = atomic_load(&g_bad_launch_code);
  cr_assert_neq(launch_code, 0, "a launch of 4096 threads per block succeeded");
  cr_assert_eq(code, launch_code, "var error code %d (%s), the launch returned %d", (int)code, buf,
               launch_code);
  cr_assert(strstr(buf, gk_error_string(launch_code)), "var error: %s", buf);
  cr_assert_eq(ordo_wait_for_var(e, w), ORDO_ERR_OP_FAILED);
  cr_assert_eq(atomic_load(&later_ran), 0, "a GPU op after the failed launch was called");

  /* The GPU still works: a kernel and its download on other vars. */
  float* dev = device_alloc(0, 64 * sizeof(float));
  float* host = pinned_alloc(64 * sizeof(float));
  memset(host, 0, 64 * sizeof(float));
  ordo_var done = new_var(e);
  gpu_task fill = {.kind = T_FILL, .x = dev, .p = 42.0f, .n = 64};
  gpu_task back = {.kind = T_D2H, .x = host, .a = dev, .n = 64};
  push_task(e, &fill, 0, ORDO_PROP_NORMAL, NULL, 0, &ok, 1);
  push_task(e, &back, 0, ORDO_PROP_COPY_FROM_DEVICE, &ok, 1, &done, 1);
  cr_assert_eq(ordo_wait_for_var(e, done), ORDO_OK, "%s", ordo_last_error_message());
  for (int i = 0; i < 64; i++) cr_assert_eq(host[i], 42.0f);
  cr_assert_eq(ordo_engine_destroy(e), ORDO_OK);
  device_free(0, dev);
  pinned_free(host);
}
