// aten._scaled_mm on concrete host tensors: the float8 matrix product
//   out = ((a * scale_a) @ (b * scale_b) + bias).to(out.dtype())
// Shared by the reference kernel (src/ops/scaled_mm.cpp) and the CPU runtime's extern
// (src/runtime/kernels/linalg.cpp), so the CPU target and the interpreter agree exactly; the CUDA
// target calls cuBLASLt's FP8 GEMM instead (codegen/cuda/emit_cuda_fp8.cpp).
//
// a (m, k) and b (k, n) are float8 e4m3fn or e5m2 (not both e5m2), any strides; scale_a and
// scale_b are float32, tensor-wise (one element each) or row-wise (scale_a m elements, scale_b n:
// scale_a[i] * scale_b[j]); bias (n) is optional, of out's dtype (bfloat16 for a float32 out);
// out is (m, n) float16, bfloat16 or float32. The operands are decoded exactly
// (include/anvil/anvil_fp8.h), the products summed in float64 and rounded once into out.
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"

namespace anvil::scaled_mm {

/// Throws Error naming `where` unless the arguments keep the rules above; then computes into
/// `out`.
void compute(const Tensor& a, const Tensor& b, const Tensor& scale_a, const Tensor& scale_b,
             const std::optional<Tensor>& bias, const Tensor& out, const std::string& where);

}  // namespace anvil::scaled_mm
