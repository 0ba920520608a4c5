// TEMPORARY during the spine's bring-up: weak fallbacks for ops whose family file is not yet
// written. Strong definitions in the family files override these. Deleted once all exist.
#include "core/error.h"
#include "ops/registry.h"

namespace anvil::ops {

#define ANVIL_OP(ID, NAME, CAT, MINA, MAXA, MUT)                                           \
  __attribute__((weak)) std::vector<ir::TensorType> shape_##ID(const ir::Node& node) {     \
    throw Error("shape rule not implemented yet", "node " + node.name + " (" NAME ")");    \
  }                                                                                        \
  __attribute__((weak)) std::vector<ir::RValue> kernel_##ID(ir::KernelContext& ctx) {      \
    throw Error("kernel not implemented yet", ctx.where());                                \
  }
#include "ops/ops.def"
#undef ANVIL_OP

}  // namespace anvil::ops
