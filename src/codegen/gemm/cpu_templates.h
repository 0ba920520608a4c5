// anvil's own CPU GEMM kernels as autotuner candidates (issue 16, deliver 1): each candidate is
// one generated translation unit (a BLIS-like blocked GEMM: B packed into NR-column panels, once
// per call or per block and K block for a small M, A packed per MC x KC block into MR-row
// panels, an MR x NR register-tile micro-kernel, the epilogue in the store), generated from a
// CpuTemplateConfig. The candidate's `entry` is
//   extern "C" int entry(const AnvilRtApi* api, void* run_ctx, const AnvilGemmCall* call);
// (0, or non-zero with a message through api->set_error). The source includes only
// "anvil/anvil_rt.h", C/C++ standard headers and <immintrin.h>; its ISA is enabled with
// `#pragma GCC target`, so it compiles under any x86-64 target flags (it must only run where
// the ISA is present, which cpu_template_candidates checks against the target's features).
//
// Threads: api->parallel_for over the MC x NC blocks of C (2-D). Each element of C is computed
// by one task with the K blocks in order, so results do not depend on the thread count or on the
// block split (which shrinks NC / MC for small problems to give every thread work).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/gemm/gemm_candidate.h"

namespace anvil::codegen::gemm {

/// Instruction set of a template's micro-kernel.
enum class CpuIsa {
  kAvx2,        // avx2 + fma: ymm tiles
  kAvx512,      // avx512f: zmm tiles
  kAvx512Bf16,  // avx512f + avx512bw + avx512bf16: _mm512_dpbf16_ps on bf16 pairs
  kAvx512Vnni,  // avx512f + avx512bw + avx512vnni: _mm512_dpbusd_epi32 on int8 quads
};
const char* cpu_isa_name(CpuIsa isa);  // "avx2", "avx512", "avx512bf16", "avx512vnni"
/// The target features (runtime/cpu_features names) an ISA needs.
std::vector<std::string> cpu_isa_features(CpuIsa isa);
/// Whether `have` (a target's cpu_features) holds every feature of `need`.
bool has_cpu_features(const std::vector<std::string>& have, const std::vector<std::string>& need);

/// Element types of a template: inputs A and B, output C (accumulation is always fp32).
enum class CpuGemmTypes {
  kF32,      // fp32 x fp32 -> fp32
  kBf16,     // bf16 x bf16 -> bf16
  kBf16F32,  // bf16 x bf16 -> fp32
  kI8I32,    // int8 x int8 -> int32 (exact; alpha 1, beta 0, no bias / activation)
};
const char* cpu_gemm_types_token(CpuGemmTypes t);  // "f32", "bf16", "bf16f32", "i8i32"

/// One template configuration. bf16 inputs on kAvx2 / kAvx512 are widened to fp32 while packing
/// and run the fp32 micro-kernel; kAvx512Bf16 packs them as (k, k+1) pairs for dpbf16. int8 runs
/// on kAvx512Vnni only (A packed as u8 = a + 128 in quads of K, 128 * colsum(B) subtracted).
struct CpuTemplateConfig {
  CpuGemmTypes types = CpuGemmTypes::kF32;
  CpuIsa isa = CpuIsa::kAvx512;
  int mr = 6, nr = 32;                    // register tile; nr a multiple of the vector width
  int64_t kc = 256, mc = 144, nc = 1024;  // cache blocks; mc % mr == 0, nc % nr == 0, kc even
                                          // (int8: a multiple of 4)
  bool trans_a = false, trans_b = false;  // the layout the name states (the kernel takes any)
};

/// "own_<types>_<isa>_mr<MR>_nr<NR>_kc<KC>_mc<MC>_nc<NC>_<ab>", ab in nn / nt / tn / tt.
std::string cpu_template_name(const CpuTemplateConfig& c);
/// The extern "C" entry symbol: "anvil_gemm_" + the name.
std::string cpu_template_entry(const CpuTemplateConfig& c);
/// The translation unit of `c` (defines cpu_template_entry(c); everything else it defines has
/// internal linkage in a namespace of that name, so several different templates can be
/// concatenated into one file; a package must hold each entry once).
/// Throws Error for an invalid configuration (tile / block sizes).
std::string cpu_template_source(const CpuTemplateConfig& c);

/// The configurations for types `t` on `isa`, in generation order (10-30 per ISA and types;
/// empty when the ISA has no kernel for them: bf16 dot for fp32 inputs).
std::vector<CpuTemplateConfig> cpu_template_configs(CpuGemmTypes t, CpuIsa isa);

/// The candidate of one configuration (backend kOwn, its entry and source; the store applies
/// bias and activation except for int8). Throws Error for an invalid configuration.
GemmCandidate cpu_template_candidate(const CpuTemplateConfig& c);

/// The template candidates for `p`: every configuration of each ISA whose features are all in
/// `cpu_features` (widest ISA first), for the dtypes of p (fp32 -> fp32, bf16 -> bf16 or fp32,
/// int8 -> int32); empty for other dtypes or when no ISA is available. Backend kOwn; the store
/// applies bias and activation (fuses_bias / fuses_activation true; false for int8, which takes
/// neither). Deterministic order.
std::vector<GemmCandidate> cpu_template_candidates(const GemmProblem& p,
                                                   const std::vector<std::string>& cpu_features);

}  // namespace anvil::codegen::gemm
