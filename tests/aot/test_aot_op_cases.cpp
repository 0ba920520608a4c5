// The op surface of issue 18, end to end against PyTorch 2.11 (fixtures of
// scripts/export_op_cases.py): each export is compiled into a package, run on every stored
// shape set and compared with PyTorch eager's outputs; the reference interpreter must give the
// same values. The exports carry in-place forms (silu_, hardswish_, hardsigmoid_, dropout_,
// fill_.Tensor, clamp_, masked_fill_, relu6_, add_ / mul_ / sub_, imported as the functional op
// plus copy_, ir/inplace.h), pad in every mode, roll, flip, linalg_vector_norm (decomposed),
// addcmul / addcdiv, reshape_as, numpy_T, max / min of two tensors, round, clamp_min and a
// torch.no_grad() region over a dynamic size (wrap_with_set_grad_enabled, inlined); conv1d,
// group_norm, _weight_norm, sdpa's output layout under a later view, and the Core ATen pointwise
// ops (inverse trigonometric / hyperbolic functions, fmod, remainder, xor, elu, ...), pooling
// with indices and 3-D pooling, grid sampling, fold / unfold and pairwise distances.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "aot_util.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil::aot_test {
namespace {

TEST(AotOps, InPlaceFormsRunAsFunctionalOpPlusCopy) {
  check_against_pytorch("ops_inplace");
  const auto t = imported_targets("ops_inplace");
  for (const char* gone : {"aten.silu_.default", "aten.hardswish_.default",
                           "aten.dropout_.default", "aten.fill_.Tensor", "aten.add_.Tensor"})
    EXPECT_EQ(t.count(gone), 0u) << gone << " should be imported as its functional op";
  for (const char* f : {"aten.silu.default", "aten.hardswish.default", "aten.hardsigmoid.default",
                        "aten.dropout.default", "aten.fill.Tensor", "aten.clamp.default",
                        "aten.masked_fill.Scalar", "aten.relu6.default", "aten.copy_.default"})
    EXPECT_EQ(t.count(f), 1u) << f;
}

TEST(AotOps, PadInEveryMode) { check_against_pytorch("ops_pad"); }
TEST(AotOps, PadWithDynamicBatch) { check_against_pytorch("ops_pad_dynamic"); }
TEST(AotOps, Roll) { check_against_pytorch("ops_roll"); }
TEST(AotOps, VectorNormsAndNormalize) { check_against_pytorch("ops_norms"); }
TEST(AotOps, AddcmulAddcdiv) { check_against_pytorch("ops_addc"); }
TEST(AotOps, ReshapeAsNumpyTFlipMaxMin) { check_against_pytorch("ops_views"); }

TEST(AotOps, NoGradRegionIsInlined) {
  check_against_pytorch("ops_no_grad");
  const auto t = imported_targets("ops_no_grad");
  EXPECT_EQ(t.count("higher_order.wrap_with_set_grad_enabled"), 0u);
  EXPECT_EQ(t.count("aten.outer.default"), 1u);
}

// wav2vec2's feature-encoder pieces: conv1d, group_norm (with and without affine) and a
// weight-normed conv (aten._weight_norm, folded over the constant weights when compiled).
TEST(AotOps, Conv1dGroupNormWeightNorm) {
  check_against_pytorch("ops_conv_norms");
  const auto t = imported_targets("ops_conv_norms");
  for (const char* op : {"aten.conv1d.default", "aten.group_norm.default", "aten._weight_norm.default"})
    EXPECT_EQ(t.count(op), 1u) << op;
}

// nn.MultiheadAttention (batch_first), as torchvision's ViT runs it: the reference interpreter
// must give sdpa's output PyTorch's CPU layout for the later view to be legal.
TEST(AotOps, AttentionOutputViewedAsPyTorchLaysItOut) { check_against_pytorch("ops_attention_view"); }

// F.interpolate: bilinear to a size, by a scale factor and with align_corners, nearest by a
// factor and to a size (upsample_bilinear2d.vec / upsample_nearest2d.vec).
TEST(AotOps, UpsampleBilinearAndNearest) { check_against_pytorch("ops_upsample"); }

// Reductions of issue 18: any / all, argmin, max.dim / min.dim (values and first indices), prod,
// var / std / var_mean / std_mean, logsumexp, cumprod, sort / argsort (ties: stable order) and
// topk, as users' exports carry them.
TEST(AotOps, ReductionsMore) {
  check_against_pytorch("ops_reductions_more");
  const auto t = imported_targets("ops_reductions_more");
  for (const char* op : {"aten.max.dim", "aten.var_mean.correction", "aten.std_mean.dim",
                         "aten.topk.default", "aten.argsort.default", "aten.any.dims"})
    EXPECT_EQ(t.count(op), 1u) << op;
}

// Core ATen forms (native_layer_norm / native_group_norm with their statistics, _log_softmax,
// native_dropout, _adaptive_avg_pool2d, var.correction) and diagonal, select_scatter,
// slice_scatter, copy, masked_scatter and empty_strided.
TEST(AotOps, CoreAtenForms) { check_against_pytorch("ops_core_forms"); }

// Core ATen pointwise ops over NaN, infinities and -0.0: acos ... log10, atan2, sign, isnan /
// isinf, logical / bitwise xor, the Scalar forms of bitwise and / or (also as __and__ / __or__ /
// __xor__), fmod / remainder of floats, integers and bfloat16, clamp.Tensor, div.Scalar_mode,
// elu and leaky_relu.
TEST(AotOps, PointwiseMathMore) {
  check_against_pytorch("ops_pointwise_more");
  const auto t = imported_targets("ops_pointwise_more");
  for (const char* op :
       {"aten.acos.default",       "aten.acosh.default",      "aten.asin.default",
        "aten.asinh.default",      "aten.atan.default",       "aten.atanh.default",
        "aten.tan.default",        "aten.sinh.default",       "aten.cosh.default",
        "aten.expm1.default",      "aten.log1p.default",      "aten.log2.default",
        "aten.log10.default",      "aten.atan2.default",      "aten.sign.default",
        "aten.isinf.default",      "aten.isnan.default",      "aten.logical_xor.default",
        "aten.bitwise_xor.Tensor", "aten.bitwise_xor.Scalar", "aten.bitwise_and.Scalar",
        "aten.bitwise_or.Scalar",  "aten.__xor__.Tensor",     "aten.__xor__.Scalar",
        "aten.__and__.Scalar",     "aten.__or__.Scalar",      "aten.fmod.Scalar",
        "aten.fmod.Tensor",        "aten.remainder.Scalar",   "aten.remainder.Tensor",
        "aten.clamp.Tensor",       "aten.div.Scalar_mode",    "aten.elu.default",
        "aten.leaky_relu.default"})
    EXPECT_EQ(t.count(op), 1u) << op;
}

// Pooling with indices and 3-D pooling, grid sampling and sliding blocks (scripts/
// export_op_cases.py PoolSample): max_pool2d_with_indices (a NaN, equal maxima, a channels-last
// input), max_pool3d(_with_indices), avg_pool3d, adaptive_avg_pool3d / _adaptive_avg_pool3d,
// F.grid_sample in all 18 interpolation x padding x align_corners forms (grid_sampler) and
// grid_sampler_2d, F.unfold (im2col) and F.fold (col2im); all extern calls.
TEST(AotOps, PoolingWithIndicesPool3dGridSampleFoldUnfold) {
  check_against_pytorch("ops_pool_sample");
  const auto t = imported_targets("ops_pool_sample");
  for (const char* op :
       {"aten.max_pool2d_with_indices.default", "aten.max_pool3d.default",
        "aten.max_pool3d_with_indices.default", "aten.avg_pool3d.default",
        "aten.adaptive_avg_pool3d.default", "aten._adaptive_avg_pool3d.default",
        "aten.grid_sampler.default", "aten.grid_sampler_2d.default", "aten.im2col.default",
        "aten.col2im.default"})
    EXPECT_EQ(t.count(op), 1u) << op;
}

// The same externs under a dynamic batch (two shape sets): their sizes are read at run time.
TEST(AotOps, PoolingSamplingDistancesWithDynamicBatch) {
  check_against_pytorch("ops_pool_sample_dynamic");
}

// Pairwise distances (PoolSample's sibling Dist): torch.cdist for p = 0, 1, 2, inf, 3.5 with
// broadcast batch dims and a zero distance, each compute_mode, F.pdist, and the Core ATen forms
// _cdist_forward / _pdist_forward.
TEST(AotOps, CdistPdist) {
  check_against_pytorch("ops_dist");
  const auto t = imported_targets("ops_dist");
  for (const char* op : {"aten.cdist.default", "aten._cdist_forward.default",
                         "aten.pdist.default", "aten._pdist_forward.default"})
    EXPECT_EQ(t.count(op), 1u) << op;
}

// The same externs on inputs large enough that the runtime kernels split their planes / rows
// over the thread pool (core/for_range.h): every chunking must give the interpreter's serial
// values (indices exactly).
TEST(AotOps, PoolingSamplingDistancesSplitOverThreads) {
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[4, 8, 32, 32] = user_input
    %v: f32[4, 8, 8, 16, 16] = user_input
    %im: f32[2, 3, 16, 16] = user_input
    %g: f32[2, 32, 32, 2] = user_input
    %cols: f32[4, 64, 225] = user_input
    %a: f32[2, 64, 16] = user_input
    %b: f32[2, 48, 16] = user_input
    %c: f32[100, 8] = user_input
  }
  [%mv: f32[4, 8, 17, 17], %mi: i64[4, 8, 17, 17]] = aten.max_pool2d_with_indices.default(self=%x, kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceil_mode=True)
  [%m3: f32[4, 8, 5, 9, 9], %i3: i64[4, 8, 5, 9, 9]] = aten.max_pool3d_with_indices.default(self=%v, kernel_size=[2, 2, 2], stride=[2, 2, 2], padding=[1, 1, 1])
  %a3: f32[4, 8, 5, 9, 9] = aten.avg_pool3d.default(self=%v, kernel_size=[3, 3, 3], stride=[2, 2, 2], padding=[1, 1, 1], ceil_mode=True, count_include_pad=False)
  %d3: f32[4, 8, 3, 5, 7] = aten._adaptive_avg_pool3d.default(self=%v, output_size=[3, 5, 7])
  %gs: f32[2, 3, 32, 32] = aten.grid_sampler_2d.default(input=%im, grid=%g, interpolation_mode=2, padding_mode=2, align_corners=False)
  %gb: f32[2, 3, 32, 32] = aten.grid_sampler.default(input=%im, grid=%g, interpolation_mode=0, padding_mode=0, align_corners=True)
  %uf: f32[2, 27, 64] = aten.im2col.default(self=%im, kernel_size=[3, 3], dilation=[1, 1], padding=[1, 1], stride=[2, 2])
  %fo: f32[4, 16, 16, 16] = aten.col2im.default(self=%cols, output_size=[16, 16], kernel_size=[2, 2], dilation=[1, 1], padding=[0, 0], stride=[1, 1])
  %cd: f32[2, 64, 48] = aten._cdist_forward.default(x1=%a, x2=%b, p=2.0, compute_mode=None)
  %c1: f32[2, 64, 48] = aten.cdist.default(x1=%a, x2=%b, p=1.0)
  %pd: f32[4950] = aten._pdist_forward.default(self=%c, p=2.0)
  outputs {
    user_output %mv
    user_output %mi
    user_output %m3
    user_output %i3
    user_output %a3
    user_output %d3
    user_output %gs
    user_output %gb
    user_output %uf
    user_output %fo
    user_output %cd
    user_output %c1
    user_output %pd
  }
})");
  const Built& b = build_graph("pool_sample_dist_large", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  std::vector<Tensor> ins;
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& spec : g->input_specs()) {
    Shape sizes;
    for (const SymInt& s : spec.value->type.sizes) sizes.push_back(s.constant());
    std::vector<float> v(static_cast<size_t>(shape_numel(sizes)));
    for (float& e : v) e = normal(rng);
    ins.push_back(Tensor::from_vector(v, sizes));
  }
  interp::Interpreter ref(*g);
  expect_outputs(model.run(ins), ref.run(ins), "pool_sample_dist_large");
}

// The gradient ops of training steps (convolution_backward in 1-D / 2-D / grouped / transposed
// forms with output_mask, the pooling gradients, embedding_dense_backward, the layer / group norm
// gradients), decomposed by the compiler into convolutions, matmuls, scatter_add, index_put and
// reductions.
TEST(AotOps, BackwardOps) {
  check_against_pytorch("ops_backward");
  const auto t = imported_targets("ops_backward");
  for (const char* op :
       {"aten.convolution_backward.default", "aten.avg_pool2d_backward.default",
        "aten._adaptive_avg_pool2d_backward.default",
        "aten.max_pool2d_with_indices_backward.default", "aten.embedding_dense_backward.default",
        "aten.native_layer_norm_backward.default", "aten.native_group_norm_backward.default"})
    EXPECT_EQ(t.count(op), 1u) << op;
}

// BatchNorm2d in train(): batch statistics and the running statistics updated in place (read
// back after the call), and the Core ATen training forms _native_batch_norm_legit (.default,
// .no_stats) and _native_batch_norm_legit_functional.
TEST(AotOps, BatchNormInTraining) {
  check_against_pytorch("ops_batchnorm_train");
  const auto t = imported_targets("ops_batchnorm_train");
  for (const char* op : {"aten.batch_norm.default", "aten._native_batch_norm_legit.default",
                         "aten._native_batch_norm_legit.no_stats",
                         "aten._native_batch_norm_legit_functional.default"})
    EXPECT_EQ(t.count(op), 1u) << op;
}

// randperm (anvil's own generator: checked through sort and a permutation-invariant sum),
// _embedding_bag's four outputs, and _fft_r2c / _fft_c2r.
TEST(AotOps, RandpermEmbeddingBagAndFftForms) {
  check_against_pytorch("ops_train_misc");
  const auto t = imported_targets("ops_train_misc");
  for (const char* op : {"aten.randperm.default", "aten._embedding_bag.default",
                         "aten._fft_r2c.default", "aten._fft_c2r.default"})
    EXPECT_EQ(t.count(op), 1u) << op;
}

// A value a reduction reads lazily and an extern later needs in a buffer (x.bfloat16() read by
// sum and by argmax): the reduction must still see the value, not the buffer whose store comes
// after it (the sum was garbage before the reduction captured its input by value).
TEST(AotOps, ReductionOfAValueRealizedLaterForAnExtern) {
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[4, 6] = user_input
  }
  %b: bf16[4, 6] = aten._to_copy.default(self=%x, *dtype=bf16)
  %s: bf16[4] = aten.sum.dim_IntList(self=%b, dim=[1])
  %a: i64[4] = aten.argmax.default(self=%b, dim=1)
  %f: f32[4] = aten._to_copy.default(self=%s, *dtype=f32)
  outputs {
    user_output %f
    user_output %a
  }
})");
  const Built& b = build_graph("reduce_then_realize", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  std::vector<double> xv;
  for (int i = 0; i < 24; ++i) xv.push_back(0.37 * i - 4.1 + (i % 5) * 0.91);
  const Tensor x = Tensor::from_vector(xv, {4, 6}).to(DType::kFloat32, true);
  const auto got = model.run({x});
  interp::Interpreter ref(*g);
  expect_outputs(got, ref.run({x}), "reduce_then_realize");
}

}  // namespace
}  // namespace anvil::aot_test
