// DLPack intake and export of the C ABI (include/anvil/anvil_c.h): a caller's DLManagedTensor
// borrowed as a Tensor over the same memory, and a Tensor handed out as a DLManagedTensor.
#pragma once

#include <dlpack/dlpack.h>

#include <string>

#include "core/dtype.h"
#include "core/tensor.h"

namespace anvil::runtime {

/// The anvil dtype of a DLPack dtype (one lane); `want` (the dtype expected there, may be null)
/// lets uint8 stand for bool. Throws Error naming `where` for any other. (The Python module maps
/// the float8 codes of DLPack 1.x, absent from the 0.6 header here, before calling it.)
DType dtype_from_dlpack(DLDataType t, const std::string& where, const DType* want = nullptr);

/// The DLPack dtype of `d` (float8 kinds have none: kDLOpaqueHandle).
DLDataType dlpack_dtype(DType d);

/// Wraps a borrowed DLTensor as a Tensor over the same memory (no copy): host memory
/// (kDLCPU, kDLCUDAHost) or a CUDA device. `want` is the dtype expected there (lets a uint8
/// DLPack tensor stand for bool); may be null. Throws Error naming `where` for a null tensor,
/// another device, a bad rank, negative sizes or strides, an unknown dtype, null data.
Tensor borrow_dlpack(const DLManagedTensor* m, const std::string& where, const DType* want);

/// A new DLManagedTensor that keeps a reference to `t`; its deleter releases it.
DLManagedTensor* export_dlpack(const Tensor& t);

}  // namespace anvil::runtime
