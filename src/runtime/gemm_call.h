// AnvilRtApi::gemm: a GEMM through a named library (the autotuner's library candidates).
#pragma once

#include <string>

#include "anvil/anvil_rt.h"
#include "runtime/packed_weights.h"

namespace anvil::runtime {

/// What each library takes (ANVIL_GEMM_LIB_*), and which epilogue it applies in its own store
/// (the rest runs as a pass over C after the product):
///   OPENBLAS  fp32, fp64                                   fused: nothing
///   PACKED    fp32, beta 0; variant 0 auto (sgemm_const_b), 1 generic, 2 avx2, 3 avx512 ISA
///             (an ISA this CPU lacks is an error)          fused: column bias, every activation
///   ONEDNN    fp32, bf16 -> bf16|fp32, fp16 -> fp16|fp32, int8 -> int32 (plain product only);
///             bf16 variant 0/1 oneDNN's bf16 kernels, 2 widened to fp32 (gemm_onednn.h)
///                                                          fused: alpha, beta, bias, activation
///   DEFAULT   fp32 / fp64 as OPENBLAS; bf16, fp16, int8 through oneDNN when the runtime has it,
///             else widened to fp32 (int8: an exact int32 loop).
/// Runs `call` (include/anvil/anvil_rt.h AnvilGemmCall) on the current thread pool; a B marked
/// constant may be packed once into `cache` (null: per call). Throws anvil::Error naming the
/// library, sizes and dtypes when the library is missing or does not take the call.
void gemm_call(PackedWeightCache* cache, const AnvilGemmCall& call);

/// "gemm(library 3, variant 0, 64x32x16, bf16 x bf16 -> fp32, ...)": the call in messages.
std::string gemm_call_str(const AnvilGemmCall& call);

/// The AnvilRtApi entry: gemm_call, with errors written to the run's context; 0 or 1.
int api_gemm(void* run_ctx, const AnvilGemmCall* call);

}  // namespace anvil::runtime
