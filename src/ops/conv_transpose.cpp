// Transposed convolution (conv_transpose1d, conv_transpose2d.input, and convolution with
// transposed=True through conv.cpp): shape rules and reference kernels. The arithmetic is the
// runtime's (runtime/kernels/conv_transpose.h), shared so that the interpreter and compiled
// models agree; this file validates the node's arguments and computes symbolic sizes.
#include "runtime/kernels/conv_transpose.h"

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace conv_transpose_detail {

/// Constant int list argument `name` of a shape rule (a single value stays one value).
std::vector<int64_t> const_ints(const ir::Node& node, const char* name,
                                const std::vector<int64_t>& dflt) {
  std::vector<SymInt> d(dflt.begin(), dflt.end());
  std::vector<int64_t> out;
  for (const SymInt& s : ir::shape_args::symints(node, name, d)) {
    if (!s.is_constant())
      ir::shape_args::fail(node, str("'", name, "' must be constant"), "ints", s.str());
    out.push_back(s.constant());
  }
  return out;
}

/// The transposed-convolution arguments of a shape rule.
runtime::kern::ConvTransposeArgs static_args(const ir::Node& node) {
  runtime::kern::ConvTransposeArgs a;
  a.stride = const_ints(node, "stride", {1});
  a.padding = const_ints(node, "padding", {0});
  a.output_padding = const_ints(node, "output_padding", {0});
  a.dilation = const_ints(node, "dilation", {1});
  a.groups = ir::shape_args::int_(node, "groups", 1);
  return a;
}

/// Output type of a transposed convolution node (input, weight, bias?, stride, padding,
/// output_padding, groups, dilation): weight sizes must be static; spatial input sizes may be
/// symbolic.
ir::TensorType shape(const ir::Node& node) {
  const ir::TensorType& x = ir::shape_args::type(node, "input");
  const ir::TensorType& wt = ir::shape_args::type(node, "weight");
  if (x.dtype != wt.dtype)
    ir::shape_args::fail(node, "input and weight dtypes differ", dtype_name(x.dtype),
                         dtype_name(wt.dtype));
  Shape ws, xs;
  for (const SymInt& s : wt.sizes) {
    if (!s.is_constant())
      ir::shape_args::fail(node, "weight sizes must be static", "ints", wt.str());
    ws.push_back(s.constant());
  }
  // Validate with the spatial sizes replaced by 1 (the real sizes may be symbolic).
  for (const SymInt& s : x.sizes) xs.push_back(s.maybe_constant().value_or(1));
  const runtime::kern::ConvTransposeArgs a = static_args(node);
  const std::string where = node_where(node);
  (void)runtime::kern::conv_transpose_sizes(xs, ws, a, where);
  const size_t sp = ws.size() - 2, first = x.sizes.size() - sp;
  auto pick = [&](const std::vector<int64_t>& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; };
  ir::TensorType t;
  t.dtype = x.dtype;
  t.device = x.device;
  for (size_t d = 0; d + sp + 1 < x.sizes.size(); ++d) t.sizes.push_back(x.sizes[d]);  // batch
  t.sizes.push_back(SymInt(ws[1] * a.groups));
  for (size_t i = 0; i < sp; ++i) {
    const int64_t k = ws[2 + i];
    const int64_t s = pick(a.stride, i), p = pick(a.padding, i), op = pick(a.output_padding, i),
                  dl = pick(a.dilation, i);
    t.sizes.push_back((x.sizes[first + i] - 1) * s + (-2 * p + dl * (k - 1) + op + 1));
  }
  return t;
}

/// Reference kernel body shared by conv_transpose{1d,2d} and convolution(transposed=True).
Tensor run(const ir::KernelContext& ctx, const runtime::kern::ConvTransposeArgs& a) {
  const Tensor& x = ctx.tensor("input");
  const Tensor& w = ctx.tensor("weight");
  const std::optional<Tensor> bias = ctx.opt_tensor("bias");
  const std::string where = ctx.where();
  Tensor out =
      Tensor::empty(runtime::kern::conv_transpose_sizes(x.sizes(), w.sizes(), a, where), x.dtype());
  runtime::kern::conv_transpose(x, w, bias, a, out, where);
  return out;
}

/// The arguments of a reference kernel.
runtime::kern::ConvTransposeArgs kernel_args(const ir::KernelContext& ctx) {
  runtime::kern::ConvTransposeArgs a;
  a.stride = ctx.ints("stride", {1});
  a.padding = ctx.ints("padding", {0});
  a.output_padding = ctx.ints("output_padding", {0});
  a.dilation = ctx.ints("dilation", {1});
  a.groups = ctx.int_arg("groups", 1);
  return a;
}

}  // namespace conv_transpose_detail

std::vector<ir::TensorType> shape_conv_transpose1d(const ir::Node& node) {
  return {conv_transpose_detail::shape(node)};
}
std::vector<ir::RValue> kernel_conv_transpose1d(ir::KernelContext& ctx) {
  return {conv_transpose_detail::run(ctx, conv_transpose_detail::kernel_args(ctx))};
}

std::vector<ir::TensorType> shape_conv_transpose2d(const ir::Node& node) {
  return {conv_transpose_detail::shape(node)};
}
std::vector<ir::RValue> kernel_conv_transpose2d(ir::KernelContext& ctx) {
  return {conv_transpose_detail::run(ctx, conv_transpose_detail::kernel_args(ctx))};
}

}  // namespace anvil::ops
