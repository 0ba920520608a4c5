// torch.autocast regions (spec/aot.md case 47). torch.export keeps `with torch.autocast(...)` as
// higher_order.wrap_with_autocast(device_type, dtype, enabled, cache_enabled, fn, *args), whose
// subgraph holds the ops as written (e.g. linear on f32) but whose recorded types are the
// autocast ones (a bf16 result). The importer inlines the region into the graph and makes the
// casts explicit: the floating inputs of the ops PyTorch's CPU autocast runs in lower precision
// (linear, matmul, mm, bmm, addmm, baddbmm, convolutions, prelu, sdpa) are cast to the region's
// dtype with aten._to_copy. Other ops keep their inputs and type promotion, which is what
// autocast's "promote" policy does; the ops autocast forces to float32 (losses, fft, linalg) are
// cast to float32. float64 tensors are never cast. Disabled regions are inlined unchanged, and
// so are the ops of a nested region (inlined first, it marks its nodes with its own policy).
// torch.no_grad() / torch.enable_grad() regions (higher_order.wrap_with_set_grad_enabled, which
// LLaMA-family exports carry around their rotary embeddings) are inlined unchanged: grad mode
// changes nothing at inference.
#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "frontend/pt2_internal.h"
#include "ir/op_schema.h"

namespace anvil::frontend::detail {

namespace {

/// "linear" for "aten.linear.default".
std::string base_name(const std::string& target) {
  std::string t = target;
  if (t.rfind("aten.", 0) == 0) t = t.substr(5);
  return t.substr(0, t.find('.'));
}

bool lower_precision_op(const std::string& target) {
  static const std::set<std::string> kOps = {
      "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "bmm", "mm", "linalg_vecdot",
      "baddbmm", "addmm", "addbmm", "linear", "matmul", "conv_tbc", "conv_transpose1d",
      "conv_transpose2d", "conv_transpose3d", "prelu", "scaled_dot_product_attention",
      "_native_multi_head_attention"};
  return kOps.count(base_name(target)) > 0;
}

bool float32_op(const std::string& target) {
  static const std::set<std::string> kOps = {
      "avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile",
      "nanquantile", "stft", "cdist", "trace", "cholesky", "inverse", "pinverse", "max_pool3d",
      "adaptive_avg_pool3d", "mse_loss", "nll_loss", "nll_loss2d", "cross_entropy_loss",
      "smooth_l1_loss", "l1_loss", "huber_loss", "kl_div", "binary_cross_entropy_with_logits",
      "poisson_nll_loss", "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
      "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
      "ctc_loss", "fft_fft", "fft_ifft", "fft_rfft", "fft_irfft", "fft_fftn", "fft_ifftn",
      "fft_rfftn", "fft_irfftn", "fft_fft2", "fft_ifft2", "fft_rfft2", "fft_irfft2", "fft_hfft",
      "fft_ihfft", "linalg_det", "linalg_inv", "linalg_pinv", "linalg_norm", "linalg_svd",
      "linalg_eigh", "linalg_solve", "linalg_cholesky", "linalg_qr", "linalg_matrix_norm",
      "linalg_vector_norm"};
  return kOps.count(base_name(target)) > 0;
}

/// Autocast casts floating tensors except float64 ones (PyTorch's is_eligible).
bool is_float_type(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

/// Metadata key marking nodes an autocast region already decided (a nested region, inlined
/// first, keeps its own policy: an inner `enabled=False` region is not cast by the outer one).
constexpr const char* kAutocastKey = "anvil_autocast";


}  // namespace

std::vector<ir::Value*> inline_region(ir::Graph& g, const ir::Node& hop,
                                      std::set<std::string>& node_names) {
  const std::string where = "node " + hop.name + " (" + hop.target + ")";
  const bool autocast = hop.target == "higher_order.wrap_with_autocast";
  const std::string what = autocast ? "wrap_with_autocast" : "wrap_with_set_grad_enabled";
  const ir::Arg* fn = hop.arg("fn");
  const ir::Arg* dt = hop.arg("dtype");
  const ir::Arg* en = hop.arg("enabled");
  const ir::Arg* dev = hop.arg("device_type");
  if (!fn || fn->kind != ir::Arg::Kind::kGraph)
    throw Error("malformed " + what, where,
                autocast ? "(device_type, dtype, enabled, cache_enabled, fn, *args)"
                         : "(enabled, fn, *args)",
                "other arguments");
  if (autocast && (!dt || dt->kind != ir::Arg::Kind::kScalarType))
    throw Error("malformed wrap_with_autocast", where,
                "(device_type, dtype, enabled, cache_enabled, fn, *args)", "no dtype");
  // A set_grad_enabled region casts nothing and leaves the policy of autocast regions around it.
  const bool enabled = autocast && (!en || en->kind != ir::Arg::Kind::kBool || en->b);
  if (enabled && dev && dev->kind == ir::Arg::Kind::kString && dev->s != "cpu")
    throw Error("autocast for another device than the CPU", where, "device_type 'cpu'", dev->s);
  const DType low = autocast ? dt->dtype : DType::kFloat32;
  const ir::Graph& sub = hop.subgraph("fn");
  std::vector<ir::Value*> operands;
  for (const ir::Arg& a : hop.args) {
    if (a.name.rfind("arg", 0) != 0) continue;
    if (a.kind == ir::Arg::Kind::kTensor) {
      operands.push_back(a.value);
    } else if (a.kind == ir::Arg::Kind::kSymInt && a.symints.size() == 1 && a.symints[0].value) {
      operands.push_back(a.symints[0].value);  // a dynamic size the region reads
    } else {
      throw Error(what + " operand of an unsupported kind", where + ", argument " + a.name,
                  "a tensor or a symbolic int", "a constant or list");
    }
  }
  const std::string prefix = hop.name + "_";
  int casts = 0;
  // Each copied node: its autocast decision recorded, and its floating operands cast to the
  // region's low dtype (or to float32) where CPU autocast casts them.
  auto hook = [&](const ir::Node& n, ir::Node& node) {
    const bool decided = n.metadata.count(kAutocastKey) > 0;  // by a nested region
    const bool to_low = enabled && !decided && lower_precision_op(n.target);
    const bool to_f32 = enabled && !decided && float32_op(n.target);
    if (!decided && autocast) node.metadata[kAutocastKey] = enabled ? dtype_name(low) : "disabled";
    if (!to_low && !to_f32) return;
    const DType want = to_low ? low : DType::kFloat32;
    auto cast = [&](ir::Value* v) -> ir::Value* {
      if (!v || !v->is_tensor() || !is_float_type(v->type.dtype) || v->type.dtype == want)
        return v;
      auto c = std::make_unique<ir::Node>();
      c->schema = ir::find_op("aten._to_copy.default");
      c->target = "aten._to_copy.default";
      c->name = fresh_name(g, node_names, prefix + "autocast_" + std::to_string(casts++));
      ir::Arg self;
      self.name = "self";
      self.kind = ir::Arg::Kind::kTensor;
      self.value = v;
      ir::Arg dtype;
      dtype.name = "dtype";
      dtype.kwarg = true;
      dtype.kind = ir::Arg::Kind::kScalarType;
      dtype.dtype = want;
      c->args = {self, dtype};
      c->metadata[kAutocastKey] = dtype_name(want);
      ir::Value* out = g.new_value(c->name);
      out->type = v->type;
      out->type.dtype = want;
      out->type.strides.clear();
      c->outputs = {out};
      node_names.insert(c->name);
      g.append(std::move(c));
      return out;
    };
    for (ir::Arg& a : node.args) {
      a.value = cast(a.value);
      for (ir::Value*& v : a.values) v = cast(v);
    }
  };
  if (operands.size() != sub.inputs().size())
    throw Error(what + " operands do not match its subgraph", where,
                std::to_string(sub.inputs().size()), std::to_string(operands.size()));
  return inline_graph(g, sub, operands, prefix, node_names, where + " (" + what + ")", hook);
}

}  // namespace anvil::frontend::detail
