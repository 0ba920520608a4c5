// Epilogues fused into the CPU convolution extern (issue 19): relu_ (relu + copy_ back into the
// convolution's result, as the importer writes in-place ops) and residual adds (add / add_,
// either operand the convolution's result) run inside the convolution call (attributes
// fused_relu, fused_add), leaving no loop kernel in a ResNet block; on the CPU target, fp32, the
// other activations of vision models (relu6, hardswish, silu, sigmoid, gelu, clamps) fuse the
// same way (fused_act). Every graph is compared
// with the reference interpreter on each convolution path (oneDNN, its row bands, im2col, the
// direct depthwise kernel), with inputs that make relu clip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "aot_util.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "common/scoped_env.h"

namespace anvil::aot_test {
namespace {

using anvil::test::ScopedEnv;

/// Inputs of `shapes` with values in [-1, 1] from a fixed seed.
std::vector<Tensor> inputs(const std::vector<Shape>& shapes, uint32_t seed) {
  std::vector<Tensor> ins;
  for (const Shape& s : shapes) {
    std::vector<float> v(static_cast<size_t>(shape_numel(s)));
    for (float& e : v)
      e = static_cast<float>((seed = seed * 1103515245u + 12345u) % 2001) / 1000.0f - 1.0f;
    ins.push_back(Tensor::from_vector(v, s));
  }
  return ins;
}

/// Counts occurrences of `part` in `s`.
int count(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
  return n;
}

// A ResNet basic block as torch.export leaves it after the importer (relu_ and add_ as the op
// plus copy_), with G groups in both convolutions; the shortcut is %x or a 1x1 convolution.
std::string block(int groups, bool downsample) {
  const std::string cg = std::to_string(8 / groups);
  std::string t = R"(graph {
  inputs {
    %x: f32[2, 8, 10, 12] = user_input
    %w1: f32[8, CG, 3, 3] = user_input
    %b1: f32[8] = user_input
    %w2: f32[8, CG, 3, 3] = user_input
    %b2: f32[8] = user_input
    %w3: f32[8, 8, 1, 1] = user_input
  }
  %c1: f32[2, 8, 10, 12] = aten.conv2d.default(input=%x, weight=%w1, bias=%b1, padding=[1, 1], groups=G)
  %r1v: f32[2, 8, 10, 12] = aten.relu.default(self=%c1)
  %r1: f32[2, 8, 10, 12] = aten.copy_.default(self=%c1, src=%r1v)
  %c2: f32[2, 8, 10, 12] = aten.conv2d.default(input=%r1, weight=%w2, bias=%b2, padding=[1, 1], groups=G)
SHORTCUT  %av: f32[2, 8, 10, 12] = aten.add.Tensor(self=%c2, other=%s)
  %a: f32[2, 8, 10, 12] = aten.copy_.default(self=%c2, src=%av)
  %rv: f32[2, 8, 10, 12] = aten.relu.default(self=%a)
  %r: f32[2, 8, 10, 12] = aten.copy_.default(self=%a, src=%rv)
  outputs {
    user_output %r
  }
})";
  auto put = [&t](const std::string& key, const std::string& v) {
    for (size_t p = t.find(key); p != std::string::npos; p = t.find(key, p + v.size()))
      t.replace(p, key.size(), v);
  };
  put("SHORTCUT", downsample ? "  %s: f32[2, 8, 10, 12] = aten.conv2d.default(input=%x, "
                               "weight=%w3, bias=%b2)\n"
                             : "  %s: f32[2, 8, 10, 12] = aten.clone.default(self=%x)\n");
  put("CG", cg);
  put("G", std::to_string(groups));
  return t;
}

/// Runs the built graph `g` on every convolution path against the interpreter (`clips`: the
/// output is a relu's, and the inputs must make it clip).
void run_paths(const std::string& name, const ir::Graph* g, const Built& b, bool clips);

/// `graph` built with loop kernels kept off planned buffers (ANVIL_CONV_LAYOUT_LOOPS=0).
const Built& build_without_loops(const std::string& name, const ir::Graph& graph) {
  const ScopedEnv no_loops("ANVIL_CONV_LAYOUT_LOOPS", "0");
  return build_graph(name, graph);
}

/// Builds `text`, checks what was fused and how many loop kernels are left, then runs it on
/// every convolution path against the interpreter (`clips`: the output is a relu's, and the
/// inputs must make it clip).
void check(const std::string& name, const std::string& text, int fused_relu, int fused_add,
           int loops, bool clips = true, int channels_last = -1) {
  auto g = ir::parse_graph(text);
  const Built& b = build_graph(name, *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_EQ(count(b.program_text, "fused_relu"), fused_relu) << b.program_text;
  EXPECT_EQ(count(b.program_text, "fused_add"), fused_add) << b.program_text;
  EXPECT_EQ(b.stats.loop_kernels, loops) << b.program_text;
  if (channels_last >= 0) {
    EXPECT_EQ(b.stats.channels_last_buffers, channels_last) << b.program_text;
  }
  run_paths(name, g.get(), b, clips);
}

void run_paths(const std::string& name, const ir::Graph* g, const Built& b, bool clips) {
  std::vector<Shape> shapes;
  for (const auto& s : g->input_specs()) {
    Shape sh;
    for (const auto& d : s.value->type.sizes) sh.push_back(d.constant());
    shapes.push_back(sh);
  }
  const std::vector<Tensor> ins = inputs(shapes, 11);
  interp::Interpreter ref(*g);
  const auto want = ref.run(ins);
  if (clips) {
    int zeros = 0;
    for (double v : want[0].to_doubles()) zeros += v == 0.0;
    EXPECT_GT(zeros, 0) << "the inputs must make relu clip something";
  }
  runtime::Model m = load(b);
  expect_outputs(m.run(ins), want, name + " default path");
  {
    ScopedEnv bands("ANVIL_CONV_PARALLEL_MACS", "1");  // oneDNN in bands of rows
    expect_outputs(m.run(ins), want, name + " row bands");
  }
  {
    ScopedEnv path("ANVIL_CONV", "onednn");  // every convolution, 1x1 and depthwise included
    expect_outputs(m.run(ins), want, name + " onednn");
  }
  {
    ScopedEnv path("ANVIL_CONV", "im2col");  // the residual added after the convolution
    expect_outputs(m.run(ins), want, name + " im2col");
  }
  expect_outputs(m.run(ins), want, name + " again");
}

// relu_ and add_ of a basic block fuse into the convolutions: no loop kernel remains.
TEST(ConvFusion, BasicBlockInPlace) { check("fuse_block", block(1, false), 2, 1, 0); }

// The shortcut is a 1x1 convolution run after the block's second one: the sum is written over
// the second convolution's result (add_'s destination), so nothing is copied.
TEST(ConvFusion, DownsampleShortcutWritesInPlace) {
  check("fuse_block_down", block(1, true), 2, 1, 0);
}

// The block's output feeds another convolution, so every activation between them is kept
// channels-last (passes/conv_layout.cpp): the residual add and relu run on NHWC buffers.
TEST(ConvFusion, BlockInChannelsLast) {
  std::string t = block(1, true);
  t.replace(t.find("    %w3: f32[8, 8, 1, 1] = user_input\n"), 0,
            "    %w4: f32[16, 8, 3, 3] = user_input\n");
  t.replace(t.find("  outputs {"), 0,
            "  %c4: f32[2, 16, 10, 12] = aten.conv2d.default(input=%r, weight=%w4, "
            "padding=[1, 1])\n  %o: f32[2, 16, 10, 12] = aten.relu.default(self=%c4)\n");
  t.replace(t.find("user_output %r"), 14, "user_output %o");
  // %c1 and %c2 (the shortcut sum and relu are written over it) are NHWC; %x and %o NCHW
  check("fuse_block_nhwc", t, 3, 1, 0, true, 2);
}

// Depthwise convolutions (the direct kernel) take the residual after the convolution.
TEST(ConvFusion, DepthwiseBlock) { check("fuse_block_dw", block(8, false), 2, 1, 0); }

// Functional add with the convolution as `other`, then relu: both fuse.
TEST(ConvFusion, FunctionalAddEitherSide) {
  const std::string text = R"(graph {
  inputs {
    %x: f32[1, 4, 9, 9] = user_input
    %w: f32[16, 4, 3, 3] = user_input
    %b: f32[16] = user_input
    %y: f32[1, 16, 9, 9] = user_input
  }
  %c: f32[1, 16, 9, 9] = aten.conv2d.default(input=%x, weight=%w, bias=%b, padding=[1, 1])
  %a: f32[1, 16, 9, 9] = aten.add.Tensor(self=%y, other=%c)
  %r: f32[1, 16, 9, 9] = aten.relu.default(self=%a)
  outputs {
    user_output %r
  }
})";
  check("fuse_add_functional", text, 1, 1, 0);
}

// Not fused: alpha != 1, a convolution result that is also returned, relu before the add.
TEST(ConvFusion, NotFusedWhenSemanticsWouldChange) {
  const std::string base = R"(graph {
  inputs {
    %x: f32[1, 4, 9, 9] = user_input
    %w: f32[16, 4, 3, 3] = user_input
    %b: f32[16] = user_input
    %y: f32[1, 16, 9, 9] = user_input
  }
  %c: f32[1, 16, 9, 9] = aten.conv2d.default(input=%x, weight=%w, bias=%b, padding=[1, 1])
  BODY
  outputs {
    user_output %r
    OUT2
  }
})";
  auto make = [&](const std::string& body, const std::string& out2) {
    std::string t = base;
    t.replace(t.find("BODY"), 4, body);
    t.replace(t.find("OUT2"), 4, out2);
    return t;
  };
  check("nofuse_alpha",
        make("%r: f32[1, 16, 9, 9] = aten.add.Tensor(self=%c, other=%y, alpha=2)", ""), 0, 0, 1,
        false);
  check("nofuse_returned",
        make("%r: f32[1, 16, 9, 9] = aten.add.Tensor(self=%c, other=%y)", "user_output %c"), 0, 0,
        1, false);
  check("nofuse_relu_first",
        make("%q: f32[1, 16, 9, 9] = aten.relu.default(self=%c)\n"
             "  %r: f32[1, 16, 9, 9] = aten.add.Tensor(self=%q, other=%y)",
             ""),
        1, 0, 1, false);
}

// ---- activations other than relu (fused_act) -------------------------------------------------

/// A convolution of %x [1, 8, 9, 11] (groups G: 1 dense, 8 depthwise) with 16 outputs, then
/// `act` (text with %c its input and %r its result), returned.
std::string conv_then(int groups, const std::string& act) {
  const std::string cg = std::to_string(8 / groups);
  return R"(graph {
  inputs {
    %x: f32[1, 8, 9, 11] = user_input
    %w: f32[16, )" + cg + R"(, 3, 3] = user_input
    %b: f32[16] = user_input
  }
  %c: f32[1, 16, 9, 11] = aten.conv2d.default(input=%x, weight=%w, bias=%b, padding=[1, 1], groups=)" +
         std::to_string(groups) + ")\n  " + act + R"(
  outputs {
    user_output %r
  }
})";
}

/// Builds `text`, expects `fused_act` activations fused (and `loops` loop kernels), then runs
/// it on every convolution path against the interpreter.
void check_act(const std::string& name, const std::string& text, int fused_act, int loops = 0) {
  auto g = ir::parse_graph(text);
  const Built& b = build_graph(name, *g);
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_EQ(count(b.program_text, "fused_act="), fused_act) << b.program_text;
  EXPECT_EQ(count(b.program_text, "fused_relu"), 0) << b.program_text;
  EXPECT_EQ(b.stats.loop_kernels, loops) << b.program_text;
  run_paths(name, g.get(), b, false);
}

// Each activation of the vision models (MobileNet's relu6 / hardtanh and hardswish, the
// squeeze-excitation gates' sigmoid / hardsigmoid, EfficientNet's silu, gelu) and clamps runs
// inside a dense (oneDNN, im2col) and a depthwise (direct) convolution: no loop kernel is left.
// The convolution's values spread over a few units either side of 0, past the clamps' bounds.
TEST(ConvFusion, ActivationsFuseIntoConvolutions) {
  const std::pair<const char*, std::string> acts[] = {
      {"relu6", "%r: f32[1, 16, 9, 11] = aten.relu6.default(self=%c)"},
      {"hardtanh", "%r: f32[1, 16, 9, 11] = aten.hardtanh.default(self=%c, min_val=-0.5, "
                   "max_val=0.75)"},
      {"clamp", "%r: f32[1, 16, 9, 11] = aten.clamp.default(self=%c, min=-1, max=0.25)"},
      {"clamp_min", "%r: f32[1, 16, 9, 11] = aten.clamp.default(self=%c, min=0.5)"},
      {"clamp_max", "%r: f32[1, 16, 9, 11] = aten.clamp_max.default(self=%c, max=-0.25)"},
      {"hardswish", "%r: f32[1, 16, 9, 11] = aten.hardswish.default(self=%c)"},
      {"hardsigmoid", "%r: f32[1, 16, 9, 11] = aten.hardsigmoid.default(self=%c)"},
      {"silu", "%r: f32[1, 16, 9, 11] = aten.silu.default(self=%c)"},
      {"sigmoid", "%r: f32[1, 16, 9, 11] = aten.sigmoid.default(self=%c)"},
      {"gelu", "%r: f32[1, 16, 9, 11] = aten.gelu.default(self=%c)"},
      {"gelu_tanh", "%r: f32[1, 16, 9, 11] = aten.gelu.default(self=%c, approximate=\"tanh\")"},
      // silu_ as the importer writes it: silu, then copy_ back into the convolution's result
      {"silu_", "%s: f32[1, 16, 9, 11] = aten.silu.default(self=%c)\n"
                "  %r: f32[1, 16, 9, 11] = aten.copy_.default(self=%c, src=%s)"},
  };
  for (const auto& [label, act] : acts)
    for (int groups : {1, 8}) {
      SCOPED_TRACE(std::string(label) + (groups == 1 ? " dense" : " depthwise"));
      check_act(std::string("fuse_act_") + label + "_g" + std::to_string(groups),
                conv_then(groups, act), 1);
    }
}

// A residual add then an activation: both fuse, the activation applied after the sum (the
// im2col and direct paths add the residual, then activate; oneDNN: sum then eltwise post-op).
TEST(ConvFusion, ActivationAfterResidualAdd) {
  for (int groups : {1, 8}) {
    std::string t = conv_then(groups,
                              "%a: f32[1, 16, 9, 11] = aten.add.Tensor(self=%c, other=%y)\n"
                              "  %r: f32[1, 16, 9, 11] = aten.hardswish.default(self=%a)");
    t.replace(t.find("    %b: f32[16]"), 0, "    %y: f32[1, 16, 9, 11] = user_input\n");
    SCOPED_TRACE(groups);
    check_act("fuse_add_act_g" + std::to_string(groups), t, 1);
  }
}

// Not fused (a loop kernel is left): a clamp bound that is a tensor, min > max (torch gives
// max, oneDNN's clip would not), an activation of a result that is also returned, and an
// activation after one already fused.
TEST(ConvFusion, ActivationsNotFusedWhenSemanticsWouldChange) {
  std::string tensor_bound = conv_then(
      1, "%r: f32[1, 16, 9, 11] = aten.clamp.Tensor(self=%c, min=%lo)");
  tensor_bound.replace(tensor_bound.find("    %b: f32[16]"), 0,
                       "    %lo: f32[1, 16, 1, 1] = user_input\n");
  check_act("nofuse_act_tensor_bound", tensor_bound, 0, 1);
  check_act("nofuse_act_min_gt_max",
            conv_then(1, "%r: f32[1, 16, 9, 11] = aten.clamp.default(self=%c, min=1.0, max=-1.0)"),
            0, 1);
  std::string returned = conv_then(1, "%r: f32[1, 16, 9, 11] = aten.silu.default(self=%c)");
  returned.replace(returned.find("user_output %r"), 14, "user_output %r\n    user_output %c");
  check_act("nofuse_act_returned", returned, 0, 1);
  check_act("fuse_act_twice",
            conv_then(8, "%h: f32[1, 16, 9, 11] = aten.hardswish.default(self=%c)\n"
                         "  %r: f32[1, 16, 9, 11] = aten.sigmoid.default(self=%h)"),
            1, 1);
}

// By default (ANVIL_CONV_LAYOUT_LOOPS=0 at compile time turns it off) a convolution's output that
// loop kernels read may be channels-last when each of their loads steps along one dim (a permute + layer_norm over the
// channels, a per-image sum over the plane); a flattened pointwise read keeps NCHW. Values
// against the interpreter on every convolution path, with the plan on and off.
TEST(ConvFusion, LoopKernelsReadChannelsLast) {
  const std::string text = R"(graph {
  inputs {
    %x: f32[2, 8, 6, 5] = user_input
    %w: f32[12, 8, 3, 3] = user_input
    %g: f32[12] = user_input
    %bb: f32[12] = user_input
    %w2: f32[4, 8, 1, 1] = user_input
    %w3: f32[6, 8, 1, 1] = user_input
  }
  %c1: f32[2, 12, 6, 5] = aten.conv2d.default(input=%x, weight=%w, padding=[1, 1])
  %p1: f32[2, 6, 5, 12] = aten.permute.default(self=%c1, dims=[0, 2, 3, 1])
  %ln: f32[2, 6, 5, 12] = aten.layer_norm.default(input=%p1, normalized_shape=[12], weight=%g, bias=%bb)
  %c2: f32[2, 4, 6, 5] = aten.conv2d.default(input=%x, weight=%w2)
  %s2: f32[2, 4] = aten.sum.dim_IntList(self=%c2, dim=[2, 3])
  %c3: f32[2, 6, 6, 5] = aten.conv2d.default(input=%x, weight=%w3)
  %m3: f32[2, 6, 6, 5] = aten.mul.Tensor(self=%c3, other=%c3)
  outputs {
    user_output %ln
    user_output %s2
    user_output %m3
  }
})";
  auto g = ir::parse_graph(text);
  const Built& off = build_without_loops("loops_nchw", *g);
  ASSERT_TRUE(off.error.empty()) << off.error;
  EXPECT_EQ(off.stats.channels_last_buffers, 0) << off.program_text;
  const Built& on = build_graph("loops_nhwc", *g);  // the default
  ASSERT_TRUE(on.error.empty()) << on.error;
  EXPECT_GE(on.stats.channels_last_buffers, 2) << on.program_text;  // c1's and c2's outputs
  run_paths("loops_nhwc", g.get(), on, false);
  run_paths("loops_nchw", g.get(), off, false);
}

// By default (not under ANVIL_CONV_LAYOUT_LOOPS=0) a loop kernel may also write a buffer a
// convolution reads when its points are independent and each store maps to one channels-last
// element (ConvNeXt's `linear, permute, mul, add` into the next block's depthwise convolution);
// its loops are reordered so the channels run innermost. A sum over a plane (a reduction)
// writing a convolution's input keeps NCHW. Values against the interpreter on every path.
TEST(ConvFusion, LoopKernelsWriteChannelsLast) {
  const std::string text = R"(graph {
  inputs {
    %x: f32[2, 8, 6, 5] = user_input
    %w: f32[12, 8, 3, 3] = user_input
    %wl: f32[12, 12] = user_input
    %g: f32[12, 1, 1] = user_input
    %w2: f32[4, 12, 3, 3] = user_input
    %w3: f32[4, 8, 1, 1] = user_input
  }
  %c1: f32[2, 12, 6, 5] = aten.conv2d.default(input=%x, weight=%w, padding=[1, 1])
  %t: f32[2, 6, 5, 12] = aten.permute.default(self=%c1, dims=[0, 2, 3, 1])
  %l: f32[2, 6, 5, 12] = aten.linear.default(input=%t, weight=%wl)
  %p: f32[2, 12, 6, 5] = aten.permute.default(self=%l, dims=[0, 3, 1, 2])
  %m: f32[2, 12, 6, 5] = aten.mul.Tensor(self=%p, other=%g)
  %s: f32[2, 12, 6, 5] = aten.add.Tensor(self=%m, other=%c1)
  %c2: f32[2, 4, 6, 5] = aten.conv2d.default(input=%s, weight=%w2, padding=[1, 1])
  %e: f32[2, 8, 6, 1] = aten.sum.dim_IntList(self=%x, dim=[3], keepdim=True)
  %c3: f32[2, 4, 6, 1] = aten.conv2d.default(input=%e, weight=%w3)
  outputs {
    user_output %c2
    user_output %c3
  }
})";
  auto g = ir::parse_graph(text);
  const Built& off = build_without_loops("loops_w_nchw", *g);
  ASSERT_TRUE(off.error.empty()) << off.error;
  EXPECT_EQ(off.stats.channels_last_buffers, 0) << off.program_text;
  const Built& on = build_graph("loops_w_nhwc", *g);  // the default
  ASSERT_TRUE(on.error.empty()) << on.error;
  // %s and %c1 (read by %s's kernel and by the copy of %t the GEMM reads), not %e
  EXPECT_EQ(on.stats.channels_last_buffers, 2) << on.program_text;
  // both kernels: (n, h, w) outer, the 12 channels inner, loads and stores contiguous
  EXPECT_EQ(count(on.program_text, "outer [2, 6, 5] inner [12]"), 2) << on.program_text;
  EXPECT_NE(on.program_text.find("[12*o2 + 360*o0 + 60*o1 + r0] = add(mul("), std::string::npos)
      << on.program_text;
  run_paths("loops_w_nhwc", g.get(), on, false);
  run_paths("loops_w_nchw", g.get(), off, false);
}

// A concatenation whose pieces of equal channel counts are copied by one kernel (two stores into
// one buffer, DenseNet's dense blocks): the pieces' element boxes are disjoint and the kernel
// reads nothing of the buffer, so its points' order is free and the buffer goes channels-last
// with the convolution reading it. Before, two stores into one buffer kept it NCHW: on CUDA
// DenseNet-121's 108 concatenation copies read channels-last and wrote NCHW.
TEST(ConvFusion, ConcatenationPiecesInOneKernelWriteChannelsLast) {
  const std::string text = R"(graph {
  inputs {
    %x: f32[2, 8, 6, 5] = user_input
    %w0: f32[8, 8, 3, 3] = user_input
    %w1: f32[4, 8, 3, 3] = user_input
    %w2: f32[4, 8, 1, 1] = user_input
    %wc: f32[6, 16, 1, 1] = user_input
  }
  %a: f32[2, 8, 6, 5] = aten.conv2d.default(input=%x, weight=%w0, padding=[1, 1])
  %c1: f32[2, 4, 6, 5] = aten.conv2d.default(input=%a, weight=%w1, padding=[1, 1])
  %c2: f32[2, 4, 6, 5] = aten.conv2d.default(input=%a, weight=%w2)
  %t: f32[2, 16, 6, 5] = aten.cat.default(tensors=[%a, %c1, %c2], dim=1)
  %o: f32[2, 6, 6, 5] = aten.conv2d.default(input=%t, weight=%wc)
  outputs {
    user_output %o
  }
})";
  auto g = ir::parse_graph(text);
  const Built& on = build_graph("cat_pieces", *g);  // the default
  ASSERT_TRUE(on.error.empty()) << on.error;
  // the two 4-channel pieces in one kernel, (n, h, w) outer and the channels inner
  EXPECT_EQ(count(on.program_text, "outer [2, 6, 5] inner [4]"), 1) << on.program_text;
  EXPECT_NE(on.program_text.find("outer [2, 6, 5] inner [8]"), std::string::npos)
      << on.program_text;
  EXPECT_EQ(count(on.program_text, "outer [2, 4, 6] inner [5]"), 0) << on.program_text;
  run_paths("cat_pieces", g.get(), on, false);
  const Built& off = build_without_loops("cat_pieces_nchw", *g);
  ASSERT_TRUE(off.error.empty()) << off.error;
  run_paths("cat_pieces_nchw", g.get(), off, false);
}

// A convolution reading another's output (or a loop kernel's) through a reshape: the buffer has
// one [N, C, H, W] of its own, so a view of other sizes keeps it NCHW. Before, each view got
// channels-last strides of its own sizes: two orders for one buffer, wrong values (here on the
// plan without loop kernels; with them (now the default) MobileViT's unfolding planned a [256, 2, 4, 2]
// buffer by its [1, 64, 8, 8] view).
TEST(ConvFusion, ReshapedViewsKeepTheirBufferNchw) {
  const std::string text = R"(graph {
  inputs {
    %x: f32[2, 8, 4, 4] = user_input
    %w: f32[16, 8, 1, 1] = user_input
    %w2: f32[4, 4, 3, 3] = user_input
    %w3: f32[16, 8, 1, 1] = user_input
  }
  %c1: f32[2, 16, 4, 4] = aten.conv2d.default(input=%x, weight=%w)
  %v: f32[2, 4, 8, 8] = aten.view.default(self=%c1, size=[2, 4, 8, 8])
  %c2: f32[2, 4, 8, 8] = aten.conv2d.default(input=%v, weight=%w2, padding=[1, 1])
  %c3: f32[2, 16, 4, 4] = aten.conv2d.default(input=%x, weight=%w3)
  %a: f32[2, 16, 4, 4] = aten.add.Tensor(self=%c3, other=1.0)
  %va: f32[2, 4, 8, 8] = aten.view.default(self=%a, size=[2, 4, 8, 8])
  %c4: f32[2, 4, 8, 8] = aten.conv2d.default(input=%va, weight=%w2, padding=[1, 1])
  outputs {
    user_output %c2
    user_output %c4
  }
})";
  auto g = ir::parse_graph(text);
  const Built& plain = build_without_loops("reshaped_views", *g);
  ASSERT_TRUE(plain.error.empty()) << plain.error;
  EXPECT_EQ(plain.stats.channels_last_buffers, 0) << plain.program_text;
  run_paths("reshaped_views", g.get(), plain, false);
  const Built& with_loops = build_graph("reshaped_views_loops", *g);  // the default
  ASSERT_TRUE(with_loops.error.empty()) << with_loops.error;
  run_paths("reshaped_views_loops", g.get(), with_loops, false);
}


// Loop kernels storing into one buffer from several statements, next to convolutions, against
// the interpreter on every convolution path: concatenations along the channels (a piece twice,
// a flipped piece, a read of the result flipped), the rows and the batch; slice_scatters into
// overlapping and interleaved channels; and copies into overlapping channel slices of a clone
// (two kernels: fused, a point's store could land after a later copy's).
TEST(ConvFusion, SeveralStoresIntoOneBufferMatchTheInterpreter) {
  const std::string head = R"(graph {
  inputs {
    %x: f32[2, 8, 6, 5] = user_input
    %w0: f32[8, 8, 3, 3] = user_input
    %w1: f32[4, 8, 3, 3] = user_input
    %w2: f32[4, 8, 1, 1] = user_input
    %wc: f32[6, 8, 1, 1] = user_input
    %w4: f32[6, 4, 1, 1] = user_input
  }
  %a: f32[2, 8, 6, 5] = aten.conv2d.default(input=%x, weight=%w0, padding=[1, 1])
  %c1: f32[2, 4, 6, 5] = aten.conv2d.default(input=%a, weight=%w1, padding=[1, 1])
  %c2: f32[2, 4, 6, 5] = aten.conv2d.default(input=%a, weight=%w2)
)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"cat_same", R"(  %t: f32[2, 8, 6, 5] = aten.cat.default(tensors=[%c1, %c1], dim=1)
  %o: f32[2, 6, 6, 5] = aten.conv2d.default(input=%t, weight=%wc)
)"},
      {"cat_flipped_piece", R"(  %f: f32[2, 4, 6, 5] = aten.flip.default(self=%c1, dims=[1, 2])
  %t: f32[2, 8, 6, 5] = aten.cat.default(tensors=[%f, %c2], dim=1)
  %o: f32[2, 6, 6, 5] = aten.conv2d.default(input=%t, weight=%wc)
)"},
      {"cat_read_flipped", R"(  %t: f32[2, 8, 6, 5] = aten.cat.default(tensors=[%c1, %c2], dim=1)
  %f: f32[2, 8, 6, 5] = aten.flip.default(self=%t, dims=[1, 3])
  %r: f32[2, 8, 6, 5] = aten.add.Tensor(self=%t, other=%f)
  %o: f32[2, 6, 6, 5] = aten.conv2d.default(input=%r, weight=%wc)
)"},
      {"cat_rows", R"(  %t: f32[2, 4, 12, 5] = aten.cat.default(tensors=[%c1, %c2], dim=2)
  %o: f32[2, 6, 12, 5] = aten.conv2d.default(input=%t, weight=%w4)
)"},
      {"cat_batch", R"(  %t: f32[4, 4, 6, 5] = aten.cat.default(tensors=[%c2, %c1], dim=0)
  %o: f32[4, 6, 6, 5] = aten.conv2d.default(input=%t, weight=%w4)
)"},
      {"scatter_overlap", R"(  %s1: f32[2, 8, 6, 5] = aten.slice_scatter.default(self=%a, src=%c1, dim=1, start=0, end=4)
  %s2: f32[2, 8, 6, 5] = aten.slice_scatter.default(self=%s1, src=%c2, dim=1, start=2, end=6)
  %o: f32[2, 6, 6, 5] = aten.conv2d.default(input=%s2, weight=%wc)
)"},
      {"scatter_step", R"(  %s1: f32[2, 8, 6, 5] = aten.slice_scatter.default(self=%a, src=%c1, dim=1, start=0, end=8, step=2)
  %s2: f32[2, 8, 6, 5] = aten.slice_scatter.default(self=%s1, src=%c2, dim=1, start=1, end=8, step=2)
  %o: f32[2, 6, 6, 5] = aten.conv2d.default(input=%s2, weight=%wc)
)"},
      {"copies_overlap", R"(  %t: f32[2, 8, 6, 5] = aten.clone.default(self=%a)
  %v1: f32[2, 4, 6, 5] = aten.slice.Tensor(self=%t, dim=1, start=0, end=4)
  %u1: f32[2, 4, 6, 5] = aten.copy_.default(self=%v1, src=%c1)
  %v2: f32[2, 4, 6, 5] = aten.slice.Tensor(self=%t, dim=1, start=2, end=6)
  %u2: f32[2, 4, 6, 5] = aten.copy_.default(self=%v2, src=%c2)
  %o: f32[2, 6, 6, 5] = aten.conv2d.default(input=%t, weight=%wc)
)"},
  };
  for (const auto& [name, body] : cases) {
    SCOPED_TRACE(name);
    auto g = ir::parse_graph(head + body + "  outputs {\n    user_output %o\n  }\n}");
    const Built& b = build_graph("stores_" + name, *g);
    ASSERT_TRUE(b.error.empty()) << b.error;
    run_paths("stores_" + name, g.get(), b, false);
  }
}

}  // namespace
}  // namespace anvil::aot_test
