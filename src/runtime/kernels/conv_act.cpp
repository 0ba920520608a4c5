// Activations fused into the convolution extern (conv.h, ConvAct) for the paths that do not
// apply them inside their own store (oneDNN takes them as eltwise post-ops; the direct depthwise
// kernel and im2col + GEMM call conv_activate on each finished plane or on the whole output).
//
// fp32: branch-free loops the compiler vectorises (vec_math.h's exp / erf), compiled for
// AVX-512, AVX2 + FMA and the baseline ISA and chosen at run time (the library is not built
// with -mavx*); gelu's tanh form uses 0.5 (1 + tanh(u)) = sigmoid(2u). NaN stays NaN.
#include <cmath>
#include <limits>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/vec_math.h"

// -O2's "very cheap" vectoriser cost model keeps loops whose count is unknown scalar.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

namespace anvil::runtime::kern {

namespace {

#define ANVIL_ACT_INLINE ANVIL_VEC_INLINE

/// One element of `act`.
template <ConvAct A>
ANVIL_ACT_INLINE float act_one(float v, float lo, float hi) {
  float y = v;
  if constexpr (A == ConvAct::kRelu) {
    y = v < 0.0f ? 0.0f : v;
  } else if constexpr (A == ConvAct::kClamp) {
    y = v < lo ? lo : v;
    y = y > hi ? hi : y;
  } else if constexpr (A == ConvAct::kHardswish || A == ConvAct::kHardsigmoid) {
    float h = v + 3.0f;
    h = h < 0.0f ? 0.0f : (h > 6.0f ? 6.0f : h);
    h = h / 6.0f;
    y = A == ConvAct::kHardswish ? v * h : h;
  } else if constexpr (A == ConvAct::kSilu) {
    y = v * sigmoid_approx(v);
  } else if constexpr (A == ConvAct::kSigmoid) {
    y = sigmoid_approx(v);
  } else if constexpr (A == ConvAct::kGelu) {
    y = 0.5f * v * (1.0f + erf_approx(v * 0.70710678118654752f));
  } else if constexpr (A == ConvAct::kGeluTanh) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    y = v * sigmoid_approx(2.0f * u);
  }
  return v != v ? v : y;  // NaN stays NaN
}

template <ConvAct A>
ANVIL_ACT_INLINE void act_loop(float lo, float hi, float* __restrict p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = act_one<A>(p[i], lo, hi);
}

/// The loop of every activation, compiled for the ISA of the enclosing function.
ANVIL_ACT_INLINE void act_dispatch(ConvAct act, float lo, float hi, float* p, int64_t n) {
  switch (act) {
    case ConvAct::kNone:
      return;
    case ConvAct::kRelu:
      return act_loop<ConvAct::kRelu>(lo, hi, p, n);
    case ConvAct::kClamp:
      return act_loop<ConvAct::kClamp>(lo, hi, p, n);
    case ConvAct::kHardswish:
      return act_loop<ConvAct::kHardswish>(lo, hi, p, n);
    case ConvAct::kHardsigmoid:
      return act_loop<ConvAct::kHardsigmoid>(lo, hi, p, n);
    case ConvAct::kSilu:
      return act_loop<ConvAct::kSilu>(lo, hi, p, n);
    case ConvAct::kSigmoid:
      return act_loop<ConvAct::kSigmoid>(lo, hi, p, n);
    case ConvAct::kGelu:
      return act_loop<ConvAct::kGelu>(lo, hi, p, n);
    case ConvAct::kGeluTanh:
      return act_loop<ConvAct::kGeluTanh>(lo, hi, p, n);
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void act_avx512(ConvAct act, float lo, float hi, float* p,
                                                   int64_t n) {
  act_dispatch(act, lo, hi, p, n);
}
__attribute__((target("avx2,fma"))) void act_avx2(ConvAct act, float lo, float hi, float* p,
                                                  int64_t n) {
  act_dispatch(act, lo, hi, p, n);
}
#endif
void act_generic(ConvAct act, float lo, float hi, float* p, int64_t n) {
  act_dispatch(act, lo, hi, p, n);
}

}  // namespace

void conv_activate(ConvAct act, float lo, float hi, float* p, int64_t n) {
  if (act == ConvAct::kNone || n <= 0) return;
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512) return act_avx512(act, lo, hi, p, n);
  if (avx2) return act_avx2(act, lo, hi, p, n);
#endif
  act_generic(act, lo, hi, p, n);
}

void conv_activate(ConvAct act, double lo, double hi, double* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = p[i];
    double y = v;
    switch (act) {
      case ConvAct::kNone:
        break;
      case ConvAct::kRelu:
        y = v < 0 ? 0 : v;
        break;
      case ConvAct::kClamp:
        y = v < lo ? lo : v;
        y = y > hi ? hi : y;
        break;
      case ConvAct::kHardswish:
      case ConvAct::kHardsigmoid: {
        const double h = std::min(std::max(v + 3, 0.0), 6.0) / 6;
        y = act == ConvAct::kHardswish ? v * h : h;
        break;
      }
      case ConvAct::kSilu:
        y = v / (1 + std::exp(-v));
        break;
      case ConvAct::kSigmoid:
        y = 1 / (1 + std::exp(-v));
        break;
      case ConvAct::kGelu:
        y = 0.5 * v * (1 + std::erf(v * M_SQRT1_2));
        break;
      case ConvAct::kGeluTanh:
        y = 0.5 * v * (1 + std::tanh(M_SQRT2 * M_2_SQRTPI * 0.5 * (v + 0.044715 * v * v * v)));
        break;
    }
    p[i] = v != v ? v : y;
  }
}

void conv_activate(const ConvGeom& g, const Tensor& out) {
  if (g.act == ConvAct::kNone || out.numel() == 0) return;
  if (out.dtype() == DType::kFloat32 && out.is_contiguous()) {
    float* p = out.data<float>();
    parallel_for(0, out.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
      conv_activate(g.act, g.act_lo, g.act_hi, p + i0, i1 - i0);
    });
    return;
  }
  std::vector<double> v = out.to_doubles();
  conv_activate(g.act, static_cast<double>(g.act_lo), static_cast<double>(g.act_hi), v.data(),
                static_cast<int64_t>(v.size()));
  copy_cast(out, Tensor::from_vector(v, out.sizes()));
}

}  // namespace anvil::runtime::kern
