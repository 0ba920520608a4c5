// AnvilRtApi::gemm (ABI minor 8): one GEMM through the library the autotuner chose
// (include/anvil/anvil_rt.h AnvilGemmCall; what each library takes: runtime/gemm_call.h). The
// call is checked here (sizes, leading dimensions, pointers, dtypes, epilogue codes); libraries
// without a fused epilogue get their bias and activation applied after the product on C.
#include "runtime/gemm_call.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "runtime/gemm_onednn.h"
#include "runtime/kernels/gemm_packed.h"
#include "runtime/rt_api.h"

namespace anvil::runtime {

namespace {

constexpr int32_t kF32 = static_cast<int32_t>(DType::kFloat32);
constexpr int32_t kF64 = static_cast<int32_t>(DType::kFloat64);
constexpr int32_t kBf16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kF16 = static_cast<int32_t>(DType::kFloat16);
constexpr int32_t kS8 = static_cast<int32_t>(DType::kInt8);
constexpr int32_t kS32 = static_cast<int32_t>(DType::kInt32);

std::string code_name(int32_t code) {
  switch (code) {
    case kF32: return "fp32";
    case kF64: return "fp64";
    case kBf16: return "bf16";
    case kF16: return "fp16";
    case kS8: return "int8";
    case kS32: return "int32";
    default: return "dtype " + std::to_string(code);
  }
}

template <typename T>
T activate(T x, int32_t act) {
  switch (act) {
    case ANVIL_GEMM_ACT_RELU: return x > T(0) ? x : T(0);
    case ANVIL_GEMM_ACT_RELU6: return std::min<T>(std::max<T>(x, T(0)), T(6));
    case ANVIL_GEMM_ACT_GELU_ERF: return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752)));
    case ANVIL_GEMM_ACT_GELU_TANH: {
      const T inner = T(0.79788456080286536) * (x + T(0.044715) * x * x * x);
      return T(0.5) * x * (T(1) + std::tanh(inner));
    }
    case ANVIL_GEMM_ACT_SILU: return x / (T(1) + std::exp(-x));
    default: return x;
  }
}

/// Bias and activation over C (storage T, arithmetic F), for libraries that do not fuse them.
template <typename T, typename F>
void epilogue_as(const AnvilGemmCall& g) {
  T* c = static_cast<T*>(g.c);
  const T* bias = static_cast<const T*>(g.bias);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      F v = F(c[i * g.ldc + j]);
      if (bias && g.bias_kind == ANVIL_GEMM_BIAS_COL) v += F(bias[j]);
      if (bias && g.bias_kind == ANVIL_GEMM_BIAS_ROW) v += F(bias[i]);
      c[i * g.ldc + j] = T(activate<F>(v, g.activation));
    }
}

void epilogue(const AnvilGemmCall& g) {
  if ((!g.bias || g.bias_kind == ANVIL_GEMM_BIAS_NONE) && g.activation == ANVIL_GEMM_ACT_NONE)
    return;
  switch (g.c_dtype) {
    case kF32: return epilogue_as<float, float>(g);
    case kF64: return epilogue_as<double, double>(g);
    case kBf16: return epilogue_as<BFloat16, float>(g);
    case kF16: return epilogue_as<Half, float>(g);
    default: return epilogue_as<int32_t, int64_t>(g);  // int32: bias only (activations are checked)
  }
}

/// K = 0: C = beta * C (beta 0: zeros, C not read), then the epilogue.
template <typename T, typename F>
void scale_c(const AnvilGemmCall& g) {
  T* c = static_cast<T*>(g.c);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j)
      c[i * g.ldc + j] = g.beta == 0.0f ? T(F(0)) : T(F(g.beta) * F(c[i * g.ldc + j]));
}
void empty_product(const AnvilGemmCall& g) {
  switch (g.c_dtype) {
    case kF32: scale_c<float, float>(g); break;
    case kF64: scale_c<double, double>(g); break;
    case kBf16: scale_c<BFloat16, float>(g); break;
    case kF16: scale_c<Half, float>(g); break;
    default: scale_c<int32_t, int64_t>(g); break;
  }
  epilogue(g);
}

/// The checks every library shares: sizes, leading dimensions, pointers, dtype pairs, codes.
void validate(const AnvilGemmCall& g) {
  const std::string where = gemm_call_str(g);
  if (g.m < 0 || g.n < 0 || g.k < 0)
    throw Error("negative GEMM size", where, "m, n, k >= 0",
                std::to_string(g.m) + ", " + std::to_string(g.n) + ", " + std::to_string(g.k));
  if (g.m == 0 || g.n == 0) return;
  // A and B are not read when K = 0.
  const int64_t need_a = g.k == 0 ? 0 : g.trans_a ? g.m : g.k;
  const int64_t need_b = g.k == 0 ? 0 : g.trans_b ? g.k : g.n;
  if (g.lda < need_a || g.ldb < need_b ||
      g.ldc < g.n)
    throw Error("GEMM leading dimension too small", where,
                "lda >= " + std::to_string(need_a) + ", ldb >= " + std::to_string(need_b) +
                    ", ldc >= " + std::to_string(g.n),
                std::to_string(g.lda) + ", " + std::to_string(g.ldb) + ", " +
                    std::to_string(g.ldc));
  if (!g.c || (g.k > 0 && (!g.a || !g.b)))
    throw Error("null GEMM operand", where, "non-null a, b, c", "");
  if (g.bias_kind < ANVIL_GEMM_BIAS_NONE || g.bias_kind > ANVIL_GEMM_BIAS_ROW ||
      g.activation < ANVIL_GEMM_ACT_NONE || g.activation > ANVIL_GEMM_ACT_SILU)
    throw Error("unknown GEMM epilogue code", where, "bias_kind 0-2, activation 0-5",
                std::to_string(g.bias_kind) + ", " + std::to_string(g.activation));
  if (g.bias_kind != ANVIL_GEMM_BIAS_NONE && !g.bias)
    throw Error("GEMM bias kind set but bias is null", where, "a bias pointer", "null");
  const bool same = g.a_dtype == g.b_dtype;
  const bool ok = same && ((g.a_dtype == kF32 && g.c_dtype == kF32) ||
                           (g.a_dtype == kF64 && g.c_dtype == kF64) ||
                           ((g.a_dtype == kBf16 || g.a_dtype == kF16) &&
                            (g.c_dtype == g.a_dtype || g.c_dtype == kF32)) ||
                           (g.a_dtype == kS8 && g.c_dtype == kS32));
  if (!ok)
    throw Error("GEMM dtypes not supported", where,
                "fp32, fp64, bf16 -> bf16|fp32, fp16 -> fp16|fp32, int8 -> int32",
                code_name(g.a_dtype) + " x " + code_name(g.b_dtype) + " -> " +
                    code_name(g.c_dtype));
  if (g.c_dtype == kS32 && g.activation != ANVIL_GEMM_ACT_NONE)
    throw Error("int32 GEMM output takes no activation", where, "activation 0",
                std::to_string(g.activation));
}

/// `rows` x `cols` stored elements (row stride ld) of a bf16 / fp16 / fp32 matrix as compact fp32.
std::vector<float> to_f32(const void* p, int32_t code, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * ld + c;
      out[r * cols + c] = code == kBf16  ? float(static_cast<const BFloat16*>(p)[i])
                          : code == kF16 ? float(static_cast<const Half*>(p)[i])
                                         : static_cast<const float*>(p)[i];
    }
  return out;
}

/// bf16 / fp16 without oneDNN: operands widened to fp32, one fp32 GEMM, rounded once.
void widened_gemm(const AnvilGemmCall& g) {
  const std::vector<float> a = g.trans_a ? to_f32(g.a, g.a_dtype, g.k, g.m, g.lda)
                                         : to_f32(g.a, g.a_dtype, g.m, g.k, g.lda);
  const std::vector<float> b = g.trans_b ? to_f32(g.b, g.b_dtype, g.n, g.k, g.ldb)
                                         : to_f32(g.b, g.b_dtype, g.k, g.n, g.ldb);
  std::vector<float> c = g.beta != 0.0f ? to_f32(g.c, g.c_dtype, g.m, g.n, g.ldc)
                                        : std::vector<float>(static_cast<size_t>(g.m * g.n));
  gemm(g.trans_a != 0, g.trans_b != 0, g.m, g.n, g.k, g.alpha, a.data(),
       g.trans_a ? g.m : g.k, b.data(), g.trans_b ? g.k : g.n, g.beta, c.data(), g.n);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      const float v = c[i * g.n + j];
      const int64_t o = i * g.ldc + j;
      if (g.c_dtype == kBf16) static_cast<BFloat16*>(g.c)[o] = BFloat16(v);
      else if (g.c_dtype == kF16) static_cast<Half*>(g.c)[o] = Half(v);
      else static_cast<float*>(g.c)[o] = v;
    }
  epilogue(g);
}

/// int8 x int8 -> int32 without oneDNN: exact int32 accumulation (wrapping like the hardware),
/// rows split over the pool.
void int8_gemm(const AnvilGemmCall& g) {
  if (g.alpha != 1.0f || (g.beta != 0.0f && g.beta != 1.0f))
    throw Error("int8 GEMM takes alpha 1 and beta 0 or 1", gemm_call_str(g), "alpha 1, beta 0|1",
                std::to_string(g.alpha) + ", " + std::to_string(g.beta));
  const auto* a = static_cast<const int8_t*>(g.a);
  const auto* b = static_cast<const int8_t*>(g.b);
  auto* c = static_cast<int32_t*>(g.c);
  parallel_for(0, g.m, std::max<int64_t>(1, 4096 / std::max<int64_t>(g.n * g.k, 1)),
               [&](int64_t r0, int64_t r1) {
                 std::vector<uint32_t> acc(static_cast<size_t>(g.n));
                 for (int64_t i = r0; i < r1; ++i) {
                   std::fill(acc.begin(), acc.end(), 0u);
                   for (int64_t p = 0; p < g.k; ++p) {
                     const int32_t av = g.trans_a ? a[p * g.lda + i] : a[i * g.lda + p];
                     for (int64_t j = 0; j < g.n; ++j)
                       acc[j] += static_cast<uint32_t>(
                           av * int32_t(g.trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j]));
                   }
                   for (int64_t j = 0; j < g.n; ++j)
                     c[i * g.ldc + j] = static_cast<int32_t>(
                         acc[j] + (g.beta != 0.0f ? static_cast<uint32_t>(c[i * g.ldc + j]) : 0u));
                 }
               });
  epilogue(g);
}

/// The packed kernel's activation for ANVIL_GEMM_ACT_* code `act` (relu: its own flag).
GemmAct packed_act(int32_t act) {
  switch (act) {
    case ANVIL_GEMM_ACT_RELU6:
      return GemmAct::kRelu6;
    case ANVIL_GEMM_ACT_GELU_ERF:
      return GemmAct::kGeluErf;
    case ANVIL_GEMM_ACT_GELU_TANH:
      return GemmAct::kGeluTanh;
    case ANVIL_GEMM_ACT_SILU:
      return GemmAct::kSilu;
    default:
      return GemmAct::kNone;
  }
}

/// ANVIL_GEMM_LIB_PACKED: variant 0 through sgemm_const_b (the default path's split), 1-3 with
/// an explicit ISA: B packed (once, by address, when constant), column panels split over the
/// pool. Both fuse a column bias and every activation in the store; a row bias (with the
/// activation after it) runs as a pass over C.
void packed_gemm(PackedWeightCache* cache, const AnvilGemmCall& g) {
  const bool col_bias = g.bias && g.bias_kind == ANVIL_GEMM_BIAS_COL;
  const bool fuse_act = g.bias_kind != ANVIL_GEMM_BIAS_ROW || !g.bias;
  const float* bias = col_bias ? static_cast<const float*>(g.bias) : nullptr;
  const bool relu = fuse_act && g.activation == ANVIL_GEMM_ACT_RELU;
  const GemmAct act = fuse_act ? packed_act(g.activation) : GemmAct::kNone;
  AnvilGemmCall rest = g;  // what the kernel did not fuse
  if (col_bias) rest.bias_kind = ANVIL_GEMM_BIAS_NONE;
  if (fuse_act) rest.activation = ANVIL_GEMM_ACT_NONE;
  if (g.variant == 0) {
    sgemm_const_b(g.b_constant ? cache : nullptr, g.trans_a != 0, g.trans_b != 0, g.m, g.n, g.k,
                  g.alpha, static_cast<const float*>(g.a), g.lda, static_cast<const float*>(g.b),
                  g.ldb, static_cast<float*>(g.c), g.ldc, bias, relu, act);
    return epilogue(rest);
  }
  const GemmIsa isa = g.variant == 1 ? GemmIsa::kGeneric
                      : g.variant == 2 ? GemmIsa::kAvx2
                                       : GemmIsa::kAvx512;
  if (!gemm_isa_available(isa))
    throw Error("packed GEMM ISA not available on this CPU", gemm_call_str(g),
                "a variant this CPU runs (1 generic, 2 avx2, 3 avx512)",
                std::to_string(g.variant));
  std::shared_ptr<const PackedMatrix> packed;
  std::unique_ptr<PackedMatrix> local;
  const auto* b = static_cast<const float*>(g.b);
  if (g.b_constant && cache) packed = cache->get(g.trans_b != 0, g.k, g.n, b, g.ldb);
  else local = std::make_unique<PackedMatrix>(g.trans_b != 0, g.k, g.n, b, g.ldb);
  const float* pb = packed ? packed->data() : local->data();
  const int64_t panels = (g.n + kPackedPanel - 1) / kPackedPanel;
  const int threads = ThreadPool::in_parallel_region() ? 1 : current_thread_pool().num_threads();
  parallel_for(0, panels, std::max<int64_t>(1, (panels + threads - 1) / threads),
               [&](int64_t p0, int64_t p1) {
                 sgemm_packed(g.trans_a != 0, g.m, g.n, g.k, g.alpha,
                              static_cast<const float*>(g.a), g.lda, pb, bias, relu,
                              static_cast<float*>(g.c), g.ldc, p0 * kPackedPanel,
                              std::min(g.n, p1 * kPackedPanel), isa, nullptr, act);
               });
  epilogue(rest);
}

[[noreturn]] void not_taken(const AnvilGemmCall& g, const char* takes) {
  throw Error("GEMM library does not take these dtypes / options", gemm_call_str(g), takes,
              code_name(g.a_dtype) + " x " + code_name(g.b_dtype) + " -> " +
                  code_name(g.c_dtype) + ", beta " + std::to_string(g.beta) + ", variant " +
                  std::to_string(g.variant));
}

}  // namespace

std::string gemm_call_str(const AnvilGemmCall& g) {
  return "gemm(library " + std::to_string(g.library) + ", variant " + std::to_string(g.variant) +
         ", " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) +
         ", " + code_name(g.a_dtype) + " x " + code_name(g.b_dtype) + " -> " +
         code_name(g.c_dtype) + ", trans " + std::to_string(g.trans_a) + "/" +
         std::to_string(g.trans_b) + ")";
}

void gemm_call(PackedWeightCache* cache, const AnvilGemmCall& g) {
  if (g.library < ANVIL_GEMM_LIB_DEFAULT || g.library > ANVIL_GEMM_LIB_ONEDNN)
    throw Error("unknown GEMM library", gemm_call_str(g),
                "0 default, 1 openblas, 2 packed, 3 onednn", std::to_string(g.library));
  validate(g);
  if (g.m == 0 || g.n == 0) return;
  const bool f32 = g.a_dtype == kF32, f64 = g.a_dtype == kF64;
  switch (g.library) {
    case ANVIL_GEMM_LIB_DEFAULT:
    case ANVIL_GEMM_LIB_OPENBLAS:
      if (g.library == ANVIL_GEMM_LIB_OPENBLAS && !f32 && !f64) not_taken(g, "fp32 or fp64");
      if (g.k == 0) return empty_product(g);
      if (f32) {
        gemm(g.trans_a != 0, g.trans_b != 0, g.m, g.n, g.k, g.alpha,
             static_cast<const float*>(g.a), g.lda, static_cast<const float*>(g.b), g.ldb, g.beta,
             static_cast<float*>(g.c), g.ldc);
        return epilogue(g);
      }
      if (f64) {
        gemm(g.trans_a != 0, g.trans_b != 0, g.m, g.n, g.k, double(g.alpha),
             static_cast<const double*>(g.a), g.lda, static_cast<const double*>(g.b), g.ldb,
             double(g.beta), static_cast<double*>(g.c), g.ldc);
        return epilogue(g);
      }
      if (g.a_dtype == kS8 && (g.alpha != 1.0f || g.beta != 0.0f || g.bias || !onednn_available()))
        return int8_gemm(g);
      if (onednn_available()) return onednn_gemm(g);
      return widened_gemm(g);
    case ANVIL_GEMM_LIB_PACKED:
      if (!f32 || g.beta != 0.0f || g.variant < 0 || g.variant > 3)
        not_taken(g, "fp32, beta 0, variant 0-3");
      if (g.k == 0) return empty_product(g);
      return packed_gemm(cache, g);
    default:  // ANVIL_GEMM_LIB_ONEDNN
      if (!onednn_available())
        throw Error("GEMM library not available in this runtime", gemm_call_str(g),
                    "a runtime with oneDNN (libdnnl-dev, -DANVIL_ONEDNN=ON, ANVIL_ONEDNN not 0)",
                    "oneDNN (3)");
      if (f64) not_taken(g, "fp32, bf16, fp16, int8 (not fp64)");
      if (g.k == 0) return empty_product(g);
      return onednn_gemm(g);
  }
}

int api_gemm(void* run_ctx, const AnvilGemmCall* call) {
  auto* ctx = static_cast<RunContext*>(run_ctx);
  try {
    if (!call) throw Error("null AnvilGemmCall", "api->gemm", "a call", "null");
    gemm_call(ctx ? ctx->packed_weights : nullptr, *call);
    return 0;
  } catch (const std::exception& e) {
    if (ctx) ctx->set_error(e.what());
    return 1;
  }
}

}  // namespace anvil::runtime
