// GEMM kernels chosen without timing: where one of anvil's own kernels is known to beat the
// library on every GPU of the target, the package uses it with --autotune off (a tuned compile
// times it among the other candidates instead). Today: the
// skinny GEMM (codegen/gemm/cuda_skinny.h) for cuda-sm90 packages, on static 16-bit linear
// layers with M <= kSkinnyMaxM and a weight of at least kSkinnyMinWeightElems elements, with the
// epilogue cuBLASLt would fuse (bias, activation; erf GELU and SiLU too). The kernel refuses a
// GPU other than compute capability 9.x at run time and the step then runs cuBLASLt. Off with
// ANVIL_CUDA_SKINNY=0 or a --gemm-backends list without "own"; --gemm-allow / --gemm-deny
// filter it by name.
// On CUDA, fp32 GEMMs need no rule here: the generated code asks the device backend for its
// prebuilt 3xTF32 kernel (anvil_device.h ANVIL_FP32_3XTF32), which takes the problems it wins on.
// On the CPU: an fp32 GEMM against an immutable constant B (a Linear's weight) whose result goes
// through a bias, an activation (relu, relu6, gelu erf / tanh, silu) or a constant factor /
// term (match_gemm_epilogues' CPU forms; not a residual add) runs the packed kernel the default
// path runs anyway (ANVIL_GEMM_LIB_PACKED variant 0: sgemm_const_b) through AnvilRtApi::gemm,
// with that epilogue in its store instead of a loop kernel after it. Off with
// ANVIL_CPU_FUSED_GEMM=0 or a --gemm-backends list without "own"; filtered by --gemm-allow /
// --gemm-deny as "own_packed_f32_auto".
// On the CPU, bf16: a bf16 x bf16 -> bf16 GEMM (static shape, M >= kDefaultBf16MinM, not
// batched) of a `native` package built on a CPU with AVX-512 and without AMX runs anvil's widening
// template default_bf16_template() (bf16 widened to fp32 while packing, the fp32 AVX-512
// micro-kernel, bias / activation in the store) instead of oneDNN: on an AVX-512 Xeon without AMX
// oneDNN's bf16 GEMM ran up to 1.4x slower than it at a small decoder's shapes (M 512), where the
// tuner chose it or a neighbour (docs/performance.md). Named targets (x86_64-avx512) keep
// oneDNN: their feature list cannot tell whether the running CPU has AMX, where oneDNN's tile
// kernels win (the tuner chose oneDNN at every GEMM of both decoders on an AMX host). Off with
// ANVIL_CPU_BF16_TEMPLATE=0 or a --gemm-backends list without "own"; filtered by --gemm-allow /
// --gemm-deny by its name.
#pragma once

#include <cstdint>

#include "codegen/gemm/cpu_templates.h"
#include "codegen/gemm/gemm_candidate.h"
#include "codegen/target.h"
#include "passes/loop_ir.h"

namespace anvil::driver {

constexpr int64_t kSkinnyMaxM = 16;
constexpr int64_t kSkinnyMinWeightElems = int64_t(1) << 20;
/// The bf16 rule's smallest M. With its packed weight kept (AnvilRtApi::const_derived) the
/// template beat oneDNN from M 8 to 512 on an AVX-512 Xeon without AMX (1.3-1.8x at M 8-32);
/// at M 1 oneDNN was faster (the template streams the weight as fp32 panels, twice its bytes).
constexpr int64_t kDefaultBf16MinM = 8;

/// The bf16 rule's template: bf16 -> bf16, AVX-512, MR 12, NR 32, KC 256, MC 144, NC 1024 (one of
/// the tuner's candidates, cpu_template_configs), with the problem's layout.
codegen::gemm::CpuTemplateConfig default_bf16_template(bool trans_a, bool trans_b);

/// Sets GemmStep::choice on the GEMM steps that have none and fit the rules above (only with
/// --autotune off); returns how many it set.
int default_gemm_kernels(passes::Program& program, const codegen::gemm::GemmOptions& options,
                         const codegen::Target& backend, const codegen::TargetInfo& target);

}  // namespace anvil::driver
