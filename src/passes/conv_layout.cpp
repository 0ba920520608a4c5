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
//    strides) may read and write NHWC too. A convolution's input, output and residual end up in
//    one layout (a buffer that must stay NCHW keeps the others of its convolution NCHW), so
//    cuDNN is never asked for a mixed-layout engine.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "passes/lower_internal.h"

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

/// A 2-D pooling extern whose CUDA kernel takes any strides (emit_cuda_pool.cpp).
bool planned_pool(const ExternStep& e, bool cuda) {
  return cuda &&
         (e.target == "aten.max_pool2d.default" || e.target == "aten.avg_pool2d.default" ||
          e.target == "aten.adaptive_avg_pool2d.default") &&
         e.inputs.size() == 1 && e.outputs.size() == 1 && e.inputs[0].sizes.size() == 4 &&
         e.outputs[0].sizes.size() == 4;
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
  const auto bn = p.buffers[static_cast<size_t>(v.buffer)].numel.maybe_constant();
  return bn && *bn == numel && v.strides == contiguous(v.sizes);
}

/// Channels-last strides of a [N, C, H, W] view.
std::vector<SymInt> nhwc_strides(const std::vector<SymInt>& s) {
  const int64_t c = s[1].constant(), h = s[2].constant(), w = s[3].constant();
  return {SymInt(h * w * c), SymInt(1), SymInt(w * c), SymInt(c)};
}

}  // namespace

int plan_conv_layouts(Program& program, Device::Type target) {
  const bool cuda = target == Device::Type::kCUDA;
  const size_t nb = program.buffers.size();
  // 0: no convolution touches it yet, 1: only convolutions as allowed, -1: keeps NCHW
  std::vector<int> state(nb, 0);
  for (size_t b = 0; b < nb; ++b) {
    const Buffer& buf = program.buffers[b];
    if (buf.kind != BufferKind::kArena || buf.local || buf.alias_of >= 0 || buf.run_time_sized)
      state[b] = -1;
    if (buf.alias_of >= 0) state[static_cast<size_t>(buf.alias_of)] = -1;
  }
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
      for (const TensorView* v : views) mark(v->buffer, whole_nchw(program, *v));
      for (size_t i = 1; i < e->inputs.size(); ++i)  // weight, bias: never planned
        if (std::find(views.begin(), views.end(), &e->inputs[i]) == views.end())
          mark(e->inputs[i].buffer, false);
      continue;
    }
    if (e && planned_pool(*e, cuda)) {
      mark(e->inputs[0].buffer, whole_nchw(program, e->inputs[0]));
      mark(e->outputs[0].buffer, whole_nchw(program, e->outputs[0]));
      continue;
    }
    std::set<int> reads, writes;
    step_accesses(program, st, reads, writes);
    for (int b : reads) mark(b, false);
    for (int b : writes) mark(b, false);
  }
  if (cuda) {  // one layout per convolution: NCHW spreads through them to a fixed point
    for (bool changed = true; changed;) {
      changed = false;
      for (Step& st : program.steps) {
        auto* e = std::get_if<ExternStep>(&st);
        if (!e || !planned_conv(*e, cuda)) continue;
        const std::vector<TensorView*> views = conv_views(*e);
        bool keep = false;
        for (const TensorView* v : views) keep |= v->buffer < 0 || state[static_cast<size_t>(v->buffer)] != 1;
        if (!keep) continue;
        for (const TensorView* v : views)
          if (v->buffer >= 0 && state[static_cast<size_t>(v->buffer)] == 1) {
            state[static_cast<size_t>(v->buffer)] = -1;
            changed = true;
          }
      }
    }
  }
  int planned = 0;
  for (size_t b = 0; b < nb; ++b) planned += state[b] == 1;
  if (!planned) return 0;
  for (Step& st : program.steps) {
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
