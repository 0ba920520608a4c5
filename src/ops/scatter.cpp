// Scatter-style ops: scatter.src / scatter.value, scatter_add, scatter_reduce.two and index_put:
// shape rules and reference kernels. The element loops are the runtime's
// (runtime/kernels/scatter.h), shared so that the interpreter and compiled models agree (duplicate
// indices: row-major order, last write wins; accumulation order fixed). Outputs are new contiguous
// tensors of self's type.
#include "runtime/kernels/scatter.h"

#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

namespace sa = ir::shape_args;
namespace rk = runtime::kern;

/// self's type with contiguous strides.
ir::TensorType self_type(const ir::Node& node) {
  ir::TensorType t = sa::type(node, "self");
  t.strides.clear();
  return t;
}

/// Shape rule of the scatter family: checks index's dtype and rank, src's dtype.
ir::TensorType scatter_type(const ir::Node& node, bool has_src) {
  const ir::TensorType t = self_type(node);
  const ir::TensorType& index = sa::type(node, "index");
  if (index.dtype != DType::kInt64)
    sa::fail(node, "scatter(): expected an int64 index", "int64", dtype_name(index.dtype));
  if (index.sizes.size() != t.sizes.size() && !(index.sizes.empty() || t.sizes.empty()))
    sa::fail(node, "index tensor must have the same number of dimensions as self",
             str(t.sizes.size(), "-D"), index.str());
  if (has_src) {
    const ir::TensorType& src = sa::type(node, "src");
    if (src.dtype != t.dtype)
      sa::fail(node, "scatter(): expected self and src to have the same dtype", dtype_name(t.dtype),
               dtype_name(src.dtype));
  }
  return t;
}

/// A contiguous copy of self that the kernel writes into.
Tensor fresh_copy(const Tensor& self) { return self.contiguous().clone(); }

/// The reference kernel of scatter / scatter_reduce.
Tensor run_scatter(const ir::KernelContext& ctx, const Tensor& src, bool scalar_src,
                   rk::ScatterReduce reduce, bool include_self) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& index = ctx.tensor("index");
  const std::string where = ctx.where();
  const int64_t rank = self.dim() == 0 ? 1 : self.dim();
  int64_t dim = ctx.int_arg("dim");
  if (dim < -rank || dim >= rank)
    ctx.fail("dimension out of range", str("a dim in [", -rank, ", ", rank - 1, "]"), str(dim));
  if (dim < 0) dim += rank;
  rk::check_scatter_args(self.sizes(), dim, index, scalar_src ? nullptr : &src.sizes(), where);
  if (!scalar_src && src.dtype() != self.dtype())
    ctx.fail("scatter(): expected self and src to have the same dtype", dtype_name(self.dtype()),
             dtype_name(src.dtype()));
  Tensor out = fresh_copy(self);
  rk::scatter_into(out, dim, index, src, scalar_src, reduce, include_self, where);
  return out;
}

}  // namespace

std::vector<ir::TensorType> shape_scatter_src(const ir::Node& node) {
  return {scatter_type(node, true)};
}
std::vector<ir::RValue> kernel_scatter_src(ir::KernelContext& ctx) {
  return {run_scatter(ctx, ctx.tensor("src"), false, rk::ScatterReduce::kNone, true)};
}

std::vector<ir::TensorType> shape_scatter_value(const ir::Node& node) {
  return {scatter_type(node, false)};
}
std::vector<ir::RValue> kernel_scatter_value(ir::KernelContext& ctx) {
  const Tensor v = scalar_tensor(scalar_arg(ctx, "value"), ctx.tensor("self").dtype());
  return {run_scatter(ctx, v, true, rk::ScatterReduce::kNone, true)};
}

std::vector<ir::TensorType> shape_scatter_reduce_two(const ir::Node& node) {
  (void)rk::parse_scatter_reduce(node.arg("reduce") ? node.arg("reduce")->s : std::string(),
                                 node_where(node));
  return {scatter_type(node, true)};
}
std::vector<ir::RValue> kernel_scatter_reduce_two(ir::KernelContext& ctx) {
  const auto reduce = rk::parse_scatter_reduce(ctx.string_arg("reduce", ""), ctx.where());
  return {run_scatter(ctx, ctx.tensor("src"), false, reduce, ctx.bool_arg("include_self", true))};
}

std::vector<ir::TensorType> shape_scatter_add(const ir::Node& node) {
  return {scatter_type(node, true)};
}
std::vector<ir::RValue> kernel_scatter_add(ir::KernelContext& ctx) {
  return {run_scatter(ctx, ctx.tensor("src"), false, rk::ScatterReduce::kSum, true)};
}

std::vector<ir::TensorType> shape_index_put(const ir::Node& node) {
  const ir::TensorType t = self_type(node);
  const ir::TensorType& values = sa::type(node, "values");
  if (values.dtype != t.dtype)
    sa::fail(node, "index_put requires the source and destination dtypes to match",
             dtype_name(t.dtype), dtype_name(values.dtype));
  size_t consumed = 0;
  for (const auto& idx : sa::types(node, "indices")) {
    if (idx && idx->dtype != DType::kInt64 && idx->dtype != DType::kInt32 &&
        idx->dtype != DType::kBool && idx->dtype != DType::kUInt8)
      sa::fail(node, "tensors used as indices must be long, int, byte or bool tensors",
               "int64, int32, uint8 or bool", dtype_name(idx->dtype));
    consumed += (idx && (idx->dtype == DType::kBool || idx->dtype == DType::kUInt8))
                    ? idx->sizes.size()
                    : 1;
  }
  if (consumed > t.sizes.size())
    sa::fail(node, str("too many indices for a tensor of rank ", t.sizes.size()),
             str("<= ", t.sizes.size()), str(consumed));
  return {t};
}
std::vector<ir::RValue> kernel_index_put(ir::KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& values = ctx.tensor("values");
  if (values.dtype() != self.dtype())
    ctx.fail("index_put requires the source and destination dtypes to match",
             dtype_name(self.dtype()), dtype_name(values.dtype()));
  Tensor out = fresh_copy(self);
  rk::index_put_into(out, ctx.opt_tensors("indices"), values, ctx.bool_arg("accumulate", false),
                     ctx.where());
  return {out};
}

}  // namespace anvil::ops
