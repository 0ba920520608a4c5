// aten._scaled_mm (row "scaled_mm.cpp" of ops.def): the float8 matrix product
//   out = ((self * scale_a) @ (mat2 * scale_b) + bias).to(out_dtype)
// with self (m, k) and mat2 (k, n) of float8 e4m3fn or e5m2, float32 scales that are tensor-wise
// (one element each) or row-wise (scale_a (m, 1), scale_b (1, n)), an optional bias (n) of
// out_dtype, and out_dtype float16, bfloat16 or float32 (the formats the CUDA target's cuBLASLt
// FP8 GEMM writes; a float8 result or scale_result is refused). The computation is
// core/scaled_mm.h's, which the CPU runtime's extern shares.
#include <vector>

#include "core/error.h"
#include "core/scaled_mm.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::TensorType;

bool mm_float8(DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; }

bool mm_out_dtype(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32;
}

/// Whether scale sizes are tensor-wise (every size 1, or 0-d).
bool tensor_wise(const std::vector<SymInt>& sizes) {
  for (const auto& s : sizes)
    if (!(s == SymInt(1))) return false;
  return true;
}

/// Whether optional tensor argument `name` is given (not absent, not None).
bool given(const ir::Node& node, const std::string& name) {
  const ir::Arg* a = node.arg(name);
  return a && a->kind == ir::Arg::Kind::kTensor && a->value;
}

}  // namespace

std::vector<TensorType> shape_scaled_mm(const ir::Node& node) {
  const TensorType& a = ir::shape_args::type(node, "self");
  const TensorType& b = ir::shape_args::type(node, "mat2");
  const TensorType& sa = ir::shape_args::type(node, "scale_a");
  const TensorType& sb = ir::shape_args::type(node, "scale_b");
  for (const auto& [t, name] : {std::pair<const TensorType*, const char*>{&a, "self"},
                                {&b, "mat2"}}) {
    if (t->sizes.size() != 2)
      ir::shape_args::fail(node, str("'", name, "' must be a matrix"), "2 dims", t->str());
    if (!mm_float8(t->dtype))
      ir::shape_args::fail(node, str("'", name, "' must be float8"),
                           "float8_e4m3fn or float8_e5m2", dtype_name(t->dtype));
  }
  if (a.dtype == DType::kFloat8E5M2 && b.dtype == DType::kFloat8E5M2)
    ir::shape_args::fail(node, "both operands are float8_e5m2 (cuBLASLt and PyTorch refuse it)",
                         "at least one float8_e4m3fn operand", "f8e5m2 x f8e5m2");
  if (!(a.sizes[1] == b.sizes[0]) && a.sizes[1].is_constant() && b.sizes[0].is_constant())
    ir::shape_args::fail(node, "inner sizes differ", "self.size(1) == mat2.size(0)",
                         str(a.str(), " x ", b.str()));
  for (const auto& [t, name] : {std::pair<const TensorType*, const char*>{&sa, "scale_a"},
                                {&sb, "scale_b"}})
    if (t->dtype != DType::kFloat32)
      ir::shape_args::fail(node, str("'", name, "' must be float32"), "f32",
                           dtype_name(t->dtype));
  const bool rowwise = sa.sizes.size() == 2 && sb.sizes.size() == 2 &&
                       sa.sizes[0] == a.sizes[0] && sa.sizes[1] == SymInt(1) &&
                       sb.sizes[0] == SymInt(1) && sb.sizes[1] == b.sizes[1];
  if (!(tensor_wise(sa.sizes) && tensor_wise(sb.sizes)) && !rowwise)
    ir::shape_args::fail(node, "scales must be tensor-wise or row-wise",
                         "scale_a and scale_b of one element, or scale_a (m, 1) and scale_b (1, n)",
                         str(sa.str(), ", ", sb.str()));
  if (given(node, "scale_result"))
    ir::shape_args::fail(node, "scale_result (a float8 result) is not supported", "None",
                         "a tensor");
  const DType out = ir::shape_args::dtype(node, "out_dtype").value_or(a.dtype);
  if (!mm_out_dtype(out))
    ir::shape_args::fail(node, "unsupported out_dtype", "float16, bfloat16 or float32",
                         dtype_name(out));
  if (given(node, "bias")) {
    const TensorType& bias = ir::shape_args::type(node, "bias");
    if (bias.sizes.size() != 1 || !(bias.sizes[0] == b.sizes[1]))
      ir::shape_args::fail(node, "the bias must be a vector of mat2.size(1) elements",
                           str("[", b.sizes[1].str(), "]"), bias.str());
    if (bias.dtype != out && !(out == DType::kFloat32 && bias.dtype == DType::kBFloat16))
      ir::shape_args::fail(node, "the bias dtype must be out_dtype (bfloat16 for float32)",
                           dtype_name(out), dtype_name(bias.dtype));
  }
  TensorType r;
  r.dtype = out;
  r.sizes = {a.sizes[0], b.sizes[1]};
  r.device = a.device;
  return {r};
}

std::vector<ir::RValue> kernel_scaled_mm(ir::KernelContext& ctx) {
  const Tensor& a = ctx.tensor("self");
  const Tensor& b = ctx.tensor("mat2");
  if (ctx.opt_tensor("scale_result"))
    ctx.fail("scale_result (a float8 result) is not supported", "None", "a tensor");
  const DType out = ctx.dtype_arg("out_dtype").value_or(a.dtype());
  if (!mm_out_dtype(out))
    ctx.fail("unsupported out_dtype", "float16, bfloat16 or float32", dtype_name(out));
  if (a.dim() != 2 || b.dim() != 2)
    ctx.fail("operands must be matrices", "2-D self and mat2", a.type_str() + ", " + b.type_str());
  Tensor result = Tensor::empty({a.size(0), b.size(1)}, out);
  scaled_mm::compute(a, b, ctx.tensor("scale_a"), ctx.tensor("scale_b"), ctx.opt_tensor("bias"),
                     result, ctx.where());
  return {result};
}

}  // namespace anvil::ops
