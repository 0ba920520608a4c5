// spec/aot.md section 4, CPU cases 1-58: each compiled into a .anvil package, loaded with
// runtime::Model and compared with PyTorch 2.11's outputs (tests/fixtures/aot), plus the
// case's own point (constants stored once, aliased outputs, strides, buffer persistence,
// dynamic shapes from one package, zero-size tensors). Cases whose ops the compiler or runtime
// does not support yet skip with the reason.
#include <gtest/gtest.h>

#include <set>

#include "aot_util.h"
#include "frontend/pt2_reader.h"

namespace anvil::aot_test {
namespace {

/// Runs every shape set of fixture `name` on `model` and compares with PyTorch.
void check_all_sets(const runtime::Model& model, const std::string& name) {
  int sets = 0;
  for (const std::string suffix : {"", "_0", "_1", "_2"}) {
    const auto ins = read_set(name, "in", suffix);
    const auto want = read_set(name, "out", suffix);
    if (want.empty()) continue;
    ++sets;
    expect_outputs(model.run(inputs_for(model, ins)), want, name + suffix);
  }
  EXPECT_GT(sets, 0) << name << ": no fixture outputs";
}

/// Compiles, loads and compares a fixture whose case needs nothing beyond the values.
#define ANVIL_AOT_VALUES_TEST(TestName, NAME)   \
  TEST(AotCase, TestName) {                     \
    ANVIL_AOT_LOAD(model, NAME);                \
    check_all_sets(model, NAME);                \
  }

/// Distinct stored constants (by weights.bin offset) and their bytes.
std::pair<size_t, uint64_t> stored_constants(const runtime::Model& m) {
  std::set<std::pair<uint64_t, uint64_t>> at;
  for (const auto& c : m.constant_specs()) at.insert({c.offset, c.nbytes});
  uint64_t bytes = 0;
  for (const auto& [off, n] : at) bytes += n;
  return {at.size(), bytes};
}

// Case 1: identity x(8,4,4).
ANVIL_AOT_VALUES_TEST(C01_Identity, "aot_01_identity")
// Case 2: x + lin(y, W, b) on 10x10.
ANVIL_AOT_VALUES_TEST(C02_AddLinear, "aot_02_add_linear")

// Case 4: sin -> mm -> cos, one output; the intermediates are not returned.
TEST(AotCase, C04_SinMmCos) {
  ANVIL_AOT_LOAD(model, "aot_04_sin_mm_cos");
  EXPECT_EQ(model.output_specs().size(), 1u);
  check_all_sets(model, "aot_04_sin_mm_cos");
}

// Case 5: batched linear a(2,8,16) -> (2,8,6).
ANVIL_AOT_VALUES_TEST(C05_BatchedLinear, "aot_05_batched_linear")

// Case 6: several intermediates; the memory plan reuses buffers and stays correct.
TEST(AotCase, C06_MemoryPlanReuse) {
  ANVIL_AOT_LOAD(model, "aot_06_memplan");
  check_all_sets(model, "aot_06_memplan");
  // Run twice: a reused arena must not leak state from the first run.
  check_all_sets(model, "aot_06_memplan");
}

// Case 7: cat, +1, mm(d, d^T), slice, + 2x on (4,2) inputs.
ANVIL_AOT_VALUES_TEST(C07_CatSlice, "aot_07_cat_slice")

// Case 8: one LayerNorm module applied twice: its parameters are stored once.
TEST(AotCase, C08_SharedModuleStoredOnce) {
  ANVIL_AOT_LOAD(model, "aot_08_shared_module");
  check_all_sets(model, "aot_08_shared_module");
  const auto [count, bytes] = stored_constants(model);
  EXPECT_EQ(count, 2u) << "LayerNorm weight and bias, once each";
  EXPECT_EQ(bytes, 2u * 10u * 4u);
}

// Case 9: one parameter under two names: a single constant in the artifact.
TEST(AotCase, C09_ParamTwoNamesStoredOnce) {
  ANVIL_AOT_LOAD(model, "aot_09_param_two_names");
  check_all_sets(model, "aot_09_param_two_names");
  const auto [count, bytes] = stored_constants(model);
  EXPECT_EQ(count, 1u);
  EXPECT_EQ(bytes, 6u * 4u);
}

// Case 10: no inputs: W * alpha.
TEST(AotCase, C10_NoInputs) {
  ANVIL_AOT_LOAD(model, "aot_10_no_inputs");
  EXPECT_TRUE(model.input_specs().empty());
  expect_outputs(model.run({}), read_set("aot_10_no_inputs", "out", ""), "aot_10_no_inputs");
}

// Case 11: nested modules with root / child parameters and buffers: 4x/3 - 1.
TEST(AotCase, C11_NestedModules) {
  ANVIL_AOT_LOAD(model, "aot_11_nested");
  check_all_sets(model, "aot_11_nested");
  const Tensor x = read_set("aot_11_nested", "in", "")[0];
  const Tensor y = model.run({x})[0];
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_NEAR(y.item_at(i), 4 * x.item_at(i) / 3 - 1, 1e-5);
}

// Case 13: split into width-4 pieces and cat along -2: one data movement at most.
TEST(AotCase, C13_SplitCat) {
  ANVIL_AOT_LOAD(model, "aot_13_split_cat");
  check_all_sets(model, "aot_13_split_cat");
  EXPECT_LE(model_built.stats.loop_kernels, 1) << model_built.program_text;
}

// Case 14: (sigmoid(cat[0]), cat[1]): the second output is an offset view, still correct.
TEST(AotCase, C14_OffsetViewOutput) {
  ANVIL_AOT_LOAD(model, "aot_14_offset_view_out");
  check_all_sets(model, "aot_14_offset_view_out");
  const auto out = model.run(read_set("aot_14_offset_view_out", "in", ""));
  EXPECT_EQ(out[1].strides(), (Shape{10, 1}));
  EXPECT_EQ(out[1].storage_offset(), 100) << "a view of the cat result, as in PyTorch";
}

// Case 15: (y, y, y.view(3,10), y.view(1,3,10)): all correct and one storage.
TEST(AotCase, C15_SameOutputTwice) {
  ANVIL_AOT_LOAD(model, "aot_15_same_output");
  check_all_sets(model, "aot_15_same_output");
  const auto out = model.run(read_set("aot_15_same_output", "in", ""));
  ASSERT_EQ(out.size(), 4u);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(out[i].data_ptr(), out[0].data_ptr()) << "output " << i;
    EXPECT_EQ(out[i].storage(), out[0].storage()) << "output " << i;
  }
}

// Case 16: (sq, sq.contiguous(), sq.reshape(shape), sq * x): outputs 0-2 share one data
// address, output 3 has its own.
TEST(AotCase, C16_AliasedOutputs) {
  ANVIL_AOT_LOAD(model, "aot_16_alias_outputs");
  check_all_sets(model, "aot_16_alias_outputs");
  const auto out = model.run(read_set("aot_16_alias_outputs", "in", ""));
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[1].data_ptr(), out[0].data_ptr());
  EXPECT_EQ(out[2].data_ptr(), out[0].data_ptr());
  EXPECT_NE(out[3].data_ptr(), out[0].data_ptr());
  EXPECT_NE(out[3].storage(), out[0].storage());
}

// Case 17: fp16 (sq.t(), sq.t().contiguous()): output 0 has strides (1,4); two addresses.
TEST(AotCase, C17_Fp16TransposedOutput) {
  ANVIL_AOT_LOAD(model, "aot_17_fp16_transpose_out");
  EXPECT_EQ(model.input_specs()[0].dtype, DType::kFloat16);
  check_all_sets(model, "aot_17_fp16_transpose_out");
  const auto out = model.run(inputs_for(model, read_set("aot_17_fp16_transpose_out", "in", "")));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dtype(), DType::kFloat16);
  EXPECT_EQ(out[0].strides(), (Shape{1, 4}));
  EXPECT_EQ(out[1].strides(), (Shape{3, 1}));
  EXPECT_NE(out[0].data_ptr(), out[1].data_ptr());
}

// Case 18: (x + 0, C.clone(), C.t()) with C a 5x5 constant: mutating the returned tensors must
// not change C on the next run.
TEST(AotCase, C18_ConstantOutputsNotCorruptible) {
  ANVIL_AOT_LOAD(model, "aot_18_const_clone_t");
  const auto ins = read_set("aot_18_const_clone_t", "in", "");
  const auto want = read_set("aot_18_const_clone_t", "out", "");
  auto out = model.run(ins);
  expect_outputs(out, want, "run 1");
  for (auto& t : out) t.fill(12345.0);
  expect_outputs(model.run(ins), want, "run 2 after writing into run 1's outputs");
}

// Case 19: constant views with offsets: base = R[0]; x + lin(y, base[:10]) + base[5:].
ANVIL_AOT_VALUES_TEST(C19_ConstantViews, "aot_19_const_views")
// Case 20: a scalar built from a shape inside forward.
ANVIL_AOT_VALUES_TEST(C20_ShapeScalar, "aot_20_shape_scalar")

// Case 21: SE block with a zero-width hidden layer: output = inp * 0.5.
TEST(AotCase, C21_ZeroWidthHidden) {
  ANVIL_AOT_LOAD(model, "aot_21_se_zero_width");
  check_all_sets(model, "aot_21_se_zero_width");
  const Tensor x = read_set("aot_21_se_zero_width", "in", "")[0];
  const Tensor y = model.run({x})[0];
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_FLOAT_EQ(y.item_at(i), x.item_at(i) * 0.5);
}

// Case 22: add(a, b, alpha=2) -> a list of one output equal to a + 2b, with the native target
// (auto vector width) and the generic x86_64 target (no vector ISA beyond the baseline).
TEST(AotCase, C22_AddAlpha) {
  ANVIL_AOT_LOAD(model, "aot_22_add_alpha");
  const auto ins = read_set("aot_22_add_alpha", "in", "");
  const auto out = model.run(ins);
  ASSERT_EQ(out.size(), 1u);
  for (int64_t i = 0; i < 10; ++i)
    EXPECT_FLOAT_EQ(out[0].item_at(i), ins[0].item_at(i) + 2 * ins[1].item_at(i));
  check_all_sets(model, "aot_22_add_alpha");
  const auto graph = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) +
                                        "/aot/aot_22_add_alpha.pt2");
  const Built& generic = build_graph("aot_22_generic", *graph, "x86_64");
  ASSERT_TRUE(generic.error.empty()) << generic.error;
  runtime::Model scalar = load(generic);
  EXPECT_EQ(scalar.manifest().target, "cpu-x86_64");
  check_all_sets(scalar, "aot_22_add_alpha");
}

// Case 31: matmul(x, relu(W^T) + b): the weight-only part is folded at compile time.
TEST(AotCase, C31_FoldReluT) {
  ANVIL_AOT_LOAD(model, "aot_31_fold_relu_t");
  check_all_sets(model, "aot_31_fold_relu_t");
  EXPECT_GT(model_built.stats.folded_nodes, 0);
}

// Case 32: cat(x, cat(w1..w4)) -> (20,4); the inner cat is folded.
ANVIL_AOT_VALUES_TEST(C32_FoldCat, "aot_32_fold_cat")
// Case 33: linear 10x10 with bias, fp32 and bf16.
ANVIL_AOT_VALUES_TEST(C33_LinearF32, "aot_33_linear_f32")
ANVIL_AOT_VALUES_TEST(C33_LinearBf16, "aot_33_linear_bf16")
// Case 34: conv2d with groups 1 and 2, fp32 and bf16.
ANVIL_AOT_VALUES_TEST(C34_ConvG1F32, "aot_34_conv_g1_f32")
ANVIL_AOT_VALUES_TEST(C34_ConvG1Bf16, "aot_34_conv_g1_bf16")
ANVIL_AOT_VALUES_TEST(C34_ConvG2F32, "aot_34_conv_g2_f32")
ANVIL_AOT_VALUES_TEST(C34_ConvG2Bf16, "aot_34_conv_g2_bf16")
// Case 35: conv_transpose2d with groups 1 and 2.
ANVIL_AOT_VALUES_TEST(C35_ConvTransposeG1, "aot_35_convt_g1")
ANVIL_AOT_VALUES_TEST(C35_ConvTransposeG2, "aot_35_convt_g2")
// Case 36: conv_transpose1d, stride 4: (2,32,90) -> (2,16,364).
ANVIL_AOT_VALUES_TEST(C36_ConvTranspose1dStride4, "aot_36_convt1d_s4")

// Case 37: buffer foo += 1; return foo + x: run 2 sees foo incremented twice.
TEST(AotCase, C37_BufferPersistsAcrossRuns) {
  ANVIL_AOT_LOAD(model, "aot_37_buffer_persist");
  const Tensor x = read_set("aot_37_buffer_persist", "in", "")[0];
  expect_outputs(model.run({x}), read_set("aot_37_buffer_persist", "out", ""), "run 1");
  const Tensor y = model.run({x})[0];
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_FLOAT_EQ(y.item_at(i), x.item_at(i) + 2);
}

// Case 38: int64 buffers foo = bar = arange(10); bar *= 2; foo[5] = bar[0];
// returns (x + bar, x * foo). Run 2: bar = 4 * arange, foo[5] = 0.
TEST(AotCase, C38_IntBuffersPersist) {
  ANVIL_AOT_LOAD(model, "aot_38_int_buffers");
  const Tensor x = read_set("aot_38_int_buffers", "in", "")[0];
  expect_outputs(model.run({x}), read_set("aot_38_int_buffers", "out", ""), "run 1");
  const auto out = model.run({x});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t i = 0; i < 10; ++i) {
    EXPECT_NEAR(out[0].item_at(i), x.item_at(i) + 4.0 * i, 1e-5) << i;
    EXPECT_NEAR(out[1].item_at(i), x.item_at(i) * (i == 5 ? 0.0 : i), 1e-5) << i;
  }
}

// Case 39: scatter of ones(3,5) int64 into zeros(2,5) along dim 1.
ANVIL_AOT_VALUES_TEST(C39_Scatter, "aot_39_scatter")
// Case 40: scatter_reduce sum -> [5, 22, 105, 1000].
ANVIL_AOT_VALUES_TEST(C40_ScatterReduce, "aot_40_scatter_reduce")
// Case 41: index_put with an all-true mask, accumulate -> [2, 2, 2, 2].
ANVIL_AOT_VALUES_TEST(C41_IndexPutMask, "aot_41_index_put_mask")
// Case 43: embedding_bag sum, offsets [0, 2, 6]: output 0 is (3,4).
ANVIL_AOT_VALUES_TEST(C43_EmbeddingBag, "aot_43_embedding_bag")
// Case 45: repeat_interleave(repeats=[12], output_size=12).
ANVIL_AOT_VALUES_TEST(C45_RepeatInterleave, "aot_45_repeat_interleave")
// Case 48: MLP + EmbeddingBag(mean) -> concat -> MLP -> (16,32).
ANVIL_AOT_VALUES_TEST(C48_MlpEmbeddingBag, "aot_48_mlp_embbag")

// Cases 50 and 51: relu(x + y) with a shared dynamic d0 in [1,2048]: one package serves
// batches 128, 64 and 211.
ANVIL_AOT_VALUES_TEST(C50_C51_DynamicReluAdd, "aot_50_dyn_relu_add")
// Case 52: unsqueeze + cat with a shared d0 at 128, 64 and 211.
ANVIL_AOT_VALUES_TEST(C52_DynamicUnsqueezeCat, "aot_52_dyn_unsqueeze_cat")
// Case 53: batched linear a(B,8,16), B in [1,2048], at B = 128, 2 and 300.
ANVIL_AOT_VALUES_TEST(C53_DynamicBatchedLinear, "aot_53_dyn_batched_linear")
// Case 54: bmm (B,8,16) x (B,16,6) at B = 128, 1024 and 300.
ANVIL_AOT_VALUES_TEST(C54_DynamicBmm, "aot_54_dyn_bmm")
// Case 55: cat of a(d_a,4), b(d_b,4) with independent dims.
ANVIL_AOT_VALUES_TEST(C55_DynamicCatIndependentDims, "aot_55_dyn_cat_indep")
// Case 56: derived dim: x(d,5), y(d+1,5) -> x.sum(0) + y.sum(0), at d = 8, 10 and 100.
ANVIL_AOT_VALUES_TEST(C56_DerivedDim, "aot_56_derived_dim")
// Case 57: two symmetric expand / reshape / bmm branches with d in [1,2048], at d = 2 and 5.
ANVIL_AOT_VALUES_TEST(C57_SharedBranches, "aot_57_shared_branches")

// Case 58: x(n,2) + b(1,2) with n in [0,64]: n = 0 gives an empty (0,2) result, no errors.
TEST(AotCase, C58_ZeroSizeBatch) {
  ANVIL_AOT_LOAD(model, "aot_58_zero_size");
  check_all_sets(model, "aot_58_zero_size");
  const auto ins = read_set("aot_58_zero_size", "in", "_0");
  ASSERT_EQ(ins[0].size(0), 0);
  const auto out = model.run(ins);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), (Shape{0, 2}));
}

}  // namespace
}  // namespace anvil::aot_test
