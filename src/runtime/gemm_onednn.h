// ANVIL_GEMM_LIB_ONEDNN: one AnvilGemmCall through a oneDNN matmul primitive, the epilogue (alpha,
// beta, bias, activation) fused into the primitive as output scales and post-ops.
//
// Threading: Debian's libdnnl runs on OpenMP. The process must never have anvil's pool and
// OpenMP's team competing for the cores, so by default (kPoolChunks) the product is split into
// row or column blocks over anvil's pool and each block is one oneDNN call with OpenMP held to
// one thread (oneDNN never starts a thread). kOmp runs one call on the calling thread with
// OpenMP's team sized to the pool (the pool idles meanwhile); docs/design_notes.md says which is
// faster here and why the default is what it is.
#pragma once

#include <cstddef>

#include "anvil/anvil_rt.h"

namespace anvil::runtime {

/// Whether this runtime was built with oneDNN (ANVIL_HAVE_ONEDNN) and ANVIL_ONEDNN=0 does not turn
/// it off (the bf16 mm extern and the default library then take their pre-oneDNN paths).
bool onednn_available();

/// How a oneDNN GEMM uses the cores (see the file comment).
enum class OneDnnThreading { kPoolChunks, kOmp };
/// The mode in use: ANVIL_ONEDNN_THREADING=omp|pool when set, else kPoolChunks; settable for
/// benchmarks (not thread-safe against running GEMMs).
OneDnnThreading onednn_threading();
void set_onednn_threading(OneDnnThreading mode);

/// AnvilGemmCall::variant of ANVIL_GEMM_LIB_ONEDNN for bf16: 0 and 1 oneDNN's bf16 kernels, 2
/// operands widened to fp32 and the fp32 primitive (fp16 is always widened). Other dtypes
/// ignore the variant.
constexpr int kOneDnnVariantNative = 1;
constexpr int kOneDnnVariantWiden = 2;

/// C = act(alpha * op(A) * op(B) + beta * C + bias) through oneDNN on the current thread pool.
/// Dtypes: fp32; bf16 x bf16 -> bf16 or fp32; fp16 x fp16 -> fp16 or fp32 (oneDNN 2.x has no CPU
/// fp16 matmul: the operands are widened to fp32 first); int8 x int8 -> int32 exact (alpha 1,
/// beta 0, no bias or activation). Sizes must be positive (the caller handles empty products).
/// Throws anvil::Error naming the call when oneDNN is missing or rejects it.
void onednn_gemm(const AnvilGemmCall& g);

/// Primitives held by the cache (tests: a repeated call creates none).
size_t onednn_cached_primitives();

}  // namespace anvil::runtime
