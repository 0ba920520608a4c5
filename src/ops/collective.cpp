// Collective family: torch's functional collectives (_c10d_functional). Shape rules never need a
// process group (they are what compiling without a live group relies on): all_reduce and
// broadcast keep their input's type, all_gather_into_tensor multiplies dim 0 by group_size,
// reduce_scatter_tensor divides it, all_to_all_single's dim 0 is the sum of the output splits.
// Reference kernels run through dist::functional with the group named in the node (the
// interpreter then needs a live group, e.g. under `anvil launch`; without one the group lookup
// fails with an error naming the group). wait_tensor waits for the pending work of its input's
// storage (a no-op when nothing is pending).
#include "core/error.h"
#include "dist/functional.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

namespace fn = anvil::dist::functional;

/// Type of the gathered / scattered tensor: dim 0 times `mul` / divided by `div`.
ir::TensorType scaled_dim0(const ir::Node& node, int64_t mul, int64_t div) {
  ir::TensorType t = ir::shape_args::type(node, "input");
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

/// Runs a dist call; its errors (unknown group, bad arguments) are rethrown at the node, naming
/// the group: the interpreter needs a live process group for collectives.
template <typename F>
auto through_dist(ir::KernelContext& ctx, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    const std::string group = ctx.string_arg("group_name", "?");
    ctx.fail("collective on group '" + group + "' needs a live process group (run under `anvil " +
                 "launch` or mpirun): " + e.what(),
             "a registered process group", "group '" + group + "'");
  }
}

std::optional<std::vector<int64_t>> opt_ints(ir::KernelContext& ctx, const std::string& name) {
  if (!ctx.has(name)) return std::nullopt;
  return ctx.ints(name);
}

}  // namespace

std::vector<ir::TensorType> shape_c10d_all_reduce(const ir::Node& node) {
  return {ir::shape_args::type(node, "input")};
}
std::vector<ir::RValue> kernel_c10d_all_reduce(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::all_reduce(ctx.tensor("input"), ctx.string_arg("reduce_op", "sum"),
                          ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::TensorType> shape_c10d_all_reduce_(const ir::Node& node) {
  return {ir::shape_args::type(node, "input")};
}
std::vector<ir::RValue> kernel_c10d_all_reduce_(ir::KernelContext& ctx) {
  Tensor t = ctx.tensor("input");
  through_dist(ctx, [&] {
    return fn::all_reduce_(t, dist::reduce_op_from_name(ctx.string_arg("reduce_op", "sum")),
                           ctx.string_arg("group_name", "0"));
  });
  return {t};
}

std::vector<ir::TensorType> shape_c10d_wait_tensor(const ir::Node& node) {
  return {ir::shape_args::type(node, "tensor")};
}
std::vector<ir::RValue> kernel_c10d_wait_tensor(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] { return fn::wait_tensor(ctx.tensor("tensor")); })};
}

std::vector<ir::TensorType> shape_c10d_all_gather_into_tensor(const ir::Node& node) {
  return {scaled_dim0(node, ir::shape_args::int_(node, "group_size"), 1)};
}
std::vector<ir::RValue> kernel_c10d_all_gather_into_tensor(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::all_gather_into_tensor(ctx.tensor("input"), ctx.int_arg("group_size"),
                                      ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::TensorType> shape_c10d_reduce_scatter_tensor(const ir::Node& node) {
  return {scaled_dim0(node, 1, ir::shape_args::int_(node, "group_size"))};
}
std::vector<ir::RValue> kernel_c10d_reduce_scatter_tensor(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::reduce_scatter_tensor(ctx.tensor("input"),
                                     dist::reduce_op_from_name(ctx.string_arg("reduce_op", "sum")),
                                     ctx.int_arg("group_size"), ctx.string_arg("group_name", "0"));
  })};
}

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
std::vector<ir::RValue> kernel_c10d_all_to_all_single(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::all_to_all_single(ctx.tensor("input"), opt_ints(ctx, "output_split_sizes"),
                                 opt_ints(ctx, "input_split_sizes"),
                                 ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::TensorType> shape_c10d_broadcast(const ir::Node& node) {
  return {ir::shape_args::type(node, "input")};
}
std::vector<ir::RValue> kernel_c10d_broadcast(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::broadcast(ctx.tensor("input"), ctx.int_arg("src"), ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::TensorType> shape_c10d_broadcast_(const ir::Node& node) {
  return {ir::shape_args::type(node, "input")};
}
std::vector<ir::RValue> kernel_c10d_broadcast_(ir::KernelContext& ctx) {
  Tensor t = ctx.tensor("input");
  through_dist(ctx, [&] {
    return fn::broadcast_(t, ctx.int_arg("src"), ctx.string_arg("group_name", "0"));
  });
  return {t};
}

}  // namespace anvil::ops
