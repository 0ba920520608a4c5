// Tensors across the Python boundary: arrays that speak DLPack or the buffer protocol (NumPy,
// PyTorch, CuPy...) become anvil Tensors over the same memory, and anvil Tensors go back as
// arrays of the caller's framework over the Tensor's memory. Neither direction copies.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <string>

#include "core/dtype.h"
#include "core/tensor.h"

namespace anvil::python {

/// The array framework a result is handed back in.
enum class Framework { kNumpy, kTorch, kOther };

/// The framework of `obj`: NumPy arrays, torch tensors, anything else.
Framework framework_of(nanobind::handle obj);

/// The DType of a DLPack dtype; `want` (the dtype the model expects, may be null) lets a uint8
/// array stand for bool. Throws Error naming `where` for dtypes anvil has no name for.
DType dtype_from_dlpack(nanobind::dlpack::dtype t, const std::string& where, const DType* want);
/// The DLPack dtype of `d`. Throws Error for dtypes DLPack cannot describe (float8 kinds).
nanobind::dlpack::dtype dlpack_from_dtype(DType d, const std::string& where);

/// Borrows `array` (host memory or a CUDA device) as a Tensor over the same bytes: nothing is
/// copied and the Tensor does not own the memory, so `array` must outlive every use. Throws Error
/// naming `where` for other devices, negative strides or unknown dtypes.
Tensor borrow_array(const nanobind::ndarray<nanobind::ro>& array, const std::string& where,
                    const DType* want);

/// Wraps `t` as an array of `framework` over the Tensor's memory (the array keeps the storage
/// alive). kOther gives NumPy for host tensors and a DLPack-capable array otherwise.
nanobind::object export_tensor(const Tensor& t, Framework framework);

}  // namespace anvil::python
