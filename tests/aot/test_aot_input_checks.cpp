// spec/aot.md section 4, case 76 (F14, the seed's test_runtime_checks): ten inputs of dtypes f16,
// f32, f64, bf16, bool, i8, i16, i32, i64, u8, all (4,8,10), x0-x2 with dim 0 in [2,1024], x3-x5
// dim 1 in [2,512], x6 static, x7-x9 dim 2 in [2,128]; the identity model returns them.
//
// The seed counts the checks in the generated source (10 dtype, 21 static dim, 18 range bound,
// 21 static stride checks). anvil checks inputs in the runtime (src/runtime/model_run.cpp) from
// the manifest's input specs, so the counts are taken from Model::input_specs() and every one of
// those checks is then made to fail once; strides are not refused but copied (runtime/model.h).
#include <gtest/gtest.h>

#include <map>

#include "aot_util.h"

namespace anvil::aot_test {
namespace {

constexpr const char* kFixture = "aot_76_runtime_checks";

/// A tensor of `dtype` and `sizes` with values that differ from element to element (and from
/// input to input through `seed`), in range for the dtype.
Tensor make_input(DType dtype, const Shape& sizes, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(shape_numel(sizes)));
  for (double& e : v) {
    seed = seed * 1103515245u + 12345u;
    const int64_t r = static_cast<int64_t>((seed >> 8) % 200);  // 0..199
    if (dtype == DType::kBool)
      e = r % 2;
    else if (dtype == DType::kUInt8)
      e = static_cast<double>(r);
    else if (is_integral(dtype))
      e = static_cast<double>(r - 100);
    else
      e = static_cast<double>(r - 100) / 8;  // exact in f16 and bf16
  }
  return Tensor::from_vector(v, sizes).to(dtype, true);
}

/// The ten inputs at dynamic sizes s0 (x0-x2 dim 0), s1 (x3-x5 dim 1), s2 (x7-x9 dim 2).
std::vector<Tensor> inputs_at(const runtime::Model& m, int64_t s0, int64_t s1, int64_t s2) {
  std::vector<Tensor> ins;
  for (size_t i = 0; i < 10; ++i) {
    Shape sizes = {4, 8, 10};
    if (i < 3) sizes[0] = s0;
    if (i >= 3 && i < 6) sizes[1] = s1;
    if (i >= 7) sizes[2] = s2;
    ins.push_back(make_input(m.input_specs()[i].dtype, sizes, static_cast<uint32_t>(i + 1)));
  }
  return ins;
}

/// The outputs are the inputs: same dtype, sizes and values.
void expect_identity(const std::vector<Tensor>& got, const std::vector<Tensor>& ins,
                     const std::string& label) {
  ASSERT_EQ(got.size(), ins.size()) << label;
  for (size_t i = 0; i < ins.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), ins[i].dtype()) << label << " output " << i;
    ASSERT_EQ(got[i].sizes(), ins[i].sizes()) << label << " output " << i;
    EXPECT_EQ(got[i].to_doubles(), ins[i].to_doubles()) << label << " output " << i;
  }
}

// The checks the runtime performs, counted from the input specs as the spec counts them: one
// dtype check per input, one check per static dim, a low and a high bound per dynamic dim, one
// check per stride that uses no symbol (strides of a contiguous layout: the product of the
// sizes to the right).
TEST(AotInputChecks, C76_CheckCountsFromTheInputSpecs) {
  ANVIL_AOT_LOAD(model, kFixture);
  const auto& specs = model.input_specs();
  ASSERT_EQ(specs.size(), 10u);
  const std::vector<DType> dtypes = {
      DType::kFloat16, DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kBool,
      DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,    DType::kUInt8};
  int dtype_checks = 0, static_dims = 0, bounds = 0, static_strides = 0;
  std::map<int64_t, int> max_by_bound;
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].dtype, dtypes[i]) << specs[i].name;
    ++dtype_checks;
    ASSERT_EQ(specs[i].sizes.size(), 3u);
    for (size_t d = 0; d < 3; ++d) {
      const SymRange& r = specs[i].ranges[d];
      if (r.min == r.max) {
        ++static_dims;
        continue;
      }
      EXPECT_EQ(r.min, 2) << specs[i].name << " dim " << d;
      bounds += 2;
      ++max_by_bound[r.max];
      const size_t want_dim = i < 3 ? 0 : i < 6 ? 1 : 2;
      EXPECT_EQ(d, want_dim) << specs[i].name;
    }
    // stride d is static when every size after d is
    for (size_t d = 0; d < 3; ++d) {
      bool fixed = true;
      for (size_t k = d + 1; k < 3; ++k) fixed &= specs[i].ranges[k].min == specs[i].ranges[k].max;
      static_strides += fixed;
    }
  }
  EXPECT_EQ(dtype_checks, 10);
  EXPECT_EQ(static_dims, 21);
  EXPECT_EQ(bounds, 18);
  EXPECT_EQ(static_strides, 21);
  EXPECT_EQ(max_by_bound, (std::map<int64_t, int>{{128, 3}, {512, 3}, {1024, 3}}));
  // Shared dims (one Dim object in the export) are one symbol: x1 and x2 use x0's.
  EXPECT_EQ(specs[1].sizes[0], specs[0].sizes[0]);
  EXPECT_EQ(specs[5].sizes[1], specs[3].sizes[1]);
  EXPECT_EQ(specs[9].sizes[2], specs[7].sizes[2]);
}

// Every input at several in-range sizes (the bounds included) passes and comes back equal.
TEST(AotInputChecks, C76_InRangeInputsPassAndComeBackEqual) {
  ANVIL_AOT_LOAD(model, kFixture);
  for (const auto& [s0, s1, s2] : {std::tuple<int64_t, int64_t, int64_t>{4, 8, 10},
                                   {2, 2, 2},
                                   {1024, 512, 128},
                                   {37, 3, 127}}) {
    const auto ins = inputs_at(model, s0, s1, s2);
    expect_identity(model.run(ins), ins, str("sizes ", s0, ", ", s1, ", ", s2));
  }
}

// Each counted check fires: the 10 dtype checks, the 21 static dims, the 18 bounds (a dim that
// binds its symbol gives "too small" / "too large" with the bound; one that shares it with an
// earlier input must equal that input's dim), each with the input, the dim, expected and actual.
// Strides: a strided input of every dtype is copied, not refused, and comes back equal. After all
// the failures the model still runs.
TEST(AotInputChecks, C76_EveryCheckRefusesItsCase) {
  ANVIL_AOT_LOAD(model, kFixture);
  const auto& specs = model.input_specs();
  const auto good = inputs_at(model, 4, 8, 10);
  int refused_dtype = 0, refused_dim = 0, refused_bound = 0;
  for (size_t i = 0; i < 10; ++i) {
    const std::string name = "'" + specs[i].name + "'";
    // dtype: f32 for the f64 input, f64 for the others
    auto ins = good;
    const DType other = specs[i].dtype == DType::kFloat64 ? DType::kFloat32 : DType::kFloat64;
    ins[i] = good[i].to(other, true);
    std::string e = error_of([&] { model.run(ins); });
    EXPECT_TRUE(
        contains(e, name) && contains(e, "unmatched dtype") &&
        contains(e, str("expected ", dtype_name(specs[i].dtype), ", got ", dtype_name(other))))
        << e;
    refused_dtype += !e.empty();
    for (size_t d = 0; d < 3; ++d) {
      const SymRange& r = specs[i].ranges[d];
      if (r.min == r.max) {  // static: one more
        Shape sizes = good[i].sizes();
        ++sizes[d];
        ins = good;
        ins[i] = make_input(specs[i].dtype, sizes, 99);
        e = error_of([&] { model.run(ins); });
        EXPECT_TRUE(contains(e, name) && contains(e, str("unmatched dim value at dim ", d)) &&
                    contains(e, str("expected ", r.min, ", got ", r.min + 1)))
            << e;
        refused_dim += !e.empty();
        continue;
      }
      const bool binds = i == 0 || i == 3 || i == 7;
      for (const int64_t v : {r.min - 1, r.max + 1}) {
        Shape sizes = good[i].sizes();
        sizes[d] = v;
        ins = good;
        ins[i] = make_input(specs[i].dtype, sizes, 98);
        e = error_of([&] { model.run(ins); });
        EXPECT_TRUE(contains(e, name) && contains(e, str("dim ", d))) << e;
        if (binds)
          EXPECT_TRUE(contains(e, v < r.min ? str("too small (expected >= ", r.min)
                                            : str("too large (expected <= ", r.max)) &&
                      contains(e, str("got ", v, ")")))
              << e;
        else
          EXPECT_TRUE(contains(e, "which must have the same size") &&
                      contains(e, str("got ", v, ")")))
              << e;
        refused_bound += !e.empty();
      }
    }
  }
  EXPECT_EQ(refused_dtype, 10);
  EXPECT_EQ(refused_dim, 21);
  EXPECT_EQ(refused_bound, 18);
  // All three inputs of a symbol out of range together: the bound check of the first.
  auto ins = inputs_at(model, 1025, 8, 10);
  std::string e = error_of([&] { model.run(ins); });
  EXPECT_TRUE(contains(e, "'" + specs[0].name + "'") && contains(e, "too large")) << e;
  ins = inputs_at(model, 4, 8, 1);
  e = error_of([&] { model.run(ins); });
  EXPECT_TRUE(contains(e, "'" + specs[7].name + "'") && contains(e, "too small")) << e;

  // Strides: each input as a view with padded rows (strides (8*12, 12, 1) over (4, 8, 10)).
  ins = good;
  for (size_t i = 0; i < 10; ++i) {
    const Tensor base = make_input(specs[i].dtype, {4, 8, 12}, static_cast<uint32_t>(50 + i));
    ins[i] = base.as_strided({4, 8, 10}, {96, 12, 1}, 0);
    ASSERT_FALSE(ins[i].is_contiguous());
  }
  expect_identity(model.run(ins), ins, "strided inputs");
  expect_identity(model.run(good), good, "after the failures");
}

}  // namespace
}  // namespace anvil::aot_test
