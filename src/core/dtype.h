// DType: element types, numbered exactly as torch.export's schema ScalarType codes.
#pragma once

#include <complex>
#include <cstdint>
#include <string>

#include "core/half.h"

namespace anvil {

/// Element type. Values are torch/_export/serde/schema.py ScalarType codes.
enum class DType : int32_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kComplex32 = 9,
  kComplex64 = 10,
  kComplex128 = 11,
  kBool = 12,
  kBFloat16 = 13,
  kUInt16 = 28,
  kFloat8E4M3FN = 29,
  kFloat8E5M2 = 30,
  kFloat8E4M3FNUZ = 31,
  kFloat8E5M2FNUZ = 32,
};

/// Short name used in the text IR and messages: "f32", "bf16", "i64", "bool", ...
const char* dtype_name(DType t);
/// Parses a short name ("f32") or a torch name ("float32", "torch.float32"); throws Error if unknown.
DType dtype_from_name(const std::string& name);
/// Maps a schema code to a DType; throws Error naming the code for unknown values.
DType dtype_from_code(int64_t code);
/// Bytes per element.
size_t dtype_size(DType t);
bool is_floating(DType t);  // f16, bf16, f32, f64 (and float8 kinds)
bool is_complex(DType t);
bool is_integral(DType t, bool include_bool = false);
bool is_float8(DType t);
/// True when anvil's kernels can compute with this dtype (everything but float8; complex32
/// computes through complex64).
bool is_supported(DType t);
/// Throws Error naming `where` when `t` is a dtype anvil recognises but cannot compute with.
void check_supported(DType t, const std::string& where);
/// torch.promote_types.
DType promote_types(DType a, DType b);
/// The real dtype of a complex one (c32 -> f16, c64 -> f32, c128 -> f64); other dtypes unchanged.
DType complex_to_real(DType t);
/// The complex dtype with components of real dtype `t` (f16 -> c32, f32 -> c64, f64 -> c128,
/// others -> c64); complex dtypes unchanged.
DType real_to_complex(DType t);

/// complex32 (torch.complex32 / ComplexHalf) storage: two fp16 halves. Computes through
/// std::complex<float>.
struct ComplexHalf {
  Half re, im;
  ComplexHalf() = default;
  /// Rounds both parts to fp16.
  explicit ComplexHalf(std::complex<float> v) : re(v.real()), im(v.imag()) {}
  /// Widens both parts to float.
  explicit operator std::complex<float>() const {
    return {static_cast<float>(re), static_cast<float>(im)};
  }
};

template <typename T>
struct CppType;
template <> struct CppType<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct CppType<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct CppType<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct CppType<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct CppType<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct CppType<Half> { static constexpr DType value = DType::kFloat16; };
template <> struct CppType<float> { static constexpr DType value = DType::kFloat32; };
template <> struct CppType<double> { static constexpr DType value = DType::kFloat64; };
template <> struct CppType<std::complex<float>> { static constexpr DType value = DType::kComplex64; };
template <> struct CppType<std::complex<double>> { static constexpr DType value = DType::kComplex128; };
template <> struct CppType<ComplexHalf> { static constexpr DType value = DType::kComplex32; };
template <> struct CppType<bool> { static constexpr DType value = DType::kBool; };
template <> struct CppType<BFloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct CppType<uint16_t> { static constexpr DType value = DType::kUInt16; };

/// The DType of C++ type T.
template <typename T>
constexpr DType dtype_of() { return CppType<T>::value; }

/// Accumulator type for reductions: fp32 for 16-bit floats, T otherwise.
template <typename T> struct AccType { using type = T; };
template <> struct AccType<Half> { using type = float; };
template <> struct AccType<BFloat16> { using type = float; };

}  // namespace anvil

#define ANVIL_DTYPE_CASE_(ENUM, CTYPE, NAME, ...) \
  case ::anvil::DType::ENUM: {                    \
    using NAME = CTYPE;                           \
    __VA_ARGS__;                                  \
    break;                                        \
  }

/// Runs the body with `NAME` bound to the C++ type of `DT`, for every real (non-complex) dtype.
#define ANVIL_DISPATCH_REAL(DT, WHERE, NAME, ...)                                       \
  do {                                                                                  \
    switch (DT) {                                                                       \
      ANVIL_DTYPE_CASE_(kUInt8, uint8_t, NAME, __VA_ARGS__)                             \
      ANVIL_DTYPE_CASE_(kInt8, int8_t, NAME, __VA_ARGS__)                               \
      ANVIL_DTYPE_CASE_(kInt16, int16_t, NAME, __VA_ARGS__)                             \
      ANVIL_DTYPE_CASE_(kUInt16, uint16_t, NAME, __VA_ARGS__)                           \
      ANVIL_DTYPE_CASE_(kInt32, int32_t, NAME, __VA_ARGS__)                             \
      ANVIL_DTYPE_CASE_(kInt64, int64_t, NAME, __VA_ARGS__)                             \
      ANVIL_DTYPE_CASE_(kFloat16, ::anvil::Half, NAME, __VA_ARGS__)                     \
      ANVIL_DTYPE_CASE_(kBFloat16, ::anvil::BFloat16, NAME, __VA_ARGS__)                \
      ANVIL_DTYPE_CASE_(kFloat32, float, NAME, __VA_ARGS__)                             \
      ANVIL_DTYPE_CASE_(kFloat64, double, NAME, __VA_ARGS__)                            \
      ANVIL_DTYPE_CASE_(kBool, bool, NAME, __VA_ARGS__)                                 \
      default:                                                                          \
        throw ::anvil::Error("unsupported dtype", (WHERE), "a real dtype",              \
                             ::anvil::dtype_name(DT));                                  \
    }                                                                                   \
  } while (0)

/// Like ANVIL_DISPATCH_REAL plus complex32 (ComplexHalf), complex64 and complex128.
#define ANVIL_DISPATCH_ALL(DT, WHERE, NAME, ...)                                        \
  do {                                                                                  \
    if ((DT) == ::anvil::DType::kComplex32) {                                           \
      using NAME = ::anvil::ComplexHalf;                                                \
      __VA_ARGS__;                                                                      \
    } else if ((DT) == ::anvil::DType::kComplex64) {                                    \
      using NAME = std::complex<float>;                                                 \
      __VA_ARGS__;                                                                      \
    } else if ((DT) == ::anvil::DType::kComplex128) {                                   \
      using NAME = std::complex<double>;                                                \
      __VA_ARGS__;                                                                      \
    } else {                                                                            \
      ANVIL_DISPATCH_REAL(DT, WHERE, NAME, __VA_ARGS__);                                \
    }                                                                                   \
  } while (0)

/// Floating dtypes only (f16, bf16, f32, f64).
#define ANVIL_DISPATCH_FLOAT(DT, WHERE, NAME, ...)                                      \
  do {                                                                                  \
    switch (DT) {                                                                       \
      ANVIL_DTYPE_CASE_(kFloat16, ::anvil::Half, NAME, __VA_ARGS__)                     \
      ANVIL_DTYPE_CASE_(kBFloat16, ::anvil::BFloat16, NAME, __VA_ARGS__)                \
      ANVIL_DTYPE_CASE_(kFloat32, float, NAME, __VA_ARGS__)                             \
      ANVIL_DTYPE_CASE_(kFloat64, double, NAME, __VA_ARGS__)                            \
      default:                                                                          \
        throw ::anvil::Error("unsupported dtype", (WHERE), "a floating dtype",          \
                             ::anvil::dtype_name(DT));                                  \
    }                                                                                   \
  } while (0)
