// Lowering of padding (aten.pad in every mode, constant_pad_nd, reflection_pad*d,
// replication_pad*d) and aten.roll as index maps: each output element loads one input element,
// so they fuse with their neighbours like any pointwise op. Per padded dimension of size n with
// left pad l, output position i reads j = i - l mapped by the mode:
//   constant:  j when 0 <= j < n, else the fill value (the load uses clamp(j) so it stays in
//              bounds; a select picks the value)
//   reflect:   (n-1) - |(n-1) - |j||      (PyTorch's reflection, pads < n)
//   replicate: clamp(j, 0, n-1)
//   circular:  j mod n
// roll reads (i - shift) mod n along each rolled dim, or along the flattened tensor; flip reads
// n-1-i along each flipped dim.
#include "core/error.h"
#include "ops/pad.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

SymInt abs_sym(const SymInt& x) { return SymInt::max(x, -x); }

SymInt clamp_sym(const SymInt& j, const SymInt& n) {
  return SymInt::min(SymInt::max(j, SymInt(0)), n - SymInt(1));
}

bool lower_pad_op(Lowerer& L, const ir::Node& n) {
  const ops::PadInfo info = ops::pad_info(n);
  TRefPtr x = L.arg("self");
  if (!x) L.fail("pad needs self");
  const ir::TensorType& out = L.out_type();
  const DType rt = out.dtype;
  const std::vector<SymInt> in_sizes = x->sizes;
  const size_t rank = in_sizes.size();
  auto& E = L.ex();
  const bool constant = info.mode == "constant";
  const int fill = E.cast(E.constant(info.value, DType::kFloat64), rt);
  for (size_t k = 0; k < info.pairs.size(); ++k)
    if (is_const(in_sizes[rank - 1 - k], 0)) {  // nothing to read: all fill (or an error above)
      if (!constant) L.fail("padding an empty dimension");
      L.bind(0, L.computed(out.sizes, rt, [fill](const Index&) { return fill; }, {}));
      return true;
    }
  L.bind(0, L.computed(
                out.sizes, rt,
                [&L, &E, x, info, in_sizes, rank, constant, fill, rt](const Index& idx) {
                  Index src = idx;
                  int inside = -1;
                  for (size_t k = 0; k < info.pairs.size(); ++k) {
                    const size_t d = rank - 1 - k;
                    const SymInt& size = in_sizes[d];
                    const SymInt j = idx[d] - info.pairs[k].first;
                    if (info.mode == "reflect") {
                      src[d] = (size - SymInt(1)) - abs_sym((size - SymInt(1)) - abs_sym(j));
                    } else if (info.mode == "circular") {
                      src[d] = j.mod(size);
                    } else {
                      src[d] = clamp_sym(j, size);
                    }
                    if (!constant) continue;
                    const int jv = E.index_value(j, DType::kInt64);
                    const int in_dim = E.binary(
                        ExprOp::kLogicalAnd,
                        E.binary(ExprOp::kGe, jv, E.int_constant(0, DType::kInt64), DType::kBool),
                        E.binary(ExprOp::kLt, jv, E.index_value(size, DType::kInt64),
                                 DType::kBool),
                        DType::kBool);
                    inside = inside < 0 ? in_dim
                                        : E.binary(ExprOp::kLogicalAnd, inside, in_dim,
                                                   DType::kBool);
                  }
                  const int v = E.cast(L.load(*x, src), rt);
                  return inside < 0 ? v : E.where(inside, v, fill, rt);
                },
                {x}));
  return true;
}

bool lower_roll(Lowerer& L, const ir::Node& n) {
  const ops::RollInfo info = ops::roll_info(n);
  TRefPtr x = L.arg("self");
  if (!x) L.fail("roll needs self");
  const std::vector<SymInt> sizes = x->sizes;
  for (const SymInt& s : sizes)
    if (is_const(s, 0)) {  // an empty tensor: nothing to read
      const int zero = L.ex().cast(L.ex().int_constant(0, DType::kInt64), x->dtype);
      L.bind(0, L.computed(sizes, x->dtype, [zero](const Index&) { return zero; }, {}));
      return true;
    }
  L.bind(0, L.computed(
                sizes, x->dtype,
                [&L, x, info, sizes](const Index& idx) {
                  Index src = idx;
                  if (info.dims.empty()) {  // the flattened tensor rolls by shifts[0]
                    SymInt flat(0), numel(1);
                    for (size_t d = 0; d < sizes.size(); ++d) {
                      flat = flat * sizes[d] + idx[d];
                      numel = numel * sizes[d];
                    }
                    SymInt from = (flat - SymInt(info.shifts[0])).mod(numel);
                    for (size_t d = sizes.size(); d-- > 0;) {
                      src[d] = from.mod(sizes[d]);
                      from = from.floordiv(sizes[d]);
                    }
                  } else {
                    for (size_t k = 0; k < info.dims.size(); ++k) {
                      const size_t d = static_cast<size_t>(info.dims[k]);
                      src[d] = (idx[d] - SymInt(info.shifts[k])).mod(sizes[d]);
                    }
                  }
                  return L.load(*x, src);
                },
                {x}));
  return true;
}

bool lower_flip(Lowerer& L, const ir::Node& n) {
  const std::vector<int64_t> dims = ops::flip_dims(n);
  TRefPtr x = L.arg("self");
  if (!x) L.fail("flip needs self");
  const std::vector<SymInt> sizes = x->sizes;
  L.bind(0, L.computed(
                sizes, x->dtype,
                [&L, x, dims, sizes](const Index& idx) {
                  Index src = idx;
                  for (int64_t d : dims) {
                    const size_t k = static_cast<size_t>(d);
                    src[k] = sizes[k] - SymInt(1) - idx[k];
                  }
                  return L.load(*x, src);
                },
                {x}));
  return true;
}

}  // namespace

bool lower_pad(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  if (t == "aten.roll.default") return lower_roll(L, n);
  if (t == "aten.flip.default") return lower_flip(L, n);
  if (t == "aten.pad.default" || t == "aten.constant_pad_nd.default" ||
      t.rfind("aten.reflection_pad", 0) == 0 || t.rfind("aten.replication_pad", 0) == 0)
    return lower_pad_op(L, n);
  return false;
}

}  // namespace anvil::passes::detail
