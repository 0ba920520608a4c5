// The compiler middle end: graph passes, lowering to loop kernels with fusion, memory planning.
#pragma once

#include <functional>

#include "ir/graph.h"
#include "passes/collectives.h"
#include "passes/loop_ir.h"

namespace anvil::passes {

/// Which passes run.
struct PipelineOptions {
  bool fold_constants = true;   // compile-time folding of weight-only subgraphs
  bool fold_batch_norm = true;  // batch_norm into a preceding conv / linear
  // batch_norm (+ relu) over a channel concatenation computed per part (norm_through_cat;
  // off on CUDA, where the part kernels' few threads lost: ANVIL_NORM_THROUGH_CAT=0 / 1 overrides)
  bool norm_through_cat = true;
  bool cse = true;
  bool fuse = true;     // fuse pointwise / reduction SNodes into shared kernels
  bool verify = false;  // ir::verify after every graph pass (with type checks)
  CollectiveScheduleOptions collectives;  // reordering / bucketing of collectives
  // Every user output in its own contiguous buffer (no views of inputs, of other outputs or
  // with offsets): the compiled subgraphs of control flow write into memory their caller gives.
  bool dense_outputs = false;
  // The device type the target runs on (set by the target: codegen/target.h). A graph recorded
  // with tensors on that device or on the CPU compiles; any other device is an error.
  Device::Type target_device = Device::Type::kCPU;
  // Extern steps whose code writes its output through any strided view (set by the target):
  // a copy that only permutes such a result into place is elided, the extern writing the
  // destination directly. Null: none.
  std::function<bool(const Program&, const ExternStep&)> extern_writes_strided_output;
  // A sum of a GEMM's result and a tensor of its shape read more than once (a transformer's
  // residual x + o_proj(a), read by the next norm and the next residual) is stored once instead
  // of recomputed by each reader: the target computes it in the GEMM's epilogue (set by the
  // CUDA target, whose cuBLASLt call adds the residual as it writes the result).
  bool materialize_gemm_sums = false;
  // Activations that only convolutions (and, on CUDA, pooling kernels) touch are kept
  // channels-last (CPU and CUDA targets: passes/conv_layout.cpp). The environment variable
  // ANVIL_CONV_LAYOUT=nchw turns it off.
  bool conv_channels_last = true;
  // mm / addmm / linear of a float16 / bfloat16 A and an int8 matrix converted to A's dtype
  // lower to one mixed GEMM step (GemmStep::b_dtype; passes/lower_matmul.cpp) instead of a
  // conversion kernel and a GEMM. Set by the driver only where the autotuner can give it a
  // mixed-input kernel (CUDA with CUTLASS candidates); a step left without one is lowered again
  // with this off.
  bool mixed_gemm = false;
};

/// Runs the passes on a copy of `graph` and lowers it: decompositions happen in the lowering
/// rules (linear / addmm / matmul -> GEMM step + bias epilogue, layer_norm / softmax / gelu /
/// batch_norm -> loop expressions and reductions). Throws Error naming the node for ops or
/// features the compiler does not support.
Program compile_to_program(const ir::Graph& graph, const PipelineOptions& options = {});

}  // namespace anvil::passes
