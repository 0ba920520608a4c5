// Tensor: a typed, strided view onto a Storage. Views share storage; copies are explicit.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/storage.h"

namespace anvil {

using Shape = std::vector<int64_t>;

/// Converts one element value between C++ element types the way torch's casts do
/// (16-bit floats through float, bool as != 0, complex to real takes the real part, complex32
/// through complex64).
template <typename To, typename From>
inline To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, ComplexHalf>) {  // complex32 goes through complex64
    return cast_value<To, std::complex<float>>(static_cast<std::complex<float>>(v));
  } else if constexpr (std::is_same_v<To, ComplexHalf>) {
    return ComplexHalf(cast_value<std::complex<float>, From>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, std::complex<float>> ||
                  std::is_same_v<From, std::complex<double>>)
      return v.real() != 0 || v.imag() != 0;
    else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>)
      return static_cast<float>(v) != 0.0f;
    else
      return v != From(0);
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return cast_value<To, float>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(cast_value<float, From>(v));
  } else if constexpr (std::is_same_v<From, std::complex<float>> ||
                       std::is_same_v<From, std::complex<double>>) {
    if constexpr (std::is_same_v<To, std::complex<float>> ||
                  std::is_same_v<To, std::complex<double>>)
      return To(v);
    else
      return cast_value<To>(v.real());
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // Out-of-range float -> int is undefined in C++. Do what torch does on x86: truncate
    // through int32 for int32 and through int64 otherwise (so -1.0 -> u8 is 255), with NaN,
    // inf and out-of-range values giving the integer minimum (x86's "integer indefinite").
    using Wide = std::conditional_t<std::is_same_v<To, int32_t>, int32_t, int64_t>;
    constexpr From kLo = static_cast<From>(std::numeric_limits<Wide>::min());  // -2^31 / -2^63
    if (!(v >= kLo && v < -kLo)) return static_cast<To>(std::numeric_limits<Wide>::min());
    return static_cast<To>(static_cast<Wide>(v));
  } else {
    return static_cast<To>(v);
  }
}

/// Normalises a possibly negative dim `d` against `rank` (a 0-dim tensor accepts -1 and 0, as
/// torch does); throws Error("dimension out of range", where, "a dim in [lo, hi]", d) otherwise.
/// The one implementation: the op table, the passes, the runtime kernels and Tensor use it.
int64_t wrap_dim(int64_t d, int64_t rank, const std::string& where);

/// A strided tensor. A default-constructed Tensor is "undefined" (no storage).
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape sizes, Shape strides,
         int64_t storage_offset = 0);

  /// New contiguous tensors (memory zero-filled).
  static Tensor empty(const Shape& sizes, DType dtype);
  static Tensor zeros(const Shape& sizes, DType dtype) { return empty(sizes, dtype); }
  static Tensor full(const Shape& sizes, double value, DType dtype);
  /// A 0-dim tensor holding `value` converted to `dtype`.
  static Tensor scalar(double value, DType dtype);
  /// A contiguous tensor with a copy of `values`; `sizes` defaults to {values.size()}, except
  /// that one value with no sizes gives a 0-d tensor.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape sizes = {});
  /// Contiguous row-major strides for `sizes`. Throws Error when they leave int64 (possible
  /// only for an empty tensor: the product of the sizes, empty dims counted as 1, past 2^63).
  static Shape contiguous_strides(const Shape& sizes);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  /// Size of dim `d`; negative `d` counts from the end. Throws Error when out of range.
  int64_t size(int64_t d) const { return sizes_[index_dim(d, "Tensor::size")]; }
  int64_t stride(int64_t d) const { return strides_[index_dim(d, "Tensor::stride")]; }
  int64_t numel() const;
  int64_t storage_offset() const { return offset_; }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  /// Normalises a possibly negative dim index against dim() (or dim()+1 for insertions).
  int64_t wrap_dim(int64_t d, bool for_insert = false) const;

  /// Address of the first element (storage base + offset * element size).
  void* data_ptr() const;
  /// Typed pointer to the first element; throws Error when T does not match dtype().
  template <typename T>
  T* data() const;

  bool is_contiguous() const;
  /// This tensor if contiguous, else a contiguous copy.
  Tensor contiguous() const;
  /// A contiguous copy with its own storage.
  Tensor clone() const;
  /// A copy converted to `dtype` (this tensor, unchanged, when the dtype already matches and
  /// `copy` is false).
  Tensor to(DType dtype, bool copy = false) const;
  /// This tensor's values on `device` (this tensor when already there): a host tensor is made
  /// contiguous and copied over; a device tensor's whole storage is copied, keeping its sizes,
  /// strides and offset. Loads the device's backend when needed; throws Error when there is
  /// none or the copy fails.
  Tensor to(Device device) const;
  /// Copies `src` (same sizes, any dtype and strides) into this tensor's elements.
  void copy_from(const Tensor& src);
  /// Fills every element with `value` (converted to dtype()).
  void fill(double value);

  // Views: share storage, never copy.
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const;
  /// A view with new sizes (one may be -1); throws Error when the strides do not allow it.
  Tensor view(const Shape& sizes) const;
  /// view() when possible, else a contiguous copy reshaped.
  Tensor reshape(const Shape& sizes) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;
  /// Broadcasts size-1 dims (stride 0); -1 keeps a size; new leading dims allowed.
  Tensor expand(const Shape& sizes) const;
  /// Python-style slice along `dim` (start/end clamped, step > 0).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;

  /// Element `linear` (row-major over sizes()) as double (complex: real part).
  double item_at(int64_t linear) const;
  /// Value of a one-element tensor as double.
  double item() const;
  /// All elements in row-major order, as doubles (tests and printing).
  std::vector<double> to_doubles() const;
  /// "f32[2, 3]".
  std::string type_str() const;

 private:
  /// wrap_dim for indexing sizes_/strides_: also throws Error naming `where` for a 0-d tensor.
  size_t index_dim(int64_t d, const char* where) const;

  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::kFloat32;
  Shape sizes_, strides_;
  int64_t offset_ = 0;
};

/// "[2, 3]".
std::string shape_str(const Shape& s);
/// Number of elements of a shape.
int64_t shape_numel(const Shape& s);
/// Broadcast of two shapes (numpy rules); throws Error naming `where` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& where);

/// Calls f(offset) for every element of a strided layout, in row-major order of `sizes`;
/// `offset` is in elements, relative to the first element.
template <typename F>
void for_each_offset(const Shape& sizes, const Shape& strides, F&& f) {
  const size_t nd = sizes.size();
  for (int64_t s : sizes)
    if (s == 0) return;
  if (nd == 0) {
    f(int64_t{0});
    return;
  }
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  const int64_t inner = sizes[nd - 1], inner_stride = strides[nd - 1];
  while (true) {
    for (int64_t i = 0; i < inner; ++i) f(off + i * inner_stride);
    if (nd == 1) return;
    size_t d = nd - 2;
    while (true) {
      // (Stepping back by (size - 1) strides, never past the last element: a size-1 dim may
      // carry any stride, INT64_MAX included, and off + stride would overflow.)
      if (++idx[d] < sizes[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (sizes[d] - 1);
      idx[d] = 0;
      if (d == 0) return;
      --d;
    }
  }
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape sizes) {
  if (sizes.empty() && values.size() != 1) sizes = {static_cast<int64_t>(values.size())};
  ANVIL_CHECK(shape_numel(sizes) == static_cast<int64_t>(values.size()), "Tensor::from_vector",
              "element count does not match sizes", std::to_string(shape_numel(sizes)),
              std::to_string(values.size()));
  Tensor t = empty(sizes, dtype_of<T>());
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

template <typename T>
T* Tensor::data() const {
  ANVIL_CHECK(dtype_of<T>() == dtype_, "Tensor::data", "element type mismatch",
              dtype_name(dtype_of<T>()), dtype_name(dtype_));
  return static_cast<T*>(data_ptr());
}

}  // namespace anvil
