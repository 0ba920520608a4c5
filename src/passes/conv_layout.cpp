// Layout planning for CPU convolutions (issue 19): an activation that only convolutions touch
// (written by one, read as another's input or fused residual) is kept channels-last (NHWC)
// instead of NCHW. oneDNN's AVX-512 convolutions compute in nhwc, so such a buffer needs no
// reorder on either side: a ResNet's activations between its convolutions are reordered once
// (from the first convolution's input) instead of twice per convolution. Everything else sees
// NCHW as before: a buffer any loop kernel, GEMM or other extern touches keeps its layout.
// Only the views change (sizes stay [N, C, H, W], strides become [HWC, 1, WC, C]); the
// convolution extern takes dense channels-last inputs, outputs and residuals on every path
// (runtime/kernels/conv.cpp).
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

/// A 2-D convolution extern with one group (the direct depthwise kernel and grouped oneDNN
/// convolutions keep NCHW), not transposed.
bool dense_conv(const ExternStep& e) {
  if (e.target != "aten.convolution.default" && e.target != "aten.conv2d.default") return false;
  if (const ExternAttr* t = find_attr(e, "transposed"); t && !is_const(t->i, 0)) return false;
  if (const ExternAttr* g = find_attr(e, "groups"); g && !is_const(g->i, 1)) return false;
  return e.outputs.size() == 1 && !e.inputs.empty() && e.inputs[0].sizes.size() == 4;
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

int plan_conv_layouts(Program& program) {
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
  for (const Step& st : program.steps) {
    const auto* e = std::get_if<ExternStep>(&st);
    if (e && dense_conv(*e)) {
      const bool fused_add = find_attr(*e, "fused_add") != nullptr;
      for (size_t i = 0; i < e->inputs.size(); ++i) {  // the input and the residual only
        const TensorView& v = e->inputs[i];
        mark(v.buffer, (i == 0 || (i == 3 && fused_add)) && whole_nchw(program, v));
      }
      mark(e->outputs[0].buffer, whole_nchw(program, e->outputs[0]));
      continue;
    }
    std::set<int> reads, writes;
    step_accesses(program, st, reads, writes);
    for (int b : reads) mark(b, false);
    for (int b : writes) mark(b, false);
  }
  int planned = 0;
  for (size_t b = 0; b < nb; ++b) planned += state[b] == 1;
  if (!planned) return 0;
  for (Step& st : program.steps) {
    auto* e = std::get_if<ExternStep>(&st);
    if (!e || !dense_conv(*e)) continue;
    for (auto* views : {&e->inputs, &e->outputs})
      for (TensorView& v : *views)
        if (v.buffer >= 0 && state[static_cast<size_t>(v.buffer)] == 1)
          v.strides = nhwc_strides(v.sizes);
  }
  return planned;
}

}  // namespace anvil::passes::detail
