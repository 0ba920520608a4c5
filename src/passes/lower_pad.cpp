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
// n-1-i along each flipped dim; bilinear / nearest upsampling reads its source pixels with the
// scale as an exact ratio of sizes. select_scatter / slice_scatter pick src where the index of
// `dim` is the selected one (or in the slice: j = i - start, 0 <= j, j % step == 0, j / step <
// len), self elsewhere; copy reads src broadcast to self's sizes.
#include <cmath>
#include <optional>

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

/// The exact source-scale ratio num / den of one upsampled dim, or nullopt when the kernel's
/// scale (1 / scale_factor) is not a ratio of the sizes the loop IR can index with.
std::optional<std::pair<SymInt, SymInt>> upsample_ratio(const ops::UpsampleInfo& u, size_t k) {
  const SymInt& in = u.in[k];
  const SymInt& out = u.out[k];
  if (u.align_corners) {
    if (is_const(out, 1)) return std::make_pair(SymInt(0), SymInt(1));
    return std::make_pair(in - SymInt(1), out - SymInt(1));
  }
  const double s = u.scale[k];
  if (s <= 0) return std::make_pair(in, out);
  if (s == std::floor(s) && s >= 1) return std::make_pair(SymInt(1), SymInt(static_cast<int64_t>(s)));
  const auto ic = in.maybe_constant(), oc = out.maybe_constant();
  if (ic && oc && static_cast<double>(*ic) * s == static_cast<double>(*oc))
    return std::make_pair(in, out);
  return std::nullopt;
}

/// Bilinear / nearest upsampling with scale p / q per dim (exact integer index arithmetic):
///   bilinear: num = p * (2 dst + 1) - q, den = 2 q (align_corners: num = p dst, den = q),
///             h0 = floor(max(num, 0) / den), h1 = min(h0 + 1, in - 1), l = rem / den
///   nearest:  min(floor(dst * p / q), in - 1)
bool lower_upsample(Lowerer& L, const ir::Node& n) {
  const ops::UpsampleInfo u = ops::upsample_info(n);
  TRefPtr x = L.arg(n.arg("input") ? "input" : "self");
  if (!x) L.fail("upsampling needs an input");
  std::vector<std::pair<SymInt, SymInt>> ratio;
  for (size_t k = 0; k < 2; ++k) {
    auto r = upsample_ratio(u, k);
    if (!r)
      L.fail("upsampling with a scale factor whose inverse is not the ratio of the sizes",
             "an integer scale factor or one with in * scale == out",
             str(u.scale[k], " for ", u.in[k].str(), " -> ", u.out[k].str()));
    ratio.push_back(*r);
  }
  const ir::TensorType& out = L.out_type();
  const DType rt = out.dtype, ct = rt == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  auto& E = L.ex();
  L.bind(0, L.computed(
                out.sizes, rt,
                [&L, &E, x, u, ratio, rt, ct](const Index& idx) {
                  if (!u.bilinear) {
                    Index src = idx;
                    for (size_t k = 0; k < 2; ++k) {
                      const auto& [p, q] = ratio[k];
                      src[2 + k] = SymInt::min((idx[2 + k] * p).floordiv(q), u.in[k] - SymInt(1));
                    }
                    return E.cast(L.load(*x, src), rt);
                  }
                  SymInt lo[2], hi[2];
                  int l1[2], l0[2];
                  for (size_t k = 0; k < 2; ++k) {
                    const auto& [p, q] = ratio[k];
                    const SymInt& dst = idx[2 + k];
                    SymInt num = u.align_corners ? dst * p : p * (dst * SymInt(2) + SymInt(1)) - q;
                    const SymInt den = u.align_corners ? q : q * SymInt(2);
                    num = SymInt::max(num, SymInt(0));
                    lo[k] = num.floordiv(den);
                    hi[k] = SymInt::min(lo[k] + SymInt(1), u.in[k] - SymInt(1));
                    l1[k] = E.binary(ExprOp::kDiv,
                                     E.cast(E.index_value(num - lo[k] * den, DType::kInt64), ct),
                                     E.cast(E.index_value(den, DType::kInt64), ct), ct);
                    l0[k] = E.binary(ExprOp::kSub, E.constant(1.0, ct), l1[k], ct);
                  }
                  auto at = [&](const SymInt& h, const SymInt& w) {
                    Index src = idx;
                    src[2] = h;
                    src[3] = w;
                    return E.cast(L.load(*x, src), ct);
                  };
                  auto mix = [&](int a, int wa, int b, int wb) {
                    return E.binary(ExprOp::kAdd, E.binary(ExprOp::kMul, wa, a, ct),
                                    E.binary(ExprOp::kMul, wb, b, ct), ct);
                  };
                  const int top = mix(at(lo[0], lo[1]), l0[1], at(lo[0], hi[1]), l1[1]);
                  const int bottom = mix(at(hi[0], lo[1]), l0[1], at(hi[0], hi[1]), l1[1]);
                  return E.cast(mix(top, l0[0], bottom, l1[0]), rt);
                },
                {x}));
  return true;
}

/// select_scatter / slice_scatter: self, with the positions of the selected index (or slice) of
/// `dim` read from src instead; copy: src broadcast to self's sizes in self's dtype.
bool lower_scatter_copy(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  auto& E = L.ex();
  TRefPtr self = L.arg("self"), src = L.arg("src");
  const ir::TensorType& out = L.out_type();
  const DType rt = out.dtype;
  const std::vector<SymInt> sizes = out.sizes;
  if (t == "aten.copy.default") {
    L.bind(0, L.computed(sizes, rt,
                         [&L, &E, src, sizes, rt](const Index& idx) {
                           return E.cast(L.load(*src, Lowerer::broadcast_index(*src, sizes, idx)), rt);
                         },
                         {src}));
    return true;
  }
  const size_t d = static_cast<size_t>(L.wrap_dim(ir::shape_args::int_(n, "dim", 0), sizes.size()));
  const SymInt size = sizes[d];
  auto normalise = [&](SymInt v) {
    if (auto c = v.maybe_constant(); c && *c < 0) v = size + *c;
    if (auto c = v.maybe_constant(), sc = size.maybe_constant(); c && sc)
      v = SymInt(std::clamp<int64_t>(*c, 0, *sc));
    return v;
  };
  if (t == "aten.select_scatter.default") {
    const SymInt index = normalise(L.symint_arg("index"));
    L.bind(0, L.computed(sizes, rt,
                         [&L, &E, self, src, d, index, rt](const Index& idx) {
                           Index si = idx;
                           si.erase(si.begin() + static_cast<long>(d));
                           const int hit = E.binary(ExprOp::kEq, E.index_value(idx[d], DType::kInt64),
                                                    E.index_value(index, DType::kInt64), DType::kBool);
                           return E.where(hit, E.cast(L.load(*src, si), rt),
                                          E.cast(L.load(*self, idx), rt), rt);
                         },
                         {self, src}));
    return true;
  }
  // slice_scatter: src's size along dim is the slice's length.
  const SymInt start = ir::shape_args::has(n, "start") ? normalise(L.symint_arg("start")) : SymInt(0);
  const int64_t step = ir::shape_args::int_(n, "step", 1);
  const SymInt len = src->sizes[d];
  if (is_const(len, 0)) {
    L.bind(0, L.computed(sizes, rt, [&L, &E, self, rt](const Index& idx) {
      return E.cast(L.load(*self, idx), rt);
    }, {self}));
    return true;
  }
  L.bind(0, L.computed(
                sizes, rt,
                [&L, &E, self, src, d, start, step, len, rt](const Index& idx) {
                  const SymInt j = idx[d] - start;
                  Index si = idx;
                  si[d] = SymInt::min(SymInt::max(j, SymInt(0)).floordiv(step), len - SymInt(1));
                  const int jv = E.index_value(j, DType::kInt64);
                  auto b = [&](ExprOp op, int x, int y) { return E.binary(op, x, y, DType::kBool); };
                  int hit = b(ExprOp::kLogicalAnd,
                              b(ExprOp::kGe, jv, E.int_constant(0, DType::kInt64)),
                              b(ExprOp::kLt, jv, E.index_value(len * SymInt(step) - SymInt(step - 1),
                                                               DType::kInt64)));
                  if (step != 1)
                    hit = b(ExprOp::kLogicalAnd, hit,
                            b(ExprOp::kEq, E.index_value(SymInt::max(j, SymInt(0)).mod(SymInt(step)),
                                                         DType::kInt64),
                              E.int_constant(0, DType::kInt64)));
                  return E.where(hit, E.cast(L.load(*src, si), rt), E.cast(L.load(*self, idx), rt),
                                 rt);
                },
                {self, src}));
  return true;
}

}  // namespace

bool lower_pad(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  if (t == "aten.select_scatter.default" || t == "aten.slice_scatter.default" ||
      t == "aten.copy.default")
    return lower_scatter_copy(L, n);
  if (t == "aten.roll.default") return lower_roll(L, n);
  if (t == "aten.flip.default") return lower_flip(L, n);
  if (t.rfind("aten.upsample_bilinear2d.", 0) == 0 || t.rfind("aten.upsample_nearest2d.", 0) == 0)
    return lower_upsample(L, n);
  if (t == "aten.pad.default" || t == "aten.constant_pad_nd.default" ||
      t.rfind("aten.reflection_pad", 0) == 0 || t.rfind("aten.replication_pad", 0) == 0)
    return lower_pad_op(L, n);
  return false;
}

}  // namespace anvil::passes::detail
