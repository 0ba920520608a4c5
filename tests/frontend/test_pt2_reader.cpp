// Loads every fixture archive and checks the graph, signature, types, ranges and weights against
// values read from the archives with numpy.
#include <gtest/gtest.h>

#include <filesystem>

#include "frontend/archive_util.h"
#include "frontend/pt2_reader.h"
#include "ir/op_schema.h"

namespace anvil {
namespace {

using frontend::load_pt2;
using ir::Graph;
using ir::InputKind;

std::unique_ptr<Graph> load(const std::string& name, bool weights = true) {
  return load_pt2(test::fixture_path(name), {weights});
}

int count_kind(const Graph& g, InputKind k) {
  int n = 0;
  for (const auto& s : g.input_specs()) n += s.kind == k;
  return n;
}

const ir::Value* user_input(const Graph& g, int i) {
  int seen = 0;
  for (const auto& s : g.input_specs())
    if (s.kind == InputKind::kUserInput && seen++ == i) return s.value;
  return nullptr;
}

const ir::Node* node(const Graph& g, const std::string& name) {
  for (const ir::Node* n : g.nodes())
    if (n->name == name) return n;
  return nullptr;
}

SymInt sym(const std::string& s) { return SymInt::symbol(s); }

struct FixtureFacts {
  const char* name;
  size_t inputs, params, buffers, constants, users, nodes, outputs;
};

TEST(Pt2Reader, EveryFixtureLoadsWithItsSignature) {
  // const_and_buffer's 9 exported nodes import as 12: each of its 3 in-place ops becomes the
  // functional op plus aten.copy_ (ir/inplace.h).
  const FixtureFacts facts[] = {
      {"mlp_small", 7, 6, 0, 0, 1, 5, 1},        {"mlp_dynbatch", 7, 6, 0, 0, 1, 5, 1},
      {"small_cnn", 12, 8, 3, 0, 1, 8, 1},       {"const_and_buffer", 6, 2, 2, 1, 1, 12, 2},
      {"llama_tiny", 24, 21, 2, 0, 1, 211, 1},   {"gpt2_tiny", 30, 29, 0, 0, 1, 124, 1},
      {"bert_tiny", 43, 39, 2, 0, 2, 90, 2},     {"block_tiny", 8, 7, 0, 0, 1, 75, 1},
      {"tp_mlp_allreduce", 4, 3, 0, 0, 1, 6, 1}, {"tp_overlap", 8, 7, 0, 0, 1, 10, 1},
  };
  for (const auto& f : facts) {
    SCOPED_TRACE(f.name);
    auto g = load(f.name);
    EXPECT_EQ(g->inputs().size(), f.inputs);
    EXPECT_EQ(count_kind(*g, InputKind::kParameter), static_cast<int>(f.params));
    EXPECT_EQ(count_kind(*g, InputKind::kBuffer), static_cast<int>(f.buffers));
    EXPECT_EQ(count_kind(*g, InputKind::kConstant), static_cast<int>(f.constants));
    EXPECT_EQ(count_kind(*g, InputKind::kUserInput), static_cast<int>(f.users));
    EXPECT_EQ(g->num_nodes(), f.nodes);
    EXPECT_EQ(g->output_specs().size(), f.outputs);
    EXPECT_EQ(g->constants.size(), f.params + f.buffers + f.constants);
    EXPECT_EQ(g->attributes.at("schema_version"), "8.17");
    EXPECT_EQ(g->attributes.at("torch_version"), "2.11.0+cu130");
    EXPECT_EQ(g->attributes.at("archive_folder"), f.name);
    EXPECT_EQ(g->attributes.at("archive"), test::fixture_path(f.name));
    for (const ir::Node* n : g->nodes()) {
      ASSERT_NE(n->schema, nullptr) << n->name;
      EXPECT_EQ(n->target, n->schema->name);
      EXPECT_EQ(n->target.rfind("torch.ops.", 0), std::string::npos);
    }
    for (const auto& s : g->output_specs()) {
      EXPECT_EQ(s.kind, ir::OutputKind::kUserOutput);
      ASSERT_NE(s.value, nullptr);
    }
    // Every parameter / buffer / constant has its tensor, typed like its placeholder.
    for (const auto& s : g->input_specs()) {
      if (s.kind == InputKind::kUserInput) continue;
      ASSERT_TRUE(g->constants.count(s.target)) << s.target;
      const Tensor& t = g->constants.at(s.target);
      EXPECT_EQ(t.dtype(), s.value->type.dtype) << s.target;
      ASSERT_EQ(t.dim(), static_cast<int64_t>(s.value->type.sizes.size())) << s.target;
      for (int64_t d = 0; d < t.dim(); ++d) EXPECT_EQ(SymInt(t.size(d)), s.value->type.sizes[d]);
    }
  }
}

TEST(Pt2Reader, MlpSmallTypesAndWeights) {
  auto g = load("mlp_small");
  const ir::Value* x = user_input(*g, 0);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->name, "x");
  EXPECT_EQ(x->type.str(), "f32[8, 256]");
  EXPECT_EQ(x->type.strides, (std::vector<SymInt>{256, 1}));
  EXPECT_TRUE(x->type.device.is_cpu());
  EXPECT_EQ(g->output_specs()[0].value->name, "linear_2");
  EXPECT_EQ(g->output_specs()[0].value->type.str(), "f32[8, 256]");
  EXPECT_TRUE(g->symbol_ranges.empty());

  const auto& specs = g->input_specs();
  EXPECT_EQ(specs[0].kind, InputKind::kParameter);
  EXPECT_EQ(specs[0].target, "l1.weight");
  EXPECT_EQ(specs[0].value->name, "p_l1_weight");

  const Tensor& w = g->constants.at("l1.weight");
  EXPECT_EQ(w.type_str(), "f32[512, 256]");
  EXPECT_TRUE(w.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data_ptr()) % kStorageAlignment, 0u);
  const float* p = w.data<float>();
  EXPECT_FLOAT_EQ(p[0], 0.032203949987888336f);
  EXPECT_FLOAT_EQ(p[1], -0.027586139738559723f);
  EXPECT_FLOAT_EQ(p[2], -0.012116342782974243f);
  EXPECT_FLOAT_EQ(p[3], 0.02933555841445923f);
  EXPECT_FLOAT_EQ(p[512 * 256 - 1], -0.059637509286403656f);
  const Tensor& b = g->constants.at("l3.bias");
  EXPECT_EQ(b.type_str(), "f32[256]");
  EXPECT_FLOAT_EQ(b.item_at(0), -0.03823895379900932f);
  EXPECT_FLOAT_EQ(b.item_at(255), -0.012134825810790062f);

  const ir::Node* l1 = g->nodes()[0];
  EXPECT_EQ(l1->target, "aten.linear.default");
  ASSERT_EQ(l1->args.size(), 3u);
  EXPECT_EQ(l1->args[0].name, "input");
  EXPECT_EQ(l1->args[0].kind, ir::Arg::Kind::kTensor);
  EXPECT_EQ(l1->args[0].value, x);
  EXPECT_EQ(l1->args[1].value, specs[0].value);
  EXPECT_FALSE(l1->args[0].kwarg);
  EXPECT_EQ(l1->outputs.size(), 1u);
  EXPECT_EQ(l1->outputs[0]->producer, l1);
  EXPECT_TRUE(l1->metadata.count("stack_trace"));
}

TEST(Pt2Reader, SignatureOnlyWithoutWeights) {
  auto g = load("mlp_small", false);
  EXPECT_TRUE(g->constants.empty());
  EXPECT_EQ(g->num_nodes(), 5u);
  EXPECT_EQ(g->input_specs()[0].target, "l1.weight");
}

TEST(Pt2Reader, MlpDynbatchHasSymbolicBatch) {
  auto g = load("mlp_dynbatch");
  const ir::Value* x = user_input(*g, 0);
  ASSERT_EQ(x->type.sizes.size(), 2u);
  EXPECT_EQ(x->type.sizes[0], sym("s77"));
  EXPECT_EQ(x->type.sizes[1], SymInt(256));
  EXPECT_EQ(x->type.str(), "f32[s77, 256]");
  EXPECT_EQ(g->output_specs()[0].value->type.str(), "f32[s77, 256]");
  ASSERT_EQ(g->symbol_ranges.size(), 1u);
  EXPECT_EQ(g->symbol_ranges.at("s77"), (SymRange{1, 64}));
  EXPECT_FLOAT_EQ(g->constants.at("l1.weight").item_at(0), -0.02362377941608429f);
  EXPECT_FLOAT_EQ(g->constants.at("l1.weight").item_at(3), 0.019178561866283417f);
}

TEST(Pt2Reader, LlamaSymIntsAndRanges) {
  auto g = load("llama_tiny");
  const ir::Value* ids = user_input(*g, 0);
  EXPECT_EQ(ids->name, "ids");
  EXPECT_EQ(ids->type.dtype, DType::kInt64);
  EXPECT_EQ(ids->type.sizes, (std::vector<SymInt>{sym("s23"), sym("s27")}));
  EXPECT_EQ(g->symbol_ranges.at("s23"), (SymRange{2, 64}));
  EXPECT_EQ(g->symbol_ranges.at("s27"), (SymRange{2, 128}));
  EXPECT_EQ(g->output_specs()[0].value->type.str(), "f32[s23, s27, 256]");

  // sym_size.int produces a SymInt value carrying its expression.
  const ir::Node* sz = node(*g, "sym_size_int_12");
  ASSERT_NE(sz, nullptr);
  EXPECT_EQ(sz->target, "aten.sym_size.int");
  ASSERT_EQ(sz->outputs.size(), 1u);
  EXPECT_EQ(sz->outputs[0]->kind, ir::ValueKind::kSymInt);
  EXPECT_EQ(sz->outputs[0]->sym, sym("s23"));
  EXPECT_EQ(sz->arg("dim")->i, 0);
  EXPECT_EQ(sz->arg("self")->value, ids);

  // expand's size mixes a SymInt reference and a constant.
  const ir::Node* ex = node(*g, "expand");
  ASSERT_NE(ex, nullptr);
  const ir::Arg* size = ex->arg("size");
  ASSERT_NE(size, nullptr);
  EXPECT_EQ(size->kind, ir::Arg::Kind::kSymInts);
  ASSERT_EQ(size->symints.size(), 2u);
  EXPECT_EQ(size->symints[0].value, sz->outputs[0]);
  EXPECT_EQ(size->symints[1].value, nullptr);
  EXPECT_EQ(size->symints[1].constant, -1);

  // arange(end=SymInt) with keyword-only device / pin_memory.
  const ir::Node* ar = node(*g, "arange");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->arg("end")->kind, ir::Arg::Kind::kSymInt);
  EXPECT_EQ(ar->arg("end")->symints[0].value->name, "sym_size_int_13");
  EXPECT_EQ(ar->arg("device")->kind, ir::Arg::Kind::kDevice);
  EXPECT_TRUE(ar->arg("device")->kwarg);
  EXPECT_TRUE(ar->arg("device")->device.is_cpu());
  EXPECT_EQ(ar->arg("pin_memory")->kind, ir::Arg::Kind::kBool);
  EXPECT_FALSE(ar->arg("pin_memory")->b);

  // Strides hold products, powers and Min() of symbols.
  bool saw_product = false, saw_square = false, saw_min = false;
  for (const ir::Node* n : g->nodes())
    for (const ir::Value* v : n->outputs)
      if (v && v->is_tensor())
        for (const SymInt& s : v->type.strides) {
          saw_product |= s == SymInt(64) * sym("s27");
          saw_square |= s == sym("s27") * sym("s27");
          saw_min |= s == SymInt::min(SymInt(16) * sym("s27"), SymInt(32) * sym("s27"));
        }
  EXPECT_TRUE(saw_product);
  EXPECT_TRUE(saw_square);
  EXPECT_TRUE(saw_min);

  // Non-persistent buffers come from data/constants.
  const auto& inv = g->constants.at("m.model.rotary_emb.inv_freq");
  EXPECT_EQ(inv.type_str(), "f32[8]");
  EXPECT_FLOAT_EQ(inv.item_at(0), 1.0f);
  EXPECT_FLOAT_EQ(inv.item_at(1), 0.3162277638912201f);
  EXPECT_FLOAT_EQ(inv.item_at(7), 0.0003162277862429619f);
  bool non_persistent = false;
  for (const auto& s : g->input_specs())
    if (s.target == "m.model.rotary_emb.inv_freq") non_persistent = !s.persistent;
  EXPECT_TRUE(non_persistent);
}

TEST(Pt2Reader, ConstAndBufferSignature) {
  auto g = load("const_and_buffer");
  const auto& specs = g->input_specs();
  ASSERT_EQ(specs.size(), 6u);
  EXPECT_EQ(specs[2].kind, InputKind::kBuffer);
  EXPECT_EQ(specs[2].target, "running");
  EXPECT_TRUE(specs[2].persistent);
  EXPECT_EQ(specs[3].target, "steps");
  EXPECT_EQ(specs[4].kind, InputKind::kConstant);
  EXPECT_EQ(specs[4].target, "scale");
  EXPECT_EQ(specs[4].value->name, "c_scale");
  EXPECT_EQ(specs[5].kind, InputKind::kUserInput);
  EXPECT_EQ(specs[5].value->type.str(), "f32[4, 8]");

  EXPECT_EQ(g->constants.at("running").to_doubles(), std::vector<double>(8, 0.0));
  const Tensor& steps = g->constants.at("steps");
  EXPECT_EQ(steps.type_str(), "i64[]");
  EXPECT_EQ(steps.item(), 0.0);
  const std::vector<double> scale = g->constants.at("scale").to_doubles();
  const std::vector<float> want = {0.5f,
                                   0.6428571343421936f,
                                   0.7857142686843872f,
                                   0.9285714626312256f,
                                   1.0714285373687744f,
                                   1.2142857313156128f,
                                   1.3571428060531616f,
                                   1.5f};
  ASSERT_EQ(scale.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(scale[i], want[i]);
  EXPECT_FLOAT_EQ(g->constants.at("l.weight").item_at(0), -0.35053861141204834f);
  EXPECT_FLOAT_EQ(g->constants.at("l.weight").item_at(63), -0.15670804679393768f);

  // In-place ops run as the functional op plus a write into the buffer (ir/inplace.h): node
  // mul_ is aten.copy_ of aten.mul.Tensor's result into the buffer.
  const ir::Node* mul_ = node(*g, "mul_");
  ASSERT_NE(mul_, nullptr);
  EXPECT_EQ(mul_->target, "aten.copy_.default");
  EXPECT_EQ(mul_->schema->mutates_arg, 0);
  EXPECT_EQ(mul_->arg("self")->value, specs[2].value);
  const ir::Node* mul = mul_->arg("src")->value->producer;
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->target, "aten.mul.Tensor");
  EXPECT_EQ(mul->metadata.at("anvil_inplace_of"), "aten.mul_.Tensor");
  EXPECT_EQ(mul->arg("self")->value, specs[2].value);
  EXPECT_EQ(mul->arg("other")->kind, ir::Arg::Kind::kFloat);
  EXPECT_DOUBLE_EQ(mul->arg("other")->f, 0.9);
  const ir::Node* add2 = node(*g, "add__1");
  ASSERT_NE(add2, nullptr);
  ASSERT_EQ(add2->target, "aten.copy_.default");
  const ir::Node* add = add2->arg("src")->value->producer;
  EXPECT_EQ(add->target, "aten.add.Tensor");
  EXPECT_EQ(add->arg("other")->kind, ir::Arg::Kind::kInt);
  EXPECT_EQ(add->arg("other")->i, 1);
  EXPECT_EQ(g->output_specs()[1].value->type.str(), "i64[]");
}

TEST(Pt2Reader, SmallCnnBuffersAndDtypes) {
  auto g = load("small_cnn");
  EXPECT_EQ(g->constants.at("b1.running_var").to_doubles(), std::vector<double>(16, 1.0));
  EXPECT_EQ(g->constants.at("b1.num_batches_tracked").type_str(), "i64[]");
  const Tensor& c1 = g->constants.at("c1.weight");
  EXPECT_EQ(c1.type_str(), "f32[16, 3, 3, 3]");
  EXPECT_FLOAT_EQ(c1.item_at(0), 0.1682325303554535f);
  EXPECT_FLOAT_EQ(c1.item_at(3), 0.18881160020828247f);
  EXPECT_EQ(user_input(*g, 0)->type.str(), "f32[2, 3, 32, 32]");
  EXPECT_EQ(g->output_specs()[0].value->type.str(), "f32[2, 10]");
}

TEST(Pt2Reader, Gpt2TiedWeightsAndListOutputs) {
  auto g = load("gpt2_tiny");
  const Tensor& wte = g->constants.at("m.transformer.wte.weight");
  const Tensor& head = g->constants.at("m.lm_head.weight");
  EXPECT_EQ(wte.storage(), head.storage());  // both name weight_0
  EXPECT_FLOAT_EQ(head.item_at(0), 0.023177077993750572f);
  EXPECT_FLOAT_EQ(head.item_at(1), 0.004783963784575462f);
  EXPECT_FLOAT_EQ(head.item_at(256 * 64 - 1), -0.010464837774634361f);

  const ir::Node* split = node(*g, "split");
  ASSERT_NE(split, nullptr);
  EXPECT_TRUE(split->outputs_as_list);
  ASSERT_EQ(split->outputs.size(), 3u);
  EXPECT_EQ(split->outputs[0]->name, "getitem");
  EXPECT_EQ(split->outputs[2]->name, "getitem_2");
  EXPECT_EQ(split->outputs[2]->output_index, 2);
  EXPECT_EQ(split->outputs[1]->producer, split);
  EXPECT_EQ(split->arg("split_size")->i, 64);
}

TEST(Pt2Reader, BertTwoInputsTwoOutputs) {
  auto g = load("bert_tiny");
  EXPECT_EQ(user_input(*g, 0)->name, "ids");
  EXPECT_EQ(user_input(*g, 1)->name, "mask");
  EXPECT_EQ(user_input(*g, 1)->type.str(), "i64[s23, s27]");
  EXPECT_EQ(g->symbol_ranges.at("s23"), (SymRange{1, 64}));
  EXPECT_EQ(g->output_specs()[0].value->type.str(), "f32[s23, s27, 64]");
  EXPECT_EQ(g->output_specs()[1].value->type.str(), "f32[s23, 64]");
  const Tensor& pos = g->constants.at("m.embeddings.position_ids");
  EXPECT_EQ(pos.type_str(), "i64[1, 128]");
  EXPECT_EQ(pos.item_at(0), 0);
  EXPECT_EQ(pos.item_at(3), 3);
  EXPECT_EQ(pos.item_at(127), 127);
}

TEST(Pt2Reader, CollectivesKeepGroupArguments) {
  auto g = load("tp_mlp_allreduce");
  const ir::Node* ar = nullptr;
  for (const ir::Node* n : g->nodes())
    if (n->target == "_c10d_functional.all_reduce.default") ar = n;
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->schema->category, ir::OpCategory::kCollective);
  bool has_string = false;
  for (const auto& a : ar->args) has_string |= a.kind == ir::Arg::Kind::kString;
  EXPECT_TRUE(has_string);
}

TEST(Pt2Reader, LoadsFromBytesUnderAGivenName) {
  std::string bytes = test::read_file_bytes(test::fixture_path("const_and_buffer"));
  auto g = frontend::load_pt2_bytes(bytes, "in-memory.pt2");
  EXPECT_EQ(g->attributes.at("archive"), "in-memory.pt2");
  EXPECT_EQ(g->num_nodes(), 12u);  // 9 exported; its 3 in-place ops import as op + copy_
  EXPECT_EQ(g->constants.size(), 5u);
}

TEST(Pt2Reader, MissingFileNamesThePath) {
  try {
    load_pt2("/nonexistent/model.pt2");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.pt2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot open archive"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace anvil
