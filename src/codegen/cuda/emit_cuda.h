// Internal to the CUDA target (src/codegen/cuda/*.cpp): CUDA C++ for the steps of a Program.
#pragma once

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/c_expr.h"
#include "codegen/gemm/gemm_epilogue.h"  // FusedEpilogue
#include "codegen/generate.h"
#include "passes/loop_ir.h"

namespace anvil::codegen::cuda {

/// Includes, RunState, scalar helpers (__host__ __device__), block reductions, launch checks;
/// `with_complex`: also the complex headers (cuda::std::complex for kernels, std::complex for
/// host steps) and the complex32 storage helpers.
std::string preamble(bool with_complex);

/// A loop kernel as a __global__ function plus `void NAME(const RunState& s)`, which launches
/// it on s.stream (and records a failed launch with api->set_error). Pure pointwise kernels run
/// one thread per element (grid-stride); kernels with reductions or several passes are row
/// kernels (emit_row_kernels).
std::string emit_loop_kernel(const passes::Program& p, const passes::LoopKernel& k);
/// The row-kernel form of loop kernel `k` (emit_cuda_rows.cpp: a block, a warp or a thread per
/// row): its __global__ kernels, and the launcher's launches once n_outer and sy are set.
struct RowKernels {
  std::string kernels, launch;
};
RowKernels emit_row_kernels(const passes::Program& p, const passes::LoopKernel& k);
/// `__global__ void __launch_bounds__(threads) NAME(Syms<n> sy, T* __restrict__ p<root>...) {`
/// with the declarations of the symbols `text` uses.
std::string kernel_head(const passes::Program& p, const std::set<int>& roots,
                        const std::string& name, int threads, const std::string& text);
/// How generated kernels (loop, row and extern kernels) are launched (ANVIL_CUDA_PDL at compile
/// time; an unknown value is an Error): 0 plain launches; 1 (default) programmatic dependent
/// launches (anvil_launch / anvil_launch_shared of the preamble) with anvil_grid_wait() as each
/// kernel's first statement; 2 as 1, each kernel also letting the next be scheduled at its
/// start (anvil_grid_trigger()).
int pdl_mode();
/// The statements a PDL kernel starts with (pdl_mode), indented by two spaces; "" for mode 0.
std::string pdl_prologue();
/// `NAME<<<grid, threads, 0, stream>>>(sy, bases...);` (`anvil_launch(s, NAME, grid, threads,
/// sy, bases...)` under PDL) and its launch check, at indent `ind`.
std::string kernel_launch(const passes::Program& p, const std::set<int>& roots,
                          const std::string& kernel, const std::string& step,
                          const std::string& grid, int threads, const std::string& ind);


/// `int NAME(const RunState& s)` for a GEMM step: the device backend's cuBLASLt GEMM
/// (api->device->gemm), batched over the innermost batch dim, looping over the others. With
/// `fused` (one batch dim at most): api->device->gemm_ex with the epilogue, falling back to the
/// plain GEMM and the launch of `fused->fallback` (emitted before it) when cuBLASLt cannot fuse.
std::string emit_gemm(const passes::Program& p, const passes::GemmStep& g,
                      const FusedEpilogue* fused = nullptr);
/// The launcher of a loop kernel whose every statement a GEMM's epilogue computes: nothing.
std::string emit_fused_away(const passes::LoopKernel& k, const std::string& gemms);

/// `int NAME(const RunState& s)` for an extern op: with its CUDA kernel where it has one
/// (emit_cuda_extern.cpp: embedding, index.Tensor, gather, cumsum, diff, attention; 1-D / 2-D
/// convolutions through cuDNN, emit_cuda_conv.cpp, with the host step behind them), else a
/// host step — the CPU runtime kernel through api->extern_call, which stages the tensors
/// through host memory (runtime/host_staging.h).
std::string emit_extern(const passes::Program& p, const passes::ExternStep& e);
/// Why extern step `e` has no CUDA kernel, or "" when it has one.
std::string cuda_kernel_gap(const passes::Program& p, const passes::ExternStep& e);
/// True when extern step `e` can run as a host step: an op of the table with a CPU runtime
/// kernel (not anvil's internal control-flow, item and data-dependent-size steps).
bool runs_on_host(const passes::Program& p, const passes::ExternStep& e);
/// Why the CUDA target cannot compile extern step `e` at all, or "".
std::string extern_unsupported_reason(const passes::Program& p, const passes::ExternStep& e);

/// The vectorized form of a pointwise loop kernel (emit_cuda_vector.cpp): `NAME_kernel_v`, each
/// thread taking `width` consecutive innermost elements with 16-byte (8 for some 16-bit mixes)
/// loads and stores; the launcher runs it when `align_check` (C++ over the launcher's buffer
/// bases) holds and the scalar kernel otherwise. Empty (width 0) when the kernel does not qualify.
struct VectorKernel {
  std::string kernel_text, align_check;
  int width = 0;
};
VectorKernel emit_vector_kernel(const passes::Program& p, const passes::LoopKernel& k);
/// The vector form of a row kernel's pass loops (emit_cuda_vector.cpp): width V (0 when some
/// pass does not qualify), each pass's contiguous accesses, and the launcher's alignment check.
struct VecAccess {
  int buffer = -1;
  SymInt index;
  bool store = false;
  size_t elem = 0;
};
struct RowVectorPlan {
  int width = 0;
  std::string lane_var, align_check;
  std::vector<std::vector<VecAccess>> access;  // per pass
};
RowVectorPlan plan_row_vector(const passes::Program& p, const passes::LoopKernel& k);
/// Pass `pass`'s loop of row kernel `k` over the `threads` threads of a row (a block's, or a
/// warp's), thread `tid` of them ("threadIdx.x", "lane"), V lanes per thread per step.
void emit_row_vector_loop(Body& body, const passes::Program& p, const passes::LoopKernel& k,
                          const RowVectorPlan& plan, size_t pass, int threads,
                          const std::string& tid, const std::string& ind,
                          std::ostringstream& os);
/// "const int64_t o0 = ...;" lines for the dims `sizes` of linear index `lin` (prefix o / r).
std::string decompose(const std::vector<SymInt>& sizes, const std::string& lin,
                      const std::string& prefix, const std::string& ind);

/// Kernels get the model's symbols and the run-time ones (aten.item, counts of nonzero) by
/// value in one Syms<kernel_sym_count(p)>: `kernel_syms_fill` is the launcher's text filling
/// `sy`, `kernel_symbol_decls` the kernel's declarations of the names `text` uses.
size_t kernel_sym_count(const passes::Program& p);
std::string kernel_syms_fill(const passes::Program& p);
std::string kernel_symbol_decls(const passes::Program& p, const std::string& text,
                                const std::string& indent);

/// Why the CUDA target cannot compile `step` of `p`, or "" when it can.
std::string unsupported_reason(const passes::Program& p, const passes::Step& step);

}  // namespace anvil::codegen::cuda
