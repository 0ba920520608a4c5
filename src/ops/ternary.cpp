// addcmul / addcdiv: self + value * tensor1 * tensor2 (or / tensor2), one pointwise pass with
// broadcasting (optimizers' and some norm layers' exports keep them). The result dtype is the
// promotion of the three tensors; PyTorch refuses a floating `value` for integral tensors
// (addcmul) and integer division (addcdiv). Rows in ops.def under "ternary.cpp"; lowered with
// the pointwise ops (passes/lower_pointwise.cpp).
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

namespace {

DType addc_dtype(const Node& node, bool div) {
  const std::vector<TypeOperand> ops = {type_operand(node, "self"), type_operand(node, "tensor1"),
                                        type_operand(node, "tensor2")};
  for (const TypeOperand& o : ops)
    if (!o.is_tensor())
      ir::shape_args::fail(node, std::string(div ? "addcdiv" : "addcmul") + " needs tensors",
                           "self, tensor1 and tensor2 tensors", "a number");
  const DType rt = result_type(ops);
  if (is_integral(rt, true)) {
    if (div)
      ir::shape_args::fail(node, "integer division with addcdiv is not supported",
                           "floating tensors (PyTorch refuses it too)", dtype_name(rt));
    if (ir::shape_args::has(node, "value") && scalar_kind(node, "value") == Scalar::Kind::kFloat)
      ir::shape_args::fail(node, "a floating value for integral addcmul",
                           "an integer value (PyTorch refuses a float too)", "a float");
  }
  return rt;
}

TensorType addc_type(const Node& node, bool div) {
  const DType rt = addc_dtype(node, div);
  return pointwise_type(node,
                        {type_operand(node, "self"), type_operand(node, "tensor1"),
                         type_operand(node, "tensor2")},
                        rt);
}

std::vector<RValue> addc_kernel(KernelContext& ctx, bool div) {
  addc_dtype(ctx.node(), div);
  const Tensor& self = ctx.tensor("self");
  const Tensor& t1 = ctx.tensor("tensor1");
  const Tensor& t2 = ctx.tensor("tensor2");
  const DType rt = result_type(
      std::vector<Operand>{operand_arg(ctx, "self"), operand_arg(ctx, "tensor1"),
                           operand_arg(ctx, "tensor2")});
  const Scalar value =
      ctx.has("value") ? scalar_arg(ctx, "value") : Scalar::from_int(1);
  Tensor out;
  ANVIL_DISPATCH_COMPUTE(rt, ctx.where(), C, {
    const C v = value.as<C>();  // PyTorch's order: self + (value * t1) * t2, or / t2
    out = map3<C, C, C, C>(
        self, t1, t2,
        [v, div](C s, C a, C b) { return static_cast<C>(div ? s + v * a / b : s + v * a * b); },
        ctx.where());
  });
  return {to_preserving(out, rt)};
}

}  // namespace

std::vector<TensorType> shape_addcmul(const Node& n) { return {addc_type(n, false)}; }
std::vector<RValue> kernel_addcmul(KernelContext& c) { return addc_kernel(c, false); }
std::vector<TensorType> shape_addcdiv(const Node& n) { return {addc_type(n, true)}; }
std::vector<RValue> kernel_addcdiv(KernelContext& c) { return addc_kernel(c, true); }

}  // namespace anvil::ops
