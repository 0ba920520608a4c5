// The tuner's epilogue stand-in (cuda_epilogue_standin.h).
#include "codegen/gemm/cuda_epilogue_standin.h"

#include "codegen/gemm/cuda_skinny.h"  // skinny_toolchain_options: the same nvcc flags

namespace anvil::codegen::gemm {

namespace {

constexpr const char* kSource = R"CUDA(
#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "anvil/anvil_rt.h"

namespace {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// as the generated kernels compute them (codegen/cuda/cuda_preamble.cpp, c_expr)
__device__ __forceinline__ float act(float x, int a) {
  switch (a) {
    case ANVIL_GEMM_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ANVIL_GEMM_ACT_RELU6: return fminf(fmaxf(x, 0.0f), 6.0f);
    case ANVIL_GEMM_ACT_GELU_ERF: return x * 0.5f * (1.0f + erff(x * 0.70710678118654757f));
    case ANVIL_GEMM_ACT_GELU_TANH: {
      const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(u));
    }
    case ANVIL_GEMM_ACT_SILU: return x / (1.0f + expf(-x));
    default: return x;
  }
}

// one thread per V consecutive elements of a row (V = 16 bytes, or 1)
template <typename T, int V>
__global__ void __launch_bounds__(256) epilogue(T* __restrict__ c, const T* __restrict__ bias,
                                                int64_t m, int64_t n, int64_t ldc, int bias_kind,
                                                int a) {
  const int64_t per_row = n / V, total = m * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, col = (i - r * per_row) * V;
    T* p = c + r * ldc + col;
    alignas(16) T v[V];
    alignas(16) T b[V];
    if constexpr (V > 1) {
      *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(p);
      if (bias_kind == ANVIL_GEMM_BIAS_COL)
        *reinterpret_cast<uint4*>(b) = *reinterpret_cast<const uint4*>(bias + col);
    } else {
      v[0] = *p;
      if (bias_kind == ANVIL_GEMM_BIAS_COL) b[0] = bias[col];
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float x = to_f(v[j]);
      if (bias_kind == ANVIL_GEMM_BIAS_COL) x += to_f(b[j]);
      if (bias_kind == ANVIL_GEMM_BIAS_ROW) x += to_f(bias[r]);
      v[j] = from_f<T>(act(x, a));
    }
    if constexpr (V > 1)
      *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(v);
    else
      *p = v[0];
  }
}

template <typename T>
int run(const AnvilGemmCall* call, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  T* c = static_cast<T*>(call->c);
  const T* bias = static_cast<const T*>(call->bias);
  const bool vec = call->n % V == 0 && call->ldc % V == 0 &&
                   reinterpret_cast<uintptr_t>(c) % 16 == 0 &&
                   (call->bias_kind != ANVIL_GEMM_BIAS_COL ||
                    reinterpret_cast<uintptr_t>(bias) % 16 == 0);
  const int64_t items = call->m * (vec ? call->n / V : call->n);
  const int64_t blocks = (items + 255) / 256;
  const int64_t capped = blocks < 1 ? 1 : (blocks > 1048576 ? 1048576 : blocks);
  const unsigned grid = static_cast<unsigned>(capped);
  if (vec)
    epilogue<T, V><<<grid, 256, 0, s>>>(c, bias, call->m, call->n, call->ldc, call->bias_kind,
                                        call->activation);
  else
    epilogue<T, 1><<<grid, 256, 0, s>>>(c, bias, call->m, call->n, call->ldc, call->bias_kind,
                                        call->activation);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int anvil_gemm_epilogue_standin(
    const AnvilGemmCall* call, void*, size_t, void* stream) {
  if (call->activation < ANVIL_GEMM_ACT_NONE || call->activation > ANVIL_GEMM_ACT_SILU) return 2;
  if (call->m <= 0 || call->n <= 0) return 0;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (call->c_dtype) {  // anvil::DType's codes (PyTorch's ScalarType)
    case 7: return run<float>(call, s);
    case 6: return run<__half>(call, s);
    case 13: return run<__nv_bfloat16>(call, s);
    default: return 2;
  }
}

extern "C" __attribute__((visibility("default"))) size_t anvil_gemm_epilogue_standin_workspace(
    const AnvilGemmCall*) {
  return 0;
}
)CUDA";

}  // namespace

std::string epilogue_standin_source() { return kSource; }

ToolchainOptions epilogue_standin_toolchain_options() { return skinny_toolchain_options(); }

}  // namespace anvil::codegen::gemm
