#include "ops/registry.h"

namespace anvil::ops {

namespace {

const std::vector<ir::OpSchema>& table() {
  static const std::vector<ir::OpSchema> kOps = {
#define ANVIL_OP(ID, NAME, CAT, MINA, MAXA, MUT, LOWER)                                   \
  {NAME,        ir::OpCategory::CAT, MINA, MAXA, MUT, &shape_##ID, &kernel_##ID, \
   ir::Lowering::k##LOWER},
#include "ops/ops.def"
#undef ANVIL_OP
  };
  return kOps;
}

// The IR layer looks targets up in this table (ir::find_op); installed before main.
const bool kRegistered = (ir::register_op_table(&table()), true);

}  // namespace

}  // namespace anvil::ops
