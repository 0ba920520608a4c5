// GEMM epilogues fused into the GEMM's own store (gemm_epilogue.cpp): the CUDA target's cuBLASLt
// calls and, on the CPU, the autotuner's chosen kernels that apply a bias and an activation
// (and the CPU-only forms below: a constant factor, a constant term, relu6).
//
// A GEMM step's result is computed in place in the destination of the one pointwise statement
// that reads it (passes/schedule.cpp fuse_gemm_epilogues); on the CPU that statement runs as a
// loop kernel over C. On CUDA, when the statement is exactly one of the forms cuBLASLt applies in
// its own epilogue, the GEMM step calls api->device->gemm_ex with that epilogue and the
// statement leaves its loop kernel (a pointwise kernel, or a pass's loop of a multi-pass one such
// as the residual sum a layer norm's kernel stores; a kernel left empty launches nothing). The
// forms, over the
// GEMM's dtype (float32, bfloat16, float16) and with C[i, j] the GEMM's own element:
//   C + bias[j], relu(C [+ bias[j]]), gelu_tanh(C [+ bias[j]]),
//   C [+ bias[j]] + R[i, j] and C [+ bias[j]] + beta * R[i, j] (R laid out as C; cuBLASLt's C)
// and C alone (a copy). gelu with approximate='none' (erf) is not cuBLASLt's GELU, which is the
// tanh approximation: it stays a loop kernel. An activation after a residual add stays one too.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/gemm/gemm_candidate.h"
#include "passes/loop_ir.h"

namespace anvil::codegen::gemm {

using passes::Affine;  // (passes/loop_ir.h)
using passes::affine;
/// The buffer whose memory buffer `b` uses (following alias_of).
int buffer_root(const passes::Program& p, int b);

/// Epilogue codes as the generated code names them (include/anvil/anvil_device.h). The kinds
/// after kBiasGeluTanh (gelu with approximate='none', silu) are not cuBLASLt's: only a chosen
/// kernel that applies them in its store (a CUTLASS candidate of the autotuner, a CPU library or
/// template) fuses them; their names have no ANVIL_EPILOGUE_* macro in anvil_device.h.
enum class GemmEpilogueKind {
  kNone, kBias, kRelu, kGeluTanh, kBiasRelu, kBiasGeluTanh,
  kGeluErf, kBiasGeluErf, kSilu, kBiasSilu,
  kRelu6, kBiasRelu6  // relu6 = hardtanh(0, 6) = clamp(relu(x), max 6): CPU chosen kernels only
};
/// "ANVIL_EPILOGUE_BIAS_RELU", ...
const char* epilogue_macro(GemmEpilogueKind k);
/// Whether cuBLASLt's epilogues compute kind `k` (the device backend's gemm_ex).
bool cublaslt_fuses(GemmEpilogueKind k);
/// Whether `k` adds a bias vector / applies an activation.
bool epilogue_has_bias(GemmEpilogueKind k);
bool epilogue_has_activation(GemmEpilogueKind k);

/// One fused epilogue: statement `stmt` of the loop of pass `pass` of kernel step `kernel_step`,
/// computed by GEMM step `gemm_step`'s cuBLASLt call.
struct FusedEpilogue {
  size_t gemm_step = 0, kernel_step = 0, pass = 0, stmt = 0;
  GemmEpilogueKind kind = GemmEpilogueKind::kNone;
  int bias = -1;  // bias buffer (bias kinds): n elements of the GEMM's dtype from bias_offset
  SymInt bias_offset;
  int residual = -1;  // R, or -1: same layout as the GEMM's C from residual_offset
  SymInt residual_offset;
  double beta = 1.0;  // D = ... + beta * R
  // The CPU forms (match_gemm_epilogues with cpu_forms): D = act(scale * C [+ bias[j]]) with C
  // times or divided by constants (scale, folded into the GEMM's alpha), and D = act(scale * C
  // + shift) with one constant added to every element (has_shift: the bias is a vector of
  // `shift` the generated code fills once; the bias kinds then have bias = -1).
  double scale = 1.0;
  bool has_shift = false;
  double shift = 0.0;
  /// The loop kernel that computes only the fused statement: what the GEMM step launches after
  /// a plain GEMM when cuBLASLt cannot fuse (gemm_ex's ANVIL_GEMM_NOT_FUSED).
  passes::LoopKernel fallback;
};

/// The fusions of a program's steps: by GEMM step, and the statements taken out of each kernel.
struct EpiloguePlan {
  std::map<size_t, FusedEpilogue> by_gemm;
  // kernel step -> (pass, statement in the pass's loop), ascending
  std::map<size_t, std::vector<std::pair<size_t, size_t>>> removed;
  /// Kernel `k` (step `step`) without its fused statements; `k` itself when none.
  passes::LoopKernel remaining(size_t step, const passes::LoopKernel& k) const;
  /// Whether every statement of kernel `k` (step `step`) is fused into GEMMs.
  bool fused_away(size_t step, const passes::LoopKernel& k) const;
};

/// Every GEMM step of `p` (not of its subprograms) whose epilogue statement is one of the forms
/// above, any kind (what the autotuner poses to candidates that fuse epilogues). Strict: anything
/// it cannot prove equal to one of the forms stays unfused. With `cpu_forms` also the forms only
/// the CPU target's chosen kernels fuse (cpu_only_form): C scaled by constants (C * s, C / s,
/// nested), a constant added or subtracted (when no bias vector is), and relu6 written as
/// relu6, hardtanh(0, 6), clamp(0, 6), clamp(relu(x), max=6) or relu(clamp(x, max=6)).
EpiloguePlan match_gemm_epilogues(const passes::Program& p, bool cpu_forms = false);
/// Whether fusion `f` uses a form only the CPU's chosen kernels apply (a scale, a shift, relu6).
bool cpu_only_form(const FusedEpilogue& f);
/// The CUDA target's fusions: the forms of match_gemm_epilogues that cuBLASLt computes, and any
/// form whose GEMM step runs a chosen CUTLASS kernel applying exactly its bias and activation
/// (GemmStep::choice; a residual where the kernel fuses one; no batch dims; see
/// chosen_kernel_fuses).
EpiloguePlan plan_gemm_epilogues(const passes::Program& p);
/// Whether GEMM step `g`'s chosen kernel (choice.source set) applies fusion `f`'s bias and
/// activation and nothing else it lacks: no batch dims, bias and activation as tuned, a residual
/// only when the kernel fuses one (GemmKernelChoice::fuses_residual).
bool chosen_kernel_fuses(const passes::GemmStep& g, const FusedEpilogue& f);

/// The fusions of match_gemm_epilogues(p, true) that the CPU target applies in a GEMM's store:
/// GEMM steps without batch dims whose autotuned kernel (GemmStep::choice) applies the bias and
/// activation of the form (C + bias[j], relu, relu6, gelu (tanh or erf), silu and their bias
/// forms; no residual), the scale through AnvilGemmCall::alpha (any chosen kernel) and a shift
/// as a bias vector (a kernel that fuses a bias; the GEMM's n static).
EpiloguePlan cpu_store_epilogues(const passes::Program& p);
/// The AnvilGemmCall activation code (ANVIL_GEMM_ACT_*) of a fused form.
int gemm_call_activation(GemmEpilogueKind k);
/// Poses GEMM step `step`'s CUDA epilogue (plan: match_gemm_epilogues) into `p` as the bias and
/// activation a chosen kernel would apply in its store, or an fp32 residual alone as beta * C
/// (the 3xTF32 kernels' C source). False when the step keeps cuBLASLt (any other epilogue
/// adding a residual, or batch dims). A mixed GEMM (int8 B) is posed plain: the
/// mixed-input kernels fuse no epilogue, which then stays a loop kernel after the GEMM.
bool pose_cuda_epilogue(const EpiloguePlan& plan, size_t step, const passes::GemmStep& g,
                        GemmProblem& p);

}  // namespace anvil::codegen::gemm

namespace anvil::codegen::cuda {
// The CUDA target's names for them (it was their first user).
using gemm::Affine;
using gemm::affine;
using gemm::buffer_root;
using gemm::epilogue_macro;
using gemm::EpiloguePlan;
using gemm::FusedEpilogue;
using gemm::GemmEpilogueKind;
using gemm::plan_gemm_epilogues;
using gemm::chosen_kernel_fuses;
}  // namespace anvil::codegen::cuda
