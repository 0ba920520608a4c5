// Integration: small graphs written in the text IR cover the lowering rules (pointwise with
// broadcasting, reductions, softmax / layer_norm / RMSNorm, views and non-contiguous layouts,
// cat / stack, GEMMs in every layout, int64 / bool / bf16 / f64, creation ops, in-place buffer
// updates, zero-size tensors, NaN / inf, symbolic sizes). All are compiled into one library and
// compared with the interpreter (fp32 1e-4, bf16 2e-2, integers exactly).
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace anvil {
namespace {

struct Case {
  const char* name;
  const char* text;
};

#include "codegen/graph_cases.inc"
// clang-format on

/// Input shapes for a case (symbolic dims get `s0`).
std::vector<Tensor> make_inputs(const ir::Graph& g, int64_t s0, uint64_t seed) {
  std::vector<Tensor> ins;
  for (const auto& spec : g.input_specs()) {
    if (spec.kind != ir::InputKind::kUserInput) continue;
    Shape sizes;
    for (const auto& s : spec.value->type.sizes)
      sizes.push_back(s.is_constant() ? s.constant() : s0);
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
  }
  return ins;
}

class GraphCodegen : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::pair<std::string, const ir::Graph*>> list;
    uint64_t seed = 100;
    for (const Case& c : kCases) {
      auto g = ir::parse_graph(c.text);
      ir::verify(*g);
      for (const auto& spec : g->input_specs())
        if (spec.kind != ir::InputKind::kUserInput) {
          Shape sizes;
          for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
          g->constants[spec.target] = testing::random_tensor(sizes, spec.value->type.dtype, seed++);
        }
      list.emplace_back(c.name, g.get());
      graphs_[c.name] = std::move(g);
    }
    codegen::CpuCodegenOptions o;
    o.num_translation_units = 1;
    o.parallel_min_work = 16;  // exercise chunked outer loops
    lib_ = testing::build_library(list, o);
  }
  static void TearDownTestSuite() {
    lib_.reset();
    graphs_.clear();
  }

  /// Runs `name` `runs` times on the same inputs and compares every output with the interpreter.
  void check(const std::string& name, std::vector<Tensor> ins = {}, int runs = 1) {
    const ir::Graph& g = *graphs_.at(name);
    if (ins.empty()) ins = make_inputs(g, 1, 7);
    interp::Interpreter ref(g);
    auto& model = lib_->model(name);
    for (int r = 0; r < runs; ++r) {
      const auto want = ref.run(ins);
      const auto got = model.run(ins);
      ASSERT_EQ(got.size(), want.size()) << name;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].sizes(), want[i].sizes()) << name << " output " << i;
        ASSERT_EQ(got[i].dtype(), want[i].dtype()) << name << " output " << i;
        const bool exact = !is_floating(want[i].dtype()) && !is_complex(want[i].dtype());
        // bf16 graphs compute in f32 without rounding every intermediate: bf16 tolerance for all
        const bool low = want[i].dtype() == DType::kBFloat16 || name == "bf16";
        const double tol = exact ? 0.0 : low ? 2e-2 : 1e-4;
        EXPECT_LE(testing::rel_error(got[i], want[i]), tol)
            << name << " run " << r << " output " << i;
      }
    }
  }

  static std::map<std::string, std::unique_ptr<ir::Graph>> graphs_;
  static std::unique_ptr<testing::TestLibrary> lib_;
};

std::map<std::string, std::unique_ptr<ir::Graph>> GraphCodegen::graphs_;
std::unique_ptr<testing::TestLibrary> GraphCodegen::lib_;

TEST_F(GraphCodegen, BroadcastChain) { check("broadcast_chain"); }
TEST_F(GraphCodegen, UnaryMath) { check("unary_math"); }
TEST_F(GraphCodegen, Reductions) { check("reductions"); }
TEST(SplitReductions, OnlyLongRowsAreSplitAndTheOptionTurnsItOff) {
  auto text_of = [](const char* name, bool split) {
    for (const Case& c : kCases)
      if (std::string(c.name) == name) {
        codegen::CpuCodegenOptions o;
        o.split_reductions = split;
        std::string all;
        for (const auto& src : codegen::generate_cpu(*ir::parse_graph(c.text), o).sources)
          all += src.text;
        return all;
      }
    return std::string();
  };
  EXPECT_NE(text_of("split_reductions", true).find("(split reduction)"), std::string::npos);
  EXPECT_EQ(text_of("split_reductions", false).find("(split reduction)"), std::string::npos);
  EXPECT_EQ(text_of("reductions", true).find("(split reduction)"), std::string::npos);
}

// Rows of 300 000 and 600 000 elements: reductions split over the pool (checks NaN-free sums,
// max / min, means of a fused product, an int64 total).
TEST_F(GraphCodegen, LongRowReductionsSplitOverThePool) { check("split_reductions"); }
TEST_F(GraphCodegen, SoftmaxLayerNormRmsNorm) { check("norms"); }
// A buffer stored twice by one kernel (an affine map, then ReLU in place, twice) and a
// concatenation's slices stored by one kernel (the CUDA target vectorizes both).
TEST_F(GraphCodegen, InPlaceReluAfterAffineAndCatSlices) {
  check("inplace_relu_after_affine_bf16");
  check("cat_slices_bf16");
  check("norm_relu_over_cat_bf16");  // batch_norm + relu_ per concatenated part
}
TEST_F(GraphCodegen, ViewsAndNonContiguousLayouts) { check("views"); }
TEST_F(GraphCodegen, CatAndStack) { check("joins"); }
TEST_F(GraphCodegen, GemmsInEveryLayout) { check("gemms"); }
TEST_F(GraphCodegen, IntsAndBools) { check("ints_and_bools"); }
TEST_F(GraphCodegen, BFloat16) { check("bf16"); }
TEST_F(GraphCodegen, Float64) { check("f64"); }
// 16-bit attention (on the GPU: the tensor-core kernel): causal, boolean and additive masks,
// GQA, a scale, lengths that are not a multiple of the tiles.
TEST_F(GraphCodegen, Attention16Bit) { check("attention_bf16"); }
TEST_F(GraphCodegen, CreationOps) { check("creation"); }
TEST_F(GraphCodegen, BufferUpdatesPersistAcrossRuns) { check("buffer_update", {}, 3); }
TEST_F(GraphCodegen, ZeroSizeTensors) { check("zero_size"); }
TEST_F(GraphCodegen, LongRowsSplitIntoChunks) { check("long_rows"); }
// Complex pointwise math (sub with alpha on a transposed operand, mul, mul by a float, add
// with a float alpha, times a real tensor, abs, c64 + c128 promotion, div, neg, real / imag,
// complex32 rounding) on random complex inputs; outputs complex (both parts compared), real
// views and parts.
TEST_F(GraphCodegen, ComplexPointwise) { check("complex_pointwise"); }

// Inverse trigonometric / hyperbolic functions, expm1 / log1p / log2 / log10, atan2, sign,
// isnan / isinf, xor, the Scalar forms of bitwise and / or, fmod / remainder (float, int,
// bf16), clamp with tensor bounds, div.Scalar_mode, elu and leaky_relu; then again with NaN
// and infinities in x.
TEST_F(GraphCodegen, PointwiseMathMore) {
  const ir::Graph& g = *graphs_.at("pointwise_more");
  check("pointwise_more");
  auto ins = make_inputs(g, 1, 29);
  float* x = ins[0].data<float>();
  x[1] = NAN;
  x[4] = INFINITY;
  x[8] = -INFINITY;
  x[11] = -0.0f;
  ins[4].data<float>()[2] = NAN;  // a NaN lower bound of clamp
  check("pointwise_more", ins);
}

TEST_F(GraphCodegen, NanAndInfPassThrough) {
  const ir::Graph& g = *graphs_.at("broadcast_chain");
  auto ins = make_inputs(g, 1, 3);
  float* x = ins[0].data<float>();
  x[0] = NAN;
  x[5] = INFINITY;
  x[9] = -INFINITY;
  check("broadcast_chain", ins);
  check("unary_math", {[] {
          Tensor t = testing::random_tensor({3, 5}, DType::kFloat32, 11);
          t.data<float>()[2] = NAN;
          t.data<float>()[7] = INFINITY;
          return t;
        }()});
}

// Padding in every mode, roll, flip, rounding, addcmul, clamp_min, in-place forms imported by
// the general rule (silu_, hardtanh_) and a decomposed vector norm, with a symbolic batch.
TEST_F(GraphCodegen, PadRollFlipRoundInPlace) {
  const ir::Graph& g = *graphs_.at("pad_roll_inplace");
  for (int64_t s0 : {1, 3, 16}) check("pad_roll_inplace", make_inputs(g, s0, static_cast<uint64_t>(s0)));
}

// Issue 18's reductions and core ATen forms: any / all, prod, the variance family, logsumexp,
// _log_softmax, native_layer_norm / native_group_norm with their statistics, native_dropout,
// diagonal, select_scatter / slice_scatter, copy and empty_strided (generated code), with a
// symbolic batch.
TEST_F(GraphCodegen, ReductionsMoreAndCoreForms) {
  const ir::Graph& g = *graphs_.at("reductions_more");
  for (int64_t s0 : {1, 5}) check("reductions_more", make_inputs(g, s0, static_cast<uint64_t>(s0)));
}

// The index results and sorting as extern calls: argmin, max.dim / min.dim (amax + argmax),
// cumprod, sort, topk, argsort, masked_scatter and _adaptive_avg_pool2d.
TEST_F(GraphCodegen, ReductionsWithIndicesAndSorting) {
  const ir::Graph& g = *graphs_.at("reductions_extern");
  check("reductions_extern", make_inputs(g, 1, 3));
}

// Pooling with indices, 3-D pooling, grid sampling, im2col / col2im and distances as extern
// steps: their tensor arguments and attributes reach the kernels as docs/externs.md says.
TEST_F(GraphCodegen, PoolingSamplingDistancesAsExternCalls) {
  check("pool_sample_dist_extern");
}

TEST_F(GraphCodegen, SymbolicSizesEveryValue) {
  const ir::Graph& g = *graphs_.at("dynamic");
  for (int64_t s0 : {1, 2, 5, 16}) check("dynamic", make_inputs(g, s0, static_cast<uint64_t>(s0)));
}

}  // namespace
}  // namespace anvil
