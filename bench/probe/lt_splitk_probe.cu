// Probe (not part of the build): cuBLASLt's heuristic algorithms for a skinny bf16 linear
// (y[M,N] = x[M,K] W[N,K]^T), their configuration, and the first one with split-K forced,
// each timed in a CUDA graph of 20 calls over operand copies that pass the L2.
//   nvcc -O2 -std=c++17 -arch=sm_90a lt_splitk_probe.cu -lcublasLt -o lt_splitk_probe
//   ./lt_splitk_probe M N K
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_check.h"

int main(int argc, char** argv) {
  const int64_t M = argc > 1 ? atoll(argv[1]) : 64, N = argc > 2 ? atoll(argv[2]) : 1024,
                K = argc > 3 ? atoll(argv[3]) : 4096;
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  const int copies = 20;
  std::vector<void*> x(copies), w(copies), y(copies);
  for (int i = 0; i < copies; ++i) {
    CK(cudaMalloc(&x[i], M * K * 2));
    CK(cudaMalloc(&w[i], N * K * 2));
    CK(cudaMalloc(&y[i], M * N * 2));
    CK(cudaMemset(x[i], 0, M * K * 2));
    CK(cudaMemset(w[i], 0, N * K * 2));
  }
  void* ws;
  const size_t ws_bytes = 64 << 20;
  CK(cudaMalloc(&ws, ws_bytes));
  // column-major: D[N,M] = W^T(op T of [K,N]) * X[K,M]
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn));
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t mw = ws_bytes;
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &mw,
                                          sizeof mw));
  uint32_t mask = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                          sizeof mask));
  cublasLtMatmulHeuristicResult_t res[16];
  int n = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 16, res, &n));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  float alpha = 1, beta = 0;
  auto time_algo = [&](const cublasLtMatmulAlgo_t& algo, size_t wsz) -> double {
    for (int i = 0; i < 2; ++i)
      if (cublasLtMatmul(h, op, &alpha, w[0], la, x[0], lb, &beta, y[0], lc, y[0], lc, &algo, ws,
                         wsz, s))
        return -1;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < copies; ++i)
      cublasLtMatmul(h, op, &alpha, w[i], la, x[i], lb, &beta, y[i], lc, y[i], lc, &algo, ws, wsz,
                     s);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> ms;
    for (int r = 0; r < 30; ++r) {
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
  };
  auto describe = [&](const cublasLtMatmulAlgo_t& a) {
    int id = 0, tile = 0, splitk = 0, red = 0, swz = 0, stages = 0, cl = 0;
    size_t sz;
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &sz);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                         sizeof splitk, &sz);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red,
                                         sizeof red, &sz);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz,
                                         &sz);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages,
                                         &sz);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl,
                                         &sz);
    std::printf("id %d tile %d splitk %d red %d swz %d stages %d cluster %d", id, tile, splitk, red,
                swz, stages, cl);
  };
  std::printf("M %ld N %ld K %ld: %d heuristic results\n", (long)M, (long)N, (long)K, n);
  for (int i = 0; i < n; ++i) {
    std::printf("h%-2d ", i);
    describe(res[i].algo);
    std::printf(" ws %zu: %.2f us\n", res[i].workspaceSize,
                time_algo(res[i].algo, res[i].workspaceSize));
  }
  for (int base = 0; base < std::min(n, 3); ++base)
    for (int sk : {2, 3, 4, 6, 8, 16}) {
      cublasLtMatmulAlgo_t a = res[base].algo;
      int32_t skv = sk;
      uint32_t rs = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &skv,
                                               sizeof skv)) {
        std::printf("h%d splitk %d: set refused\n", base, sk);
        continue;
      }
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &rs,
                                           sizeof rs);
      cublasLtMatmulHeuristicResult_t chk{};
      const auto st = cublasLtMatmulAlgoCheck(h, op, la, lb, lc, lc, &a, &chk);
      if (st) {
        std::printf("h%d splitk %d: check refused (%d)\n", base, sk, (int)st);
        continue;
      }
      std::printf("h%d splitk %-2d ", base, sk);
      describe(a);
      std::printf(" ws %zu: %.2f us\n", chk.workspaceSize, time_algo(a, chk.workspaceSize));
    }
  return 0;
}
