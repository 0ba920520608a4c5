// Graphs that write a user input: an aten.copy_ / in-place op on the input inside the graph
// (what torch.export's non-strict mode leaves for dist.all_reduce(x) of an input), and a
// user_input_mutation output spec (what functionalization records for x.add_(1)). As in eager,
// the caller's tensor holds the new value after the run, a non-contiguous one by a copy back;
// reads of the input before the write see the old value. Compared with the interpreter.
#include <gtest/gtest.h>

#include "aot_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"

namespace anvil::aot_test {
namespace {

/// x: [2, 3] float values 0.5 i - 1, y: 1 + 0.25 i.
std::vector<Tensor> make_inputs(bool transposed_x) {
  std::vector<double> xv, yv;
  for (int i = 0; i < 6; ++i) {
    xv.push_back(0.5 * i - 1);
    yv.push_back(1 + 0.25 * i);
  }
  Tensor x = transposed_x ? Tensor::from_vector(xv, {3, 2}).to(DType::kFloat32, true).transpose(0, 1)
                          : Tensor::from_vector(xv, {2, 3}).to(DType::kFloat32, true);
  return {x, Tensor::from_vector(yv, {2, 3}).to(DType::kFloat32, true)};
}

/// Compiles `text`, then for a contiguous and a transposed x: runs the package and the
/// interpreter on equal inputs and compares outputs and the inputs afterwards.
void expect_like_interpreter(const std::string& name, const std::string& text,
                             std::vector<bool> mutated) {
  auto g = ir::parse_graph(text);
  const Built& b = build_graph(name, *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  ASSERT_EQ(model.input_specs().size(), mutated.size());
  for (size_t i = 0; i < mutated.size(); ++i)
    EXPECT_EQ(model.input_specs()[i].mutated, mutated[i]) << "input " << i;
  for (bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "transposed x" : "contiguous x");
    for (int iter = 0; iter < 2; ++iter) {  // the second run reuses the runner's arena
      std::vector<Tensor> ins = make_inputs(transposed);
      std::vector<Tensor> ref;
      for (const Tensor& t : ins) ref.push_back(t.clone());
      const auto got = model.run(ins);
      interp::Interpreter interp(*g);
      const auto want = interp.run(ref);
      expect_outputs(got, want, name);
      for (size_t i = 0; i < ins.size(); ++i)
        EXPECT_LE(rel_error(ins[i], ref[i]), tolerance(DType::kFloat32))
            << "input " << i << " after the run";
      if (mutated[0]) {
        EXPECT_GT(rel_error(ins[0], make_inputs(transposed)[0]), 0.1) << "x was not written";
      }
      EXPECT_EQ(ins[0].is_contiguous(), !transposed);  // written in place, layout kept
    }
  }
}

TEST(AotInputMutation, CopyIntoAnInputInsideTheGraph) {
  // r reads x before the copy_ (old value), o reads it after (new value).
  expect_like_interpreter("copy_into_input", R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
    %y: f32[2, 3] = user_input
  }
  %r: f32[2, 3] = aten.add.Tensor(self=%x, other=%y)
  %s: f32[2, 3] = aten.mul.Tensor(self=%y, other=2)
  %c: f32[2, 3] = aten.copy_.default(self=%x, src=%s)
  %o: f32[2, 3] = aten.add.Tensor(self=%c, other=1)
  outputs {
    user_output %r
    user_output %o
  }
})",
                          {true, false});
}

TEST(AotInputMutation, InPlaceOpOnAnInput) {
  expect_like_interpreter("add_into_input", R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
    %y: f32[2, 3] = user_input
  }
  %m: f32[2, 3] = aten.mul.Tensor(self=%x, other=%y)
  %a: f32[2, 3] = aten.add_.Tensor(self=%x, other=%y)
  %o: f32[2, 3] = aten.sub.Tensor(self=%a, other=%m)
  outputs {
    user_output %o
  }
})",
                          {true, false});
}

TEST(AotInputMutation, UserInputMutationOutputSpec) {
  // x.add_(1) functionalized: the new value is an output spec naming the input; m reads the
  // old x. The input comes first among the outputs, as torch.export orders them.
  expect_like_interpreter("input_mutation_spec", R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
    %y: f32[2, 3] = user_input
  }
  %n: f32[2, 3] = aten.add.Tensor(self=%x, other=1)
  %m: f32[2, 3] = aten.mul.Tensor(self=%x, other=%y)
  outputs {
    user_input_mutation "x" %n
    user_output %m
  }
})",
                          {true, false});
}

TEST(AotInputMutation, ValuesAfterTheRun) {
  // Spelled-out values for the copy_ graph: x becomes 2y and o = 2y + 1.
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[2] = user_input
    %y: f32[2] = user_input
  }
  %s: f32[2] = aten.mul.Tensor(self=%y, other=2)
  %c: f32[2] = aten.copy_.default(self=%x, src=%s)
  %o: f32[2] = aten.add.Tensor(self=%c, other=1)
  outputs {
    user_output %o
  }
})");
  const Built& b = build_graph("copy_into_input_values", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  Tensor x = Tensor::from_vector(std::vector<double>{7, 8}, {2}).to(DType::kFloat32, true);
  const Tensor y = Tensor::from_vector(std::vector<double>{1, 3}, {2}).to(DType::kFloat32, true);
  const auto out = model.run({x, y});
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{3, 7}));
  EXPECT_EQ(x.to_doubles(), (std::vector<double>{2, 6}));
  EXPECT_EQ(y.to_doubles(), (std::vector<double>{1, 3}));
}

TEST(AotInputMutation, WriteThatReadsTheInputElsewhere) {
  // x.copy_(x.t()) and x.add_(x.t()) on a square x: the value read at (i, j) is written at
  // (j, i), so a loop writing in place would read entries it already overwrote.
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3, 3] = user_input
  }
  %t: f32[3, 3] = aten.permute.default(self=%x, dims=[1, 0])
  %m: f32[3, 3] = aten.mul.Tensor(self=%t, other=10)
  %c: f32[3, 3] = aten.copy_.default(self=%x, src=%m)
  %u: f32[3, 3] = aten.permute.default(self=%c, dims=[1, 0])
  %a: f32[3, 3] = aten.add_.Tensor(self=%c, other=%u)
  %o: f32[3, 3] = aten.mul.Tensor(self=%a, other=2)
  outputs {
    user_output %o
  }
})");
  const Built& b = build_graph("transpose_into_input", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  std::vector<double> v;
  for (int i = 0; i < 9; ++i) v.push_back(i);
  Tensor x = Tensor::from_vector(v, {3, 3}).to(DType::kFloat32, true);
  Tensor ref = x.clone();
  const auto got = model.run({x});
  interp::Interpreter interp(*g);
  const auto want = interp.run({ref});
  // x = 10 x^T, then x += x^T: x = 10 (x0^T + x0)
  std::vector<double> expect_x;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) expect_x.push_back(10.0 * (v[j * 3 + i] + v[i * 3 + j]));
  EXPECT_EQ(ref.to_doubles(), expect_x) << "the interpreter";
  EXPECT_EQ(x.to_doubles(), expect_x) << "the package";
  expect_outputs(got, want, "transpose_into_input");
}

TEST(AotInputMutation, MutationSpecWhoseValueReadsTheInputElsewhere) {
  // user_input_mutation "x" = x^T + 1 on a square x (written at the end of the run).
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3, 3] = user_input
  }
  %t: f32[3, 3] = aten.permute.default(self=%x, dims=[1, 0])
  %n: f32[3, 3] = aten.add.Tensor(self=%t, other=1)
  %s: f32[3] = aten.sum.dim_IntList(self=%x, dim=[1])
  outputs {
    user_input_mutation "x" %n
    user_output %s
  }
})");
  const Built& b = build_graph("transpose_mutation_spec", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  std::vector<double> v;
  for (int i = 0; i < 9; ++i) v.push_back(i * i);
  Tensor x = Tensor::from_vector(v, {3, 3}).to(DType::kFloat32, true);
  const auto out = model.run({x});
  std::vector<double> expect_x, expect_s(3, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      expect_x.push_back(v[j * 3 + i] + 1);
      expect_s[i] += v[i * 3 + j];  // the sum reads x before the write
    }
  EXPECT_EQ(x.to_doubles(), expect_x);
  EXPECT_EQ(out.at(0).to_doubles(), expect_s);
}

TEST(AotInputMutation, ClonesKeepTheValueFromBeforeTheWrite) {
  // clone / contiguous / _to_copy are lowered as aliases of their source until something
  // writes; a write into the source (an input, an intermediate or a view) must leave them with
  // the old value, and views of them too.
  expect_like_interpreter("clone_then_write_input", R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
    %y: f32[2, 3] = user_input
  }
  %k: f32[2, 3] = aten.clone.default(self=%x)
  %kv: f32[3, 2] = aten.permute.default(self=%k, dims=[1, 0])
  %xv: f32[3, 2] = aten.permute.default(self=%x, dims=[1, 0])
  %c: f32[2, 3] = aten.copy_.default(self=%x, src=%y)
  %o: f32[2, 3] = aten.sub.Tensor(self=%c, other=%k)
  outputs {
    user_output %o
    user_output %k
    user_output %kv
    user_output %xv
  }
})",
                          {true, false});
  expect_like_interpreter("clone_then_write_intermediate", R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
    %y: f32[2, 3] = user_input
  }
  %t: f32[2, 3] = aten.mul.Tensor(self=%x, other=%y)
  %k: f32[2, 3] = aten.clone.default(self=%t)
  %a: f32[2, 3] = aten.add_.Tensor(self=%t, other=1)
  %o: f32[2, 3] = aten.sub.Tensor(self=%a, other=%k)
  outputs {
    user_output %o
    user_output %k
  }
})",
                          {false, false});
}

TEST(AotInputMutation, WrittenInputSharingMemoryIsAClearError) {
  // x.copy_(y^T) with x and y the same tensor, or x a stride-0 broadcast: eager refuses such
  // writes ("some elements ... refer to a single memory location"); so does run(), naming the
  // input, instead of computing garbage. Separate tensors still work afterwards.
  auto g = ir::parse_graph(R"(graph {
  inputs {
    %x: f32[3, 3] = user_input
    %y: f32[3, 3] = user_input
  }
  %t: f32[3, 3] = aten.permute.default(self=%y, dims=[1, 0])
  %c: f32[3, 3] = aten.copy_.default(self=%x, src=%t)
  %o: f32[3, 3] = aten.add.Tensor(self=%c, other=1)
  outputs {
    user_output %o
  }
})");
  const Built& b = build_graph("overlapping_written_input", *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model model = runtime::Model::load(b.package);
  std::vector<double> v;
  for (int i = 0; i < 9; ++i) v.push_back(i);
  Tensor t = Tensor::from_vector(v, {3, 3}).to(DType::kFloat32, true);
  std::string e = error_of([&] { model.run({t, t}); });
  EXPECT_TRUE(contains(e, "input 'x' (#0)")) << e;
  EXPECT_TRUE(contains(e, "shares memory with input 'y' (#1)")) << e;
  EXPECT_EQ(t.to_doubles(), v) << "written before the error";
  Tensor row = Tensor::from_vector(std::vector<double>{1, 2, 3}, {1, 3}).to(DType::kFloat32, true);
  e = error_of([&] { model.run({row.expand({3, 3}), t}); });
  EXPECT_TRUE(contains(e, "several of its elements share memory")) << e;
  Tensor x = Tensor::zeros({3, 3}, DType::kFloat32);
  const auto out = model.run({x, t});
  EXPECT_EQ(x.to_doubles(), (std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
  EXPECT_EQ(out[0].to_doubles(), (std::vector<double>{1, 4, 7, 2, 5, 8, 3, 6, 9}));
}

}  // namespace
}  // namespace anvil::aot_test
