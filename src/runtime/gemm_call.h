// AnvilRtApi::gemm: a GEMM through a named library (the autotuner's library candidates).
#pragma once

#include "anvil/anvil_rt.h"
#include "runtime/packed_weights.h"

namespace anvil::runtime {

/// Runs `call` (include/anvil/anvil_rt.h AnvilGemmCall) on the current thread pool; a B marked
/// constant may be packed once into `cache` (null: per call). Throws anvil::Error naming the
/// library, sizes and dtypes when the library is missing or does not take the call.
void gemm_call(PackedWeightCache* cache, const AnvilGemmCall& call);

/// The AnvilRtApi entry: gemm_call, with errors written to the run's context; 0 or 1.
int api_gemm(void* run_ctx, const AnvilGemmCall* call);

}  // namespace anvil::runtime
