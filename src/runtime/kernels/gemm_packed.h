// Single-threaded fp32 GEMM against a B matrix packed ahead of time (a model weight packed once at
// load or compile time), for the small-M linear layers where a general BLAS loses time repacking
// the weight on every call. C = alpha * op(A) * B (+ bias) (then ReLU), beta = 0.
//
// Packed layout: B (K x N) is cut into panels of kPackedPanel = 16 columns; panel j holds, for
// p = 0..K-1, the 16 consecutive floats B[p][16j .. 16j+15] (the last panel zero-padded); the
// panels follow one another. Micro-kernels (AVX-512, AVX2+FMA, generic C++) are picked at run
// time; results are deterministic for a given ISA and independent of how [0, n) is split.
#pragma once

#include <cstdint>

namespace anvil::runtime {

/// Columns per packed panel of B.
constexpr int64_t kPackedPanel = 16;

/// Floats a packed copy of a K x N matrix takes: ceil(n/16)*16*k (last panel zero-padded).
int64_t packed_b_floats(int64_t k, int64_t n);

/// Packs op(B) (K x N; trans_b: B is stored N x K, i.e. a PyTorch linear weight [out, in]) with
/// leading dimension ldb into `out` (packed_b_floats(k, n) floats). Layout: panel j holds columns
/// [16j, 16j+16): for p in 0..k-1, 16 consecutive floats op(B)[p][16j .. 16j+15]; panels are
/// consecutive.
void pack_b(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb, float* out);

/// Instruction set of the GEMM micro-kernel. kAuto picks the best one this CPU runs.
enum class GemmIsa { kAuto, kGeneric, kAvx2, kAvx512 };

/// Whether this CPU can run `isa` (kAuto, kGeneric: always).
bool gemm_isa_available(GemmIsa isa);

/// An activation applied in the store after bias and row bias (ReLU has its own flag; the
/// AVX-512 micro-kernels apply these in registers too, the others over finished rows).
/// Same formulas as torch: GELU 0.5 x (1 + erf(x / sqrt 2)) or its tanh approximation, SiLU
/// x sigmoid(x), ReLU6 min(max(x, 0), 6); erf and exp are vec_math.h's (absolute error ~2e-7
/// of the activation's scale). NaN stays NaN.
enum class GemmAct { kNone, kRelu6, kGeluErf, kGeluTanh, kSilu };

/// C[:, n0:n1) = alpha * op(A)[m x k] * B[:, n0:n1) (+ bias[n0:n1) broadcast over rows when
/// bias != nullptr), then max(x, 0) when relu. op(A) is A (m x k, row stride lda) or, with
/// trans_a, A^T (A stored k x m, row stride lda). B is `packed_b` from pack_b (K x N). C is
/// row-major with row stride ldc and is overwritten (beta = 0). n0 is a multiple of 16;
/// n1 <= n. `row_bias` (when not null) adds row_bias[i] to row i (after `bias`, before ReLU: a
/// convolution's per-channel bias). Single-threaded (the caller splits [0, n) over threads in
/// multiples of 16); the per-element arithmetic does not depend on the split. kAuto picks the best
/// ISA; an ISA this CPU cannot run, or bad sizes, throw anvil::Error. `act` (after ReLU when both
/// are given) is applied before C is stored (AVX-512: in registers; else over each row block's
/// finished rows). A is read in place (nothing is packed or allocated per call). `packed_k` (0: k) is the K that `packed_b` was packed with, when only
/// its first k rows take part (attention's causal blocks read the first keys of a packed V).
void sgemm_packed(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* packed_b, const float* bias, bool relu, float* c,
                  int64_t ldc, int64_t n0, int64_t n1, GemmIsa isa = GemmIsa::kAuto,
                  const float* row_bias = nullptr, GemmAct act = GemmAct::kNone,
                  int64_t packed_k = 0);

/// Applies `act` to n floats in place (vectorised for this CPU; kNone: nothing).
void gemm_activate(GemmAct act, float* p, int64_t n);

/// The largest K block the kernel uses (512, or ANVIL_GEMM_KC in 16..4096 when set: a knob for
/// benchmarks, read once per process).
int64_t gemm_packed_max_kc();

}  // namespace anvil::runtime
