// .npy files: NumPy's array format (format versions 1.0, 2.0 and 3.0), read into and written from
// Tensors. Little-endian data only; C and Fortran order on read, C order on write.
#pragma once

#include <string>

#include "core/tensor.h"

namespace anvil {

/// Reads the .npy file at `path` into a new contiguous CPU tensor.
/// Supported descrs: u1 i1 i2 u2 i4 i8 f2 f4 f8 c8 c16 b1 with byte order '<', '|' or '=';
/// Fortran-order arrays are converted to C order. Throws Error naming the file for anything
/// malformed (bad magic, truncated header or data, unknown descr, big-endian data, bad shape).
Tensor read_npy(const std::string& path);

/// Like read_npy, from the bytes of a .npy file; `name` is used in error messages.
Tensor read_npy_bytes(const std::string& bytes, const std::string& name);

/// Writes `t` (any strides) as a C-order .npy file (format 1.0, or 2.0 for very long headers).
/// bfloat16, complex32 and float8 tensors have no .npy type: convert them first (bf16 -> f32).
void write_npy(const std::string& path, const Tensor& t);

/// The bytes write_npy would write for `t`.
std::string write_npy_bytes(const Tensor& t);

/// The .npy descr for a dtype ("<f4", "|b1"); throws Error for dtypes .npy cannot hold.
std::string npy_descr(DType dtype);

}  // namespace anvil
