// float8 on the CUDA target (spec/aot.md case 88's fp8 parts, F14's fp8 pass-through; label
// gpu): fixtures exported on fake CUDA tensors by tests/fixtures/gen/export_fp8.py, compiled for
// cuda-sm90 and compared with PyTorch's outputs, and at other sizes of their dynamic dims with
// the reference interpreter running the same models recorded on the CPU.
//   C88_Fp8ScaledMm          torch._scaled_mm (x e4m3fn (m, 16) by weight.T cast to e4m3fn in
//                            the graph, fp16 bias, tensor-wise scales -> fp16) on cuBLASLt's
//                            FP8 GEMM; on a GPU without FP8 tensor cores a clear error instead
//   C88_Fp8InputsSummedAsF32 four fp8 inputs (the four formats) cast to f32 and summed
//   C88_Fp8PassThroughAndCasts identity outputs of the four formats and the cast table (NaN,
//                            inf, out of range, subnormals) bit for bit
#include <gtest/gtest.h>

#include "codegen/harness.h"
#include "common/fp8_fixture.h"
#include "frontend/pt2_reader.h"
#include "gpu/gpu_test_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"

namespace anvil {
namespace {

using namespace gpu_test;  // NOLINT: the suite's helpers

runtime::Model load_cuda(const std::string& name) {
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  return runtime::Model::load(compile_cuda(fixture("aot/" + name + ".pt2")), mo);
}

std::vector<Tensor> fixture_inputs(const runtime::Model& m, const std::string& name) {
  const auto raw = read_set(fixture("aot/" + name), "in");
  std::vector<Tensor> out;
  for (size_t i = 0; i < raw.size(); ++i)
    out.push_back(test::fixture_as(raw[i], m.input_specs().at(i).dtype));
  return out;
}

std::vector<Tensor> run_on_gpu(const runtime::Model& m, const std::vector<Tensor>& host) {
  std::vector<Tensor> dev;
  for (const Tensor& t : host) dev.push_back(t.to(Device::cuda(0)));
  std::vector<Tensor> out;
  for (const Tensor& t : m.run(dev)) out.push_back(t.to(Device::cpu()));
  return out;
}

/// The package of `name` (recorded on CUDA) against PyTorch's outputs in the fixture; float8
/// output `nan_free_output` matches any NaN code for a NaN.
void check_fixture(const std::string& name, double tol, int nan_free_output = -1) {
  const runtime::Model m = load_cuda(name);
  const auto got = run_on_gpu(m, fixture_inputs(m, name));
  const auto want = read_set(fixture("aot/" + name), "out");
  ASSERT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < got.size(); ++i)
    test::expect_fixture_output(got[i], want[i], name + " output " + std::to_string(i), tol,
                                static_cast<int>(i) != nan_free_output);
}

/// The package of `name` against the interpreter running `cpu_name` (the same model recorded on
/// the CPU) on `inputs`.
void check_against_interpreter(const runtime::Model& m, const std::string& cpu_name,
                               const std::vector<Tensor>& inputs, double tol,
                               const std::string& label) {
  auto g = frontend::load_pt2(fixture("aot/" + cpu_name + ".pt2"));
  interp::Interpreter ref(*g);
  const auto want = ref.run(inputs);
  const auto got = run_on_gpu(m, inputs);
  ASSERT_EQ(got.size(), want.size()) << label;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].sizes(), want[i].sizes()) << label;
    EXPECT_LE(testing::rel_error(got[i], want[i]), tol) << label << " output " << i;
  }
}

/// Random values of float8 `dtype` (float32 normals scaled by `scale`, rounded as PyTorch does).
Tensor random_fp8(const Shape& sizes, DType dtype, double scale, uint64_t seed) {
  Tensor f = testing::random_tensor(sizes, DType::kFloat32, seed);
  float* p = static_cast<float*>(f.data_ptr());
  for (int64_t i = 0; i < f.numel(); ++i) p[i] = static_cast<float>(p[i] * scale);
  return f.to(dtype);
}

TEST(CudaSpecAot, C88_Fp8ScaledMm) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& dev = runtime::device_backend(Device::Type::kCUDA);
  ASSERT_GE(dev.abi_version, 6u);
  const int cc = dev.capability(0);
  const runtime::Model m = load_cuda("aot_88_fp8_scaled_mm_cuda");
  const auto ins = fixture_inputs(m, "aot_88_fp8_scaled_mm_cuda");
  ASSERT_EQ(ins.size(), 5u);
  ASSERT_EQ(ins[0].dtype(), DType::kFloat8E4M3FN);
  if (cc < 89) {  // no FP8 tensor cores: a clear error naming the op and the SM, at the first run
    try {
      run_on_gpu(m, ins);
      FAIL() << "aten._scaled_mm ran on sm_" << cc;
    } catch (const Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("aten._scaled_mm"), std::string::npos) << w;
      EXPECT_NE(w.find("sm_" + std::to_string(cc)), std::string::npos) << w;
    }
    GTEST_SKIP() << "sm_" << cc << " has no FP8 tensor cores: the refusal was checked";
  }
  // (16, 16) x (16, 32) -> fp16, as PyTorch computes it (the fixture's float64 reference)
  check_fixture("aot_88_fp8_scaled_mm_cuda", 2e-2);
  // dim 0 of x is dynamic in [1, 2048]: other sizes against the interpreter
  for (const int64_t rows : {1, 33, 2048}) {
    std::vector<Tensor> in2 = ins;
    in2[0] = random_fp8({rows, 16}, DType::kFloat8E4M3FN, 2.0, 40 + static_cast<uint64_t>(rows));
    check_against_interpreter(m, "aot_88_fp8_scaled_mm", in2, 2e-2,
                              "scaled_mm rows " + std::to_string(rows));
  }
}

TEST(CudaSpecAot, C88_Fp8InputsSummedAsF32) {
  ANVIL_REQUIRE_GPU();
  check_fixture("aot_88_fp8_sum_cuda", 1e-6);
  const runtime::Model m = load_cuda("aot_88_fp8_sum_cuda");
  const DType formats[4] = {DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kFloat8E4M3FNUZ,
                            DType::kFloat8E5M2FNUZ};
  for (const int64_t s0 : {2, 1024}) {  // the dynamic dim's bounds
    std::vector<Tensor> ins;
    for (int i = 0; i < 4; ++i)
      ins.push_back(random_fp8({s0, 8, 8}, formats[i], 4.0, 90 + static_cast<uint64_t>(i)));
    check_against_interpreter(m, "aot_88_fp8_sum", ins, 1e-6, "sum s0 " + std::to_string(s0));
  }
}

TEST(CudaSpecAot, C88_Fp8PassThroughAndCasts) {
  ANVIL_REQUIRE_GPU();
  check_fixture("aot_88_fp8_identity_cuda", 0.0);  // the four formats pass through
  // the device conversions, bit for bit (output 8, bf16 -> e4m3fn: anvil's bfloat16 NaN is
  // c10's canonical +NaN where torch's vectorized CPU cast keeps -NaN's sign)
  check_fixture("aot_88_fp8_casts_cuda", 0.0, 8);
}

TEST(CudaFp8, ScaledMmRowwiseE5m2F32Out) {
  ANVIL_REQUIRE_GPU();
  // row-wise scales (64, 1) x (1, 48) (cuBLASLt's OUTER_VEC_32F scale mode), e4m3fn x e5m2, a
  // float32 result with a bfloat16 bias, use_fast_accum; mat2 made column-major by a copy
  // (CudaFp8Emit.RowwiseScalesE5m2AndF32Out compiles the same graph without a GPU)
  const auto g = ir::parse_graph(R"(graph {
  inputs {
    %a: f32[64, 32] = user_input
    %b: f32[32, 48] = user_input
    %sa: f32[64, 1] = user_input
    %sb: f32[1, 48] = user_input
    %bias: bf16[48] = user_input
  }
  %a8: f8e4m3fn[64, 32] = aten._to_copy.default(self=%a, *dtype=f8e4m3fn)
  %b8: f8e5m2[32, 48] = aten._to_copy.default(self=%b, *dtype=f8e5m2)
  %c: f32[64, 48] = aten._scaled_mm.default(self=%a8, mat2=%b8, scale_a=%sa, scale_b=%sb, bias=%bias, out_dtype=f32, use_fast_accum=True)
  outputs {
    user_output %c
  }
})");
  if (runtime::device_backend(Device::Type::kCUDA).capability(0) < 89)
    GTEST_SKIP() << "no FP8 tensor cores (C88_Fp8ScaledMm checks the refusal)";
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  const std::string pkg = (out_dir() / "fp8_rowwise.anvil").string();
  driver::compile_graph(*g, pkg, o);
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const runtime::Model m = runtime::Model::load(pkg, mo);
  std::vector<Tensor> ins;
  uint64_t seed = 21;
  for (const auto& spec : g->input_specs()) {
    Shape sizes;
    for (const auto& sz : spec.value->type.sizes) sizes.push_back(sz.constant());
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
  }
  interp::Interpreter ref(*g);
  const auto want = ref.run(ins);
  const auto got = run_on_gpu(m, ins);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].dtype(), DType::kFloat32);
  EXPECT_LE(testing::rel_error(got[0], want[0]), 1e-3);
}

}  // namespace
}  // namespace anvil
