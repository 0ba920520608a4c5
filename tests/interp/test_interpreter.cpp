// Interpreter mechanics on hand-built graphs with test-only op schemas, so these tests need
// none of the reference kernels: input checks and symbol binding, 16-bit float conversion,
// in-place and functionalized mutations, SymInt values, freeing, error wrapping, outputs that
// are graph inputs or weights.
#include "interp/interpreter.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>

#include "core/error.h"
#include "ir/op_schema.h"

namespace anvil {
namespace {

using ir::Arg;
using ir::Graph;
using ir::Value;

ir::TensorType type(DType dt, std::vector<SymInt> sizes) {
  ir::TensorType t;
  t.dtype = dt;
  t.sizes = std::move(sizes);
  return t;
}

ir::InputSpec input_spec(ir::InputKind kind, const std::string& target = "") {
  ir::InputSpec spec;
  spec.kind = kind;
  spec.target = target;
  return spec;
}

Value* user_input(Graph& g, const std::string& name, ir::TensorType t) {
  return g.add_input(name, std::move(t), input_spec(ir::InputKind::kUserInput));
}

Value* weight(Graph& g, ir::InputKind kind, const std::string& name, const std::string& target,
              const Tensor& value) {
  std::vector<SymInt> sizes(value.sizes().begin(), value.sizes().end());
  g.constants[target] = value;
  return g.add_input(name, type(value.dtype(), sizes), input_spec(kind, target));
}

Arg tensor_arg(const std::string& name, Value* v) {
  Arg a;
  a.name = name;
  a.kind = Arg::Kind::kTensor;
  a.value = v;
  return a;
}

/// Appends a node with one output of type `out_type` (or a SymInt output when null).
Value* add_node(Graph& g, const ir::OpSchema& schema, const std::string& name,
                std::vector<Arg> args, std::optional<ir::TensorType> out_type) {
  auto n = std::make_unique<ir::Node>();
  n->schema = &schema;
  n->name = name;
  n->target = schema.name;
  n->args = std::move(args);
  Value* out = g.new_value(name, out_type ? ir::ValueKind::kTensor : ir::ValueKind::kSymInt);
  if (out_type) out->type = *out_type;
  n->outputs = {out};
  g.append(std::move(n));
  return out;
}

void add_output(Graph& g, Value* v, ir::OutputKind kind = ir::OutputKind::kUserOutput,
                const std::string& target = "") {
  g.output_specs().push_back(ir::OutputSpec{kind, v, target});
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> out;
  for (double d : t.to_doubles()) out.push_back(static_cast<float>(d));
  return out;
}

/// Runs `fn`, expecting an Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\n  lacks: " << p;
  }
}

// ---- test-only kernels -------------------------------------------------------------------

/// out = 2 * self (f32).
std::vector<ir::RValue> k_twice(ir::KernelContext& ctx) {
  Tensor x = ctx.tensor("self").contiguous();
  Tensor out = Tensor::empty(x.sizes(), DType::kFloat32);
  for (int64_t i = 0; i < x.numel(); ++i) out.data<float>()[i] = 2 * x.data<float>()[i];
  return {out};
}
/// self += 1 in place (f32, contiguous), returns self.
std::vector<ir::RValue> k_inc_(ir::KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += 1;
  return {x};
}
/// Declared in place but returns a fresh tensor self + 10: the interpreter copies it back.
std::vector<ir::RValue> k_add10_fresh(ir::KernelContext& ctx) {
  Tensor x = ctx.tensor("self").clone();
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += 10;
  return {x};
}
/// SymInt result: self.size(dim).
std::vector<ir::RValue> k_size(ir::KernelContext& ctx) {
  return {ctx.tensor("self").size(ctx.int_arg("dim"))};
}
/// f32[n] filled with n, from a SymInt argument.
std::vector<ir::RValue> k_fill_n(ir::KernelContext& ctx) {
  const int64_t n = ctx.int_arg("n");
  return {Tensor::full({n}, static_cast<double>(n), DType::kFloat32)};
}
std::vector<ir::RValue> k_throw_error(ir::KernelContext&) { throw Error("boom", "", "x", "y"); }
std::vector<ir::RValue> k_throw_std(ir::KernelContext&) { throw std::out_of_range("vector::at"); }
std::vector<ir::RValue> k_wrong_dtype(ir::KernelContext& ctx) {
  return {Tensor::zeros(ctx.tensor("self").sizes(), DType::kInt64)};
}
std::weak_ptr<Storage> g_probe;
/// Remembers self's storage, returns a fresh copy.
std::vector<ir::RValue> k_probe(ir::KernelContext& ctx) {
  g_probe = ctx.tensor("self").storage();
  return {ctx.tensor("self").clone()};
}
/// Fails unless the storage seen by k_probe has been freed.
std::vector<ir::RValue> k_expect_freed(ir::KernelContext& ctx) {
  if (!g_probe.expired()) ctx.fail("intermediate still alive", "freed", "alive");
  return {ctx.tensor("self").clone()};
}

using K = ir::OpCategory;
const ir::OpSchema kTwice{"test.twice", K::kPointwise, 1, 1, -1, nullptr, &k_twice};
const ir::OpSchema kInc{"test.inc_", K::kPointwise, 1, 1, 0, nullptr, &k_inc_};
const ir::OpSchema kAdd10Fresh{"test.add10_", K::kPointwise, 1, 1, 0, nullptr, &k_add10_fresh};
const ir::OpSchema kSize{"test.size", K::kSym, 2, 2, -1, nullptr, &k_size};
const ir::OpSchema kFillN{"test.fill_n", K::kCreation, 1, 1, -1, nullptr, &k_fill_n};
const ir::OpSchema kThrowError{"test.throw_error", K::kPointwise, 1, 1, -1, nullptr,
                               &k_throw_error};
const ir::OpSchema kThrowStd{"test.throw_std", K::kPointwise, 1, 1, -1, nullptr, &k_throw_std};
const ir::OpSchema kWrongDtype{"test.wrong_dtype", K::kPointwise, 1, 1, -1, nullptr,
                               &k_wrong_dtype};
const ir::OpSchema kProbe{"test.probe", K::kPointwise, 1, 1, -1, nullptr, &k_probe};
const ir::OpSchema kExpectFreed{"test.expect_freed", K::kPointwise, 1, 1, -1, nullptr,
                                &k_expect_freed};

/// x: f32[s0, 4], y: f32[2*s0], z: f32[s1 + 1], s0 in [1, 8], s1 in [2, 5]; outputs x, y, z.
std::unique_ptr<Graph> symbolic_graph() {
  auto g = std::make_unique<Graph>();
  const SymInt s0 = SymInt::symbol("s0"), s1 = SymInt::symbol("s1");
  Value* x = user_input(*g, "x", type(DType::kFloat32, {s0, 4}));
  Value* y = user_input(*g, "y", type(DType::kFloat32, {s0 * 2}));
  Value* z = user_input(*g, "z", type(DType::kFloat32, {s1 + 1}));
  g->symbol_ranges["s0"] = SymRange{1, 8};
  g->symbol_ranges["s1"] = SymRange{2, 5};
  for (Value* v : {x, y, z}) add_output(*g, v);
  return g;
}

// ---- input checks ------------------------------------------------------------------------

TEST(InterpreterInputs, BindsPureSymbolsAndSolvesExpressions) {
  auto g = symbolic_graph();
  interp::Interpreter in(*g);
  auto outs = in.run({Tensor::zeros({3, 4}, DType::kFloat32), Tensor::zeros({6}, DType::kFloat32),
                      Tensor::zeros({5}, DType::kFloat32)});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(in.last_symbols().at("s0"), 3);
  EXPECT_EQ(in.last_symbols().at("s1"), 4);  // solved from s1 + 1 == 5
  EXPECT_EQ(outs[1].sizes(), (Shape{6}));
}

TEST(InterpreterInputs, WrongCountNamesTheInputs) {
  auto g = symbolic_graph();
  interp::Interpreter in(*g);
  expect_error(
      [&] {
        in.run({Tensor::zeros({3, 4}, DType::kFloat32)});
      },
      {"wrong number of inputs", "expected 3 (x, y, z)", "got 1"});
}

TEST(InterpreterInputs, WrongDtype) {
  auto g = symbolic_graph();
  interp::Interpreter in(*g);
  expect_error(
      [&] {
        in.run({Tensor::zeros({3, 4}, DType::kInt64), Tensor::zeros({6}, DType::kFloat32),
                Tensor::zeros({5}, DType::kFloat32)});
      },
      {"input 0 'x'", "wrong dtype", "expected f32", "got i64"});
}

TEST(InterpreterInputs, WrongRank) {
  auto g = symbolic_graph();
  interp::Interpreter in(*g);
  expect_error(
      [&] {
        in.run({Tensor::zeros({3, 4, 1}, DType::kFloat32), Tensor::zeros({6}, DType::kFloat32),
                Tensor::zeros({5}, DType::kFloat32)});
      },
      {"input 0 'x'", "wrong rank", "expected 2 dims [s0, 4]", "got 3 dims [3, 4, 1]"});
}

TEST(InterpreterInputs, WrongStaticDim) {
  auto g = symbolic_graph();
  interp::Interpreter in(*g);
  expect_error(
      [&] {
        in.run({Tensor::zeros({3, 5}, DType::kFloat32), Tensor::zeros({6}, DType::kFloat32),
                Tensor::zeros({5}, DType::kFloat32)});
      },
      {"input 0 'x'", "dim 1", "expected 4", "got 5"});
}

TEST(InterpreterInputs, SymbolOutOfRange) {
  auto g = symbolic_graph();
  interp::Interpreter in(*g);
  expect_error(
      [&] {
        in.run({Tensor::zeros({9, 4}, DType::kFloat32), Tensor::zeros({18}, DType::kFloat32),
                Tensor::zeros({5}, DType::kFloat32)});
      },
      {"input 0 'x'", "dim 0", "s0", "out of range", "expected [1, 8]", "got 9"});
  // s1 = 6 solved from z's size 7 is outside [2, 5].
  expect_error(
      [&] {
        in.run({Tensor::zeros({3, 4}, DType::kFloat32), Tensor::zeros({6}, DType::kFloat32),
                Tensor::zeros({7}, DType::kFloat32)});
      },
      {"input 2 'z'", "dim 0", "s1", "[2, 5]", "got 7 (s1 = 6)"});
}

TEST(InterpreterInputs, ExpressionMismatch) {
  auto g = symbolic_graph();
  interp::Interpreter in(*g);
  expect_error(
      [&] {
        in.run({Tensor::zeros({3, 4}, DType::kFloat32), Tensor::zeros({7}, DType::kFloat32),
                Tensor::zeros({5}, DType::kFloat32)});
      },
      {"input 1 'y'", "dim 0", "2*s0", "expected 6", "got 7"});
}

TEST(InterpreterInputs, SymbolDisagreesAcrossInputs) {
  Graph g;
  const SymInt s0 = SymInt::symbol("s0");
  add_output(g, user_input(g, "a", type(DType::kInt64, {s0})));
  add_output(g, user_input(g, "b", type(DType::kInt64, {s0, 2})));
  interp::Interpreter in(g);
  expect_error(
      [&] {
        in.run({Tensor::zeros({3}, DType::kInt64), Tensor::zeros({4, 2}, DType::kInt64)});
      },
      {"input 1 'b'", "dim 0", "s0", "expected 3 (as input 0 'a' dim 0)", "got 4"});
}

TEST(InterpreterInputs, Float32AcceptedForBFloat16AndFloat16) {
  Graph g;
  add_output(g, user_input(g, "x", type(DType::kBFloat16, {3})));
  add_output(g, user_input(g, "h", type(DType::kFloat16, {1})));
  interp::Interpreter in(g);
  // 1.00390625 is not a bfloat16 (8 mantissa bits): rounds to 1.0; 3.0 and -0.5 are exact.
  auto outs = in.run({Tensor::from_vector<float>({1.00390625f, 3.0f, -0.5f}),
                      Tensor::from_vector<float>({0.1f}, {1})});
  EXPECT_EQ(outs[0].dtype(), DType::kBFloat16);
  EXPECT_EQ(floats(outs[0]), (std::vector<float>{1.0f, 3.0f, -0.5f}));
  EXPECT_EQ(outs[1].dtype(), DType::kFloat16);
  EXPECT_NEAR(outs[1].item(), 0.0999755859375, 1e-12);  // nearest float16 to 0.1
  // bf16 itself is accepted; an int tensor is not, and the message mentions the f32 rule.
  auto again = in.run({Tensor::from_vector<float>({1, 2, 3}).to(DType::kBFloat16),
                       Tensor::from_vector<float>({1}, {1}).to(DType::kFloat16)});
  EXPECT_EQ(floats(again[0]), (std::vector<float>{1, 2, 3}));
  expect_error(
      [&] {
        in.run({Tensor::zeros({3}, DType::kInt64), Tensor::zeros({1}, DType::kFloat32)});
      },
      {"input 0 'x'", "bf16 (or f32, converted)", "got i64"});
  // f64 is not converted.
  expect_error(
      [&] {
        in.run({Tensor::zeros({3}, DType::kFloat64), Tensor::zeros({1}, DType::kFloat32)});
      },
      {"input 0 'x'", "got f64"});
}

// ---- execution ---------------------------------------------------------------------------

TEST(Interpreter, InPlaceBufferMutationPersistsAndLeavesGraphConstants) {
  Graph g;
  Value* b =
      weight(g, ir::InputKind::kBuffer, "b_count", "count", Tensor::from_vector<float>({0, 5}));
  Value* x = user_input(g, "x", type(DType::kFloat32, {2}));
  Value* inc = add_node(g, kInc, "inc_", {tensor_arg("self", b)}, type(DType::kFloat32, {2}));
  Value* fresh =
      add_node(g, kAdd10Fresh, "add10_", {tensor_arg("self", inc)}, type(DType::kFloat32, {2}));
  add_output(g, fresh);
  add_output(g, x);
  interp::Interpreter in(g);
  const Tensor xin = Tensor::from_vector<float>({7, 8});
  auto o1 = in.run({xin});
  EXPECT_EQ(floats(o1[0]), (std::vector<float>{11, 16}));
  EXPECT_EQ(floats(in.state().at("count")), (std::vector<float>{11, 16}));
  EXPECT_EQ(o1[1].storage(), xin.storage());  // an input returned as an output
  auto o2 = in.run({xin});
  EXPECT_EQ(floats(o2[0]), (std::vector<float>{22, 27}));
  // Outputs aliasing the state were copied: the first result did not change.
  EXPECT_EQ(floats(o1[0]), (std::vector<float>{11, 16}));
  EXPECT_EQ(floats(g.constants.at("count")), (std::vector<float>{0, 5}));
  // A second interpreter starts again from the graph's values.
  interp::Interpreter fresh_in(g);
  EXPECT_EQ(floats(fresh_in.run({xin})[0]), (std::vector<float>{11, 16}));
}

TEST(Interpreter, FunctionalizedMutationsCopyIntoBufferAndInput) {
  Graph g;
  weight(g, ir::InputKind::kBuffer, "b_state", "state", Tensor::from_vector<float>({0, 0}));
  Value* p = weight(g, ir::InputKind::kParameter, "p_w", "w", Tensor::from_vector<float>({4, 5}));
  Value* x = user_input(g, "x", type(DType::kFloat32, {2}));
  Value* t = add_node(g, kTwice, "twice", {tensor_arg("self", x)}, type(DType::kFloat32, {2}));
  add_output(g, t, ir::OutputKind::kBufferMutation, "state");
  add_output(g, p, ir::OutputKind::kUserInputMutation, "x");
  add_output(g, p);  // a weight returned as a user output
  interp::Interpreter in(g);
  Tensor xin = Tensor::from_vector<float>({1, 2});
  auto outs = in.run({xin});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(floats(outs[0]), (std::vector<float>{4, 5}));
  EXPECT_EQ(floats(in.state().at("state")), (std::vector<float>{2, 4}));
  EXPECT_EQ(floats(xin), (std::vector<float>{4, 5}));  // the caller's tensor was updated
  outs[0].fill(0);                                     // the returned weight is a copy
  EXPECT_EQ(floats(g.constants.at("w")), (std::vector<float>{4, 5}));
  EXPECT_EQ(floats(g.constants.at("state")), (std::vector<float>{0, 0}));
}

TEST(Interpreter, SymIntValuesFlowBetweenNodes) {
  Graph g;
  const SymInt s0 = SymInt::symbol("s0");
  Value* x = user_input(g, "x", type(DType::kFloat32, {s0, 2}));
  g.symbol_ranges["s0"] = SymRange{1, 16};
  Arg dim;
  dim.name = "dim";
  dim.kind = Arg::Kind::kInt;
  dim.i = 0;
  Value* n = add_node(g, kSize, "sym_size", {tensor_arg("self", x), dim}, std::nullopt);
  n->sym = s0;
  Arg nref;
  nref.name = "n";
  nref.kind = Arg::Kind::kSymInt;
  nref.symints = {ir::IntRef{0, n}};
  Value* f = add_node(g, kFillN, "fill", {nref}, type(DType::kFloat32, {s0}));
  add_output(g, f);
  add_output(g, n);  // an int output comes back as a 0-dim int64 tensor
  interp::Interpreter in(g);
  auto outs = in.run({Tensor::zeros({3, 2}, DType::kFloat32)});
  EXPECT_EQ(floats(outs[0]), (std::vector<float>{3, 3, 3}));
  EXPECT_EQ(outs[1].dtype(), DType::kInt64);
  EXPECT_EQ(outs[1].dim(), 0);
  EXPECT_EQ(outs[1].item(), 3);
}

TEST(Interpreter, FreesIntermediatesAfterLastUse) {
  Graph g;
  Value* x = user_input(g, "x", type(DType::kFloat32, {2}));
  Value* a = add_node(g, kTwice, "a", {tensor_arg("self", x)}, type(DType::kFloat32, {2}));
  Value* b = add_node(g, kProbe, "b", {tensor_arg("self", a)}, type(DType::kFloat32, {2}));
  Value* c = add_node(g, kExpectFreed, "c", {tensor_arg("self", b)}, type(DType::kFloat32, {2}));
  add_output(g, c);
  interp::Interpreter in(g);
  EXPECT_EQ(floats(in.run({Tensor::from_vector<float>({1, 2})})[0]), (std::vector<float>{2, 4}));
}

TEST(Interpreter, KernelErrorsNameTheNode) {
  for (const ir::OpSchema* s : {&kThrowError, &kThrowStd, &kWrongDtype}) {
    Graph g;
    Value* x = user_input(g, "x", type(DType::kFloat32, {2}));
    add_output(g, add_node(g, *s, "bad_node", {tensor_arg("self", x)}, type(DType::kFloat32, {2})));
    interp::Interpreter in(g);
    expect_error([&] { in.run({Tensor::zeros({2}, DType::kFloat32)}); },
                 {"node bad_node (" + std::string(s->name) + ")"});
  }
  Graph g;
  Value* x = user_input(g, "x", type(DType::kFloat32, {2}));
  add_output(g, add_node(g, kWrongDtype, "w", {tensor_arg("self", x)}, type(DType::kFloat32, {2})));
  interp::Interpreter in(g);
  expect_error([&] { in.run({Tensor::zeros({2}, DType::kFloat32)}); },
               {"node w (test.wrong_dtype)", "expected f32[2]", "got i64[2]"});
}

TEST(Interpreter, MissingWeightIsAnError) {
  Graph g;
  add_output(g, g.add_input("p_w", type(DType::kFloat32, {2}),
                            input_spec(ir::InputKind::kParameter, "w")));
  interp::Interpreter in(g);
  expect_error([&] { in.run({}); }, {"no weight loaded", "parameter 'w'"});
}

}  // namespace
}  // namespace anvil
