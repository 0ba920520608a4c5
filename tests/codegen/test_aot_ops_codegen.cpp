// End to end for the ops the PyTorch 2.11 AOT fixtures added (transposed convolution, scatter,
// scatter_reduce, index_put with a mask, embedding_bag, repeat_interleave, detach_ /
// lift_fresh_copy, item + _assert_scalar): each fixture is compiled to a package with the real
// toolchain, loaded with runtime::Model (whose extern kernels in src/runtime/kernels run these
// ops) and compared with PyTorch's outputs and the interpreter within 1e-4. Also: the manifest
// lists the extern targets (the generated code calls them, it does not walk a graph), bad indices
// fail the run with a clear error, and data-dependent scalars (aten.item) are rejected by the
// compiler while the interpreter runs them and reports a failing _assert_scalar.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "codegen/generate.h"
#include "codegen/toolchain.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "harness.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ops/op_test_util.h"
#include "runtime/externs.h"
#include "runtime/model.h"
#include "runtime/package.h"

namespace anvil {
namespace {

std::string fixture(const std::string& name) {
  return std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name;
}

std::vector<Tensor> read_set(const std::string& name, const char* kind) {
  std::vector<Tensor> out;
  for (int k = 0; std::filesystem::exists(fixture(name + "." + kind + std::to_string(k) + ".npy"));
       ++k)
    out.push_back(read_npy(fixture(name + "." + kind + std::to_string(k) + ".npy")));
  return out;
}

/// A compiled fixture: the loaded model and the code generator's manifest.
struct Compiled {
  runtime::Model model;
  std::string manifest_json;
};

/// Compiles fixture `name` into a package under a temporary folder and loads it.
Compiled compile_fixture(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("anvil_aot_ops_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::create_directories(dir);
  auto g = frontend::load_pt2(fixture(name + ".pt2"));
  codegen::CpuCodegenOptions o;
  o.num_translation_units = 1;
  const auto gen = codegen::generate_cpu(*g, o);
  std::vector<codegen::SourceFile> sources;
  for (const auto& s : gen.sources) sources.push_back({s.filename, s.text});
  codegen::ToolchainOptions to;
  to.target = o.target;
  to.extra_flags = gen.compile_flags;
  to.progress = codegen::ProgressMode::kQuiet;
  to.opt_level = "-O1";  // small graphs: keep the test fast
  to.include_dir = std::string(ANVIL_SOURCE_DIR) + "/include";
  const auto built = codegen::build_shared_library(sources, (dir / "model.so").string(), to);
  runtime::PackageContents pc;
  pc.manifest_json = gen.manifest_json;
  pc.model_so_path = built.so_path;
  for (const auto& c : gen.constants) pc.constants.push_back(c.tensor);
  for (const auto& s : gen.sources) pc.sources.emplace_back(s.filename, s.text);
  const std::string pkg = (dir / (name + ".anvil")).string();
  runtime::write_package(pkg, pc);
  Compiled c{runtime::Model::load(pkg), gen.manifest_json};
  std::filesystem::remove_all(dir);
  return c;
}

/// A fixture and the extern target its generated code must call.
struct Case {
  const char* name;
  const char* extern_target;  // null: no extern expected
};

class AotOpsCodegen : public ::testing::TestWithParam<Case> {};

TEST_P(AotOpsCodegen, MatchesPyTorchAndInterpreter) {
  const Case c = GetParam();
  Compiled compiled = compile_fixture(c.name);
  if (c.extern_target) {
    EXPECT_NE(compiled.manifest_json.find(std::string("\"") + c.extern_target + "\""),
              std::string::npos)
        << c.name << ": manifest lacks extern " << c.extern_target;
  }
  const auto ins = read_set(c.name, "in");
  const auto want = read_set(c.name, "out");
  ASSERT_FALSE(want.empty()) << c.name;
  auto graph = frontend::load_pt2(fixture(std::string(c.name) + ".pt2"));
  interp::Interpreter ref(*graph);
  const auto interp = ref.run(ins);
  for (int run = 0; run < 2; ++run) {  // a second run reuses the runner's buffers
    const auto got = compiled.model.run(ins);
    ASSERT_EQ(got.size(), want.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].sizes(), want[i].sizes()) << c.name << " output " << i;
      EXPECT_LE(testing::rel_error(got[i], want[i]), 1e-4) << c.name << " output " << i;
      EXPECT_LE(testing::rel_error(got[i], interp[i]), 1e-4) << c.name << " output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, AotOpsCodegen,
    ::testing::Values(Case{"aot_35_convt_g1", "aten.conv_transpose2d.input"},
                      Case{"aot_35_convt_g2", "aten.conv_transpose2d.input"},
                      Case{"aot_36_convt1d_s4", "aten.conv_transpose1d.default"},
                      Case{"aot_39_scatter", "aten.scatter.src"},
                      Case{"aot_40_scatter_reduce", "aten.scatter_reduce.two"},
                      Case{"aot_41_index_put_mask", "aten.index_put.default"},
                      Case{"aot_43_embedding_bag", "aten.embedding_bag.padding_idx"},
                      Case{"aot_48_mlp_embbag", "aten.embedding_bag.padding_idx"},
                      Case{"aot_45_repeat_interleave", "aten.repeat_interleave.Tensor"},
                      Case{"aot_20_shape_scalar", nullptr}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(AotOpsCodegenErrors, OutOfRangeScatterIndexFailsTheRun) {
  Compiled compiled = compile_fixture("aot_39_scatter");
  auto ins = read_set("aot_39_scatter", "in");
  ASSERT_EQ(ins.size(), 2u);
  Tensor bad = ins[1].clone();
  static_cast<int64_t*>(bad.data_ptr())[0] = 7;  // self is [2, 5]: dim 1 has 5 entries
  try {
    compiled.model.run({ins[0], bad});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of bounds"), std::string::npos) << e.what();
  }
  // The model still works afterwards.
  const auto got = compiled.model.run(ins);
  EXPECT_LE(testing::rel_error(got.at(0), read_set("aot_39_scatter", "out").at(0)), 0.0);
}

// The interpreter's side of case 63 (the compiled side, with its run-time symbol steps, is in
// tests/aot: AotCheck.C63_ItemAssertion).
TEST(AotOpsCodegenErrors, ItemAndItsAssertionsInTheInterpreter) {
  auto graph = frontend::load_pt2(fixture("aot_63_item_check.pt2"));
  interp::Interpreter ref(*graph);
  const auto ins = read_set("aot_63_item_check", "in");
  const auto got = ref.run(ins);
  EXPECT_LE(testing::rel_error(got.at(0), read_set("aot_63_item_check", "out").at(0)), 1e-4);
  // u0 = 3 breaks "u0 >= 4": a clear runtime error naming the assertion.
  try {
    ref.run({Tensor::scalar(3, DType::kInt64)});
    ADD_FAILURE() << "expected the assertion to fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("u0 >= 4"), std::string::npos) << e.what();
  }
}

TEST(AotOpsCodegenErrors, RepeatInterleaveWithoutOutputSize) {
  // Without output_size the length is data-dependent: the compiler refuses with a clear error,
  // the interpreter runs it.
  auto graph = ir::parse_graph(R"(graph {
  inputs {
    %r: i64[3] = user_input
  }
  %y: i64[u_y] = aten.repeat_interleave.Tensor(repeats=%r)
  outputs {
    user_output %y
  }
})");
  try {
    codegen::generate_cpu(*graph, codegen::CpuCodegenOptions{});
    ADD_FAILURE() << "expected the compiler to reject the data-dependent size";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data-dependent"), std::string::npos) << e.what();
  }
  interp::Interpreter ref(*graph);
  const auto got = ref.run({testing::i64({3}, {1, 0, 2})});
  EXPECT_TRUE(testing::matches(got.at(0), DType::kInt64, {3}, {0, 2, 2}));
}

// ---- the runtime's extern kernels called directly, against the reference kernels ------------

/// One extern call built by hand: tensor inputs (a None entry gives a "none" descriptor), named
/// attributes, and outputs allocated with the reference kernel's sizes.
class DirectExtern {
 public:
  explicit DirectExtern(std::string target) : target_(std::move(target)) {}
  DirectExtern& input(const std::optional<Tensor>& t) {
    if (t) {
      inputs_.push_back(runtime::rt_from_tensor(*t));
      keep_.push_back(*t);
    } else {
      AnvilRtTensor none{};
      none.ndim = -1;
      inputs_.push_back(none);
    }
    return *this;
  }
  DirectExtern& attr(const char* name, int64_t v) {
    attrs_.push_back(AnvilRtScalar{name, 0, v, 0.0, nullptr, nullptr, 0});
    return *this;
  }
  DirectExtern& attr(const char* name, double v) {
    attrs_.push_back(AnvilRtScalar{name, 1, 0, v, nullptr, nullptr, 0});
    return *this;
  }
  DirectExtern& attr(const char* name, const char* v) {
    attrs_.push_back(AnvilRtScalar{name, 2, 0, 0.0, v, nullptr, 0});
    return *this;
  }
  DirectExtern& attr(const char* name, const std::vector<int64_t>& v) {
    lists_.push_back(std::make_unique<std::vector<int64_t>>(v));
    attrs_.push_back(AnvilRtScalar{name, 3, 0, 0.0, nullptr, lists_.back()->data(),
                                   static_cast<int32_t>(v.size())});
    return *this;
  }
  /// Runs the extern with outputs shaped like `like`; returns them. Throws Error on failure.
  std::vector<Tensor> run(const std::vector<Tensor>& like) {
    runtime::ExternFn fn = runtime::find_extern(target_);
    if (!fn) throw Error("no extern kernel for " + target_, "DirectExtern");
    std::vector<Tensor> outs;
    std::vector<AnvilRtTensor> descs;
    for (const Tensor& l : like) {
      outs.push_back(Tensor::full(l.sizes(), -7, l.dtype()));  // garbage the kernel overwrites
      descs.push_back(runtime::rt_from_tensor(outs.back()));
    }
    runtime::ExternCall call(target_.c_str(), inputs_.data(), static_cast<int32_t>(inputs_.size()),
                             attrs_.data(), static_cast<int32_t>(attrs_.size()), descs.data(),
                             static_cast<int32_t>(descs.size()));
    if (fn(call) != 0) throw Error(call.error(), target_);
    return outs;
  }

 private:
  std::string target_;
  std::vector<AnvilRtTensor> inputs_;
  std::vector<Tensor> keep_;
  std::vector<AnvilRtScalar> attrs_;
  std::vector<std::unique_ptr<std::vector<int64_t>>> lists_;
};

/// A non-contiguous view with the values of `t`.
Tensor strided(const Tensor& t) { return t.transpose(-1, -2).contiguous().transpose(-1, -2); }

TEST(AotOpsExterns, ConvolutionTransposedWithGroups) {
  const Tensor x = testing::random_tensor({2, 4, 3, 5}, DType::kFloat32, 1);
  const Tensor w = testing::random_tensor({4, 3, 2, 3}, DType::kFloat32, 2);
  const Tensor b = testing::random_tensor({6}, DType::kFloat32, 3);
  const Tensor want = testing::OpRunner("aten.conv_transpose2d.input")
                          .tensor("input", x)
                          .tensor("weight", w)
                          .tensor("bias", b)
                          .ints("stride", {2, 1})
                          .ints("padding", {1, 0})
                          .ints("output_padding", {1, 0})
                          .scalar("groups", 2)
                          .ints("dilation", {1, 2})
                          .run1();
  const auto got = DirectExtern("aten.convolution.default")
                       .input(strided(x))
                       .input(w)
                       .input(b)
                       .attr("stride", std::vector<int64_t>{2, 1})
                       .attr("padding", std::vector<int64_t>{1, 0})
                       .attr("dilation", std::vector<int64_t>{1, 2})
                       .attr("transposed", int64_t{1})
                       .attr("output_padding", std::vector<int64_t>{1, 0})
                       .attr("groups", int64_t{2})
                       .run({want});
  EXPECT_LE(testing::rel_error(got[0], want), 1e-5);
}

// The convolution extern (im2col into packed panels: the one-row fast paths at stride 1 and 2,
// with AVX-512 rows where the CPU has them, and the per-pixel path) against the reference kernel
// over 60 random geometries: widths around the 16-pixel panel, padding 0-2, stride 1-3,
// dilation 1-2, groups 1-2.
TEST(AotOpsExterns, ConvolutionRandomGeometriesMatchTheReference) {
  uint64_t seed = 12345;
  auto next = [&](int64_t lo, int64_t hi) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + static_cast<int64_t>((seed >> 33) % static_cast<uint64_t>(hi - lo + 1));
  };
  for (int it = 0; it < 60; ++it) {
    const int64_t groups = next(1, 2), cin = groups * next(1, 3), cout = groups * next(1, 4);
    const int64_t kh = next(1, 3), kw = next(1, 3), sh = next(1, 3), sw = next(1, 3);
    const int64_t ph = next(0, 2), pw = next(0, 2), dh = next(1, 2), dw = next(1, 2);
    const int64_t h = next(kh * dh, 20), w = next(std::max<int64_t>(kw * dw, 10), 40);
    const Tensor x = testing::random_tensor({next(1, 2), cin, h, w}, DType::kFloat32, 10 + it);
    const Tensor wt = testing::random_tensor({cout, cin / groups, kh, kw}, DType::kFloat32, 200 + it);
    const Tensor b = testing::random_tensor({cout}, DType::kFloat32, 400 + it);
    const Tensor want = testing::OpRunner("aten.conv2d.default")
                            .tensor("input", x)
                            .tensor("weight", wt)
                            .tensor("bias", b)
                            .ints("stride", {sh, sw})
                            .ints("padding", {ph, pw})
                            .ints("dilation", {dh, dw})
                            .scalar("groups", groups)
                            .run1();
    const auto got = DirectExtern("aten.convolution.default")
                         .input(x)
                         .input(wt)
                         .input(b)
                         .attr("stride", std::vector<int64_t>{sh, sw})
                         .attr("padding", std::vector<int64_t>{ph, pw})
                         .attr("dilation", std::vector<int64_t>{dh, dw})
                         .attr("transposed", int64_t{0})
                         .attr("output_padding", std::vector<int64_t>{0, 0})
                         .attr("groups", groups)
                         .run({want});
    EXPECT_LE(testing::rel_error(got[0], want), 1e-5)
        << "case " << it << ": x " << shape_str(x.sizes()) << " w " << shape_str(wt.sizes())
        << " stride " << sh << "x" << sw << " pad " << ph << "x" << pw << " dil " << dh << "x"
        << dw << " groups " << groups;
  }
}

TEST(AotOpsExterns, IndexPutNoneEntriesAndScatterValue) {
  const Tensor self = testing::random_tensor({3, 4, 2}, DType::kFloat32, 4);
  const Tensor i1 = testing::i64({2, 1}, {3, -1});
  const Tensor i2 = testing::i32({3}, {0, 1, 0});
  const Tensor vals = testing::random_tensor({3, 2, 3}, DType::kFloat32, 5);
  const Tensor want = testing::OpRunner("aten.index_put.default")
                          .tensor("self", self)
                          .opt_tensors("indices", {std::nullopt, i1, i2})
                          .tensor("values", vals)
                          .scalar("accumulate", true)
                          .run1();
  const auto got = DirectExtern("aten.index_put.default")
                       .input(self)
                       .input(std::nullopt)
                       .input(i1)
                       .input(i2)
                       .input(vals)
                       .attr("indices", int64_t{3})
                       .attr("accumulate", int64_t{1})
                       .run({want});
  EXPECT_LE(testing::rel_error(got[0], want), 0.0);
  // scatter.value with an int attribute for a float self.
  const auto sv = DirectExtern("aten.scatter.value")
                      .input(testing::f32({2, 3}, {1, 1, 1, 1, 1, 1}))
                      .input(testing::i64({2, 1}, {2, 0}))
                      .attr("dim", int64_t{1})
                      .attr("value", int64_t{-2})
                      .run({testing::f32({2, 3}, std::vector<double>(6, 0))});
  EXPECT_TRUE(testing::matches(sv[0], DType::kFloat32, {2, 3}, {1, 1, -2, -2, 1, 1}));
}

TEST(AotOpsExterns, ScatterReduceAndEmbeddingBagMax) {
  const Tensor self = testing::random_tensor({3, 4}, DType::kFloat32, 6);
  const Tensor idx = testing::i64({2, 4}, {0, 2, 2, 1, 0, 0, 1, 2});
  const Tensor src = testing::random_tensor({4, 2}, DType::kFloat32, 7).transpose(0, 1);
  const Tensor want = testing::OpRunner("aten.scatter_reduce.two")
                          .tensor("self", self)
                          .scalar("dim", 0)
                          .tensor("index", idx)
                          .tensor("src", src)
                          .string("reduce", "amin")
                          .scalar("include_self", false)
                          .run1();
  const auto got = DirectExtern("aten.scatter_reduce.two")
                       .input(self)
                       .input(idx)
                       .input(src)
                       .attr("dim", int64_t{0})
                       .attr("reduce", "amin")
                       .attr("include_self", int64_t{0})
                       .run({want});
  EXPECT_LE(testing::rel_error(got[0], want), 0.0);
  // embedding_bag max with padding_idx: all four outputs equal the reference kernel's.
  const Tensor w = testing::random_tensor({7, 3}, DType::kFloat32, 8);
  const Tensor ids = testing::i64({6}, {1, 6, 3, 3, 0, 5});
  const Tensor off = testing::i64({3}, {0, 2, 2});
  std::vector<Tensor> ref;
  for (const auto& v : testing::OpRunner("aten.embedding_bag.padding_idx")
                           .tensor("weight", w)
                           .tensor("indices", ids)
                           .tensor("offsets", off)
                           .scalar("scale_grad_by_freq", false)
                           .scalar("mode", int64_t{2})
                           .scalar("sparse", false)
                           .none("per_sample_weights")
                           .scalar("include_last_offset", false)
                           .scalar("padding_idx", int64_t{3})
                           .run())
    ref.push_back(std::get<Tensor>(v));
  ASSERT_EQ(ref.size(), 4u);
  const auto eb = DirectExtern("aten.embedding_bag.padding_idx")
                      .input(w)
                      .input(ids)
                      .input(off)
                      .input(std::nullopt)
                      .attr("mode", int64_t{2})
                      .attr("include_last_offset", int64_t{0})
                      .attr("padding_idx", int64_t{3})
                      .run(ref);
  for (size_t k = 0; k < 4; ++k) EXPECT_LE(testing::rel_error(eb[k], ref[k]), 0.0) << k;
  // The empty bag [2, 2) is zeros; bag 2 skips the padding rows.
  EXPECT_TRUE(testing::matches(ref[2], DType::kInt64, {3}, {2, 0, 2}));
}

}  // namespace
}  // namespace anvil
