// Lowering rules for reductions and normalisations. Each reduction becomes a reduction SNode;
// what follows it (mean's division, softmax's exp / divide, layer_norm's affine epilogue) is a
// computed TRef that the scheduler fuses into the same kernel when the shapes line up.
#include <algorithm>

#include "core/error.h"
#include "ops/common.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

/// Compute dtype of floating reductions: f32 for 16-bit floats and f32, f64 for f64.
DType acc_float(DType t) { return t == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32; }

/// Normalised, sorted, unique reduction dims from argument `name` (absent / None / [] = all).
std::vector<int64_t> reduce_dims(Lowerer& L, const ir::Node& n, const std::string& name,
                                 size_t rank) {
  std::vector<int64_t> dims;
  const ir::Arg* a = n.arg(name);
  bool all = !a || a->kind == ir::Arg::Kind::kNone;
  if (!all) {
    for (const auto& d : ir::shape_args::symints(n, name))
      dims.push_back(L.wrap_dim(d.constant(), rank));
    if (dims.empty()) all = true;
  }
  if (all) {
    dims.clear();
    for (size_t d = 0; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

/// `in` converted to dtype `dt` (computed).
TRefPtr as_dtype(Lowerer& L, const TRefPtr& in, DType dt) {
  if (in->dtype == dt) return in;
  auto& E = L.ex();
  return L.computed(in->sizes, dt,
                    [&L, &E, in, dt](const Index& idx) { return E.cast(L.load(*in, idx), dt); },
                    {in});
}

/// Number of elements over `dims` as an expression value of dtype `dt`.
int count_value(Lowerer& L, const std::vector<SymInt>& sizes, const std::vector<int64_t>& dims,
                DType dt) {
  SymInt n(1);
  for (int64_t d : dims) n = n * sizes[static_cast<size_t>(d)];
  auto& E = L.ex();
  if (auto c = n.maybe_constant()) return E.constant(static_cast<double>(*c), dt);
  return E.cast(E.index_value(n, DType::kInt64), dt);
}

/// sum over dims / count, keepdim, in dtype `out` (accumulating in acc_float(out)).
TRefPtr mean(Lowerer& L, const TRefPtr& x, const std::vector<int64_t>& dims, bool keepdim,
             DType out) {
  const DType acc = acc_float(out);
  TRefPtr s = L.reduce(as_dtype(L, x, acc), dims, keepdim, ReduceOp::kSum, acc);
  auto& E = L.ex();
  const int cnt = count_value(L, x->sizes, dims, acc);
  return L.computed(s->sizes, out,
                    [&L, &E, s, cnt, acc, out](const Index& idx) {
                      return E.cast(E.binary(ExprOp::kDiv, L.load(*s, idx), cnt, acc), out);
                    },
                    {s});
}

/// softmax / log_softmax of x over dim in dtype ct, result dtype out.
TRefPtr softmax(Lowerer& L, const TRefPtr& x_in, int64_t dim, DType ct, DType out, bool log) {
  auto& E = L.ex();
  TRefPtr x = as_dtype(L, x_in, ct);
  const auto sizes = x->sizes;
  TRefPtr m = L.reduce(x, {dim}, true, ReduceOp::kMax, ct);
  TRefPtr e = L.computed(sizes, ct,
                         [&L, &E, x, m, sizes, ct](const Index& idx) {
                           int v =
                               E.binary(ExprOp::kSub, L.load(*x, idx),
                                        L.load(*m, Lowerer::broadcast_index(*m, sizes, idx)), ct);
                           return E.unary(ExprOp::kExp, v, ct);
                         },
                         {x, m});
  TRefPtr s = L.reduce(e, {dim}, true, ReduceOp::kSum, ct);
  return L.computed(sizes, out,
                    [&L, &E, x, m, e, s, sizes, ct, out, log](const Index& idx) {
                      const int sv = L.load(*s, Lowerer::broadcast_index(*s, sizes, idx));
                      if (log) {
                        int v = E.binary(ExprOp::kSub, L.load(*x, idx),
                                         L.load(*m, Lowerer::broadcast_index(*m, sizes, idx)), ct);
                        return E.cast(E.binary(ExprOp::kSub, v, E.unary(ExprOp::kLog, sv, ct), ct),
                                      out);
                      }
                      return E.cast(E.binary(ExprOp::kDiv, L.load(*e, idx), sv, ct), out);
                    },
                    {x, m, e, s});
}

}  // namespace

bool lower_reduction(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  if (n.schema->category != ir::OpCategory::kReduction) return false;
  auto& E = L.ex();
  if (t == "aten.sum.default" || t == "aten.sum.dim_IntList" || t == "aten.mean.default" ||
      t == "aten.mean.dim" || t == "aten.amax.default" || t == "aten.amin.default" ||
      t == "aten.any.dim") {
    TRefPtr x = L.arg("self");
    const ir::TensorType& out = L.out_type();
    const bool has_dim = t != "aten.sum.default" && t != "aten.mean.default";
    const auto dims = has_dim ? reduce_dims(L, n, "dim", x->sizes.size())
                              : reduce_dims(L, n, "__none__", x->sizes.size());
    const bool keepdim = ir::shape_args::bool_(n, "keepdim", false);
    if (t.rfind("aten.mean", 0) == 0) {
      L.bind(0, mean(L, x, dims, keepdim, out.dtype));
    } else if (t.rfind("aten.sum", 0) == 0) {
      L.bind(0, L.reduce(x, dims, keepdim, ReduceOp::kSum, out.dtype));
    } else if (t == "aten.any.dim") {
      L.bind(0, L.reduce(as_dtype(L, x, DType::kBool), dims, keepdim, ReduceOp::kAny, out.dtype));
    } else {
      L.bind(0, L.reduce(x, dims, keepdim,
                         t == "aten.amax.default" ? ReduceOp::kMax : ReduceOp::kMin, out.dtype));
    }
    return true;
  }
  if (t == "aten.any.default" || t == "aten.any.dims" || t == "aten.all.default" ||
      t == "aten.all.dim") {  // on the input as bool; uint8 inputs give uint8
    TRefPtr x = L.arg("self");
    const size_t rank = x->sizes.size();
    std::vector<int64_t> dims = reduce_dims(L, n, "__none__", rank);
    if (t == "aten.any.dims") dims = reduce_dims(L, n, "dim", rank);
    if (t == "aten.all.dim") dims = {L.wrap_dim(ir::shape_args::int_(n, "dim"), rank)};
    if (rank == 0) dims.clear();
    const bool all = t.rfind("aten.all", 0) == 0;
    L.bind(0, L.reduce(as_dtype(L, x, DType::kBool), dims, ir::shape_args::bool_(n, "keepdim", false),
                       all ? ReduceOp::kAll : ReduceOp::kAny, L.out_type().dtype));
    return true;
  }
  if (t == "aten.prod.default" || t == "aten.prod.dim_int") {  // in the result dtype
    TRefPtr x = L.arg("self");
    const size_t rank = x->sizes.size();
    std::vector<int64_t> dims = reduce_dims(L, n, "__none__", rank);
    if (t == "aten.prod.dim_int") dims = {L.wrap_dim(ir::shape_args::int_(n, "dim"), rank)};
    if (rank == 0) dims.clear();
    const DType dt = L.out_type().dtype;
    L.bind(0, L.reduce(as_dtype(L, x, dt), dims, ir::shape_args::bool_(n, "keepdim", false),
                       ReduceOp::kProd, dt));
    return true;
  }
  if (t == "aten.softmax.int" || t == "aten._softmax.default" || t == "aten.log_softmax.int" ||
      t == "aten._log_softmax.default") {
    TRefPtr x = L.arg("self");
    const ir::TensorType& out = L.out_type();
    const int64_t dim = L.wrap_dim(ir::shape_args::int_(n, "dim"), x->sizes.size());
    const bool log = t == "aten.log_softmax.int" || t == "aten._log_softmax.default";
    if (x->sizes.empty()) {  // softmax of a scalar is 1 (log: 0)
      const int c = E.constant(log ? 0.0 : 1.0, out.dtype);
      L.bind(0, L.computed({}, out.dtype, [c](const Index&) { return c; }, {x}));
      return true;
    }
    L.bind(0, softmax(L, x, dim, acc_float(out.dtype), out.dtype, log));
    return true;
  }
  if (t == "aten.layer_norm.default" || t == "aten.native_layer_norm.default") {
    TRefPtr x0 = L.arg("input");
    TRefPtr w = L.arg("weight"), b = L.arg("bias");
    const DType dt = x0->dtype, ct = acc_float(dt);
    const size_t nd = ir::shape_args::symints(n, "normalized_shape").size();
    const size_t rank = x0->sizes.size();
    std::vector<int64_t> dims;
    for (size_t d = rank - nd; d < rank; ++d) dims.push_back(static_cast<int64_t>(d));
    const double eps = ir::shape_args::float_(n, "eps", 1e-5);
    TRefPtr x = as_dtype(L, x0, ct);
    const auto sizes = x->sizes;
    TRefPtr mu = mean(L, x, dims, true, ct);
    TRefPtr d2 =
        L.computed(sizes, ct,
                   [&L, &E, x, mu, sizes, ct](const Index& idx) {
                     int d = E.binary(ExprOp::kSub, L.load(*x, idx),
                                      L.load(*mu, Lowerer::broadcast_index(*mu, sizes, idx)), ct);
                     return E.binary(ExprOp::kMul, d, d, ct);
                   },
                   {x, mu});
    TRefPtr var = mean(L, d2, dims, true, ct);
    L.bind(0, L.computed(
                  sizes, dt,
                  [&L, &E, x, mu, var, w, b, sizes, ct, dt, eps](const Index& idx) {
                    int d = E.binary(ExprOp::kSub, L.load(*x, idx),
                                     L.load(*mu, Lowerer::broadcast_index(*mu, sizes, idx)), ct);
                    int v = E.binary(ExprOp::kAdd,
                                     L.load(*var, Lowerer::broadcast_index(*var, sizes, idx)),
                                     E.constant(eps, ct), ct);
                    int y = E.binary(ExprOp::kMul, d, E.unary(ExprOp::kRsqrt, v, ct), ct);
                    if (w)
                      y = E.binary(ExprOp::kMul, y,
                                   E.cast(L.load(*w, Lowerer::broadcast_index(*w, sizes, idx)), ct),
                                   ct);
                    if (b)
                      y = E.binary(ExprOp::kAdd, y,
                                   E.cast(L.load(*b, Lowerer::broadcast_index(*b, sizes, idx)), ct),
                                   ct);
                    return E.cast(y, dt);
                  },
                  {x, mu, var, w, b}));
    if (t == "aten.native_layer_norm.default") {  // mean and rstd, keepdim over the norm dims
      const auto ssz = mu->sizes;
      if (n.outputs.size() > 1 && n.outputs[1]) L.bind(1, as_dtype(L, mu, dt));
      if (n.outputs.size() > 2 && n.outputs[2])
        L.bind(2, L.computed(ssz, dt,
                             [&L, &E, var, ct, dt, eps](const Index& idx) {
                               int v = E.binary(ExprOp::kAdd, L.load(*var, idx),
                                                E.constant(eps, ct), ct);
                               return E.cast(E.unary(ExprOp::kRsqrt, v, ct), dt);
                             },
                             {var}));
    }
    return true;
  }
  if (t == "aten.batch_norm.default" || t == "aten._native_batch_norm_legit_no_training.default") {
    if (ir::shape_args::bool_(n, "training", false))
      L.fail("batch_norm in training mode is not supported", "training=False", "training=True");
    TRefPtr x = L.arg("input");
    TRefPtr w = L.arg("weight"), b = L.arg("bias");
    TRefPtr rm = L.arg("running_mean"), rv = L.arg("running_var");
    if (!rm || !rv) L.fail("batch_norm needs running_mean and running_var");
    const DType dt = x->dtype, ct = acc_float(dt);
    const double eps = ir::shape_args::float_(n, "eps", 1e-5);
    const auto sizes = x->sizes;
    L.bind(0, L.computed(sizes, dt,
                         [&L, &E, x, w, b, rm, rv, ct, dt, eps](const Index& idx) {
                           const Index c{idx[1]};
                           int inv = E.unary(ExprOp::kRsqrt,
                                             E.binary(ExprOp::kAdd, E.cast(L.load(*rv, c), ct),
                                                      E.constant(eps, ct), ct),
                                             ct);
                           if (w) inv = E.binary(ExprOp::kMul, inv, E.cast(L.load(*w, c), ct), ct);
                           int y = E.binary(ExprOp::kMul,
                                            E.binary(ExprOp::kSub, E.cast(L.load(*x, idx), ct),
                                                     E.cast(L.load(*rm, c), ct), ct),
                                            inv, ct);
                           if (b) y = E.binary(ExprOp::kAdd, y, E.cast(L.load(*b, c), ct), ct);
                           return E.cast(y, dt);
                         },
                         {x, w, b, rm, rv}));
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (n.outputs[i]) {
        const int z = E.constant(0, dt);
        L.bind(i, L.computed(n.outputs[i]->type.sizes, dt, [z](const Index&) { return z; }, {}));
      }
    return true;
  }
  return false;  // argmax, cumsum, diff: extern
}

}  // namespace anvil::passes::detail
