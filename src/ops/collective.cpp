// Collective family: torch's functional collectives (_c10d_functional). Shape rules never need a
// process group (they are what compiling without a live group relies on): all_reduce and
// broadcast keep their input's type, all_gather_into_tensor multiplies dim 0 by group_size,
// reduce_scatter_tensor divides it, all_to_all_single's dim 0 is the sum of the output splits;
// the coalesced forms give one output per input, typed as the single-tensor op types it.
// The op table holds no reference kernels for them: ops may use only ir and core
// (ARCHITECTURE.md), so the interpreter runs collectives through dist itself
// (src/interp/collective_kernels.cpp); the table's kernels only say so.
#include "core/error.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

/// The table kernel of every collective: collectives run in the interpreter, through dist.
std::vector<ir::RValue> no_table_kernel(ir::KernelContext& ctx) {
  ctx.fail("collectives have no op-table kernel; the interpreter runs them through dist",
           "the interpreter (interp::Interpreter)", "a direct kernel call");
}

/// Type of the gathered / scattered tensor `t`: dim 0 times `mul` / divided by `div`.
ir::TensorType scaled_dim0(const ir::Node& node, ir::TensorType t, int64_t mul, int64_t div) {
  if (t.sizes.empty())
    ir::shape_args::fail(node, "collective over dim 0 of a 0-d tensor", "a tensor with dims",
                         "a 0-d tensor");
  if (mul < 1 || div < 1)
    ir::shape_args::fail(node, "group_size must be positive", ">= 1", str(div > 1 ? div : mul));
  if (div > 1) {
    if (auto c = t.sizes[0].maybe_constant(); c && *c % div != 0)
      ir::shape_args::fail(node, "dim 0 is not divisible by the group size",
                           str("a multiple of ", div), str(*c));
    t.sizes[0] = t.sizes[0].floordiv(SymInt(div));
  } else {
    t.sizes[0] = t.sizes[0] * SymInt(mul);
  }
  return t;
}

/// The types of the `inputs` list (a None entry is an error), each mapped by `f`.
template <typename F>
std::vector<ir::TensorType> each_input(const ir::Node& node, F&& f) {
  std::vector<ir::TensorType> out;
  for (const auto& t : ir::shape_args::types(node, "inputs")) {
    if (!t) ir::shape_args::fail(node, "None in a coalesced collective's inputs", "tensors", "None");
    out.push_back(f(*t));
  }
  return out;
}

}  // namespace

std::vector<ir::TensorType> shape_c10d_all_reduce(const ir::Node& node) {
  return {ir::shape_args::type(node, "input")};
}
std::vector<ir::RValue> kernel_c10d_all_reduce(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_all_reduce_(const ir::Node& node) {
  return {ir::shape_args::type(node, "input")};
}
std::vector<ir::RValue> kernel_c10d_all_reduce_(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_wait_tensor(const ir::Node& node) {
  return {ir::shape_args::type(node, "tensor")};
}
std::vector<ir::RValue> kernel_c10d_wait_tensor(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_all_gather_into_tensor(const ir::Node& node) {
  return {scaled_dim0(node, ir::shape_args::type(node, "input"),
                      ir::shape_args::int_(node, "group_size"), 1)};
}
std::vector<ir::RValue> kernel_c10d_all_gather_into_tensor(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_reduce_scatter_tensor(const ir::Node& node) {
  return {scaled_dim0(node, ir::shape_args::type(node, "input"), 1,
                      ir::shape_args::int_(node, "group_size"))};
}
std::vector<ir::RValue> kernel_c10d_reduce_scatter_tensor(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_all_to_all_single(const ir::Node& node) {
  ir::TensorType t = ir::shape_args::type(node, "input");
  if (t.sizes.empty())
    ir::shape_args::fail(node, "all_to_all_single of a 0-d tensor", "a tensor with dims",
                         "a 0-d tensor");
  if (ir::shape_args::has(node, "output_split_sizes")) {
    SymInt total(0);
    for (const SymInt& s : ir::shape_args::symints(node, "output_split_sizes")) total = total + s;
    t.sizes[0] = total;
  }
  return {t};
}
std::vector<ir::RValue> kernel_c10d_all_to_all_single(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_broadcast(const ir::Node& node) {
  return {ir::shape_args::type(node, "input")};
}
std::vector<ir::RValue> kernel_c10d_broadcast(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_broadcast_(const ir::Node& node) {
  return {ir::shape_args::type(node, "input")};
}
std::vector<ir::RValue> kernel_c10d_broadcast_(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

// Coalesced forms: one output per input, typed as the single-tensor op types it.
std::vector<ir::TensorType> shape_c10d_all_reduce_coalesced(const ir::Node& node) {
  return each_input(node, [](const ir::TensorType& t) { return t; });
}
std::vector<ir::RValue> kernel_c10d_all_reduce_coalesced(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_all_reduce_coalesced_(const ir::Node& node) {
  return each_input(node, [](const ir::TensorType& t) { return t; });
}
std::vector<ir::RValue> kernel_c10d_all_reduce_coalesced_(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_all_gather_into_tensor_coalesced(const ir::Node& node) {
  const int64_t w = ir::shape_args::int_(node, "group_size");
  return each_input(node, [&](const ir::TensorType& t) { return scaled_dim0(node, t, w, 1); });
}
std::vector<ir::RValue> kernel_c10d_all_gather_into_tensor_coalesced(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

std::vector<ir::TensorType> shape_c10d_reduce_scatter_tensor_coalesced(const ir::Node& node) {
  const int64_t w = ir::shape_args::int_(node, "group_size");
  return each_input(node, [&](const ir::TensorType& t) { return scaled_dim0(node, t, 1, w); });
}
std::vector<ir::RValue> kernel_c10d_reduce_scatter_tensor_coalesced(ir::KernelContext& ctx) { return no_table_kernel(ctx); }

}  // namespace anvil::ops
