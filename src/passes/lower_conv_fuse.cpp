// Epilogues fused into the convolution extern (issue 19): a pointwise op that reads a
// convolution's whole result right after it, with nothing else reading that result, becomes an
// attribute of the convolution step instead of a loop kernel (docs/externs.md):
//  * a residual add (fused_add; CPU target: fp32, CUDA target: fp32 / bf16 / fp16, applied in
//    cuDNN's fused graph), the residual a fourth input;
//  * an activation: relu on every target (fused_relu); on the CPU target, for fp32 (and on
//    CUDA for fp32 / bf16 / fp16 unless ANVIL_CUDA_CONV_ACT=0), relu6 / hardtanh / clamp with
//    constant bounds, hardswish, hardsigmoid, silu, sigmoid and gelu (fused_act, a
//    runtime::kern::ConvAct code, with fused_act_min / fused_act_max for clamps).
// An activation may follow a fused add (applied after it); an add never follows an activation.
#include <cmath>
#include <cstdlib>
#include <string>
#include <optional>

#include "ir/op_schema.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

/// True when the only readers of `x` are the current node and, possibly, an in-place write
/// of the current node's result back into `x` (relu_ / add_ after an import: ir/inplace.h
/// writes them as relu / add plus copy_(self=x, src=result)), so `x`'s buffer may hold the
/// result from the start.
bool only_read_here(Lowerer& L, const ir::Node& n, const ir::Value* x) {
  const int u = L.uses(x);
  if (u == 1) return true;
  if (u != 2 || n.outputs.empty()) return false;
  for (const ir::Node* r : L.readers(x)) {
    if (r == &n) continue;
    const ir::Arg* self = r->arg("self");
    const ir::Arg* src = r->arg("src");
    if (r->target != "aten.copy_.default" || !self || self->value != x || !src ||
        src->value != n.outputs[0])
      return false;
  }
  return L.readers(x).size() == 2;
}

/// The convolution extern step that wrote `x` as its whole output, when it is the last step
/// lowered (nothing ran between it and the current node) and is not transposed.
ExternStep* conv_producing(Lowerer& L, const TRef& x) {
  if (L.snodes().empty()) return nullptr;
  SNode& last = L.snodes().back();
  if (last.kind != SNode::Kind::kExtern || !last.ext) return nullptr;
  ExternStep& e = *last.ext;
  if (e.target != "aten.convolution.default" && e.target != "aten.conv2d.default" &&
      e.target != "aten.conv1d.default")
    return nullptr;
  for (const auto& at : e.attrs)
    if (at.name == "transposed" && !is_const(at.i, 0)) return nullptr;
  if (e.outputs.size() != 1 || !x.is_buffer() || x.buffer != e.outputs[0].buffer ||
      !is_floating(x.dtype) || !is_contiguous_view(x))
    return nullptr;
  return &e;
}

/// True when the convolution already applies an activation.
bool has_act(const ExternStep& e) {
  return find_attr(e, "fused_relu") != nullptr || find_attr(e, "fused_act") != nullptr;
}

/// A fused activation: its runtime code (runtime::kern::ConvAct) and clamp bounds.
struct Act {
  int code = 0;
  double lo = -HUGE_VAL, hi = HUGE_VAL;
};

// Codes of runtime::kern::ConvAct (runtime/kernels/conv.h); the layers keep them apart, the
// ConvFusion tests keep them in step.
constexpr int kActRelu = 1, kActClamp = 2, kActHardswish = 3, kActHardsigmoid = 4, kActSilu = 5,
              kActSigmoid = 6, kActGelu = 7, kActGeluTanh = 8;

/// A number argument `name` of n (int or float), nullopt when absent or None, nothing (false)
/// when it is a tensor or symbolic.
bool number_arg(const ir::Node& n, const char* name, std::optional<double>& out) {
  out.reset();
  const ir::Arg* a = n.arg(name);
  if (!a || a->kind == ir::Arg::Kind::kNone) return true;
  if (a->kind == ir::Arg::Kind::kFloat) {
    out = a->f;
    return true;
  }
  if (a->kind == ir::Arg::Kind::kInt) {
    out = static_cast<double>(a->i);
    return true;
  }
  return false;
}

/// The activation node `n` computes, or nullopt when it is none the convolution takes.
std::optional<Act> activation_of(const ir::Node& n) {
  const std::string& t = n.target;
  Act a;
  if (t == "aten.relu.default") {
    a.code = kActRelu;
  } else if (t == "aten.relu6.default") {
    a = {kActClamp, 0.0, 6.0};
  } else if (t == "aten.hardtanh.default") {
    a = {kActClamp, ir::shape_args::float_(n, "min_val", -1.0),
         ir::shape_args::float_(n, "max_val", 1.0)};
  } else if (t == "aten.clamp.default" || t == "aten.clamp_min.default" ||
             t == "aten.clamp_max.default") {
    std::optional<double> lo, hi;
    if (!number_arg(n, "min", lo) || !number_arg(n, "max", hi) || (!lo && !hi)) return {};
    a = {kActClamp, lo.value_or(-HUGE_VAL), hi.value_or(HUGE_VAL)};
    if (std::isnan(a.lo) || std::isnan(a.hi)) return {};
  } else if (t == "aten.hardswish.default") {
    a.code = kActHardswish;
  } else if (t == "aten.hardsigmoid.default") {
    a.code = kActHardsigmoid;
  } else if (t == "aten.silu.default") {
    a.code = kActSilu;
  } else if (t == "aten.sigmoid.default") {
    a.code = kActSigmoid;
  } else if (t == "aten.gelu.default") {
    std::string approx = "none";
    if (const ir::Arg* ap = n.arg("approximate"); ap && ap->kind == ir::Arg::Kind::kString)
      approx = ap->s;
    if (approx != "none" && approx != "tanh") return {};
    a.code = approx == "tanh" ? kActGeluTanh : kActGelu;
  } else {
    return {};
  }
  // min > max: torch gives max everywhere, oneDNN's clip does not
  if (a.code == kActClamp && a.lo > a.hi) return {};
  return a;
}

ExternAttr float_attr(const std::string& name, double v) {
  ExternAttr a;
  a.name = name;
  a.kind = 1;
  a.f = v;
  return a;
}

}  // namespace

bool fuse_act_into_conv(Lowerer& L, const ir::Node& n) {
  const std::optional<Act> act = activation_of(n);
  if (!act) return false;
  const ir::Arg* a = n.arg("self");
  if (!a || !a->value || !a->value->is_tensor() || !only_read_here(L, n, a->value) ||
      n.outputs.empty() || !n.outputs[0])
    return false;
  TRefPtr x = L.ref(a->value);
  ExternStep* e = conv_producing(L, *x);
  if (!e || has_act(*e) || n.outputs[0]->type.dtype != x->dtype ||
      !(n.outputs[0]->type.sizes == x->sizes))
    return false;
  if (act->code == kActRelu) {
    e->attrs.push_back(int_attr("fused_relu", SymInt(1)));
  } else {
    // the other activations: the CPU convolution extern in fp32; on CUDA (fp32 / bf16 / fp16;
    // ANVIL_CUDA_CONV_ACT=0 at compile time keeps them loop kernels) the step's
    // epilogue kernel applies them after cuDNN's plain convolution, so the convolution's output
    // has no other reader and may be planned channels-last
    if (!L.options) return false;
    const Device::Type target = L.options->target_device;
    const char* cuda_act = std::getenv("ANVIL_CUDA_CONV_ACT");
    const bool cpu_ok = target == Device::Type::kCPU && x->dtype == DType::kFloat32;
    const bool cuda_ok = target == Device::Type::kCUDA &&
                         !(cuda_act && std::string(cuda_act) == "0") &&
                         (x->dtype == DType::kFloat32 || x->dtype == DType::kBFloat16 ||
                          x->dtype == DType::kFloat16);
    if (!cpu_ok && !cuda_ok) return false;
    e->attrs.push_back(int_attr("fused_act", SymInt(act->code)));
    if (act->code == kActClamp) {
      if (std::isfinite(act->lo)) e->attrs.push_back(float_attr("fused_act_min", act->lo));
      if (std::isfinite(act->hi)) e->attrs.push_back(float_attr("fused_act_max", act->hi));
    }
  }
  L.snodes().back().nodes.push_back(n.name);
  e->nodes.push_back(n.name);
  L.bind(0, x);
  return true;
}

/// A residual add of a convolution's result (x + r or r + x, alpha 1, same sizes, fp32, r
/// already in a dense buffer) that nothing else reads but add_'s write back: on the CPU the
/// convolution extern adds r as it stores (attribute fused_add, r its fourth input; an
/// activation that follows fuses after it) and add binds to the convolution's buffer. Not
/// after a fused activation (the order would change). On the CUDA target (fp32, bf16, fp16)
/// cuDNN adds r in the convolution's fused graph (else the step's epilogue kernel does), never
/// writing over r: cuDNN's engines do not promise that an output may alias an operand.
bool fuse_add_into_conv(Lowerer& L, const ir::Node& n) {
  if (n.target != "aten.add.Tensor" || !L.options) return false;
  const Device::Type target = L.options->target_device;
  if (target != Device::Type::kCPU && target != Device::Type::kCUDA) return false;
  const bool cuda = target == Device::Type::kCUDA;
  if (const ir::Arg* al = n.arg("alpha"); al && al->kind != ir::Arg::Kind::kNone &&
                                          !(al->kind == ir::Arg::Kind::kInt && al->i == 1) &&
                                          !(al->kind == ir::Arg::Kind::kFloat && al->f == 1.0))
    return false;
  const ir::Arg* sa = n.arg("self");
  const ir::Arg* oa = n.arg("other");
  if (!sa || !oa || !sa->value || !oa->value || !sa->value->is_tensor() ||
      !oa->value->is_tensor() || n.outputs.empty() || !n.outputs[0])
    return false;
  for (int side = 0; side < 2; ++side) {
    const ir::Value* xv = side == 0 ? sa->value : oa->value;
    const ir::Value* rv = side == 0 ? oa->value : sa->value;
    if (xv == rv || !only_read_here(L, n, xv)) continue;
    TRefPtr x = L.ref(xv);
    ExternStep* e = conv_producing(L, *x);
    const bool dtype_ok = x->dtype == DType::kFloat32 ||
                          (cuda && (x->dtype == DType::kBFloat16 || x->dtype == DType::kFloat16));
    if (!e || !dtype_ok || has_act(*e) || find_attr(*e, "fused_add") || e->inputs.size() != 3)
      continue;
    TRefPtr r = L.ref(rv);
    if (!r->is_buffer() || r->buffer == x->buffer || r->dtype != x->dtype ||
        !(r->sizes == x->sizes) || !is_contiguous_view(*r) ||
        !(n.outputs[0]->type.sizes == x->sizes) || n.outputs[0]->type.dtype != x->dtype)
      continue;
    // r + conv(...) where add_ writes the sum back into r: the convolution writes over r
    // (its output buffer is left unused), so the write back is no copy. Nothing else may read
    // r's buffer later (a view of it computed lazily would see the sum too early).
    const bool into_r = !cuda && L.uses(xv) == 1 && L.uses(rv) == 2 && only_read_here(L, n, rv) &&
                        L.owned_buffer(r->buffer) && !L.buffer_read_later_except(r->buffer, rv);
    SNode& last = L.snodes().back();
    if (into_r) {
      last.writes.erase(e->outputs[0].buffer);
      e->outputs[0] = view_from(*r);
      last.writes.insert(r->buffer);
    }
    e->inputs.push_back(view_from(*r));
    e->attrs.push_back(int_attr("fused_add", SymInt(1)));
    last.reads.insert(r->buffer);
    last.nodes.push_back(n.name);
    e->nodes.push_back(n.name);
    L.bind(0, into_r ? r : x);
    return true;
  }
  return false;
}

}  // namespace anvil::passes::detail
