// Test helpers shared by the op tests: OpRunner builds one ir::Node with named arguments, runs
// its shape rule and reference kernel (checking that they agree), and the comparison helpers
// check results with ARCHITECTURE.md's tolerances.
//
//   Tensor y = OpRunner("aten.add.Tensor").tensor("self", a).tensor("other", b)
//                  .scalar("alpha", 2).run1();
//   EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}));
//
//   auto types = OpRunner("aten.add.Tensor")
//                    .sym_tensor("self", DType::kFloat32, {SymInt::symbol("s0"), 4})
//                    .sym_tensor("other", DType::kFloat32, {4}).shape();
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "ir/inplace.h"
#include "ir/op_schema.h"

namespace anvil::testing {

/// A contiguous tensor of `dtype` and `sizes` holding `values` (row-major, converted like a cast).
inline Tensor make_tensor(DType dtype, const Shape& sizes, const std::vector<double>& values) {
  Tensor f = Tensor::from_vector<double>(values, sizes);
  return f.to(dtype, /*copy=*/true);
}
/// Shorthands: float32, bfloat16, float16, float64, int64, int32 and bool tensors.
inline Tensor f32(const Shape& s, const std::vector<double>& v) {
  return make_tensor(DType::kFloat32, s, v);
}
inline Tensor bf16(const Shape& s, const std::vector<double>& v) {
  return make_tensor(DType::kBFloat16, s, v);
}
inline Tensor f16(const Shape& s, const std::vector<double>& v) {
  return make_tensor(DType::kFloat16, s, v);
}
inline Tensor f64(const Shape& s, const std::vector<double>& v) {
  return make_tensor(DType::kFloat64, s, v);
}
inline Tensor i64(const Shape& s, const std::vector<double>& v) {
  return make_tensor(DType::kInt64, s, v);
}
inline Tensor i32(const Shape& s, const std::vector<double>& v) {
  return make_tensor(DType::kInt32, s, v);
}
inline Tensor boolean(const Shape& s, const std::vector<double>& v) {
  return make_tensor(DType::kBool, s, v);
}

/// Allowed max |got - want| for `dtype` (ARCHITECTURE.md "Tests"): fp32/fp64 1e-4 * max(1,
/// max|want|), bf16/fp16 2e-2 * max(1, max|want|), integers and bool exact.
inline double tolerance(DType dtype, double max_abs_want) {
  double scale = std::max(1.0, max_abs_want);
  if (dtype == DType::kBFloat16 || dtype == DType::kFloat16) return 2e-2 * scale;
  if (is_floating(dtype)) return 1e-4 * scale;
  return 0.0;
}

/// Checks dtype, sizes and values of `got` (NaN matches NaN, infinities must be equal).
inline ::testing::AssertionResult matches(const Tensor& got, DType dtype, const Shape& sizes,
                                          const std::vector<double>& want) {
  if (!got.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  if (got.dtype() != dtype)
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(got.dtype()) << ", want " << dtype_name(dtype);
  if (got.sizes() != sizes)
    return ::testing::AssertionFailure()
           << "sizes " << shape_str(got.sizes()) << ", want " << shape_str(sizes);
  if (static_cast<size_t>(got.numel()) != want.size())
    return ::testing::AssertionFailure()
           << "want has " << want.size() << " values for " << got.numel() << " elements";
  std::vector<double> g = got.to_doubles();
  double max_want = 0;
  for (double w : want)
    if (std::isfinite(w)) max_want = std::max(max_want, std::fabs(w));
  const double tol = tolerance(dtype, max_want);
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = want[i], v = g[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(v);
    else if (std::isinf(w))
      ok = v == w;
    else
      ok = std::isfinite(v) && std::fabs(v - w) <= tol;
    if (!ok)
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << v << ", want " << w << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

/// Checks `got` against `want` (same dtype and sizes, values within want's dtype tolerance).
inline ::testing::AssertionResult matches(const Tensor& got, const Tensor& want) {
  return matches(got, want.dtype(), want.sizes(), want.to_doubles());
}

/// True when two tensors share storage (a view or the same tensor).
inline bool shares_storage(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage() == b.storage();
}

/// Builds one node of `target` with named arguments (in the order added), runs its shape rule
/// and reference kernel. Tensors given with tensor() also get a static type (constant sizes), so
/// run() can check the kernel's outputs against the shape rule.
class OpRunner {
 public:
  explicit OpRunner(const std::string& target) : graph_(std::make_unique<ir::Graph>()) {
    node_.name = "node0";
    node_.target = ir::canonical_target(target);
    node_.schema = ir::find_op(target);
  }

  /// A concrete tensor argument.
  OpRunner& tensor(const std::string& name, const Tensor& t) {
    ir::Arg& a = add(name, ir::Arg::Kind::kTensor);
    a.value = tensor_value(t);
    values_.emplace_back(t);
    return *this;
  }
  /// A tensor argument known only by its static type (for shape()).
  OpRunner& sym_tensor(const std::string& name, DType dtype, std::vector<SymInt> sizes) {
    ir::Arg& a = add(name, ir::Arg::Kind::kTensor);
    a.value = graph_->new_value(fresh());
    a.value->type.dtype = dtype;
    a.value->type.sizes = std::move(sizes);
    values_.emplace_back(std::monostate{});
    return *this;
  }
  /// A tensor-list argument.
  OpRunner& tensors(const std::string& name, const std::vector<Tensor>& ts) {
    ir::Arg& a = add(name, ir::Arg::Kind::kTensors);
    for (const Tensor& t : ts) a.values.push_back(tensor_value(t));
    values_.emplace_back(ts);
    return *this;
  }
  /// A list of optional tensors (aten.index.Tensor's indices).
  OpRunner& opt_tensors(const std::string& name, const std::vector<std::optional<Tensor>>& ts) {
    ir::Arg& a = add(name, ir::Arg::Kind::kOptTensors);
    for (const auto& t : ts) a.values.push_back(t ? tensor_value(*t) : nullptr);
    values_.emplace_back(ts);
    return *this;
  }
  /// Python int / float / bool arguments.
  OpRunner& scalar(const std::string& name, int v) { return scalar(name, int64_t{v}); }
  OpRunner& scalar(const std::string& name, int64_t v) {
    add(name, ir::Arg::Kind::kInt).i = v;
    values_.emplace_back(v);
    return *this;
  }
  OpRunner& scalar(const std::string& name, double v) {
    add(name, ir::Arg::Kind::kFloat).f = v;
    values_.emplace_back(v);
    return *this;
  }
  OpRunner& scalar(const std::string& name, bool v) {
    add(name, ir::Arg::Kind::kBool).b = v;
    values_.emplace_back(v);
    return *this;
  }
  /// An int that is a SymInt Value: `sym` for the shape rule, `value` for the kernel.
  OpRunner& symint(const std::string& name, const SymInt& sym, int64_t value) {
    ir::Arg& a = add(name, ir::Arg::Kind::kSymInt);
    a.symints.push_back(sym_ref(sym));
    values_.emplace_back(value);
    return *this;
  }
  /// An int list whose entries may be symbolic: syms[i] for the shape rule, values[i] for the
  /// kernel (constant entries of `syms` become constants).
  OpRunner& symints(const std::string& name, const std::vector<SymInt>& syms,
                    const std::vector<int64_t>& values) {
    ir::Arg& a = add(name, ir::Arg::Kind::kSymInts);
    for (const SymInt& s : syms) a.symints.push_back(sym_ref(s));
    values_.emplace_back(values);
    return *this;
  }
  OpRunner& ints(const std::string& name, const std::vector<int64_t>& v) {
    add(name, ir::Arg::Kind::kInts).ints = v;
    values_.emplace_back(v);
    return *this;
  }
  OpRunner& bools(const std::string& name, const std::vector<bool>& v) {
    add(name, ir::Arg::Kind::kBools).bools = v;
    values_.emplace_back(v);
    return *this;
  }
  OpRunner& floats(const std::string& name, const std::vector<double>& v) {
    add(name, ir::Arg::Kind::kFloats).floats = v;
    values_.emplace_back(v);
    return *this;
  }
  OpRunner& string(const std::string& name, const std::string& v) {
    add(name, ir::Arg::Kind::kString).s = v;
    values_.emplace_back(v);
    return *this;
  }
  OpRunner& dtype(const std::string& name, DType v) {
    add(name, ir::Arg::Kind::kScalarType).dtype = v;
    values_.emplace_back(v);
    return *this;
  }
  OpRunner& device(const std::string& name, Device v) {
    add(name, ir::Arg::Kind::kDevice).device = v;
    values_.emplace_back(v);
    return *this;
  }
  /// torch.export Layout code (7 = strided).
  OpRunner& layout(const std::string& name, int64_t code = 7) {
    add(name, ir::Arg::Kind::kLayout).i = code;
    values_.emplace_back(code);
    return *this;
  }
  /// torch.export MemoryFormat code (1 = contiguous, 2 = channels_last, 4 = preserve).
  OpRunner& memory_format(const std::string& name, int64_t code) {
    add(name, ir::Arg::Kind::kMemoryFormat).i = code;
    values_.emplace_back(code);
    return *this;
  }
  /// An explicit None.
  OpRunner& none(const std::string& name) {
    add(name, ir::Arg::Kind::kNone);
    values_.emplace_back(std::monostate{});
    return *this;
  }

  /// The node as built so far.
  const ir::Node& node() const { return node_; }

  /// Runs the shape rule.
  std::vector<ir::TensorType> shape() const {
    if (!node_.schema && ir::inplace_functional(node_.target)) {
      const ir::Node* copy = inplace_pair().second;
      return copy->schema->shape(*copy);  // copy_'s rule: the result must fit self exactly
    }
    check_schema();
    return node_.schema->shape(node_);
  }

  /// Runs the shape rule, then the kernel; checks each tensor output's dtype, rank and constant
  /// sizes against the shape rule's types (symbolic sizes, e.g. the unbacked size of a boolean
  /// mask's result, are not compared).
  std::vector<ir::RValue> run() const {
    if (!node_.schema && ir::inplace_functional(node_.target)) return run_inplace();
    check_schema();
    std::vector<ir::TensorType> types = node_.schema->shape(node_);
    ir::KernelContext ctx(node_, values_);
    std::vector<ir::RValue> outs = node_.schema->kernel(ctx);
    size_t k = 0;
    for (const ir::RValue& r : outs) {
      if (std::holds_alternative<std::monostate>(r)) {  // an output left out (output_mask)
        ++k;
        continue;
      }
      const Tensor* t = std::get_if<Tensor>(&r);
      if (!t) continue;
      EXPECT_LT(k, types.size()) << node_.target << ": kernel returned more tensors than typed";
      if (k >= types.size()) break;
      EXPECT_EQ(dtype_name(t->dtype()), std::string(dtype_name(types[k].dtype)))
          << node_.target << " output " << k << ": kernel dtype vs shape rule";
      EXPECT_TRUE(sizes_agree(t->sizes(), types[k].sizes))
          << node_.target << " output " << k << ": kernel sizes " << shape_str(t->sizes())
          << " vs shape rule " << sym_shape_str(types[k].sizes);
      ++k;
    }
    return outs;
  }

  /// run() for an op with exactly one tensor output.
  Tensor run1() const {
    std::vector<ir::RValue> outs = run();
    if (outs.size() != 1 || !std::holds_alternative<Tensor>(outs[0]))
      throw Error("expected exactly one tensor output", node_.target, "1 tensor",
                  std::to_string(outs.size()) + " values");
    return std::get<Tensor>(outs[0]);
  }

 private:
  ir::Arg& add(const std::string& name, ir::Arg::Kind kind) {
    node_.args.emplace_back();
    node_.args.back().name = name;
    node_.args.back().kind = kind;
    return node_.args.back();
  }
  static bool sizes_agree(const Shape& got, const std::vector<SymInt>& want) {
    if (got.size() != want.size()) return false;
    for (size_t i = 0; i < got.size(); ++i) {
      std::optional<int64_t> c = want[i].maybe_constant();
      if (c && *c != got[i]) return false;
    }
    return true;
  }
  std::string fresh() { return "v" + std::to_string(counter_++); }
  ir::Value* tensor_value(const Tensor& t) {
    ir::Value* v = graph_->new_value(fresh());
    v->type.dtype = t.dtype();
    for (int64_t s : t.sizes()) v->type.sizes.emplace_back(s);
    v->type.device = t.device();
    return v;
  }
  ir::IntRef sym_ref(const SymInt& s) {
    ir::IntRef r;
    if (auto c = s.maybe_constant()) {
      r.constant = *c;
      return r;
    }
    r.value = graph_->new_value(fresh(), ir::ValueKind::kSymInt);
    r.value->sym = s;
    return r;
  }
  /// An in-place target without a row (aten.X_.O): the node as the importers write it, the
  /// functional op plus aten.copy_.default (ir/inplace.h), appended to this runner's graph.
  std::pair<const ir::Node*, const ir::Node*> inplace_pair() const {
    auto n = std::make_unique<ir::Node>(node_);
    ir::Value* out = graph_->new_value("inplace_out" + std::to_string(graph_->nodes().size()));
    if (!node_.args.empty() && node_.args[0].value) out->type = node_.args[0].value->type;
    n->outputs = {out};
    const ir::Node* copy = ir::append_inplace(*graph_, std::move(n), *ir::inplace_functional(node_.target));
    const std::vector<ir::Node*> nodes = graph_->nodes();
    return {nodes[nodes.size() - 2], copy};
  }
  /// run() of an in-place target: the functional kernel, then copy_ into self.
  std::vector<ir::RValue> run_inplace() const {
    auto [f, copy] = inplace_pair();
    ir::KernelContext fctx(*f, values_);
    std::vector<ir::RValue> value = f->schema->kernel(fctx);
    copy->schema->shape(*copy);
    ir::KernelContext cctx(*copy, {values_.at(0), value.at(0)});
    return copy->schema->kernel(cctx);
  }
  void check_schema() const {
    if (!node_.schema) throw Error("unknown op", node_.target, "a target in ops.def", node_.target);
  }

  std::unique_ptr<ir::Graph> graph_;
  ir::Node node_;
  std::vector<ir::RValue> values_;
  int counter_ = 0;
};

/// ((i * a) % b - c) / d for i in [0, numel(shape)), as `dtype` (Python: the same formula).
inline Tensor gen(const Shape& shape, int64_t a = 7, int64_t b = 11, int64_t c = 5, double d = 4.0,
                  DType dtype = DType::kFloat32) {
  std::vector<double> v;
  for (int64_t i = 0; i < shape_numel(shape); ++i) v.push_back(double((i * a) % b - c) / d);
  return make_tensor(dtype, shape, v);
}

/// Runs `fn` and checks that it throws anvil::Error whose message contains every string in `parts`.
template <typename F>
void expect_error(F&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an anvil::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks '" << p << "': " << msg;
  }
}

}  // namespace anvil::testing
