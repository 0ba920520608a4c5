// Tests for as_strided (a view of self's storage, the offset defaulting to self's) and the stride
// queries sym_stride / sym_storage_offset, with PyTorch 2.11's values and refusals (CPU).
#include <gtest/gtest.h>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil {
namespace {

using testing::f32;
using testing::matches;
using testing::OpRunner;

/// torch.arange(12.).reshape(3, 4).
Tensor a34() {
  std::vector<double> v;
  for (int i = 0; i < 12; ++i) v.push_back(i);
  return f32({3, 4}, v);
}

TEST(OpsAsStrided, ViewOfTheStorage) {
  const Tensor a = a34();
  Tensor y = OpRunner("aten.as_strided.default").tensor("self", a).ints("size", {2, 3})
                 .ints("stride", {1, 2}).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 3}, {0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(y.storage(), a.storage());  // a view, not a copy
  EXPECT_EQ(y.strides(), (Shape{1, 2}));
  // an explicit offset, and a zero stride (a broadcast row)
  Tensor z = OpRunner("aten.as_strided.default").tensor("self", a).ints("size", {2, 2})
                 .ints("stride", {0, 1}).scalar("storage_offset", 10).run1();
  EXPECT_TRUE(matches(z, DType::kFloat32, {2, 2}, {10, 11, 10, 11}));
  EXPECT_EQ(z.storage_offset(), 10);
}

TEST(OpsAsStrided, OffsetDefaultsToSelfsAndStridesAreTheStorages) {
  const Tensor a = a34();
  // a[1:].as_strided((2, 2), (3, 1)): offset 4 (self's), PyTorch [[4, 5], [7, 8]]
  const Tensor tail = a.as_strided({2, 4}, {4, 1}, 4);
  Tensor y = OpRunner("aten.as_strided.default").tensor("self", tail).ints("size", {2, 2})
                 .ints("stride", {3, 1}).run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2, 2}, {4, 5, 7, 8}));
  EXPECT_EQ(y.storage_offset(), 4);
  // a.t().as_strided((3,), (5,), 1): strides address the storage, not the transposed view
  const Tensor t = a.as_strided({4, 3}, {1, 4}, 0);
  EXPECT_TRUE(matches(OpRunner("aten.as_strided.default").tensor("self", t).ints("size", {3})
                          .ints("stride", {5}).scalar("storage_offset", 1).run1(),
                      DType::kFloat32, {3}, {1, 6, 11}));
}

TEST(OpsAsStrided, RefusesWhatPyTorchRefuses) {
  const Tensor a = a34();
  // setStorage: ... requiring a storage size of 60 are out of bounds for storage of size 48
  ANVIL_EXPECT_ERROR(OpRunner("aten.as_strided.default").tensor("self", a).ints("size", {3, 3})
                       .ints("stride", {4, 1}).scalar("storage_offset", 4).run1(),
                   "out of bounds for the storage of self");
  ANVIL_EXPECT_ERROR(OpRunner("aten.as_strided.default").tensor("self", a).ints("size", {3, 3})
                       .ints("stride", {-4, 1}).run1(),
                   "negative strides");
  ANVIL_EXPECT_ERROR(OpRunner("aten.as_strided.default").tensor("self", a).ints("size", {3, 3})
                       .ints("stride", {4}).run1(),
                   "mismatch in length of strides and shape");
  ANVIL_EXPECT_ERROR(OpRunner("aten.as_strided.default").tensor("self", a).ints("size", {2})
                       .ints("stride", {1}).scalar("storage_offset", -1).run1(),
                   "invalid storage offset");
}

TEST(OpsSymStride, StrideAndStorageOffsetOfViews) {
  const Tensor a = a34();
  const Tensor cols = a.as_strided({3, 3}, {4, 1}, 1);  // a[:, 1:]
  auto stride = [](const Tensor& t, int64_t d) {
    return std::get<int64_t>(
        OpRunner("aten.sym_stride.int").tensor("self", t).scalar("dim", d).run().at(0));
  };
  EXPECT_EQ(stride(cols, 0), 4);
  EXPECT_EQ(stride(cols, -1), 1);
  EXPECT_EQ(stride(a.as_strided({4, 3}, {1, 4}, 0), 0), 1);  // a.t().stride(0)
  EXPECT_EQ(std::get<int64_t>(
                OpRunner("aten.sym_storage_offset.default").tensor("self", cols).run().at(0)),
            1);
  EXPECT_EQ(std::get<int64_t>(
                OpRunner("aten.sym_storage_offset.default").tensor("self", a).run().at(0)),
            0);
  // PyTorch: "Dimension specified as 0 but tensor has no dimensions"
  ANVIL_EXPECT_ERROR(OpRunner("aten.sym_stride.int").tensor("self", f32({}, {3})).scalar("dim", 0)
                       .run(),
                   "dimension out of range");
  ANVIL_EXPECT_ERROR(OpRunner("aten.sym_stride.int").tensor("self", a).scalar("dim", 2).run(),
                   "dimension out of range");
}

}  // namespace
}  // namespace anvil
