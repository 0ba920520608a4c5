// Reference implementations of torch's functional collectives for the interpreter. They run
// through dist::functional with the group named in the node, so the interpreter needs a live
// group (under `anvil launch` or mpirun); without one the group lookup fails with an error
// naming the group. wait_tensor waits for the pending work of its input's storage (a no-op
// when nothing is pending). They live here, not in src/ops, because ops may use only ir and core.
#include "interp/collective_kernels.h"

#include <map>
#include <optional>
#include <string>

#include "core/error.h"
#include "dist/functional.h"

namespace anvil::interp {

namespace {

namespace fn = anvil::dist::functional;

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

std::vector<ir::RValue> all_reduce(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::all_reduce(ctx.tensor("input"), ctx.string_arg("reduce_op", "sum"),
                          ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::RValue> all_reduce_(ir::KernelContext& ctx) {
  Tensor t = ctx.tensor("input");
  through_dist(ctx, [&] {
    return fn::all_reduce_(t, dist::reduce_op_from_name(ctx.string_arg("reduce_op", "sum")),
                           ctx.string_arg("group_name", "0"));
  });
  return {t};
}

std::vector<ir::RValue> wait_tensor(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] { return fn::wait_tensor(ctx.tensor("tensor")); })};
}

std::vector<ir::RValue> all_gather_into_tensor(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::all_gather_into_tensor(ctx.tensor("input"), ctx.int_arg("group_size"),
                                      ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::RValue> reduce_scatter_tensor(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::reduce_scatter_tensor(ctx.tensor("input"),
                                     dist::reduce_op_from_name(ctx.string_arg("reduce_op", "sum")),
                                     ctx.int_arg("group_size"), ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::RValue> all_to_all_single(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::all_to_all_single(ctx.tensor("input"), opt_ints(ctx, "output_split_sizes"),
                                 opt_ints(ctx, "input_split_sizes"),
                                 ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::RValue> broadcast(ir::KernelContext& ctx) {
  return {through_dist(ctx, [&] {
    return fn::broadcast(ctx.tensor("input"), ctx.int_arg("src"), ctx.string_arg("group_name", "0"));
  })};
}

std::vector<ir::RValue> broadcast_(ir::KernelContext& ctx) {
  Tensor t = ctx.tensor("input");
  through_dist(ctx, [&] {
    return fn::broadcast_(t, ctx.int_arg("src"), ctx.string_arg("group_name", "0"));
  });
  return {t};
}

/// A list of tensors as the node's list output.
std::vector<ir::RValue> as_list(const std::vector<Tensor>& ts) {
  return {std::vector<Tensor>(ts.begin(), ts.end())};
}

std::vector<ir::RValue> all_reduce_coalesced(ir::KernelContext& ctx) {
  return as_list(through_dist(ctx, [&] {
    return fn::all_reduce_coalesced(ctx.tensors("inputs"),
                                    dist::reduce_op_from_name(ctx.string_arg("reduce_op", "sum")),
                                    ctx.string_arg("group_name", "0"));
  }));
}

std::vector<ir::RValue> all_reduce_coalesced_(ir::KernelContext& ctx) {
  std::vector<Tensor> ts = ctx.tensors("inputs");
  through_dist(ctx, [&] {
    return fn::all_reduce_coalesced_(ts, dist::reduce_op_from_name(ctx.string_arg("reduce_op", "sum")),
                                     ctx.string_arg("group_name", "0"));
  });
  return as_list(ts);
}

std::vector<ir::RValue> all_gather_into_tensor_coalesced(ir::KernelContext& ctx) {
  return as_list(through_dist(ctx, [&] {
    return fn::all_gather_into_tensor_coalesced(ctx.tensors("inputs"), ctx.int_arg("group_size"),
                                                ctx.string_arg("group_name", "0"));
  }));
}

std::vector<ir::RValue> reduce_scatter_tensor_coalesced(ir::KernelContext& ctx) {
  return as_list(through_dist(ctx, [&] {
    return fn::reduce_scatter_tensor_coalesced(
        ctx.tensors("inputs"), dist::reduce_op_from_name(ctx.string_arg("reduce_op", "sum")),
        ctx.int_arg("group_size"), ctx.string_arg("group_name", "0"));
  }));
}

}  // namespace

std::vector<ir::RValue> run_collective_kernel(ir::KernelContext& ctx) {
  using Fn = std::vector<ir::RValue> (*)(ir::KernelContext&);
  static const std::map<std::string, Fn> kByOp = {
      {"all_reduce", all_reduce},
      {"all_reduce_", all_reduce_},
      {"wait_tensor", wait_tensor},
      {"all_gather_into_tensor", all_gather_into_tensor},
      {"reduce_scatter_tensor", reduce_scatter_tensor},
      {"all_to_all_single", all_to_all_single},
      {"broadcast", broadcast},
      {"broadcast_", broadcast_},
      {"all_reduce_coalesced", all_reduce_coalesced},
      {"all_reduce_coalesced_", all_reduce_coalesced_},
      {"all_gather_into_tensor_coalesced", all_gather_into_tensor_coalesced},
      {"reduce_scatter_tensor_coalesced", reduce_scatter_tensor_coalesced}};
  const std::string& target = ctx.node().target;
  const size_t ns = target.find('.');
  const size_t dot = target.find('.', ns + 1);
  const std::string op = target.substr(ns + 1, dot == std::string::npos ? std::string::npos : dot - ns - 1);
  auto it = kByOp.find(op);
  if (it == kByOp.end())
    ctx.fail("no interpreter implementation for this collective", "one of the _c10d_functional ops",
             target);
  return it->second(ctx);
}

}  // namespace anvil::interp
