// aten._scaled_mm on host tensors (core/scaled_mm.h).
#include "core/scaled_mm.h"

#include <vector>

#include "anvil/anvil_fp8.h"
#include "core/error.h"

namespace anvil::scaled_mm {

namespace {

bool operand_dtype(DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; }

/// The values of float8 matrix `t`, row-major, decoded exactly.
std::vector<double> decoded(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  const int32_t format = static_cast<int32_t>(c.dtype());
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = anvil_fp8_to_f32(format, p[i]);
  return out;
}

}  // namespace

void compute(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
             const std::optional<Tensor>& bias, const Tensor& out, const std::string& where) {
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&a, "self"}, {&b, "mat2"}})
    ANVIL_CHECK(t->dim() == 2 && operand_dtype(t->dtype()), where,
                str("'", name, "' must be a float8 matrix"),
                "2-D float8_e4m3fn or float8_e5m2", t->type_str());
  ANVIL_CHECK(!(a.dtype() == DType::kFloat8E5M2 && b.dtype() == DType::kFloat8E5M2), where,
              "both operands are float8_e5m2", "at least one float8_e4m3fn operand",
              "f8e5m2 x f8e5m2");
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  ANVIL_CHECK(b.size(0) == k, where, "inner sizes differ", "self.size(1) == mat2.size(0)",
              a.type_str() + " x " + b.type_str());
  ANVIL_CHECK(scale_a.dtype() == DType::kFloat32 && scale_b.dtype() == DType::kFloat32, where,
              "scales must be float32", "f32", scale_a.type_str() + ", " + scale_b.type_str());
  const bool tensor_wise = scale_a.numel() == 1 && scale_b.numel() == 1;
  const bool row_wise = scale_a.dim() == 2 && scale_a.size(0) == m && scale_a.size(1) == 1 &&
                        scale_b.dim() == 2 && scale_b.size(0) == 1 && scale_b.size(1) == n;
  ANVIL_CHECK(tensor_wise || row_wise, where, "scales must be tensor-wise or row-wise",
              "one element each, or scale_a (m, 1) and scale_b (1, n)",
              scale_a.type_str() + ", " + scale_b.type_str());
  const DType od = out.dtype();
  ANVIL_CHECK(od == DType::kFloat16 || od == DType::kBFloat16 || od == DType::kFloat32, where,
              "unsupported out_dtype", "float16, bfloat16 or float32", dtype_name(od));
  ANVIL_CHECK(out.dim() == 2 && out.size(0) == m && out.size(1) == n, where,
              "output of the wrong shape", str("[", m, ", ", n, "]"), out.type_str());
  if (bias) {
    ANVIL_CHECK(bias->dim() == 1 && bias->size(0) == n, where,
                "the bias must be a vector of mat2.size(1) elements", str("[", n, "]"),
                bias->type_str());
    ANVIL_CHECK(bias->dtype() == od || (od == DType::kFloat32 && bias->dtype() == DType::kBFloat16),
                where, "the bias dtype must be out_dtype (bfloat16 for float32)", dtype_name(od),
                dtype_name(bias->dtype()));
  }
  const std::vector<double> av = decoded(a), bv = decoded(b);
  const std::vector<double> sa = scale_a.to_doubles(), sb = scale_b.to_doubles();
  const std::vector<double> bias_v = bias ? bias->to_doubles() : std::vector<double>();
  Tensor acc = Tensor::empty({m, n}, DType::kFloat64);
  auto* pc = static_cast<double*>(acc.data_ptr());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += av[static_cast<size_t>(i * k + p)] * bv[static_cast<size_t>(p * n + j)];
      s *= sa[tensor_wise ? 0 : static_cast<size_t>(i)] * sb[tensor_wise ? 0 : static_cast<size_t>(j)];
      if (bias) s += bias_v[static_cast<size_t>(j)];
      pc[i * n + j] = s;
    }
  Tensor o = out;
  o.copy_from(acc);
}

}  // namespace anvil::scaled_mm
