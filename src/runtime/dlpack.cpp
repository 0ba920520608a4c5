// DLPack intake and export of the C ABI (runtime/dlpack.h).
#include "runtime/dlpack.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/error.h"

namespace anvil::runtime {

namespace {

constexpr uint8_t kDLBoolCode = 6;  // kDLBool in DLPack >= 0.8

/// A DLManagedTensor owning a reference to an anvil Tensor.
struct OutHolder {
  DLManagedTensor managed{};
  Tensor tensor;
  std::vector<int64_t> shape, strides;
};

}  // namespace

DType dtype_from_dlpack(DLDataType t, const std::string& where, const DType* want) {
  if (t.lanes == 1) {
    switch (t.code) {
      case kDLFloat:
        if (t.bits == 16) return DType::kFloat16;
        if (t.bits == 32) return DType::kFloat32;
        if (t.bits == 64) return DType::kFloat64;
        break;
      case kDLBfloat:
        if (t.bits == 16) return DType::kBFloat16;
        break;
      case kDLInt:
        if (t.bits == 8) return DType::kInt8;
        if (t.bits == 16) return DType::kInt16;
        if (t.bits == 32) return DType::kInt32;
        if (t.bits == 64) return DType::kInt64;
        break;
      case kDLUInt:
        if (t.bits == 8) return want && *want == DType::kBool ? DType::kBool : DType::kUInt8;
        if (t.bits == 16) return DType::kUInt16;
        break;
      case kDLComplex:  // complex32 (ComplexHalf) is two fp16 halves: 32 bits
        if (t.bits == 32) return DType::kComplex32;
        if (t.bits == 64) return DType::kComplex64;
        if (t.bits == 128) return DType::kComplex128;
        break;
      case kDLBoolCode:
        if (t.bits == 8) return DType::kBool;
        break;
      default:
        break;
    }
  }
  throw Error("unsupported DLPack dtype", where, "a dtype anvil knows",
              str("code ", int(t.code), ", bits ", int(t.bits), ", lanes ", t.lanes));
}

DLDataType dlpack_dtype(DType d) {
  DLDataType t{};
  t.lanes = 1;
  t.bits = static_cast<uint8_t>(dtype_size(d) * 8);
  switch (d) {
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      t.code = kDLFloat;
      break;
    case DType::kBFloat16:
      t.code = kDLBfloat;
      break;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      t.code = kDLInt;
      break;
    case DType::kUInt8:
    case DType::kUInt16:
      t.code = kDLUInt;
      break;
    case DType::kComplex32:
    case DType::kComplex64:
    case DType::kComplex128:
      t.code = kDLComplex;
      break;
    case DType::kBool:
      t.code = kDLBoolCode;
      break;
    default:
      t.code = kDLOpaqueHandle;
      break;  // float8 kinds have no DLPack 0.6 code
  }
  return t;
}

Tensor borrow_strided(const StridedArray& a, const std::string& where) {
  if (a.ndim < 0 || a.ndim > 8 || (a.ndim > 0 && !a.shape))
    throw Error("bad tensor rank or shape", where, "0 to 8 dims with a shape",
                str(a.ndim, " dims"));
  const size_t ndim = static_cast<size_t>(a.ndim);
  Shape sizes(a.shape, a.shape + ndim), strides;
  if (a.strides) strides.assign(a.strides, a.strides + ndim);
  bool empty = false;
  uint64_t dense = 1;  // elements of the sizes with empty dims counted as 1 (contiguous reach)
  bool overflow = false;
  for (size_t d = 0; d < ndim; ++d) {
    if (sizes[d] < 0)
      throw Error(str("negative size at dim ", d), where, ">= 0", std::to_string(sizes[d]));
    if (a.strides && strides[d] < 0)
      throw Error(str("negative stride at dim ", d), where, "strides >= 0 (copy the array first)",
                  std::to_string(strides[d]));
    if (sizes[d] == 0) empty = true;
    overflow |= __builtin_mul_overflow(dense, static_cast<uint64_t>(std::max<int64_t>(sizes[d], 1)),
                                       &dense);
  }
  // The caller's sizes and strides are untrusted: the bytes they reach are computed in checked
  // arithmetic, so that a wrapped product cannot make a small storage of a huge tensor.
  overflow = overflow || dense > uint64_t{INT64_MAX};
  if (!a.strides && !overflow) strides = Tensor::contiguous_strides(sizes);
  uint64_t extent = 0;  // the last element's index
  for (size_t d = 0; d < ndim && !overflow; ++d) {
    uint64_t step = 0;
    overflow |= __builtin_mul_overflow(static_cast<uint64_t>(std::max<int64_t>(sizes[d] - 1, 0)),
                                       static_cast<uint64_t>(strides[d]), &step) ||
                __builtin_add_overflow(extent, step, &extent);
  }
  uint64_t nbytes = 0, end = 0;
  overflow = overflow || __builtin_add_overflow(extent, uint64_t{1}, &nbytes) ||
             __builtin_mul_overflow(nbytes, uint64_t{dtype_size(a.dtype)}, &nbytes) ||
             nbytes > uint64_t{INT64_MAX} || __builtin_add_overflow(nbytes, a.byte_offset, &end) ||
             __builtin_add_overflow(end, reinterpret_cast<uintptr_t>(a.data), &end);
  if (overflow && !empty)
    throw Error("tensor's sizes and strides reach past the address space", where,
                "sizes and strides whose last element lies within 2^63 bytes",
                str("sizes ", shape_str(sizes), ", strides ",
                    a.strides ? shape_str(strides) : std::string("(contiguous)"), ", ",
                    dtype_size(a.dtype), "-byte elements, byte offset ", a.byte_offset));
  if (strides.size() != sizes.size()) strides.assign(sizes.size(), 0);  // empty: reaches no byte
  if (!a.data && !empty) throw Error("tensor data is NULL", where, "a data pointer", "NULL");
  uintptr_t first = 0;
  if (a.data && __builtin_add_overflow(reinterpret_cast<uintptr_t>(a.data), a.byte_offset, &first))
    throw Error("tensor's byte offset reaches past the address space", where,
                "data + byte_offset within the address space", str("byte offset ", a.byte_offset));
  if (empty) nbytes = 0;
  char* base = empty && !a.data ? nullptr : static_cast<char*>(a.data) + a.byte_offset;
  // Kernels read elements through typed pointers: a misaligned one is undefined behaviour.
  if (reinterpret_cast<uintptr_t>(base) % dtype_size(a.dtype) != 0)
    throw Error("tensor data is not aligned to its element size", where,
                str("data + byte_offset a multiple of ", dtype_size(a.dtype), " bytes"),
                str("byte offset ", a.byte_offset, " from ", a.data));
  auto storage = Storage::wrap(base, nbytes, nullptr, a.device);
  return Tensor(std::move(storage), a.dtype, std::move(sizes), std::move(strides), 0);
}

Tensor borrow_dlpack(const DLManagedTensor* m, const std::string& where, const DType* want) {
  if (!m) throw Error("tensor is NULL", where, "a DLManagedTensor", "NULL");
  const DLTensor& t = m->dl_tensor;
  const bool cuda = t.device.device_type == kDLCUDA;
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost && !cuda)
    throw Error("tensor is neither in host memory nor on a CUDA device", where,
                "a kDLCPU or kDLCUDA tensor",
                str("device type ", int(t.device.device_type), ":", t.device.device_id));
  if (t.ndim < 0 || t.ndim > 8 || (t.ndim > 0 && !t.shape))
    throw Error("bad tensor rank or shape", where, "0 to 8 dims with a shape",
                str(t.ndim, " dims"));
  StridedArray a;
  a.dtype = dtype_from_dlpack(t.dtype, where, want);
  a.data = t.data;
  a.byte_offset = t.byte_offset;
  // A CUDA tensor is borrowed as device memory: a CUDA package's run reads it in place, a CPU
  // package refuses it as an input on the wrong device.
  a.device = cuda ? Device::cuda(t.device.device_id) : Device::cpu();
  a.ndim = t.ndim;
  a.shape = t.shape;
  a.strides = t.strides;
  return borrow_strided(a, where);
}

DLManagedTensor* export_dlpack(const Tensor& t) {
  auto* h = new OutHolder();
  h->tensor = t;
  h->shape = t.sizes();
  h->strides = t.strides();
  DLTensor& d = h->managed.dl_tensor;
  d.data = t.data_ptr();
  d.device = t.device().is_cpu() ? DLDevice{kDLCPU, 0}
                                 : DLDevice{kDLCUDA, static_cast<int32_t>(t.device().index)};
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = dlpack_dtype(t.dtype());
  d.shape = h->shape.empty() ? nullptr : h->shape.data();
  d.strides = h->strides.empty() ? nullptr : h->strides.data();
  d.byte_offset = 0;
  h->managed.manager_ctx = h;
  h->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<OutHolder*>(self->manager_ctx);
  };
  return &h->managed;
}

}  // namespace anvil::runtime
