// cuda_gemm.cpp — AnvilDeviceApi::gemm of the CUDA device backend: row-major batched GEMMs on
// cuBLASLt (the heuristic's first algorithm, or the tuner's pick among its first 8; cached per
// shape; one workspace per device and stream).
// Shared state and error reporting: cuda_backend_internal.h.
#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "anvil/anvil_device.h"
#include "runtime/cuda/cuda_backend_internal.h"
#include "runtime/cuda/fast_f32_gemm.h"

namespace anvil::cuda_backend {

namespace {

// ---------------------------------------------------------------------------------------------
// GEMM
// ---------------------------------------------------------------------------------------------

// How many of cuBLASLt's heuristic algorithms a GEMM shape times before picking one.
constexpr int kGemmCandidates = ANVIL_GEMM_ALGOS;  // also algo_index's range

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

// cuBLASLt's type of float8 format `dtype` (anvil::DType code 29 e4m3fn, 30 e5m2).
bool fp8_type(int32_t dtype, cudaDataType_t* out) {
  if (dtype == kDTypeFloat8E4M3FN) *out = CUDA_R_8F_E4M3;
  else if (dtype == kDTypeFloat8E5M2) *out = CUDA_R_8F_E5M2;
  else return false;
  return true;
}

// Whether `g` carries float8 operands (the ABI 6 fields are present and set).
bool is_fp8(const AnvilGemmArgs& g) {
  return g.a_dtype != 0 || g.b_dtype != 0;  // gemm_ex zeroes the fields a shorter struct lacks
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
  cublasLtMatrixLayoutOpaque_t a_storage, b_storage, c_storage, d_storage;
  cublasLtMatmulDesc_t op() { return &op_storage; }
  cublasLtMatrixLayout_t a() { return &a_storage; }
  cublasLtMatrixLayout_t b() { return &b_storage; }
  cublasLtMatrixLayout_t c() { return &c_storage; }  // a separate input C (c_input == 2)
  cublasLtMatrixLayout_t d() { return &d_storage; }
  // The layout C is read with: its own, or D's (none, or in place).
  cublasLtMatrixLayout_t c_in(const GemmKey& key) { return key.c_input == 2 ? c() : d(); }
};

bool has_bias(int32_t epilogue) {
  return epilogue == ANVIL_EPILOGUE_BIAS || epilogue == ANVIL_EPILOGUE_BIAS_RELU ||
         epilogue == ANVIL_EPILOGUE_BIAS_GELU_TANH;
}

// cuBLASLt's epilogue for an ANVIL_EPILOGUE_* code (the caller checked the range). Its GELU is
// the tanh approximation, hence ANVIL_EPILOGUE_GELU_TANH.
cublasLtEpilogue_t lt_epilogue(int32_t epilogue) {
  switch (epilogue) {
    case ANVIL_EPILOGUE_BIAS:
      return CUBLASLT_EPILOGUE_BIAS;
    case ANVIL_EPILOGUE_RELU:
      return CUBLASLT_EPILOGUE_RELU;
    case ANVIL_EPILOGUE_GELU_TANH:
      return CUBLASLT_EPILOGUE_GELU;
    case ANVIL_EPILOGUE_BIAS_RELU:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case ANVIL_EPILOGUE_BIAS_GELU_TANH:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    default:
      return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: a row-major matrix is its
// transpose in column-major, so cuBLASLt's "A" is our B, its "B" is our A, its output is n x m
// with leading dimension ldc, and each operand keeps its own transpose flag. The row-major bias
// over columns n becomes a bias over the rows of the column-major output — what
// CUBLASLT_EPILOGUE_BIAS adds (its vector length is the number of rows of D).
// Returns a cuBLAS status and names the failing step in *step.
cublasStatus_t build_descs(GemmDescs& d, const GemmKey& key, const GemmType& type, const void* bias,
                           const AnvilGemmArgs& g, const char** step) {
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
  if (key.epilogue != ANVIL_EPILOGUE_NONE) {
    const uint32_t epi = lt_epilogue(key.epilogue);
    ANVIL_LT(
        cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
        "CUBLASLT_MATMUL_DESC_EPILOGUE");
  }
  const bool fp8 = key.a_dtype != 0;
  if (fp8) {
    // cuBLASLt's A is our B (see above): its scale is our scale_b, and its B's our scale_a.
    const void* sa = g.scale_b;
    const void* sb = g.scale_a;
    if (sa != nullptr)
      ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa,
                                              sizeof sa),
               "CUBLASLT_MATMUL_DESC_A_SCALE_POINTER");
    if (sb != nullptr)
      ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb,
                                              sizeof sb),
               "CUBLASLT_MATMUL_DESC_B_SCALE_POINTER");
    if (key.scale_rowwise != 0) {
      // one scale per row of our A (m, cuBLASLt's B's outer dim) and per column of our B (n)
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode,
                                              sizeof mode),
               "CUBLASLT_MATMUL_DESC_A_SCALE_MODE");
      ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode,
                                              sizeof mode),
               "CUBLASLT_MATMUL_DESC_B_SCALE_MODE");
    }
    const int8_t fast = key.fast_accum != 0 ? 1 : 0;
    ANVIL_LT(cublasLtMatmulDescSetAttribute(d.op(), CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast,
                                            sizeof fast),
             "CUBLASLT_MATMUL_DESC_FAST_ACCUM");
  }
  if (has_bias(key.epilogue)) {
    // The bias has D's type (cuBLASLt's rule for non-integer, non-fp8 outputs): bfloat16 for a
    // bfloat16 D, float16 for float16, float32 for float32. With float8 operands a float32 D
    // takes a bfloat16 bias.
    const int32_t bias_type =
        fp8 && key.dtype == kDTypeFloat32 ? static_cast<int32_t>(CUDA_R_16BF) : type.data;
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
  cudaDataType_t a_type = type.data, b_type = type.data;
  if (fp8) {
    fp8_type(key.a_dtype, &a_type);
    fp8_type(key.b_dtype, &b_type);
  }
  ANVIL_LT(cublasLtMatrixLayoutInit(d.a(), b_type, u(key.trans_b ? k : n),
                                    u(key.trans_b ? n : k), key.ldb),
           "cublasLtMatrixLayoutInit(B)");
  ANVIL_LT(cublasLtMatrixLayoutInit(d.b(), a_type, u(key.trans_a ? m : k),
                                    u(key.trans_a ? k : m), key.lda),
           "cublasLtMatrixLayoutInit(A)");
  ANVIL_LT(cublasLtMatrixLayoutInit(d.d(), type.data, u(n), u(m), key.ldc),
           "cublasLtMatrixLayoutInit(D)");
  if (key.c_input == 2) {
    ANVIL_LT(cublasLtMatrixLayoutInit(d.c(), type.data, u(n), u(m), key.ld_cin),
             "cublasLtMatrixLayoutInit(C)");
  }
  if (key.batch > 1) {
    const int32_t count = static_cast<int32_t>(key.batch);
    const struct {
      cublasLtMatrixLayout_t layout;
      int64_t stride;
      const char* what;
    } batched[] = {{d.a(), key.stride_b, "batch layout of B"},
                   {d.b(), key.stride_a, "batch layout of A"},
                   {d.d(), key.stride_c, "batch layout of D"},
                   {d.c(), key.stride_cin, "batch layout of C"}};
    for (const auto& l : batched) {
      if (l.layout == d.c() && key.c_input != 2) continue;
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

// Whether two m x n row-major matrices (batches `stride` apart) of elem-byte elements share a
// byte; `a` and `b` describe the first and second.
bool matrices_overlap(const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
                      int64_t stride_b, int64_t m, int64_t n, int64_t batch, size_t elem) {
  const auto extent = [&](int64_t ld, int64_t stride) {  // elements from the first to the last
    return static_cast<unsigned __int128>(batch - 1) * static_cast<uint64_t>(stride) +
           static_cast<unsigned __int128>(m - 1) * static_cast<uint64_t>(ld) +
           static_cast<uint64_t>(n);
  };
  const unsigned __int128 a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  const unsigned __int128 a1 = a0 + extent(lda, stride_a) * elem;
  const unsigned __int128 b1 = b0 + extent(ldb, stride_b) * elem;
  return a0 < b1 && b0 < a1;
}

// The GEMM of `g` (gemm and gemm_ex). `ex`: called as gemm_ex, which may answer
// ANVIL_GEMM_NOT_FUSED for a fused problem (an epilogue or a C) cuBLASLt has no algorithm for.
// One cublasLtMatmul of `g` with `algo` (float64 scales in double, the descriptor's scale type;
// C is read from g.c when separate, else from D).
cublasStatus_t matmul(cublasLtHandle_t handle, GemmDescs& descs, const GemmKey& key,
                      const AnvilGemmArgs& g, int32_t c_input, const cublasLtMatmulAlgo_t& algo,
                      void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const float alpha = g.alpha, beta = c_input != 0 ? g.beta : 0.0f;
  const double alpha64 = alpha, beta64 = beta;
  const bool f64 = key.dtype == kDTypeFloat64;
  const void* c_in = c_input == 2 ? g.c : g.d;
  return cublasLtMatmul(handle, descs.op(), f64 ? static_cast<const void*>(&alpha64) : &alpha,
                        g.b, descs.a(), g.a, descs.b(),
                        f64 ? static_cast<const void*>(&beta64) : &beta, c_in, descs.c_in(key),
                        g.d, descs.d(), &algo, workspace, workspace_bytes, stream);
}

// ANVIL_CUDA_GEMM_AUTOTUNE=1 times the first kGemmCandidates; off by default: on the H100 it
// picked no faster plan than the heuristic's first for the bench models and a slower one for the
// fp32 MLP (timed alone, with its operands hot in L2, a candidate is not timed as it runs in
// the model; docs/performance.md).
bool gemm_autotune_enabled() {
  const char* v = std::getenv("ANVIL_CUDA_GEMM_AUTOTUNE");
  return v && std::string(v) == "1";
}

constexpr int kTimingFailed = -1;
constexpr int kCapturing = -2;

// Times each of the `n` heuristic candidates (one warm-up, then 3 runs between CUDA events, on
// the caller's stream and buffers: the output is written, nothing else) and returns the index
// of the fastest that ran; kCapturing while the stream is being captured; kTimingFailed with
// last_error. Candidates cuBLASLt refuses at the call are skipped. Caller holds s.blas_mu.
int time_candidates(DeviceState& s, int device, cudaStream_t stream, cublasLtHandle_t handle,
                    GemmDescs& descs, const GemmKey& key, const AnvilGemmArgs& g,
                    int32_t c_input, const cublasLtMatmulHeuristicResult_t* results, int n) {
  if (stream_capturing(stream)) return kCapturing;
  size_t ws_bytes = 0;
  for (int i = 0; i < n; ++i) ws_bytes = std::max(ws_bytes, results[i].workspaceSize);
  void* ws = ws_bytes > 0 ? stream_workspace(s, device, stream, ws_bytes, "cuBLASLt") : nullptr;
  if (ws_bytes > 0 && ws == nullptr) return kTimingFailed;
  cudaError_t e = cudaSuccess;
  const int best = fastest_candidate(stream, n, [&](int i) {
    return results[i].state == CUBLAS_STATUS_SUCCESS &&
           matmul(handle, descs, key, g, c_input, results[i].algo, ws, results[i].workspaceSize,
                  stream) == CUBLAS_STATUS_SUCCESS;
  }, e);
  if (e != cudaSuccess) {
    fail_cuda(e, "gemm(device=%d, m=%" PRId64 ", n=%" PRId64 ", k=%" PRId64
              "): timing the cuBLASLt candidates failed", device, key.m, key.n, key.k);
    return kTimingFailed;
  }
  return best < 0 ? 0 : best;  // none ran: the heuristic's first
}

// The float8 GEMM's own rules on its arguments (anvil_device.h, ABI 6), checked before the
// device is touched; 0 when `g` keeps them. `call` formats the call for messages.
template <typename Call>
int check_fp8(const AnvilGemmArgs& g, const Call& call) {
  cudaDataType_t t;
  if (!fp8_type(g.a_dtype, &t) || !fp8_type(g.b_dtype, &t))
    return fail("%s: float8 operands must be float8_e4m3fn (%d) or float8_e5m2 (%d), got a_dtype "
                "%d and b_dtype %d", call().c_str(), kDTypeFloat8E4M3FN, kDTypeFloat8E5M2,
                g.a_dtype, g.b_dtype);
  if (g.a_dtype == kDTypeFloat8E5M2 && g.b_dtype == kDTypeFloat8E5M2)
    return fail("%s: cuBLASLt has no float8_e5m2 x float8_e5m2 GEMM", call().c_str());
  if (g.dtype != kDTypeFloat16 && g.dtype != kDTypeBFloat16 && g.dtype != kDTypeFloat32)
    return fail("%s: a float8 GEMM writes float16, bfloat16 or float32, not dtype %d",
                call().c_str(), g.dtype);
  if (g.trans_a != 0 || g.trans_b != 1)
    return fail("%s: a float8 GEMM takes A row-major and B column-major (trans_a 0, trans_b 1: "
                "cuBLASLt's TN layout)", call().c_str());
  if (g.batch != 1 || g.c != nullptr || g.beta != 0.0f ||
      (g.epilogue != ANVIL_EPILOGUE_NONE && g.epilogue != ANVIL_EPILOGUE_BIAS))
    return fail("%s: a float8 GEMM has batch 1, no C and no epilogue but a bias", call().c_str());
  if (g.lda % 16 != 0 || g.ldb % 16 != 0)
    return fail("%s: a float8 GEMM needs leading dimensions of A and B that are multiples of 16",
                call().c_str());
  return 0;
}

// Whether `device` has FP8 tensor cores (sm_89 or newer); 0 when it has, else fails naming it.
template <typename Call>
int check_fp8_device(int device, const Call& call) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return fail("%s: reading the compute capability of device %d failed", call().c_str(), device);
  }
  if (major * 10 + minor < 89)
    return fail("%s: a float8 GEMM (aten._scaled_mm) needs FP8 tensor cores (sm_89 or newer); "
                "device %d is sm_%d%d", call().c_str(), device, major, minor);
  return 0;
}

int run_gemm(const char* fn, int device, void* stream, const AnvilGemmArgs& g, bool ex) {
  // The call, for messages (built only on failure).
  const auto call = [&]() {
    return format("%s(device=%d, stream=%p, dtype=%d, trans_a=%d, trans_b=%d, m=%" PRId64
                  ", n=%" PRId64 ", k=%" PRId64 ", lda=%" PRId64 ", stride_a=%" PRId64
                  ", ldb=%" PRId64 ", stride_b=%" PRId64 ", c=%p, ldc=%" PRId64
                  ", stride_c=%" PRId64 ", ld_out=%" PRId64 ", stride_out=%" PRId64
                  ", batch=%" PRId64 ", beta=%g, epilogue=%d, allow_tf32=%d)",
                  fn, device, stream, g.dtype, g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda,
                  g.stride_a, g.ldb, g.stride_b, g.c, g.ldc, g.stride_c, g.ldd, g.stride_d, g.batch,
                  static_cast<double>(g.beta), g.epilogue, g.allow_tf32);
  };
  const int64_t m = g.m, n = g.n, k = g.k, batch = g.batch;
  GemmType type{};
  if (!gemm_type(g.dtype, &type)) {
    return fail(
        "%s: unsupported dtype code %d (the CUDA GEMM takes float32 = %d, float64 = %d, "
        "float16 = %d and bfloat16 = %d)",
        call().c_str(), g.dtype, kDTypeFloat32, kDTypeFloat64, kDTypeFloat16, kDTypeBFloat16);
  }
  if ((g.trans_a != 0 && g.trans_a != 1) || (g.trans_b != 0 && g.trans_b != 1)) {
    return fail("%s: trans_a and trans_b must be 0 or 1", call().c_str());
  }
  if (g.epilogue < ANVIL_EPILOGUE_NONE || g.epilogue > ANVIL_EPILOGUE_BIAS_GELU_TANH ||
      (!ex && g.epilogue > ANVIL_EPILOGUE_BIAS)) {
    return fail("%s: unknown epilogue %d (expected %d none%s)", call().c_str(), g.epilogue,
                ANVIL_EPILOGUE_NONE,
                ex ? " to 5 bias + gelu (anvil_device.h ANVIL_EPILOGUE_*)" : " or 1 bias");
  }
  if (m < 0 || n < 0 || k < 0 || batch < 0) {
    return fail("%s: negative size", call().c_str());
  }
  if (g.algo_index < 0 || g.algo_index >= kGemmCandidates) {
    return fail("%s: algo_index %d is not in 0..%d (the heuristic's first %d algorithms)",
                call().c_str(), g.algo_index, kGemmCandidates - 1, kGemmCandidates);
  }
  if (batch > INT32_MAX) {
    return fail("%s: batch exceeds cuBLASLt's limit of %d", call().c_str(), INT32_MAX);
  }
  if (g.stride_a < 0 || g.stride_b < 0 || g.stride_d < 0 || (g.c && g.stride_c < 0)) {
    return fail("%s: negative batch stride", call().c_str());
  }
  if (g.c == nullptr && g.beta != 0.0f) {
    return fail("%s: beta is not 0 but there is no C to scale", call().c_str());
  }
  const bool fp8 = is_fp8(g);
  if (fp8) {
    if (const int rc = check_fp8(g, call); rc != 0) return rc;
  }
  DeviceState* s = device_state(fn, device);
  if (s == nullptr) return -1;
  if (fp8) {
    if (const int rc = check_fp8_device(device, call); rc != 0) return rc;
  }
  if (m == 0 || n == 0 || batch == 0) return 0;  // empty output
  if (g.d == nullptr) return fail("%s: the output is null", call().c_str());
  const bool with_bias = has_bias(g.epilogue);
  if (with_bias && g.bias == nullptr) {
    return fail("%s: a bias epilogue needs a bias pointer", call().c_str());
  }
  if (!with_bias && g.bias != nullptr) {
    return fail("%s: a bias pointer without a bias epilogue", call().c_str());
  }
  if (g.ldd < n)
    return fail("%s: the output's leading dimension must be at least n", call().c_str());
  if (batches_overlap(m, n, g.ldd, g.stride_d, batch)) {
    return fail(
        "%s: the output's batch stride must be at least (m - 1) * ld + n so that its batches "
        "do not overlap",
        call().c_str());
  }
  int32_t c_input = 0;
  if (g.c != nullptr) {
    if (g.ldc < n) return fail("%s: ldc must be at least n", call().c_str());
    if (g.c == g.d) {
      if (g.ldc != g.ldd || (batch > 1 && g.stride_c != g.stride_d)) {
        return fail(
            "%s: C is the output itself but with another leading dimension or batch "
            "stride (in place, both must match)",
            call().c_str());
      }
      c_input = 1;
    } else {
      if (matrices_overlap(g.c, g.ldc, batch > 1 ? g.stride_c : 0, g.d, g.ldd,
                           batch > 1 ? g.stride_d : 0, m, n, batch, type.elem)) {
        return fail(
            "%s: C overlaps the output without being it (C must be the output itself "
            "or memory apart from it)",
            call().c_str());
      }
      c_input = 2;
    }
  }
  const bool fused = ex && (g.epilogue != ANVIL_EPILOGUE_NONE || c_input != 0);
  if (k > 0) {
    if (g.a == nullptr || g.b == nullptr) return fail("%s: A or B is null", call().c_str());
    if (g.lda < (g.trans_a ? m : k)) {
      return fail("%s: lda must be at least %s (A is stored row-major as %s)", call().c_str(),
                  g.trans_a ? "m" : "k", g.trans_a ? "k x m" : "m x k");
    }
    if (g.ldb < (g.trans_b ? k : n)) {
      return fail("%s: ldb must be at least %s (B is stored row-major as %s)", call().c_str(),
                  g.trans_b ? "k" : "n", g.trans_b ? "n x k" : "k x n");
    }
  } else if (g.epilogue > ANVIL_EPILOGUE_BIAS || c_input != 0) {
    // k == 0 with an activation or a C: no cuBLASLt call to fuse them into; the caller runs the
    // unfused form (C = 0, then its own epilogue). Only gemm_ex takes these.
    fail("%s: k == 0 with an activation or C: not fused", call().c_str());
    return ANVIL_GEMM_NOT_FUSED;
  }

  GemmKey key{};
  key.dtype = g.dtype;
  key.trans_a = g.trans_a;
  key.trans_b = g.trans_b;
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = k > 0 ? g.lda : 0;
  key.ldb = k > 0 ? g.ldb : 0;
  key.ldc = g.ldd;
  key.batch = batch;
  key.stride_a = batch > 1 ? g.stride_a : 0;
  key.stride_b = batch > 1 ? g.stride_b : 0;
  key.stride_c = batch > 1 ? g.stride_d : 0;
  key.epilogue = g.epilogue;
  // TF32 is a float32 GEMM's option; an FP8 GEMM with a float32 D computes in plain 32F
  key.tf32 = g.dtype == kDTypeFloat32 && g.allow_tf32 == 1 && !fp8 ? 1 : 0;  // not 3xTF32's 2
  key.c_input = c_input;
  key.ld_cin = c_input == 2 ? g.ldc : 0;
  key.stride_cin = c_input == 2 && batch > 1 ? g.stride_c : 0;
  key.algo_index = g.algo_index;
  if (fp8) {
    key.a_dtype = g.a_dtype;
    key.b_dtype = g.b_dtype;
    key.scale_rowwise = g.scale_rowwise != 0 ? 1 : 0;
    key.fast_accum = g.fast_accum != 0 ? 1 : 0;
  }

  if (enter(fn, device) == nullptr) return -1;
  const auto cu_stream = static_cast<cudaStream_t>(stream);
  if (k == 0 && fp8 && with_bias && g.dtype == kDTypeFloat32)
    return fail("%s: k == 0 with a bfloat16 bias for a float32 output is not supported",
                call().c_str());
  if (k == 0) return gemm_k_zero(device, cu_stream, key, type, g.d, with_bias ? g.bias : nullptr);
  // fp32 through the 3xTF32 kernel (fast_f32_gemm.h) where the caller allows it and it wins
  if (g.dtype == kDTypeFloat32 && g.allow_tf32 == ANVIL_FP32_3XTF32 && !fp8 && batch == 1 &&
      g.epilogue == ANVIL_EPILOGUE_NONE && g.algo_index == 0) {
    const FastF32Gemm f{g.trans_a, g.trans_b, m, n, k, g.alpha, g.beta,
                        static_cast<const float*>(g.a), g.lda, static_cast<const float*>(g.b),
                        g.ldb, static_cast<const float*>(g.c ? g.c : g.d), g.c ? g.ldc : g.ldd,
                        static_cast<float*>(g.d), g.ldd};
    if (fast_f32_gemm_takes(f) && fast_f32_gemm_device(device)) {
      const cudaError_t e = fast_f32_gemm(f, cu_stream);
      if (e == cudaSuccess) return 0;
      if (e != cudaErrorNotSupported) return fail_cuda(e, "%s", call().c_str());
    }
  }

  const int64_t elem = static_cast<int64_t>(type.elem);
  const int64_t ab_elem = fp8 ? 1 : elem;
  key.align_a = alignment(g.a, key.stride_a * ab_elem);
  key.align_b = alignment(g.b, key.stride_b * ab_elem);
  key.align_c = alignment(g.d, key.stride_c * elem);
  key.align_bias = with_bias ? alignment(g.bias, 0) : 0;
  key.align_cin = c_input == 2 ? alignment(g.c, key.stride_cin * elem) : 0;

  GemmDescs descs;
  const char* step = "";
  cublasStatus_t st = build_descs(descs, key, type, with_bias ? g.bias : nullptr, g, &step);
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
    auto found = s->plans.find(key);
    if (found != s->plans.end()) {
      plan = found->second;
    } else {
      cublasLtMatmulPreferenceOpaque_t pref_storage;
      cublasLtMatmulPreference_t pref = &pref_storage;
      const uint64_t max_ws = kWorkspaceBytes;
      // cuBLASLt's "A" is our B and its "B" our A (see build_descs).
      const uint32_t aligns[4] = {key.align_b, key.align_a,
                                  c_input == 2 ? key.align_cin : key.align_c, key.align_c};
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
      if (st == CUBLAS_STATUS_SUCCESS && g.dtype != kDTypeFloat32) {
        // fp32 accumulation for 16-bit data: no split-K partial sums rounded to the output
        // type (in place or in the workspace), only reductions in the compute type.
        const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                  &mask, sizeof mask);
      }
      if (st != CUBLAS_STATUS_SUCCESS) {
        return fail_blas(st, "%s: setting up the cuBLASLt heuristic preference failed",
                         call().c_str());
      }
      bool cache = true;
      cublasLtMatmulHeuristicResult_t results[kGemmCandidates]{};
      int returned = 0;
      st = cublasLtMatmulAlgoGetHeuristic(handle, descs.op(), descs.a(), descs.b(), descs.c_in(key),
                                          descs.d(), pref, kGemmCandidates, results, &returned);
      cublasLtMatmulHeuristicResult_t& result = results[0];
      const bool none =
          st == CUBLAS_STATUS_NOT_SUPPORTED ||
          (st == CUBLAS_STATUS_SUCCESS && (returned == 0 || result.state != CUBLAS_STATUS_SUCCESS));
      if (st != CUBLAS_STATUS_SUCCESS && !none) {
        return fail_blas(st, "%s: cublasLtMatmulAlgoGetHeuristic failed", call().c_str());
      }
      if (none) {
        const cublasStatus_t why = st != CUBLAS_STATUS_SUCCESS ? st
                                   : returned == 0             ? CUBLAS_STATUS_NOT_SUPPORTED
                                                               : result.state;
        if (!fused) {
          return fail_blas(why,
                           "%s: cuBLASLt has no algorithm for this problem (alignments in "
                           "bytes: A %u, B %u, C %u, bias %u)",
                           call().c_str(), key.align_a, key.align_b, key.align_c, key.align_bias);
        }
        plan.none = true;
      } else if (key.algo_index > 0) {
        // the tuner's pick among the heuristic's algorithms; where it offers fewer here (another
        // GPU or cuBLAS), its first
        const int i = key.algo_index < returned &&
                              results[key.algo_index].state == CUBLAS_STATUS_SUCCESS
                          ? key.algo_index
                          : 0;
        plan.algo = results[i].algo;
        plan.workspace = results[i].workspaceSize;
        plan.picked = i;
      } else {
        plan.algo = result.algo;
        plan.workspace = result.workspaceSize;
        // Benchmark-select among the heuristic's first candidates (issue 16: cuBLASLt's
        // algorithms as autotuning candidates). Not in place with beta != 0 (D += ..., a timing
        // run would change the result) and not while the stream is captured (decided on the next
        // plain run, the plan not cached until then).
        const bool repeatable = !(c_input == 1 && g.beta != 0.0f);
        if (returned > 1 && repeatable && gemm_autotune_enabled()) {
          const int picked = time_candidates(*s, device, cu_stream, handle, descs, key, g, c_input,
                                             results, returned);
          if (picked == kTimingFailed) return -1;
          if (picked == kCapturing) {
            cache = false;
          } else {
            plan.algo = results[picked].algo;
            plan.workspace = results[picked].workspaceSize;
            plan.candidates = returned;
            plan.picked = picked;
          }
        }
      }
      if (cache) s->plans.emplace(key, plan);
    }
    if (plan.none) {
      fail(
          "%s: cuBLASLt has no algorithm for the fused epilogue / C (alignments in bytes: A %u, "
          "B %u, D %u, C %u, bias %u): not fused",
          call().c_str(), key.align_a, key.align_b, key.align_c, key.align_cin, key.align_bias);
      return ANVIL_GEMM_NOT_FUSED;
    }
    if (plan.workspace > 0) {
      workspace = stream_workspace(*s, device, stream, plan.workspace, "cuBLASLt");
      if (workspace == nullptr) return fail("%s: %s", call().c_str(), t_last_error.c_str());
    }
  }

  st = matmul(handle, descs, key, g, c_input, plan.algo, workspace, plan.workspace, cu_stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED && fused) {
    // the heuristic's algorithm refused at the call (nothing launched): unfused from now on
    std::lock_guard<std::mutex> lock(s->blas_mu);
    s->plans[key].none = true;
    fail("%s: cublasLtMatmul does not support the fused epilogue / C: not fused", call().c_str());
    return ANVIL_GEMM_NOT_FUSED;
  }
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
}

}  // namespace

int backend_gemm(int device, void* stream, int32_t dtype, int trans_a, int trans_b, int64_t m,
                 int64_t n, int64_t k, float alpha, const void* a, int64_t lda, int64_t stride_a,
                 const void* b, int64_t ldb, int64_t stride_b, void* c, int64_t ldc,
                 int64_t stride_c, int64_t batch, int epilogue, const void* bias, int allow_tf32) {
  return guarded("gemm", [&]() -> int {
    AnvilGemmArgs g{};
    g.struct_size = sizeof g;
    g.dtype = dtype;
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.beta = 0.0f;
    g.a = a;
    g.lda = lda;
    g.stride_a = stride_a;
    g.b = b;
    g.ldb = ldb;
    g.stride_b = stride_b;
    g.d = c;
    g.ldd = ldc;
    g.stride_d = stride_c;
    g.batch = batch;
    g.epilogue = epilogue;
    g.bias = epilogue == ANVIL_EPILOGUE_BIAS ? bias : nullptr;
    g.allow_tf32 = allow_tf32;
    return run_gemm("gemm", device, stream, g, /*ex=*/false);
  });
}

int backend_gemm_ex(int device, void* stream, const AnvilGemmArgs* args) {
  return guarded("gemm_ex", [&]() -> int {
    if (args == nullptr) return fail("gemm_ex(device=%d): the arguments are null", device);
    // ABI 3 has the fields up to the bias; ABI 6 adds float8's, ABI 8 algo_index. A caller
    // built for an earlier ABI passes a shorter struct: the fields it lacks read as 0.
    constexpr size_t kAbi3Size = offsetof(AnvilGemmArgs, a_dtype);
    if (args->struct_size < kAbi3Size || args->struct_size > sizeof(AnvilGemmArgs)) {
      return fail(
          "gemm_ex(device=%d): struct_size %u is not between %zu (device ABI 3) and "
          "sizeof(AnvilGemmArgs) = %zu (a caller built for another device ABI)",
          device, args->struct_size, kAbi3Size, sizeof(AnvilGemmArgs));
    }
    AnvilGemmArgs given{};
    std::memcpy(&given, args, args->struct_size);
    given.struct_size = sizeof given;
    return run_gemm("gemm_ex", device, stream, given, /*ex=*/true);
  });
}

// The stream's workspace, grown to `bytes` (work queued on the stream with the smaller one
// finishes first: it goes back to the allocator only after it).
void* stream_workspace(DeviceState& s, int device, void* stream, size_t bytes, const char* who) {
  Workspace& ws = s.workspaces[stream];
  if (bytes <= ws.bytes) return ws.block;
  if (ws.block != nullptr) {
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      fail_cuda(e, "waiting for the stream before growing its %s workspace failed", who);
      return nullptr;
    }
    free_block(s, ws.block);
    ws = Workspace{};
  }
  void* block = alloc_block(s, "workspace", device, bytes);
  if (block == nullptr) {
    fail("allocating the %zu-byte %s workspace failed: %s", bytes, who, t_last_error.c_str());
    return nullptr;
  }
  ws = Workspace{block, bytes};
  return block;
}

}  // namespace anvil::cuda_backend
