// Malformed .pt2 archives: each mutation must raise anvil::Error whose message names the
// archive, the entry and the field or node at fault.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "frontend/archive_util.h"
#include "frontend/pt2_reader.h"

namespace anvil {
namespace {

using nlohmann::json;

constexpr const char* kName = "bad.pt2";

/// A fixture archive with its model.json and payload configs parsed for editing.
struct Mutant {
  test::Archive archive;
  json model, weights, constants;

  explicit Mutant(const std::string& fixture) : archive(test::Archive::from_fixture(fixture)) {
    model = json::parse(archive.at("models/model.json"));
    weights = json::parse(archive.at("data/weights/model_weights_config.json"));
    constants = json::parse(archive.at("data/constants/model_constants_config.json"));
  }
  json& graph() { return model["graph_module"]["graph"]; }
  json& sig() { return model["graph_module"]["signature"]; }
  json& node(const std::string& name) {
    for (json& n : graph()["nodes"])
      if (n["name"] == name) return n;
    throw Error("test: no node", name);
  }
  std::string bytes() {
    archive.at("models/model.json") = model.dump();
    archive.at("data/weights/model_weights_config.json") = weights.dump();
    archive.at("data/constants/model_constants_config.json") = constants.dump();
    return archive.bytes();
  }
};

/// Loads `bytes`, expecting an Error whose message holds every string of `parts`.
void expect_load_error(const std::string& bytes, const std::vector<std::string>& parts,
                       frontend::LoadOptions options = {}) {
  try {
    frontend::load_pt2_bytes(bytes, kName, options);
    ADD_FAILURE() << "no error raised";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message lacks \"" << p << "\": " << e.what();
  }
}

TEST(Pt2Malformed, NotAZipOrTruncated) {
  expect_load_error("PK\x03\x04 this is not really a zip", {kName, "cannot open zip archive"});
  std::string good = test::read_file_bytes(test::fixture_path("const_and_buffer"));
  expect_load_error(good.substr(0, good.size() / 2), {kName, "cannot open zip archive"});
  expect_load_error(good.substr(0, 100), {kName, "cannot open zip archive"});
}

TEST(Pt2Malformed, MissingEntries) {
  Mutant m("const_and_buffer");
  m.archive.remove("models/model.json");
  expect_load_error(m.archive.bytes(), {kName, "no models/model.json", "const_and_buffer/"});

  Mutant w("const_and_buffer");
  w.archive.remove("data/weights/weight_0");
  expect_load_error(w.bytes(),
                    {kName, "data/weights/model_weights_config.json", "config.l.weight.path_name",
                     "missing payload file", "data/weights/weight_0"});
  // Without weights the same archive loads.
  EXPECT_NO_THROW(frontend::load_pt2_bytes(w.bytes(), kName, {false}));

  Mutant c("const_and_buffer");
  c.archive.remove("data/constants/model_constants_config.json");
  expect_load_error(c.archive.bytes(), {kName, "no stored data for tensor constant 'scale'"});
}

TEST(Pt2Malformed, BadJson) {
  Mutant m("const_and_buffer");
  m.archive.at("models/model.json") = "{\"graph_module\": {";
  expect_load_error(m.archive.bytes(), {kName, "models/model.json", "invalid JSON"});
  Mutant w("const_and_buffer");
  w.archive.at("data/weights/model_weights_config.json") = "[1, 2";
  expect_load_error(w.archive.bytes(),
                    {kName, "data/weights/model_weights_config.json", "invalid JSON"});
}

TEST(Pt2Malformed, MissingAndIllTypedFields) {
  Mutant m("const_and_buffer");
  m.graph().erase("nodes");
  expect_load_error(m.bytes(),
                    {"bad.pt2: models/model.json: graph_module.graph", "missing field 'nodes'"});

  Mutant t("const_and_buffer");
  t.node("mean")["inputs"] = 5;
  expect_load_error(t.bytes(), {"graph_module.graph.nodes[3] (mean).inputs", "wrong JSON type",
                                "expected an array, got integer"});

  Mutant d("const_and_buffer");
  d.node("mean")["inputs"][1]["arg"] = {{"as_ints", "zero"}};
  expect_load_error(d.bytes(), {"nodes[3] (mean).inputs[1].arg.as_ints", "expected an array"});

  Mutant u("const_and_buffer");
  u.node("mean")["inputs"][1]["arg"] = {{"as_ints", {0}}, {"as_int", 0}};
  expect_load_error(u.bytes(), {"nodes[3] (mean).inputs[1].arg", "malformed union"});

  Mutant k("const_and_buffer");
  k.node("mean")["inputs"][1]["arg"] = {{"as_operator", "aten.add.Tensor"}};
  expect_load_error(k.bytes(),
                    {"nodes[3] (mean).inputs[1].arg", "unsupported argument kind", "as_operator"});
  // a subgraph argument (torch.cond / while_loop) without its graph
  Mutant g("const_and_buffer");
  g.node("mean")["inputs"][1]["arg"] = {{"as_graph", {{"name", "g"}}}};
  expect_load_error(g.bytes(), {"inputs[1].arg.as_graph", "missing field 'graph'"});

  Mutant w("const_and_buffer");
  w.weights["config"]["l.bias"].erase("tensor_meta");
  expect_load_error(w.bytes(), {"data/weights/model_weights_config.json", "config.l.bias",
                                "payload has no tensor_meta"});

  Mutant s("const_and_buffer");
  s.weights["config"]["l.bias"]["tensor_meta"]["sizes"] = {{{"as_int", "8"}}};
  expect_load_error(s.bytes(),
                    {"config.l.bias.tensor_meta.sizes[0].as_int", "expected an integer"});
}

TEST(Pt2Malformed, DtypesAndVersions) {
  Mutant m("const_and_buffer");
  m.graph()["tensor_values"]["x"]["dtype"] = 99;
  expect_load_error(m.bytes(), {"models/model.json: graph_module.graph.tensor_values.x.dtype",
                                "unknown dtype code", "99"});

  // float8 codes (29-32) are dtypes anvil stores and casts (docs/usage.md): they load; a weight
  // whose recorded dtype disagrees with the graph's is refused naming both
  Mutant f8("const_and_buffer");
  f8.graph()["tensor_values"]["mean"]["dtype"] = 29;
  EXPECT_NO_THROW(frontend::load_pt2_bytes(f8.bytes(), kName));

  Mutant wf8("const_and_buffer");
  wf8.weights["config"]["running"]["tensor_meta"]["dtype"] = 30;
  expect_load_error(wf8.bytes(), {"data/weights/model_weights_config.json",
                                  "config.running.tensor_meta", "expected f32[8], got f8e5m2[8]"});

  Mutant v("const_and_buffer");
  v.model["schema_version"]["major"] = 9;
  expect_load_error(v.bytes(), {"models/model.json: schema_version", "schema version too new",
                                "schema 8.x", "got 9.17 (written by PyTorch 2.11"});
  Mutant old("const_and_buffer");
  old.model["schema_version"]["major"] = 3;
  expect_load_error(old.bytes(), {"schema version too old", "schema 8.x", "got 3.17"});

  Mutant p("const_and_buffer");
  p.weights["config"]["l.weight"]["use_pickle"] = true;
  expect_load_error(p.bytes(), {"config.l.weight", "pickled payloads are not supported"});

  Mutant mismatch("const_and_buffer");
  mismatch.weights["config"]["running"]["tensor_meta"]["dtype"] = 5;
  expect_load_error(
      mismatch.bytes(),
      {"config.running.tensor_meta", "does not match graph input 'b_running'", "f32[8]", "i64[8]"});

  Mutant big("const_and_buffer");
  big.archive.at("byteorder") = "big";
  expect_load_error(big.bytes(), {"bad.pt2: byteorder", "unsupported byte order"});
}

TEST(Pt2Malformed, UnsupportedOpsAreListedTogether) {
  Mutant m("const_and_buffer");
  m.node("mul")["target"] = "torch.ops.aten.foo.default";
  m.node("mean")["target"] = "torch.ops.aten.bar.default";
  m.node("sub")["target"] = "torch.ops.aten.foo.default";
  expect_load_error(m.bytes(), {"bad.pt2: models/model.json: graph_module.graph.nodes",
                                "unsupported ops: aten.foo.default ×2, aten.bar.default ×1",
                                "3 nodes with unsupported targets"});
}

// Legacy c10d_functional collectives (torch.export 2.11 still records them) import as the native
// ops with a group name the registry resolves at run time; a (tag, ranks, group_size) group whose
// size disagrees with its ranks, or one without ranks, is an error naming the node.
TEST(Pt2Malformed, LegacyCollectiveGroups) {
  {
    Mutant m("coll/coll_legacy_ns");
    const auto g = frontend::load_pt2_bytes(m.bytes(), kName);
    bool seen = false;
    for (const ir::Node* n : g->nodes()) {
      if (n->name != "all_reduce") continue;
      seen = true;
      EXPECT_EQ(n->target, "_c10d_functional.all_reduce.default");
      ASSERT_NE(n->arg("group_name"), nullptr);
      EXPECT_EQ(n->arg("group_name")->s, "legacy/2/0,1/");
      EXPECT_NE(n->arg("input"), nullptr);
      EXPECT_EQ(n->arg("reduce_op")->s, "sum");
      EXPECT_EQ(n->arg("tag"), nullptr);
    }
    EXPECT_TRUE(seen);
  }
  Mutant m("coll/coll_legacy_ns");
  for (json& in : m.node("all_reduce")["inputs"])
    if (in["name"] == "group_size") in["arg"]["as_int"] = 3;
  expect_load_error(m.bytes(), {"(all_reduce)", "group_size does not match the number of ranks",
                                "expected 2, got 3"});
  Mutant n("coll/coll_legacy_ns");
  json& inputs = n.node("all_reduce")["inputs"];
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]["name"] == "ranks") inputs.erase(i--);
  expect_load_error(n.bytes(), {"(all_reduce)", "without its (tag, ranks, group_size) group"});
}

TEST(Pt2Malformed, DanglingAndDuplicateNames) {
  Mutant m("const_and_buffer");
  m.node("sub")["inputs"][1]["arg"]["as_tensor"]["name"] = "nope";
  expect_load_error(m.bytes(), {"nodes[7] (sub).inputs[1].arg.as_tensor.name",
                                "reference to an undefined value", "'nope'"});

  // A node reading a value defined only later is also dangling.
  Mutant order("const_and_buffer");
  order.node("linear")["inputs"][0]["arg"]["as_tensor"]["name"] = "clone";
  expect_load_error(order.bytes(), {"nodes[0] (linear)", "undefined value", "'clone'"});

  Mutant dup("const_and_buffer");
  dup.node("mean")["outputs"][0]["as_tensor"]["name"] = "mul";
  expect_load_error(dup.bytes(),
                    {"nodes[3] (mean).outputs[0].as_tensor", "duplicate value name", "mul"});

  Mutant dn("const_and_buffer");
  dn.node("mean")["name"] = "mul";
  expect_load_error(dn.bytes(), {"duplicate node name", "mul"});

  Mutant out("const_and_buffer");
  out.graph()["outputs"][1]["as_tensor"]["name"] = "ghost";
  expect_load_error(out.bytes(), {"graph_module.graph.outputs[1]", "undefined value", "'ghost'"});

  Mutant tv("const_and_buffer");
  tv.graph()["tensor_values"].erase("mean");
  expect_load_error(tv.bytes(), {"nodes[3] (mean).outputs[0].as_tensor",
                                 "no graph.tensor_values entry", "'mean'"});

  Mutant kind("const_and_buffer");
  kind.node("mean")["inputs"][1]["arg"] = {{"as_sym_int", {{"as_name", "x"}}}};
  expect_load_error(kind.bytes(), {"wrong kind", "a SymInt", "a tensor 'x'"});
}

TEST(Pt2Malformed, SignatureMismatches) {
  Mutant m("const_and_buffer");
  m.sig()["input_specs"].erase(0);
  expect_load_error(m.bytes(), {"graph_module.signature.input_specs",
                                "signature does not match the graph inputs"});

  Mutant n("const_and_buffer");
  n.sig()["input_specs"][2]["buffer"]["arg"]["name"] = "b_steps";
  expect_load_error(n.bytes(), {"graph_module.graph.inputs[2]", "does not match its input spec",
                                "'b_steps'", "'b_running'"});

  Mutant o("const_and_buffer");
  o.sig()["output_specs"][0]["user_output"]["arg"]["as_tensor"]["name"] = "clone";
  expect_load_error(o.bytes(), {"graph_module.graph.outputs[0]", "does not match its output spec"});

  Mutant k("const_and_buffer");
  k.sig()["input_specs"][5] = {{"custom_obj", {{"arg", {{"name", "x"}}}}}};
  expect_load_error(k.bytes(), {"input_specs[5]", "unsupported input kind", "custom_obj"});

  Mutant miss("const_and_buffer");
  miss.weights["config"].erase("l.bias");
  expect_load_error(miss.bytes(), {"data/weights/model_weights_config.json",
                                   "no stored data for parameter 'l.bias'"});
}

TEST(Pt2Malformed, WeightFilesMustCoverTheirLayout) {
  Mutant m("const_and_buffer");
  m.archive.at("data/weights/weight_0").resize(200);  // 8x8 f32 needs 256 bytes
  expect_load_error(m.bytes(), {"bad.pt2: data/weights/weight_0", "payload file too short",
                                "256 bytes", "200 bytes"});

  // storage_offset counts: 2x2 with strides (1, 2) at offset 6 reaches element 9 of 8.
  Mutant off("const_and_buffer");
  json& meta = off.constants["config"]["scale"]["tensor_meta"];
  meta["sizes"] = {{{"as_int", 2}}, {{"as_int", 2}}};
  meta["strides"] = {{{"as_int", 1}}, {{"as_int", 2}}};
  meta["storage_offset"] = {{"as_int", 6}};
  off.graph()["tensor_values"]["c_scale"]["sizes"] = meta["sizes"];
  off.graph()["tensor_values"]["c_scale"]["strides"] = meta["strides"];
  expect_load_error(off.bytes(),
                    {"bad.pt2: data/constants/tensor_0", "too short", "40 bytes", "32 bytes"});

  Mutant neg("const_and_buffer");
  neg.weights["config"]["l.bias"]["tensor_meta"]["strides"] = {{{"as_int", -1}}};
  expect_load_error(neg.bytes(), {"config.l.bias.tensor_meta.strides[0]", "negative stride"});

  Mutant huge("const_and_buffer");
  json& hm = huge.weights["config"]["l.bias"]["tensor_meta"];
  hm["strides"] = {{{"as_int", int64_t{1} << 62}}};
  expect_load_error(huge.bytes(), {"config.l.bias.tensor_meta", "tensor layout overflows"});
}

TEST(Pt2Malformed, StridedConstantViewsItsStorage) {
  // The same view at offset 2 fits, and reads storage elements 2 + i + 2j.
  Mutant m("const_and_buffer");
  json& meta = m.constants["config"]["scale"]["tensor_meta"];
  meta["sizes"] = {{{"as_int", 2}}, {{"as_int", 2}}};
  meta["strides"] = {{{"as_int", 1}}, {{"as_int", 2}}};
  meta["storage_offset"] = {{"as_int", 2}};
  m.graph()["tensor_values"]["c_scale"]["sizes"] = meta["sizes"];
  m.graph()["tensor_values"]["c_scale"]["strides"] = meta["strides"];
  auto g = frontend::load_pt2_bytes(m.bytes(), kName);
  const Tensor& t = g->constants.at("scale");
  EXPECT_EQ(t.type_str(), "f32[2, 2]");
  EXPECT_EQ(t.storage_offset(), 2);
  EXPECT_EQ(t.strides(), (Shape{1, 2}));
  std::vector<double> v = t.to_doubles();
  ASSERT_EQ(v.size(), 4u);
  EXPECT_FLOAT_EQ(v[0], 0.7857142686843872f);  // storage[2]
  EXPECT_FLOAT_EQ(v[1], 1.0714285373687744f);  // storage[4]
  EXPECT_FLOAT_EQ(v[2], 0.9285714626312256f);  // storage[3]
  EXPECT_FLOAT_EQ(v[3], 1.2142857313156128f);  // storage[5]
}

TEST(Pt2Malformed, SymbolicExpressionsAndRanges) {
  Mutant m("mlp_dynbatch");
  json& size0 = m.graph()["tensor_values"]["x"]["sizes"][0];
  size0["as_expr"]["expr_str"] = "Mul(Integer(2), Symbol('s77'";
  expect_load_error(
      m.bytes(), {"tensor_values.x.sizes[0].as_expr.expr_str", "cannot parse symbolic expression"});

  Mutant p("mlp_dynbatch");
  p.graph()["tensor_values"]["x"]["sizes"][0]["as_expr"]["expr_str"] =
      "Pow(Symbol('s77', positive=True), Integer(1000000000))";
  expect_load_error(p.bytes(), {"cannot parse symbolic expression: exponent too large"});

  Mutant o("mlp_dynbatch");
  o.graph()["tensor_values"]["x"]["sizes"][0]["as_expr"]["expr_str"] =
      "Mul(Integer(4000000000), Integer(4000000000), Symbol('s77'))";
  expect_load_error(o.bytes(), {"constant too large"});

  Mutant deep("mlp_dynbatch");
  deep.graph()["tensor_values"]["x"]["sizes"][0]["as_expr"]["expr_str"] =
      std::string(500, '(') + "s77" + std::string(500, ')');
  expect_load_error(deep.bytes(), {"nested too deeply"});

  // Unbounded maxima (null, or past 2^62) read as infinite; an empty range is an error.
  Mutant r("mlp_dynbatch");
  r.model["range_constraints"]["s77"]["max_val"] = nullptr;
  r.model["range_constraints"]["s9"] = {{"min_val", 2}, {"max_val", uint64_t{1} << 63}};
  auto g = frontend::load_pt2_bytes(r.bytes(), kName);
  EXPECT_EQ(g->symbol_ranges.at("s77"), (SymRange{1, SymRange::kSymMax}));
  EXPECT_EQ(g->symbol_ranges.at("s9"), (SymRange{2, SymRange::kSymMax}));

  Mutant e("mlp_dynbatch");
  e.model["range_constraints"]["s77"]["min_val"] = 100;
  expect_load_error(e.bytes(), {"range_constraints.s77", "empty symbol range"});
}

TEST(Pt2Malformed, CorruptedStoredEntryFailsItsCrc) {
  test::Archive a = test::Archive::from_fixture("const_and_buffer");
  ZipWriter w;
  uint64_t offset = 0;
  for (const auto& [name, data] : a.entries) {
    uint64_t o = w.add(name, data);
    if (name == "const_and_buffer/data/weights/weight_1") offset = o;
  }
  std::string bytes = w.take_bytes();
  bytes[offset + 5] ^= 0x55;
  expect_load_error(bytes, {"bad.pt2: const_and_buffer/data/weights/weight_1", "corrupt"});
}

}  // namespace
}  // namespace anvil
