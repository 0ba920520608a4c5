// Runtime extern kernels for the scans and index reductions: aten.cumsum.default,
// aten.cumprod.default, aten.diff.default, aten.argmax.default and aten.argmin.default, with the reference kernels' semantics
// (src/ops/reduction.cpp): cumsum converts to the result dtype first and accumulates in f64 for
// f32 / f64, fp32 for f16 / bf16 and int64 for integers; diff concatenates prepend / self /
// append and takes n forward differences (bool: xor), rounding each step to the result dtype;
// argmax takes the first maximum with NaN counting as the maximum. Independent lines along the
// reduced dim are split over the runtime thread pool.
#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime {

namespace {

/// Accumulator of cumsum for element type T.
template <typename T>
struct SumAcc {
  using type = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
};
template <>
struct SumAcc<Half> {
  using type = float;
};
template <>
struct SumAcc<BFloat16> {
  using type = float;
};

/// `v` without entry `d`.
Shape drop(const Shape& v, int64_t d) {
  Shape r = v;
  r.erase(r.begin() + d);
  return r;
}

// ---- cumsum -----------------------------------------------------------------------------------

/// The runtime kernel of aten.cumsum.default (aten.cumprod.default when `Prod`).
template <bool Prod>
int scan_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor self = call.input_tensor(0);
  const int64_t d = wrap_dim(call.attr_int("dim"), self.dim(), where);
  const DType dt = call.has_attr("dtype")            ? dtype_from_code(call.attr_int("dtype"))
                   : is_integral(self.dtype(), true) ? DType::kInt64
                                                     : self.dtype();
  const Tensor out = kern::checked_output(call, 0, self.sizes(), dt);
  if (out.numel() == 0) return 0;
  if (self.dim() == 0) {
    kern::copy_cast(out, self);
    return 0;
  }
  // The input in the result dtype (converted like the reference does before accumulating).
  Tensor src = self;
  if (self.dtype() != dt) {
    src = Tensor::empty(self.sizes(), dt);
    kern::copy_cast(src, self);
  }
  const int64_t len = self.size(d), in_step = src.stride(d), out_step = out.stride(d);
  const Shape lines = drop(self.sizes(), d);
  const std::array<Shape, 2> st = {drop(src.strides(), d), drop(out.strides(), d)};
  ANVIL_DISPATCH_REAL(dt, where, T, {
    using Acc = typename SumAcc<T>::type;
    const T* in = static_cast<const T*>(src.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    parallel_for(0, shape_numel(lines), kern::grain_for(len), [&](int64_t b, int64_t e) {
      kern::for_each_offsets<2>(lines, st, b, e, [&](const std::array<int64_t, 2>& off) {
        Acc acc = Prod ? 1 : 0;
        for (int64_t j = 0; j < len; ++j) {
          const Acc v = static_cast<Acc>(static_cast<kern::CmpType<T>>(in[off[0] + j * in_step]));
          if constexpr (!Prod)
            acc += v;
          else if constexpr (std::is_integral_v<Acc>)  // wraps like torch's int64 product
            acc = static_cast<Acc>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v));
          else
            acc *= v;
          o[off[1] + j * out_step] = cast_value<T, Acc>(acc);
        }
      });
    });
  });
  return 0;
}

// ---- diff -------------------------------------------------------------------------------------

/// The runtime kernel of aten.diff.default.
int diff_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor self = call.input_tensor(0);
  ANVIL_CHECK(self.dim() > 0, where, "diff expects a tensor with at least one dimension",
              "rank >= 1", "rank 0");
  const int64_t n = call.attr_int("n", 1);
  ANVIL_CHECK(n >= 0, where, "diff expects n to be non-negative", "n >= 0", std::to_string(n));
  const int64_t d = wrap_dim(call.attr_int("dim", -1), self.dim(), where);
  const std::optional<Tensor> pre = kern::opt_input(call, 1), app = kern::opt_input(call, 2);
  DType dt = self.dtype();
  std::vector<Tensor> parts;
  for (const std::optional<Tensor>& t : {pre, std::optional<Tensor>(self), app}) {
    if (!t) continue;
    ANVIL_CHECK(t->dim() == self.dim(), where,
                "diff expects prepend/append to have the same rank as self",
                std::to_string(self.dim()), std::to_string(t->dim()));
    for (int64_t k = 0; k < self.dim(); ++k)
      ANVIL_CHECK(k == d || t->size(k) == self.size(k), where,
                  str("diff: prepend/append size mismatch at dim ", k), shape_str(self.sizes()),
                  shape_str(t->sizes()));
    dt = promote_types(dt, t->dtype());
    parts.push_back(*t);
  }
  Shape sizes = self.sizes();
  sizes[d] = 0;
  for (const Tensor& t : parts) sizes[d] += t.size(d);
  Shape out_sizes = sizes;
  out_sizes[d] = std::max<int64_t>(sizes[d] - n, 0);
  const Tensor out = kern::checked_output(call, 0, out_sizes, dt);
  if (out.numel() == 0) return 0;
  // Concatenate into a contiguous [outer, len, inner] buffer of the result dtype.
  Tensor cur = Tensor::empty(sizes, dt);
  int64_t at = 0;
  for (const Tensor& t : parts) {
    kern::copy_cast(cur.slice(d, at, at + t.size(d)), t);
    at += t.size(d);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= sizes[k];
  for (int64_t k = d + 1; k < self.dim(); ++k) inner *= sizes[k];
  int64_t len = sizes[d];
  Tensor spare = n > 0 ? Tensor::empty(sizes, dt) : Tensor();
  ANVIL_DISPATCH_REAL(dt, where, T, {
    // Each step reads [outer, len, inner] from `src` and writes [outer, len - 1, inner] to `dst`.
    T* src = cur.data<T>();
    T* dst = n > 0 ? spare.data<T>() : nullptr;
    for (int64_t step = 0; step < n && len > 0; ++step, --len) {
      parallel_for(0, outer, kern::grain_for(len * inner), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* in = src + o * len * inner;
          T* res = dst + o * (len - 1) * inner;
          for (int64_t i = 0; i + 1 < len; ++i)
            for (int64_t j = 0; j < inner; ++j) {
              const T hi = in[(i + 1) * inner + j], lo = in[i * inner + j];
              if constexpr (std::is_same_v<T, bool>) {
                res[i * inner + j] = hi != lo;
              } else {
                using C = kern::CmpType<T>;
                res[i * inner + j] = cast_value<T, C>(static_cast<C>(hi) - static_cast<C>(lo));
              }
            }
        }
      });
      std::swap(src, dst);
    }
    std::memcpy(out.data_ptr(), src, out.nbytes());
  });
  return 0;
}

// ---- argmax -----------------------------------------------------------------------------------

/// The runtime kernel of aten.argmax.default (aten.argmin.default when not `Max`).
template <bool Max>
int argext_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor self = call.input_tensor(0);
  ANVIL_CHECK(self.dtype() != DType::kBool, where,
              Max ? "argmax is not defined for bool tensors" : "argmin is not defined for bool tensors",
              "a numeric dtype", "bool");
  const bool keepdim = call.attr_bool("keepdim", false);
  const bool has_dim = call.has_attr("dim");
  Shape out_sizes, lines, line_strides;
  int64_t len, step;
  if (has_dim) {
    const int64_t d = wrap_dim(call.attr_int("dim"), self.dim(), where);
    const bool scalar = self.dim() == 0;
    len = scalar ? 1 : self.size(d);
    step = scalar ? 0 : self.stride(d);
    lines = scalar ? Shape{} : drop(self.sizes(), d);
    line_strides = scalar ? Shape{} : drop(self.strides(), d);
    out_sizes = self.sizes();
    if (!scalar) {
      if (keepdim)
        out_sizes[d] = 1;
      else
        out_sizes.erase(out_sizes.begin() + d);
    }
  } else {
    len = self.numel();
    step = 1;
    if (keepdim) out_sizes.assign(static_cast<size_t>(self.dim()), 1);
  }
  const int64_t groups = shape_numel(lines);
  ANVIL_CHECK(len > 0 || groups == 0, where,
              Max ? "argmax(): expected reduction dim to have non-zero size"
                  : "argmin(): expected reduction dim to have non-zero size",
              "a non-empty reduction",
              "0 elements");
  const Tensor out = kern::checked_output(call, 0, out_sizes, DType::kInt64);
  if (out.numel() == 0) return 0;
  int64_t* idx = out.data<int64_t>();
  ANVIL_DISPATCH_REAL(self.dtype(), where, T, {
    using C = kern::CmpType<T>;
    const T* in = static_cast<const T*>(self.data_ptr());
    if (!has_dim) {
      // Flattened: walk the elements in row-major order.
      C best{};
      int64_t best_j = 0, j = 0;
      kern::for_each_offsets<1>(
          self.sizes(), {self.strides()}, 0, len, [&](const std::array<int64_t, 1>& o) {
            const C v = static_cast<C>(in[o[0]]);
            if (j == 0 || (!kern::is_nan_value(best) && (kern::is_nan_value(v) || (Max ? v > best : v < best)))) {
              best = v;
              best_j = j;
            }
            ++j;
          });
      idx[0] = best_j;
    } else {
      const std::array<Shape, 1> st = {line_strides};
      parallel_for(0, groups, kern::grain_for(len), [&](int64_t b, int64_t e) {
        int64_t g = b;
        kern::for_each_offsets<1>(lines, st, b, e, [&](const std::array<int64_t, 1>& o) {
          C best = static_cast<C>(in[o[0]]);
          int64_t best_j = 0;
          for (int64_t j = 1; j < len && !kern::is_nan_value(best); ++j) {
            const C v = static_cast<C>(in[o[0] + j * step]);
            if (kern::is_nan_value(v) || (Max ? v > best : v < best)) {
              best = v;
              best_j = j;
            }
          }
          idx[g++] = best_j;
        });
      });
    }
  });
  return 0;
}

}  // namespace

/// Registers the scan / index-reduction externs.
void register_reduce_externs() {
  register_extern("aten.cumsum.default", scan_extern<false>);
  register_extern("aten.cumprod.default", scan_extern<true>);
  register_extern("aten.diff.default", diff_extern);
  register_extern("aten.argmax.default", argext_extern<true>);
  register_extern("aten.argmin.default", argext_extern<false>);
}

}  // namespace anvil::runtime
