// GEMM kernels chosen without timing: where one of anvil's own kernels is known to beat the
// library on every GPU of the target, the package uses it with --autotune off (a tuned compile
// times it among the other candidates instead). Today: the
// skinny GEMM (codegen/gemm/cuda_skinny.h) for cuda-sm90 packages, on static 16-bit linear
// layers with M <= kSkinnyMaxM and a weight of at least kSkinnyMinWeightElems elements, with the
// epilogue cuBLASLt would fuse (bias, activation; erf GELU and SiLU too). The kernel refuses a
// GPU other than compute capability 9.x at run time and the step then runs cuBLASLt. Off with
// ANVIL_CUDA_SKINNY=0 or a --gemm-backends list without "own"; --gemm-allow / --gemm-deny
// filter it by name.
// On the CPU: an fp32 GEMM against an immutable constant B (a Linear's weight) whose result goes
// through a bias, an activation (relu, relu6, gelu erf / tanh, silu) or a constant factor /
// term (match_gemm_epilogues' CPU forms; not a residual add) runs the packed kernel the default
// path runs anyway (ANVIL_GEMM_LIB_PACKED variant 0: sgemm_const_b) through AnvilRtApi::gemm,
// with that epilogue in its store instead of a loop kernel after it. Off with
// ANVIL_CPU_FUSED_GEMM=0 or a --gemm-backends list without "own"; filtered by --gemm-allow /
// --gemm-deny as "own_packed_f32_auto".
// On the CPU, bf16: a bf16 x bf16 GEMM (bf16 or fp32 out, static shape, not batched) on a target
// with AVX-512 and without AMX runs anvil's widening template kDefaultBf16Template (bf16 widened
// to fp32 while packing, the fp32 AVX-512 micro-kernel, epilogue in the store) instead of
// oneDNN: on an AVX-512 Xeon without AMX (docs/performance.md) oneDNN's bf16 GEMM ran 1.0-1.4x
// slower than it at a small decoder's shapes, and the tuner chose it or its neighbours there.
// With AMX oneDNN's tile kernels win, so the rule stays off. Off with ANVIL_CPU_BF16_TEMPLATE=0
// or a --gemm-backends list without "own"; filtered by --gemm-allow / --gemm-deny by its name.
#pragma once

#include <cstdint>

#include "codegen/gemm/gemm_candidate.h"
#include "codegen/target.h"
#include "passes/loop_ir.h"

namespace anvil::driver {

constexpr int64_t kSkinnyMaxM = 16;
constexpr int64_t kSkinnyMinWeightElems = int64_t(1) << 20;
/// The part of a template name (cpu_templates.h) the bf16 rule picks: MR 12, NR 32 on AVX-512.
constexpr const char* kDefaultBf16Template = "_avx512_mr12_nr32_kc256_mc144_nc1024_";

/// Sets GemmStep::choice on the GEMM steps that have none and fit the rules above (only with
/// --autotune off); returns how many it set.
int default_gemm_kernels(passes::Program& program, const codegen::gemm::GemmOptions& options,
                         const codegen::Target& backend, const codegen::TargetInfo& target);

}  // namespace anvil::driver
