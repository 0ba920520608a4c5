// AnvilRtApi::gemm (ABI minor 8): one GEMM through the library the autotuner chose
// (include/anvil/anvil_rt.h AnvilGemmCall), with its bias and activation applied after the
// product on the output (a library without a fused epilogue).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/gemm_call.h"
#include "runtime/kernels/gemm_packed.h"
#include "runtime/rt_api.h"

namespace anvil::runtime {

namespace {

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

template <typename T>
void epilogue(const AnvilGemmCall& g) {
  if (g.bias_kind == ANVIL_GEMM_BIAS_NONE && g.activation == ANVIL_GEMM_ACT_NONE) return;
  T* c = static_cast<T*>(g.c);
  const T* bias = static_cast<const T*>(g.bias);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      T v = c[i * g.ldc + j];
      if (bias && g.bias_kind == ANVIL_GEMM_BIAS_COL) v += bias[j];
      if (bias && g.bias_kind == ANVIL_GEMM_BIAS_ROW) v += bias[i];
      c[i * g.ldc + j] = activate(v, g.activation);
    }
}

std::string describe(const AnvilGemmCall& g) {
  return "gemm(library " + std::to_string(g.library) + ", variant " +
         std::to_string(g.variant) + ", " + std::to_string(g.m) + "x" + std::to_string(g.n) +
         "x" + std::to_string(g.k) + ", dtypes " + std::to_string(g.a_dtype) + "/" +
         std::to_string(g.b_dtype) + "->" + std::to_string(g.c_dtype) + ")";
}

bool all_dtype(const AnvilGemmCall& g, DType d) {
  const int32_t code = static_cast<int32_t>(d);
  return g.a_dtype == code && g.b_dtype == code && g.c_dtype == code;
}

}  // namespace

void gemm_call(PackedWeightCache* cache, const AnvilGemmCall& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0)
    throw Error("negative GEMM size", describe(g), "m, n, k >= 0", "");
  if (g.m == 0 || g.n == 0) return;
  const bool f32 = all_dtype(g, DType::kFloat32), f64 = all_dtype(g, DType::kFloat64);
  switch (g.library) {
    case ANVIL_GEMM_LIB_DEFAULT:
    case ANVIL_GEMM_LIB_OPENBLAS:
      if (f32) {
        gemm(g.trans_a != 0, g.trans_b != 0, g.m, g.n, g.k, g.alpha,
             static_cast<const float*>(g.a), g.lda, static_cast<const float*>(g.b), g.ldb, g.beta,
             static_cast<float*>(g.c), g.ldc);
        return epilogue<float>(g);
      }
      if (f64) {
        gemm(g.trans_a != 0, g.trans_b != 0, g.m, g.n, g.k, double(g.alpha),
             static_cast<const double*>(g.a), g.lda, static_cast<const double*>(g.b), g.ldb,
             double(g.beta), static_cast<double*>(g.c), g.ldc);
        return epilogue<double>(g);
      }
      break;
    case ANVIL_GEMM_LIB_PACKED:
      if (f32 && g.beta == 0.0f && g.variant == 0) {
        sgemm_const_b(g.b_constant ? cache : nullptr, g.trans_a != 0, g.trans_b != 0, g.m, g.n,
                      g.k, g.alpha, static_cast<const float*>(g.a), g.lda,
                      static_cast<const float*>(g.b), g.ldb, static_cast<float*>(g.c), g.ldc);
        return epilogue<float>(g);
      }
      break;
    default:
      throw Error("GEMM library not available in this runtime", describe(g),
                  "openblas (1) or packed (2)", std::to_string(g.library));
  }
  throw Error("GEMM library does not take these dtypes / options", describe(g),
              "fp32 or fp64 (packed: fp32, beta 0, variant 0)", "");
}

int api_gemm(void* run_ctx, const AnvilGemmCall* call) {
  auto* ctx = static_cast<RunContext*>(run_ctx);
  try {
    if (!call) throw Error("null AnvilGemmCall", "api->gemm");
    gemm_call(ctx ? ctx->packed_weights : nullptr, *call);
    return 0;
  } catch (const std::exception& e) {
    if (ctx) ctx->set_error(e.what());
    return 1;
  }
}

}  // namespace anvil::runtime
