// The GEMM tuner's stand-in for a package's epilogue kernel (driver/gemm_tune.cpp). A cuBLASLt
// candidate whose epilogue cuBLASLt lacks (erf GELU, SiLU, relu6) runs in a package as the plain
// GEMM followed by a loop kernel applying bias and activation over C; the tuning child
// (tools/gemm_time) times it as that, running this kernel after each GEMM: C read and written
// in place, the bias read, the activation computed as the generated kernels compute it (erff,
// tanhf, expf; 16-byte vectors when C is contiguous and aligned). A device copy of C stood in
// before, and undercharged an erf GELU over bf16 by ~30 % (40 vs 56 us over [100352, 384] on
// an H200), so a CUTLASS kernel fusing it lost votes it should have won.
#pragma once

#include <string>

#include "codegen/toolchain.h"

namespace anvil::codegen::gemm {

/// The entry the stand-in library exports, called as a CUDA template is by the tuning child:
/// int SYMBOL(const AnvilGemmCall*, void* workspace, size_t workspace_bytes, void* stream), and
/// size_t SYMBOL_workspace(const AnvilGemmCall*) (0). It applies call->bias (bias_kind) and
/// call->activation to call->c [m, n] (leading dim ldc, c_dtype f32 / f16 / bf16) in place;
/// non-zero for another dtype or activation code.
constexpr const char* kEpilogueStandinEntry = "anvil_gemm_epilogue_standin";

/// The CUDA C++ text of that library (one translation unit).
std::string epilogue_standin_source();

/// nvcc options to build it (sm_90a, as the skinny GEMM).
ToolchainOptions epilogue_standin_toolchain_options();

}  // namespace anvil::codegen::gemm
