#include "ops/common.h"

#include <algorithm>

#include <cmath>
#include <sstream>

namespace anvil::ops {

// ---------------------------------------------------------------------------------------------
// Scalars and operands

std::string Scalar::str() const {
  switch (kind) {
    case Kind::kBool:
      return i ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i);
    case Kind::kFloat: {
      std::ostringstream os;
      os << f;
      return os.str();
    }
  }
  return "?";
}

DType scalar_kind_dtype(Scalar::Kind kind) {
  switch (kind) {
    case Scalar::Kind::kBool:
      return DType::kBool;
    case Scalar::Kind::kInt:
      return DType::kInt64;
    case Scalar::Kind::kFloat:
      return DType::kFloat32;
  }
  return DType::kFloat32;
}

std::optional<Scalar> opt_scalar_arg(const ir::KernelContext& ctx, const std::string& name) {
  const ir::RValue& v = ctx.raw(name);
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(&v)) return Scalar::from_int(*i);
  if (auto* d = std::get_if<double>(&v)) return Scalar::from_float(*d);
  if (auto* b = std::get_if<bool>(&v)) return Scalar::from_bool(*b);
  ctx.fail("argument '" + name + "' is not a number", "int, float or bool", "another kind");
}

Scalar scalar_arg(const ir::KernelContext& ctx, const std::string& name) {
  std::optional<Scalar> s = opt_scalar_arg(ctx, name);
  if (!s) ctx.fail("argument '" + name + "' is missing", "a number", "None");
  return *s;
}

Operand operand_arg(const ir::KernelContext& ctx, const std::string& name) {
  Operand op;
  if (std::holds_alternative<Tensor>(ctx.raw(name)))
    op.tensor = ctx.tensor(name);
  else
    op.scalar = scalar_arg(ctx, name);
  return op;
}

Scalar::Kind scalar_kind(const ir::Node& node, const std::string& name) {
  const ir::Arg* a = node.arg(name);
  if (!a || a->kind == ir::Arg::Kind::kNone)
    ir::shape_args::fail(node, "argument '" + name + "' is missing", "a number", "None");
  switch (a->kind) {
    case ir::Arg::Kind::kBool:
      return Scalar::Kind::kBool;
    case ir::Arg::Kind::kInt:
    case ir::Arg::Kind::kSymInt:
      return Scalar::Kind::kInt;
    case ir::Arg::Kind::kFloat:
      return Scalar::Kind::kFloat;
    default:
      ir::shape_args::fail(node, "argument '" + name + "' is not a number", "int, float or bool",
                           "another kind");
  }
}

TypeOperand type_operand(const ir::Node& node, const std::string& name) {
  TypeOperand op;
  const ir::Arg* a = node.arg(name);
  if (a && a->kind == ir::Arg::Kind::kTensor)
    op.type = &ir::shape_args::type(node, name);
  else
    op.kind = scalar_kind(node, name);
  return op;
}

// ---------------------------------------------------------------------------------------------
// Type promotion

namespace {
std::optional<DType> promote_opt(std::optional<DType> a, DType b) {
  return a ? promote_types(*a, b) : b;
}

/// c10's combine_categories: `higher` wins unless `lower` is of a higher category.
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_complex(*higher)) return higher;
  if (is_complex(*lower)) {
    if (is_floating(*higher))
      return *higher == DType::kFloat64 ? DType::kComplex128 : DType::kComplex64;
    return lower;
  }
  if (is_floating(*higher)) return higher;
  if (*higher == DType::kBool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}
}  // namespace

void ResultType::add_tensor(DType dtype, size_t dim) {
  if (dim > 0)
    dim_ = promote_opt(dim_, dtype);
  else
    zero_ = promote_opt(zero_, dtype);
}

void ResultType::add_scalar(Scalar::Kind kind) {
  wrapped_ = promote_opt(wrapped_, scalar_kind_dtype(kind));
}

void ResultType::add(const Operand& op) {
  if (op.is_tensor())
    add_tensor(op.tensor->dtype(), static_cast<size_t>(op.tensor->dim()));
  else
    add_scalar(op.scalar.kind);
}

void ResultType::add(const TypeOperand& op) {
  if (op.is_tensor())
    add_tensor(op.type->dtype, op.type->sizes.size());
  else
    add_scalar(op.kind);
}

DType ResultType::get() const {
  std::optional<DType> r = combine_categories(dim_, combine_categories(zero_, wrapped_));
  ANVIL_INTERNAL_ASSERT(r.has_value(), "result_type of no operands");
  return *r;
}

DType result_type(const std::vector<Operand>& ops) {
  ResultType rt;
  for (const Operand& op : ops) rt.add(op);
  return rt.get();
}

DType result_type(const std::vector<TypeOperand>& ops) {
  ResultType rt;
  for (const TypeOperand& op : ops) rt.add(op);
  return rt.get();
}

bool can_cast(DType from, DType to) {
  if (is_complex(from) && !is_complex(to)) return false;
  if (is_floating(from) && is_integral(to, /*include_bool=*/true)) return false;
  if (from != DType::kBool && to == DType::kBool) return false;
  return true;
}

DType float_result_dtype(DType dtype) {
  return is_floating(dtype) || is_complex(dtype) ? dtype : DType::kFloat32;
}

DType compute_dtype(DType dtype, const std::string& where) {
  check_supported(dtype, where);
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
      return DType::kFloat32;
    case DType::kFloat64:
      return DType::kFloat64;
    default:
      break;
  }
  if (is_integral(dtype, /*include_bool=*/true)) return DType::kInt64;
  throw Error("dtype not supported by pointwise reference kernels", where,
              "a real floating, integer or bool dtype", dtype_name(dtype));
}

// ---------------------------------------------------------------------------------------------
// Shapes

std::string node_where(const ir::Node& node) {
  return "node " + node.name + " (" + node.target + ")";
}

std::vector<SymInt> broadcast_sym_shapes(const std::vector<SymInt>& a, const std::vector<SymInt>& b,
                                         const std::string& where) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<SymInt> out(n);
  for (size_t i = 0; i < n; ++i) {
    const SymInt da = i < n - a.size() ? SymInt(1) : a[i - (n - a.size())];
    const SymInt db = i < n - b.size() ? SymInt(1) : b[i - (n - b.size())];
    if (da == db || db == SymInt(1)) {
      out[i] = da;
    } else if (da == SymInt(1)) {
      out[i] = db;
    } else {
      throw Error(str("shapes ", sym_shape_str(a), " and ", sym_shape_str(b),
                      " cannot broadcast at dim ", i, " (", da.str(), " vs ", db.str(), ")"),
                  where, sym_shape_str(a), sym_shape_str(b));
    }
  }
  return out;
}

ir::TensorType pointwise_type(const ir::Node& node, const std::vector<TypeOperand>& ops,
                              DType dtype) {
  ir::TensorType out;
  out.dtype = dtype;
  bool first = true;
  for (const TypeOperand& op : ops) {
    if (!op.is_tensor()) continue;
    if (first) {
      out.sizes = op.type->sizes;
      out.device = op.type->device;
      first = false;
    } else {
      out.sizes = broadcast_sym_shapes(out.sizes, op.type->sizes, node_where(node));
    }
  }
  return out;
}

ir::TensorType inplace_type(const ir::Node& node, const ir::TensorType& self,
                            const std::vector<TypeOperand>& others, DType result) {
  for (const TypeOperand& op : others) {
    if (!op.is_tensor()) continue;
    std::vector<SymInt> b = broadcast_sym_shapes(self.sizes, op.type->sizes, node_where(node));
    if (b != self.sizes)
      ir::shape_args::fail(node, "in-place output does not match the broadcast shape",
                           sym_shape_str(self.sizes), sym_shape_str(b));
  }
  if (!can_cast(result, self.dtype))
    ir::shape_args::fail(node, "in-place result type cannot be cast to self's dtype",
                         str("a result castable to ", dtype_name(self.dtype)), dtype_name(result));
  ir::TensorType out = self;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Elementwise loops

Tensor scalar_tensor(const Scalar& s, DType dtype) {
  Tensor t = Tensor::empty({}, dtype);
  if (s.kind != Scalar::Kind::kFloat && is_integral(dtype, /*include_bool=*/true)) {
    ANVIL_DISPATCH_REAL(dtype, "scalar_tensor", T, { *t.data<T>() = s.as<T>(); });
  } else {
    t.fill(s.to_double());
  }
  return t;
}

namespace {
/// True when `t`'s elements tile its storage span exactly once in some dim order (PyTorch's
/// is_non_overlapping_and_dense): a permutation of a contiguous layout.
bool non_overlapping_dense(const Tensor& t) {
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int64_t>(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return t.stride(x) > t.stride(y); });
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    const int64_t d = order[k];
    if (t.size(d) == 1) continue;
    if (t.stride(d) != expect) return false;
    expect *= t.size(d);
  }
  return true;
}

Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype) {
  if (strides == Tensor::contiguous_strides(sizes)) return Tensor::empty(sizes, dtype);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return Tensor::empty({n}, dtype).as_strided(sizes, strides, 0);
}
}  // namespace

Tensor to_preserving(const Tensor& t, DType dtype, bool copy) {
  if (t.dtype() == dtype && !copy) return t;
  if (t.is_contiguous() || t.dim() < 2 || !non_overlapping_dense(t)) return t.to(dtype, copy);
  Tensor out = empty_strided(t.sizes(), t.strides(), dtype);
  out.copy_from(t);
  return out;
}

Shape memory_format_strides(const Shape& sizes, int64_t code) {
  const size_t nd = sizes.size();
  if (!((code == 2 && nd == 4) || (code == 3 && nd == 5))) return Tensor::contiguous_strides(sizes);
  Shape strides(nd);
  int64_t running = 1;
  // channels (dim 1) fastest, then the spatial dims from the last, then the batch
  strides[1] = running;
  running *= std::max<int64_t>(sizes[1], 1);
  for (size_t d = nd - 1; d >= 2; --d) {
    strides[d] = running;
    running *= std::max<int64_t>(sizes[d], 1);
  }
  strides[0] = running;
  return strides;
}

Tensor copy_in_format(const Tensor& t, DType dtype, std::optional<int64_t> code) {
  if (code && (*code == 2 || *code == 3)) {
    Tensor out = empty_strided(t.sizes(), memory_format_strides(t.sizes(), *code), dtype);
    out.copy_from(t);
    return out;
  }
  if (code && *code == 1) return t.to(dtype, /*copy=*/true);
  return to_preserving(t, dtype, /*copy=*/true);
}

Tensor empty_like_layout(const Tensor& like, DType dtype) {
  if (like.is_contiguous() || like.dim() < 2 || !non_overlapping_dense(like))
    return Tensor::empty(like.sizes(), dtype);
  return empty_strided(like.sizes(), like.strides(), dtype);
}

Tensor channels_last_like(const Tensor& value, const Tensor& input) {
  if (input.dim() != 4 || value.dim() != 4 || input.is_contiguous() ||
      input.strides() != memory_format_strides(input.sizes(), 2))
    return value;
  if (value.strides() == memory_format_strides(value.sizes(), 2)) return value;
  return copy_in_format(value, value.dtype(), 2);
}

Tensor layout_like(const Tensor& value, const Tensor& like) {
  if (like.is_contiguous() || value.sizes() != like.sizes()) return value;
  Tensor out = empty_like_layout(like, value.dtype());
  if (out.is_contiguous()) return value;
  out.copy_from(value);
  return out;
}

Shape pointwise_strides(const Shape& shape, const std::vector<const Tensor*>& ins) {
  const size_t nd = shape.size();
  Shape strides(nd, 0);
  // perm[0] is the fastest dim; start from the row-major order (TensorIterator's
  // reorder_dimensions) and insertion-sort by the inputs' strides.
  std::vector<size_t> perm(nd);
  for (size_t k = 0; k < nd; ++k) perm[k] = nd - 1 - k;
  auto should_swap = [&](size_t d0, size_t d1) {
    for (const Tensor* t : ins) {
      if (!t || t->dim() != static_cast<int64_t>(nd)) continue;
      const int64_t s0 = t->stride(static_cast<int64_t>(d0)), s1 = t->stride(static_cast<int64_t>(d1));
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  for (size_t i = 1; i < nd; ++i) {
    size_t d1 = i;
    for (size_t d0 = i; d0-- > 0;) {
      const int c = should_swap(perm[d0], perm[d1]);
      if (c > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  int64_t running = 1;
  for (size_t k = 0; k < nd; ++k) {
    strides[perm[k]] = running;
    running *= std::max<int64_t>(shape[perm[k]], 1);
  }
  // dims of size 1 take the stride row-major order gives them, as a contiguous tensor would
  bool inverted = true;
  for (size_t k = 0; k < nd; ++k) inverted = inverted && perm[k] == nd - 1 - k;
  return inverted ? Tensor::contiguous_strides(shape) : strides;
}

Tensor empty_pointwise(const Shape& shape, DType dtype, const std::vector<const Tensor*>& ins) {
  return empty_strided(shape, pointwise_strides(shape, ins), dtype);
}

Tensor as_input(const Operand& op, DType result, bool exact_scalar) {
  if (op.is_tensor()) return to_preserving(*op.tensor, result);
  const DType compute = compute_dtype(result, "as_input");
  if (exact_scalar) return scalar_tensor(op.scalar, compute);
  return scalar_tensor(op.scalar, result).to(compute);
}

namespace detail {
Tensor loop_input(const Tensor& t, DType dtype, const Shape& shape) {
  Tensor c = to_preserving(t, dtype);
  return c.sizes() == shape ? c : c.expand(shape);
}
}  // namespace detail

void assign_inplace(const Tensor& self, const Tensor& value, const std::string& where,
                    bool any_cast) {
  const Shape b = broadcast_shapes(self.sizes(), value.sizes(), where);
  if (b != self.sizes())
    throw Error("in-place output does not match the broadcast shape", where,
                shape_str(self.sizes()), shape_str(b));
  if (!any_cast && !can_cast(value.dtype(), self.dtype()))
    throw Error("in-place result type cannot be cast to self's dtype", where,
                str("a result castable to ", dtype_name(self.dtype())), dtype_name(value.dtype()));
  Tensor src = value.storage() == self.storage() ? value.clone() : value;
  Tensor dst = self;  // a handle on the same storage
  dst.copy_from(src.sizes() == self.sizes() ? src : src.expand(self.sizes()));
}

}  // namespace anvil::ops
