// Declarations of every shape rule and reference kernel named in ops.def. Family files define
// them; registry.cpp builds the table from the same rows.
#pragma once

#include "ir/op_schema.h"

namespace anvil::ops {

#define ANVIL_OP(ID, NAME, CAT, MINA, MAXA, MUT, LOWER)                       \
  std::vector<ir::TensorType> shape_##ID(const ir::Node& node);           \
  std::vector<ir::RValue> kernel_##ID(ir::KernelContext& ctx);
#include "ops/ops.def"
#undef ANVIL_OP

}  // namespace anvil::ops
