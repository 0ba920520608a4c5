// compile_to_program: clone, graph passes (with optional verification), lowering, scheduling,
// memory planning.
#include "passes/pipeline.h"

#include <cstdlib>
#include <string>

#include "core/env_switch.h"
#include "core/error.h"
#include "ir/verifier.h"
#include "passes/graph_passes.h"
#include "passes/lower_internal.h"

namespace anvil::passes {

Program compile_to_program(const ir::Graph& graph, const PipelineOptions& options) {
  Program program;
  program.stats.nodes_in = static_cast<int>(graph.num_nodes());
  auto g = clone_graph(graph);
  auto check = [&](const char* pass) {
    if (!options.verify) return;
    try {
      ir::verify(*g);
    } catch (const Error& e) {
      throw e.with_context(std::string("after pass ") + pass);
    }
  };
  propagate_shapes(*g);
  check("propagate_shapes");
  if (decompose_losses(g) > 0) check("decompose_losses");
  if (auto missing = unlowered_nodes(*g); !missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += "\n  " + m;
    throw Error(std::to_string(missing.size()) + " node(s) use ops the compiler cannot lower",
                "compile", "ops whose src/ops/ops.def row names a lowering",
                "ops with none (they run in the interpreter only):" + list);
  }
  std::set<std::string> folded;
  program.stats.dce_removed += dce(*g);
  check("dce");
  if (options.fold_batch_norm) {
    program.stats.batch_norms_folded = fold_batch_norm(*g, folded);
    check("fold_batch_norm");
    if (env_switch("ANVIL_NORM_THROUGH_CAT").value_or(options.norm_through_cat) &&
        norm_through_cat(g) > 0)
      check("norm_through_cat");
  }
  if (options.cse) {
    program.stats.cse_replaced = cse(*g);
    check("cse");
  }
  if (options.fold_constants) {
    FoldResult fr = fold_constants(*g);
    program.stats.folded_nodes = fr.nodes_folded;
    folded.insert(fr.folded_targets.begin(), fr.folded_targets.end());
    check("fold_constants");
  }
  program.stats.dce_removed += dce(*g);
  detail::Lowerer lowerer(*g, program, folded);
  lowerer.set_materialize_gemm_sums(options.materialize_gemm_sums);
  lowerer.options = &options;
  lowerer.run();
  detail::schedule(program, lowerer.snodes(), options.fuse);
  if (options.conv_channels_last && (options.target_device == Device::Type::kCPU ||
                                     options.target_device == Device::Type::kCUDA)) {
    const char* layout = std::getenv("ANVIL_CONV_LAYOUT");
    if (!layout || std::string(layout) != "nchw")
      program.stats.channels_last_buffers =
          detail::plan_conv_layouts(program, options.target_device);
  }
  if (options.extern_writes_strided_output)
    detail::retarget_permuted_copies(program, options.extern_writes_strided_output);
  const CollectiveScheduleStats cs =
      schedule_collectives(program, collective_options_from_env(options.collectives));
  program.stats.collectives = cs.collectives;
  program.stats.collectives_bucketed = cs.bucketed;
  program.stats.collective_moves = cs.moved;
  return program;
}

}  // namespace anvil::passes
