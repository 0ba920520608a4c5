// Matrix products (linear, addmm, mm, bmm, matmul, baddbmm, outer) and embedding: shape rules
// and reference kernels. One cache-blocked GEMM core serves every product (and, through
// linalg_detail::matmul_fused, the attention and convolution kernels): operands are packed into
// contiguous accumulator-typed buffers (fp32 for f32/bf16/f16, f64 for f64, wrapping 64-bit
// integers for int types), multiplied, and rounded once into the operands' dtype.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace linalg_detail {
Tensor matmul_fused(const Tensor& a, const Tensor& b, const Tensor& addend, double alpha,
                    double beta, const std::string& where);
std::vector<SymInt> broadcast_sym(const std::vector<SymInt>& a, const std::vector<SymInt>& b,
                                  const ir::Node& node);
}  // namespace linalg_detail

namespace {

using ir::TensorType;
using linalg_detail::broadcast_sym;
using linalg_detail::matmul_fused;

// ---------------------------------------------------------------------------------------------
// GEMM core
// ---------------------------------------------------------------------------------------------

/// Accumulator type of a product of T: fp32 for 32/16-bit floats, f64 for f64, and uint64_t
/// (two's-complement wrapping, like torch's int64 arithmetic) for every integer type.
template <typename T>
struct GemmAcc {
  using type = std::conditional_t<std::is_integral_v<T>, uint64_t, float>;
};
template <>
struct GemmAcc<double> {
  using type = double;
};

/// Converts an element to its accumulator type (integers wrap through int64).
template <typename Acc, typename T>
inline Acc to_acc(T v) {
  if constexpr (std::is_same_v<Acc, uint64_t>)
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  else
    return cast_value<Acc, T>(v);
}

/// Converts an accumulator back to the element type (integers wrap, floats round once).
template <typename T, typename Acc>
inline T from_acc(Acc v) {
  if constexpr (std::is_same_v<Acc, uint64_t>)
    return static_cast<T>(static_cast<int64_t>(v));
  else
    return cast_value<T, Acc>(v);
}

/// A scalar (alpha, beta) in accumulator type.
template <typename Acc>
inline Acc scalar_acc(double v) {
  if constexpr (std::is_same_v<Acc, uint64_t>)
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  else
    return static_cast<Acc>(v);
}

/// C[m, n] += A[m, k] * B[k, n]; all row-major contiguous. Blocked over n and k so a tile of B
/// stays in cache while every row of A streams past it; the inner loop is unit-stride (i-k-j).
/// Each C element still sums over k in increasing order, whatever the blocking.
template <typename Acc>
void gemm_nn(const Acc* __restrict a, const Acc* __restrict b, Acc* __restrict c, int64_t m,
             int64_t n, int64_t k) {
  constexpr int64_t kBlockN = 512, kBlockK = 128;
  for (int64_t j0 = 0; j0 < n; j0 += kBlockN) {
    const int64_t j1 = std::min(n, j0 + kBlockN);
    for (int64_t p0 = 0; p0 < k; p0 += kBlockK) {
      const int64_t p1 = std::min(k, p0 + kBlockK);
      for (int64_t i = 0; i < m; ++i) {
        Acc* __restrict crow = c + i * n;
        const Acc* arow = a + i * k;
        for (int64_t p = p0; p < p1; ++p) {
          const Acc av = arow[p];
          const Acc* __restrict brow = b + p * n;
          for (int64_t j = j0; j < j1; ++j) crow[j] += av * brow[j];
        }
      }
    }
  }
}

/// Dot product of two contiguous rows with four independent partial sums (for ILP).
template <typename Acc>
inline Acc dot_row(const Acc* __restrict x, const Acc* __restrict y, int64_t k) {
  Acc s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t p = 0;
  for (; p + 4 <= k; p += 4) {
    s0 += x[p] * y[p];
    s1 += x[p + 1] * y[p + 1];
    s2 += x[p + 2] * y[p + 2];
    s3 += x[p + 3] * y[p + 3];
  }
  for (; p < k; ++p) s0 += x[p] * y[p];
  return (s0 + s1) + (s2 + s3);
}

/// C[m, n] += A[m, k] * Bt[n, k]^T (B given transposed, e.g. a linear layer's [out, in] weight):
/// row-by-row dot products, blocked over rows of Bt so a block stays in cache across rows of A.
template <typename Acc>
void gemm_nt(const Acc* a, const Acc* bt, Acc* c, int64_t m, int64_t n, int64_t k) {
  const int64_t block_rows =
      std::max<int64_t>(1, (int64_t{256} << 10) / std::max<int64_t>(1, k * int64_t(sizeof(Acc))));
  for (int64_t j0 = 0; j0 < n; j0 += block_rows) {
    const int64_t j1 = std::min(n, j0 + block_rows);
    for (int64_t i = 0; i < m; ++i) {
      const Acc* arow = a + i * k;
      Acc* crow = c + i * n;
      for (int64_t j = j0; j < j1; ++j) crow[j] += dot_row(arow, bt + j * k, k);
    }
  }
}

/// A 2-D operand in accumulator type: points straight at the tensor's memory when it already
/// has the right type and layout, else at a packed copy in `buf`.
template <typename Acc>
struct Packed {
  const Acc* ptr = nullptr;
  std::vector<Acc> buf;
};

/// Packs the [rows, cols] matrix at `base` with strides (rs, cs) into row-major Acc.
template <typename T, typename Acc>
void pack(const T* base, int64_t rows, int64_t cols, int64_t rs, int64_t cs, Packed<Acc>& out) {
  if constexpr (std::is_same_v<T, Acc>) {
    if ((cs == 1 || cols <= 1) && (rs == cols || rows <= 1)) {
      out.ptr = base;
      return;
    }
  }
  out.buf.resize(static_cast<size_t>(rows * cols));
  Acc* dst = out.buf.data();
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = base + r * rs;
    Acc* d = dst + r * cols;
    if (cs == 1) {
      for (int64_t q = 0; q < cols; ++q) d[q] = to_acc<Acc>(src[q]);
    } else {
      for (int64_t q = 0; q < cols; ++q) d[q] = to_acc<Acc>(src[q * cs]);
    }
  }
  out.ptr = dst;
}

/// C[m, n] += A * B for strided operands A (strides ars, acs) and B (brs, bcs). B is used in
/// transposed form when its k dimension is the unit-stride one (a transposed weight).
template <typename T, typename Acc>
void gemm_strided(const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs, int64_t bcs,
                  Acc* c, int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0 || k == 0) return;
  Packed<Acc> pa, pb;
  pack<T, Acc>(a, m, k, ars, acs, pa);
  const bool b_transposed = brs == 1 && bcs != 1 && n > 1;
  if (b_transposed || (n == 1 && k > 1)) {
    pack<T, Acc>(b, n, k, bcs, brs, pb);  // Bt[n, k]
    gemm_nt(pa.ptr, pb.ptr, c, m, n, k);
  } else {
    pack<T, Acc>(b, k, n, brs, bcs, pb);
    gemm_nn(pa.ptr, pb.ptr, c, m, n, k);
  }
}

/// Splits a linear batch index into a multi-index and returns the element offsets of A and B.
inline void batch_offsets(int64_t index, const Shape& batch, const Shape& astr, const Shape& bstr,
                          int64_t& aoff, int64_t& boff) {
  aoff = boff = 0;
  for (size_t d = batch.size(); d-- > 0;) {
    const int64_t i = index % batch[d];
    index /= batch[d];
    aoff += i * astr[d];
    boff += i * bstr[d];
  }
}

/// Typed body of matmul_fused: `a2` is [..., m, k], `b2` [..., k, n] (1-D operands already
/// unsqueezed); writes alpha * a2 @ b2 + beta * addend into `out` (contiguous, final shape).
template <typename T>
void matmul_typed(const Tensor& a2, const Tensor& b2, const Shape& batch, const Tensor& addend,
                  double alpha, double beta, Tensor& out) {
  using Acc = typename GemmAcc<T>::type;
  const int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  const int64_t nbatch = shape_numel(batch);
  std::vector<Acc> acc(static_cast<size_t>(nbatch * m * n), Acc(0));
  const T* ap = a2.data<T>();
  const T* bp = b2.data<T>();
  const int64_t ars = a2.stride(-2), acs = a2.stride(-1);
  const int64_t brs = b2.stride(-2), bcs = b2.stride(-1);
  if (b2.dim() == 2 && a2.dim() > 2) {
    // B is shared by every batch: fold A's batch dims into its rows when its layout allows.
    Tensor af = a2.reshape({nbatch * m, k});
    gemm_strided<T, Acc>(af.data<T>(), af.stride(0), af.stride(1), bp, brs, bcs, acc.data(),
                         nbatch * m, n, k);
  } else {
    Shape abs(batch.size(), 0), bbs(batch.size(), 0);
    const size_t alead = batch.size() - (a2.dim() - 2), blead = batch.size() - (b2.dim() - 2);
    for (size_t d = 0; d < batch.size(); ++d) {
      if (d >= alead && a2.size(d - alead) != 1) abs[d] = a2.stride(d - alead);
      if (d >= blead && b2.size(d - blead) != 1) bbs[d] = b2.stride(d - blead);
    }
    for (int64_t bi = 0; bi < nbatch; ++bi) {
      int64_t aoff, boff;
      batch_offsets(bi, batch, abs, bbs, aoff, boff);
      gemm_strided<T, Acc>(ap + aoff, ars, acs, bp + boff, brs, bcs, acc.data() + bi * m * n, m, n,
                           k);
    }
  }
  T* op = out.data<T>();
  const int64_t total = out.numel();
  const Acc al = scalar_acc<Acc>(alpha);
  if (!addend.defined() || beta == 0) {
    if (alpha == 1) {
      for (int64_t i = 0; i < total; ++i) op[i] = from_acc<T>(acc[i]);
    } else {
      for (int64_t i = 0; i < total; ++i) op[i] = from_acc<T>(Acc(al * acc[i]));
    }
    return;
  }
  const Acc be = scalar_acc<Acc>(beta);
  Tensor add = addend.expand(out.sizes());
  const T* adp = add.data<T>();
  int64_t i = 0;
  for_each_offset(add.sizes(), add.strides(), [&](int64_t o) {
    const Acc prod = alpha == 1 ? acc[i] : Acc(al * acc[i]);
    const Acc bias = beta == 1 ? to_acc<Acc>(adp[o]) : Acc(be * to_acc<Acc>(adp[o]));
    op[i] = from_acc<T>(Acc(prod + bias));
    ++i;
  });
}

// ---------------------------------------------------------------------------------------------
// Argument checks shared by the kernels
// ---------------------------------------------------------------------------------------------

/// Throws unless `t` has `dims` dimensions.
void need_dim(const ir::KernelContext& ctx, const Tensor& t, const char* name, int64_t dims) {
  if (t.dim() != dims)
    ctx.fail(str("'", name, "' must be a ", dims, "-D tensor"), str(dims, "-D"), t.type_str());
}

/// Throws unless the two tensors share a dtype (torch does not promote in matrix products).
void same_dtype(const std::string& where, const Tensor& a, const char* an, const Tensor& b,
                const char* bn) {
  if (a.dtype() != b.dtype())
    throw Error(str("'", an, "' and '", bn, "' must have the same dtype (", dtype_name(a.dtype()),
                    " vs ", dtype_name(b.dtype()), ")"),
                where, dtype_name(a.dtype()), dtype_name(b.dtype()));
}

/// Reads alpha / beta; integer products need integral values.
double coefficient(const ir::KernelContext& ctx, const char* name, DType dt) {
  const double v = ctx.float_arg(name, 1.0);
  if (is_integral(dt, true) && v != static_cast<double>(static_cast<int64_t>(v)))
    ctx.fail(str("argument '", name, "' must be an integer for integral inputs"), "an integer",
             str(v));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Shape-rule helpers
// ---------------------------------------------------------------------------------------------

/// True when two sizes are provably different (both constant and unequal).
bool differ(const SymInt& a, const SymInt& b) {
  return a.is_constant() && b.is_constant() && a.constant() != b.constant();
}

/// A contiguous result type.
TensorType result(DType dt, std::vector<SymInt> sizes, const TensorType& like) {
  TensorType t;
  t.dtype = dt;
  t.sizes = std::move(sizes);
  t.device = like.device;
  return t;
}

/// Throws unless `t` has `dims` dims.
void need_rank(const ir::Node& node, const TensorType& t, const char* name, size_t dims) {
  if (t.sizes.size() != dims)
    ir::shape_args::fail(node, str("'", name, "' must be a ", dims, "-D tensor"), str(dims, "-D"),
                         t.str());
}

/// Throws unless the two types share a dtype.
void same_dtype_type(const ir::Node& node, const TensorType& a, const char* an, const TensorType& b,
                     const char* bn) {
  if (a.dtype != b.dtype)
    ir::shape_args::fail(node,
                         str("'", an, "' and '", bn, "' must have the same dtype (",
                             dtype_name(a.dtype), " vs ", dtype_name(b.dtype), ")"),
                         dtype_name(a.dtype), dtype_name(b.dtype));
}

/// Throws when the contraction sizes are provably different.
void check_inner(const ir::Node& node, const TensorType& a, const SymInt& ka, const TensorType& b,
                 const SymInt& kb) {
  if (differ(ka, kb))
    ir::shape_args::fail(node,
                         str("inner dimensions do not match (", ka.str(), " vs ", kb.str(), ")"),
                         a.str(), b.str());
}

/// Result sizes of torch.matmul(a, b), symbolically.
std::vector<SymInt> matmul_sizes(const ir::Node& node, const TensorType& a, const TensorType& b) {
  const size_t ad = a.sizes.size(), bd = b.sizes.size();
  if (ad == 0 || bd == 0)
    ir::shape_args::fail(node, "both arguments to matmul need at least 1 dimension",
                         "tensors of rank >= 1", a.str() + ", " + b.str());
  const SymInt ka = a.sizes[ad - 1], kb = bd == 1 ? b.sizes[0] : b.sizes[bd - 2];
  check_inner(node, a, ka, b, kb);
  std::vector<SymInt> abatch, bbatch;
  if (ad > 2) abatch.assign(a.sizes.begin(), a.sizes.end() - 2);
  if (bd > 2) bbatch.assign(b.sizes.begin(), b.sizes.end() - 2);
  std::vector<SymInt> out = broadcast_sym(abatch, bbatch, node);
  if (ad >= 2) out.push_back(a.sizes[ad - 2]);
  if (bd >= 2) out.push_back(b.sizes[bd - 1]);
  return out;
}

/// Throws when `self` cannot broadcast to `sizes` (provably).
void check_addend(const ir::Node& node, const TensorType& self, const std::vector<SymInt>& sizes) {
  if (self.sizes.size() > sizes.size())
    ir::shape_args::fail(node, "'self' has more dims than the product", sym_shape_str(sizes),
                         self.str());
  const size_t lead = sizes.size() - self.sizes.size();
  for (size_t i = 0; i < self.sizes.size(); ++i) {
    const SymInt& s = self.sizes[i];
    if (s.is_constant() && s.constant() == 1) continue;
    if (differ(s, sizes[lead + i]))
      ir::shape_args::fail(node, "'self' does not broadcast to the product's shape",
                           sym_shape_str(sizes), self.str());
  }
}

/// Element product of two scalars in T (16-bit floats through fp32, integers wrapping).
template <typename T>
inline T mul_value(T x, T y) {
  if constexpr (std::is_same_v<T, bool>)
    return x && y;
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(static_cast<int64_t>(x)) *
                                               static_cast<uint64_t>(static_cast<int64_t>(y))));
  else
    return cast_value<T, float>(static_cast<float>(x) * static_cast<float>(y));
}
template <>
inline double mul_value<double>(double x, double y) {
  return x * y;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared entry points (also used by attention.cpp and conv.cpp)
// ---------------------------------------------------------------------------------------------

namespace linalg_detail {

/// torch.matmul(a, b) * alpha + beta * addend, with `addend` (may be undefined) broadcast to the
/// result. Operands must share a dtype (Error naming both otherwise); products accumulate in
/// fp32 (f64 for double, wrapping int64 for integers) and round once into that dtype. Returns a
/// new contiguous tensor.
Tensor matmul_fused(const Tensor& a, const Tensor& b, const Tensor& addend, double alpha,
                    double beta, const std::string& where) {
  if (a.dim() == 0 || b.dim() == 0)
    throw Error("both arguments to matmul need at least 1 dimension", where, "rank >= 1",
                a.type_str() + ", " + b.type_str());
  same_dtype(where, a, "self", b, "other");
  const DType dt = a.dtype();
  if (dt == DType::kBool || is_complex(dt) || !is_supported(dt))
    throw Error("matrix products do not support this dtype", where, "an integer or floating dtype",
                dtype_name(dt));
  if (addend.defined()) same_dtype(where, addend, "self", a, "mat1");
  const bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  const Tensor a2 = a1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b1 ? b.unsqueeze(1) : b;
  if (a2.size(-1) != b2.size(-2))
    throw Error(str("inner dimensions do not match (", a2.size(-1), " vs ", b2.size(-2), ")"),
                where, a.type_str(), b.type_str());
  const Shape abatch(a2.sizes().begin(), a2.sizes().end() - 2);
  const Shape bbatch(b2.sizes().begin(), b2.sizes().end() - 2);
  const Shape batch = broadcast_shapes(abatch, bbatch, where);
  Shape out_sizes = batch;
  if (!a1) out_sizes.push_back(a2.size(-2));
  if (!b1) out_sizes.push_back(b2.size(-1));
  if (addend.defined()) {
    // Same check torch makes: the addend must broadcast to the product's shape.
    const Shape bs = broadcast_shapes(addend.sizes(), out_sizes, where);
    if (bs != out_sizes)
      throw Error("'self' does not broadcast to the product's shape", where, shape_str(out_sizes),
                  shape_str(addend.sizes()));
  }
  Tensor out = Tensor::empty(out_sizes, dt);
  ANVIL_DISPATCH_REAL(dt, where, T, matmul_typed<T>(a2, b2, batch, addend, alpha, beta, out));
  return out;
}

/// Symbolic numpy broadcast of two shapes; provably incompatible sizes raise Error at `node`.
/// Two different symbolic sizes broadcast to their Max (one of them must be 1 or both equal).
std::vector<SymInt> broadcast_sym(const std::vector<SymInt>& a, const std::vector<SymInt>& b,
                                  const ir::Node& node) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<SymInt> out(n);
  for (size_t i = 0; i < n; ++i) {
    const SymInt da = i < n - a.size() ? SymInt(1) : a[i - (n - a.size())];
    const SymInt db = i < n - b.size() ? SymInt(1) : b[i - (n - b.size())];
    const auto ca = da.maybe_constant(), cb = db.maybe_constant();
    if (da == db || (cb && *cb == 1)) {
      out[i] = da;
    } else if (ca && *ca == 1) {
      out[i] = db;
    } else if (ca && cb) {
      ir::shape_args::fail(node, str("shapes cannot broadcast at dim ", i), sym_shape_str(a),
                           sym_shape_str(b));
    } else if (ca) {
      out[i] = da;
    } else if (cb) {
      out[i] = db;
    } else {
      out[i] = SymInt::max(da, db);
    }
  }
  return out;
}

}  // namespace linalg_detail

// ---------------------------------------------------------------------------------------------
// Shape rules
// ---------------------------------------------------------------------------------------------

std::vector<TensorType> shape_linear(const ir::Node& node) {
  const TensorType& x = ir::shape_args::type(node, "input");
  const TensorType& w = ir::shape_args::type(node, "weight");
  same_dtype_type(node, x, "input", w, "weight");
  if (w.sizes.size() != 1 && w.sizes.size() != 2)
    ir::shape_args::fail(node, "'weight' must be 1-D or 2-D", "[out, in]", w.str());
  if (x.sizes.empty()) ir::shape_args::fail(node, "'input' must have a dim", "rank >= 1", x.str());
  const SymInt in = w.sizes.back();
  check_inner(node, x, x.sizes.back(), w, in);
  std::vector<SymInt> out(x.sizes.begin(), x.sizes.end() - 1);
  if (w.sizes.size() == 2) out.push_back(w.sizes[0]);
  if (ir::shape_args::has(node, "bias")) {
    const TensorType& bias = ir::shape_args::type(node, "bias");
    same_dtype_type(node, bias, "bias", x, "input");
    check_addend(node, bias, out);
  }
  return {result(x.dtype, out, x)};
}

std::vector<TensorType> shape_addmm(const ir::Node& node) {
  const TensorType& self = ir::shape_args::type(node, "self");
  const TensorType& a = ir::shape_args::type(node, "mat1");
  const TensorType& b = ir::shape_args::type(node, "mat2");
  need_rank(node, a, "mat1", 2);
  need_rank(node, b, "mat2", 2);
  same_dtype_type(node, a, "mat1", b, "mat2");
  same_dtype_type(node, self, "self", a, "mat1");
  check_inner(node, a, a.sizes[1], b, b.sizes[0]);
  std::vector<SymInt> out = {a.sizes[0], b.sizes[1]};
  check_addend(node, self, out);
  return {result(a.dtype, out, a)};
}

std::vector<TensorType> shape_mm(const ir::Node& node) {
  const TensorType& a = ir::shape_args::type(node, "self");
  const TensorType& b = ir::shape_args::type(node, "mat2");
  need_rank(node, a, "self", 2);
  need_rank(node, b, "mat2", 2);
  same_dtype_type(node, a, "self", b, "mat2");
  check_inner(node, a, a.sizes[1], b, b.sizes[0]);
  return {result(a.dtype, {a.sizes[0], b.sizes[1]}, a)};
}

std::vector<TensorType> shape_bmm(const ir::Node& node) {
  const TensorType& a = ir::shape_args::type(node, "self");
  const TensorType& b = ir::shape_args::type(node, "mat2");
  need_rank(node, a, "self", 3);
  need_rank(node, b, "mat2", 3);
  same_dtype_type(node, a, "self", b, "mat2");
  if (differ(a.sizes[0], b.sizes[0]))
    ir::shape_args::fail(node, "batch sizes differ", a.str(), b.str());
  check_inner(node, a, a.sizes[2], b, b.sizes[1]);
  return {result(a.dtype, {a.sizes[0], a.sizes[1], b.sizes[2]}, a)};
}

std::vector<TensorType> shape_matmul(const ir::Node& node) {
  const TensorType& a = ir::shape_args::type(node, "self");
  const TensorType& b = ir::shape_args::type(node, "other");
  same_dtype_type(node, a, "self", b, "other");
  return {result(a.dtype, matmul_sizes(node, a, b), a)};
}

std::vector<TensorType> shape_baddbmm(const ir::Node& node) {
  const TensorType& self = ir::shape_args::type(node, "self");
  const TensorType& a = ir::shape_args::type(node, "batch1");
  const TensorType& b = ir::shape_args::type(node, "batch2");
  need_rank(node, a, "batch1", 3);
  need_rank(node, b, "batch2", 3);
  same_dtype_type(node, a, "batch1", b, "batch2");
  same_dtype_type(node, self, "self", a, "batch1");
  if (differ(a.sizes[0], b.sizes[0]))
    ir::shape_args::fail(node, "batch sizes differ", a.str(), b.str());
  check_inner(node, a, a.sizes[2], b, b.sizes[1]);
  std::vector<SymInt> out = {a.sizes[0], a.sizes[1], b.sizes[2]};
  check_addend(node, self, out);
  return {result(a.dtype, out, a)};
}

std::vector<TensorType> shape_outer(const ir::Node& node) {
  const TensorType& a = ir::shape_args::type(node, "self");
  const TensorType& b = ir::shape_args::type(node, "vec2");
  need_rank(node, a, "self", 1);
  need_rank(node, b, "vec2", 1);
  return {result(promote_types(a.dtype, b.dtype), {a.sizes[0], b.sizes[0]}, a)};
}

std::vector<TensorType> shape_embedding(const ir::Node& node) {
  const TensorType& w = ir::shape_args::type(node, "weight");
  const TensorType& idx = ir::shape_args::type(node, "indices");
  need_rank(node, w, "weight", 2);
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32)
    ir::shape_args::fail(node, "'indices' must be an integer tensor", "i64 or i32",
                         dtype_name(idx.dtype));
  std::vector<SymInt> out = idx.sizes;
  out.push_back(w.sizes[1]);
  return {result(w.dtype, out, w)};
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

std::vector<ir::RValue> kernel_linear(ir::KernelContext& ctx) {
  const Tensor& x = ctx.tensor("input");
  const Tensor& w = ctx.tensor("weight");
  same_dtype(ctx.where(), x, "input", w, "weight");
  if (w.dim() != 1 && w.dim() != 2)
    ctx.fail("'weight' must be 1-D or 2-D", "[out, in]", w.type_str());
  const Tensor wt = w.dim() == 2 ? w.transpose(0, 1) : w;
  const std::optional<Tensor> bias = ctx.opt_tensor("bias");
  if (bias) same_dtype(ctx.where(), *bias, "bias", x, "input");
  return {matmul_fused(x, wt, bias ? *bias : Tensor(), 1.0, 1.0, ctx.where())};
}

std::vector<ir::RValue> kernel_addmm(ir::KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& a = ctx.tensor("mat1");
  const Tensor& b = ctx.tensor("mat2");
  need_dim(ctx, a, "mat1", 2);
  need_dim(ctx, b, "mat2", 2);
  same_dtype(ctx.where(), a, "mat1", b, "mat2");
  const double beta = coefficient(ctx, "beta", a.dtype());
  const double alpha = coefficient(ctx, "alpha", a.dtype());
  return {matmul_fused(a, b, self, alpha, beta, ctx.where())};
}

std::vector<ir::RValue> kernel_mm(ir::KernelContext& ctx) {
  const Tensor& a = ctx.tensor("self");
  const Tensor& b = ctx.tensor("mat2");
  need_dim(ctx, a, "self", 2);
  need_dim(ctx, b, "mat2", 2);
  return {matmul_fused(a, b, Tensor(), 1.0, 0.0, ctx.where())};
}

std::vector<ir::RValue> kernel_bmm(ir::KernelContext& ctx) {
  const Tensor& a = ctx.tensor("self");
  const Tensor& b = ctx.tensor("mat2");
  need_dim(ctx, a, "self", 3);
  need_dim(ctx, b, "mat2", 3);
  if (a.size(0) != b.size(0)) ctx.fail("batch sizes differ", a.type_str(), b.type_str());
  return {matmul_fused(a, b, Tensor(), 1.0, 0.0, ctx.where())};
}

std::vector<ir::RValue> kernel_matmul(ir::KernelContext& ctx) {
  return {matmul_fused(ctx.tensor("self"), ctx.tensor("other"), Tensor(), 1.0, 0.0, ctx.where())};
}

std::vector<ir::RValue> kernel_baddbmm(ir::KernelContext& ctx) {
  const Tensor& self = ctx.tensor("self");
  const Tensor& a = ctx.tensor("batch1");
  const Tensor& b = ctx.tensor("batch2");
  need_dim(ctx, a, "batch1", 3);
  need_dim(ctx, b, "batch2", 3);
  if (a.size(0) != b.size(0)) ctx.fail("batch sizes differ", a.type_str(), b.type_str());
  same_dtype(ctx.where(), a, "batch1", b, "batch2");
  const double beta = coefficient(ctx, "beta", a.dtype());
  const double alpha = coefficient(ctx, "alpha", a.dtype());
  return {matmul_fused(a, b, self, alpha, beta, ctx.where())};
}

std::vector<ir::RValue> kernel_outer(ir::KernelContext& ctx) {
  const Tensor& a = ctx.tensor("self");
  const Tensor& b = ctx.tensor("vec2");
  need_dim(ctx, a, "self", 1);
  need_dim(ctx, b, "vec2", 1);
  // torch.outer is self.reshape(-1, 1) * vec2: an elementwise product with type promotion.
  const DType dt = promote_types(a.dtype(), b.dtype());
  const Tensor ac = a.to(dt).contiguous(), bc = b.to(dt).contiguous();
  const int64_t n = a.size(0), m = b.size(0);
  Tensor out = Tensor::empty({n, m}, dt);
  ANVIL_DISPATCH_REAL(dt, ctx.where(), T, {
    const T* x = ac.data<T>();
    const T* y = bc.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) o[i * m + j] = mul_value<T>(x[i], y[j]);
  });
  return {out};
}

std::vector<ir::RValue> kernel_embedding(ir::KernelContext& ctx) {
  const Tensor& w = ctx.tensor("weight");
  const Tensor& idx = ctx.tensor("indices");
  need_dim(ctx, w, "weight", 2);
  if (idx.dtype() != DType::kInt64 && idx.dtype() != DType::kInt32)
    ctx.fail("'indices' must be an integer tensor", "i64 or i32", dtype_name(idx.dtype()));
  // padding_idx, scale_grad_by_freq and sparse only change gradients: ignored for inference.
  const int64_t rows = w.size(0), d = w.size(1);
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(idx.numel()));
  ANVIL_DISPATCH_REAL(idx.dtype(), ctx.where(), I, {
    const I* ip = static_cast<const I*>(idx.data_ptr());
    for_each_offset(idx.sizes(), idx.strides(),
                    [&](int64_t o) { ids.push_back(static_cast<int64_t>(ip[o])); });
  });
  Shape out_sizes = idx.sizes();
  out_sizes.push_back(d);
  Tensor out = Tensor::empty(out_sizes, w.dtype());
  const size_t es = w.element_size();
  const auto* wp = static_cast<const unsigned char*>(w.data_ptr());
  auto* op = static_cast<unsigned char*>(out.data_ptr());
  const int64_t rs = w.stride(0), cs = w.stride(1);
  for (size_t r = 0; r < ids.size(); ++r) {
    const int64_t id = ids[r];
    if (id < 0 || id >= rows)
      ctx.fail(str("index ", id, " is out of range for an embedding table of ", rows, " rows"),
               str("an index in [0, ", rows, ")"), std::to_string(id));
    unsigned char* dst = op + r * static_cast<size_t>(d) * es;
    const unsigned char* src = wp + static_cast<size_t>(id * rs) * es;
    if (cs == 1) {
      std::memcpy(dst, src, static_cast<size_t>(d) * es);
    } else {
      for (int64_t j = 0; j < d; ++j) std::memcpy(dst + j * es, src + j * cs * es, es);
    }
  }
  return {out};
}

}  // namespace anvil::ops
