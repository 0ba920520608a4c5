// Integration: small graphs written in the text IR cover the lowering rules (pointwise with
// broadcasting, reductions, softmax / layer_norm / RMSNorm, views and non-contiguous layouts,
// cat / stack, GEMMs in every layout, int64 / bool / bf16 / f64, creation ops, in-place buffer
// updates, zero-size tensors, NaN / inf, symbolic sizes). All are compiled into one library and
// compared with the interpreter (fp32 1e-4, bf16 2e-2, integers exactly).
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace anvil {
namespace {

struct Case {
  const char* name;
  const char* text;
};

// clang-format off
const Case kCases[] = {
{"broadcast_chain", R"(graph {
  inputs {
    %w: f32[8] = parameter "w"
    %x: f32[4, 8] = user_input
    %y: f32[4, 1] = user_input
  }
  %a: f32[4, 8] = aten.add.Tensor(self=%x, other=%w, alpha=2.0)
  %b: f32[4, 8] = aten.mul.Tensor(self=%a, other=%y)
  %c: f32[4, 8] = aten.exp.default(self=%b)
  %d: f32[4, 8] = aten.sub.Tensor(self=%c, other=1.5)
  %e: f32[4, 8] = aten.div.Tensor(self=%d, other=%y)
  %f: f32[4, 8] = aten.maximum.default(self=%e, other=%x)
  %g: bool[4, 8] = aten.gt.Scalar(self=%f, other=0.25)
  %h: f32[4, 8] = aten.where.self(condition=%g, self=%f, other=%x)
  %i: f32[4, 8] = aten.rsub.Scalar(self=%h, other=3)
  outputs {
    user_output %i
    user_output %g
  }
})"},
{"unary_math", R"(graph {
  inputs {
    %x: f32[3, 5] = user_input
  }
  %a: f32[3, 5] = aten.abs.default(self=%x)
  %b: f32[3, 5] = aten.sqrt.default(self=%a)
  %c: f32[3, 5] = aten.reciprocal.default(self=%b)
  %d: f32[3, 5] = aten.tanh.default(self=%x)
  %e: f32[3, 5] = aten.erf.default(self=%x)
  %f: f32[3, 5] = aten.sigmoid.default(self=%x)
  %g: f32[3, 5] = aten.silu.default(self=%x)
  %h: f32[3, 5] = aten.gelu.default(self=%x, approximate="tanh")
  %i: f32[3, 5] = aten.gelu.default(self=%x)
  %j: f32[3, 5] = aten.neg.default(self=%x)
  %k: f32[3, 5] = aten.clamp.default(self=%x, min=-0.5, max=0.75)
  %l: f32[3, 5] = aten.pow.Tensor_Scalar(self=%a, exponent=1.7)
  %m: f32[3, 5] = aten.pow.Tensor_Tensor(self=%a, exponent=%x)
  %n: f32[3, 5] = aten.div.Tensor_mode(self=%x, other=0.3, rounding_mode="floor")
  %o: f32[3, 5] = aten.sin.default(self=%x)
  %p: f32[3, 5] = aten.cos.default(self=%x)
  %q: f32[3, 5] = aten.log.default(self=%a)
  %r: f32[3, 5] = aten.relu.default(self=%x)
  %s: f32[3, 5] = aten.rsqrt.default(self=%a)
  outputs {
    user_output %c
    user_output %d
    user_output %e
    user_output %f
    user_output %g
    user_output %h
    user_output %i
    user_output %j
    user_output %k
    user_output %l
    user_output %m
    user_output %n
    user_output %o
    user_output %p
    user_output %q
    user_output %r
    user_output %s
  }
})"},
{"reductions", R"(graph {
  inputs {
    %x: f32[6, 5, 4] = user_input
  }
  %a: f32[6, 1, 4] = aten.sum.dim_IntList(self=%x, dim=[1], keepdim=True)
  %b: f32[5, 4] = aten.mean.dim(self=%x, dim=[0])
  %c: f32[6] = aten.amax.default(self=%x, dim=[1, 2])
  %d: f32[5] = aten.amin.default(self=%x, dim=[0, 2])
  %e: f32[] = aten.sum.default(self=%x)
  %f: f32[6, 5, 4] = aten.sub.Tensor(self=%x, other=%a)
  %g: f32[] = aten.mean.default(self=%f)
  outputs {
    user_output %a
    user_output %b
    user_output %c
    user_output %d
    user_output %e
    user_output %f
    user_output %g
  }
})"},
{"norms", R"(graph {
  inputs {
    %w: f32[16] = parameter "w"
    %bias: f32[16] = parameter "bias"
    %x: f32[3, 7, 16] = user_input
    %r: f32[3, 7, 16] = user_input
  }
  %sm: f32[3, 7, 16] = aten.softmax.int(self=%x, dim=-1)
  %sm0: f32[3, 7, 16] = aten._softmax.default(self=%x, dim=1, half_to_float=False)
  %lsm: f32[3, 7, 16] = aten.log_softmax.int(self=%x, dim=2)
  %ln: f32[3, 7, 16] = aten.layer_norm.default(input=%x, normalized_shape=[16], weight=%w, bias=%bias, eps=1e-05)
  %h: f32[3, 7, 16] = aten.add.Tensor(self=%x, other=%r)
  %p: f32[3, 7, 16] = aten.pow.Tensor_Scalar(self=%h, exponent=2)
  %m: f32[3, 7, 1] = aten.mean.dim(self=%p, dim=[-1], keepdim=True)
  %e: f32[3, 7, 1] = aten.add.Tensor(self=%m, other=1e-06)
  %rs: f32[3, 7, 1] = aten.rsqrt.default(self=%e)
  %n: f32[3, 7, 16] = aten.mul.Tensor(self=%h, other=%rs)
  %rms: f32[3, 7, 16] = aten.mul.Tensor(self=%w, other=%n)
  outputs {
    user_output %sm
    user_output %sm0
    user_output %lsm
    user_output %ln
    user_output %rms
    user_output %h
  }
})"},
{"views", R"(graph {
  inputs {
    %x: f32[2, 3, 4] = user_input
    %y: f32[4, 3] = user_input
  }
  %t: f32[4, 3, 2] = aten.permute.default(self=%x, dims=[2, 1, 0])
  %r: f32[12, 2] = aten.reshape.default(self=%t, shape=[12, 2])
  %r2: f32[2, 12] = aten.view.default(self=%x, size=[2, 12])
  %tr: f32[12, 2] = aten.t.default(self=%r2)
  %s: f32[12, 2] = aten.add.Tensor(self=%r, other=%tr)
  %sl: f32[2, 3, 2] = aten.slice.Tensor(self=%x, dim=2, start=1, end=9223372036854775807, step=2)
  %se: f32[2, 4] = aten.select.int(self=%x, dim=1, index=-1)
  %u: f32[2, 1, 4] = aten.unsqueeze.default(self=%se, dim=1)
  %ex: f32[2, 3, 4] = aten.expand.default(self=%u, size=[-1, 3, 4])
  %z: f32[2, 3, 4] = aten.mul.Tensor(self=%ex, other=%x)
  %yt: f32[3, 4] = aten.transpose.int(self=%y, dim0=0, dim1=1)
  %w: f32[2, 3, 4] = aten.add.Tensor(self=%z, other=%yt)
  %sq: f32[2, 4] = aten.squeeze.dim(self=%u, dim=1)
  %fl: f32[2, 12] = aten.flatten.using_ints(self=%w, start_dim=1)
  %uf: f32[2, 3, 2, 2] = aten.unflatten.int(self=%w, dim=2, sizes=[2, 2])
  [%sp0: f32[2, 3, 2], %sp1: f32[2, 3, 2]] = aten.split.Tensor(self=%w, split_size=2, dim=2)
  %spa: f32[2, 3, 2] = aten.sub.Tensor(self=%sp0, other=%sp1)
  [%ub0: f32[2, 4], %ub1: f32[2, 4], %ub2: f32[2, 4]] = aten.unbind.int(self=%w, dim=1)
  %ubs: f32[2, 4] = aten.add.Tensor(self=%ub0, other=%ub2)
  %nr: f32[2, 2, 4] = aten.narrow.default(self=%x, dim=1, start=1, length=2)
  outputs {
    user_output %s
    user_output %sl
    user_output %sq
    user_output %fl
    user_output %uf
    user_output %spa
    user_output %ubs
    user_output %nr
    user_output %t
  }
})"},
{"joins", R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
    %y: f32[2, 5] = user_input
  }
  %a: f32[2, 3] = aten.mul.Tensor(self=%x, other=2.0)
  %c: f32[2, 8] = aten.cat.default(tensors=[%a, %y], dim=1)
  %d: f32[2, 8] = aten.add.Tensor(self=%c, other=1.0)
  %s: f32[2, 2, 3] = aten.stack.default(tensors=[%x, %a], dim=1)
  %e: f32[4, 3] = aten.cat.default(tensors=[%x, %a])
  outputs {
    user_output %d
    user_output %s
    user_output %e
  }
})"},
{"gemms", R"(graph {
  inputs {
    %w: f32[6, 5] = parameter "w"
    %bias: f32[6] = parameter "bias"
    %x: f32[3, 4, 5] = user_input
    %m1: f32[4, 5] = user_input
    %m2: f32[5, 7] = user_input
    %b1: f32[3, 4, 5] = user_input
    %b2: f32[3, 5, 2] = user_input
    %v: f32[5] = user_input
  }
  %lin: f32[3, 4, 6] = aten.linear.default(input=%x, weight=%w, bias=%bias)
  %lin_nb: f32[3, 4, 6] = aten.linear.default(input=%x, weight=%w)
  %xt: f32[5, 4] = aten.t.default(self=%m1)
  %xtt: f32[4, 5] = aten.t.default(self=%xt)
  %mm: f32[4, 7] = aten.mm.default(self=%xtt, mat2=%m2)
  %m2t: f32[7, 5] = aten.t.default(self=%m2)
  %mmt: f32[4, 7] = aten.mm.default(self=%m1, mat2=%m2)
  %am: f32[4, 7] = aten.addmm.default(self=%mm, mat1=%m1, mat2=%m2, beta=0.5, alpha=2.0)
  %bmm: f32[3, 4, 2] = aten.bmm.default(self=%b1, mat2=%b2)
  %bb: f32[3, 4, 2] = aten.baddbmm.default(self=%bmm, batch1=%b1, batch2=%b2, beta=1.0, alpha=0.5)
  %mt: f32[3, 4, 7] = aten.matmul.default(self=%x, other=%m2)
  %mv: f32[3, 4] = aten.matmul.default(self=%x, other=%v)
  %vm: f32[7] = aten.matmul.default(self=%v, other=%m2)
  %dot: f32[] = aten.matmul.default(self=%v, other=%v)
  %b2t: f32[3, 2, 5] = aten.transpose.int(self=%b2, dim0=1, dim1=2)
  %mtb: f32[3, 4, 2] = aten.matmul.default(self=%b1, other=%b2)
  %xp: f32[4, 3, 5] = aten.permute.default(self=%x, dims=[1, 0, 2])
  %linp: f32[4, 3, 6] = aten.linear.default(input=%xp, weight=%w, bias=%bias)
  %g: f32[3, 4, 6] = aten.gelu.default(self=%lin)
  %o: f32[5, 5] = aten.outer.default(self=%v, vec2=%v)
  outputs {
    user_output %g
    user_output %lin_nb
    user_output %mmt
    user_output %am
    user_output %bb
    user_output %mt
    user_output %mv
    user_output %vm
    user_output %dot
    user_output %mtb
    user_output %linp
    user_output %o
    user_output %b2t
  }
})"},
{"ints_and_bools", R"(graph {
  inputs {
    %i: i64[4, 6] = user_input
    %x: f32[4, 6] = user_input
  }
  %r: i64[6] = aten.arange.default(end=6, *dtype=i64, *device=device(cpu), *pin_memory=False)
  %a: i64[4, 6] = aten.add.Tensor(self=%i, other=%r)
  %m: i64[4, 6] = aten.mul.Tensor(self=%a, other=3)
  %fd: i64[4, 6] = aten.div.Tensor_mode(self=%m, other=4, rounding_mode="floor")
  %e: bool[4, 6] = aten.eq.Scalar(self=%fd, other=2)
  %ne: bool[4, 6] = aten.ne.Tensor(self=%i, other=%r)
  %an: bool[4, 6] = aten.__and__.Tensor(self=%e, other=%ne)
  %nt: bool[4, 6] = aten.logical_not.default(self=%an)
  %s: i64[4] = aten.sum.dim_IntList(self=%fd, dim=[1])
  %f: f32[4, 6] = aten.to.dtype(self=%fd, dtype=f32)
  %mf: f32[4, 6] = aten.masked_fill.Scalar(self=%x, mask=%nt, value=-1.5)
  %tf: f32[4, 6] = aten.div.Tensor(self=%i, other=2)
  %ti: i64[4, 6] = aten._to_copy.default(self=%x, *dtype=i64)
  %ar: f32[5] = aten.arange.start_step(start=0.5, end=3.0, step=0.5, *dtype=f32)
  %any: bool[4] = aten.any.dim(self=%an, dim=1)
  outputs {
    user_output %fd
    user_output %an
    user_output %nt
    user_output %s
    user_output %f
    user_output %mf
    user_output %tf
    user_output %ti
    user_output %ar
    user_output %any
  }
})"},
{"bf16", R"(graph {
  inputs {
    %w: bf16[8, 16] = parameter "w"
    %x: bf16[4, 16] = user_input
  }
  %a: bf16[4, 16] = aten.mul.Tensor(self=%x, other=1.5)
  %s: bf16[4, 16] = aten.softmax.int(self=%a, dim=-1)
  %l: bf16[4, 8] = aten.linear.default(input=%s, weight=%w)
  %sum: bf16[4] = aten.sum.dim_IntList(self=%l, dim=[1])
  %f: f32[4, 8] = aten.to.dtype(self=%l, dtype=f32)
  outputs {
    user_output %l
    user_output %sum
    user_output %f
  }
})"},
{"f64", R"(graph {
  inputs {
    %x: f64[3, 4] = user_input
    %y: f64[4, 2] = user_input
  }
  %a: f64[3, 4] = aten.exp.default(self=%x)
  %m: f64[3, 2] = aten.mm.default(self=%a, mat2=%y)
  %s: f64[3, 2] = aten.softmax.int(self=%m, dim=0)
  outputs {
    user_output %s
  }
})"},
{"creation", R"(graph {
  inputs {
    %x: f32[3, 4] = user_input
  }
  %f: f32[3, 4] = aten.full.default(size=[3, 4], fill_value=2.5, *dtype=f32)
  %o: f32[3, 4] = aten.ones_like.default(self=%x)
  %z: i64[2, 2] = aten.new_zeros.default(self=%x, size=[2, 2], *dtype=i64)
  %st: f32[] = aten.scalar_tensor.default(s=7)
  %a: f32[3, 4] = aten.add.Tensor(self=%f, other=%o)
  %b: f32[3, 4] = aten.mul.Tensor(self=%a, other=%st)
  %c: f32[3, 4] = aten.add.Tensor(self=%b, other=%x)
  outputs {
    user_output %c
    user_output %z
  }
})"},
{"buffer_update", R"(graph {
  inputs {
    %b_acc: f32[4] = buffer "acc" persistent
    %b_n: i64[] = buffer "n" persistent
    %x: f32[3, 4] = user_input
  }
  %s: f32[4] = aten.sum.dim_IntList(self=%x, dim=[0])
  %a: f32[4] = aten.add_.Tensor(self=%b_acc, other=%s)
  %n: i64[] = aten.add_.Tensor(self=%b_n, other=1)
  %y: f32[3, 4] = aten.mul.Tensor(self=%x, other=%a)
  %nf: f32[] = aten.to.dtype(self=%n, dtype=f32)
  %z: f32[3, 4] = aten.div.Tensor(self=%y, other=%nf)
  outputs {
    user_output %z
  }
})"},
{"zero_size", R"(graph {
  inputs {
    %x: f32[0, 4] = user_input
    %y: f32[3, 4] = user_input
  }
  %a: f32[0, 4] = aten.add.Tensor(self=%x, other=1.0)
  %s: f32[4] = aten.sum.dim_IntList(self=%x, dim=[0])
  %b: f32[3, 4] = aten.add.Tensor(self=%y, other=%s)
  %c: f32[3, 0] = aten.slice.Tensor(self=%y, dim=1, start=4, end=9223372036854775807)
  outputs {
    user_output %a
    user_output %b
    user_output %c
  }
})"},
{"long_rows", R"(graph {
  inputs {
    %x: f32[3, 9000] = user_input
    %b: f32[9000] = user_input
  }
  %a: f32[3, 9000] = aten.add.Tensor(self=%x, other=%b)
  %g: f32[3, 9000] = aten.gelu.default(self=%a)
  %t: f32[3, 9000] = aten.tanh.default(self=%g)
  %s: f32[3, 9000] = aten.sigmoid.default(self=%a)
  %e: f32[3, 9000] = aten.exp.default(self=%t)
  outputs {
    user_output %e
    user_output %s
  }
})"},
{"dynamic", R"(graph {
  symbols {
    s0 in [1, 16]
  }
  inputs {
    %w: f32[8, 8] = parameter "w"
    %x: f32[s0, 8] = user_input
  }
  %sm: f32[s0, 8] = aten.softmax.int(self=%x, dim=-1)
  %l: f32[s0, 8] = aten.linear.default(input=%sm, weight=%w)
  %t: f32[8, s0] = aten.t.default(self=%l)
  %c: f32[8, s0] = aten.contiguous.default(self=%t)
  %m: f32[8] = aten.mean.dim(self=%c, dim=[1])
  outputs {
    user_output %l
    user_output %c
    user_output %m
  }
})"},
};
// clang-format on

/// Input shapes for a case (symbolic dims get `s0`).
std::vector<Tensor> make_inputs(const ir::Graph& g, int64_t s0, uint64_t seed) {
  std::vector<Tensor> ins;
  for (const auto& spec : g.input_specs()) {
    if (spec.kind != ir::InputKind::kUserInput) continue;
    Shape sizes;
    for (const auto& s : spec.value->type.sizes)
      sizes.push_back(s.is_constant() ? s.constant() : s0);
    ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
  }
  return ins;
}

class GraphCodegen : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::pair<std::string, const ir::Graph*>> list;
    uint64_t seed = 100;
    for (const Case& c : kCases) {
      auto g = ir::parse_graph(c.text);
      ir::verify(*g);
      for (const auto& spec : g->input_specs())
        if (spec.kind != ir::InputKind::kUserInput) {
          Shape sizes;
          for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
          g->constants[spec.target] = testing::random_tensor(sizes, spec.value->type.dtype, seed++);
        }
      list.emplace_back(c.name, g.get());
      graphs_[c.name] = std::move(g);
    }
    codegen::CpuCodegenOptions o;
    o.num_translation_units = 1;
    o.parallel_min_work = 16;  // exercise chunked outer loops
    lib_ = testing::build_library(list, o);
  }
  static void TearDownTestSuite() {
    lib_.reset();
    graphs_.clear();
  }

  /// Runs `name` `runs` times on the same inputs and compares every output with the interpreter.
  void check(const std::string& name, std::vector<Tensor> ins = {}, int runs = 1) {
    const ir::Graph& g = *graphs_.at(name);
    if (ins.empty()) ins = make_inputs(g, 1, 7);
    interp::Interpreter ref(g);
    auto& model = lib_->model(name);
    for (int r = 0; r < runs; ++r) {
      const auto want = ref.run(ins);
      const auto got = model.run(ins);
      ASSERT_EQ(got.size(), want.size()) << name;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].sizes(), want[i].sizes()) << name << " output " << i;
        ASSERT_EQ(got[i].dtype(), want[i].dtype()) << name << " output " << i;
        const bool exact = !is_floating(want[i].dtype());
        // bf16 graphs compute in f32 without rounding every intermediate: bf16 tolerance for all
        const bool low = want[i].dtype() == DType::kBFloat16 || name == "bf16";
        const double tol = exact ? 0.0 : low ? 2e-2 : 1e-4;
        EXPECT_LE(testing::rel_error(got[i], want[i]), tol)
            << name << " run " << r << " output " << i;
      }
    }
  }

  static std::map<std::string, std::unique_ptr<ir::Graph>> graphs_;
  static std::unique_ptr<testing::TestLibrary> lib_;
};

std::map<std::string, std::unique_ptr<ir::Graph>> GraphCodegen::graphs_;
std::unique_ptr<testing::TestLibrary> GraphCodegen::lib_;

TEST_F(GraphCodegen, BroadcastChain) { check("broadcast_chain"); }
TEST_F(GraphCodegen, UnaryMath) { check("unary_math"); }
TEST_F(GraphCodegen, Reductions) { check("reductions"); }
TEST_F(GraphCodegen, SoftmaxLayerNormRmsNorm) { check("norms"); }
TEST_F(GraphCodegen, ViewsAndNonContiguousLayouts) { check("views"); }
TEST_F(GraphCodegen, CatAndStack) { check("joins"); }
TEST_F(GraphCodegen, GemmsInEveryLayout) { check("gemms"); }
TEST_F(GraphCodegen, IntsAndBools) { check("ints_and_bools"); }
TEST_F(GraphCodegen, BFloat16) { check("bf16"); }
TEST_F(GraphCodegen, Float64) { check("f64"); }
TEST_F(GraphCodegen, CreationOps) { check("creation"); }
TEST_F(GraphCodegen, BufferUpdatesPersistAcrossRuns) { check("buffer_update", {}, 3); }
TEST_F(GraphCodegen, ZeroSizeTensors) { check("zero_size"); }
TEST_F(GraphCodegen, LongRowsSplitIntoChunks) { check("long_rows"); }

TEST_F(GraphCodegen, NanAndInfPassThrough) {
  const ir::Graph& g = *graphs_.at("broadcast_chain");
  auto ins = make_inputs(g, 1, 3);
  float* x = ins[0].data<float>();
  x[0] = NAN;
  x[5] = INFINITY;
  x[9] = -INFINITY;
  check("broadcast_chain", ins);
  check("unary_math", {[] {
          Tensor t = testing::random_tensor({3, 5}, DType::kFloat32, 11);
          t.data<float>()[2] = NAN;
          t.data<float>()[7] = INFINITY;
          return t;
        }()});
}

TEST_F(GraphCodegen, SymbolicSizesEveryValue) {
  const ir::Graph& g = *graphs_.at("dynamic");
  for (int64_t s0 : {1, 2, 5, 16}) check("dynamic", make_inputs(g, s0, static_cast<uint64_t>(s0)));
}

}  // namespace
}  // namespace anvil
