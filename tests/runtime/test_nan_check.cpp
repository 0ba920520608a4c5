// The NaN / Inf check's scan (runtime/nan_check.h) on hand-made run memory, and the manifest's
// "checks" entries it reads: every floating and complex dtype, the element's index in the
// buffer's sizes, symbolic sizes and offsets, and checks that a damaged manifest points outside
// the run's memory (refused, nothing read). The end-to-end check of compiled packages is
// tests/aot/test_aot_nan_check.cpp (spec/aot.md case 84).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/check.h"
#include "core/error.h"
#include "runtime/nan_check.h"
#include "runtime/package.h"

namespace anvil::runtime {
namespace {

/// A one-buffer kernel spec: buffer `name` in `memory`, `numel` elements of `dtype`.
KernelSpec kernel_with(BufferCheck::Memory memory, DType dtype, SymInt numel,
                       std::vector<SymInt> sizes, SymInt offset = SymInt(0)) {
  KernelSpec k;
  k.name = "k3";
  k.kind = "loop";
  k.nodes = "mul, exp";
  BufferCheck c;
  c.buffer = "buf7";
  c.nodes = "exp";
  c.memory = memory;
  c.dtype = dtype;
  c.numel = numel;
  c.sizes = std::move(sizes);
  c.offset = offset;
  k.checks.push_back(c);
  return k;
}

std::string scan_error(const KernelSpec& k, const RunMemory& m) {
  try {
    check_step_finite(k, 3, m, "run");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NanCheck, EveryFloatingAndComplexDtypeIsScanned) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (const double bad : {inf, -inf, nan}) {
      std::vector<double> v(24, 1.5);
      v[17] = bad;  // [1, 1, 1] of (2, 3, 4)
      const Tensor t = Tensor::from_vector(v, {24}).to(dt, true);
      RunMemory m;
      m.outputs.push_back({t.data_ptr(), t.nbytes()});
      const KernelSpec k = kernel_with(BufferCheck::Memory::kOutput, dt, SymInt(24),
                                       {SymInt(2), SymInt(3), SymInt(4)});
      const std::string e = scan_error(k, m);
      const std::string text = std::isnan(bad) ? "nan" : bad > 0 ? "inf" : "-inf";
      EXPECT_NE(e.find(str("step 3 'k3' (loop, nodes mul, exp) wrote ", text,
                           " into buffer 'buf7' (output 0, ", dtype_name(dt),
                           "[2, 3, 4], holding exp) at element 17 [1, 1, 1]")),
                std::string::npos)
          << e;
      EXPECT_NE(e.find(str("got ", text, ")")), std::string::npos) << e;
      v[17] = 2.0;  // finite: nothing to report
      const Tensor ok = Tensor::from_vector(v, {24}).to(dt, true);
      m.outputs[0] = {ok.data_ptr(), ok.nbytes()};
      EXPECT_EQ(scan_error(k, m), "") << dtype_name(dt);
    }
  }
  // complex64: the imaginary part of element 2
  std::vector<float> c(8, 0.5f);
  c[5] = std::numeric_limits<float>::infinity();
  RunMemory m;
  m.constants.push_back({c.data(), c.size() * sizeof(float)});
  const KernelSpec k =
      kernel_with(BufferCheck::Memory::kConstant, DType::kComplex64, SymInt(4), {SymInt(4)});
  const std::string e = scan_error(k, m);
  EXPECT_NE(e.find("wrote inf (imaginary part) into buffer 'buf7' (constant 0, c64[4]"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("at element 2 [2]"), std::string::npos) << e;
  // integers are never scanned
  std::vector<int32_t> ints(4, -1);
  m.constants[0] = {ints.data(), 16};
  EXPECT_EQ(
      scan_error(kernel_with(BufferCheck::Memory::kConstant, DType::kInt32, SymInt(4), {SymInt(4)}),
                 m),
      "");
}

// An arena buffer at a symbolic offset with symbolic sizes, evaluated at the run's symbols.
TEST(NanCheck, ArenaBuffersAtSymbolicOffsets) {
  std::vector<float> arena(64, 0.0f);
  const SymInt s = SymInt::symbol("s0");
  arena[8 + 2 * 3 + 1] = std::numeric_limits<float>::quiet_NaN();  // offset 8 floats, [2, 1]
  RunMemory m;
  m.arena = {arena.data(), arena.size() * sizeof(float)};
  m.env["s0"] = 4;
  const KernelSpec k = kernel_with(BufferCheck::Memory::kArena, DType::kFloat32, s * SymInt(3),
                                   {s, SymInt(3)}, s * SymInt(8));  // 32 bytes at s0 = 4
  const std::string e = scan_error(k, m);
  EXPECT_NE(e.find("into buffer 'buf7' (arena, f32[4, 3], holding exp) at element 7 [2, 1]"),
            std::string::npos)
      << e;
  m.env["s0"] = 1;  // the NaN lies outside the buffer at this size
  EXPECT_EQ(scan_error(k, m), "");
}

// A damaged manifest cannot make the scan read outside the run's memory.
TEST(NanCheck, ChecksOutsideTheRunsMemoryAreRefused) {
  std::vector<float> arena(16, 1.0f), out(4, 1.0f);
  RunMemory m;
  m.arena = {arena.data(), 64};
  m.outputs.push_back({out.data(), 16});
  const SymInt n(4);
  ANVIL_EXPECT_ERROR(check_step_finite(kernel_with(BufferCheck::Memory::kArena, DType::kFloat32, n,
                                                   {n}, SymInt(60)),
                                       3, m, "run"),
                     "reaches outside the run's arena memory");
  ANVIL_EXPECT_ERROR(check_step_finite(kernel_with(BufferCheck::Memory::kArena, DType::kFloat32, n,
                                                   {n}, SymInt(-8)),
                                       3, m, "run"),
                     "negative offset");
  ANVIL_EXPECT_ERROR(
      check_step_finite(kernel_with(BufferCheck::Memory::kOutput, DType::kFloat64, n, {n}), 3, m,
                        "run"),
      "reaches outside the run's output memory");
  ANVIL_EXPECT_ERROR(check_step_finite(kernel_with(BufferCheck::Memory::kOutput, DType::kFloat32,
                                                   SymInt(INT64_MAX), {n}),
                                       3, m, "run"),
                     "bad element count");
  ANVIL_EXPECT_ERROR(
      check_step_finite(kernel_with(BufferCheck::Memory::kOutput, DType::kFloat32, SymInt(-4), {n}),
                        3, m, "run"),
      "bad element count");
  KernelSpec k = kernel_with(BufferCheck::Memory::kOutput, DType::kFloat32, n, {n});
  k.checks[0].index = 1;
  ANVIL_EXPECT_ERROR(check_step_finite(k, 3, m, "run"), "names an unknown output slot");
  ANVIL_EXPECT_ERROR(check_step_finite(kernel_with(BufferCheck::Memory::kArena, DType::kFloat32, n,
                                                   {n}, SymInt::symbol("u9")),
                                       3, m, "run"),
                     "u9");
}

TEST(NanCheck, ManifestChecksParseAndBadOnesAreRefused) {
  const std::string head = R"({"format_version": 1, "abi_version": 3, "target": "cpu",
      "symbols": [{"name": "s0", "min": 1, "max": 8}],
      "kernels": [{"name": "k0", "kind": "loop", "nodes": ["a"], "bytes": 8, "checks": [)";
  const Manifest m = Manifest::parse(
      head + R"({"buffer": "buf1", "nodes": ["a", "b"], "memory": "arena", "offset": "64*s0",
                 "numel": "2*s0", "sizes": ["s0", 2], "dtype": "bf16"},
                {"buffer": "out0", "memory": "output", "index": 0, "numel": 4, "dtype": "f32"}]}]})",
      "p.anvil");
  ASSERT_EQ(m.kernels.size(), 1u);
  ASSERT_EQ(m.kernels[0].checks.size(), 2u);
  const BufferCheck& c = m.kernels[0].checks[0];
  EXPECT_EQ(c.buffer, "buf1");
  EXPECT_EQ(c.nodes, "a, b");
  EXPECT_EQ(c.memory, BufferCheck::Memory::kArena);
  EXPECT_EQ(c.offset.evaluate({{"s0", 3}}), 192);
  EXPECT_EQ(c.numel.evaluate({{"s0", 3}}), 6);
  EXPECT_EQ(c.sizes.size(), 2u);
  EXPECT_EQ(c.dtype, DType::kBFloat16);
  EXPECT_EQ(m.kernels[0].checks[1].memory, BufferCheck::Memory::kOutput);
  auto bad = [&](const std::string& check) {
    try {
      Manifest::parse(head + check + "]}]}", "p.anvil");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string e =
      bad(R"({"buffer": "b", "memory": "disk", "index": 0, "numel": 4, "dtype": "f32"})");
  EXPECT_NE(e.find("kernels[0].checks[0].memory"), std::string::npos) << e;
  EXPECT_NE(e.find("input, output, constant or arena"), std::string::npos) << e;
  e = bad(R"({"buffer": "b", "memory": "arena", "numel": 4, "dtype": "f32"})");
  EXPECT_NE(e.find("kernels[0].checks[0].offset"), std::string::npos) << e;
  e = bad(R"({"buffer": "b", "memory": "output", "index": 0, "numel": "4 +", "dtype": "f32"})");
  EXPECT_NE(e.find("kernels[0].checks[0].numel"), std::string::npos) << e;
  e = bad(R"({"buffer": "b", "memory": "output", "index": 0, "numel": 4, "dtype": "f99"})");
  EXPECT_NE(e.find("kernels[0].checks[0].dtype"), std::string::npos) << e;
}

}  // namespace
}  // namespace anvil::runtime
