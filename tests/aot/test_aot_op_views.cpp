// as_strided, out= forms and the higher-order ops the importer inlines, end to end against
// PyTorch 2.11 (fixtures of scripts/export_op_views.py): each export is compiled into a package
// and run, and the reference interpreter must give the same values. The out= forms are imported
// as the functional op plus a write into `out` (ir/inplace.h), torch.map is unrolled,
// invoke_subgraph inlined at each call and auto_functionalized_v2 applied in place on clones.
#include <cctype>
#include <gtest/gtest.h>

#include <set>

#include "aot_util.h"
#include "common/check.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil::aot_test {
namespace {

// as_strided over an input, a slice (offset from the export's record of it), a transpose,
// overlapping windows, a computed tensor, a channels-last copy and a chain of two.
TEST(AotOpViews, AsStrided) {
  check_against_pytorch("ops_as_strided");
  EXPECT_EQ(imported_targets("ops_as_strided").count("aten.as_strided.default"), 1u);
}

// The compiled view indexes the storage through PyTorch's layout of the tensor it views, so a
// channels-last intermediate (the compiled buffer is row-major) still gives PyTorch's elements.
TEST(AotOpViews, AsStridedOverAChannelsLastTensorInTheTextIr) {
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[1, 3, 2, 2] = user_input
  }
  %c: f32[1, 3, 2, 2]{12, 1, 6, 3} = aten.contiguous.default(self=%x, *memory_format=torch.channels_last)
  %a: f32[2, 3] = aten.as_strided.default(self=%c, size=[2, 3], stride=[1, 3], storage_offset=2)
  %r: f32[3, 2] = aten.as_strided.default(self=%x, size=[3, 2], stride=[1, 3])
  outputs {
    user_output %a
    user_output %r
  }
})");
  const Built& b = build_graph("as_strided_channels_last", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  std::vector<double> xv;
  for (int i = 0; i < 12; ++i) xv.push_back(i);
  const Tensor x = Tensor::from_vector(xv, {1, 3, 2, 2}).to(DType::kFloat32, true);
  // PyTorch: x.contiguous(memory_format=torch.channels_last).as_strided((2, 3), (1, 3), 2)
  const std::vector<Tensor> want = {
      Tensor::from_vector(std::vector<double>{8, 9, 10, 1, 2, 3}, {2, 3}).to(DType::kFloat32, true),
      Tensor::from_vector(std::vector<double>{0, 3, 1, 4, 2, 5}, {3, 2}).to(DType::kFloat32, true)};
  expect_outputs(model.run({x}), want, "as_strided_channels_last (package)");
  interp::Interpreter ref(*g);
  expect_outputs(ref.run({x}), want, "as_strided_channels_last (interpreter)");
}

// sym_stride / sym_storage_offset (2.11's exports write them as sym_size expressions; the text
// IR can use them): symbolic ints carrying their expressions, compiled like sym_size, while the
// interpreter reads them off the tensors. x[:, 1:] of a dynamic (s0, 5) input: stride 5, offset 1.
TEST(AotOpViews, SymStrideAndStorageOffsetCompile) {
  auto g = ir::parse_graph(R"(graph {
  symbols {
    s0 in [2, 64]
  }
  inputs {
    %x: f32[s0, 5] = user_input
  }
  %v: f32[s0, 4]{5, 1} = aten.slice.Tensor(self=%x, dim=1, start=1)
  %st: SymInt(5) = aten.sym_stride.int(self=%v, dim=0)
  %off: SymInt(1) = aten.sym_storage_offset.default(self=%v)
  %n: SymInt(6) = _operator.add(a=SymInt(%st), b=SymInt(%off))
  %z: f32[6] = aten.full.default(size=SymInt[%n], fill_value=2.5, *device=device(cpu), *pin_memory=False)
  outputs {
    user_output %z
  }
})");
  const Built& b = build_graph("sym_stride_offset", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  std::vector<double> xv(15, 1.0);
  const Tensor x = Tensor::from_vector(xv, {3, 5}).to(DType::kFloat32, true);
  const std::vector<Tensor> want = {Tensor::full({6}, 2.5, DType::kFloat32)};
  expect_outputs(model.run({x}), want, "sym_stride_offset (package)");
  interp::Interpreter ref(*g);
  expect_outputs(ref.run({x}), want, "sym_stride_offset (interpreter)");
}

// aten.X.out (atan2, add with alpha, sum.IntList_out, mean.out, sin into an empty tensor that
// PyTorch resizes, mul into float64, clamp into a tensor viewed before the write, and
// bitwise_and.Scalar_out) as the functional op plus a write into out.
TEST(AotOpViews, OutFormsAreTheFunctionalOpPlusAWrite) {
  check_against_pytorch("ops_out_forms");
  const auto t = imported_targets("ops_out_forms");
  for (const char* gone : {"aten.atan2.out", "aten.add.out", "aten.sum.IntList_out",
                           "aten.mean.out", "aten.sin.out", "aten.mul.out", "aten.clamp.out",
                           "aten.bitwise_and.Scalar_out"})
    EXPECT_EQ(t.count(gone), 0u) << gone << " should be imported as its functional op";
  for (const char* f : {"aten.atan2.default", "aten.add.Tensor", "aten.sum.dim_IntList",
                        "aten.mean.dim", "aten.sin.default", "aten.mul.Tensor",
                        "aten.clamp.default", "aten.bitwise_and.Scalar", "aten.copy_.default"})
    EXPECT_EQ(t.count(f), 1u) << f;
}

// PyTorch refuses a float result into an integer out tensor ("result type Float can't be cast
// to the desired output type Long"); so does the import, naming both dtypes.
TEST(AotOpViews, OutFormRefusesAResultItCannotStore) {
  ANVIL_EXPECT_ERROR(ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3] = user_input
    %o: i64[3] = user_input
  }
  %y: i64[3] = aten.sin.out(self=%x, *out=%o)
  outputs {
    user_output %y
  }
})"),
                     "cannot be cast to the out tensor's dtype");
  // an out tensor of other sizes that is the caller's: PyTorch would resize it, anvil does not
  ANVIL_EXPECT_ERROR(ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3] = user_input
    %o: f32[2] = user_input
  }
  %y: f32[3] = aten.sin.out(self=%x, *out=%o)
  outputs {
    user_output %y
  }
})"),
                     "out= tensor of other sizes than the result");
}

// torch.map: the body unrolled over the static leading size, each output stacked.
TEST(AotOpViews, MapIsUnrolled) {
  check_against_pytorch("ops_map");
  const auto t = imported_targets("ops_map");
  EXPECT_EQ(t.count("higher_order.map_impl"), 0u);
  EXPECT_EQ(t.count("aten.stack.default"), 1u);
}

// torch.map over a dynamic leading size cannot be unrolled: refused at import with the reason.
TEST(AotOpViews, MapOverADynamicLeadingSizeIsRefused) {
  const std::string err = ::anvil::test::error_message([] {
    frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/ops_map_dynamic.pt2");
  });
  EXPECT_TRUE(::anvil::test::error_says(err, "torch.map over a dynamic leading size")) << err;
}

// A nested_compile_region module called twice: its subgraph inlined at both calls.
TEST(AotOpViews, InvokeSubgraphIsInlined) {
  check_against_pytorch("ops_invoke_subgraph");
  const auto t = imported_targets("ops_invoke_subgraph");
  EXPECT_EQ(t.count("higher_order.invoke_subgraph"), 0u);
  EXPECT_EQ(t.count("aten.gelu.default"), 1u);
}

// auto_functionalized_v2 over an aten in-place op (mul_ on a clone and on a slice of one):
// clones of the bases, the op applied in place on them (the slice through a view), the clones
// the results.
TEST(AotOpViews, AutoFunctionalizedAtenOpRunsOnClones) {
  check_against_pytorch("ops_auto_functionalized_aten");
  const auto t = imported_targets("ops_auto_functionalized_aten");
  EXPECT_EQ(t.count("higher_order.auto_functionalized_v2"), 0u);
  EXPECT_EQ(t.count("aten.mul.Tensor"), 1u);
}

// auto_functionalized (v1, which 2.11 no longer writes: the same graph with its first node
// rewritten so) passes the written tensor itself: cloned, written, the clone the result.
TEST(AotOpViews, AutoFunctionalizedV1AtenOpRunsOnAClone) {
  check_against_pytorch("ops_auto_functionalized_v1");
  const auto t = imported_targets("ops_auto_functionalized_v1");
  EXPECT_EQ(t.count("higher_order.auto_functionalized"), 0u);
  EXPECT_EQ(t.count("higher_order.auto_functionalized_v2"), 0u);
}

// The write of that import, as a non-strict export also leaves it for
// `c = a.clone(); c[1:].mul_(-2)`: through a view of a copy lowered as an alias of `a`'s buffer.
// The copy becomes real before the write (it used to land in `a`, and `c` kept the old values).
TEST(AotOpViews, WriteThroughAViewOfACopyLandsInTheCopy) {
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3, 2] = user_input
  }
  %a: f32[3, 2] = aten.add.Tensor(self=%x, other=1)
  %c: f32[3, 2] = aten.clone.default(self=%a)
  %s: f32[2, 2] = aten.slice.Tensor(self=%c, dim=0, start=1)
  %m: f32[2, 2] = aten.mul.Tensor(self=%s, other=-2.0)
  %w: f32[2, 2] = aten.copy_.default(self=%s, src=%m)
  outputs {
    user_output %c
    user_output %a
  }
})");
  const Built& b = build_graph("write_through_view_of_copy", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  const Tensor x =
      Tensor::from_vector(std::vector<double>{0, 1, 2, 3, 4, 5}, {3, 2}).to(DType::kFloat32, true);
  const std::vector<Tensor> want = {
      Tensor::from_vector(std::vector<double>{1, 2, -6, -8, -10, -12}, {3, 2})
          .to(DType::kFloat32, true),
      Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}).to(DType::kFloat32, true)};
  expect_outputs(model.run({x}), want, "write_through_view_of_copy (package)");
  interp::Interpreter ref(*g);
  expect_outputs(ref.run({x}), want, "write_through_view_of_copy (interpreter)");
}

/// The inputs and the expected output of `t = a.clone(); t[:, 0:4] = c1; t[:, S:S + 4] = c2;
/// o = 2 t` over `rows` rows of 8 (a, c1, c2 counting up from 0, 100 and 200).
struct SliceCopies {
  std::vector<Tensor> ins;
  Tensor want;
};
SliceCopies slice_copies(int rows, int start) {
  std::vector<double> a(static_cast<size_t>(8 * rows)), c1(static_cast<size_t>(4 * rows)),
      c2(c1.size()), want(a.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(i);
  for (size_t i = 0; i < c1.size(); ++i) {
    c1[i] = 100 + static_cast<double>(i);
    c2[i] = 200 + static_cast<double>(i);
  }
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < 8; ++j) {
      double v = a[static_cast<size_t>(8 * r + j)];
      if (j < 4) v = c1[static_cast<size_t>(4 * r + j)];
      if (j >= start && j < start + 4) v = c2[static_cast<size_t>(4 * r + j - start)];
      want[static_cast<size_t>(8 * r + j)] = 2 * v;
    }
  auto f32 = [](const std::vector<double>& v, const Shape& s) {
    return Tensor::from_vector(v, s).to(DType::kFloat32, true);
  };
  return {{f32(a, {rows, 8}), f32(c1, {rows, 4}), f32(c2, {rows, 4})}, f32(want, {rows, 8})};
}

/// The graph of slice_copies with `rows` rows: "2", or a symbol declared in [2, 64].
std::string slice_copies_graph(const std::string& rows, int start) {
  std::string text = R"(graph {
SYMBOLS  inputs {
    %a: f32[R, 8] = user_input
    %c1: f32[R, 4] = user_input
    %c2: f32[R, 4] = user_input
  }
  %t: f32[R, 8] = aten.clone.default(self=%a)
  %v1: f32[R, 4] = aten.slice.Tensor(self=%t, dim=1, start=0, end=4)
  %u1: f32[R, 4] = aten.copy_.default(self=%v1, src=%c1)
  %v2: f32[R, 4] = aten.slice.Tensor(self=%t, dim=1, start=START, end=END)
  %u2: f32[R, 4] = aten.copy_.default(self=%v2, src=%c2)
  %o: f32[R, 8] = aten.mul.Tensor(self=%t, other=2.0)
  outputs {
    user_output %o
  }
})";
  const bool symbolic = !std::isdigit(static_cast<unsigned char>(rows[0]));
  text.replace(text.find("SYMBOLS"), 7,
               symbolic ? "  symbols {\n    " + rows + " in [2, 64]\n  }\n" : std::string());
  for (size_t at; (at = text.find("[R,")) != std::string::npos;) text.replace(at + 1, 1, rows);
  text.replace(text.find("START"), 5, std::to_string(start));
  text.replace(text.find("END"), 3, std::to_string(start + 4));
  return text;
}

// Two copies into slices of one buffer, `t[:, 0:4] = c1; t[:, S:S + 4] = c2`: overlapping
// (S = 2) they stay two kernels, since one kernel's points have no order and a point of the
// first copy may write after the point of the second that wrote the same element (the fused
// kernel left c1's values in t[:, 2:4]); apart (S = 4, a concatenation's shape) they fuse.
TEST(AotOpViews, CopiesIntoOverlappingSlicesKeepTheirOrder) {
  for (const int start : {2, 4}) {
    const std::string name = "slice_copies_" + std::to_string(start);
    const std::string text = slice_copies_graph("2", start);
    auto g = ir::parse_graph(text);
    const Built& b = build_graph(name, *g);
    ASSERT_TRUE(b.error.empty()) << b.error;
    EXPECT_EQ(b.program_text.find("# u1, u2") != std::string::npos, start == 4) << b.program_text;
    const SliceCopies c = slice_copies(2, start);
    runtime::Model model = runtime::Model::load(b.package);
    expect_outputs(model.run(c.ins), {c.want}, name + " (package)");
    interp::Interpreter ref(*g);
    expect_outputs(ref.run(c.ins), {c.want}, name + " (interpreter)");
  }
}

// The same copies into a buffer of symbolic rows, `t: [s0, 8]` (store_box needs constant sizes;
// the stores' residues modulo the rows' 8 elements decide, store_residues_apart): overlapping
// (S = 2: columns 0..3 and 2..5 of every row) they stay two kernels and keep their order; apart
// (S = 4) they fuse. Two row counts through one package.
TEST(AotOpViews, CopiesIntoOverlappingSlicesOfSymbolicRowsKeepTheirOrder) {
  for (const int start : {2, 4}) {
    const std::string name = "slice_copies_sym_" + std::to_string(start);
    const std::string text = slice_copies_graph("s0", start);
    auto g = ir::parse_graph(text);
    const Built& b = build_graph(name, *g);
    ASSERT_TRUE(b.error.empty()) << b.error;
    EXPECT_EQ(b.program_text.find("# u1, u2") != std::string::npos, start == 4) << b.program_text;
    runtime::Model model = runtime::Model::load(b.package);
    interp::Interpreter ref(*g);
    for (const int rows : {3, 5}) {
      const SliceCopies c = slice_copies(rows, start);
      const std::string what = name + " rows " + std::to_string(rows);
      expect_outputs(model.run(c.ins), {c.want}, what + " (package)");
      expect_outputs(ref.run(c.ins), {c.want}, what + " (interpreter)");
    }
  }
}

// RoPE's rotate_half, cat([-x2, x1], dim=-1), over symbolic leading dims [s0, s1, 16] (llama's
// dynamic batch and sequence): the two pieces write columns 0..7 and 8..15 of each row, apart
// modulo 16 though every outer stride is symbolic, so the negation and both pieces are one
// kernel. The same pieces concatenated along a constant dim before the last ([s0, s1, 2, 8]:
// apart modulo 16, not modulo 8) are another. Values against hand results and the interpreter.
TEST(AotOpViews, RotateHalfOverSymbolicLeadingDimsIsOneKernel) {
  auto g = ir::parse_graph(R"(graph {
  symbols {
    s0 in [1, 16]
    s1 in [2, 64]
  }
  inputs {
    %x: f32[s0, s1, 16] = user_input
  }
  %x1: f32[s0, s1, 8] = aten.slice.Tensor(self=%x, dim=2, start=0, end=8)
  %x2: f32[s0, s1, 8] = aten.slice.Tensor(self=%x, dim=2, start=8, end=16)
  %n: f32[s0, s1, 8] = aten.neg.default(self=%x2)
  %t: f32[s0, s1, 16] = aten.cat.default(tensors=[%n, %x1], dim=-1)
  %q: f32[s0, s1, 1, 8] = aten.unsqueeze.default(self=%x2, dim=2)
  %p: f32[s0, s1, 1, 8] = aten.unsqueeze.default(self=%x1, dim=2)
  %e: f32[s0, s1, 2, 8] = aten.cat.default(tensors=[%p, %q], dim=2)
  outputs {
    user_output %t
    user_output %e
  }
})");
  const Built& b = build_graph("rotate_half_sym", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_NE(b.program_text.find("# n, t\n"), std::string::npos) << b.program_text;
  EXPECT_EQ(b.stats.loop_kernels, 2) << b.program_text;
  runtime::Model model = runtime::Model::load(b.package);
  interp::Interpreter ref(*g);
  for (const auto& [d0, d1] : std::vector<std::pair<int, int>>{{1, 3}, {2, 5}}) {
    const size_t rows = static_cast<size_t>(d0 * d1);
    std::vector<double> x(16 * rows), t(16 * rows);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i) + 0.5;
    for (size_t r = 0; r < rows; ++r)
      for (size_t j = 0; j < 8; ++j) {
        t[16 * r + j] = -x[16 * r + 8 + j];
        t[16 * r + 8 + j] = x[16 * r + j];
      }
    auto f32 = [](const std::vector<double>& v, const Shape& s) {
      return Tensor::from_vector(v, s).to(DType::kFloat32, true);
    };
    const std::vector<Tensor> ins = {f32(x, {d0, d1, 16})};
    const std::vector<Tensor> want = {f32(t, {d0, d1, 16}), f32(x, {d0, d1, 2, 8})};
    const std::string what = "rotate_half_sym " + std::to_string(d0) + "x" + std::to_string(d1);
    expect_outputs(model.run(ins), want, what + " (package)");
    expect_outputs(ref.run(ins), want, what + " (interpreter)");
  }
}

// Table ops no other fixture carried, on transposed and channels-last inputs (the stride audit of
// tests/interp/test_strides.cpp checks their layouts; here their values, compiled and
// interpreted).
TEST(AotOpViews, Strides2OpsMatchPyTorch) { check_against_pytorch("ops_strides2"); }

// A custom op with mutates_args (its kernel is user Python) is refused naming the op.
TEST(AotOpViews, AutoFunctionalizedCustomOpIsRefusedNamingIt) {
  const std::string err = ::anvil::test::error_message([] {
    frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) +
                       "/aot/ops_auto_functionalized_custom.pt2");
  });
  EXPECT_TRUE(::anvil::test::error_says(err, "anvil_fixture.scale_.default")) << err;
  EXPECT_TRUE(::anvil::test::error_says(err, "custom op")) << err;
}

}  // namespace
}  // namespace anvil::aot_test
