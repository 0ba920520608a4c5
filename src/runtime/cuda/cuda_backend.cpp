// cuda_backend.cpp — the CUDA device backend (libanvil_cuda.so).
//
// Implements the AnvilDeviceApi table of include/anvil/anvil_device.h with the CUDA runtime API
// (memory, copies, streams) and cuBLASLt (GEMM). The library exports exactly one symbol,
// `anvil_device_backend`; everything else has internal linkage. It depends on no other anvil
// source, so the CPU runtime can dlopen it only when a CUDA device is asked for.
//
// Conventions: every entry point catches every C++ exception (they are called through a C
// table), returns 0 / a pointer on success, and on failure stores a message naming the function,
// the arguments that matter and the CUDA / cuBLAS error in a thread_local string that
// last_error() returns. Without a driver or a device every call fails that way; none aborts.
//
// Global state (device count, per-device allocator caches, cuBLASLt handles, workspaces, GEMM
// plans) is created on first use and deliberately never destroyed: tearing it down from a static
// destructor would call into a CUDA runtime that may already be unloading at process exit.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

thread_local std::string t_last_error;

std::string vformat(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int needed = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (needed <= 0) return std::string();
  std::string out(static_cast<size_t>(needed) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, args);
  out.resize(static_cast<size_t>(needed));
  return out;
}

[[gnu::format(printf, 1, 2)]] std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = vformat(fmt, args);
  va_end(args);
  return out;
}

// Sets the message; returns -1 so that int entry points can `return fail(...)`.
[[gnu::format(printf, 1, 2)]] int fail(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  t_last_error = vformat(fmt, args);
  va_end(args);
  return -1;
}

std::string cuda_text(cudaError_t e) {
  return format("%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
}

// As fail(), appending ": <cudaErrorName>: <description>". Also resets the runtime's per-thread
// "last error" slot, so that a failure reported here does not resurface in an unrelated
// cudaGetLastError() check of generated code later on.
[[gnu::format(printf, 2, 3)]] int fail_cuda(cudaError_t e, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string msg = vformat(fmt, args);
  va_end(args);
  t_last_error = msg + ": " + cuda_text(e);
  (void)cudaGetLastError();
  return -1;
}

[[gnu::format(printf, 2, 3)]] int fail_blas(cublasStatus_t s, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string msg = vformat(fmt, args);
  va_end(args);
  t_last_error = msg + format(": %s (%d): %s", cublasLtGetStatusName(s), static_cast<int>(s),
                              cublasLtGetStatusString(s));
  return -1;
}

// Runs `body` (returning int) and turns any escaping exception into an error return.
template <class F>
int guarded(const char* fn, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail("%s: internal error: %s", fn, e.what());
  } catch (...) {
    return fail("%s: internal error: unknown exception", fn);
  }
}

// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kSmallRound = 512;   // granularity of blocks up to kSmallLimit
constexpr size_t kSmallLimit = kMiB;  // above this, blocks are multiples of kLargeRound
constexpr size_t kLargeRound = 2 * kMiB;
constexpr size_t kWorkspaceBytes = 32 * kMiB;  // cuBLASLt workspace per (device, stream)

// A cached GEMM decision: the heuristic's algorithm for one problem shape.
struct GemmPlan {
  cublasLtMatmulAlgo_t algo;
};

// Everything that changes the heuristic's answer. Strides are zero when batch == 1.
struct GemmKey {
  int32_t dtype;
  int32_t trans_a, trans_b;
  int64_t m, n, k;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  int64_t batch;
  int32_t epilogue;
  int32_t tf32;
  uint32_t align_a, align_b, align_c, align_bias;
  auto operator<=>(const GemmKey&) const = default;
};

struct DeviceState {
  // Caching allocator: rounded size -> free blocks, and live block -> rounded size.
  std::mutex alloc_mu;
  std::multimap<size_t, void*> cached;
  std::unordered_map<void*, size_t> live;
  size_t cached_bytes = 0;
  size_t live_bytes = 0;

  // cuBLASLt. Lock order: blas_mu before alloc_mu (workspaces come from the allocator).
  std::mutex blas_mu;
  cublasLtHandle_t handle = nullptr;
  // One workspace per stream: GEMMs queued on different streams may run concurrently, so they
  // must not share scratch memory; GEMMs on one stream are ordered by the stream.
  std::unordered_map<void*, void*> workspaces;
  std::map<GemmKey, GemmPlan> plans;
};

struct Devices {
  int count = 0;
  std::string why_none;  // the reason count is 0
  std::vector<DeviceState*> state;
};

// The device count is queried once per process (it cannot change while the process runs).
Devices& devices() {
  static Devices* d = [] {
    auto* out = new Devices();
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      out->why_none = "cudaGetDeviceCount failed (no CUDA driver or no device?): " + cuda_text(e);
      (void)cudaGetLastError();
      count = 0;
    } else if (count <= 0) {
      out->why_none = "cudaGetDeviceCount reports no CUDA device";
      count = 0;
    }
    out->count = count;
    for (int i = 0; i < count; ++i) out->state.push_back(new DeviceState());
    return out;
  }();
  return *d;
}

// Validates `device` for function `fn`; the DeviceState on success, null with last_error.
DeviceState* device_state(const char* fn, int device) {
  Devices& d = devices();
  if (d.count == 0) {
    fail("%s(device=%d): no usable CUDA device: %s", fn, device, d.why_none.c_str());
    return nullptr;
  }
  if (device < 0 || device >= d.count) {
    fail("%s(device=%d): device index out of range (%d CUDA device%s: 0..%d)", fn, device, d.count,
         d.count == 1 ? "" : "s", d.count - 1);
    return nullptr;
  }
  return d.state[static_cast<size_t>(device)];
}

// device_state() plus cudaSetDevice(device), which every call issuing CUDA work needs: the
// current device is per host thread and the caller's thread may have any device current.
DeviceState* enter(const char* fn, int device) {
  DeviceState* s = device_state(fn, device);
  if (s == nullptr) return nullptr;
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    fail_cuda(e, "%s(device=%d): cudaSetDevice failed", fn, device);
    return nullptr;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Caching allocator
// ---------------------------------------------------------------------------------------------

// 0 when `bytes` is too large to round.
size_t round_size(size_t bytes) {
  if (bytes == 0) return kSmallRound;
  if (bytes <= kSmallLimit) return (bytes + kSmallRound - 1) / kSmallRound * kSmallRound;
  if (bytes > SIZE_MAX - kLargeRound) return 0;
  return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

// cudaFree()s every cached block of `s`. Caller holds s.alloc_mu and has set the device.
size_t release_cached(DeviceState& s) {
  size_t released = 0;
  for (auto& [size, ptr] : s.cached) {
    if (cudaFree(ptr) == cudaSuccess) {
      released += size;
    } else {
      (void)cudaGetLastError();
    }
  }
  s.cached.clear();
  s.cached_bytes = 0;
  return released;
}

// A block of round_size(bytes) bytes; the device must be current. Null with last_error.
void* alloc_block(DeviceState& s, const char* fn, int device, size_t bytes) {
  const size_t rounded = round_size(bytes);
  if (rounded == 0) {
    fail("%s(device=%d, bytes=%zu): size too large", fn, device, bytes);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  auto it = s.cached.find(rounded);
  if (it != s.cached.end()) {
    void* ptr = it->second;
    s.cached.erase(it);
    s.cached_bytes -= rounded;
    s.live.emplace(ptr, rounded);
    s.live_bytes += rounded;
    return ptr;
  }
  void* ptr = nullptr;
  cudaError_t e = cudaMalloc(&ptr, rounded);
  size_t released = 0;
  if (e == cudaErrorMemoryAllocation) {
    // Blocks cached for other sizes may be what stands in the way: give them back, retry once.
    (void)cudaGetLastError();
    released = release_cached(s);
    ptr = nullptr;
    e = cudaMalloc(&ptr, rounded);
  }
  if (e != cudaSuccess) {
    fail_cuda(e,
              "%s(device=%d, bytes=%zu): cudaMalloc of %zu bytes failed (%zu bytes live in this "
              "allocator, %zu cached bytes released before retrying)",
              fn, device, bytes, rounded, s.live_bytes, released);
    return nullptr;
  }
  s.live.emplace(ptr, rounded);
  s.live_bytes += rounded;
  return ptr;
}

// Returns a live block to the cache. False (no message) when `ptr` is not live on `s`.
bool free_block(DeviceState& s, void* ptr) {
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  auto it = s.live.find(ptr);
  if (it == s.live.end()) return false;
  const size_t size = it->second;
  s.live.erase(it);
  s.live_bytes -= size;
  s.cached.emplace(size, ptr);
  s.cached_bytes += size;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Table entries: devices, memory, streams
// ---------------------------------------------------------------------------------------------

const char* backend_last_error(void) { return t_last_error.c_str(); }

int backend_device_count(void) {
  try {
    Devices& d = devices();
    if (d.count == 0) fail("device_count: no usable CUDA device: %s", d.why_none.c_str());
    return d.count;
  } catch (const std::exception& e) {
    fail("device_count: internal error: %s", e.what());
    return 0;
  } catch (...) {
    fail("device_count: internal error: unknown exception");
    return 0;
  }
}

int backend_describe(int device, char* buf, size_t len) {
  return guarded("describe", [&]() -> int {
    if (buf == nullptr || len == 0) {
      return fail("describe(device=%d, buf=%p, len=%zu): no output buffer", device,
                  static_cast<void*>(buf), len);
    }
    buf[0] = '\0';
    if (device_state("describe", device) == nullptr) return -1;
    cudaDeviceProp prop{};
    const cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) {
      return fail_cuda(e, "describe(device=%d): cudaGetDeviceProperties failed", device);
    }
    const int needed = std::snprintf(buf, len, "%s, sm_%d%d, %zu MiB", prop.name, prop.major,
                                     prop.minor, static_cast<size_t>(prop.totalGlobalMem / kMiB));
    if (needed < 0) return fail("describe(device=%d): snprintf failed", device);
    if (static_cast<size_t>(needed) >= len) {
      // buf holds the truncated text; the caller asked for all of it.
      return fail("describe(device=%d, len=%zu): buffer too small (%d characters needed)", device,
                  len, needed + 1);
    }
    return 0;
  });
}

int backend_capability(int device) {
  return guarded("capability", [&]() -> int {
    if (device_state("capability", device) == nullptr) return -1;
    int major = 0, minor = 0;
    cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (e == cudaSuccess) {
      e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    }
    if (e != cudaSuccess) {
      return fail_cuda(e, "capability(device=%d): cudaDeviceGetAttribute failed", device);
    }
    return major * 10 + minor;
  });
}

void* backend_alloc(int device, size_t bytes) {
  void* out = nullptr;
  guarded("alloc", [&]() -> int {
    DeviceState* s = enter("alloc", device);
    if (s == nullptr) return -1;
    out = alloc_block(*s, "alloc", device, bytes);
    return out == nullptr ? -1 : 0;
  });
  return out;
}

int backend_free(int device, void* ptr) {
  return guarded("free", [&]() -> int {
    if (ptr == nullptr) return 0;
    DeviceState* s = device_state("free", device);
    if (s == nullptr) return -1;
    if (free_block(*s, ptr)) return 0;
    // Say where the pointer does belong, when it is another device's block.
    Devices& d = devices();
    for (int other = 0; other < d.count; ++other) {
      if (other == device) continue;
      DeviceState& o = *d.state[static_cast<size_t>(other)];
      std::lock_guard<std::mutex> lock(o.alloc_mu);
      if (o.live.count(ptr) != 0) {
        return fail("free(device=%d, ptr=%p): the block was allocated on device %d", device, ptr,
                    other);
      }
    }
    return fail(
        "free(device=%d, ptr=%p): not a live block of this backend's allocator (freed "
        "twice, or not allocated by alloc())",
        device, ptr);
  });
}

const char* direction_name(int direction) {
  switch (direction) {
    case ANVIL_COPY_HOST_TO_DEVICE:
      return "host-to-device";
    case ANVIL_COPY_DEVICE_TO_HOST:
      return "device-to-host";
    case ANVIL_COPY_DEVICE_TO_DEVICE:
      return "device-to-device";
    default:
      return "invalid";
  }
}

int backend_copy(int device, void* dst, const void* src, size_t bytes, int direction,
                 void* stream) {
  return guarded("copy", [&]() -> int {
    cudaMemcpyKind kind;
    switch (direction) {
      case ANVIL_COPY_HOST_TO_DEVICE:
        kind = cudaMemcpyHostToDevice;
        break;
      case ANVIL_COPY_DEVICE_TO_HOST:
        kind = cudaMemcpyDeviceToHost;
        break;
      case ANVIL_COPY_DEVICE_TO_DEVICE:
        kind = cudaMemcpyDeviceToDevice;
        break;
      default:
        return fail(
            "copy(device=%d, bytes=%zu, direction=%d): unknown direction (expected %d "
            "host-to-device, %d device-to-host or %d device-to-device)",
            device, bytes, direction, ANVIL_COPY_HOST_TO_DEVICE, ANVIL_COPY_DEVICE_TO_HOST,
            ANVIL_COPY_DEVICE_TO_DEVICE);
    }
    if (device_state("copy", device) == nullptr) return -1;
    if (bytes == 0) return 0;
    if (dst == nullptr || src == nullptr) {
      return fail("copy(device=%d, dst=%p, src=%p, bytes=%zu, %s): null pointer", device, dst, src,
                  bytes, direction_name(direction));
    }
    if (enter("copy", device) == nullptr) return -1;
    if (stream == nullptr) {
      // cudaMemcpy returns before device-to-device copies (and pageable host-to-device DMA)
      // finish; the ABI promises the copy is complete on return, so wait for it.
      cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
      if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
      if (e != cudaSuccess) {
        return fail_cuda(e, "copy(device=%d, dst=%p, src=%p, bytes=%zu, %s, stream=null) failed",
                         device, dst, src, bytes, direction_name(direction));
      }
      return 0;
    }
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      return fail_cuda(e, "copy(device=%d, dst=%p, src=%p, bytes=%zu, %s, stream=%p) failed",
                       device, dst, src, bytes, direction_name(direction), stream);
    }
    return 0;
  });
}

int backend_memset_zero(int device, void* ptr, size_t bytes, void* stream) {
  return guarded("memset_zero", [&]() -> int {
    if (device_state("memset_zero", device) == nullptr) return -1;
    if (bytes == 0) return 0;
    if (ptr == nullptr) {
      return fail("memset_zero(device=%d, ptr=null, bytes=%zu): null pointer", device, bytes);
    }
    if (enter("memset_zero", device) == nullptr) return -1;
    cudaError_t e;
    if (stream == nullptr) {
      // cudaMemset is asynchronous with respect to the host; with a null stream we complete the
      // operation before returning, as copy() does.
      e = cudaMemset(ptr, 0, bytes);
      if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
    } else {
      e = cudaMemsetAsync(ptr, 0, bytes, static_cast<cudaStream_t>(stream));
    }
    if (e != cudaSuccess) {
      return fail_cuda(e, "memset_zero(device=%d, ptr=%p, bytes=%zu, stream=%p) failed", device,
                       ptr, bytes, stream);
    }
    return 0;
  });
}

void* backend_stream_create(int device) {
  void* out = nullptr;
  guarded("stream_create", [&]() -> int {
    if (enter("stream_create", device) == nullptr) return -1;
    cudaStream_t stream = nullptr;
    const cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      return fail_cuda(e, "stream_create(device=%d): cudaStreamCreateWithFlags failed", device);
    }
    out = static_cast<void*>(stream);
    return 0;
  });
  return out;
}

int backend_stream_destroy(int device, void* stream) {
  return guarded("stream_destroy", [&]() -> int {
    DeviceState* s = enter("stream_destroy", device);
    if (s == nullptr) return -1;
    if (stream == nullptr) return 0;  // the default stream: nothing to destroy
    void* workspace = nullptr;
    {
      std::lock_guard<std::mutex> lock(s->blas_mu);
      auto it = s->workspaces.find(stream);
      if (it != s->workspaces.end()) {
        workspace = it->second;
        s->workspaces.erase(it);
      }
    }
    const auto cu_stream = static_cast<cudaStream_t>(stream);
    // GEMMs queued on the stream may still use its workspace: let them finish before the
    // workspace goes back to the allocator for reuse.
    const cudaError_t sync_e = workspace ? cudaStreamSynchronize(cu_stream) : cudaSuccess;
    if (sync_e != cudaSuccess) (void)cudaGetLastError();
    const cudaError_t e = cudaStreamDestroy(cu_stream);
    if (workspace != nullptr) free_block(*s, workspace);
    if (sync_e != cudaSuccess) {
      return fail_cuda(sync_e,
                       "stream_destroy(device=%d, stream=%p): work queued on the stream failed "
                       "(the stream was destroyed anyway)",
                       device, stream);
    }
    if (e != cudaSuccess) {
      return fail_cuda(e, "stream_destroy(device=%d, stream=%p): cudaStreamDestroy failed", device,
                       stream);
    }
    return 0;
  });
}

int backend_stream_synchronize(int device, void* stream) {
  return guarded("stream_synchronize", [&]() -> int {
    if (enter("stream_synchronize", device) == nullptr) return -1;
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      // Errors of kernels and copies queued earlier surface here; a "sticky" one (illegal
      // address, launch failure, ...) leaves the device's context unusable for this process.
      return fail_cuda(e,
                       "stream_synchronize(device=%d, stream=%p): cudaStreamSynchronize failed "
                       "(work queued on the stream, e.g. a kernel, failed asynchronously)",
                       device, stream);
    }
    return 0;
  });
}

// ---------------------------------------------------------------------------------------------
// GEMM
// ---------------------------------------------------------------------------------------------

// anvil::DType codes (torch.export ScalarType codes; src/core/dtype.h).
constexpr int32_t kDTypeFloat16 = 6;
constexpr int32_t kDTypeFloat32 = 7;
constexpr int32_t kDTypeFloat64 = 8;
constexpr int32_t kDTypeBFloat16 = 13;

struct GemmType {
  cudaDataType_t data;
  size_t elem;
  const char* name;
};

bool gemm_type(int32_t dtype, GemmType* out) {
  switch (dtype) {
    case kDTypeFloat32:
      *out = {CUDA_R_32F, 4, "float32"};
      return true;
    case kDTypeFloat16:
      *out = {CUDA_R_16F, 2, "float16"};
      return true;
    case kDTypeBFloat16:
      *out = {CUDA_R_16BF, 2, "bfloat16"};
      return true;
    case kDTypeFloat64:
      *out = {CUDA_R_64F, 8, "float64"};
      return true;
    default:
      return false;
  }
}

// The largest power of two (at most 256) dividing the address of every batch's matrix; the
// heuristic must only pick kernels whose alignment needs the operands meet.
uint32_t alignment(const void* ptr, int64_t stride_bytes) {
  uint64_t bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr)) |
                  static_cast<uint64_t>(stride_bytes) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// Descriptors initialised in place (cublasLt*Init: no heap allocation, nothing to destroy), so
// building them per call is cheap and threads never share a mutable descriptor — the bias
// pointer lives in the matmul descriptor and differs from call to call.
struct GemmDescs {
  cublasLtMatmulDescOpaque_t op_storage;
  cublasLtMatrixLayoutOpaque_t a_storage, b_storage, d_storage;
  cublasLtMatmulDesc_t op() { return &op_storage; }
  cublasLtMatrixLayout_t a() { return &a_storage; }
  cublasLtMatrixLayout_t b() { return &b_storage; }
  cublasLtMatrixLayout_t d() { return &d_storage; }
};

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: a row-major matrix is its
// transpose in column-major, so cuBLASLt's "A" is our B, its "B" is our A, its output is n x m
// with leading dimension ldc, and each operand keeps its own transpose flag. The row-major bias
// over columns n becomes a bias over the rows of the column-major output — what
// CUBLASLT_EPILOGUE_BIAS adds (its vector length is the number of rows of D).
// Returns a cuBLAS status and names the failing step in *step.
cublasStatus_t build_descs(GemmDescs& d, const GemmKey& key, const GemmType& type, const void* bias,
                           const char** step) {
  const bool fp32 = key.dtype == kDTypeFloat32, fp64 = key.dtype == kDTypeFloat64;
  const cublasComputeType_t compute = fp64               ? CUBLAS_COMPUTE_64F
                                      : fp32 && key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                         : CUBLAS_COMPUTE_32F;
  cublasStatus_t st;
#define ANVIL_LT(call, what)           \
  do {                                 \
    st = (call);                       \
    if (st != CUBLAS_STATUS_SUCCESS) { \
      *step = what;                    \
      return st;                       \
    }                                  \
  } while (0)
  ANVIL_LT(cublasLtMatmulDescInit(d.op(), compute, fp64 ? CUDA_R_64F : CUDA_R_32F),
           "cublasLtMatmulDescInit");
  const int32_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt A = our B
  const int32_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt B = our A
  ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
           "CUBLASLT_MATMUL_DESC_TRANSA");
  ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
           "CUBLASLT_MATMUL_DESC_TRANSB");
  if (key.epilogue == ANVIL_EPILOGUE_BIAS) {
    const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = type.data;
    ANVIL_LT(
        cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
        "CUBLASLT_MATMUL_DESC_EPILOGUE");
    ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof bias),
             "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
    ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                            sizeof bias_type),
             "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE");
    // CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE keeps its default 0: one bias for every batch.
  }
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int64_t m = key.m, n = key.n, k = key.k;
  ANVIL_LT(cublasLtMatrixLayoutInit(d.a(), type.data, u(key.trans_b ? k : n),
                                    u(key.trans_b ? n : k), key.ldb),
           "cublasLtMatrixLayoutInit(B)");
  ANVIL_LT(cublasLtMatrixLayoutInit(d.b(), type.data, u(key.trans_a ? m : k),
                                    u(key.trans_a ? k : m), key.lda),
           "cublasLtMatrixLayoutInit(A)");
  ANVIL_LT(cublasLtMatrixLayoutInit(d.d(), type.data, u(n), u(m), key.ldc),
           "cublasLtMatrixLayoutInit(C)");
  if (key.batch > 1) {
    const int32_t count = static_cast<int32_t>(key.batch);
    const struct {
      cublasLtMatrixLayout_t layout;
      int64_t stride;
      const char* what;
    } batched[] = {{d.a(), key.stride_b, "batch layout of B"},
                   {d.b(), key.stride_a, "batch layout of A"},
                   {d.d(), key.stride_c, "batch layout of C"}};
    for (const auto& l : batched) {
      ANVIL_LT(cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                &count, sizeof count),
               l.what);
      ANVIL_LT(
          cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                           &l.stride, sizeof l.stride),
          l.what);
    }
  }
#undef ANVIL_LT
  return CUBLAS_STATUS_SUCCESS;
}

// Whether batches of an m x n row-major block with leading dimension ld, `stride` apart, overlap.
bool batches_overlap(int64_t m, int64_t n, int64_t ld, int64_t stride, int64_t batch) {
  if (batch <= 1) return false;
  // extent of one block = (m - 1) * ld + n elements; computed without overflow.
  if (m - 1 > (INT64_MAX - n) / ld) return true;
  return stride < (m - 1) * ld + n;
}

// C = 0 (or every row = bias) for k == 0, queued on `stream`. The device is current.
int gemm_k_zero(int device, cudaStream_t stream, const GemmKey& key, const GemmType& type, void* c,
                const void* bias) {
  const size_t elem = type.elem;
  const size_t row_bytes = static_cast<size_t>(key.n) * elem;
  const size_t pitch = static_cast<size_t>(key.ldc) * elem;
  const size_t rows = static_cast<size_t>(key.m);
  char* base = static_cast<char*>(c);
  const auto batch_ptr = [&](int64_t b) {
    return base + static_cast<size_t>(b) * static_cast<size_t>(key.stride_c) * elem;
  };
  cudaError_t e = cudaSuccess;
  if (key.epilogue != ANVIL_EPILOGUE_BIAS) {
    if (key.batch == 1 || key.stride_c == key.m * key.ldc) {
      // The batches form one pitched block of batch * m rows.
      e = cudaMemset2DAsync(base, pitch, 0, row_bytes, rows * static_cast<size_t>(key.batch),
                            stream);
    } else {
      for (int64_t b = 0; b < key.batch && e == cudaSuccess; ++b) {
        e = cudaMemset2DAsync(batch_ptr(b), pitch, 0, row_bytes, rows, stream);
      }
    }
  } else {
    // Row 0 of batch 0 = bias, then double the filled rows with pitched copies (log2(m) copies),
    // then copy batch 0 to the other batches (the caller checked that batches do not overlap).
    e = cudaMemcpyAsync(base, bias, row_bytes, cudaMemcpyDeviceToDevice, stream);
    for (size_t filled = 1; filled < rows && e == cudaSuccess;) {
      const size_t count = std::min(filled, rows - filled);
      e = cudaMemcpy2DAsync(base + filled * pitch, pitch, base, pitch, row_bytes, count,
                            cudaMemcpyDeviceToDevice, stream);
      filled += count;
    }
    for (int64_t b = 1; b < key.batch && e == cudaSuccess; ++b) {
      e = cudaMemcpy2DAsync(batch_ptr(b), pitch, base, pitch, row_bytes, rows,
                            cudaMemcpyDeviceToDevice, stream);
    }
  }
  if (e != cudaSuccess) {
    return fail_cuda(e,
                     "gemm(device=%d, dtype=%s, m=%" PRId64 ", n=%" PRId64 ", k=0, ldc=%" PRId64
                     ", batch=%" PRId64 ", epilogue=%d): filling C for k = 0 failed",
                     device, type.name, key.m, key.n, key.ldc, key.batch, key.epilogue);
  }
  return 0;
}

int backend_gemm(int device, void* stream, int32_t dtype, int trans_a, int trans_b, int64_t m,
                 int64_t n, int64_t k, float alpha, const void* a, int64_t lda, int64_t stride_a,
                 const void* b, int64_t ldb, int64_t stride_b, void* c, int64_t ldc,
                 int64_t stride_c, int64_t batch, int epilogue, const void* bias, int allow_tf32) {
  return guarded("gemm", [&]() -> int {
    // The call, for messages (built only on failure).
    const auto call = [&]() {
      return format("gemm(device=%d, stream=%p, dtype=%d, trans_a=%d, trans_b=%d, m=%" PRId64
                    ", n=%" PRId64 ", k=%" PRId64 ", lda=%" PRId64 ", stride_a=%" PRId64
                    ", ldb=%" PRId64 ", stride_b=%" PRId64 ", ldc=%" PRId64 ", stride_c=%" PRId64
                    ", batch=%" PRId64 ", epilogue=%d, allow_tf32=%d)",
                    device, stream, dtype, trans_a, trans_b, m, n, k, lda, stride_a, ldb, stride_b,
                    ldc, stride_c, batch, epilogue, allow_tf32);
    };
    GemmType type{};
    if (!gemm_type(dtype, &type)) {
      return fail(
          "%s: unsupported dtype code %d (the CUDA GEMM takes float32 = %d, float64 = %d, "
          "float16 = %d and bfloat16 = %d)",
          call().c_str(), dtype, kDTypeFloat32, kDTypeFloat64, kDTypeFloat16, kDTypeBFloat16);
    }
    if ((trans_a != 0 && trans_a != 1) || (trans_b != 0 && trans_b != 1)) {
      return fail("%s: trans_a and trans_b must be 0 or 1", call().c_str());
    }
    if (epilogue != ANVIL_EPILOGUE_NONE && epilogue != ANVIL_EPILOGUE_BIAS) {
      return fail("%s: unknown epilogue %d (expected %d none or %d bias)", call().c_str(), epilogue,
                  ANVIL_EPILOGUE_NONE, ANVIL_EPILOGUE_BIAS);
    }
    if (m < 0 || n < 0 || k < 0 || batch < 0) {
      return fail("%s: negative size", call().c_str());
    }
    if (batch > INT32_MAX) {
      return fail("%s: batch exceeds cuBLASLt's limit of %d", call().c_str(), INT32_MAX);
    }
    if (stride_a < 0 || stride_b < 0 || stride_c < 0) {
      return fail("%s: negative batch stride", call().c_str());
    }
    DeviceState* s = device_state("gemm", device);
    if (s == nullptr) return -1;
    if (m == 0 || n == 0 || batch == 0) return 0;  // empty output
    if (c == nullptr) return fail("%s: C is null", call().c_str());
    const bool with_bias = epilogue == ANVIL_EPILOGUE_BIAS;
    if (with_bias && bias == nullptr) {
      return fail("%s: the bias epilogue needs a bias pointer", call().c_str());
    }
    if (ldc < n) return fail("%s: ldc must be at least n", call().c_str());
    if (batches_overlap(m, n, ldc, stride_c, batch)) {
      return fail(
          "%s: stride_c must be at least (m - 1) * ldc + n so that the batches of C do "
          "not overlap",
          call().c_str());
    }
    if (k > 0) {
      if (a == nullptr || b == nullptr) return fail("%s: A or B is null", call().c_str());
      if (lda < (trans_a ? m : k)) {
        return fail("%s: lda must be at least %s (A is stored row-major as %s)", call().c_str(),
                    trans_a ? "m" : "k", trans_a ? "k x m" : "m x k");
      }
      if (ldb < (trans_b ? k : n)) {
        return fail("%s: ldb must be at least %s (B is stored row-major as %s)", call().c_str(),
                    trans_b ? "k" : "n", trans_b ? "n x k" : "k x n");
      }
    }

    GemmKey key{};
    key.dtype = dtype;
    key.trans_a = trans_a;
    key.trans_b = trans_b;
    key.m = m;
    key.n = n;
    key.k = k;
    key.lda = k > 0 ? lda : 0;
    key.ldb = k > 0 ? ldb : 0;
    key.ldc = ldc;
    key.batch = batch;
    key.stride_a = batch > 1 ? stride_a : 0;
    key.stride_b = batch > 1 ? stride_b : 0;
    key.stride_c = batch > 1 ? stride_c : 0;
    key.epilogue = epilogue;
    key.tf32 = dtype == kDTypeFloat32 && allow_tf32 != 0 ? 1 : 0;

    if (enter("gemm", device) == nullptr) return -1;
    const auto cu_stream = static_cast<cudaStream_t>(stream);
    if (k == 0) return gemm_k_zero(device, cu_stream, key, type, c, with_bias ? bias : nullptr);

    const int64_t elem = static_cast<int64_t>(type.elem);
    key.align_a = alignment(a, key.stride_a * elem);
    key.align_b = alignment(b, key.stride_b * elem);
    key.align_c = alignment(c, key.stride_c * elem);
    key.align_bias = with_bias ? alignment(bias, 0) : 0;

    GemmDescs descs;
    const char* step = "";
    cublasStatus_t st = build_descs(descs, key, type, with_bias ? bias : nullptr, &step);
    if (st != CUBLAS_STATUS_SUCCESS) return fail_blas(st, "%s: %s failed", call().c_str(), step);

    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    GemmPlan plan{};
    {
      std::lock_guard<std::mutex> lock(s->blas_mu);
      if (s->handle == nullptr) {
        st = cublasLtCreate(&s->handle);
        if (st != CUBLAS_STATUS_SUCCESS) {
          s->handle = nullptr;
          return fail_blas(st, "%s: cublasLtCreate failed", call().c_str());
        }
      }
      handle = s->handle;
      auto ws = s->workspaces.find(stream);
      if (ws == s->workspaces.end()) {
        void* block = alloc_block(*s, "gemm workspace", device, kWorkspaceBytes);
        if (block == nullptr) {
          return fail("%s: allocating the %zu-byte cuBLASLt workspace failed: %s", call().c_str(),
                      kWorkspaceBytes, t_last_error.c_str());
        }
        ws = s->workspaces.emplace(stream, block).first;
      }
      workspace = ws->second;
      auto found = s->plans.find(key);
      if (found != s->plans.end()) {
        plan = found->second;
      } else {
        cublasLtMatmulPreferenceOpaque_t pref_storage;
        cublasLtMatmulPreference_t pref = &pref_storage;
        const uint64_t max_ws = kWorkspaceBytes;
        // cuBLASLt's "A" is our B and its "B" our A (see build_descs).
        const uint32_t aligns[4] = {key.align_b, key.align_a, key.align_c, key.align_c};
        const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
        st = cublasLtMatmulPreferenceInit(pref);
        if (st == CUBLAS_STATUS_SUCCESS) {
          st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &max_ws, sizeof max_ws);
        }
        for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i) {
          st = cublasLtMatmulPreferenceSetAttribute(pref, align_attrs[i], &aligns[i],
                                                    sizeof aligns[i]);
        }
        if (st == CUBLAS_STATUS_SUCCESS && dtype != kDTypeFloat32) {
          // fp32 accumulation for 16-bit data: no split-K partial sums rounded to the output
          // type (in place or in the workspace), only reductions in the compute type.
          const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
          st = cublasLtMatmulPreferenceSetAttribute(
              pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask);
        }
        if (st != CUBLAS_STATUS_SUCCESS) {
          return fail_blas(st, "%s: setting up the cuBLASLt heuristic preference failed",
                           call().c_str());
        }
        cublasLtMatmulHeuristicResult_t result{};
        int returned = 0;
        st = cublasLtMatmulAlgoGetHeuristic(handle, descs.op(), descs.a(), descs.b(), descs.d(),
                                            descs.d(), pref, 1, &result, &returned);
        if (st != CUBLAS_STATUS_SUCCESS) {
          return fail_blas(st, "%s: cublasLtMatmulAlgoGetHeuristic failed", call().c_str());
        }
        if (returned == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
          return fail_blas(returned == 0 ? CUBLAS_STATUS_NOT_SUPPORTED : result.state,
                           "%s: cuBLASLt has no algorithm for this problem (alignments in bytes: "
                           "A %u, B %u, C %u, bias %u)",
                           call().c_str(), key.align_a, key.align_b, key.align_c, key.align_bias);
        }
        plan.algo = result.algo;
        s->plans.emplace(key, plan);
      }
    }

    const float beta = 0.0f;
    // float64 GEMMs scale in double (the descriptor's scale type)
    const double alpha64 = alpha, beta64 = 0.0;
    const bool f64 = key.dtype == kDTypeFloat64;
    st = cublasLtMatmul(handle, descs.op(), f64 ? static_cast<const void*>(&alpha64) : &alpha, b,
                        descs.a(), a, descs.b(), f64 ? static_cast<const void*>(&beta64) : &beta,
                        c, descs.d(),
                        c, descs.d(), &plan.algo, workspace, kWorkspaceBytes, cu_stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
      // cuBLASLt may leave a CUDA error (e.g. a failed launch) in the runtime's slot.
      const cudaError_t ce = cudaGetLastError();
      if (ce != cudaSuccess) {
        return fail_blas(st, "%s: cublasLtMatmul failed (CUDA: %s)", call().c_str(),
                         cuda_text(ce).c_str());
      }
      return fail_blas(st, "%s: cublasLtMatmul failed", call().c_str());
    }
    return 0;
  });
}

int backend_set_device(int device) {
  return guarded("set_device", [&]() -> int { return enter("set_device", device) ? 0 : -1; });
}

const AnvilDeviceApi kCudaBackend = {
    ANVIL_DEVICE_ABI_VERSION,
    "cuda",
    ANVIL_DEVICE_CUDA,
    &backend_last_error,
    &backend_device_count,
    &backend_describe,
    &backend_capability,
    &backend_alloc,
    &backend_free,
    &backend_copy,
    &backend_memset_zero,
    &backend_stream_create,
    &backend_stream_destroy,
    &backend_stream_synchronize,
    &backend_gemm,
    &backend_set_device,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const AnvilDeviceApi* anvil_device_backend(void) {
  return &kCudaBackend;
}
