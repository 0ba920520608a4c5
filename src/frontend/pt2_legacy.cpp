// Legacy functional collectives (spec/collectives.md §1 "legacy op namespace"): torch.export
// still records `c10d_functional.*` ops, whose group is the trailing (tag, ranks, group_size)
// instead of a group name. The importer rewrites them into the native `_c10d_functional.*` ops,
// so everything after it (interpreter, compiler, generated code) sees native ops only. The group
// becomes legacy_group_name(tag, ranks, group_size) (core/group_name.h), which the registry resolves
// at run time to the registered group over exactly those ranks (the world for tag "" and ranks
// 0..W-1): the compiler has no live groups.
#include <algorithm>
#include <cstring>

#include "core/group_name.h"
#include "frontend/pt2_internal.h"

namespace anvil::frontend::detail {

namespace {

/// One legacy op: its native target, the native name of its tensor argument, and whether the
/// native op keeps a group_size argument (all_gather / reduce_scatter do).
struct LegacyOp {
  const char* legacy;
  const char* native;
  const char* tensor_arg;
  bool keeps_group_size;
};

constexpr LegacyOp kLegacyOps[] = {
    {"c10d_functional.all_reduce.default", "_c10d_functional.all_reduce.default", "input", false},
    {"c10d_functional.all_reduce_coalesced.default",
     "_c10d_functional.all_reduce_coalesced.default", "inputs", false},
    {"c10d_functional.all_gather_into_tensor.default",
     "_c10d_functional.all_gather_into_tensor.default", "input", true},
    {"c10d_functional.all_gather_into_tensor_coalesced.default",
     "_c10d_functional.all_gather_into_tensor_coalesced.default", "inputs", true},
    {"c10d_functional.reduce_scatter_tensor.default",
     "_c10d_functional.reduce_scatter_tensor.default", "input", true},
    {"c10d_functional.reduce_scatter_tensor_coalesced.default",
     "_c10d_functional.reduce_scatter_tensor_coalesced.default", "inputs", true},
    {"c10d_functional.all_to_all_single.default", "_c10d_functional.all_to_all_single.default",
     "input", false},
    {"c10d_functional.broadcast.default", "_c10d_functional.broadcast.default", "input", false},
    {"c10d_functional.wait_tensor.default", "_c10d_functional.wait_tensor.default", "tensor",
     false},
};

const LegacyOp* find_legacy(const std::string& target) {
  for (const LegacyOp& op : kLegacyOps)
    if (target == op.legacy) return &op;
  return nullptr;
}

}  // namespace

const char* native_collective(const std::string& target) {
  const LegacyOp* op = find_legacy(target);
  return op ? op->native : nullptr;
}

void rewrite_legacy_collective(ir::Node& node, const std::string& legacy_target,
                               const JField& where) {
  const LegacyOp* op = find_legacy(legacy_target);
  if (!op) return;
  const ir::Arg* tag = node.arg("tag");
  const ir::Arg* ranks = node.arg("ranks");
  const ir::Arg* size = node.arg("group_size");
  const bool grouped = std::strcmp(op->tensor_arg, "tensor") != 0;  // all but wait_tensor
  if (grouped && (!tag || tag->kind != ir::Arg::Kind::kString || !ranks ||
                  ranks->kind != ir::Arg::Kind::kInts || !size ||
                  size->kind != ir::Arg::Kind::kInt))
    where.fail("legacy collective without its (tag, ranks, group_size) group",
               "str tag, int[] ranks, int group_size", legacy_target);
  std::string group_name;
  int64_t group_size = 0;
  if (grouped) {
    if (size->i != static_cast<int64_t>(ranks->ints.size()))
      where.fail("legacy collective: group_size does not match the number of ranks",
                 std::to_string(ranks->ints.size()), std::to_string(size->i));
    group_size = size->i;
    group_name = legacy_group_name(tag->s, ranks->ints, size->i);
  }
  std::vector<ir::Arg> args;
  bool first_tensor = true;
  for (ir::Arg& a : node.args) {
    if (a.name == "tag" || a.name == "ranks" || a.name == "group_size") continue;
    if (first_tensor && (a.kind == ir::Arg::Kind::kTensor || a.kind == ir::Arg::Kind::kTensors)) {
      a.name = op->tensor_arg;  // self / shard / input / inputs
      first_tensor = false;
    } else if (a.name == "reduceOp") {
      a.name = "reduce_op";
    }
    args.push_back(std::move(a));
  }
  if (grouped) {
    if (op->keeps_group_size) {
      ir::Arg gs;
      gs.name = "group_size";
      gs.kind = ir::Arg::Kind::kInt;
      gs.i = group_size;
      args.push_back(std::move(gs));
    }
    ir::Arg gn;
    gn.name = "group_name";
    gn.kind = ir::Arg::Kind::kString;
    gn.s = group_name;
    args.push_back(std::move(gn));
  }
  node.args = std::move(args);
}

}  // namespace anvil::frontend::detail
