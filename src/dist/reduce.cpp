// Reduction kernels and reduce-op rules.
#include "dist/reduce.h"

#include <algorithm>
#include <type_traits>

#include "core/error.h"

namespace anvil::dist {

namespace {

template <typename T>
constexpr bool kLowFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// One element of a reduction, 16-bit floats computed in float.
template <typename T, ReduceOp Op>
inline T combine(T a, T b) {
  if constexpr (kLowFloat<T>) {
    const float r = combine<float, Op>(static_cast<float>(a), static_cast<float>(b));
    return T(r);
  } else if constexpr (std::is_same_v<T, bool>) {
    if constexpr (Op == ReduceOp::kMax || Op == ReduceOp::kBor || Op == ReduceOp::kSum)
      return a || b;
    else if constexpr (Op == ReduceOp::kBxor)
      return a != b;
    else
      return a && b;  // min, band, product
  } else if constexpr (Op == ReduceOp::kSum) {
    return static_cast<T>(a + b);
  } else if constexpr (Op == ReduceOp::kProduct) {
    return static_cast<T>(a * b);
  } else if constexpr (Op == ReduceOp::kMin) {
    return std::min(a, b);
  } else if constexpr (Op == ReduceOp::kMax) {
    return std::max(a, b);
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (Op == ReduceOp::kBand) return static_cast<T>(a & b);
    if constexpr (Op == ReduceOp::kBor) return static_cast<T>(a | b);
    return static_cast<T>(a ^ b);
  } else {
    return a;  // bitwise on floats: rejected by check_reduce_op before we get here
  }
}

template <typename T, ReduceOp Op>
void kernel(void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  // Blocks of a fixed size through a local buffer: out may alias a or b, and the fixed trip
  // count lets the compiler vectorize at -O2.
  constexpr size_t kBlock = 32;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    T tmp[kBlock];
    for (size_t k = 0; k < kBlock; ++k) tmp[k] = combine<T, Op>(x[i + k], y[i + k]);
    for (size_t k = 0; k < kBlock; ++k) o[i + k] = tmp[k];
  }
  for (; i < n; ++i) o[i] = combine<T, Op>(x[i], y[i]);
}

template <typename T>
ReduceFn kernel_for(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &kernel<T, ReduceOp::kSum>;
    case ReduceOp::kProduct:
      return &kernel<T, ReduceOp::kProduct>;
    case ReduceOp::kMin:
      return &kernel<T, ReduceOp::kMin>;
    case ReduceOp::kMax:
      return &kernel<T, ReduceOp::kMax>;
    case ReduceOp::kBand:
      return &kernel<T, ReduceOp::kBand>;
    case ReduceOp::kBor:
      return &kernel<T, ReduceOp::kBor>;
    case ReduceOp::kBxor:
      return &kernel<T, ReduceOp::kBxor>;
    case ReduceOp::kAvg:
      break;
  }
  ANVIL_INTERNAL_ASSERT(false, "reduce_fn called with avg (engine_op turns it into sum)");
  return nullptr;
}

}  // namespace

bool is_collective_dtype(DType dt) {
  switch (dt) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return true;
    default:
      return false;
  }
}

void check_collective_dtype(DType dt, const std::string& where) {
  if (!is_collective_dtype(dt))
    throw Error("not supported data type for collectives", where,
                "bool, u8, i8, i16, u16, i32, i64, f16, bf16, f32 or f64", dtype_name(dt));
}

void check_reduce_op(DType dt, ReduceOp op, const std::string& where) {
  check_collective_dtype(dt, where);
  const bool bitwise = op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
  if (bitwise && is_floating(dt))
    throw Error(str("reduce op ", reduce_op_name(op), " needs an integer or bool tensor"), where,
                "an integer or bool dtype", dtype_name(dt));
  if (op == ReduceOp::kAvg && dt == DType::kBool)
    throw Error("Cannot use ReduceOp.AVG with boolean inputs", where, "a floating dtype", "bool");
  if (op == ReduceOp::kAvg && !is_floating(dt))
    throw Error("reduce op avg needs a floating tensor (integer avg is not defined; use sum)",
                where, "a floating dtype", dtype_name(dt));
}

ReduceOp engine_op(DType dt, ReduceOp op) {
  if (op == ReduceOp::kAvg) return ReduceOp::kSum;
  if (dt == DType::kBool) {
    if (op == ReduceOp::kSum) return ReduceOp::kMax;
    if (op == ReduceOp::kProduct) return ReduceOp::kMin;
  }
  return op;
}

ReduceFn reduce_fn(DType dt, ReduceOp op) {
  ReduceFn fn = nullptr;
  ANVIL_DISPATCH_REAL(dt, "dist::reduce_fn", T, fn = kernel_for<T>(op));
  return fn;
}

void divide_inplace(Tensor& t, int64_t divisor) {
  ANVIL_INTERNAL_ASSERT(t.is_contiguous(), "divide_inplace needs a contiguous tensor");
  const int64_t n = t.numel();
  ANVIL_DISPATCH_FLOAT(t.dtype(), "dist avg", T, {
    T* p = static_cast<T*>(t.data_ptr());
    if constexpr (std::is_same_v<T, double>) {
      for (int64_t i = 0; i < n; ++i) p[i] = p[i] / static_cast<double>(divisor);
    } else {
      for (int64_t i = 0; i < n; ++i)
        p[i] = T(static_cast<float>(p[i]) / static_cast<float>(divisor));
    }
  });
}

}  // namespace anvil::dist
