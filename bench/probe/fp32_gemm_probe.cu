// Probe (not part of the build): ways to run an fp32 linear y[M,N] = x[M,K] W[N,K]^T on Hopper
// at fp32 accuracy, each timed in a CUDA graph of 10 calls over operand copies, with its max
// error against an fp64 product:
//   sgemm      cuBLASLt, CUBLAS_COMPUTE_32F (PyTorch's path with TF32 off)
//   bf16x9     cuBLASLt, CUBLAS_COMPUTE_32F_EMULATED_16BFX9 (where the GPU has it)
//   tf32       cuBLASLt, CUBLAS_COMPUTE_32F_FAST_TF32 (1xTF32: the speed ceiling, not accurate)
//   tf32_k3    cuBLASLt TF32 over K' = 3K: [x_hi x_lo x_hi] [W_hi W_hi W_lo]^T (3xTF32 by layout)
//   c2_*       CUTLASS 2.x sm80 kernels with OpMultiplyAddFastF32 (3xTF32 in registers)
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I$CUTLASS/include \
//        fp32_gemm_probe.cu -lcublasLt -o fp32_gemm_probe
//   ./fp32_gemm_probe M N K
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cutlass/gemm/device/gemm.h"

#include "probe_check.h"

__global__ void ref_kernel(const float* x, const float* w, double* y, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= N) return;
  double s = 0;
  for (int k = 0; k < K; ++k) s += (double)x[(size_t)m * K + k] * (double)w[(size_t)n * K + k];
  y[(size_t)m * N + n] = s;
}

__device__ float tf32_round(float v) {
  uint32_t u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(v));
  return __uint_as_float(u);
}

// rows of [hi lo hi] (order: parts 0, 1, 2 of K' = 3K) from one fp32 matrix [R, K]
__global__ void split3(const float* s, float* d, int R, int K, int order) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)R * K) return;
  const size_t r = i / K, k = i % K;
  const float hi = tf32_round(s[i]), lo = s[i] - hi;
  float* row = d + r * 3 * K;
  row[k] = hi;
  row[K + k] = order == 0 ? lo : hi;
  row[2 * K + k] = order == 0 ? hi : lo;
}

template <int TM, int TN, int TK, int WM, int WN, int WK, int S>
using FastF32 = cutlass::gemm::device::Gemm<
    float, cutlass::layout::RowMajor, float, cutlass::layout::ColumnMajor, float,
    cutlass::layout::RowMajor, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<TM, TN, TK>, cutlass::gemm::GemmShape<WM, WN, WK>,
    cutlass::gemm::GemmShape<16, 8, 8>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, S, 4, 4, false,
    cutlass::arch::OpMultiplyAddFastF32>;

struct Bufs {
  int M, N, K, copies;
  std::vector<float*> x, w, y, x3, w3;
};

template <class F>
double time_graph(cudaStream_t s, int copies, F&& call) {
  call(0);
  CK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < copies; ++i) call(i);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int r = 0; r < 20; ++r) {
    cudaEventRecord(a, s);
    cudaGraphLaunch(ge, s);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float t;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0 / copies;
}

double max_err(const Bufs& b, const std::vector<double>& ref) {
  std::vector<float> got((size_t)b.M * b.N);
  CK(cudaMemcpy(got.data(), b.y[0], got.size() * 4, cudaMemcpyDeviceToHost));
  double e = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    e = std::max(e, std::fabs(got[i] - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return e / scale;
}

void report(const char* name, double us, double err, const Bufs& b) {
  const double tflops = 2.0 * b.M * b.N * b.K / (us * 1e-6) / 1e12;
  std::printf("%-34s %9.2f us  %6.1f TFLOP/s  max|err|/max|ref| %.2e\n", name, us, tflops, err);
}

void lt_run(cublasLtHandle_t h, const Bufs& b, cudaStream_t s, void* ws, size_t wsb,
            cublasComputeType_t ct, bool k3, const char* name, const std::vector<double>& ref) {
  const int64_t K = k3 ? 3 * (int64_t)b.K : b.K;
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn));
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, K, b.N, K));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, b.M, K));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, b.N, b.M, b.N));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t mw = wsb;
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &mw,
                                          sizeof mw));
  cublasLtMatmulHeuristicResult_t res[8];
  int n = 0;
  if (cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 8, res, &n) || n == 0) {
    std::printf("%-34s no algorithm\n", name);
    return;
  }
  float alpha = 1, beta = 0;
  double best = 1e30;
  int besti = 0;
  for (int a = 0; a < n; ++a) {
    auto call = [&](int i) {
      cublasLtMatmul(h, op, &alpha, k3 ? b.w3[i] : b.w[i], la, k3 ? b.x3[i] : b.x[i], lb, &beta,
                     b.y[i], lc, b.y[i], lc, &res[a].algo, ws, wsb, s);
    };
    const double us = time_graph(s, b.copies, call);
    if (us < best) best = us, besti = a;
  }
  cublasLtMatmul(h, op, &alpha, k3 ? b.w3[0] : b.w[0], la, k3 ? b.x3[0] : b.x[0], lb, &beta,
                 b.y[0], lc, b.y[0], lc, &res[besti].algo, ws, wsb, s);
  CK(cudaStreamSynchronize(s));
  char label[64];
  std::snprintf(label, sizeof label, "%s (best of %d: #%d)", name, n, besti);
  report(label, best, max_err(b, ref), b);
}

template <class G>
void c2_run(const Bufs& b, cudaStream_t s, const char* name, const std::vector<double>& ref) {
  G gemm;
  std::vector<typename G::Arguments> args;
  for (int i = 0; i < b.copies; ++i)
    args.emplace_back(cutlass::gemm::GemmCoord(b.M, b.N, b.K),
                      typename G::TensorRefA(b.x[i], b.K), typename G::TensorRefB(b.w[i], b.K),
                      typename G::TensorRefC(b.y[i], b.N), typename G::TensorRefD(b.y[i], b.N),
                      typename G::EpilogueOutputOp::Params(1.0f, 0.0f));
  if (gemm.can_implement(args[0]) != cutlass::Status::kSuccess) {
    std::printf("%-34s cannot implement\n", name);
    return;
  }
  auto call = [&](int i) {
    gemm.initialize(args[i], nullptr, s);
    gemm.run(s);
  };
  const double us = time_graph(s, b.copies, call);
  call(0);
  CK(cudaStreamSynchronize(s));
  report(name, us, max_err(b, ref), b);
}

int main(int argc, char** argv) {
  Bufs b;
  const bool lt = !getenv("NO_LT");
  b.M = argc > 1 ? atoi(argv[1]) : 1024;
  b.N = argc > 2 ? atoi(argv[2]) : 3072;
  b.K = argc > 3 ? atoi(argv[3]) : 1024;
  b.copies = 10;
  const size_t xs = (size_t)b.M * b.K, wsz = (size_t)b.N * b.K, ys = (size_t)b.M * b.N;
  std::vector<float> hx(xs), hw(wsz);
  srand(1);
  for (auto& v : hx) v = (float)rand() / RAND_MAX * 2 - 1;
  for (auto& v : hw) v = ((float)rand() / RAND_MAX * 2 - 1) * 0.03f;
  for (int i = 0; i < b.copies; ++i) {
    float *x, *w, *y, *x3, *w3;
    CK(cudaMalloc(&x, xs * 4));
    CK(cudaMalloc(&w, wsz * 4));
    CK(cudaMalloc(&y, ys * 4));
    CK(cudaMalloc(&x3, xs * 12));
    CK(cudaMalloc(&w3, wsz * 12));
    CK(cudaMemcpy(x, hx.data(), xs * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, hw.data(), wsz * 4, cudaMemcpyHostToDevice));
    split3<<<(unsigned)((xs + 255) / 256), 256>>>(x, x3, b.M, b.K, 0);
    split3<<<(unsigned)((wsz + 255) / 256), 256>>>(w, w3, b.N, b.K, 1);
    b.x.push_back(x), b.w.push_back(w), b.y.push_back(y), b.x3.push_back(x3),
        b.w3.push_back(w3);
  }
  double* dref;
  CK(cudaMalloc(&dref, ys * 8));
  ref_kernel<<<dim3((b.N + 127) / 128, b.M), 128>>>(b.x[0], b.w[0], dref, b.M, b.N, b.K);
  std::vector<double> ref(ys);
  CK(cudaMemcpy(ref.data(), dref, ys * 8, cudaMemcpyDeviceToHost));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  void* ws;
  const size_t wsb = 64 << 20;
  CK(cudaMalloc(&ws, wsb));
  std::printf("M %d N %d K %d\n", b.M, b.N, b.K);
  lt_run(h, b, s, ws, wsb, CUBLAS_COMPUTE_32F, false, "sgemm", ref);
  if (lt) {
    lt_run(h, b, s, ws, wsb, CUBLAS_COMPUTE_32F_EMULATED_16BFX9, false, "bf16x9", ref);
    lt_run(h, b, s, ws, wsb, CUBLAS_COMPUTE_32F_FAST_TF32, false, "tf32", ref);
    lt_run(h, b, s, ws, wsb, CUBLAS_COMPUTE_32F_FAST_TF32, true, "tf32_k3", ref);
  }
  auto split_us = time_graph(s, b.copies, [&](int i) {
    split3<<<(unsigned)((xs + 255) / 256), 256, 0, s>>>(b.x[i], b.x3[i], b.M, b.K, 0);
  });
  std::printf("%-34s %9.2f us (the activation split a tf32_k3 GEMM needs)\n", "split3 x", split_us);
  c2_run<FastF32<64,128,32,32,64,32,3>>(b, s, "c2_64x128x32_w32x64_s3", ref);
  c2_run<FastF32<64,128,32,32,64,32,4>>(b, s, "c2_64x128x32_w32x64_s4", ref);
  c2_run<FastF32<64,128,32,32,64,32,5>>(b, s, "c2_64x128x32_w32x64_s5", ref);
  c2_run<FastF32<64,128,16,32,64,16,5>>(b, s, "c2_64x128x16_w32x64_s5", ref);
  c2_run<FastF32<128,64,32,64,32,32,3>>(b, s, "c2_128x64x32_w64x32_s3", ref);
  c2_run<FastF32<128,64,32,64,32,32,4>>(b, s, "c2_128x64x32_w64x32_s4", ref);
  c2_run<FastF32<128,64,16,64,32,16,4>>(b, s, "c2_128x64x16_w64x32_s4", ref);
  c2_run<FastF32<128,64,16,64,32,16,5>>(b, s, "c2_128x64x16_w64x32_s5", ref);
  c2_run<FastF32<128,128,32,64,32,32,3>>(b, s, "c2_128x128x32_w64x32_s3", ref);
  c2_run<FastF32<128,128,16,64,32,16,4>>(b, s, "c2_128x128x16_w64x32_s4", ref);
  c2_run<FastF32<128,128,16,64,32,16,5>>(b, s, "c2_128x128x16_w64x32_s5", ref);
  c2_run<FastF32<128,128,32,32,64,32,3>>(b, s, "c2_128x128x32_w32x64_s3", ref);
  c2_run<FastF32<64,64,32,32,32,32,4>>(b, s, "c2_64x64x32_w32x32_s4", ref);
  c2_run<FastF32<64,64,32,32,32,32,5>>(b, s, "c2_64x64x32_w32x32_s5", ref);
  c2_run<FastF32<64,64,16,32,32,16,6>>(b, s, "c2_64x64x16_w32x32_s6", ref);
  c2_run<FastF32<256,64,16,64,32,16,3>>(b, s, "c2_256x64x16_w64x32_s3", ref);
  c2_run<FastF32<64,256,16,32,64,16,3>>(b, s, "c2_64x256x16_w32x64_s3", ref);
  c2_run<FastF32<128,256,16,64,64,16,3>>(b, s, "c2_128x256x16_w64x64_s3", ref);
  return 0;
}
