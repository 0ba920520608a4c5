// The loop-kernel IR (KERNELS.md §2): what the graph lowers to. A Program is a list of steps,
// each a generated loop kernel, a GEMM call or an extern call, over buffers (inputs, outputs,
// constants, and intermediates planned into one arena). Expressions are a hash-consed DAG over
// loads with symbolic index expressions (SymInt over loop variables o0.., r0.. and the model's
// size symbols). Knows nothing about C++: codegen/cpu prints it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/symint.h"
#include "core/tensor.h"

namespace anvil::passes {

/// Where a buffer's memory comes from at run time.
enum class BufferKind { kInput, kOutput, kConstant, kArena };
const char* buffer_kind_name(BufferKind k);

/// One block of memory the program reads or writes, contiguous, `numel` elements of `dtype`.
struct Buffer {
  std::string name;
  BufferKind kind = BufferKind::kArena;
  int index = -1;  // position among the inputs / outputs / constants
  DType dtype = DType::kFloat32;
  std::vector<SymInt> sizes;  // logical sizes (for printing; numel is their product)
  SymInt numel;
  SymInt offset;                   // kArena: byte offset in the arena (set by the memory planner)
  bool local = false;              // kArena: lives in registers inside one kernel (no memory)
  int alias_of = -1;               // shares the memory of this buffer (a GEMM result computed in
                                   // place in its epilogue's destination)
  std::vector<std::string> nodes;  // graph nodes whose value it holds
  // kArena / kOutput whose size uses a run-time symbol without a capacity (e.g. an all_to_all
  // with data-dependent split sizes): allocated during the run, before the first step that
  // uses it (api->run_alloc into RunState::dyn[dyn_slot], or api->output_alloc); not planned.
  bool run_time_sized = false;
  int dyn_slot = -1;
};

/// Scalar operations of loop-kernel expressions.
enum class ExprOp {
  kConst,  // f (floating) or i (integral / bool)
  kLoad,   // buffer[index]
  kIndex,  // the integer value of `index` (arange)
  kCast,   // args[0] converted to dtype (torch cast semantics; 16-bit floats round)
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kRecip,
  kSin,
  kCos,
  kTanh,
  kErf,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kExpm1,
  kLog1p,
  kLog2,
  kLog10,
  kSigmoid,
  kRelu,
  kLogicalNot,
  kBitNot,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kTruncDiv,
  kPow,
  kMax,
  kMin,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kLogicalAnd,
  kLogicalOr,
  kBitAnd,
  kBitOr,
  kBitXor,
  kAtan2,  // atan2(args[0], args[1])
  kFmod,   // C's fmod / integer %: the sign of args[0]; x % 0 gives 0 (the reference throws)
  kWhere,  // args[0] ? args[1] : args[2]
  kReal,   // real part of a complex args[0] (dtype: the real dtype)
  kImag,   // imaginary part of a complex args[0]
  kFloor,
  kCeil,
  kRound,  // half to even (torch.round)
  kTrunc,
};
const char* expr_op_name(ExprOp op);

/// One expression node. Values of floating dtypes compute in float (f16, bf16, f32) or double
/// (f64); integral and bool values compute in int64 (bool as 0 / 1); complex values in
/// std::complex<float> (c32, c64) or std::complex<double> (c128).
struct Expr {
  ExprOp op = ExprOp::kConst;
  DType dtype = DType::kFloat32;
  std::array<int, 3> args{-1, -1, -1};
  double f = 0;
  int64_t i = 0;
  int buffer = -1;  // kLoad
  SymInt index;     // kLoad, kIndex
};

/// Hash-consed expression storage: building the same expression twice gives the same id.
class ExprPool {
 public:
  int constant(double value, DType dtype);
  int int_constant(int64_t value, DType dtype);
  int load(int buffer, const SymInt& index, DType dtype);
  int index_value(const SymInt& index, DType dtype);
  int cast(int a, DType dtype);
  int unary(ExprOp op, int a, DType dtype);
  int binary(ExprOp op, int a, int b, DType dtype);
  int where(int cond, int a, int b, DType dtype);
  const Expr& at(int id) const { return exprs_[static_cast<size_t>(id)]; }
  size_t size() const { return exprs_.size(); }
  /// Number of distinct non-load, non-constant nodes reachable from `root`.
  int cost(int root) const;
  /// Ids of the load expressions (ExprOp::kLoad nodes) anywhere under `root`.
  void loads(int root, std::vector<int>& out) const;
  /// Text form: "add(load(x, o0*4 + r0), 1.0)".
  std::string str(int id) const;

 private:
  int intern(Expr e);
  std::vector<Expr> exprs_;
  std::unordered_map<std::string, int> index_;
};

/// How a reduction combines values.
enum class ReduceOp { kSum, kProd, kMax, kMin, kAny, kAll };
const char* reduce_op_name(ReduceOp op);

/// One statement of a loop kernel.
struct Stmt {
  enum class Kind { kStore, kReduce };
  Kind kind = Kind::kStore;
  int buffer = -1;  // destination (kReduce: where the result goes, unless the buffer is local)
  SymInt index;     // element index in `buffer` (kReduce: over outer variables only)
  int expr = -1;    // the value stored / accumulated
  ReduceOp reduce = ReduceOp::kSum;
  DType dtype = DType::kFloat32;  // destination dtype
  int acc = -1;                   // kReduce: accumulator id (acc<N> in the generated code)
};

/// One pass over the inner domain: statements before the loop (per outer point), in the loop,
/// and after it (reductions are complete there).
struct Pass {
  std::vector<Stmt> pre, loop, post;
};

/// A generated loop kernel: for each point of `outer` (parallel), the passes run in order, each
/// looping over `inner`. Loop variables are o0.. (outer) and r0.. (inner).
struct LoopKernel {
  std::string name;
  std::vector<std::string> nodes;  // graph nodes fused into it
  std::vector<SymInt> outer, inner;
  std::vector<Pass> passes;
};

/// A strided operand of an extern call or GEMM: buffer (or none), sizes, strides, offset.
struct TensorView {
  int buffer = -1;  // -1: None
  DType dtype = DType::kFloat32;
  std::vector<SymInt> sizes, strides;
  SymInt offset;
};

/// A non-tensor argument of an extern call (docs/externs.md): kind 0 int, 1 float, 2 string,
/// 3 int list.
struct ExternAttr {
  std::string name;
  int kind = 0;
  SymInt i;
  double f = 0;
  std::string s;
  std::vector<SymInt> ints;
};

struct Program;

/// A call to api->extern_call, or a step the generated code runs itself: "anvil.item" /
/// "anvil.assert" (run-time symbols), collective issue / wait, and "anvil.cond" /
/// "anvil.while" (control flow: `subprograms` are the compiled branches, or the condition and
/// body, each run with its own RunState over the parent's buffers; see lower_control.cpp).
struct ExternStep {
  std::string name;
  std::string target;
  std::vector<std::string> nodes;
  std::vector<TensorView> inputs, outputs;
  std::vector<ExternAttr> attrs;
  std::vector<std::shared_ptr<const Program>> subprograms;
};

/// The `k`-th attribute called `name` of an extern step, or null.
const ExternAttr* find_attr(const ExternStep& e, const std::string& name, size_t k = 0);

/// The constant values of int or int-list attribute `name` of `e` expanded to `n` (one value
/// applies to every spatial dim; absent: `dflt`); false when it is symbolic or has another
/// count. The layout plan and the CUDA emitters read convolution and pooling geometry through
/// it, so they never judge one step differently.
bool spatial_ints(const ExternStep& e, const std::string& name, int64_t dflt, size_t n,
                  std::vector<int64_t>& out);

/// The tensor argument names of extern target `target` (docs/externs.md), in schema order, or
/// null when the target is not an extern. Shared by lowering and the codegen test harness.
const std::vector<std::string>* extern_tensor_args(const std::string& target);

/// One matrix operand of a GEMM: element offset, leading dimension, transposed or not, and
/// the offset step per batch dimension.
struct GemmOperand {
  int buffer = -1;
  SymInt offset, ld;
  bool trans = false;
  std::vector<SymInt> batch_strides;
};

/// C[b] = alpha * op(A[b]) * op(B[b]) for every batch index b; row-major, m x k times k x n,
/// every operand of `dtype`, with its own leading dimension, transpose and batch strides. Which
/// engine runs which dtype is the target's choice (the CPU target: api->sgemm / dgemm for f32 /
/// f64, the extern "aten.mm.default" otherwise; CUDA: cuBLASLt through the device backend).
/// Bias and activation epilogues are pointwise loop kernels the scheduler fuses after it.
/// The kernel GEMM autotuning chose for a step (codegen/gemm, driver/gemm_tune.h); an empty
/// name keeps the target's default path. A library call (source empty: `library` / `variant` as
/// in AnvilGemmCall) or a generated template (`source` defining `entry`).
struct GemmKernelChoice {
  std::string name;
  int library = 0, variant = 0;
  std::string entry, source;
  double time_us = 0;  // its measured time (0: not timed)
  int candidates = 0;  // how many were timed
  bool fuses_bias = false, fuses_activation = false;  // it can apply them in its store
  bool fuses_residual = false;  // it adds beta * R for a residual R laid out as C (call.source)
};

/// The autotuner's choice for the values of a symbolic M in [m_min, m_max] (driver/gemm_tune.h,
/// "symbolic M"); an empty choice name keeps the target's default path for those M.
struct GemmBucket {
  int64_t m_min = 0, m_max = 0;
  GemmKernelChoice choice;
};

struct GemmStep {
  std::string name;
  std::vector<std::string> nodes;
  DType dtype = DType::kFloat32;
  SymInt m, n, k;
  std::vector<SymInt> batch;
  GemmOperand a, b, c;
  double alpha = 1.0;
  GemmKernelChoice choice;
  // A mixed GEMM (PipelineOptions::mixed_gemm; spec B.4.1 "mixed_mm"): B's element type, int8,
  // converted to `dtype` in the kernel (A and C are of `dtype`). Only a chosen kernel that
  // takes it (the CUTLASS mixed-input family) runs such a step. nullopt: B is of `dtype`.
  std::optional<DType> b_dtype;
  // M symbolic: one choice per bucket of M's range, ascending and contiguous (the generated
  // code dispatches on M's run-time value; `choice` is then empty). Empty: `choice` for every M.
  std::vector<GemmBucket> buckets;
};

/// One step of the program.
using Step = std::variant<LoopKernel, GemmStep, ExternStep>;

/// Whose memory a user output is returned in (AnvilRtOutputLayout::base_kind).
enum class OutputBase { kOwn = 0, kOutput = 1, kInput = 2 };

/// A model input or output as the manifest describes it.
struct IoSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<SymInt> sizes;
  int buffer = -1;  // kOwn outputs: the kOutput buffer holding the output's storage
  // Outputs only: the output is a view (`strides`, element `offset`) of the storage of `base`:
  // its own buffer, the storage of output `base_index` (outputs that are the same tensor or
  // views of one another) or user input `base_index` (outputs that are views of an input).
  // Empty strides mean contiguous with offset 0.
  OutputBase base = OutputBase::kOwn;
  int base_index = -1;
  std::vector<SymInt> strides = {};
  SymInt offset = SymInt(0);
  // Inputs only: the program writes the input (an aten.copy_ / in-place op on it in the graph,
  // or a user_input_mutation output): the caller's tensor holds the new value after the run.
  bool mutated = false;
};

/// A constant the generated code reads (manifest order = AnvilRunArgs::constants order).
struct ConstantSpec {
  std::string name;           // value name in the graph
  std::string original_name;  // parameter / buffer FQN, or "folded.<name>"
  std::string kind;           // parameter, buffer, constant, folded
  bool is_mutable = false;
  Tensor tensor;  // contiguous
  int buffer = -1;
};

/// Counters the passes report (tests and `anvil inspect`).
struct ProgramStats {
  int nodes_in = 0;  // graph nodes before the passes
  int dce_removed = 0;
  int cse_replaced = 0;
  int folded_nodes = 0;
  int batch_norms_folded = 0;
  int loop_kernels = 0;
  int gemms = 0;
  int externs = 0;
  int channels_last_buffers = 0;  // activations kept NHWC between convolutions (conv_layout.cpp)
  int collectives = 0;          // collective issue steps (after bucketing)
  int collectives_bucketed = 0; // collectives merged into another's coalesced issue
  int collective_moves = 0;     // step moves of the issue-early / wait-late reordering
};

/// The lowered program.
struct Program {
  std::vector<Buffer> buffers;
  ExprPool exprs;
  std::vector<Step> steps;
  std::vector<std::string> symbols;  // AnvilRunArgs::symbols order
  // Symbols whose value exists only at run time (aten.item of a tensor): set by an "anvil.item"
  // step, read by later steps; no buffer or output size may use them.
  std::vector<std::string> unbacked_symbols;
  // Upper bounds (over the inputs' symbols) of run-time symbols that size buffers: the result
  // counts of nonzero / boolean-mask indexing (lower_dynamic.cpp). Memory is planned and
  // outputs are allocated at these capacities; kernels loop over the actual counts.
  std::map<std::string, SymInt> unbacked_capacity;
  SymRanges symbol_ranges;
  std::vector<IoSpec> inputs, outputs;
  std::vector<ConstantSpec> constants;
  // Run-time-sized buffers (Buffer::run_time_sized, memory roots only) and the step before
  // which each is allocated (steps.size(): at the end of the run), in step order.
  std::vector<std::pair<size_t, int>> run_allocs;
  SymInt arena_bytes;              // planned arena size (formula over the symbols)
  int64_t planned_peak_bytes = 0;  // arena size at the symbols' largest values (-1: unbounded)
  ProgramStats stats;
};

/// Readable text of a whole program (tests diff it).
std::string print_program(const Program& program);
/// Name of a step ("k0", "gemm1", ...) and its kind ("loop", "gemm", "extern").
std::string step_name(const Step& step);
const char* step_kind(const Step& step);
const std::vector<std::string>& step_nodes(const Step& step);
/// Values standing for the run-time symbols in sizes evaluated before a run: a count's
/// capacity, 0 for a value without one (its buffers are allocated during the run).
std::map<std::string, SymInt> sizes_before_run(const Program& p);
/// Bytes a step moves if it reads and writes each buffer (view, GEMM operand) it touches once:
/// the denominator of profiling's GB/s (sizes_before_run for run-time symbols).
SymInt step_bytes(const Program& p, const Step& step);
/// The structure of a loop kernel or GEMM step, independent of which buffers it touches: two
/// steps with the same key compute the same thing on (possibly) different buffers, so one
/// implementation can serve both with the buffers' base pointers as parameters. Buffers are
/// numbered by first use and described by dtype and whether they are kernel-local; loop bounds,
/// statements, expression DAGs (shared subexpressions kept shared), index expressions, GEMM
/// shapes, layouts and alpha are compared exactly. Empty for other steps.
std::string structural_key(const Program& program, const Step& step);
/// A step at which the host waits for a value the run computes, so that a device target cannot
/// capture the program as one graph (CUDA graphs): the step's index in Program::steps and why.
struct HostSync {
  size_t step;
  std::string why;
};
/// Every host-synchronising step of `program`: "anvil.item" / "anvil.assert" (a tensor's value
/// read into a run-time symbol: aten.item, the counts of nonzero and mask indexing),
/// "anvil.cond" / "anvil.while" (the predicate is read on the host) and the steps before which
/// a run-time-sized buffer is allocated (Program::run_allocs). Empty: the program can be
/// captured whole.
std::vector<HostSync> host_syncs(const Program& program);
/// The NaN / Inf check of a run (runtime::Model::set_check_nan_inf, AnvilRunArgs::after_step):
/// for each step, the buffers to scan after it, each listed at the last step that writes it
/// (its value is complete there; earlier writers may fill only part of it) and the writes of a
/// collective issue at its wait. Floating and complex buffers with memory only: local,
/// run-time-sized buffers and those whose size or place uses a run-time symbol are left out.
std::vector<std::vector<int>> nan_check_buffers(const Program& program);
/// idx = c0 + sum(coef[v] * var[v]) over loop variables `vars` (o0.., r0..), proven by rebuilding
/// idx from its parts; nullopt when idx is not affine in them (a product of two, a division, a
/// modulo). Shared by the layout plan, the epilogue matcher and the vectorized kernels.
struct Affine {
  SymInt c0;
  std::vector<SymInt> coef;
};
std::optional<Affine> affine(const SymInt& idx, const std::vector<std::string>& vars);
/// The elements a store at `idx` writes in a dense buffer of `sizes`, over variables `vars` of
/// extents `ext` (each from 0), as a box: per dim, the range [first, second] of its coordinate.
/// nullopt unless all of it is constant, idx is affine, each variable steps along one dim and
/// every range stays inside its dim (the coordinates are then these per-dim sums, so two stores
/// whose boxes are apart in some dim never write one element).
std::optional<std::vector<std::pair<int64_t, int64_t>>> store_box(
    const SymInt& idx, const std::vector<std::string>& vars, const std::vector<SymInt>& ext,
    const std::vector<SymInt>& sizes);
/// The residues modulo `w` (> 1) of the indices a store at `idx` writes, over variables `vars`
/// of extents `ext` (each from 0), as an integer range [first, second] shorter than `w` whose
/// values taken modulo w hold them all (first in [0, w)). idx must be affine and each part
/// constant modulo w (SymInt::mod: a symbolic coefficient or offset such as 64*s0 + 8 counts
/// when all its symbolic terms are multiples of w); a variable whose coefficient is no multiple
/// of w needs a constant extent. nullopt otherwise, or when the residues may be all of 0..w-1.
/// Symbolic outer sizes (dynamic shapes) are fine: for a buffer whose trailing dims are a
/// constant block of w elements, this is the store's part of each block.
std::optional<std::pair<int64_t, int64_t>> store_residues(const SymInt& idx,
                                                          const std::vector<std::string>& vars,
                                                          const std::vector<SymInt>& ext,
                                                          int64_t w);
/// Whether stores at `x` and `y` over `vars` of extents `ext` provably never write one index
/// because their residues modulo `w` (store_residues) are apart: equal indices have equal
/// residues. Sound for any w, whatever the buffer's sizes.
bool store_residues_apart(const SymInt& x, const SymInt& y, const std::vector<std::string>& vars,
                          const std::vector<SymInt>& ext, int64_t w);
/// The loop variables of kernel `k` (o0.., r0.., as the emitters name them) and their sizes.
void loop_vars(const LoopKernel& k, std::vector<std::string>& vars, std::vector<SymInt>& sizes);
/// Buffers (indices into Program::buffers, not following alias_of) a step reads and writes:
/// loop-kernel loads and stores, GEMM operands (c written), extern inputs and outputs.
void step_accesses(const Program& p, const Step& step, std::set<int>& reads,
                   std::set<int>& writes);

}  // namespace anvil::passes
