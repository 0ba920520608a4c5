// Layout planning for convolutions (issue 19): an activation that only convolutions touch
// (written by one, read as another's input or fused residual) is kept channels-last (NHWC)
// instead of NCHW. Only the views change (sizes stay [N, C, H, W], strides become
// [HWC, 1, WC, C]); everything else sees NCHW as before: a buffer any loop kernel, GEMM or other
// extern touches keeps its layout.
//  * CPU: oneDNN's AVX-512 convolutions compute in nhwc, so such a buffer needs no reorder on
//    either side: a ResNet's activations between its convolutions are reordered once (from the
//    first convolution's input) instead of twice per convolution. One-group convolutions only
//    (the direct depthwise kernel and grouped oneDNN convolutions keep NCHW); the convolution
//    extern takes dense channels-last inputs, outputs and residuals on every path
//    (runtime/kernels/conv.cpp).
//  * CUDA: cuDNN's tensor-core engines read and write NHWC (NCHW costs transposes inside cuDNN
//    around every convolution). Any group count; the pooling kernels (emit_cuda_pool.cpp, any
//    strides) may read and write NHWC too. A convolution's output and residual end up in one
//    layout (a buffer that must stay NCHW keeps the other NCHW); its input may be in the other
//    (the stem reads the NCHW graph input and writes NHWC). A depthwise convolution on
//    anvil's direct kernel takes any layout on either side (ANVIL_CUDA_DW_ANY_LAYOUT=1), and
//    so does a convolution of few input channels on anvil's direct stem kernel (the default).
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env_switch.h"
#include "passes/lower_internal.h"
#include "passes/stem_rule.h"

namespace anvil::passes::detail {

namespace {

/// A 2-D convolution extern the target computes channels-last: not transposed, 4-D, one group
/// on the CPU, any constant group count on CUDA.
bool planned_conv(const ExternStep& e, bool cuda) {
  if (e.target != "aten.convolution.default" && e.target != "aten.conv2d.default") return false;
  if (const ExternAttr* t = find_attr(e, "transposed"); t && !is_const(t->i, 0)) return false;
  if (const ExternAttr* g = find_attr(e, "groups"); g && !is_const(g->i, 1)) {
    if (!cuda || g->kind != 0 || !g->i.is_constant()) return false;
  }
  return e.outputs.size() == 1 && !e.inputs.empty() && e.inputs[0].sizes.size() == 4;
}

/// A 2-D pooling extern whose CUDA kernel takes any strides (emit_cuda_pool.cpp): floating
/// dtypes and constant windows (the others run the host path, whose output is contiguous).
bool planned_pool(const ExternStep& e, bool cuda) {
  if (!cuda ||
      (e.target != "aten.max_pool2d.default" && e.target != "aten.avg_pool2d.default" &&
       e.target != "aten.adaptive_avg_pool2d.default" &&
       e.target != "aten._adaptive_avg_pool2d.default") ||
      e.inputs.size() != 1 || e.outputs.size() != 1 || e.inputs[0].sizes.size() != 4 ||
      e.outputs[0].sizes.size() != 4)
    return false;
  const DType t = e.inputs[0].dtype;
  if (t != DType::kFloat32 && t != DType::kBFloat16 && t != DType::kFloat16 && t != DType::kFloat64)
    return false;
  for (const ExternAttr& a : e.attrs) {
    if (a.kind == 0 && !a.i.is_constant()) return false;
    if (a.kind == 3)
      for (const SymInt& v : a.ints)
        if (!v.is_constant()) return false;
  }
  return true;
}

/// The whole of arena buffer `b` as an NCHW view (its sizes are the logical [N, C, H, W]).
TensorView whole_view(const Program& p, int b) {
  const Buffer& buf = p.buffers[static_cast<size_t>(b)];
  TensorView v;
  v.buffer = b;
  v.dtype = buf.dtype;
  v.sizes = buf.sizes;
  v.strides = contiguous(buf.sizes);
  v.offset = SymInt(0);
  return v;
}

/// True when `v` is a 4-D view of a buffer with constant sizes, strides and offset.
bool constant_view(const TensorView& v) {
  if (v.buffer < 0 || v.sizes.size() != 4 || !v.offset.is_constant()) return false;
  for (const auto* list : {&v.sizes, &v.strides})
    for (const SymInt& d : *list)
      if (!d.is_constant()) return false;
  return true;
}

/// Inserts, before step `at`, a loop kernel copying `x` (constant_view) into a new arena buffer
/// in channels-last order (the plan gives its views NHWC strides); returns the buffer.
int nhwc_copy(Program& p, const TensorView& x, const std::string& node, size_t at) {
  const int64_t n = x.sizes[0].constant(), c = x.sizes[1].constant(), h = x.sizes[2].constant(),
                w = x.sizes[3].constant();
  Buffer buf;
  const Buffer& source = p.buffers[static_cast<size_t>(x.buffer)];
  buf.name = source.name + "_nhwc";
  buf.dtype = x.dtype;
  buf.sizes = x.sizes;
  buf.numel = SymInt(n * c * h * w);
  buf.nodes = source.nodes;
  const int b = static_cast<int>(p.buffers.size());
  p.buffers.push_back(buf);
  // outer (n, h, w), inner c: the store walks the NHWC buffer in order
  const SymInt o0 = SymInt::symbol("o0"), o1 = SymInt::symbol("o1"), o2 = SymInt::symbol("o2"),
               r0 = SymInt::symbol("r0");
  const SymInt src =
      x.offset + o0 * x.strides[0] + r0 * x.strides[1] + o1 * x.strides[2] + o2 * x.strides[3];
  Stmt st;
  st.kind = Stmt::Kind::kStore;
  st.buffer = b;
  st.index = o0 * SymInt(h * w * c) + o1 * SymInt(w * c) + o2 * SymInt(c) + r0;
  st.expr = p.exprs.load(x.buffer, src, x.dtype);
  st.dtype = x.dtype;
  LoopKernel k;
  k.name = "knhwc" + std::to_string(b);
  if (!node.empty()) k.nodes = {node};
  k.outer = {SymInt(n), SymInt(h), SymInt(w)};
  k.inner = {SymInt(c)};
  k.passes.resize(1);
  k.passes[0].loop.push_back(st);
  p.steps.insert(p.steps.begin() + static_cast<std::ptrdiff_t>(at), Step(std::move(k)));
  ++p.stats.loop_kernels;
  return b;
}

/// The views of a planned convolution that take part in the plan: input, output, residual.
std::vector<TensorView*> conv_views(ExternStep& e) {
  std::vector<TensorView*> v{&e.inputs[0], &e.outputs[0]};
  if (find_attr(e, "fused_add") != nullptr && e.inputs.size() > 3) v.push_back(&e.inputs[3]);
  return v;
}

/// True when `v` views the whole of its buffer as a contiguous 4-D tensor of constant sizes.
bool whole_nchw(const Program& p, const TensorView& v) {
  if (v.buffer < 0 || v.sizes.size() != 4 || !is_const(v.offset, 0)) return false;
  int64_t numel = 1;
  for (const SymInt& s : v.sizes) {
    const auto c = s.maybe_constant();
    if (!c) return false;
    numel *= *c;
  }
  const Buffer& buf = p.buffers[static_cast<size_t>(v.buffer)];
  const auto bn = buf.numel.maybe_constant();
  // the buffer's own [N, C, H, W]: a reshaped view ([1, 64, 8, 8] of a [256, 2, 4, 2] buffer, as
  // MobileViT's unfolding leaves) would give the buffer a second channels-last order, and loop
  // kernels index it by the buffer's sizes
  return bn && *bn == numel && v.strides == contiguous(v.sizes) && buf.sizes == v.sizes;
}

/// Channels-last strides of a [N, C, H, W] view.
std::vector<SymInt> nhwc_strides(const std::vector<SymInt>& s) {
  const int64_t c = s[1].constant(), h = s[2].constant(), w = s[3].constant();
  return {SymInt(h * w * c), SymInt(1), SymInt(w * c), SymInt(c)};
}

/// CUDA: a depthwise convolution anvil's direct kernel runs (the conditions of
/// emit_cuda_conv.cpp's direct_depthwise that the step shows: one input channel per group, a
/// constant 4-D weight; ANVIL_CUDA_DEPTHWISE=0 gives them to cuDNN). It reads and writes any
/// strides, so its input may be in one layout and its output in the other. Opt-in
/// (ANVIL_CUDA_DW_ANY_LAYOUT=1 at compile time) until measured on a GPU: it breaks the NCHW
/// chains of squeeze-excitation models into channels-last islands with copies between them.
bool direct_depthwise(const ExternStep& e) {
  if (!env_switch("ANVIL_CUDA_DEPTHWISE", true)) return false;
  if (!env_switch("ANVIL_CUDA_DW_ANY_LAYOUT", false)) return false;
  const ExternAttr* g = find_attr(e, "groups");
  if (g == nullptr || g->kind != 0 || !g->i.is_constant() || g->i.constant() <= 1) return false;
  if (e.inputs.size() < 2 || e.inputs[1].sizes.size() != 4) return false;
  for (const SymInt& d : e.inputs[1].sizes)
    if (!d.is_constant()) return false;
  return e.inputs[1].sizes[1].constant() == 1;
}

/// CUDA: a convolution of at most 4 input channels that one of anvil's direct stem kernels
/// runs (passes/stem_rule.h; the conditions of emit_cuda_conv_direct.cpp's direct_stem that the
/// step shows: one group, constant 4-D input, weight and output, a cuDNN dtype;
/// ANVIL_CUDA_STEM=0 gives them to cuDNN). It reads and writes any strides: the image it reads
/// keeps NCHW with no channels-last copy when its output is planned NHWC.
bool direct_stem(const ExternStep& e) {
  if (!env_switch("ANVIL_CUDA_STEM", true)) return false;
  if (const ExternAttr* g = find_attr(e, "groups"); g && !is_const(g->i, 1)) return false;
  if (e.inputs.size() < 2 || e.outputs.size() != 1) return false;
  for (const TensorView* v : {&e.inputs[0], &e.inputs[1], &e.outputs[0]}) {
    if (v->sizes.size() != 4) return false;
    for (const SymInt& d : v->sizes)
      if (!d.is_constant()) return false;
  }
  StemConv s;
  s.dtype = e.inputs[0].dtype;
  if (s.dtype != DType::kFloat32 && s.dtype != DType::kBFloat16 && s.dtype != DType::kFloat16)
    return false;
  const std::vector<SymInt>& w = e.inputs[1].sizes;
  s.k = w[0].constant(), s.c = w[1].constant(), s.kh = w[2].constant(), s.kw = w[3].constant();
  s.batch = e.outputs[0].sizes[0].constant();
  // read as the emitter reads them (spatial_ints): a stem the two judged differently would
  // reach cuDNN with an NCHW input and a channels-last output
  std::vector<int64_t> stride, dilation;
  if (!spatial_ints(e, "stride", 1, 2, stride) || !spatial_ints(e, "dilation", 1, 2, dilation))
    return false;
  s.stride_h = stride[0], s.stride_w = stride[1], s.dil_h = dilation[0], s.dil_w = dilation[1];
  return stem_mma(s) || stem_scalar(s);
}

/// CUDA: a convolution's input, output and residual in one layout (`state` as in
/// plan_conv_layouts: 1 planned NHWC, -1 kept NCHW; grown by the buffers copies add).
void one_layout_per_conv(Program& program, std::vector<int>& state) {
  // CUDA: a convolution's input, output and residual in one layout. cuDNN 9's fused
  // (bias / relu) bf16 and fp16 engines gave wrong values for an NCHW input with an NHWC output
  // on an H200 (docs/design_notes.md), so no convolution mixes them. An input that must stay
  // NCHW (a graph input: the stem's image) is copied into an NHWC buffer first when the rest of
  // its convolution may be NHWC: one small transpose instead of an NCHW stem and an NCHW pool.

  // planned NHWC, or an unplanned view that already is dense channels-last
  const auto is1 = [&](const TensorView* v) {
    if (v->buffer < 0) return false;
    const int st = state[static_cast<size_t>(v->buffer)];
    return st == 1 || (constant_view(*v) && v->strides == nhwc_strides(v->sizes));
  };
  // NCHW spreads through the convolutions to a fixed point: a convolution whose output or
  // residual keeps NCHW, or whose input keeps NCHW and cannot be copied, keeps all of them
  for (bool changed = true; changed;) {
    changed = false;
    for (Step& st : program.steps) {
      auto* e = std::get_if<ExternStep>(&st);
      if (!e || !planned_conv(*e, true) || direct_depthwise(*e) || direct_stem(*e)) continue;
      const std::vector<TensorView*> views = conv_views(*e);
      bool keep = !is1(views[0]) && !constant_view(*views[0]);
      for (size_t i = 1; i < views.size(); ++i) keep |= !is1(views[i]);
      if (!keep) continue;
      for (const TensorView* v : views)
        if (v->buffer >= 0 && state[static_cast<size_t>(v->buffer)] == 1) {
          state[static_cast<size_t>(v->buffer)] = -1;
          changed = true;
        }
    }
  }
  // an NHWC convolution whose input keeps NCHW reads a copy
  for (size_t si = 0; si < program.steps.size(); ++si) {
    auto* e = std::get_if<ExternStep>(&program.steps[si]);
    if (!e || !planned_conv(*e, true) || direct_depthwise(*e) || direct_stem(*e)) continue;
    const std::vector<TensorView*> views = conv_views(*e);
    if (!is1(views[1]) || is1(views[0])) continue;
    const TensorView x = *views[0];  // copies: the insertion below moves the steps
    const std::string node = e->nodes.empty() ? std::string() : e->nodes[0];
    const int copy = nhwc_copy(program, x, node, si);
    state.push_back(1);
    ++si;  // the copy went in before the convolution
    std::get<ExternStep>(program.steps[si]).inputs[0] = whole_view(program, copy);
  }
}

/// The loop variables of `k` (o0.., r0..) with their extents; false when one is symbolic.
bool kernel_vars(const LoopKernel& k, std::vector<std::string>& vars, std::vector<int64_t>& ext) {
  std::vector<SymInt> sizes;
  loop_vars(k, vars, sizes);
  for (const SymInt& d : sizes) {
    if (!d.is_constant()) return false;
    ext.push_back(d.constant());
  }
  return true;
}

/// The channels-last index of element `idx` of a dense NCHW buffer of sizes `s` read by a loop
/// kernel with variables `vars` of extents `ext`: idx must be affine with constant
/// coefficients, each variable stepping along one dim and every dim's index staying inside it
/// over the variables' ranges (so each (n, c, h, w) is the one the NCHW index named); nullopt
/// otherwise (a flattened index over several dims, a division).
/// An NCHW index of a [N, C, H, W] buffer of sizes `s`, split per dim: `term[d]` the dim's
/// coordinate as a sum of the kernel's variables, `lo[d]` / `hi[d]` its range over the loops.
/// False when some variable steps along no single dim or a range leaves the dim.
struct Nchw4 {
  SymInt term[4];
  int64_t lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
};
std::optional<Nchw4> nchw_dims(const SymInt& idx, const std::vector<std::string>& vars,
                               const std::vector<int64_t>& ext, const std::vector<int64_t>& s) {
  const std::optional<Affine> a = affine(idx, vars);
  if (!a || !a->c0.is_constant() || a->c0.constant() < 0) return std::nullopt;
  const int64_t st[4] = {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1};
  Nchw4 r;
  int64_t rem = a->c0.constant();
  for (int d = 0; d < 4; ++d) {
    r.lo[d] = r.hi[d] = rem / st[d];
    rem %= st[d];
    r.term[d] = SymInt(r.lo[d]);
  }
  for (size_t v = 0; v < vars.size(); ++v) {
    if (!a->coef[v].is_constant()) return std::nullopt;
    const int64_t c = a->coef[v].constant();
    if (c == 0 || ext[v] <= 1) continue;
    int d = 0;
    while (d < 4 && (c % st[d] != 0 || s[d] == 1)) ++d;
    if (d == 4) return std::nullopt;
    const int64_t m = c / st[d];
    (m > 0 ? r.hi[d] : r.lo[d]) += (ext[v] - 1) * m;
    r.term[d] = r.term[d] + SymInt(m) * SymInt::symbol(vars[v]);
  }
  for (int d = 0; d < 4; ++d)
    if (r.lo[d] < 0 || r.hi[d] >= s[d]) return std::nullopt;
  return r;
}

std::optional<SymInt> nhwc_index(const SymInt& idx, const std::vector<std::string>& vars,
                                 const std::vector<int64_t>& ext, const std::vector<int64_t>& s) {
  const std::optional<Nchw4> dims = nchw_dims(idx, vars, ext, s);
  if (!dims) return std::nullopt;
  const SymInt* term = dims->term;
  const int64_t nhwc[4] = {s[2] * s[3] * s[1], 1, s[3] * s[1], s[1]};
  SymInt out(0);
  for (int d = 0; d < 4; ++d) out = out + term[d] * SymInt(nhwc[d]);
  return out;
}

/// The constant [N, C, H, W] sizes of buffer `b`, or empty.
std::vector<int64_t> sizes4(const Program& p, int b) {
  std::vector<int64_t> s;
  const Buffer& buf = p.buffers[static_cast<size_t>(b)];
  if (buf.sizes.size() != 4) return s;
  for (const SymInt& d : buf.sizes) {
    if (!d.is_constant()) return {};
    s.push_back(d.constant());
  }
  return s;
}

/// Calls `f` with every statement expression root of `k` (pre, loop and post of each pass).
template <typename F>
void for_each_root(LoopKernel& k, F f) {
  for (auto& pass : k.passes)
    for (auto* list : {&pass.pre, &pass.loop, &pass.post})
      for (Stmt& st : *list) f(st.expr);
}

/// Calls `f` with every load expression of `k`.
template <typename F>
void for_each_load(const Program& p, LoopKernel& k, F f) {
  for_each_root(k, [&](int root) {
    std::vector<int> loads;
    if (root >= 0) p.exprs.loads(root, loads);
    for (int id : loads) f(p.exprs.at(id));
  });
}

/// True when every load of buffer `b` in `k` has a channels-last index (nhwc_index).
bool loads_follow_nhwc(const Program& p, LoopKernel& k, int b) {
  const std::vector<int64_t> s = sizes4(p, b);
  std::vector<std::string> vars;
  std::vector<int64_t> ext;
  if (s.empty() || !kernel_vars(k, vars, ext)) return false;
  bool ok = true;
  for_each_load(p, k, [&](const Expr& e) {
    if (e.buffer == b) ok = ok && nhwc_index(e.index, vars, ext, s).has_value();
  });
  return ok;
}

/// Expression `id` with each load's and index value's index passed through `f(buffer, index)`
/// (buffer -1 for an index value); unchanged sub-expressions keep their ids.
template <typename F>
int rewrite_indices(Program& p, int id, F& f, std::map<int, int>& memo) {
  if (id < 0) return id;
  if (const auto it = memo.find(id); it != memo.end()) return it->second;
  const Expr e = p.exprs.at(id);  // a copy: building nodes may grow the pool
  int out = id;
  if (e.op == ExprOp::kLoad) {
    const SymInt idx = f(e.buffer, e.index);
    if (!(idx == e.index)) out = p.exprs.load(e.buffer, idx, e.dtype);
  } else if (e.op == ExprOp::kIndex) {
    const SymInt idx = f(-1, e.index);
    if (!(idx == e.index)) out = p.exprs.index_value(idx, e.dtype);
  } else if (e.op != ExprOp::kConst) {
    int args[3];
    bool changed = false;
    for (int i = 0; i < 3; ++i) {
      args[i] = rewrite_indices(p, e.args[static_cast<size_t>(i)], f, memo);
      changed |= args[i] != e.args[static_cast<size_t>(i)];
    }
    if (changed) {
      if (e.op == ExprOp::kCast)
        out = p.exprs.cast(args[0], e.dtype);
      else if (e.op == ExprOp::kWhere)
        out = p.exprs.where(args[0], args[1], args[2], e.dtype);
      else if (e.args[1] < 0)
        out = p.exprs.unary(e.op, args[0], e.dtype);
      else
        out = p.exprs.binary(e.op, args[0], args[1], e.dtype);
    }
  }
  memo[id] = out;
  return out;
}

/// True when `k` is pointwise with independent points: one pass of stores in its loop (no
/// reduction, nothing before or after it), each buffer it writes stored at one index and read
/// in the kernel only at that index. Its loops may then run in any order.
bool independent_points(const Program& p, LoopKernel& k) {
  if (k.passes.size() != 1 || !k.passes[0].pre.empty() || !k.passes[0].post.empty()) return false;
  std::map<int, std::vector<SymInt>> at;  // by buffer, its store indices (distinct)
  for (const Stmt& st : k.passes[0].loop) {
    if (st.kind != Stmt::Kind::kStore) return false;
    std::vector<SymInt>& ix = at[st.buffer];
    if (std::find(ix.begin(), ix.end(), st.index) == ix.end()) ix.push_back(st.index);
  }
  bool ok = true;
  for_each_load(p, k, [&](const Expr& e) {
    if (const auto it = at.find(e.buffer);
        it != at.end() && (it->second.size() > 1 || !(it->second[0] == e.index)))
      ok = false;
  });
  if (!ok) return false;
  // Several stores into one buffer (a concatenation's pieces in one kernel: DenseNet's): the
  // order of the points is free when the kernel reads nothing of the buffer (above) and the
  // stores' element boxes are disjoint, so no element is written twice
  std::vector<std::string> vars;
  std::vector<int64_t> ext;
  for (const auto& [b, ix] : at) {
    if (ix.size() == 1) continue;
    const std::vector<int64_t> s = sizes4(p, b);
    if (s.empty() || (vars.empty() && !kernel_vars(k, vars, ext))) return false;
    std::vector<Nchw4> boxes;
    for (const SymInt& i : ix) {
      const std::optional<Nchw4> d = nchw_dims(i, vars, ext, s);
      if (!d) return false;
      boxes.push_back(*d);
    }
    for (size_t x = 0; x < boxes.size(); ++x)
      for (size_t y = x + 1; y < boxes.size(); ++y) {
        bool apart = false;
        for (int d = 0; d < 4 && !apart; ++d)
          apart = boxes[x].hi[d] < boxes[y].lo[d] || boxes[y].hi[d] < boxes[x].lo[d];
        if (!apart) return false;
      }
  }
  return true;
}

/// True when every store of buffer `b` in `k` has a channels-last index (nhwc_index).
bool stores_follow_nhwc(const Program& p, const LoopKernel& k, int b) {
  const std::vector<int64_t> s = sizes4(p, b);
  std::vector<std::string> vars;
  std::vector<int64_t> ext;
  if (s.empty() || !kernel_vars(k, vars, ext)) return false;
  for (const Pass& pass : k.passes)
    for (const auto* list : {&pass.pre, &pass.loop, &pass.post})
      for (const Stmt& st : *list)
        if (st.buffer == b && !nhwc_index(st.index, vars, ext, s)) return false;
  return true;
}

/// Rewrites loop kernel `k`'s loads of planned buffers (state 1) and its stores into them to
/// their channels-last indices. When it stores into one (independent_points holds then), its
/// loops are reordered so the variable stepping along that buffer's channels runs innermost:
/// neighbouring points (a CUDA warp's threads, a CPU vector) then store neighbouring elements.
void rewrite_kernel(Program& p, LoopKernel& k, const std::vector<int>& state) {
  std::vector<std::string> vars;
  std::vector<int64_t> ext;
  if (!kernel_vars(k, vars, ext)) return;  // (then it touches no planned buffer)
  const auto planned = [&](int b) { return b >= 0 && state[static_cast<size_t>(b)] == 1; };
  auto to_nhwc = [&](int b, const SymInt& idx) {
    if (!planned(b)) return idx;
    const std::optional<SymInt> at = nhwc_index(idx, vars, ext, sizes4(p, b));
    if (!at)  // the plan checked every access of a planned buffer
      throw Error(
          "internal error: a planned channels-last buffer has an index with no "
          "channels-last form",
          "passes/conv_layout " + k.name, "an affine index stepping along one dim", idx.str());
    return *at;
  };
  std::map<int, int> memo;
  for_each_root(k, [&](int& root) { root = rewrite_indices(p, root, to_nhwc, memo); });
  int channel = -1;  // the variable stepping along a planned store's channels
  for (Pass& pass : k.passes)
    for (auto* list : {&pass.pre, &pass.loop, &pass.post})
      for (Stmt& st : *list) {
        if (!planned(st.buffer)) continue;
        st.index = to_nhwc(st.buffer, st.index);
        const std::optional<Affine> a = affine(st.index, vars);
        for (size_t v = 0; a && channel < 0 && v < vars.size(); ++v)
          if (a->coef[v].is_constant() && a->coef[v].constant() == 1 && ext[v] > 1)
            channel = static_cast<int>(v);
      }
  if (channel < 0 || (k.inner.size() == 1 && static_cast<size_t>(channel) == vars.size() - 1))
    return;
  // the other variables outer in their order, the channel's inner: o0.. and r0
  std::map<std::string, SymInt> rename;
  std::vector<SymInt> outer;
  for (size_t v = 0; v < vars.size(); ++v) {
    if (static_cast<int>(v) == channel) continue;
    rename[vars[v]] = SymInt::symbol("o" + std::to_string(outer.size()));
    outer.push_back(SymInt(ext[v]));
  }
  rename[vars[static_cast<size_t>(channel)]] = SymInt::symbol("r0");
  auto renamed = [&](int, const SymInt& idx) { return idx.substitute(rename); };
  std::map<int, int> memo2;
  for_each_root(k, [&](int& root) { root = rewrite_indices(p, root, renamed, memo2); });
  for (Stmt& st : k.passes[0].loop) st.index = st.index.substitute(rename);
  k.outer = outer;
  k.inner = {SymInt(ext[static_cast<size_t>(channel)])};
}

}  // namespace

int plan_conv_layouts(Program& program, Device::Type target) {
  const bool cuda = target == Device::Type::kCUDA;
  // loop kernels may read and write planned buffers, unless ANVIL_CONV_LAYOUT_LOOPS=0 at
  // compile time (session 21: the default; ConvNeXt-T and EfficientNet-B0 8-15% faster on H200)
  const char* lv = std::getenv("ANVIL_CONV_LAYOUT_LOOPS");
  const bool loops = lv == nullptr || std::string(lv) != "0";
  size_t nb = program.buffers.size();
  // 0: no convolution touches it yet, 1: only convolutions as allowed, -1: keeps NCHW
  std::vector<int> state(nb, 0);
  for (size_t b = 0; b < nb; ++b) {
    const Buffer& buf = program.buffers[b];
    if (buf.kind != BufferKind::kArena || buf.local || buf.alias_of >= 0 || buf.run_time_sized)
      state[b] = -1;
    if (buf.alias_of >= 0) state[static_cast<size_t>(buf.alias_of)] = -1;
  }
  std::set<int> conv_touched;  // buffers a planned convolution or pool reads or writes
  auto mark = [&](int b, bool ok) {
    if (b < 0) return;
    int& s = state[static_cast<size_t>(b)];
    if (!ok)
      s = -1;
    else if (s == 0)
      s = 1;
  };
  for (Step& st : program.steps) {
    auto* e = std::get_if<ExternStep>(&st);
    if (e && planned_conv(*e, cuda)) {
      const std::vector<TensorView*> views = conv_views(*e);
      for (const TensorView* v : views) {
        mark(v->buffer, whole_nchw(program, *v));
        conv_touched.insert(v->buffer);
      }
      for (size_t i = 1; i < e->inputs.size(); ++i)  // weight, bias: never planned
        if (std::find(views.begin(), views.end(), &e->inputs[i]) == views.end())
          mark(e->inputs[i].buffer, false);
      continue;
    }
    if (e && planned_pool(*e, cuda)) {
      mark(e->inputs[0].buffer, whole_nchw(program, e->inputs[0]));
      mark(e->outputs[0].buffer, whole_nchw(program, e->outputs[0]));
      conv_touched.insert(e->inputs[0].buffer);
      conv_touched.insert(e->outputs[0].buffer);
      continue;
    }
    std::set<int> reads, writes;
    step_accesses(program, st, reads, writes);
    auto* lk = std::get_if<LoopKernel>(&st);
    // opt-in: a loop kernel may read a channels-last buffer where each of its loads maps to
    // one, and write one where its points are independent and each store maps to one
    const bool free_order = loops && lk && !writes.empty() && independent_points(program, *lk);
    for (int b : reads)
      mark(b,
           loops && lk && (!writes.count(b) || free_order) && loads_follow_nhwc(program, *lk, b));
    for (int b : writes)
      mark(b,
           free_order && loads_follow_nhwc(program, *lk, b) && stores_follow_nhwc(program, *lk, b));
  }
  // a buffer only loop kernels touch keeps NCHW (nothing there wants channels-last), unless a
  // loop kernel touching it also touches a planned buffer a convolution touches, or one such
  // buffer in turn (CUDA): ConvNeXt's residual stream between a stage's last block and the
  // downsampling layer norm, whose NCHW store made that block's add kernel read across the
  // channels (430 GB/s on an H200 at bf16 batch 32)
  std::set<int> near_conv;
  for (int b : conv_touched)
    if (b >= 0 && state[static_cast<size_t>(b)] == 1) near_conv.insert(b);
  if (cuda && loops) {
    std::vector<std::set<int>> touched;  // per loop kernel, the planned buffers it touches
    for (const Step& st : program.steps) {
      if (!std::holds_alternative<LoopKernel>(st)) continue;
      std::set<int> reads, writes, planned_here;
      step_accesses(program, st, reads, writes);
      for (const std::set<int>* set : {&reads, &writes})
        for (int b : *set)
          if (state[static_cast<size_t>(b)] == 1) planned_here.insert(b);
      touched.push_back(std::move(planned_here));
    }
    for (bool grew = true; grew;) {
      grew = false;
      for (const std::set<int>& t : touched) {
        bool near = false;
        for (int b : t) near = near || near_conv.count(b);
        if (near)
          for (int b : t) grew = near_conv.insert(b).second || grew;
      }
    }
  }
  for (size_t b = 0; b < nb; ++b)
    if (state[b] == 1 && !near_conv.count(static_cast<int>(b))) state[b] = -1;
  if (cuda) one_layout_per_conv(program, state);
  nb = program.buffers.size();
  int planned = 0;
  for (size_t b = 0; b < nb; ++b) planned += state[b] == 1;
  if (!planned) return 0;
  for (Step& st : program.steps) {
    if (auto* lk = std::get_if<LoopKernel>(&st); lk && loops) {
      // (the copies one_layout_per_conv added store channels-last indices already)
      if (lk->name.rfind("knhwc", 0) != 0) rewrite_kernel(program, *lk, state);
      continue;
    }
    auto* e = std::get_if<ExternStep>(&st);
    if (!e || !(planned_conv(*e, cuda) || planned_pool(*e, cuda))) continue;
    for (auto* views : {&e->inputs, &e->outputs})
      for (TensorView& v : *views)
        if (v.buffer >= 0 && state[static_cast<size_t>(v.buffer)] == 1)
          v.strides = nhwc_strides(v.sizes);
  }
  return planned;
}

}  // namespace anvil::passes::detail
