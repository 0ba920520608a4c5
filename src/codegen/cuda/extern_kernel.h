// Internal to the CUDA target's extern kernels (emit_cuda_extern.cpp, emit_cuda_attention.cpp):
// the helpers that turn a step's strided views into kernel text, and the launcher every extern
// kernel shares.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/cuda/emit_cuda.h"

namespace anvil::codegen::cuda::ext {

using cpu::buffer_base;
using cpu::symbol_decls;
using passes::ExternAttr;
using passes::ExternStep;
using passes::Program;
using passes::TensorView;

/// The step's constant integer attribute `name`, else `dflt`.
int64_t int_attr(const ExternStep& e, const std::string& name, int64_t dflt);
bool has_attr(const ExternStep& e, const std::string& name);
/// A value of `dtype` stored at `ptr[off]` in its compute type.
std::string load(DType t, const std::string& ptr, const std::string& off);
/// Statement storing compute value `v` at `ptr[off]` of `dtype`.
std::string store(DType t, const std::string& ptr, const std::string& off, const std::string& v);
std::string paren(const SymInt& s);
/// "const int64_t u0 = ...;" decomposing linear `lin` over `sizes`.
std::string decompose_linear(const std::vector<SymInt>& sizes, const std::string& lin,
                      const std::string& prefix, const std::string& ind);
/// Element offset of view `v` at index variables vars[d] (one per view dim); a dim of size 1
/// contributes nothing (broadcasting).
std::string offset_of(const TensorView& v, const std::vector<std::string>& vars);
std::string numel(const std::vector<SymInt>& sizes);
std::vector<std::string> vars(const std::string& prefix, size_t n);

/// The step's graph nodes, comma-separated (the comment above each kernel).
std::string node_list(const ExternStep& e);
/// The pieces every extern kernel shares: parameters (one pointer per present view, named
/// v<i> for input i and y<i> for output i) and the launcher.
struct KernelText {
  std::string name;
  std::vector<std::pair<std::string, const TensorView*>> params;  // (name, view)
  std::string body;                                                // inside the kernel
  std::string grid, block = "256", shared = "0";                   // launch, host expressions
  std::string guard;  // host statement(s) before the launch (return 1 with an error to refuse)
  std::string bounds;  // __launch_bounds__ arguments ("240, 4"), or none
  // parameters after the views: (declaration in the kernel, argument the launcher passes: a
  // host expression the guard may define), e.g. {"float* __restrict__ ws", "ws"}
  std::vector<std::pair<std::string, std::string>> extra;
};
/// The kernel and `int NAME(const RunState& s)` launching it.
std::string finish(const Program& p, const ExternStep& e, const KernelText& k);
/// One thread per output element (grid-stride) over `out`, in the memory order of `order_by`
/// (default: `out` itself; a view of the same rank). With `block_prologue`, the loop steps a
/// whole block at a time (`base`: the block's first index) and runs the prologue before each
/// step with every thread of the block (it may __syncthreads), then `inner` where the thread's
/// index is in range.
std::string elementwise_loop(const TensorView& out, const std::string& inner,
                             const TensorView* order_by = nullptr,
                             const std::string& block_prologue = "");
/// Code checking index `var` against [0, n) after wrapping negatives when `wrap`.
std::string check_index(const ExternStep& e, const std::string& var, const std::string& n,
                        bool wrap);
std::string elementwise_grid(const TensorView& out);

using passes::spatial_ints;  // (passes/loop_ir.h: the layout plan reads attributes alike)

/// Why pooling step `e` (max_pool2d, avg_pool2d, adaptive_avg_pool2d) has no CUDA kernel, or
/// "" (emit_cuda_pool.cpp); pool() emits it: one thread per output element, or a reduction
/// for a global average pool.
std::string pool_gap(const ExternStep& e);
std::string pool(const Program& p, const ExternStep& e);
bool is_pool_target(const std::string& t);

/// scaled_dot_product_attention (emit_cuda_attention.cpp): cuDNN's fused attention where it
/// applies and is faster, else anvil's own kernel.
std::string attention(const Program& p, const ExternStep& e);

/// Why convolution step `e` does not run on cuDNN (emit_cuda_conv.cpp; it stays a host step),
/// or "" when it does: 1-D or 2-D, not transposed, float32 / bfloat16 / float16, constant
/// stride, padding, dilation and groups.
std::string conv_gap(const ExternStep& e);
/// True when conv() emits anvil's direct depthwise kernel for `e` (no cuDNN, no host path).
bool conv_is_direct(const ExternStep& e);
/// A convolution through the device backend's cuDNN convolution (api->device->conv), its bias
/// and fused relu fused where an engine takes them, with the step's host path behind it.
std::string conv(const Program& p, const ExternStep& e);

/// aten._scaled_mm (emit_cuda_fp8.cpp): why cuBLASLt's FP8 GEMM cannot take step `e`, or "";
/// scaled_mm() emits the call (api->device->gemm_ex with float8 operands, device ABI 6).
std::string scaled_mm_gap(const ExternStep& e);
std::string scaled_mm(const Program& p, const ExternStep& e);

}  // namespace anvil::codegen::cuda::ext
