// Text printer and parser: exact text of a hand-built graph, round trips of every Arg kind,
// floats, strings, types and signatures, and parse errors with their positions.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ir_builders.h"

namespace anvil::irtest {
namespace {

// The exact text print_graph writes for build_mlp_like() below.
const char* kMlpText = R"(graph {
  attributes {
    torch_version = "2.11.0"
  }
  symbols {
    s77 in [1, 64]
  }
  inputs {
    %p_l1_weight: f32[8, 4] = parameter "l1.weight"
    %p_l1_bias: f32[8] = parameter "l1.bias"
    %b_running: f32[8] = buffer "running" persistent
    %c_scale: f32[] = tensor_constant "scale"
    %x: f32[s77, 4] = user_input
  }
  %sym_size_int_1: SymInt(s77) = aten.sym_size.int(self=%x, dim=0)
  %linear: f32[s77, 8] = aten.linear.default(input=%x, weight=%p_l1_weight, bias=%p_l1_bias)
  %view: f32[s77, 2, 4] = aten.view.default(self=%linear, size=SymInt[%sym_size_int_1, 2, 4])
  ^unbind: [%getitem: f32[s77, 4], _] = aten.unbind.int(self=%view, dim=1)
  %t: f32[4, s77]{1, 4} = aten.t.default(self=%getitem)
  %arange: i64[s77] = aten.arange.default(end=SymInt(%sym_size_int_1), *dtype=i64, *device=device(cpu), *pin_memory=False)
  %add: f32[s77, 8] = aten.add.Tensor(self=%linear, other=1.0)
  %mul: f32[s77, 8] = aten.mul.Tensor(self=%add, other=0.1)
  %gelu: f32[s77, 8] = aten.gelu.default(self=%mul, approximate="tanh")
  %index: f32[s77, 8] = aten.index.Tensor(self=%gelu, indices=Tensor?[%arange])
  %to: bf16[s77, 8]@cuda:0 = aten.to.dtype_layout(self=%index, *dtype=bf16, *layout=torch.strided, *device=device(cuda:0))
  %clone: bf16[s77, 8]@cuda:0 = aten.clone.default(self=%to, *memory_format=torch.contiguous_format)
  %cat: f32[2*s77, 8] = aten.cat.default(tensors=[%add, %mul], dim=0)
  %mean: f32[s77, 1] = aten.mean.dim(self=%add, dim=[-1], keepdim=True)
  %sum: f32[] = aten.sum.dim_IntList(self=%add, dim=[], keepdim=False, *dtype=f32)
  ^_assert_tensor_metadata_default: aten._assert_tensor_metadata.default(a=%add, *dtype=f32, *device=device(cpu), *layout=torch.strided)
  %add_1: f32[8] = aten.add.Tensor(self=%b_running, other=%p_l1_bias)
  outputs {
    buffer_mutation "running" %add_1
    user_output %cat
    user_output %sum
    user_output %clone
  }
}
)";

/// A graph with every signature kind, symbolic sizes, list outputs, kwargs and odd types.
std::unique_ptr<ir::Graph> build_mlp_like() {
  auto g = std::make_unique<ir::Graph>();
  g->attributes["torch_version"] = "2.11.0";
  g->symbol_ranges["s77"] = SymRange{1, 64};
  SymInt s = sym("s77");
  const DType f = DType::kFloat32;
  auto* w = g->add_input("p_l1_weight", tt(f, {8, 4}),
                         input_spec(ir::InputKind::kParameter, "l1.weight"));
  auto* b = g->add_input("p_l1_bias", tt(f, {8}), input_spec(ir::InputKind::kParameter, "l1.bias"));
  auto* run = g->add_input("b_running", tt(f, {8}), input_spec(ir::InputKind::kBuffer, "running"));
  g->add_input("c_scale", tt(f, {}), input_spec(ir::InputKind::kConstant, "scale"));
  auto* x = g->add_input("x", tt(f, {s, 4}));

  auto* n = symint_value(*g, "sym_size_int_1", s);
  add_node(*g, "aten.sym_size.int", {tensor_arg("self", x), int_arg("dim", 0)}, {n});
  auto* linear = tensor_value(*g, "linear", tt(f, {s, 8}));
  add_node(*g, "aten.linear.default",
           {tensor_arg("input", x), tensor_arg("weight", w), tensor_arg("bias", b)}, {linear});
  Arg size = make_arg("size", K::kSymInts);
  size.symints = {{0, n}, {2, nullptr}, {4, nullptr}};
  auto* view = tensor_value(*g, "view", tt(f, {s, 2, 4}));
  add_node(*g, "aten.view.default", {tensor_arg("self", linear), size}, {view});
  auto* getitem = tensor_value(*g, "getitem", tt(f, {s, 4}));
  add_node(*g, "aten.unbind.int", {tensor_arg("self", view), int_arg("dim", 1)}, {getitem, nullptr},
           /*as_list=*/true, "unbind");
  ir::TensorType tt_t = tt(f, {4, s});
  tt_t.strides = {1, 4};
  add_node(*g, "aten.t.default", {tensor_arg("self", getitem)}, {tensor_value(*g, "t", tt_t)});
  Arg end = make_arg("end", K::kSymInt);
  end.symints = {{0, n}};
  auto* arange = tensor_value(*g, "arange", tt(DType::kInt64, {s}));
  add_node(*g, "aten.arange.default",
           {end, dtype_arg("dtype", DType::kInt64), device_arg("device", Device::cpu()),
            bool_arg("pin_memory", false, true)},
           {arange});
  auto* add = tensor_value(*g, "add", tt(f, {s, 8}));
  add_node(*g, "aten.add.Tensor", {tensor_arg("self", linear), float_arg("other", 1.0)}, {add});
  auto* mul = tensor_value(*g, "mul", tt(f, {s, 8}));
  add_node(*g, "aten.mul.Tensor", {tensor_arg("self", add), float_arg("other", 0.1)}, {mul});
  Arg approx = make_arg("approximate", K::kString);
  approx.s = "tanh";
  auto* gelu = tensor_value(*g, "gelu", tt(f, {s, 8}));
  add_node(*g, "aten.gelu.default", {tensor_arg("self", mul), approx}, {gelu});
  Arg indices = make_arg("indices", K::kOptTensors);
  indices.values = {arange};
  auto* index = tensor_value(*g, "index", tt(f, {s, 8}));
  add_node(*g, "aten.index.Tensor", {tensor_arg("self", gelu), indices}, {index});
  ir::TensorType cuda_bf16 = tt(DType::kBFloat16, {s, 8});
  cuda_bf16.device = Device::cuda(0);
  Arg layout = make_arg("layout", K::kLayout, true);
  layout.i = 7;
  auto* to = tensor_value(*g, "to", cuda_bf16);
  add_node(*g, "aten.to.dtype_layout",
           {tensor_arg("self", index), dtype_arg("dtype", DType::kBFloat16), layout,
            device_arg("device", Device::cuda(0))},
           {to});
  Arg mf = make_arg("memory_format", K::kMemoryFormat, true);
  mf.i = 1;
  auto* clone = tensor_value(*g, "clone", cuda_bf16);
  add_node(*g, "aten.clone.default", {tensor_arg("self", to), mf}, {clone});
  Arg tensors = make_arg("tensors", K::kTensors);
  tensors.values = {add, mul};
  auto* cat = tensor_value(*g, "cat", tt(f, {SymInt(2) * s, 8}));
  add_node(*g, "aten.cat.default", {tensors, int_arg("dim", 0)}, {cat});
  Arg dim = make_arg("dim", K::kInts);
  dim.ints = {-1};
  add_node(*g, "aten.mean.dim", {tensor_arg("self", add), dim, bool_arg("keepdim", true)},
           {tensor_value(*g, "mean", tt(f, {s, 1}))});
  Arg no_dims = make_arg("dim", K::kInts);
  auto* sum = tensor_value(*g, "sum", tt(f, {}));
  add_node(*g, "aten.sum.dim_IntList",
           {tensor_arg("self", add), no_dims, bool_arg("keepdim", false), dtype_arg("dtype", f)},
           {sum});
  add_node(
      *g, "aten._assert_tensor_metadata.default",
      {tensor_arg("a", add), dtype_arg("dtype", f), device_arg("device", Device::cpu()), layout},
      {}, false, "_assert_tensor_metadata_default");
  auto* add_1 = tensor_value(*g, "add_1", tt(f, {8}));
  add_node(*g, "aten.add.Tensor", {tensor_arg("self", run), tensor_arg("other", b)}, {add_1});
  g->output_specs() = {{ir::OutputKind::kBufferMutation, add_1, "running"},
                       {ir::OutputKind::kUserOutput, cat, ""},
                       {ir::OutputKind::kUserOutput, sum, ""},
                       {ir::OutputKind::kUserOutput, clone, ""}};
  return g;
}

TEST(IrPrinter, HandBuiltGraphPrintsExactText) {
  auto g = build_mlp_like();
  EXPECT_EQ(ir::print_graph(*g), kMlpText);
  ir::verify(*g, {/*check_types=*/false});
}

TEST(IrParser, ParsesTextToTheHandBuiltGraph) {
  auto g = build_mlp_like();
  auto parsed = ir::parse_graph(kMlpText);
  std::string diff;
  EXPECT_TRUE(ir::graphs_equal(*g, *parsed, &diff)) << diff;
  EXPECT_EQ(ir::print_graph(*parsed), kMlpText);
  EXPECT_TRUE(parsed->constants.empty());
  // Schemas are resolved, names and producers are wired.
  auto nodes = parsed->nodes();
  ASSERT_EQ(nodes.size(), 17u);
  EXPECT_EQ(nodes[1]->schema, ir::find_op("aten.linear.default"));
  EXPECT_EQ(nodes[3]->name, "unbind");
  EXPECT_TRUE(nodes[3]->outputs_as_list);
  EXPECT_EQ(nodes[3]->outputs[1], nullptr);
  EXPECT_EQ(nodes[15]->name, "_assert_tensor_metadata_default");
  EXPECT_EQ(parsed->find_value("getitem")->producer, nodes[3]);
  EXPECT_EQ(parsed->find_value("sym_size_int_1")->kind, ir::ValueKind::kSymInt);
  EXPECT_EQ(parsed->find_value("sym_size_int_1")->sym, sym("s77"));
  EXPECT_EQ(parsed->input_specs()[2].kind, ir::InputKind::kBuffer);
  EXPECT_EQ(parsed->input_specs()[2].target, "running");
  EXPECT_EQ(parsed->inputs().size(), 5u);
  ir::verify(*parsed, {/*check_types=*/false});
}

TEST(IrPrinter, PrintAttributesOptional) {
  auto g = build_mlp_like();
  ir::PrintOptions opts;
  opts.attributes = false;
  std::string text = ir::print_graph(*g, opts);
  EXPECT_EQ(text.find("attributes"), std::string::npos);
  EXPECT_TRUE(ir::parse_graph(text)->attributes.empty());
}

TEST(IrPrinter, EveryArgKindRoundTrips) {
  ir::Graph g;
  auto* x = g.add_input("x", tt(DType::kFloat32, {2}));
  auto* y = g.add_input("y", tt(DType::kFloat32, {2}));
  auto* n = g.add_input("n", tt(DType::kFloat32, {}));
  n->kind = ir::ValueKind::kSymInt;
  n->sym = sym("s0");
  std::vector<Arg> args;
  args.push_back(make_arg("none", K::kNone));
  args.push_back(tensor_arg("t", x));
  Arg ts = make_arg("ts", K::kTensors);
  ts.values = {x, y};
  args.push_back(ts);
  args.push_back(make_arg("ts_empty", K::kTensors));
  Arg ots = make_arg("ots", K::kOptTensors);
  ots.values = {nullptr, x};
  args.push_back(ots);
  Arg ots_full = make_arg("ots_full", K::kOptTensors);
  ots_full.values = {x, y};
  args.push_back(ots_full);
  args.push_back(make_arg("ots_empty", K::kOptTensors));
  args.push_back(int_arg("i", -7));
  args.push_back(int_arg("i_min", std::numeric_limits<int64_t>::min()));
  args.push_back(int_arg("i_max", std::numeric_limits<int64_t>::max()));
  args.push_back(float_arg("f_int_valued", 2.0));
  args.push_back(float_arg("f_third", 1.0 / 3.0));
  args.push_back(float_arg("f_neg_zero", -0.0));
  args.push_back(float_arg("f_tiny", 5e-324));
  args.push_back(float_arg("f_big", 1.2345678901234567e300));
  args.push_back(float_arg("f_inf", -std::numeric_limits<double>::infinity()));
  args.push_back(bool_arg("b", true));
  Arg str = make_arg("s", K::kString);
  str.s = "quote\" back\\slash\nnew\ttab\x01 \xc3\xa9";
  args.push_back(str);
  Arg ints = make_arg("ints", K::kInts);
  ints.ints = {1, -2, 3};
  args.push_back(ints);
  args.push_back(make_arg("ints_empty", K::kInts));
  Arg floats = make_arg("floats", K::kFloats);
  floats.floats = {1.0, -0.5, 1e-06};
  args.push_back(floats);
  args.push_back(make_arg("floats_empty", K::kFloats));
  Arg bools = make_arg("bools", K::kBools);
  bools.bools = {true, false};
  args.push_back(bools);
  args.push_back(make_arg("bools_empty", K::kBools));
  Arg si = make_arg("si_ref", K::kSymInt);
  si.symints = {{0, n}};
  args.push_back(si);
  Arg si_const = make_arg("si_const", K::kSymInt);
  si_const.symints = {{5, nullptr}};
  args.push_back(si_const);
  Arg sis = make_arg("sis", K::kSymInts);
  sis.symints = {{0, n}, {3, nullptr}};
  args.push_back(sis);
  Arg sis_const = make_arg("sis_const", K::kSymInts);
  sis_const.symints = {{1, nullptr}, {2, nullptr}};
  args.push_back(sis_const);
  args.push_back(make_arg("sis_empty", K::kSymInts));
  args.push_back(dtype_arg("dt", DType::kBool, false));
  args.push_back(dtype_arg("dt_bf16", DType::kBFloat16));
  args.push_back(device_arg("dev_cpu0", Device{Device::Type::kCPU, 0}));
  args.push_back(device_arg("dev_cuda", Device::cuda(-1)));
  Arg lay = make_arg("lay", K::kLayout);
  lay.i = 0;  // Unknown: no name, printed as layout(0)
  args.push_back(lay);
  Arg mf = make_arg("mf", K::kMemoryFormat);
  mf.i = 2;
  args.push_back(mf);
  Arg mf_code = make_arg("mf_code", K::kMemoryFormat);
  mf_code.i = 9;
  args.push_back(mf_code);
  Arg quoted = int_arg("odd name", 1, true);
  args.push_back(quoted);

  auto* o0 = tensor_value(g, "o0", tt(DType::kFloat32, {2}));
  auto* o1 = g.new_value("o1", ir::ValueKind::kSymFloat);
  auto* o2 = g.new_value("o 2", ir::ValueKind::kSymBool);
  add_node(g, "test.every_kind", args, {o0, nullptr, o1, o2});
  add_node(g, "test.no_outputs", {}, {}, false, "");
  add_node(g, "test.empty_list", {}, {}, true, "lst");
  add_node(g, "test.one_tuple_null", {}, {nullptr}, false, "odd.node");
  g.output_specs().push_back({ir::OutputKind::kUserOutput, o0, ""});
  g.output_specs().push_back({ir::OutputKind::kUserOutput, nullptr, ""});

  std::string text = ir::print_graph(g);
  EXPECT_NE(text.find("none=None, t=%x, ts=[%x, %y], ts_empty=Tensor[], ots=Tensor?[None, %x], "
                      "ots_full=Tensor?[%x, %y], ots_empty=Tensor?[], i=-7, "
                      "i_min=-9223372036854775808, i_max=9223372036854775807, f_int_valued=2.0, "
                      "f_third=0.3333333333333333, f_neg_zero=-0.0, f_tiny=5e-324, "
                      "f_big=1.2345678901234567e+300, f_inf=-inf, b=True, "
                      "s=\"quote\\\" back\\\\slash\\nnew\\ttab\\x01 \xc3\xa9\", ints=[1, -2, 3], "
                      "ints_empty=[], floats=[1.0, -0.5, 1e-06], floats_empty=float[], "
                      "bools=[True, False], bools_empty=bool[], si_ref=SymInt(%n), "
                      "si_const=SymInt(5), sis=SymInt[%n, 3], sis_const=SymInt[1, 2], "
                      "sis_empty=SymInt[], dt=bool, *dt_bf16=bf16, *dev_cpu0=device(cpu:0), "
                      "*dev_cuda=device(cuda), lay=layout(0), mf=torch.channels_last, "
                      "mf_code=memory_format(9), *\"odd name\"=1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(%o0: f32[2], _, %o1: SymFloat, %\"o 2\": SymBool) = test.every_kind("),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  test.no_outputs()\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  ^lst: [] = test.empty_list()\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  ^\"odd.node\": _ = test.one_tuple_null()\n"), std::string::npos) << text;
  EXPECT_NE(text.find("%n: SymInt(s0) = user_input"), std::string::npos) << text;
  EXPECT_NE(text.find("    user_output None\n"), std::string::npos) << text;

  auto back = expect_round_trip(g, /*allow_unknown=*/true);
  // Kinds survive, including the ones whose text looks alike.
  const ir::Node& node = *back->nodes()[0];
  for (size_t i = 0; i < args.size(); ++i)
    EXPECT_EQ(static_cast<int>(node.args[i].kind), static_cast<int>(args[i].kind)) << args[i].name;
  EXPECT_TRUE(std::signbit(node.arg("f_neg_zero")->f));
  EXPECT_EQ(node.arg("f_third")->f, 1.0 / 3.0);
  EXPECT_EQ(node.arg("f_tiny")->f, 5e-324);
  EXPECT_EQ(node.arg("s")->s, str.s);
  EXPECT_EQ(node.arg("i_min")->i, std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(node.arg("odd name")->kwarg);
  EXPECT_EQ(node.arg("sis")->symints[0].value, back->find_value("n"));
  EXPECT_EQ(node.arg("dev_cpu0")->device, (Device{Device::Type::kCPU, 0}));
}

TEST(IrPrinter, FloatFormatIsShortestExactAndAlwaysAFloat) {
  EXPECT_EQ(ir::format_float(1.0), "1.0");
  EXPECT_EQ(ir::format_float(0.0), "0.0");
  EXPECT_EQ(ir::format_float(-0.0), "-0.0");
  EXPECT_EQ(ir::format_float(0.1), "0.1");
  EXPECT_EQ(ir::format_float(1e-06), "1e-06");
  EXPECT_EQ(ir::format_float(-2.5), "-2.5");
  EXPECT_EQ(ir::format_float(10000.0), "10000.0");
  EXPECT_EQ(ir::format_float(1e20), "1e+20");
  EXPECT_EQ(ir::format_float(1e16), "1e+16");
  EXPECT_EQ(ir::format_float(123456789012345.0), "123456789012345.0");
  EXPECT_EQ(ir::format_float(0.0001), "0.0001");
  EXPECT_EQ(ir::format_float(0.00012), "0.00012");
  EXPECT_EQ(ir::format_float(1.5e-05), "1.5e-05");
  EXPECT_EQ(ir::format_float(0.7071067811865476), "0.7071067811865476");
  EXPECT_EQ(ir::format_float(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(ir::format_float(std::nan("")), "nan");
  // Every printed float reads back bit-exactly through the parser.
  for (double v : {0.1, 1.0 / 3.0, 3.0517578125e-05, 1.7976931348623157e308,
                   2.2250738585072014e-308, -123456.789, 9007199254740993.0, 0.2 + 0.1}) {
    std::string text = "graph {\n  test.f(v=" + ir::format_float(v) + ")\n}\n";
    ir::ParseOptions opts;
    opts.allow_unknown_ops = true;
    auto g = ir::parse_graph(text, opts);
    const Arg* a = g->nodes()[0]->arg("v");
    ASSERT_EQ(a->kind, K::kFloat) << text;
    EXPECT_EQ(a->f, v) << text;
  }
}

TEST(IrPrinter, TypesWithStridesDevicesAndExpressions) {
  ir::TensorType t = tt(DType::kFloat16, {sym("s0"), SymInt(2) * sym("s0") + SymInt(1), 3});
  EXPECT_EQ(ir::print_type(t), "f16[s0, 2*s0 + 1, 3]");
  t.strides = ir::contiguous_strides(t.sizes);
  EXPECT_EQ(ir::print_type(t), "f16[s0, 2*s0 + 1, 3]");  // contiguous strides are implied
  t.strides = {1, sym("s0"), sym("s0") * (SymInt(2) * sym("s0") + SymInt(1))};
  t.device = Device::cuda(1);
  EXPECT_EQ(ir::print_type(t), "f16[s0, 2*s0 + 1, 3]{1, s0, (2*s0 + 1)*s0}@cuda:1");
  ir::TensorType scalar = tt(DType::kInt64, {});
  EXPECT_EQ(ir::print_type(scalar), "i64[]");

  ir::Graph g;
  g.symbol_ranges["s0"] = SymRange{2, SymRange::kSymMax};
  g.symbol_ranges["u1"] = SymRange{-SymRange::kSymMax, 7};
  auto* x = g.add_input("x", t);
  SymInt half = sym("s0").floordiv(2);
  SymInt mx = SymInt::max(sym("s0"), 4);
  SymInt md = sym("s0").mod(3);
  auto* y = tensor_value(g, "y", tt(DType::kBFloat16, {half, mx, md, sym("s0") - SymInt(1)}));
  add_node(g, "test.op", {tensor_arg("self", x)}, {y});
  std::string text = ir::print_graph(g);
  EXPECT_NE(text.find("s0 in [2, inf]"), std::string::npos) << text;
  EXPECT_NE(text.find("u1 in [-inf, 7]"), std::string::npos) << text;
  auto back = expect_round_trip(g, true);
  EXPECT_EQ(back->find_value("y")->type.sizes[0], half);
  EXPECT_EQ(back->find_value("x")->type.strides, t.strides);
  EXPECT_EQ(back->find_value("x")->type.device, Device::cuda(1));
  EXPECT_EQ(back->symbol_ranges.at("s0").max, SymRange::kSymMax);
}

TEST(IrPrinter, SignatureKindsRoundTrip) {
  ir::Graph g;
  ir::InputSpec nonpersistent = input_spec(ir::InputKind::kBuffer, "tmp");
  nonpersistent.persistent = false;
  g.add_input("b_tmp", tt(DType::kFloat32, {3}), nonpersistent);
  g.add_input("obj", tt(DType::kFloat32, {}), input_spec(ir::InputKind::kCustomObj, "my_obj"));
  g.add_input("tok", tt(DType::kFloat32, {}), input_spec(ir::InputKind::kToken));
  ir::InputSpec constant_input;
  constant_input.constant_int = 5;
  g.input_specs().push_back(constant_input);  // a constant user input without a value
  auto* x = g.add_input("x", tt(DType::kFloat32, {3}));
  g.output_specs().push_back({ir::OutputKind::kUserInputMutation, x, "x"});
  g.output_specs().push_back({ir::OutputKind::kLossOutput, x, ""});
  std::string text = ir::print_graph(g);
  EXPECT_EQ(text,
            "graph {\n"
            "  inputs {\n"
            "    %b_tmp: f32[3] = buffer \"tmp\" non_persistent\n"
            "    %obj: f32[] = custom_obj \"my_obj\"\n"
            "    %tok: f32[] = token\n"
            "    _ = user_input constant 5\n"
            "    %x: f32[3] = user_input\n"
            "  }\n"
            "  outputs {\n"
            "    user_input_mutation \"x\" %x\n"
            "    loss_output %x\n"
            "  }\n"
            "}\n");
  expect_round_trip(g);
}

TEST(IrParser, AcceptsCommentsAndFreeLayout) {
  const char* text =
      "# a comment\n"
      "graph{inputs{%x:f32[2,3]=user_input}%y:f32[2,3]=aten.relu.default(self=%x)# trailing\n"
      "outputs{user_output %y}}";
  auto g = ir::parse_graph(text);
  EXPECT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->nodes()[0]->schema, ir::find_op("aten.relu.default"));
  EXPECT_EQ(ir::print_graph(*g),
            "graph {\n  inputs {\n    %x: f32[2, 3] = user_input\n  }\n"
            "  %y: f32[2, 3] = aten.relu.default(self=%x)\n"
            "  outputs {\n    user_output %y\n  }\n}\n");
}

TEST(IrParser, LenientListForms) {
  // Tags are accepted on non-empty lists too; None makes an untagged list optional; ints mixed
  // with floats give a float list; torch dtype names are accepted.
  const char* text =
      "graph {\n"
      "  inputs {\n    %x: f32[2] = user_input\n  }\n"
      "  test.f(a=int[1, 2], b=float[1, 2.5], c=bool[True], d=Tensor[%x], e=[None, %x], "
      "f=[1, 2.5], g=torch.float32, h=(2))\n"
      "}\n";
  ir::ParseOptions opts;
  opts.allow_unknown_ops = true;
  try {
    ir::parse_graph(text, opts);
    FAIL() << "h=(2) is not a value";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "<ir>:5:113");
    EXPECT_EQ(e.expected(), "an argument value");
    EXPECT_EQ(e.actual(), "'('");
  }
  std::string ok = text;
  ok.replace(ok.find(", h=(2)"), 7, "");
  auto g = ir::parse_graph(ok, opts);
  const ir::Node& n = *g->nodes()[0];
  EXPECT_EQ(n.arg("a")->kind, K::kInts);
  EXPECT_EQ(n.arg("b")->floats, (std::vector<double>{1.0, 2.5}));
  EXPECT_EQ(n.arg("c")->kind, K::kBools);
  EXPECT_EQ(n.arg("d")->kind, K::kTensors);
  EXPECT_EQ(n.arg("e")->kind, K::kOptTensors);
  EXPECT_EQ(n.arg("e")->values[0], nullptr);
  EXPECT_EQ(n.arg("f")->kind, K::kFloats);
  EXPECT_EQ(n.arg("g")->kind, K::kScalarType);
  EXPECT_EQ(n.arg("g")->dtype, DType::kFloat32);
}

}  // namespace
}  // namespace anvil::irtest
