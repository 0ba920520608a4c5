// Element-wise reduction kernels shared by the backends (gloo's reduce callback, MPI user ops
// for 16-bit floats) and the rules of which reduce op a dtype accepts (spec A.1.3).
#pragma once

#include <cstddef>
#include <string>

#include "core/tensor.h"
#include "dist/types.h"

namespace anvil::dist {

/// out[i] = a[i] (op) b[i] for n elements; out may alias a or b.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

/// True for the dtypes collectives move and reduce: bool, u8, i8, i16, u16, i32, i64, f16,
/// bf16, f32, f64.
bool is_collective_dtype(DType dt);
/// Throws Error naming `where` for a dtype collectives do not support (complex, float8).
void check_collective_dtype(DType dt, const std::string& where);
/// Throws Error naming `where` when `op` is invalid for `dt`: bitwise ops on floating dtypes,
/// avg on bool ("Cannot use ReduceOp.AVG with boolean inputs") or on integers.
void check_reduce_op(DType dt, ReduceOp op, const std::string& where);
/// The op a backend runs: avg -> sum (the caller divides), and for bool sum -> max (logical or),
/// product -> min (logical and).
ReduceOp engine_op(DType dt, ReduceOp op);
/// The kernel for (dt, op); op must already be an engine_op.
ReduceFn reduce_fn(DType dt, ReduceOp op);
/// t /= divisor element-wise (floating dtypes; the avg of all_reduce / reduce_scatter).
void divide_inplace(Tensor& t, int64_t divisor);

}  // namespace anvil::dist
