// Casts, copies, aliases and no-ops (src/ops/cast.cpp): to.dtype / to.dtype_layout / to.device /
// _to_copy / type_as, clone / contiguous / lift_fresh_copy, alias / detach, dropout,
// _assert_tensor_metadata. Cast values from PyTorch (torch.tensor([-1.7, 2.9]).to(torch.int64)).
#include <gtest/gtest.h>

#include "common/check.h"
#include "ops/op_test_util.h"

namespace anvil::ops {
namespace {

using testing::bf16;
using testing::boolean;
using testing::f32;
using testing::i64;
using testing::matches;
using testing::OpRunner;
using testing::shares_storage;

TEST(OpsCast, ToDtypeConvertsAndAliases) {
  Tensor x = f32({3}, {-1.7, 2.9, 0.5});
  Tensor y = OpRunner("aten.to.dtype").tensor("self", x).dtype("dtype", DType::kInt64).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {3}, {-1, 2, 0}));
  y = OpRunner("aten.to.dtype")
          .tensor("self", f32({3}, {0.1, 1.0 / 3, 1000.7}))
          .dtype("dtype", DType::kBFloat16)
          .run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {3}, {0.10009765625, 0.333984375, 1000.0}));
  EXPECT_EQ(y.to_doubles()[2], 1000.0);  // rounded to bf16 exactly, not only within tolerance
  y = OpRunner("aten.to.dtype")
          .tensor("self", f32({3}, {0.0, -0.5, 2.0}))
          .dtype("dtype", DType::kBool)
          .run1();
  EXPECT_TRUE(matches(y, DType::kBool, {3}, {0, 1, 1}));
  // Same dtype without copy returns the input itself (torch aliases); copy=True copies.
  y = OpRunner("aten.to.dtype").tensor("self", x).dtype("dtype", DType::kFloat32).run1();
  EXPECT_TRUE(shares_storage(y, x));
  y = OpRunner("aten.to.dtype")
          .tensor("self", x)
          .dtype("dtype", DType::kFloat32)
          .scalar("non_blocking", false)
          .scalar("copy", true)
          .run1();
  EXPECT_FALSE(shares_storage(y, x));
  EXPECT_TRUE(matches(y, x));
  // A transposed input: the copy keeps its layout, as PyTorch's preserve_format does
  // (torch.arange(6).view(2, 3).t().float().stride() == (1, 3)).
  Tensor t = i64({2, 3}, {1, 2, 3, 4, 5, 6}).transpose(0, 1);
  y = OpRunner("aten.to.dtype").tensor("self", t).dtype("dtype", DType::kFloat32).run1();
  EXPECT_EQ(y.strides(), (Shape{1, 3}));
  EXPECT_TRUE(matches(y, DType::kFloat32, {3, 2}, {1, 4, 2, 5, 3, 6}));
}

TEST(OpsCast, ToDtypeLayoutAndDevice) {
  // The bert pattern: to.dtype_layout(mask, dtype=bool, layout=strided, device=cpu).
  Tensor m = i64({2, 2}, {1, 0, 2, 0});
  Tensor y = OpRunner("aten.to.dtype_layout")
                 .tensor("self", m)
                 .dtype("dtype", DType::kBool)
                 .layout("layout", 7)
                 .device("device", Device::cpu())
                 .run1();
  EXPECT_TRUE(matches(y, DType::kBool, {2, 2}, {1, 0, 1, 0}));
  // dtype absent keeps the dtype (and aliases).
  y = OpRunner("aten.to.dtype_layout").tensor("self", m).device("device", Device::cpu()).run1();
  EXPECT_TRUE(shares_storage(y, m));
  // to.device(self, device, dtype).
  y = OpRunner("aten.to.device")
          .tensor("self", bf16({2}, {1.5, -2}))
          .device("device", Device::cpu())
          .dtype("dtype", DType::kFloat32)
          .run1();
  EXPECT_TRUE(matches(y, DType::kFloat32, {2}, {1.5, -2}));
  // Another device or a sparse layout is refused with an Error.
  ANVIL_EXPECT_ERROR(OpRunner("aten.to.device")
                         .tensor("self", m)
                         .device("device", Device::cuda(0))
                         .dtype("dtype", DType::kInt64)
                         .run(),
                     "cannot move tensors between devices");
  ANVIL_EXPECT_ERROR(OpRunner("aten.to.dtype_layout").tensor("self", m).layout("layout", 1).run(),
                     "only the strided layout is supported");
}

TEST(OpsCast, ToCopyAndTypeAs) {
  Tensor x = f32({2}, {1.25, -3.5});
  Tensor y = OpRunner("aten._to_copy.default").tensor("self", x).run1();
  EXPECT_FALSE(shares_storage(y, x));
  EXPECT_TRUE(matches(y, x));
  y = OpRunner("aten._to_copy.default").tensor("self", x).dtype("dtype", DType::kBFloat16).run1();
  EXPECT_TRUE(matches(y, DType::kBFloat16, {2}, {1.25, -3.5}));
  y = OpRunner("aten.type_as.default").tensor("self", x).tensor("other", i64({1}, {0})).run1();
  EXPECT_TRUE(matches(y, DType::kInt64, {2}, {1, -3}));
  y = OpRunner("aten.type_as.default")
          .tensor("self", x)
          .tensor("other", f32({5}, {0, 0, 0, 0, 0}))
          .run1();
  EXPECT_TRUE(shares_storage(y, x));
}

TEST(OpsCast, CopiesAndAliases) {
  Tensor base = bf16({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor t = base.transpose(0, 1);
  for (const char* op : {"aten.clone.default", "aten.contiguous.default"}) {
    Tensor y = OpRunner(op).tensor("self", t).run1();
    // clone preserves the transposed layout (PyTorch: t.clone().stride() == (1, 3));
    // contiguous makes it row-major
    if (std::string(op) == "aten.clone.default")
      EXPECT_EQ(y.strides(), (Shape{1, 3}));
    else
      EXPECT_TRUE(y.is_contiguous()) << op;
    EXPECT_FALSE(shares_storage(y, base)) << op;
    EXPECT_TRUE(matches(y, DType::kBFloat16, {3, 2}, {1, 4, 2, 5, 3, 6})) << op;
  }
  Tensor y =
      OpRunner("aten.clone.default").tensor("self", base).memory_format("memory_format", 1).run1();
  EXPECT_FALSE(shares_storage(y, base));
  y = OpRunner("aten.contiguous.default").tensor("self", base).run1();
  EXPECT_TRUE(shares_storage(y, base));  // already contiguous: torch returns self
  y = OpRunner("aten.lift_fresh_copy.default").tensor("self", base).run1();
  EXPECT_FALSE(shares_storage(y, base));
  EXPECT_TRUE(matches(y, base));
  for (const char* op : {"aten.alias.default", "aten.detach.default"}) {
    Tensor v = OpRunner(op).tensor("self", t).run1();
    EXPECT_TRUE(shares_storage(v, base)) << op;
    EXPECT_EQ(v.strides(), t.strides()) << op;
    EXPECT_EQ(v.storage_offset(), t.storage_offset()) << op;
  }
}

TEST(OpsCast, DropoutIsIdentityInInference) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor y = OpRunner("aten.dropout.default")
                 .tensor("input", x)
                 .scalar("p", 0.1)
                 .scalar("train", false)
                 .run1();
  EXPECT_TRUE(shares_storage(y, x));
  y = OpRunner("aten.dropout.default")
          .tensor("input", x)
          .scalar("p", 0.0)
          .scalar("train", true)
          .run1();
  EXPECT_TRUE(matches(y, x));
  try {
    OpRunner("aten.dropout.default")
        .tensor("input", x)
        .scalar("p", 0.1)
        .scalar("train", true)
        .run();
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train"), std::string::npos) << e.what();
  }
  ANVIL_EXPECT_ERROR(OpRunner("aten.dropout.default")
                         .tensor("input", x)
                         .scalar("p", 1.5)
                         .scalar("train", false)
                         .run(),
                     "dropout probability has to be between 0 and 1");
}

TEST(OpsCast, AssertTensorMetadata) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  // The export pattern: a, dtype, device, layout. No outputs.
  auto outs = OpRunner("aten._assert_tensor_metadata.default")
                  .tensor("a", x)
                  .dtype("dtype", DType::kFloat32)
                  .device("device", Device::cpu())
                  .layout("layout", 7)
                  .run();
  EXPECT_TRUE(outs.empty());
  OpRunner("aten._assert_tensor_metadata.default")
      .tensor("a", x)
      .ints("size", {2, 3})
      .ints("stride", {3, 1})
      .run();
  ANVIL_EXPECT_ERROR(OpRunner("aten._assert_tensor_metadata.default")
                         .tensor("a", x)
                         .dtype("dtype", DType::kInt64)
                         .run(),
                     "tensor metadata assertion failed: dtype");
  ANVIL_EXPECT_ERROR(
      OpRunner("aten._assert_tensor_metadata.default").tensor("a", x).ints("size", {3, 2}).run(),
      "tensor metadata assertion failed: size");
  ANVIL_EXPECT_ERROR(OpRunner("aten._assert_tensor_metadata.default")
                         .tensor("a", x.transpose(0, 1))
                         .ints("stride", {3, 1})
                         .run(),
                     "tensor metadata assertion failed: stride");
  ANVIL_EXPECT_ERROR(OpRunner("aten._assert_tensor_metadata.default")
                         .tensor("a", x)
                         .device("device", Device::cuda(0))
                         .run(),
                     "tensor metadata assertion failed: device");
}

TEST(OpsCast, SymbolicShapeRules) {
  const SymInt s0 = SymInt::symbol("s0");
  auto t = OpRunner("aten.to.dtype")
               .sym_tensor("self", DType::kFloat32, {s0, 4})
               .dtype("dtype", DType::kBFloat16)
               .shape();
  EXPECT_EQ(t[0].str(), "bf16[s0, 4]");
  t = OpRunner("aten.to.dtype_layout")
          .sym_tensor("self", DType::kInt64, {s0})
          .dtype("dtype", DType::kBool)
          .layout("layout", 7)
          .device("device", Device::cpu())
          .shape();
  EXPECT_EQ(t[0].str(), "bool[s0]");
  t = OpRunner("aten.to.device")
          .sym_tensor("self", DType::kInt64, {s0})
          .device("device", Device::cpu())
          .dtype("dtype", DType::kFloat32)
          .shape();
  EXPECT_EQ(t[0].str(), "f32[s0]");
  t = OpRunner("aten._to_copy.default").sym_tensor("self", DType::kFloat32, {s0, 2}).shape();
  EXPECT_EQ(t[0].str(), "f32[s0, 2]");
  t = OpRunner("aten.type_as.default")
          .sym_tensor("self", DType::kFloat32, {s0})
          .sym_tensor("other", DType::kFloat16, {3})
          .shape();
  EXPECT_EQ(t[0].str(), "f16[s0]");
  for (const char* op : {"aten.clone.default", "aten.contiguous.default", "aten.alias.default",
                         "aten.detach.default", "aten.lift_fresh_copy.default"}) {
    t = OpRunner(op).sym_tensor("self", DType::kInt64, {s0, 3}).shape();
    EXPECT_EQ(t[0].str(), "i64[s0, 3]") << op;
  }
  t = OpRunner("aten.dropout.default")
          .sym_tensor("input", DType::kFloat32, {s0})
          .scalar("p", 0.1)
          .scalar("train", false)
          .shape();
  EXPECT_EQ(t[0].str(), "f32[s0]");
  t = OpRunner("aten._assert_tensor_metadata.default")
          .sym_tensor("a", DType::kFloat32, {s0, 3})
          .dtype("dtype", DType::kFloat32)
          .shape();
  EXPECT_TRUE(t.empty());
  ANVIL_EXPECT_ERROR(OpRunner("aten._assert_tensor_metadata.default")
                         .sym_tensor("a", DType::kFloat32, {s0})
                         .dtype("dtype", DType::kInt64)
                         .shape(),
                     "tensor metadata assertion failed: dtype");
  ANVIL_EXPECT_ERROR(OpRunner("aten.dropout.default")
                         .sym_tensor("input", DType::kFloat32, {s0})
                         .scalar("p", 0.5)
                         .scalar("train", true)
                         .shape(),
                     "dropout with train=True and p > 0 is not supported");
}

}  // namespace
}  // namespace anvil::ops
