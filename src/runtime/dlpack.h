// DLPack intake and export of the C ABI (include/anvil/anvil_c.h): a caller's DLManagedTensor
// borrowed as a Tensor over the same memory, and a Tensor handed out as a DLManagedTensor.
#pragma once

#include <dlpack/dlpack.h>

#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace anvil::runtime {

/// The anvil dtype of a DLPack dtype (one lane); `want` (the dtype expected there, may be null)
/// lets uint8 stand for bool. Throws Error naming `where` for any other. (The Python module maps
/// the float8 codes of DLPack 1.x, absent from the 0.6 header here, before calling it.)
DType dtype_from_dlpack(DLDataType t, const std::string& where, const DType* want = nullptr);

/// The DLPack dtype of `d` (float8 kinds have none: kDLOpaqueHandle).
DLDataType dlpack_dtype(DType d);

/// A caller's strided array as an interchange protocol describes it (DLPack, nanobind's
/// ndarray): untrusted until borrow_strided has checked it.
struct StridedArray {
  void* data = nullptr;
  uint64_t byte_offset = 0;  // added to data
  Device device = Device::cpu();
  DType dtype = DType::kFloat32;
  int64_t ndim = 0;
  const int64_t* shape = nullptr;
  const int64_t* strides = nullptr;  // in elements; null: contiguous
};

/// Wraps `a` as a Tensor over the same memory (no copy, no ownership) after checking it: at most
/// 8 dims, sizes and strides >= 0, the bytes its last element reaches computed in checked
/// arithmetic (no wrap-around into a small storage of a huge tensor, nothing past the address
/// space), non-null data unless empty, data + byte_offset aligned to the element size. Throws
/// Error naming `where`. The one intake check of the C ABI (borrow_dlpack) and the Python
/// module's arrays.
Tensor borrow_strided(const StridedArray& a, const std::string& where);

/// Wraps a borrowed DLTensor as a Tensor over the same memory (no copy): host memory
/// (kDLCPU, kDLCUDAHost) or a CUDA device. `want` is the dtype expected there (lets a uint8
/// DLPack tensor stand for bool); may be null. Throws Error naming `where` for a null tensor,
/// another device, a bad rank, negative sizes or strides, an unknown dtype, null data.
Tensor borrow_dlpack(const DLManagedTensor* m, const std::string& where, const DType* want);

/// A new DLManagedTensor that keeps a reference to `t`; its deleter releases it.
DLManagedTensor* export_dlpack(const Tensor& t);

}  // namespace anvil::runtime
