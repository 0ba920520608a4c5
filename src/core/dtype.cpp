#include "core/dtype.h"

#include <algorithm>

#include "core/error.h"

namespace anvil {
namespace {

struct DTypeInfo {
  DType type;
  const char* short_name;
  const char* torch_name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kUInt8, "u8", "uint8", 1},
    {DType::kInt8, "i8", "int8", 1},
    {DType::kInt16, "i16", "int16", 2},
    {DType::kInt32, "i32", "int32", 4},
    {DType::kInt64, "i64", "int64", 8},
    {DType::kFloat16, "f16", "float16", 2},
    {DType::kFloat32, "f32", "float32", 4},
    {DType::kFloat64, "f64", "float64", 8},
    {DType::kComplex32, "c32", "complex32", 4},
    {DType::kComplex64, "c64", "complex64", 8},
    {DType::kComplex128, "c128", "complex128", 16},
    {DType::kBool, "bool", "bool", 1},
    {DType::kBFloat16, "bf16", "bfloat16", 2},
    {DType::kUInt16, "u16", "uint16", 2},
    {DType::kFloat8E4M3FN, "f8e4m3fn", "float8_e4m3fn", 1},
    {DType::kFloat8E5M2, "f8e5m2", "float8_e5m2", 1},
    {DType::kFloat8E4M3FNUZ, "f8e4m3fnuz", "float8_e4m3fnuz", 1},
    {DType::kFloat8E5M2FNUZ, "f8e5m2fnuz", "float8_e5m2fnuz", 1},
};

const DTypeInfo& info(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d;
  throw Error("unknown dtype", "dtype", "a torch.export ScalarType code",
              std::to_string(static_cast<int>(t)));
}

// Promotion category: bool < integer < floating < complex.
int category(DType t) {
  if (t == DType::kBool) return 0;
  if (is_integral(t)) return 1;
  if (is_floating(t)) return 2;
  return 3;
}

}  // namespace

const char* dtype_name(DType t) { return info(t).short_name; }

DType dtype_from_name(const std::string& raw) {
  std::string name = raw.rfind("torch.", 0) == 0 ? raw.substr(6) : raw;
  if (name == "float") return DType::kFloat32;
  if (name == "double") return DType::kFloat64;
  if (name == "half") return DType::kFloat16;
  if (name == "long") return DType::kInt64;
  if (name == "int") return DType::kInt32;
  for (const auto& d : kDTypes)
    if (name == d.short_name || name == d.torch_name) return d.type;
  throw Error("unknown dtype name", "dtype", "a name such as f32, bf16, i64 or float32", raw);
}

DType dtype_from_code(int64_t code) {
  for (const auto& d : kDTypes)
    if (static_cast<int64_t>(d.type) == code) return d.type;
  throw Error("unknown dtype code", "dtype",
              "a torch.export ScalarType code (1-13, 28-32)", std::to_string(code));
}

size_t dtype_size(DType t) { return info(t).size; }

bool is_float8(DType t) {
  return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2 || t == DType::kFloat8E4M3FNUZ ||
         t == DType::kFloat8E5M2FNUZ;
}

bool is_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64 || is_float8(t);
}

bool is_complex(DType t) {
  return t == DType::kComplex32 || t == DType::kComplex64 || t == DType::kComplex128;
}

bool is_integral(DType t, bool include_bool) {
  switch (t) {
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kInt64:
      return true;
    case DType::kBool:
      return include_bool;
    default:
      return false;
  }
}

bool is_supported(DType t) { return !is_float8(t); }

void check_supported(DType t, const std::string& where) {
  if (!is_supported(t))
    throw Error(std::string("dtype ") + info(t).torch_name + " is recognised but not supported",
                where, "a dtype anvil computes with (no float8)", info(t).torch_name);
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) {
    if (ca < cb) std::swap(a, b), std::swap(ca, cb);
    // a has the higher category. complex with a float: components wide enough for both.
    if (ca == 3 && cb == 2)
      return real_to_complex(promote_types(complex_to_real(a), b));
    return a;
  }
  if (ca == 1) {
    auto is_unsigned = [](DType t) { return t == DType::kUInt8 || t == DType::kUInt16; };
    if (is_unsigned(a) != is_unsigned(b)) {
      DType u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
      if (dtype_size(s) > dtype_size(u)) return s;
      return dtype_size(u) == 1 ? DType::kInt16 : (dtype_size(u) == 2 ? DType::kInt32 : DType::kInt64);
    }
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  if (ca == 2) {
    if ((a == DType::kFloat16 && b == DType::kBFloat16) ||
        (a == DType::kBFloat16 && b == DType::kFloat16))
      return DType::kFloat32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

DType complex_to_real(DType t) {
  switch (t) {
    case DType::kComplex32:
      return DType::kFloat16;
    case DType::kComplex64:
      return DType::kFloat32;
    case DType::kComplex128:
      return DType::kFloat64;
    default:
      return t;
  }
}

DType real_to_complex(DType t) {
  switch (t) {
    case DType::kFloat16:
      return DType::kComplex32;
    case DType::kFloat64:
      return DType::kComplex128;
    default:
      return is_complex(t) ? t : DType::kComplex64;
  }
}

}  // namespace anvil
