// Internal to the CPU emitter (src/codegen/cpu/*.cpp): C++ text for the pieces of a Program.
#pragma once

#include <functional>
#include <string>

#include "codegen/c_expr.h"
#include "codegen/generate.h"
#include "passes/loop_ir.h"

namespace anvil::codegen::gemm {
struct FusedEpilogue;  // codegen/gemm/gemm_epilogue.h
}  // namespace anvil::codegen::gemm

namespace anvil::codegen::cpu {

/// The text every generated translation unit starts with: includes, RunState, scalar helpers
/// (Python floor division / modulo for index expressions, bf16 / f16 conversions, NaN-aware
/// max / min).
std::string preamble(const std::string& ns = "anvil_model", bool with_complex = false);
/// True when generated `code` computes on complex values (it then needs preamble's complex
/// block: <complex> and the complex32 helpers).
bool needs_complex(const std::string& code);

using codegen::compute_type;  // codegen/c_expr.h
using codegen::storage_type;

/// Declarations of the model's symbols used by `text` (`const int64_t s77 = s.sym[0];`).
std::string symbol_decls(const passes::Program& p, const std::string& text,
                         const std::string& sym_array, const std::string& indent);

/// C++ pointer expression to element 0 of buffer `b` (as char* for arena buffers).
std::string buffer_base(const passes::Program& p, int b);
/// C++ `void*` expression for the first element of view `v` (its buffer plus its offset).
std::string view_data(const passes::Program& p, const passes::TensorView& v);
/// A C++ string literal of `s` (quotes, backslashes and newlines escaped).
std::string quoted(const std::string& s);
/// C++ statements filling AnvilRtTensor `var` (e.g. "in[0]") with view `v`: data, dtype, ndim,
/// sizes, strides; a view without a buffer (an absent optional operand) gets data null and
/// ndim -1. Throws Error naming `where` for more than 8 dims.
std::string rt_tensor_desc(const passes::Program& p, const std::string& var,
                           const passes::TensorView& v, const std::string& indent,
                           const std::string& where);

/// Emits `void NAME(const RunState& s)` (plus its parallel body) for a loop kernel.
std::string emit_loop_kernel(const passes::Program& p, const passes::LoopKernel& k,
                             const CpuCodegenOptions& o);
/// Emits `int NAME(const RunState& s)` for a GEMM step.
/// `fused`: the bias / activation the chosen kernel applies in its store, its constant factor
/// (in alpha) and constant term (a bias vector of it) (cpu_store_epilogues).
std::string emit_gemm(const passes::Program& p, const passes::GemmStep& g,
                      const gemm::FusedEpilogue* fused = nullptr);
/// Whether a GEMM step's B is an immutable f32 constant (emitted as api->sgemm_const_b, which
/// needs the runtime's ABI minor 2).
bool gemm_b_is_constant(const passes::Program& p, const passes::GemmStep& g);
/// Emits `int NAME(const RunState& s)` for an extern call.
std::string emit_extern(const passes::Program& p, const passes::ExternStep& e);

/// Highest collective id of the program's collective steps (-1: none).
int max_collective_id(const passes::Program& p);
/// Inline code in run() for a collective issue / wait step (emit_collective.cpp).
std::string emit_collective_step(const passes::Program& p, const passes::ExternStep& e);

// ---- control flow (emit_control.cpp) ----
/// True for "anvil.cond" / "anvil.while" steps (defined in the model translation unit).
bool is_control_step(const passes::Step& step);
/// Name of the run function of sub-program `i` of control step `e`.
std::string sub_program_name(const passes::ExternStep& e, size_t i);
/// `int NAME(const RunState& s)` for a control step: picks / loops over its sub-programs.
std::string emit_control_step(const passes::Program& p, const passes::ExternStep& e);
/// The calls of a program's steps in order (loop kernels return nothing, others an rc).
std::string emit_run_steps(const passes::Program& p, const std::string& indent);
/// Calls `fn(sub, run_function_name)` for every sub-program of `p`, nested ones included.
void for_each_subprogram(const passes::Program& p,
                         const std::function<void(const passes::Program&, const std::string&)>& fn);
/// Declarations of every sub-program's step and run functions, then the definitions of the
/// control steps (of `p` and nested) and of the sub-programs' run functions.
std::string emit_control_functions(const passes::Program& p);

/// The model translation unit: entry table, run(), arena / output sizes, metadata.
/// `preamble_text` replaces the CPU preamble (a device target's, which defines RunState the
/// same way and its own scalar helpers).
std::string emit_model(const passes::Program& p, const std::string& target,
                       const std::string& metadata_json, const CpuCodegenOptions& o,
                       const std::string& preamble_text = "");

// ---- kernel de-duplication (emit_dedup.cpp) ----
/// One emitted step function of a program, before de-duplication.
struct StepFunctionText {
  enum class Kind { kLoop, kGemm, kOther };
  Kind kind = Kind::kOther;
  std::string name;  // the step's function name
  std::string text;  // emit_loop_kernel / emit_gemm / emit_extern output
  const passes::Step* step = nullptr;  // the step it implements (kernels are grouped by its
                                       // passes::structural_key)
};
/// Step functions grouped for the translation units: a unit is one unchanged function, or one
/// shared implementation plus the forwarders of the steps it serves.
struct DedupResult {
  std::vector<std::string> units;
  int kernels_shared = 0;  // steps served by an implementation another step also uses
  int kernel_bodies = 0;   // distinct implementations
};
/// Merges loop kernels / GEMMs whose text is identical up to name, buffer bases and pointer
/// names into shared implementations "kshared<N>" (N from `next_shared`, advanced).
DedupResult dedup_step_functions(const passes::Program& p,
                                 const std::vector<StepFunctionText>& steps, int& next_shared);

}  // namespace anvil::codegen::cpu
