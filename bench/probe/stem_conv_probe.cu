// Probe (not part of the build): a vision stem (N x 224 x 224 x 3 image, 7x7 stride 2 pad 3,
// 64 output channels, bf16, fp32 accumulation, + per-channel bias, relu) as CUTLASS 2.x
// implicit-GEMM convolutions with the fixed-channels iterators (the image's channels padded to
// 4 or 8, NHWC; the filter KRSC padded alike), each timed in a CUDA graph of 20 calls, checked
// against a naive fp32 convolution of the unpadded operands. cuDNN took 222 us (C 3) and 198 us
// (C 8 zero-padded) for this convolution at batch 32 on an H200 (stem_pad_probe.py).
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I$CUTLASS/include \
//        stem_conv_probe.cu -o stem_conv_probe
//   ./stem_conv_probe [N]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/device/implicit_gemm_convolution.h"
#include "cutlass/conv/kernel/default_conv2d_fprop.h"
#include "cutlass/epilogue/thread/linear_combination_relu.h"
#include "probe_check.h"

using bf16 = cutlass::bfloat16_t;

template <int C, int TM, int TN, int TK, int WM, int WN, int Stages>
struct StemConv {
  using Epi = cutlass::epilogue::thread::LinearCombinationRelu<bf16, 8, float, float>;
  using Kernel = typename cutlass::conv::kernel::DefaultConv2dFprop<
      bf16, cutlass::layout::TensorNHWC, bf16, cutlass::layout::TensorNHWC, bf16,
      cutlass::layout::TensorNHWC, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
      cutlass::gemm::GemmShape<TM, TN, TK>, cutlass::gemm::GemmShape<WM, WN, TK>,
      cutlass::gemm::GemmShape<16, 8, 16>, Epi,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<4>, Stages,
      cutlass::arch::OpMultiplyAdd, cutlass::conv::IteratorAlgorithm::kFixedChannels,
      cutlass::conv::StrideSupport::kStrided, C, C>::Kernel;
  using Op = cutlass::conv::device::ImplicitGemmConvolution<Kernel>;
};

__global__ void ref_conv(const float* x, const float* w, const float* b, float* y, int N, int H,
                         int W, int C, int K, int R, int S, int P, int Q, int st, int pad) {
  const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= (long)N * P * Q * K) return;
  const int k = i % K, q = (i / K) % Q, p = (i / K / Q) % P, n = i / K / Q / P;
  float s = b[k];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < S; ++t) {
      const int h = p * st - pad + r, ww = q * st - pad + t;
      if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
      for (int c = 0; c < C; ++c)
        s += x[(((long)n * C + c) * H + h) * W + ww] * w[((k * C + c) * R + r) * S + t];
    }
  y[i] = s > 0 ? s : 0;  // NHWC
}

template <typename Conv>
void run(const char* name, int N, int Cp, const bf16* x, const bf16* w, const bf16* bias, bf16* y,
         const std::vector<float>& want) {
  const int H = 224, W = 224, K = 64, R = 7, S = 7, P = 112, Q = 112;
  cutlass::conv::Conv2dProblemSize prob(N, H, W, Cp, K, R, S, P, Q, 3, 3, 2, 2, 1, 1,
                                        cutlass::conv::Mode::kCrossCorrelation, 1);
  using L = cutlass::layout::TensorNHWC;
  typename Conv::Op::Arguments args(
      prob, {const_cast<bf16*>(x), L::packed({N, H, W, Cp})},
      {const_cast<bf16*>(w), L::packed({K, R, S, Cp})},
      {const_cast<bf16*>(bias), L(cutlass::make_Coord(0, 0, 0))}, {y, L::packed({N, P, Q, K})},
      {1.0f, 1.0f});
  typename Conv::Op op;
  if (op.can_implement(args) != cutlass::Status::kSuccess) {
    std::printf("%-28s cannot implement\n", name);
    return;
  }
  size_t ws = op.get_workspace_size(args);
  void* work = nullptr;
  if (ws) CK(cudaMalloc(&work, ws));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  if (op.initialize(args, work, s) != cutlass::Status::kSuccess) {
    std::printf("%-28s initialize failed\n", name);
    return;
  }
  CK((int)op(s));
  CK(cudaStreamSynchronize(s));
  std::vector<bf16> got(want.size());
  CK(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
  double err = 0, mx = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, (double)std::fabs((float)got[i] - want[i]));
    mx = std::max(mx, (double)std::fabs(want[i]));
  }
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < 20; ++i) op(s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  float best = 1e30f;
  for (int round = 0; round < 10; ++round) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms * 1000 / 20);
  }
  std::printf("%-28s %8.1f us  max|err| %.3g of max|y| %.3g  smem %d\n", name, best, err, mx,
              (int)sizeof(typename Conv::Kernel::SharedStorage));
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  if (work) cudaFree(work);
}

int main(int argc, char** argv) {
  const int N = argc > 1 ? std::atoi(argv[1]) : 32;
  const int H = 224, W = 224, C = 3, K = 64, R = 7, S = 7, P = 112, Q = 112;
  std::vector<float> hx((size_t)N * C * H * W), hw(K * C * R * S), hb(K);
  srand(1);
  for (auto& v : hx) v = (float)bf16((rand() / (float)RAND_MAX) * 2 - 1);
  for (auto& v : hw) v = (float)bf16(((rand() / (float)RAND_MAX) * 2 - 1) * 0.2f);
  for (auto& v : hb) v = (float)bf16(((rand() / (float)RAND_MAX) * 2 - 1) * 0.5f);
  float *dx, *dw, *db, *dy;
  CK(cudaMalloc(&dx, hx.size() * 4));
  CK(cudaMalloc(&dw, hw.size() * 4));
  CK(cudaMalloc(&db, hb.size() * 4));
  CK(cudaMalloc(&dy, (size_t)N * P * Q * K * 4));
  CK(cudaMemcpy(dx, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  const long outs = (long)N * P * Q * K;
  ref_conv<<<(outs + 255) / 256, 256>>>(dx, dw, db, dy, N, H, W, C, K, R, S, P, Q, 2, 3);
  CK(cudaDeviceSynchronize());
  std::vector<float> want(outs);
  CK(cudaMemcpy(want.data(), dy, outs * 4, cudaMemcpyDeviceToHost));
  bf16* bias;
  bf16* y;
  CK(cudaMalloc(&bias, K * 2));
  CK(cudaMalloc(&y, outs * 2));
  std::vector<bf16> hbb(K);
  for (int k = 0; k < K; ++k) hbb[k] = bf16(hb[k]);
  CK(cudaMemcpy(bias, hbb.data(), K * 2, cudaMemcpyHostToDevice));
  for (int cp : {4, 8}) {
    std::vector<bf16> px((size_t)N * H * W * cp, bf16(0.f)), pw((size_t)K * R * S * cp, bf16(0.f));
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        for (int h = 0; h < H; ++h)
          for (int w = 0; w < W; ++w)
            px[(((size_t)n * H + h) * W + w) * cp + c] = bf16(hx[(((size_t)n * C + c) * H + h) * W + w]);
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r)
          for (int t = 0; t < S; ++t)
            pw[((k * R + r) * S + t) * cp + c] = bf16(hw[((k * C + c) * R + r) * S + t]);
    bf16 *x, *w;
    CK(cudaMalloc(&x, px.size() * 2));
    CK(cudaMalloc(&w, pw.size() * 2));
    CK(cudaMemcpy(x, px.data(), px.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, pw.data(), pw.size() * 2, cudaMemcpyHostToDevice));
    if (cp == 4) {
      run<StemConv<4, 128, 64, 32, 64, 32, 3>>("c4 128x64x32 w64x32 s3", N, cp, x, w, bias, y, want);
      run<StemConv<4, 128, 64, 64, 64, 32, 3>>("c4 128x64x64 w64x32 s3", N, cp, x, w, bias, y, want);
      run<StemConv<4, 256, 64, 32, 64, 64, 3>>("c4 256x64x32 w64x64 s3", N, cp, x, w, bias, y, want);
      run<StemConv<4, 128, 64, 32, 32, 64, 4>>("c4 128x64x32 w32x64 s4", N, cp, x, w, bias, y, want);
      run<StemConv<4, 64, 64, 32, 32, 32, 4>>("c4 64x64x32 w32x32 s4", N, cp, x, w, bias, y, want);
    } else {
      run<StemConv<8, 128, 64, 32, 64, 32, 3>>("c8 128x64x32 w64x32 s3", N, cp, x, w, bias, y, want);
      run<StemConv<8, 128, 64, 64, 64, 32, 3>>("c8 128x64x64 w64x32 s3", N, cp, x, w, bias, y, want);
      run<StemConv<8, 256, 64, 64, 64, 64, 3>>("c8 256x64x64 w64x64 s3", N, cp, x, w, bias, y, want);
    }
    cudaFree(x);
    cudaFree(w);
  }
  return 0;
}
