// Collective family: torch's functional collectives (_c10d_functional). The shape rules are
// exact (a collective keeps its input's type). Reference kernels: wait_tensor is the identity
// (nothing is pending in the single-process interpreter); all_reduce needs a process group,
// which comes with the distributed work, so running it is a clear error for now.
#include "core/error.h"
#include "ops/registry.h"

namespace anvil::ops {

std::vector<ir::TensorType> shape_c10d_all_reduce(const ir::Node& node) {
  ir::TensorType t = ir::shape_args::type(node, "input");
  return {t};
}
std::vector<ir::RValue> kernel_c10d_all_reduce(ir::KernelContext& ctx) {
  std::string group = ctx.string_arg("group_name", "?");
  std::string op = ctx.string_arg("reduce_op", "?");
  ctx.fail("all_reduce (" + op + ") on group '" + group + "' of node " + ctx.node().name +
               " needs a process group; the interpreter runs one process and distributed "
               "execution is not supported yet",
           "a distributed runtime", "single-process interpreter");
}

std::vector<ir::TensorType> shape_c10d_wait_tensor(const ir::Node& node) {
  ir::TensorType t = ir::shape_args::type(node, "tensor");
  return {t};
}
std::vector<ir::RValue> kernel_c10d_wait_tensor(ir::KernelContext& ctx) {
  return {ctx.tensor("tensor")};
}

}  // namespace anvil::ops
