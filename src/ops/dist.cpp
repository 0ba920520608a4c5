// Pairwise distances: cdist (torch.cdist as exports keep it) and _cdist_forward (its Core ATen
// form, compute_mode as an int), pdist (F.pdist) and _pdist_forward. The computation is
// core/distance.h (exact, in f64, for every compute_mode), which the runtime externs share
// (runtime/kernels/dist.cpp); results are contiguous.
#include "core/distance.h"
#include "core/error.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

void check_dtype(const Node& node, const TensorType& t, const char* name) {
  if (t.dtype != DType::kFloat32 && t.dtype != DType::kFloat64)
    sa::fail(node, str("distances need a float32 or float64 ", name), "f32 or f64",
             dtype_name(t.dtype));
}

void check_p(const Node& node, double p) {
  if (!(p >= 0)) sa::fail(node, "distances need a non-negative p", "p >= 0", str(p));
}

/// Shape rule of cdist / _cdist_forward: [broadcast batch.., P, R].
std::vector<TensorType> cdist_type(const Node& node) {
  const TensorType& a = sa::type(node, "x1");
  const TensorType& b = sa::type(node, "x2");
  check_dtype(node, a, "x1");
  check_dtype(node, b, "x2");
  if (a.dtype != b.dtype)
    sa::fail(node, "cdist needs x1 and x2 of one dtype", dtype_name(a.dtype), dtype_name(b.dtype));
  if (a.sizes.size() < 2 || b.sizes.size() < 2)
    sa::fail(node, "cdist needs at least 2-D inputs", "[.., rows, columns]",
             str(a.str(), " and ", b.str()));
  const SymInt& ma = a.sizes.back();
  const SymInt& mb = b.sizes.back();
  if (ma.is_constant() && mb.is_constant() && ma.constant() != mb.constant())
    sa::fail(node, "x1 and x2 must have the same number of columns", ma.str(), mb.str());
  check_p(node, sa::float_(node, "p", 2.0));
  if (sa::has(node, "compute_mode")) {
    const int64_t mode = sa::int_(node, "compute_mode");
    if (mode < 0 || mode > 2) sa::fail(node, "unknown compute_mode", "0, 1 or 2", str(mode));
  }
  const size_t b1 = a.sizes.size() - 2, b2 = b.sizes.size() - 2, nb = std::max(b1, b2);
  TensorType t = a;
  t.strides.clear();
  t.sizes.clear();
  for (size_t i = 0; i < nb; ++i) {
    const SymInt s1 = i + b1 >= nb ? a.sizes[i + b1 - nb] : SymInt(1);
    const SymInt s2 = i + b2 >= nb ? b.sizes[i + b2 - nb] : SymInt(1);
    if (s1.is_constant() && s2.is_constant() && s1.constant() != s2.constant() &&
        s1.constant() != 1 && s2.constant() != 1)
      sa::fail(node, "cdist's batch dims must broadcast", s1.str(), s2.str());
    t.sizes.push_back(s1.is_constant() && s1.constant() == 1 ? s2 : s1);
  }
  t.sizes.push_back(a.sizes[a.sizes.size() - 2]);
  t.sizes.push_back(b.sizes[b.sizes.size() - 2]);
  return {t};
}

std::vector<RValue> cdist_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.tensor("x1");
  const Tensor& b = ctx.tensor("x2");
  const double p = ctx.float_arg("p", 2.0);
  std::optional<int64_t> mode;
  if (ctx.has("compute_mode")) mode = ctx.int_arg("compute_mode");
  Tensor out = Tensor::empty(distance::cdist_sizes(a, b, p, mode, ctx.where()), a.dtype());
  distance::cdist(a, b, p, out, ctx.where());
  return {out};
}

std::vector<TensorType> pdist_type(const Node& node) {
  const TensorType& x = sa::type(node, "self");
  check_dtype(node, x, "input");
  if (x.sizes.size() != 2) sa::fail(node, "pdist needs a 2-D input", "[N, M]", x.str());
  check_p(node, sa::float_(node, "p", 2.0));
  TensorType t = x;
  t.strides.clear();
  t.sizes = {(x.sizes[0] * (x.sizes[0] - 1)).floordiv(2)};
  return {t};
}

std::vector<RValue> pdist_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  const double p = ctx.float_arg("p", 2.0);
  Tensor out = Tensor::empty(distance::pdist_sizes(x, p, ctx.where()), x.dtype());
  distance::pdist(x, p, out, ctx.where());
  return {out};
}

}  // namespace

std::vector<TensorType> shape_cdist(const Node& n) { return cdist_type(n); }
std::vector<RValue> kernel_cdist(KernelContext& ctx) { return cdist_kernel(ctx); }
std::vector<TensorType> shape_cdist_forward(const Node& n) { return cdist_type(n); }
std::vector<RValue> kernel_cdist_forward(KernelContext& ctx) { return cdist_kernel(ctx); }
std::vector<TensorType> shape_pdist(const Node& n) { return pdist_type(n); }
std::vector<RValue> kernel_pdist(KernelContext& ctx) { return pdist_kernel(ctx); }
std::vector<TensorType> shape_pdist_forward(const Node& n) { return pdist_type(n); }
std::vector<RValue> kernel_pdist_forward(KernelContext& ctx) { return pdist_kernel(ctx); }

}  // namespace anvil::ops
