// Runtime extern kernels for aten.mm.default, aten.bmm.default and aten._scaled_mm.default (the
// float8 product, core/scaled_mm.h: the CPU target's; CUDA calls cuBLASLt). The code generator routes
// only non-f32/f64 products here (bf16 / f16: converted to fp32, one GEMM, rounded once, like the
// reference kernel; with oneDNN in the runtime, bf16 / f16 operands in a row- or column-major
// layout go straight to runtime/gemm_call's oneDNN GEMM instead); f32 / f64 also work (operands used in place when their layout allows) and
// integer dtypes use a direct loop with wrapping int64 accumulation. bmm splits its batch over
// the thread pool when the batch is large, else the GEMM itself runs in parallel.
#include <optional>

#include "core/scaled_mm.h"
#include "runtime/gemm_call.h"
#include "runtime/gemm_onednn.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/rt_api.h"

namespace anvil::runtime {

namespace {

/// out[m, n] (element offset `out_off` of the contiguous output) = a[m, k] * b[k, n] for the
/// matrices at offsets `a_off` / `b_off`, computed in F and converted to the output dtype.
template <typename F>
void float_product(const Tensor& a, int64_t a_off, const Tensor& b, int64_t b_off,
                   const Tensor& out, int64_t out_off, std::vector<F> (&scratch)[3]) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const kern::MatArg<F> aa =
      kern::matrix_arg<F>(a, a_off, m, k, a.stride(-2), a.stride(-1), scratch[0]);
  const kern::MatArg<F> ba =
      kern::matrix_arg<F>(b, b_off, k, n, b.stride(-2), b.stride(-1), scratch[1]);
  const int64_t ldc = std::max<int64_t>(n, 1);
  if (out.dtype() == dtype_of<F>()) {
    runtime::gemm(aa.trans, ba.trans, m, n, k, F(1), aa.data, aa.ld, ba.data, ba.ld, F(0),
               static_cast<F*>(out.data_ptr()) + out_off, ldc);
    return;
  }
  scratch[2].resize(static_cast<size_t>(std::max<int64_t>(m * n, 1)));
  runtime::gemm(aa.trans, ba.trans, m, n, k, F(1), aa.data, aa.ld, ba.data, ba.ld, F(0),
             scratch[2].data(), ldc);
  ANVIL_DISPATCH_FLOAT(out.dtype(), "runtime::mm", T, {
    T* o = static_cast<T*>(out.data_ptr()) + out_off;
    for (int64_t i = 0; i < m * n; ++i) o[i] = cast_value<T, F>(scratch[2][i]);
  });
}

/// A [rows, cols] operand of t at offset `off` for AnvilGemmCall: its pointer, leading dimension
/// and whether it is stored transposed; false when neither row- nor column-major.
bool gemm_operand(const Tensor& t, int64_t off, int64_t rows, int64_t cols, int64_t rs,
                  int64_t cs, const void*& data, int64_t& ld, int32_t& trans) {
  data = static_cast<const char*>(t.data_ptr()) + off * dtype_size(t.dtype());
  if ((cs == 1 || cols <= 1) && (rs >= std::max<int64_t>(cols, 1) || rows <= 1)) {
    ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
    trans = 0;
    return true;
  }
  if ((rs == 1 || rows <= 1) && (cs >= std::max<int64_t>(rows, 1) || cols <= 1)) {
    ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
    trans = 1;
    return true;
  }
  return false;
}

/// bf16 / f16 products through oneDNN (fp32 accumulation, rounded once into the output); false
/// when the runtime has no oneDNN or an operand's layout needs a copy (the caller converts).
bool onednn_product(const Tensor& a, int64_t a_off, const Tensor& b, int64_t b_off,
                    const Tensor& out, int64_t out_off) {
  const DType dt = a.dtype();
  if (!onednn_available() || (dt != DType::kBFloat16 && dt != DType::kFloat16) ||
      out.dtype() != dt)
    return false;
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  AnvilGemmCall g{};
  g.library = ANVIL_GEMM_LIB_DEFAULT;
  g.a_dtype = g.b_dtype = g.c_dtype = static_cast<int32_t>(dt);
  g.m = m;
  g.n = n;
  g.k = k;
  if (!gemm_operand(a, a_off, m, k, a.stride(-2), a.stride(-1), g.a, g.lda, g.trans_a) ||
      !gemm_operand(b, b_off, k, n, b.stride(-2), b.stride(-1), g.b, g.ldb, g.trans_b))
    return false;
  g.c = static_cast<char*>(out.data_ptr()) + out_off * dtype_size(dt);
  g.ldc = std::max<int64_t>(n, 1);
  g.alpha = 1.0f;
  gemm_call(nullptr, g);
  return true;
}

/// The same for integer dtypes (wrapping int64 accumulation).
template <typename T>
void int_product(const Tensor& a, int64_t a_off, const Tensor& b, int64_t b_off, const Tensor& out,
                 int64_t out_off) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const T* ap = static_cast<const T*>(a.data_ptr()) + a_off;
  const T* bp = static_cast<const T*>(b.data_ptr()) + b_off;
  T* op = static_cast<T*>(out.data_ptr()) + out_off;
  const int64_t ars = a.stride(-2), acs = a.stride(-1), brs = b.stride(-2), bcs = b.stride(-1);
  std::vector<uint64_t> acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), uint64_t{0});
    for (int64_t p = 0; p < k; ++p) {
      const uint64_t av = static_cast<uint64_t>(static_cast<int64_t>(ap[i * ars + p * acs]));
      for (int64_t j = 0; j < n; ++j)
        acc[j] += av * static_cast<uint64_t>(static_cast<int64_t>(bp[p * brs + j * bcs]));
    }
    for (int64_t j = 0; j < n; ++j) op[i * n + j] = static_cast<T>(static_cast<int64_t>(acc[j]));
  }
}

/// Products for batch entries [b0, b1) (a, b are 3-D; out contiguous [batch, m, n]).
void products(const Tensor& a, const Tensor& b, const Tensor& out, int64_t b0, int64_t b1) {
  const int64_t mn = out.size(-2) * out.size(-1);
  const DType dt = a.dtype();
  if (dt == DType::kFloat64) {
    std::vector<double> scratch[3];
    for (int64_t i = b0; i < b1; ++i)
      float_product<double>(a, i * a.stride(0), b, i * b.stride(0), out, i * mn, scratch);
  } else if (is_floating(dt)) {
    std::vector<float> scratch[3];
    for (int64_t i = b0; i < b1; ++i)
      if (!onednn_product(a, i * a.stride(0), b, i * b.stride(0), out, i * mn))
        float_product<float>(a, i * a.stride(0), b, i * b.stride(0), out, i * mn, scratch);
  } else {
    ANVIL_DISPATCH_REAL(dt, "runtime::mm", T, {
      if constexpr (std::is_integral_v<T>)
        for (int64_t i = b0; i < b1; ++i)
          int_product<T>(a, i * a.stride(0), b, i * b.stride(0), out, i * mn);
    });
  }
}

/// Shared checks of mm / bmm operands (`rank` 2 or 3).
void check_operands(const ExternCall& call, const Tensor& a, const Tensor& b, int64_t rank) {
  const std::string where = call.target();
  ANVIL_CHECK(a.dim() == rank, where, str("'self' must be ", rank, "-D"), str(rank, "-D"),
              a.type_str());
  ANVIL_CHECK(b.dim() == rank, where, str("'mat2' must be ", rank, "-D"), str(rank, "-D"),
              b.type_str());
  ANVIL_CHECK(a.dtype() == b.dtype(), where, "operand dtypes differ", dtype_name(a.dtype()),
              dtype_name(b.dtype()));
  ANVIL_CHECK(a.dtype() != DType::kBool && !is_complex(a.dtype()) && is_supported(a.dtype()), where,
              "matrix products need a numeric dtype", "an integer or floating dtype",
              dtype_name(a.dtype()));
  ANVIL_CHECK(a.size(-1) == b.size(-2), where, "inner sizes of the matrices differ", a.type_str(),
              b.type_str());
  if (rank == 3)
    ANVIL_CHECK(a.size(0) == b.size(0), where, "batch sizes differ", a.type_str(), b.type_str());
}

/// The runtime kernel of aten.mm.default.
int mm_extern(ExternCall& call) {
  const Tensor a = call.input_tensor(0), b = call.input_tensor(1);
  check_operands(call, a, b, 2);
  const Tensor out = kern::checked_output(call, 0, {a.size(0), b.size(1)}, a.dtype());
  if (out.numel() == 0) return 0;
  products(a.unsqueeze(0), b.unsqueeze(0), out.unsqueeze(0), 0, 1);
  return 0;
}

/// The runtime kernel of aten.bmm.default.
int bmm_extern(ExternCall& call) {
  const Tensor a = call.input_tensor(0), b = call.input_tensor(1);
  check_operands(call, a, b, 3);
  const int64_t batch = a.size(0);
  const Tensor out = kern::checked_output(call, 0, {batch, a.size(1), b.size(2)}, a.dtype());
  if (out.numel() == 0) return 0;
  const int threads = kern::available_threads();
  if (batch >= threads && threads > 1) {
    const int64_t work = a.size(1) * a.size(2) * b.size(2);
    parallel_for(0, batch, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(work, 1)),
                 [&](int64_t b0, int64_t b1) { products(a, b, out, b0, b1); });
  } else {
    products(a, b, out, 0, batch);
  }
  return 0;
}

/// The runtime kernel of aten._scaled_mm.default on the CPU target: core/scaled_mm.h's
/// computation (the reference kernel's), inputs self, mat2, scale_a, scale_b, bias,
/// scale_result (docs/externs.md).
int scaled_mm_extern(ExternCall& call) {
  if (call.num_inputs() > 5 && call.input(5).ndim >= 0)
    return call.fail(str(call.target(), ": scale_result (a float8 result) is not supported"));
  std::optional<Tensor> bias;
  if (call.num_inputs() > 4 && call.input(4).ndim >= 0) bias = call.input_tensor(4);
  scaled_mm::compute(call.input_tensor(0), call.input_tensor(1), call.input_tensor(2),
                     call.input_tensor(3), bias, call.output_tensor(0), call.target());
  return 0;
}

}  // namespace

/// Registers the matrix-product externs.
void register_linalg_externs() {
  register_extern("aten.mm.default", mm_extern);
  register_extern("aten.bmm.default", bmm_extern);
  register_extern("aten._scaled_mm.default", scaled_mm_extern);
}

}  // namespace anvil::runtime
