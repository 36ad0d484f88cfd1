// gpu_cholesky: the tiled Cholesky of `make run` (examples/cholesky.c) on a GPU, through ordo.
// Same matrix, tiling and ops in the same order (potrf(k), trsm(i,k), syrk(i,k), gemm(i,j,k),
// right-looking, lower, A = L L^T; examples/cholesky_common.h has the table), each tile an ordo
// var; the ops are GPU ops whose callbacks enqueue a cuBLAS (dtrsm, dsyrk, dgemm) or cuSOLVER
// (dpotrf) call on the stream ordo gives them, and ordo completes each op when its event fires.
// Uploads and downloads of the tiles are ops too, with the copy properties, on ordo's
// host-to-device and device-to-host streams.
//
// Every stream gets its own cuBLAS and cuSOLVER handles (bound to it once, by cublasSetStream and
// cusolverDnSetStream) and its own dpotrf workspace, created the first time an op runs on it:
// work on one stream runs in order, so nothing on one stream can overwrite what another op of
// that stream still uses, and no op ever rebinds a handle another thread is enqueueing with.
// Each potrf(k) writes its devInfo to its own slot, read once the factorization is done.
//
// Reported: the factorization's time with the tiles already on the GPU (the median of --reps),
// the same with uploads, factorization and downloads pushed as one graph, and a single
// cusolverDnDpotrf on the whole matrix, on the same GPU; then ||A - L L^T||_F / ||A||_F (L L^T by
// one cublasDsyrk, the norms on the host), which must stay under 30 n eps as in `make run`.
//
// Usage: gpu_cholesky [--n N] [--tile T] [--reps R] [--warmup W] [--device D] [--no-check]
// Defaults: N 16384, tile 1024 (GPU kernels need large tiles to outweigh a host round trip per
// dependency: docs/ARCHITECTURE.md §7), 3 timed runs after 1 warm-up, GPU 0.
// Without a GPU (ordo_device_count 0) it prints "no GPU: <the reason ordo gives>" and exits 0.
// Exit status: 1 when the check fails or a call or an op fails.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <ordo/ordo.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char* what, const std::string& why) {
  std::fflush(stdout);
  std::fprintf(stderr, "gpu_cholesky: %s: %s\n", what, why.c_str());
  std::exit(1);
}

std::string cuda_message(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}
std::string cublas_message(cublasStatus_t s) {
  return std::string(cublasGetStatusName(s)) + ": " + cublasGetStatusString(s);
}
std::string cusolver_message(cusolverStatus_t s) {
  return "cusolverStatus_t " + std::to_string(static_cast<int>(s));
}

#define CUDA_CHECK(call)                                 \
  do {                                                   \
    cudaError_t e_ = (call);                             \
    if (e_ != cudaSuccess) die(#call, cuda_message(e_)); \
  } while (0)
#define CUBLAS_CHECK(call)                                           \
  do {                                                               \
    cublasStatus_t s_ = (call);                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) die(#call, cublas_message(s_)); \
  } while (0)
#define CUSOLVER_CHECK(call)                                             \
  do {                                                                   \
    cusolverStatus_t s_ = (call);                                        \
    if (s_ != CUSOLVER_STATUS_SUCCESS) die(#call, cusolver_message(s_)); \
  } while (0)
#define ORDO_CHECK(call)                                                                        \
  do {                                                                                          \
    ordo_status s_ = (call);                                                                    \
    if (s_ != ORDO_OK)                                                                          \
      die(#call, std::string(ordo_status_string(s_)) + " (" + ordo_last_error_message() + ")"); \
  } while (0)

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// n^3/3, the conventional Cholesky flop count (as cholesky_common.h's chol_gflops).
double gflops(int n, double seconds) {
  return static_cast<double>(n) * n * n / 3.0 / seconds * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Entry (r, c) of the test matrix: cholesky_common.h's chol_entry, copied (that header is C11,
// which nvcc's C++ does not take), so that this program factors the matrix `make run` does.
double chol_entry(int n, int r, int c) {
  uint64_t lo = static_cast<uint64_t>(r < c ? r : c), hi = static_cast<uint64_t>(r < c ? c : r);
  uint64_t x = (hi << 32 | lo) + 0x9E3779B97F4A7C15ull;  // splitmix64
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  double u = static_cast<double>(x >> 11) * 0x1.0p-53;
  return r == c ? u + n : u;
}

struct Args {
  int n = 16384, tile = 1024, reps = 3, warmup = 1, device = 0;
  bool check = true;
};

[[noreturn]] void usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [--n N] [--tile T] [--reps R] [--warmup W] [--device D] [--no-check]\n",
               prog);
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    const char* f = argv[i];
    if (!std::strcmp(f, "--no-check")) {
      a.check = false;
      continue;
    }
    int* num = !std::strcmp(f, "--n")        ? &a.n
               : !std::strcmp(f, "--tile")   ? &a.tile
               : !std::strcmp(f, "--reps")   ? &a.reps
               : !std::strcmp(f, "--warmup") ? &a.warmup
               : !std::strcmp(f, "--device") ? &a.device
                                             : nullptr;
    if (!num || i + 1 >= argc) usage(argv[0]);
    char* end = nullptr;
    long v = std::strtol(argv[++i], &end, 10);
    long min = (num == &a.warmup || num == &a.device) ? 0 : 1;
    if (!*argv[i] || *end || v < min || v > 1000000) usage(argv[0]);
    *num = static_cast<int>(v);
  }
  if (a.tile > a.n) a.tile = a.n;
  return a;
}

// ---------------------------------------------------------------------------------------------
// The tiled matrix: lower tiles, column-major, leading dimension = rows, each in pinned host
// memory (so the copy ops really run asynchronously) and in device memory.
// ---------------------------------------------------------------------------------------------

struct TiledMatrix {
  int n = 0, tile = 0, nt = 0;
  std::vector<size_t> offset;  // element offset of tile (i, j) at [i * nt + j], i >= j
  size_t elements = 0;
  double* host = nullptr;
  double* dev = nullptr;

  int rows(int i) const { return std::min(tile, n - i * tile); }
  size_t tile_elements(int i, int j) const { return static_cast<size_t>(rows(i)) * rows(j); }
  double* host_tile(int i, int j) const { return host + offset[i * nt + j]; }
  double* dev_tile(int i, int j) const { return dev + offset[i * nt + j]; }

  TiledMatrix(int n_, int tile_) : n(n_), tile(tile_), nt((n_ + tile_ - 1) / tile_) {
    offset.assign(static_cast<size_t>(nt) * nt, 0);
    for (int i = 0; i < nt; i++) {
      for (int j = 0; j <= i; j++) {
        offset[i * nt + j] = elements;
        elements += (tile_elements(i, j) + 31) / 32 * 32;  // 256-byte aligned tiles
      }
    }
    CUDA_CHECK(cudaMallocHost(&host, elements * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&dev, elements * sizeof(double)));
  }
  ~TiledMatrix() {
    CUDA_CHECK(cudaFree(dev));
    CUDA_CHECK(cudaFreeHost(host));
  }
  TiledMatrix(const TiledMatrix&) = delete;
  TiledMatrix& operator=(const TiledMatrix&) = delete;

  // Writes A into the host tiles (cholesky_common.h's chol_matrix_fill).
  void fill() {
    for (int ti = 0; ti < nt; ti++) {
      for (int tj = 0; tj <= ti; tj++) {
        double* t = host_tile(ti, tj);
        int r_count = rows(ti), c_count = rows(tj);
        for (int c = 0; c < c_count; c++) {
          for (int r = 0; r < r_count; r++) {
            t[static_cast<size_t>(c) * r_count + r] = chol_entry(n, ti * tile + r, tj * tile + c);
          }
        }
      }
    }
  }

  // The factor as a dense column-major n x n matrix, zeros above the diagonal (dpotrf leaves
  // the diagonal tiles' upper triangles as they were).
  std::vector<double> dense_factor() const {
    size_t nn = static_cast<size_t>(n);
    std::vector<double> l(nn * nn, 0.0);
    for (int ti = 0; ti < nt; ti++) {
      for (int tj = 0; tj <= ti; tj++) {
        const double* t = host_tile(ti, tj);
        int r_count = rows(ti), c_count = rows(tj);
        for (int c = 0; c < c_count; c++) {
          int first = ti == tj ? c : 0;
          size_t col = static_cast<size_t>(tj) * tile + c, row0 = static_cast<size_t>(ti) * tile;
          std::memcpy(&l[col * nn + row0 + first], &t[static_cast<size_t>(c) * r_count + first],
                      static_cast<size_t>(r_count - first) * sizeof(double));
        }
      }
    }
    return l;
  }
};

// ---------------------------------------------------------------------------------------------
// Per-stream cuBLAS / cuSOLVER state
// ---------------------------------------------------------------------------------------------

struct StreamTools {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  double* work = nullptr;  // dpotrf's workspace, for tiles up to the tile order
  int lwork = 0;
  std::mutex mu;  // two workers may enqueue on one stream at once; a handle takes one at a time
};

class Toolbox {
 public:
  // `tile`: the largest tile order; `some_tile`: any device buffer of that many elements, for
  // dpotrf's workspace query.
  Toolbox(int tile, double* some_tile) : tile_(tile), some_tile_(some_tile) {}
  ~Toolbox() {
    for (auto& t : all_) {
      if (t->work) CUDA_CHECK(cudaFree(t->work));
      if (t->solver) CUSOLVER_CHECK(cusolverDnDestroy(t->solver));
      if (t->blas) CUBLAS_CHECK(cublasDestroy(t->blas));
    }
  }
  Toolbox(const Toolbox&) = delete;
  Toolbox& operator=(const Toolbox&) = delete;

  // The tools bound to `stream`, made on first use on the calling thread (an op's callback: the
  // op's GPU is current). nullptr with *why set when one of the calls failed.
  StreamTools* get(cudaStream_t stream, std::string* why) {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& t : all_) {
      if (t->stream == stream) return t.get();
    }
    auto t = std::make_unique<StreamTools>();
    t->stream = stream;
    if (!make_tools(t.get(), why)) {
      // What was made is freed; a failure here is already being reported.
      if (t->work) cudaFree(t->work);
      if (t->solver) cusolverDnDestroy(t->solver);
      if (t->blas) cublasDestroy(t->blas);
      return nullptr;
    }
    all_.push_back(std::move(t));
    return all_.back().get();
  }

  size_t streams() {
    std::lock_guard<std::mutex> g(mu_);
    return all_.size();
  }

 private:
  bool make_tools(StreamTools* t, std::string* why) {
    cublasStatus_t bs = cublasCreate(&t->blas);
    if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasSetStream(t->blas, t->stream);
    if (bs != CUBLAS_STATUS_SUCCESS) {
      *why = "cublasCreate/cublasSetStream: " + cublas_message(bs);
      return false;
    }
    cusolverStatus_t ss = cusolverDnCreate(&t->solver);
    if (ss == CUSOLVER_STATUS_SUCCESS) ss = cusolverDnSetStream(t->solver, t->stream);
    // The workspace dpotrf needs for the largest tile (smaller ones need no more).
    if (ss == CUSOLVER_STATUS_SUCCESS) {
      ss = cusolverDnDpotrf_bufferSize(t->solver, CUBLAS_FILL_MODE_LOWER, tile_, some_tile_, tile_,
                                       &t->lwork);
    }
    if (ss != CUSOLVER_STATUS_SUCCESS) {
      *why = "cusolverDnCreate/SetStream/Dpotrf_bufferSize: " + cusolver_message(ss);
      return false;
    }
    size_t bytes = static_cast<size_t>(std::max(t->lwork, 1)) * sizeof(double);
    cudaError_t e = cudaMalloc(&t->work, bytes);
    if (e != cudaSuccess) {
      *why = "cudaMalloc of dpotrf's workspace: " + cuda_message(e);
      return false;
    }
    return true;
  }

  int tile_;
  double* some_tile_;
  std::mutex mu_;
  std::vector<std::unique_ptr<StreamTools>> all_;
};

// ---------------------------------------------------------------------------------------------
// The ops
// ---------------------------------------------------------------------------------------------

enum class Kind { kUpload, kDownload, kPotrf, kTrsm, kSyrk, kGemm };

struct Shared {
  const TiledMatrix* m;
  Toolbox* tools;
  int* dev_info;  // one devInfo per potrf(k), on the GPU
};

struct OpTask {
  Kind kind;
  int i, j, k;  // as in cholesky_common.h; uploads and downloads: the tile (i, j)
  Shared* shared;
};

// Fails the running op with `code` and a message (through ordo_complete, which carries one; a
// callback's return value carries only the code). The final wait reports it.
int32_t fail_op(ordo_exec* exec, int32_t code, const std::string& message) {
  ordo_completion c = 0;
  if (ordo_exec_defer(exec, &c) != ORDO_OK) return code;
  ordo_complete(c, code, message.c_str());
  return 0;  // ignored after a defer
}

int32_t cublas_failed(ordo_exec* exec, const char* call, cublasStatus_t s) {
  return fail_op(exec, 1000 + static_cast<int>(s), std::string(call) + ": " + cublas_message(s));
}

int32_t run_op(ordo_exec* exec, void* user_data) {
  const OpTask* t = static_cast<const OpTask*>(user_data);
  const TiledMatrix& m = *t->shared->m;
  ordo_exec_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ordo_exec_get_info(exec, &info) != ORDO_OK) {
    return fail_op(exec, 1, std::string("ordo_exec_get_info: ") + ordo_last_error_message());
  }
  cudaStream_t stream = static_cast<cudaStream_t>(info.stream);
  if (t->kind == Kind::kUpload || t->kind == Kind::kDownload) {
    size_t bytes = m.tile_elements(t->i, t->j) * sizeof(double);
    cudaError_t e = t->kind == Kind::kUpload
                        ? cudaMemcpyAsync(m.dev_tile(t->i, t->j), m.host_tile(t->i, t->j), bytes,
                                          cudaMemcpyHostToDevice, stream)
                        : cudaMemcpyAsync(m.host_tile(t->i, t->j), m.dev_tile(t->i, t->j), bytes,
                                          cudaMemcpyDeviceToHost, stream);
    return e == cudaSuccess ? 0 : fail_op(exec, e, "cudaMemcpyAsync: " + cuda_message(e));
  }
  std::string why;
  StreamTools* st = t->shared->tools->get(stream, &why);
  if (!st) return fail_op(exec, 2, why);
  std::lock_guard<std::mutex> g(st->mu);
  const double one = 1.0, minus_one = -1.0;
  int mi = m.rows(t->i), nk = m.rows(t->k);
  switch (t->kind) {
    case Kind::kPotrf: {
      cusolverStatus_t s =
          cusolverDnDpotrf(st->solver, CUBLAS_FILL_MODE_LOWER, nk, m.dev_tile(t->k, t->k), nk,
                           st->work, st->lwork, t->shared->dev_info + t->k);
      if (s != CUSOLVER_STATUS_SUCCESS) {
        return fail_op(exec, 2000 + static_cast<int>(s),
                       "cusolverDnDpotrf: " + cusolver_message(s));
      }
      break;
    }
    case Kind::kTrsm: {  // A_ik = A_ik L_kk^-T
      cublasStatus_t s = cublasDtrsm(st->blas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER,
                                     CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, mi, nk, &one,
                                     m.dev_tile(t->k, t->k), nk, m.dev_tile(t->i, t->k), mi);
      if (s != CUBLAS_STATUS_SUCCESS) return cublas_failed(exec, "cublasDtrsm", s);
      break;
    }
    case Kind::kSyrk: {  // A_ii -= A_ik A_ik^T
      cublasStatus_t s =
          cublasDsyrk(st->blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, mi, nk, &minus_one,
                      m.dev_tile(t->i, t->k), mi, &one, m.dev_tile(t->i, t->i), mi);
      if (s != CUBLAS_STATUS_SUCCESS) return cublas_failed(exec, "cublasDsyrk", s);
      break;
    }
    case Kind::kGemm: {  // A_ij -= A_ik A_jk^T
      int mj = m.rows(t->j);
      cublasStatus_t s = cublasDgemm(st->blas, CUBLAS_OP_N, CUBLAS_OP_T, mi, mj, nk, &minus_one,
                                     m.dev_tile(t->i, t->k), mi, m.dev_tile(t->j, t->k), mj, &one,
                                     m.dev_tile(t->i, t->j), mi);
      if (s != CUBLAS_STATUS_SUCCESS) return cublas_failed(exec, "cublasDgemm", s);
      break;
    }
    default:
      break;
  }
  return 0;
}

class Pusher {
 public:
  Pusher(ordo_engine* e, const TiledMatrix& m, Shared* shared, int device)
      : e_(e), m_(m), shared_(shared), device_(device) {
    for (int i = 0; i < m.nt; i++) {
      for (int j = 0; j <= i; j++) ORDO_CHECK(ordo_var_new(e, &vars_[i * m.nt + j]));
    }
  }
  ~Pusher() {
    for (ordo_var v : vars_) {
      if (v) ordo_var_delete(e_, v);
    }
  }
  Pusher(const Pusher&) = delete;
  Pusher& operator=(const Pusher&) = delete;

  void clear() { tasks_.clear(); }

  // Every tile up (mutates its var) or down (reads it), on the copy streams.
  void copies(Kind kind) {
    for (int i = 0; i < m_.nt; i++) {
      for (int j = 0; j <= i; j++) {
        char name[ORDO_NAME_MAX + 1];
        std::snprintf(name, sizeof name, "%s(%d,%d)", kind == Kind::kUpload ? "h2d" : "d2h", i, j);
        ordo_var v = var(i, j);
        if (kind == Kind::kUpload) {
          push({kind, i, j, 0, nullptr}, ORDO_PROP_COPY_TO_DEVICE, nullptr, 0, v, name, 0);
        } else {
          push({kind, i, j, 0, nullptr}, ORDO_PROP_COPY_FROM_DEVICE, &v, 1, 0, name, 0);
        }
      }
    }
  }

  // The factorization's ops in cholesky_common.h's order (chol_for_each_op), with its
  // "critical" priorities (potrf(k), trsm(k+1,k), syrk(k+1,k): the chain to potrf(k+1)).
  void factorization() {
    char name[ORDO_NAME_MAX + 1];
    for (int k = 0; k < m_.nt; k++) {
      std::snprintf(name, sizeof name, "potrf(%d)", k);
      push({Kind::kPotrf, k, k, k, nullptr}, ORDO_PROP_NORMAL, nullptr, 0, var(k, k), name, 1);
      for (int i = k + 1; i < m_.nt; i++) {
        std::snprintf(name, sizeof name, "trsm(%d,%d)", i, k);
        ordo_var in = var(k, k);
        push({Kind::kTrsm, i, k, k, nullptr}, ORDO_PROP_NORMAL, &in, 1, var(i, k), name,
             i == k + 1);
      }
      for (int i = k + 1; i < m_.nt; i++) {
        std::snprintf(name, sizeof name, "syrk(%d,%d)", i, k);
        ordo_var in = var(i, k);
        push({Kind::kSyrk, i, i, k, nullptr}, ORDO_PROP_NORMAL, &in, 1, var(i, i), name,
             i == k + 1);
        for (int j = k + 1; j < i; j++) {
          std::snprintf(name, sizeof name, "gemm(%d,%d,%d)", i, j, k);
          ordo_var ins[2] = {var(i, k), var(j, k)};
          push({Kind::kGemm, i, j, k, nullptr}, ORDO_PROP_NORMAL, ins, 2, var(i, j), name, 0);
        }
      }
    }
  }

 private:
  ordo_var var(int i, int j) const { return vars_[i * m_.nt + j]; }

  void push(OpTask task, int32_t prop, const ordo_var* reads, size_t num_reads, ordo_var write,
            const char* name, int priority) {
    task.shared = shared_;
    tasks_.push_back(std::make_unique<OpTask>(task));  // stays put until clear()
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.device_type = ORDO_DEVICE_GPU;
    o.device_id = device_;
    o.prop = prop;
    o.priority = priority;
    o.name = name;  // copied by the push
    ORDO_CHECK(ordo_opr_push(e_, run_op, tasks_.back().get(), reads, num_reads,
                             write ? &write : nullptr, write ? 1 : 0, &o));
  }

  ordo_engine* e_;
  const TiledMatrix& m_;
  Shared* shared_;
  int device_;
  std::vector<ordo_var> vars_ = std::vector<ordo_var>(static_cast<size_t>(m_.nt) * m_.nt, 0);
  std::vector<std::unique_ptr<OpTask>> tasks_;
};

// Waits for every op pushed; the seconds since t0. An op's failure ends the program with its
// message (the op's name, and the CUDA, cuBLAS or cuSOLVER error).
double wait_all(ordo_engine* e, const char* what, double t0) {
  ordo_status s = ordo_wait_for_all(e);
  if (s != ORDO_OK)
    die(what, std::string(ordo_status_string(s)) + ": " + ordo_last_error_message());
  return now_s() - t0;
}

// Every potrf(k)'s devInfo must be 0 (> 0: A's leading minor of that order is not positive
// definite, which this matrix never is). Called after a wait: the GPU's work is done.
void check_info(const int* dev_info, int nt) {
  std::vector<int> info(static_cast<size_t>(nt));
  CUDA_CHECK(cudaMemcpy(info.data(), dev_info, info.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int k = 0; k < nt; k++) {
    if (info[k] != 0)
      die("potrf", "devInfo of tile " + std::to_string(k) + ": " + std::to_string(info[k]));
  }
}

// Zeroes the devInfo slots before a run, and waits for it: ordo's streams do not wait for the
// legacy default stream, on which cudaMemset may still be running when it returns.
void clear_info(int* dev_info, int nt) {
  CUDA_CHECK(cudaMemset(dev_info, 0, static_cast<size_t>(nt) * sizeof(int)));
  CUDA_CHECK(cudaDeviceSynchronize());
}

// The reason ordo gives for having no GPU: the ORDO_ERR_NO_DEVICE message of a GPU push.
std::string no_gpu_reason() {
  ordo_engine* e = nullptr;
  ORDO_CHECK(ordo_engine_create(nullptr, &e));
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  ordo_status s = ordo_opr_push(
      e, [](ordo_exec*, void*) -> int32_t { return 0; }, nullptr, nullptr, 0, nullptr, 0, &o);
  std::string why = s == ORDO_ERR_NO_DEVICE ? ordo_last_error_message()
                                            : "ordo_device_count is 0 but a GPU push gave " +
                                                  std::string(ordo_status_string(s));
  ORDO_CHECK(ordo_engine_destroy(e));
  return why;
}

// ||A - L L^T||_F / ||A||_F for the factor in m's host tiles: L L^T by one cublasDsyrk on the
// GPU, the difference and the norms on the host over the lower triangle (off-diagonal entries
// counted twice), as cholesky_common.h's chol_residual.
double residual(const TiledMatrix& m, cublasHandle_t blas) {
  size_t nn = static_cast<size_t>(m.n), bytes = nn * nn * sizeof(double);
  std::vector<double> l = m.dense_factor();
  double *d_l = nullptr, *d_llt = nullptr;
  CUDA_CHECK(cudaMalloc(&d_l, bytes));
  CUDA_CHECK(cudaMalloc(&d_llt, bytes));
  CUDA_CHECK(cudaMemcpy(d_l, l.data(), bytes, cudaMemcpyHostToDevice));
  const double one = 1.0, zero = 0.0;
  CUBLAS_CHECK(cublasDsyrk(blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, m.n, m.n, &one, d_l, m.n,
                           &zero, d_llt, m.n));
  CUDA_CHECK(cudaMemcpy(l.data(), d_llt, bytes, cudaMemcpyDeviceToHost));  // blocks until done
  CUDA_CHECK(cudaFree(d_l));
  CUDA_CHECK(cudaFree(d_llt));
  double diff = 0, norm = 0;
  for (size_t c = 0; c < nn; c++) {
    for (size_t r = c; r < nn; r++) {
      double a = chol_entry(m.n, static_cast<int>(r), static_cast<int>(c)), d = l[c * nn + r] - a;
      double weight = r == c ? 1.0 : 2.0;
      diff += weight * d * d;
      norm += weight * a * a;
    }
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

// A single cusolverDnDpotrf on the whole matrix (the same A), on a stream of its own: the median
// of `reps` timed calls after `warmup` untimed ones, timed by CUDA events. Checks devInfo.
double cusolver_seconds(int n, int reps, int warmup) {
  size_t nn = static_cast<size_t>(n), bytes = nn * nn * sizeof(double);
  std::vector<double> a(nn * nn);
  for (size_t c = 0; c < nn; c++) {
    for (size_t r = c; r < nn; r++) {
      a[c * nn + r] = chol_entry(n, static_cast<int>(r), static_cast<int>(c));
    }
  }
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cusolverDnHandle_t solver = nullptr;
  CUSOLVER_CHECK(cusolverDnCreate(&solver));
  CUSOLVER_CHECK(cusolverDnSetStream(solver, stream));
  double* d_a = nullptr;
  int* d_info = nullptr;
  CUDA_CHECK(cudaMalloc(&d_a, bytes));
  CUDA_CHECK(cudaMalloc(&d_info, sizeof(int)));
  int lwork = 0;
  CUSOLVER_CHECK(cusolverDnDpotrf_bufferSize(solver, CUBLAS_FILL_MODE_LOWER, n, d_a, n, &lwork));
  double* d_work = nullptr;
  CUDA_CHECK(cudaMalloc(&d_work, static_cast<size_t>(std::max(lwork, 1)) * sizeof(double)));
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int rep = -warmup; rep < reps; rep++) {
    CUDA_CHECK(cudaMemcpyAsync(d_a, a.data(), bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaEventRecord(start, stream));
    CUSOLVER_CHECK(
        cusolverDnDpotrf(solver, CUBLAS_FILL_MODE_LOWER, n, d_a, n, d_work, lwork, d_info));
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    int info = -1;
    CUDA_CHECK(cudaMemcpy(&info, d_info, sizeof info, cudaMemcpyDeviceToHost));
    if (info != 0) die("cusolverDnDpotrf", "devInfo " + std::to_string(info));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (rep >= 0) times.push_back(1e-3 * ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  CUDA_CHECK(cudaFree(d_work));
  CUDA_CHECK(cudaFree(d_info));
  CUDA_CHECK(cudaFree(d_a));
  CUSOLVER_CHECK(cusolverDnDestroy(solver));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  int32_t gpus = 0;
  ORDO_CHECK(ordo_device_count(&gpus));
  if (gpus == 0) {
    std::printf("no GPU: %s\n", no_gpu_reason().c_str());
    return 0;
  }
  if (a.device >= gpus)
    die("--device", "GPU " + std::to_string(a.device) + " of " + std::to_string(gpus));
  CUDA_CHECK(cudaSetDevice(a.device));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, a.device));

  TiledMatrix m(a.n, a.tile);
  long ops = 0;
  for (int k = 0; k < m.nt; k++) {
    long below = m.nt - 1 - k;
    ops += 1 + below + below + below * (below - 1) / 2;
  }
  std::printf(
      "ordo %s: tiled Cholesky on GPU %d (%s), N=%d, tile %d (%dx%d tiles, %ld ops), cuBLAS "
      "dtrsm/dsyrk/dgemm and cuSOLVER dpotrf on ordo's streams\n",
      ordo_version_string(), a.device, prop.name, a.n, a.tile, m.nt, m.nt, ops);
  std::fflush(stdout);

  int* dev_info = nullptr;
  CUDA_CHECK(cudaMalloc(&dev_info, static_cast<size_t>(m.nt) * sizeof(int)));
  Toolbox tools(a.tile, m.dev);
  Shared shared{&m, &tools, dev_info};

  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = ORDO_ENGINE_PER_DEVICE;
  ordo_engine* e = nullptr;
  ORDO_CHECK(ordo_engine_create(&cfg, &e));
  std::vector<double> factor_s, upload_s, download_s;
  double pipelined_s = 0;
  {
    Pusher p(e, m, &shared, a.device);
    // Phase by phase, so the factorization's time is that of the tiles already on the GPU, as
    // cusolverDnDpotrf's below.
    for (int rep = -a.warmup; rep < a.reps; rep++) {
      m.fill();
      clear_info(dev_info, m.nt);
      p.clear();
      double t0 = now_s();
      p.copies(Kind::kUpload);
      double up = wait_all(e, "uploads", t0);
      t0 = now_s();
      p.factorization();
      double f = wait_all(e, "factorization", t0);
      t0 = now_s();
      p.copies(Kind::kDownload);
      double down = wait_all(e, "downloads", t0);
      check_info(dev_info, m.nt);
      if (rep >= 0) {
        factor_s.push_back(f);
        upload_s.push_back(up);
        download_s.push_back(down);
      }
    }
    // All three as one graph: a tile's trsm can start once its upload and potrf are done, a
    // finished tile goes down while others are still being factored.
    m.fill();
    clear_info(dev_info, m.nt);
    p.clear();
    double t0 = now_s();
    p.copies(Kind::kUpload);
    p.factorization();
    p.copies(Kind::kDownload);
    pipelined_s = wait_all(e, "the pipelined run", t0);
    check_info(dev_info, m.nt);
  }
  size_t streams_used = tools.streams();
  ORDO_CHECK(ordo_engine_destroy(e));

  double f = median(factor_s);
  std::printf(
      "ordo, tiles on the GPU: %.4f s, %.1f GFLOP/s (median of %d after %d warm-up%s; %zu "
      "compute streams used); uploads %.4f s, downloads %.4f s\n",
      f, gflops(a.n, f), a.reps, a.warmup, a.warmup == 1 ? "" : "s", streams_used, median(upload_s),
      median(download_s));
  std::printf("ordo, uploads + factorization + downloads as one graph: %.4f s, %.1f GFLOP/s\n",
              pipelined_s, gflops(a.n, pipelined_s));
  std::fflush(stdout);

  double ref = cusolver_seconds(a.n, a.reps, a.warmup);
  std::printf(
      "cusolverDnDpotrf, whole matrix on the GPU: %.4f s, %.1f GFLOP/s (median of %d); ordo's "
      "tiled factorization ran at %.0f%% of it\n",
      ref, gflops(a.n, ref), a.reps, 100.0 * ref / f);

  bool ok = true;
  if (a.check) {
    cublasHandle_t blas = nullptr;
    CUBLAS_CHECK(cublasCreate(&blas));
    double t0 = now_s();
    double r = residual(m, blas);
    CUBLAS_CHECK(cublasDestroy(blas));
    double scaled = r / (static_cast<double>(a.n) * DBL_EPSILON);
    ok = scaled < 30.0;  // LAPACK's xPOT01 limit, as cholesky_common.h's chol_residual_ok
    std::printf("check: ||A - L L^T||_F / ||A||_F = %.3e (%.3g n eps; limit 30) in %.2f s: %s\n", r,
                scaled, now_s() - t0, ok ? "PASS" : "FAIL");
  }
  CUDA_CHECK(cudaFree(dev_info));
  if (ok) {
    std::printf("CHOL ordo-gpu %d %d %.2f %.4f\n", a.n, a.tile, gflops(a.n, f), f);
    std::printf("CHOL cusolver %d %d %.2f %.4f\n", a.n, a.n, gflops(a.n, ref), ref);
  }
  return ok ? 0 : 1;
}
