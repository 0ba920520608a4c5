// Internal to the CUDA device backend (src/runtime/cuda/*.cpp): error reporting, per-device
// state and the allocator's block functions the GEMM file shares with the rest. Not installed;
// nothing outside libanvil_cuda.so sees these names (hidden visibility).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "anvil/anvil_device.h"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "anvil/anvil_device.h"

namespace anvil::cuda_backend {

/// The calling thread's last failure (AnvilDeviceApi::last_error).
extern thread_local std::string t_last_error;

/// printf-style formatting into a std::string.
[[gnu::format(printf, 1, 2)]] std::string format(const char* fmt, ...);
/// Sets the message; returns -1 so that int entry points can `return fail(...)`.
[[gnu::format(printf, 1, 2)]] int fail(const char* fmt, ...);
/// "<cudaErrorName>: <description>".
std::string cuda_text(cudaError_t e);
/// As fail(), appending ": <cudaErrorName>: <description>", and clearing the runtime's
/// per-thread last error.
[[gnu::format(printf, 2, 3)]] int fail_cuda(cudaError_t e, const char* fmt, ...);
/// As fail(), appending the cuBLAS status name and text.
[[gnu::format(printf, 2, 3)]] int fail_blas(cublasStatus_t s, const char* fmt, ...);

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

// anvil::DType codes the entry points take (core/dtype.h; this library does not link core).
constexpr int32_t kDTypeFloat16 = 6;
constexpr int32_t kDTypeFloat32 = 7;
constexpr int32_t kDTypeFloat64 = 8;
constexpr int32_t kDTypeBFloat16 = 13;
constexpr int32_t kDTypeFloat8E4M3FN = 29;
constexpr int32_t kDTypeFloat8E5M2 = 30;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kSmallRound = 512;   // granularity of blocks up to kSmallLimit
constexpr size_t kSmallLimit = kMiB;  // above this, blocks are multiples of kLargeRound
constexpr size_t kLargeRound = 2 * kMiB;
// A block of kSlabLimit or less comes from a slab: one cudaMalloc cut into kSlabPieces equal
// pieces. Slabs are never freed, so only small sizes take them: at most 32 size classes, each
// holding its peak use plus under one slab (512 KiB) spare.
constexpr size_t kSlabLimit = 16 * 1024;
constexpr size_t kSlabPieces = 32;
// The most cuBLASLt workspace a GEMM may use (the heuristic is asked for algorithms within it).
// Each stream's workspace grows to what its GEMMs' plans need, no more: every runner has its own
// stream, and a batch-1 bf16 model's plans need little while fp32 split-K plans need megabytes.
constexpr size_t kWorkspaceBytes = 32 * kMiB;

// A cached GEMM decision: the heuristic's algorithm for one problem shape, or (a fused problem
// of gemm_ex) the fact that cuBLASLt has none, so that the unfused fallback is not re-asked.
struct GemmPlan {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;  // bytes the algorithm needs (the heuristic's workspaceSize)
  bool none = false;     // no algorithm: gemm_ex answers ANVIL_GEMM_NOT_FUSED
  int candidates = 1;    // heuristic algorithms timed (1: the first taken untimed)
  int picked = 0;        // the index of the one taken
};

// A stream's cuBLASLt workspace.
struct Workspace {
  void* block = nullptr;
  size_t bytes = 0;
};

// Everything that changes the heuristic's answer. Strides are zero when batch == 1. ldc,
// stride_c and align_c describe the output D; c_input says where the added matrix C comes from
// (gemm_ex's beta * C): 0 none, 1 D itself (in place), 2 a separate buffer with ld_cin,
// stride_cin, align_cin.
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
  int32_t c_input;
  int64_t ld_cin, stride_cin;
  uint32_t align_cin;
  int32_t a_dtype, b_dtype;  // float8 operands (0: of dtype)
  int32_t scale_rowwise, fast_accum;
  int32_t algo_index;  // the heuristic's algorithm asked for (AnvilGemmArgs::algo_index)
  auto operator<=>(const GemmKey&) const = default;
};

/// A block handed out by the caching allocator: its rounded size, and whether it is a piece of
/// a slab (a block of kSlabLimit or less carved from one cudaMalloc, never cudaFree()d alone).
struct LiveBlock {
  size_t size = 0;
  bool piece = false;
};

struct DeviceState {
  // Caching allocator: rounded size -> free blocks, and live block -> its size. Blocks up to
  // kSlabLimit are carved from slabs (one cudaMalloc gives kSlabPieces: an 8 B
  // functional collective's output costs a map lookup, not a cudaMalloc of several
  // microseconds); their free pieces wait in `pieces`, the slabs live as long as the process.
  std::mutex alloc_mu;
  std::multimap<size_t, void*> cached;
  std::unordered_map<size_t, std::vector<void*>> pieces;
  std::unordered_map<void*, LiveBlock> live;
  size_t cached_bytes = 0;
  size_t live_bytes = 0;

  // cuBLASLt. Lock order: blas_mu before alloc_mu (workspaces come from the allocator).
  std::mutex blas_mu;
  cublasLtHandle_t handle = nullptr;
  // One workspace per stream: GEMMs queued on different streams may run concurrently, so they
  // must not share scratch memory; GEMMs on one stream are ordered by the stream.
  std::unordered_map<void*, Workspace> workspaces;
  std::map<GemmKey, GemmPlan> plans;
};

/// Validates `device` for function `fn`; the DeviceState on success, null with last_error.
DeviceState* device_state(const char* fn, int device);
/// device_state() plus cudaSetDevice(device).
DeviceState* enter(const char* fn, int device);
/// A cached or new block of at least `bytes` on the current device `device`; null with
/// last_error.
void* alloc_block(DeviceState& s, const char* fn, int device, size_t bytes);
/// Returns a live block to the cache. False (no message) when `ptr` is not live on `s`.
bool free_block(DeviceState& s, void* ptr);

/// AnvilDeviceApi::gemm (cuda_gemm.cpp).
int backend_gemm(int device, void* stream, int32_t dtype, int trans_a, int trans_b, int64_t m,
                 int64_t n, int64_t k, float alpha, const void* a, int64_t lda, int64_t stride_a,
                 const void* b, int64_t ldb, int64_t stride_b, void* c, int64_t ldc,
                 int64_t stride_c, int64_t batch, int epilogue, const void* bias, int allow_tf32);

/// AnvilDeviceApi::gemm_ex (cuda_gemm.cpp): ABI 3, fused epilogues and a separate C.
int backend_gemm_ex(int device, void* stream, const AnvilGemmArgs* args);

/// AnvilDeviceApi::graph_* (cuda_graph.cpp).
int backend_graph_begin(int device, void* stream);
int backend_graph_end(int device, void* stream, void** exec);
int backend_graph_launch(int device, void* exec, void* stream);
int backend_graph_destroy(int device, void* exec);
int backend_mem_info(int device, size_t* free_bytes, size_t* total_bytes);

/// AnvilDeviceApi::attention (cuda_attention.cpp: cuDNN's fused attention).
int backend_attention(int device, void* stream, const AnvilAttentionArgs* args);

/// AnvilDeviceApi::conv (cuda_conv.cpp: cuDNN's convolution through its graph API).
int backend_conv(int device, void* stream, const AnvilConvArgs* args);

/// The workspace of `stream` on device `device`, grown to at least `bytes` (waiting for the
/// stream first when an older, smaller block must go). Callers hold s.blas_mu. Null with
/// last_error on failure.
void* stream_workspace(DeviceState& s, int device, void* stream, size_t bytes, const char* who);

/// True when `stream` is being captured into a CUDA graph (or cannot be asked; the error is
/// cleared): work that waits on the GPU must not run then (cuda_gemm.cpp).
bool stream_capturing(void* stream);
/// Times candidates 0 .. n-1 on `stream` (cuda_gemm.cpp): each that `run(i)` accepts (its first
/// call, a warm-up) runs 3 more times between two CUDA events, waited on by the host (never the
/// whole device, so another thread's graph capture stays valid). The fastest's index, or -1
/// when none ran or an event failed (`err` then holds the CUDA error).
int fastest_candidate(void* stream, int n, const std::function<bool(int)>& run, cudaError_t& err);

}  // namespace anvil::cuda_backend
