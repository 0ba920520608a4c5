#include "ops/registry.h"

#include <unordered_map>

namespace anvil::ir {

const std::vector<OpSchema>& all_ops() {
  static const std::vector<OpSchema> kOps = {
#define ANVIL_OP(ID, NAME, CAT, MINA, MAXA, MUT) \
  {NAME, OpCategory::CAT, MINA, MAXA, MUT, &ops::shape_##ID, &ops::kernel_##ID},
#include "ops/ops.def"
#undef ANVIL_OP
  };
  return kOps;
}

const OpSchema* find_op(const std::string& target) {
  static const std::unordered_map<std::string, const OpSchema*> kByName = [] {
    std::unordered_map<std::string, const OpSchema*> m;
    for (const auto& op : all_ops()) m.emplace(op.name, &op);
    return m;
  }();
  auto it = kByName.find(canonical_target(target));
  return it == kByName.end() ? nullptr : it->second;
}

}  // namespace anvil::ir
