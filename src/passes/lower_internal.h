// Internal to the lowering (src/passes/lower*.cpp): the Lowerer walks the graph, turning each
// tensor value into a TRef (a strided view of a buffer, or a not-yet-materialised pointwise
// computation) and emitting SNodes (schedulable units: pointwise stores, reductions, GEMMs,
// extern calls) that schedule.cpp fuses into the Program's steps.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/op_schema.h"
#include "passes/loop_ir.h"
#include "passes/pipeline.h"

namespace anvil::passes::detail {

/// A multi-index over a tensor's dims (SymInt expressions over loop variables).
using Index = std::vector<SymInt>;
/// Builds the value of a computed tensor at an index.
using BodyFn = std::function<int(const Index&)>;

/// A lowered tensor value.
struct TRef {
  DType dtype = DType::kFloat32;
  std::vector<SymInt> sizes;
  // Materialised: a strided view of `buffer`.
  int buffer = -1;
  std::vector<SymInt> strides;
  SymInt offset;
  // Computed: the value at an index (inlined into consumers).
  BodyFn fn;
  int cost = 0;                    // expression nodes one evaluation computes
  std::set<int> reads;             // buffers it reads (transitively)
  std::vector<std::string> nodes;  // graph nodes it computes
  /// A reshape that strides cannot express: realising it copies this source (row-major order is
  /// the same) instead of evaluating the index map with divisions per element.
  std::shared_ptr<TRef> reshape_src;
  bool is_buffer() const { return buffer >= 0; }
};
using TRefPtr = std::shared_ptr<TRef>;

/// The strided view of a buffer-backed TRef (an operand of an extern or collective step).
TensorView view_from(const TRef& t);
/// A string, int or int-list attribute of an extern step.
ExternAttr str_attr(const std::string& name, const std::string& s);
ExternAttr int_attr(const std::string& name, const SymInt& i);
ExternAttr ints_attr(const std::string& name, const std::vector<SymInt>& v);

/// Contiguous strides of `sizes`.
std::vector<SymInt> contiguous(const std::vector<SymInt>& sizes);
/// Product of sizes.
SymInt numel_of(const std::vector<SymInt>& sizes);
/// True when `v` is the constant `c`.
bool is_const(const SymInt& v, int64_t c);
/// True when the view covers a whole buffer of its sizes in row-major order.
bool is_contiguous_view(const TRef& t);
/// The value `v` views through view ops only (v itself when no view op produced it).
const ir::Value* view_root(const ir::Value* v);

/// A schedulable unit.
struct SNode {
  enum class Kind { kPointwise, kReduction, kGemm, kExtern };
  Kind kind = Kind::kPointwise;
  std::vector<std::string> nodes;
  // kPointwise / kReduction: iteration shape; reduced[d] marks reduced dims (kReduction).
  std::vector<SymInt> sizes;
  std::vector<bool> reduced;
  ReduceOp reduce = ReduceOp::kSum;
  BodyFn body;  // value at a full index of `sizes`
  // Destination: element index = offset + sum(index[d] * strides[d]) (reduced dims: 0).
  int buffer = -1;
  std::vector<SymInt> strides;
  SymInt offset;
  DType dtype = DType::kFloat32;  // destination dtype
  // kGemm / kExtern
  std::optional<GemmStep> gemm;
  std::optional<ExternStep> ext;
  std::set<int> reads, writes;
};

/// Walks a graph and lowers it. One instance per compilation.
class Lowerer {
 public:
  Lowerer(const ir::Graph& graph, Program& program, const std::set<std::string>& folded);
  /// Lowers every node, the outputs and the mutations; fills program signature and constants.
  void run();
  /// PipelineOptions::materialize_gemm_sums.
  void set_materialize_gemm_sums(bool on) { materialize_gemm_sums_ = on; }
  std::vector<SNode>& snodes() { return snodes_; }

  // ---- helpers the rule files use -------------------------------------------------------
  ExprPool& ex() { return prog_.exprs; }
  Program& prog() { return prog_; }
  const ir::Graph& graph() const { return graph_; }
  const ir::Node& node() const { return *node_; }
  /// The TRef of a tensor value; throws Error for values without one.
  TRefPtr ref(const ir::Value* v);
  /// TRef of tensor argument `name` of the current node (null when absent / None).
  TRefPtr arg(const std::string& name);
  /// Output type of the current node's output `i`.
  const ir::TensorType& out_type(size_t i = 0) const;
  /// Binds output `i` of the current node.
  void bind(size_t i, TRefPtr t);
  /// Value of `t` at `idx` (a load for a buffer view, the computation otherwise).
  int load(const TRef& t, const Index& idx);
  /// `t` broadcast to `sizes`: the index into `t` for an index of `sizes`.
  static Index broadcast_index(const TRef& t, const std::vector<SymInt>& sizes, const Index& idx);
  /// A computed TRef of `sizes` / `dtype` whose value is fn(idx); `inputs` are its operands
  /// (their reads and nodes propagate).
  TRefPtr computed(const std::vector<SymInt>& sizes, DType dtype, BodyFn fn,
                   const std::vector<TRefPtr>& inputs);
  /// A TRef viewing `buffer` with strides / offset.
  TRefPtr view_of(int buffer, DType dtype, const std::vector<SymInt>& sizes,
                  const std::vector<SymInt>& strides, const SymInt& offset);
  /// A new arena buffer for `sizes` / `dtype`.
  int new_buffer(const std::string& name, DType dtype, const std::vector<SymInt>& sizes);
  /// Makes `t` a buffer view (a pointwise SNode writes it into a new contiguous buffer) unless
  /// it is one already and `need_contiguous` is false or it is contiguous.
  void realize(TRef& t, const std::string& name, bool need_contiguous = false);
  /// Writes the value of `src` (broadcast to `dst`'s sizes) into the buffer view `dst`.
  void store_into(const TRef& dst, const TRef& src);
  /// Emits a reduction of `in` over dims `dims` (normalised, sorted) into a new buffer;
  /// returns the result (dtype `dtype`, keepdim or not).
  TRefPtr reduce(const TRefPtr& in, const std::vector<int64_t>& dims, bool keepdim, ReduceOp op,
                 DType dtype);
  /// Adds an SNode (reads / writes computed from its fields).
  void add_snode(SNode s);
  /// Normalises a possibly negative dim against rank (rank 0 counts as 1).
  int64_t wrap_dim(int64_t d, size_t rank) const;
  /// Integer argument that may be symbolic.
  SymInt symint_arg(const std::string& name, std::optional<SymInt> dflt = std::nullopt);
  std::vector<SymInt> symints_arg(const std::string& name);
  /// Throws Error at the current node.
  [[noreturn]] void fail(const std::string& what, const std::string& expected = "",
                         const std::string& actual = "") const;
  /// How many node inputs and graph outputs read `v`.
  int uses(const ir::Value* v) const {
    auto it = uses_.find(v);
    return it == uses_.end() ? 0 : it->second;
  }
  /// The nodes that read `v`, in graph order (each once).
  const std::vector<const ir::Node*>& readers(const ir::Value* v) const {
    static const std::vector<const ir::Node*> kNone;
    auto it = readers_.find(v);
    return it == readers_.end() ? kNone : it->second;
  }
  /// Name for a new buffer holding output `i` of the current node.
  std::string out_name(size_t i = 0) const;
  /// The options of this compilation (control flow compiles its subgraphs with them).
  const PipelineOptions* options = nullptr;
  /// Values bound to their input's TRef by a copy op (clone, contiguous, same-dtype casts): an
  /// in-place write to one of them first makes a real copy.
  std::set<const ir::Value*> copy_aliases;

  // ---- collectives (collectives.cpp) ----------------------------------------------------
  /// A collective issued during lowering whose wait has not been emitted yet.
  struct PendingCollective {
    int id = -1;
    ExternStep issue;       // the issue step (its views are also the wait's)
    std::set<int> buffers;  // every buffer it reads or writes
    std::set<int> writes;   // the buffers it writes
    std::vector<const ir::Value*> results;  // the node's outputs (several: coalesced)
  };
  std::vector<PendingCollective> pending_collectives;
  int next_collective = 0;
  /// True when a value read by a node after the current one (or a graph output) reads `buffer`.
  bool buffer_read_later(int buffer) const { return buffer_read_later_except(buffer, nullptr); }
  /// The same, ignoring value `except` (null: none).
  bool buffer_read_later_except(int buffer, const ir::Value* except) const {
    for (const auto& [v, t] : vals_) {
      if (v == except || !t || !t->reads.count(buffer)) continue;
      auto lu = last_use_.find(v);
      if (lu != last_use_.end() && lu->second > node_pos_) return true;
    }
    return false;
  }
  /// True when buffer `b` may be written by the compiled code in place (an arena buffer, not
  /// kernel-local, not an alias, not a graph input / constant).
  bool owned_buffer(int b) const;
  /// Before a write into `buffer`: values read later that read it lazily are computed now, and
  /// copies lowered as its aliases (clone, contiguous, ...) and their views become real copies,
  /// so all of them keep the value from before the write.
  void realize_readers_of(int buffer);

 private:
  void lower_node(const ir::Node& n);
  void lower_inplace(const ir::Node& n);
  /// aten.item into an "anvil.item" step setting a run-time symbol.
  void lower_item(const ir::Node& n);
  /// aten._assert_scalar over run-time symbols into an "anvil.assert" step.
  void lower_assert(const ir::Node& n);
  void finish_outputs();
  void setup_signature();

  const ir::Graph& graph_;
  Program& prog_;
  bool materialize_gemm_sums_ = false;
  /// Whether node `n` adds a GEMM step's result to a tensor of the same shape (both operands
  /// and the sum `t` alike in sizes and dtype).
  bool is_gemm_result_sum(const ir::Node& n, const TRef& t) const;
  const std::set<std::string>& folded_;
  const ir::Node* node_ = nullptr;
  size_t node_pos_ = 0;
  std::unordered_map<const ir::Value*, TRefPtr> vals_;
  std::unordered_map<const ir::Value*, size_t> last_use_;  // node position of the last reader
  std::map<const ir::Value*, int> uses_;
  std::map<const ir::Value*, std::vector<const ir::Node*>> readers_;
  std::set<int> mutable_buffers_;
  std::vector<SNode> snodes_;
};

// ---- rule families (return false when the op is not theirs) ----------------------------------
bool lower_pointwise(Lowerer& L, const ir::Node& n);
bool lower_view(Lowerer& L, const ir::Node& n);
/// Epilogues fused into the convolution step lowered just before (lower_conv_fuse.cpp): a
/// residual add (fused_add) and an activation (fused_relu / fused_act). False when `n` is not
/// one, or does not qualify (then it lowers as a pointwise op).
bool fuse_add_into_conv(Lowerer& L, const ir::Node& n);
bool fuse_act_into_conv(Lowerer& L, const ir::Node& n);
/// pad (every mode), constant_pad_nd, reflection / replication pads and roll (lower_pad.cpp).
bool lower_pad(Lowerer& L, const ir::Node& n);
bool lower_reduction(Lowerer& L, const ir::Node& n);
bool lower_matmul(Lowerer& L, const ir::Node& n);
/// Lowers a `_c10d_functional` node (collectives.cpp): an issue step on an owned buffer (the
/// input's when it may be stolen, else a copy) or a wait step.
void lower_collective(Lowerer& L, const ir::Node& n);
/// Emits the waits of pending collectives that node `n` reads or writes (through any value
/// whose lowered tensor touches their buffers).
void wait_collectives_for(Lowerer& L, const ir::Node& n);
/// Emits the wait of every pending collective (end of the graph).
void wait_all_collectives(Lowerer& L);
/// Routes the node to api->extern_call (docs/externs.md).
void lower_extern(Lowerer& L, const ir::Node& n);
/// aten._scaled_mm: the CUDA target's FP8 GEMM step (lower_scaled_mm.cpp).
void lower_scaled_mm(Lowerer& L, const ir::Node& n);
/// Throws Error naming every node that would compute with a float8 value (anything but casts,
/// copies, views and aten._scaled_mm) and the graph inputs that reach one (lower_float8.cpp).
void check_float8_uses(const ir::Graph& graph);
/// Ops whose result size is data-dependent (lower_dynamic.cpp): aten.nonzero and aten.index
/// with a boolean mask become an extern writing at most the count's capacity plus an
/// "anvil.item" step setting the count's run-time symbol. Returns false for other nodes.
bool lower_data_dependent(Lowerer& L, const ir::Node& n);
/// Adds an "anvil.item" step named `name` storing the one element of view `count` (in
/// `buffer`) into run-time symbol `symbol`, registering the symbol (lower_sym.cpp).
void add_item_step(Lowerer& L, const std::string& name, const std::vector<std::string>& nodes,
                   const TensorView& count, int buffer, const std::string& symbol);
/// True when `n` is such a node (its new run-time symbols may size buffers).
bool is_data_dependent_producer(const ir::Node& n);
/// torch.cond / while_loop (lower_control.cpp): compiles the subgraphs into sub-programs and
/// emits one "anvil.cond" / "anvil.while" step over the operands and results.
void lower_control_flow(Lowerer& L, const ir::Node& n);
/// C++ text of a SymBool value made by comparing SymInts ("(s0) > (s1)"), or "" when `v` is
/// not one (lower_sym.cpp).
std::string sym_condition_text(const ir::Value* v);

/// The functional value an in-place op computes (add_ -> add), given its operands.
TRefPtr inplace_value(Lowerer& L, const ir::Node& n);

/// Schedules SNodes into steps with fusion (schedule.cpp); marks kernel-local buffers.
void schedule(Program& program, std::vector<SNode>& snodes, bool fuse);

/// Layout planning for convolutions (conv_layout.cpp): buffers that only 2-D convolution
/// externs the target computes channels-last touch (as output, input or fused residual, each
/// time as the whole [N, C, H, W] buffer; on CUDA also pooling externs) get channels-last
/// views. Returns how many buffers changed.
int plan_conv_layouts(Program& program, Device::Type target);
/// Lets each extern step `ok` accepts write its single output straight into the destination of
/// the copy kernel that only permutes it into place, and drops that kernel (retarget_copies.cpp).
/// Returns how many copies went.
int retarget_permuted_copies(Program& program,
                             const std::function<bool(const Program&, const ExternStep&)>& ok);
/// Plans arena offsets (memory_plan.cpp).
void plan_memory(Program& program);

}  // namespace anvil::passes::detail
