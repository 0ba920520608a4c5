// Tests for Tensor: construction, views (legality of view on strided inputs), copies, casts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "common/check.h"
#include "core/tensor.h"

namespace anvil {
namespace {

using D = DType;
using V = std::vector<double>;

/// 0, 1, ..., n-1 as a contiguous f32 tensor of shape `sizes`.
Tensor arange_f32(const Shape& sizes) {
  std::vector<float> v(static_cast<size_t>(shape_numel(sizes)));
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::from_vector(v, sizes);
}

TEST(Tensor, EmptyFullScalarFromVector) {
  Tensor t = Tensor::empty({2, 3}, D::kFloat32);
  EXPECT_EQ(t.sizes(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  EXPECT_EQ(t.to_doubles(), V(6, 0.0));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % kStorageAlignment, 0u);

  Tensor f = Tensor::full({2, 2}, 2.5, D::kBFloat16);
  EXPECT_EQ(f.to_doubles(), V(4, 2.5));
  Tensor s = Tensor::scalar(-7, D::kInt64);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item(), -7.0);
  EXPECT_EQ(s.type_str(), "i64[]");

  Tensor v = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(v.type_str(), "i64[3, 2]");
  EXPECT_EQ(v.item_at(3), 4.0);
  Tensor one = Tensor::from_vector(std::vector<float>{4.5f});
  EXPECT_EQ(one.dim(), 0);  // a single value with no sizes is a 0-d tensor
  ANVIL_EXPECT_ERROR(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
                     "element count does not match sizes");
  ANVIL_EXPECT_ERROR(Tensor::empty({2, -1}, D::kFloat32), "Tensor::empty: negative size");
  // float8 tensors are storage (one byte an element), filled and copied through float32
  const Tensor f8 = Tensor::full({2}, 500.0, D::kFloat8E4M3FN);
  EXPECT_EQ(f8.nbytes(), 2u);
  EXPECT_EQ(f8.to(D::kFloat32).item_at(1), 448.0);  // e4m3fn saturates, as PyTorch 2.15
  EXPECT_EQ(Tensor::full({1}, 1e6, D::kFloat8E5M2).to(D::kFloat32).item_at(0), INFINITY);
  // torch.full((2,), -0.3).to(torch.float8_e4m3fnuz).float() is [-0.3125, -0.3125]
  EXPECT_EQ(Tensor::full({2}, -0.3, D::kFloat8E4M3FNUZ).to_doubles(),
            (std::vector<double>{-0.3125, -0.3125}));
  // Sizes whose element or byte count overflows int64 are an Error, not a wild allocation.
  ANVIL_EXPECT_ERROR(shape_numel({int64_t{1} << 62, 4}), "shape has too many elements");
  ANVIL_EXPECT_ERROR(Tensor::empty({int64_t{1} << 62, 4}, D::kFloat32),
                     "shape has too many elements");
  ANVIL_EXPECT_ERROR(Tensor::empty({int64_t{1} << 61}, D::kFloat64), "tensor is too large");
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({int64_t{1} << 62, 4, 0}), 0);
}

TEST(Tensor, ContiguousStridesAndZeroSize) {
  EXPECT_EQ(Tensor::contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(Tensor::contiguous_strides({2, 0, 4}), (Shape{4, 4, 1}));  // as torch
  EXPECT_EQ(Tensor::contiguous_strides({}), Shape{});
  Tensor z = Tensor::empty({0, 3}, D::kFloat32);
  EXPECT_EQ(z.numel(), 0);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_TRUE(z.to_doubles().empty());
  // torch: a zero-element tensor is contiguous whatever its strides.
  Tensor big = Tensor::empty({16}, D::kFloat32);
  EXPECT_TRUE(big.as_strided({0, 3}, {1, 5}, 0).is_contiguous());
  EXPECT_TRUE(big.as_strided({3, 0}, {1, 5}, 0).is_contiguous());
  z.fill(3.0);  // no elements: nothing happens
  EXPECT_EQ(z.view({3, 0}).sizes(), (Shape{3, 0}));
  EXPECT_EQ(z.reshape({0}).numel(), 0);
}

TEST(Tensor, SizeAndStrideWrapNegativeDims) {
  Tensor t = arange_f32({2, 3, 4});
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.stride(-3), 12);
  ANVIL_EXPECT_ERROR(t.size(3), "dimension out of range (expected a dim in [-3, 2], got 3)");
  ANVIL_EXPECT_ERROR(t.size(-4), "dimension out of range (expected a dim in [-3, 2], got -4)");
  Tensor s = Tensor::scalar(1, D::kFloat32);
  ANVIL_EXPECT_ERROR(s.size(0),
                     "Tensor::size: a 0-d tensor has no dimensions");  // a 0-d tensor has no dims
                                                                       // (torch: IndexError)
  ANVIL_EXPECT_ERROR(s.stride(-1), "Tensor::stride: a 0-d tensor has no dimensions");
  EXPECT_EQ(s.wrap_dim(0), 0);  // but dim 0 / -1 are valid dim arguments, as in torch
  EXPECT_EQ(s.wrap_dim(-1), 0);
  EXPECT_EQ(t.wrap_dim(-1, /*for_insert=*/true), 3);
}

TEST(Tensor, ViewOfContiguous) {
  Tensor t = arange_f32({2, 3, 4});
  Tensor v = t.view({6, -1});
  EXPECT_EQ(v.sizes(), (Shape{6, 4}));
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(v.storage(), t.storage());
  EXPECT_EQ(v.to_doubles(), t.to_doubles());
  EXPECT_EQ(t.view({24}).strides(), Shape{1});
  EXPECT_EQ(t.view({1, 24, 1}).strides(), (Shape{24, 1, 1}));
  EXPECT_EQ(Tensor::scalar(5, D::kFloat32).view({1, 1}).item(), 5.0);
  EXPECT_EQ(t.view({4, 1, 6}).item_at(23), 23.0);
  ANVIL_EXPECT_ERROR(t.view({5, -1}), "cannot infer the -1 dim");
  ANVIL_EXPECT_ERROR(t.view({-1, -1}), "only one dimension can be -1");
  ANVIL_EXPECT_ERROR(t.view({25}), "element count changes");
  ANVIL_EXPECT_ERROR(t.view({-2, 12}), "Tensor::view: negative size");
}

TEST(Tensor, ViewOfNonContiguousFollowsTorchLegality) {
  // x = arange(24).view(2,3,4)[:, :, :2]: strides (12, 4, 1).
  Tensor x = arange_f32({2, 3, 4}).slice(2, 0, 2);
  EXPECT_EQ(x.strides(), (Shape{12, 4, 1}));
  Tensor v = x.view({6, 2});  // dims 0 and 1 form one chunk: legal, strides (4, 1)
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(v.to_doubles(), x.to_doubles());
  try {
    x.view({2, 6});  // merges across the gap: torch refuses
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reshape"), std::string::npos) << e.what();
  }
  // Transposed [3, 2] (strides (1, 3)) viewed as [3, 1, 2]: torch gives strides (1, 6, 3).
  Tensor y = arange_f32({2, 3}).transpose(0, 1);
  EXPECT_EQ(y.view({3, 1, 2}).strides(), (Shape{1, 6, 3}));
  ANVIL_EXPECT_ERROR(y.view({6}), "view is not compatible with the input's strides");
  // Expanded: arange(3).expand(4, 3).view(2, 2, 3) has strides (0, 0, 1).
  Tensor z = arange_f32({3}).expand({4, 3});
  Tensor zv = z.view({2, 2, 3});
  EXPECT_EQ(zv.strides(), (Shape{0, 0, 1}));
  EXPECT_EQ(zv.to_doubles(), (V{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
  // A view keeps the storage offset.
  Tensor off = arange_f32({4, 3}).select(0, 2);
  EXPECT_EQ(off.view({3, 1}).storage_offset(), 6);
  EXPECT_EQ(off.view({3, 1}).to_doubles(), (V{6, 7, 8}));
}

TEST(Tensor, ReshapeViewsWhenItCanAndCopiesWhenItMust) {
  Tensor t = arange_f32({2, 3});
  Tensor r = t.reshape({3, 2});
  EXPECT_EQ(r.storage(), t.storage());
  Tensor tt = t.transpose(0, 1);  // [[0,3],[1,4],[2,5]]
  Tensor rc = tt.reshape({6});
  EXPECT_NE(rc.storage(), t.storage());
  EXPECT_EQ(rc.to_doubles(), (V{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(rc.is_contiguous());
  EXPECT_EQ(tt.reshape({-1, 3}).to_doubles(), (V{0, 3, 1, 4, 2, 5}));
  ANVIL_EXPECT_ERROR(tt.reshape({4}), "element count changes");
}

TEST(Tensor, PermuteTransposeUnsqueezeSqueeze) {
  Tensor t = arange_f32({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(p.item_at(1), 4.0);  // p[0,0,1] = t[0,1,0]
  EXPECT_EQ(p.item_at(6), 1.0);  // p[1,0,0] = t[0,0,1]
  EXPECT_EQ(t.permute({-1, -3, -2}).sizes(), (Shape{4, 2, 3}));
  ANVIL_EXPECT_ERROR(t.permute({0, 0, 1}), "repeated dim");
  ANVIL_EXPECT_ERROR(t.permute({0, 1}), "number of dims does not match rank");
  ANVIL_EXPECT_ERROR(t.permute({0, 1, 3}), "dimension out of range (expected a dim in [-3, 2], got 3)");

  Tensor tr = t.transpose(-1, 0);
  EXPECT_EQ(tr.sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(tr.strides(), (Shape{1, 4, 12}));
  ANVIL_EXPECT_ERROR(t.transpose(0, 3), "dimension out of range (expected a dim in [-3, 2], got 3)");

  Tensor m = arange_f32({3, 4});
  EXPECT_EQ(m.unsqueeze(1).strides(), (Shape{4, 4, 1}));
  EXPECT_EQ(m.unsqueeze(-1).strides(), (Shape{4, 1, 1}));
  EXPECT_EQ(m.transpose(0, 1).unsqueeze(0).strides(), (Shape{4, 1, 4}));
  EXPECT_EQ(m.transpose(0, 1).unsqueeze(2).strides(), (Shape{1, 4, 1}));
  ANVIL_EXPECT_ERROR(m.unsqueeze(3), "dimension out of range (expected a dim in [-3, 2], got 3)");
  Tensor u = m.unsqueeze(0);
  EXPECT_EQ(u.squeeze(0).sizes(), (Shape{3, 4}));
  EXPECT_EQ(u.squeeze(1).sizes(), (Shape{1, 3, 4}));  // not size 1: unchanged
  EXPECT_EQ(Tensor::scalar(2, D::kFloat32).unsqueeze(0).sizes(), Shape{1});
}

TEST(Tensor, ExpandBroadcastsSizeOneDims) {
  Tensor c = arange_f32({3, 1});
  Tensor e = c.expand({2, 3, 4});
  EXPECT_EQ(e.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(e.item_at(5), 1.0);  // e[0,1,1]
  EXPECT_EQ(e.item_at(23), 2.0);
  EXPECT_EQ(c.expand({-1, 5}).sizes(), (Shape{3, 5}));
  EXPECT_EQ(c.expand({3, 0}).numel(), 0);
  ANVIL_EXPECT_ERROR(c.expand({4, 4}), "dim 0 is not 1 and cannot expand");  // 3 is not 1
  ANVIL_EXPECT_ERROR(c.expand({4}), "target has fewer dims than input");     // fewer dims
  ANVIL_EXPECT_ERROR(c.expand({-1, 3, 4}),
                     "-1 is not allowed for a new leading dim");     // -1 for a new dim
  ANVIL_EXPECT_ERROR(c.expand({3, -2}), "negative size for dim 1");  // negative size
  Tensor s = Tensor::scalar(9, D::kInt64).expand({2, 2});
  EXPECT_EQ(s.to_doubles(), V(4, 9.0));
}

TEST(Tensor, SliceWithNegativeIndicesAndSteps) {
  Tensor a = arange_f32({10});
  EXPECT_EQ(a.slice(0, -3, 10).to_doubles(), (V{7, 8, 9}));    // a[-3:]
  EXPECT_EQ(a.slice(0, 1, -1, 3).to_doubles(), (V{1, 4, 7}));  // a[1:-1:3]
  EXPECT_EQ(a.slice(0, -100, 3).to_doubles(), (V{0, 1, 2}));   // clamped
  EXPECT_EQ(a.slice(0, 8, 2).numel(), 0);                      // a[8:2]
  EXPECT_EQ(a.slice(0, 0, std::numeric_limits<int64_t>::max(), 4).to_doubles(), (V{0, 4, 8}));
  ANVIL_EXPECT_ERROR(a.slice(0, 0, 5, 0), "step must be positive (expected > 0, got 0)");
  ANVIL_EXPECT_ERROR(a.slice(0, 0, 5, -1), "step must be positive (expected > 0, got -1)");
  Tensor m = arange_f32({4, 5});
  Tensor s = m.slice(-1, 1, 5, 2).slice(0, -2, 4);  // m[-2:, 1::2]
  EXPECT_EQ(s.sizes(), (Shape{2, 2}));
  EXPECT_EQ(s.strides(), (Shape{5, 2}));
  EXPECT_EQ(s.storage_offset(), 11);
  EXPECT_EQ(s.to_doubles(), (V{11, 13, 16, 18}));
}

TEST(Tensor, Select) {
  Tensor m = arange_f32({3, 4});
  EXPECT_EQ(m.select(0, -1).to_doubles(), (V{8, 9, 10, 11}));
  EXPECT_EQ(m.select(1, 2).to_doubles(), (V{2, 6, 10}));
  EXPECT_EQ(m.select(-1, -4).to_doubles(), (V{0, 4, 8}));
  EXPECT_EQ(m.select(0, 1).select(0, 3).item(), 7.0);
  ANVIL_EXPECT_ERROR(m.select(0, 3), "index out of range for dim 0");
  ANVIL_EXPECT_ERROR(m.select(1, -5), "index out of range for dim 1");
  ANVIL_EXPECT_ERROR(m.select(2, 0), "dimension out of range (expected a dim in [-2, 1], got 2)");
}

TEST(Tensor, ContiguousAndClone) {
  Tensor t = arange_f32({2, 3});
  EXPECT_EQ(t.contiguous().storage(), t.storage());
  Tensor tt = t.transpose(0, 1);
  Tensor c = tt.contiguous();
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (Shape{2, 1}));
  EXPECT_EQ(c.to_doubles(), (V{0, 3, 1, 4, 2, 5}));
  Tensor cl = t.clone();
  EXPECT_NE(cl.storage(), t.storage());
  cl.fill(1);
  EXPECT_EQ(t.item_at(0), 0.0);
  // A slice with an offset is not contiguous storage-wise at its start, but is contiguous.
  Tensor row = t.select(0, 1);
  EXPECT_TRUE(row.is_contiguous());
  EXPECT_EQ(row.contiguous().storage_offset(), 3);
}

TEST(Tensor, CopyFromAcrossDtypesAndLayouts) {
  // f32 -> i64 truncates toward zero, as torch.
  Tensor f = Tensor::from_vector(std::vector<float>{1.5f, -2.7f, 3.9f, -0.2f}, {2, 2});
  Tensor i = Tensor::empty({2, 2}, D::kInt64);
  i.copy_from(f);
  EXPECT_EQ(i.to_doubles(), (V{1, -2, 3, 0}));
  // i64 -> bf16 rounds (257 is not representable: nearest even is 256).
  Tensor big = Tensor::from_vector(std::vector<int64_t>{257, 3, -1, 1000001});
  Tensor bf = Tensor::empty({4}, D::kBFloat16);
  bf.copy_from(big);
  EXPECT_EQ(bf.to_doubles(), (V{256, 3, -1, 999424}));
  // f32 -> bool, bool -> f32.
  Tensor fb = Tensor::from_vector(std::vector<float>{0.0f, -0.0f, 0.5f, NAN});
  Tensor b = Tensor::empty({4}, D::kBool);
  b.copy_from(fb);
  EXPECT_EQ(b.to_doubles(), (V{0, 0, 1, 1}));
  // Into a transposed destination from a transposed source of another dtype.
  Tensor src = arange_f32({2, 3}).transpose(0, 1);  // [[0,3],[1,4],[2,5]]
  Tensor dst_base = Tensor::empty({2, 3}, D::kFloat64);
  Tensor dst = dst_base.transpose(0, 1);
  dst.copy_from(src);
  EXPECT_EQ(dst.to_doubles(), (V{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(dst_base.to_doubles(), (V{0, 1, 2, 3, 4, 5}));
  // f16 source, strided destination slice.
  Tensor h = Tensor::from_vector(std::vector<Half>{Half(0.1f), Half(2.0f)});
  Tensor dst2 = Tensor::zeros({4}, D::kFloat32);
  dst2.slice(0, 1, 4, 2).copy_from(h);
  EXPECT_EQ(dst2.to_doubles(), (V{0, static_cast<float>(Half(0.1f)), 0, 2}));
  EXPECT_EQ(static_cast<float>(Half(0.1f)), 0.0999755859375f);
  // complex -> real keeps the real part.
  Tensor cx = Tensor::from_vector(std::vector<std::complex<float>>{{1.5f, 2.0f}, {-3.0f, 1.0f}});
  EXPECT_EQ(cx.to(D::kFloat32).to_doubles(), (V{1.5, -3.0}));
  ANVIL_EXPECT_ERROR(dst2.copy_from(h), "copy_from: shape mismatch");  // shape mismatch
}

TEST(Tensor, FloatToIntegerCastsMatchTorch) {
  // torch.tensor([...]).to(dtype) on x86.
  Tensor f = Tensor::from_vector(std::vector<float>{-1.0f, 2.7f, -2.7f, 300.0f, 255.9f});
  EXPECT_EQ(f.to(D::kUInt8).to_doubles(), (V{255, 2, 254, 44, 255}));
  EXPECT_EQ(f.to(D::kInt8).to_doubles(), (V{-1, 2, -2, 44, -1}));
  Tensor g = Tensor::from_vector(std::vector<float>{2.5f, -2.5f, 1e10f});
  EXPECT_EQ(g.to(D::kInt32).to_doubles(), (V{2, -2, -2147483648.0}));
  Tensor n = Tensor::from_vector(std::vector<double>{NAN, INFINITY, -1e300});
  EXPECT_EQ(n.to(D::kInt64).to_doubles(), V(3, -9223372036854775808.0));
  EXPECT_EQ(n.to(D::kInt32).to_doubles(), V(3, -2147483648.0));
}

TEST(Tensor, ToAndFill) {
  Tensor t = arange_f32({3});
  EXPECT_EQ(t.to(D::kFloat32).storage(), t.storage());
  EXPECT_NE(t.to(D::kFloat32, /*copy=*/true).storage(), t.storage());
  EXPECT_EQ(t.to(D::kInt64).type_str(), "i64[3]");
  Tensor m = Tensor::zeros({3, 3}, D::kInt32);
  m.transpose(0, 1).select(0, 1).fill(7);  // column 1
  EXPECT_EQ(m.to_doubles(), (V{0, 7, 0, 0, 7, 0, 0, 7, 0}));
  Tensor bf = Tensor::zeros({2}, D::kBFloat16);
  bf.fill(3.14159);
  EXPECT_EQ(bf.data<BFloat16>()[0].bits, 0x4049);
  Tensor c = Tensor::zeros({2}, D::kComplex64);
  c.fill(-2);
  EXPECT_EQ(c.data<std::complex<float>>()[1], std::complex<float>(-2, 0));
  ANVIL_EXPECT_ERROR(t.data<int64_t>(), "element type mismatch (expected i64, got f32)");
  ANVIL_EXPECT_ERROR(Tensor().data_ptr(), "data_ptr: tensor is undefined");
  EXPECT_FALSE(Tensor().defined());
}

TEST(Tensor, AsStridedChecksItsStorage) {
  Tensor t = arange_f32({6});
  EXPECT_EQ(t.as_strided({2, 2}, {1, 2}, 1).to_doubles(), (V{1, 3, 2, 4}));
  ANVIL_EXPECT_ERROR(
      t.as_strided({2, 3}, {3, 1}, 1),
      "view exceeds its storage (expected elements in [0, 6), got [1, 6])");  // reaches element 6
  ANVIL_EXPECT_ERROR(
      t.as_strided({2}, {-1}, 0),
      "view exceeds its storage (expected elements in [0, 6), got [-1, 0])");  // reaches element -1
  ANVIL_EXPECT_ERROR(t.as_strided({2}, {1, 1}, 0),
                     "sizes and strides differ in rank");  // rank mismatch
  ANVIL_EXPECT_ERROR(Tensor().as_strided({1}, {1}, 0), "as_strided: tensor is undefined");
}

TEST(Tensor, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({3, 1}, {4}, "t"), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}, "t"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({2, 1, 5}, {3, 1}, "t"), (Shape{2, 3, 5}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 4}, "t"), (Shape{0, 4}));
  try {
    broadcast_shapes({2, 3}, {4, 3}, "aten.add.Tensor");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "aten.add.Tensor");
    EXPECT_EQ(e.expected(), "[2, 3]");
    EXPECT_EQ(e.actual(), "[4, 3]");
  }
}

TEST(Tensor, ForEachOffsetVisitsRowMajor) {
  std::vector<int64_t> seen;
  for_each_offset({2, 3}, {1, 2}, [&](int64_t o) { seen.push_back(o); });
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 2, 4, 1, 3, 5}));
  seen.clear();
  for_each_offset({}, {}, [&](int64_t o) { seen.push_back(o); });
  EXPECT_EQ(seen, std::vector<int64_t>{0});
  seen.clear();
  for_each_offset({2, 0, 3}, {0, 3, 1}, [&](int64_t o) { seen.push_back(o); });
  EXPECT_TRUE(seen.empty());
  for_each_offset({2, 1, 2}, {10, 7, 1}, [&](int64_t o) { seen.push_back(o); });
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 10, 11}));
}

}  // namespace
}  // namespace anvil
