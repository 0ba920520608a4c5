// Probe (not part of the build): the TMA + wgmma skinny GEMM of skinny_wgmma_kernel.h against
// cuBLASLt's heuristic first algorithm on y[M,N] = x[M,K] W[N,K]^T in bf16: the largest
// difference between the two (relative to the largest |y|), the bias + erf-GELU epilogue against
// a host reference, and each timed in a CUDA graph of 20 calls over operand copies that pass the
// L2 (µs per call, weight GB/s).
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
//     bench/probe/skinny_wgmma_probe.cu -lcublasLt -o skinny_wgmma_probe
//   ./skinny_wgmma_probe [M N K]...   (default: the MLP's and LLaMA decode shapes)
// SKINNY_SWEEP=1 also times every tile width, split, K box count and pipeline budget
// (SKINNY_SWEEP_GELU=1: with bias + erf GELU); -DSKINNY_TRACE prints CTA 0's phases in cycles
// and every CTA's start and end (globaltimer); SKINNY_NO_STORE=1 runs the epilogue without
// storing.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "skinny_wgmma_kernel.cuh"

#include "probe_check.h"

using anvil::cuda_backend::SkinnyAct;
using anvil::cuda_backend::SkinnyGemm;

struct Lt {
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  void* ws;
  size_t ws_bytes = 32 << 20;
  Lt(int64_t M, int64_t N, int64_t K) {
    CK(cublasLtCreate(&h));
    CK(cudaMalloc(&ws, ws_bytes));
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn));
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, N, K));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, K, M, K));
    CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t mw = ws_bytes;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &mw,
                                            sizeof mw));
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &res, &n));
    algo = res.algo;
  }
  void run(const void* x, const void* w, void* y, cudaStream_t s) {
    const float one = 1, zero = 0;
    CK(cublasLtMatmul(h, op, &one, w, la, x, lb, &zero, y, lc, y, lc, &algo, ws, ws_bytes, s));
  }
};

template <class F>
double time_graph(F&& f, cudaStream_t s, int copies) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < copies; ++i) f(i);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const int reps = 20;
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) CK(cudaGraphLaunch(ge, s));
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return 1000.0 * ms / (reps * copies);
}

float bf(const __nv_bfloat16& v) { return __bfloat162float(v); }

void probe(int64_t M, int64_t N, int64_t K) {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const int copies = 20;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<__nv_bfloat16> hx(M * K), hw(N * K), hb(N);
  for (auto& v : hx) v = __float2bfloat16(u(rng));
  for (auto& v : hw) v = __float2bfloat16(u(rng) * 0.05f);
  for (auto& v : hb) v = __float2bfloat16(u(rng));
  std::vector<void*> x(copies), w(copies), y(copies), z(copies);
  void* bias;
  CK(cudaMalloc(&bias, N * 2));
  CK(cudaMemcpy(bias, hb.data(), N * 2, cudaMemcpyHostToDevice));
  for (int i = 0; i < copies; ++i) {
    CK(cudaMalloc(&x[i], M * K * 2));
    CK(cudaMalloc(&w[i], N * K * 2));
    CK(cudaMalloc(&y[i], M * N * 2));
    CK(cudaMalloc(&z[i], M * N * 2));
    CK(cudaMemcpy(x[i], hx.data(), M * K * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w[i], hw.data(), N * K * 2, cudaMemcpyHostToDevice));
  }
  Lt lt(M, N, K);
  auto skinny = [&](int i, const void* b, SkinnyAct act) {
    SkinnyGemm g;
    g.m = M, g.n = N, g.k = K;
    g.a = x[i], g.lda = K, g.b = w[i], g.ldb = K, g.d = z[i], g.ldd = N;
    g.bias = b;
    g.act = act;
    CK(anvil::cuda_backend::skinny_gemm(g, s));
  };
  // correctness: plain against cuBLASLt, bias + erf GELU against the host
  lt.run(x[0], w[0], y[0], s);
  skinny(0, nullptr, SkinnyAct::kNone);
  CK(cudaStreamSynchronize(s));
  std::vector<__nv_bfloat16> hy(M * N), hz(M * N);
  CK(cudaMemcpy(hy.data(), y[0], M * N * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hz.data(), z[0], M * N * 2, cudaMemcpyDeviceToHost));
  double maxd = 0, maxy = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    maxd = std::fmax(maxd, std::fabs(bf(hy[i]) - bf(hz[i])));
    maxy = std::fmax(maxy, std::fabs(bf(hy[i])));
  }
  skinny(1, bias, SkinnyAct::kGeluErf);
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(hz.data(), z[1], M * N * 2, cudaMemcpyDeviceToHost));
  double maxe = 0;
  for (int64_t r = 0; r < M; r += (M > 8 ? 7 : 1))
    for (int64_t c = 0; c < N; c += 3) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(bf(hx[r * K + k])) * bf(hw[c * K + k]);
      acc += bf(hb[c]);
      const double want = 0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0)));
      maxe = std::fmax(maxe, std::fabs(want - bf(hz[r * N + c])) / std::fmax(1.0, std::fabs(want)));
    }
  const double t_lt = time_graph([&](int i) { lt.run(x[i], w[i], y[i], s); }, s, copies);
  const double t_sk = time_graph([&](int i) { skinny(i, nullptr, SkinnyAct::kNone); }, s, copies);
  const double t_ske = time_graph([&](int i) { skinny(i, bias, SkinnyAct::kGeluErf); }, s, copies);
  anvil::cuda_backend::Capacity cap;
  CK(anvil::cuda_backend::capacity(0, &cap));
  SkinnyGemm shape;
  shape.m = M, shape.n = N, shape.k = K;
  const auto cfg = anvil::cuda_backend::choose(shape, cap);
  const double gb = double(N) * K * 2 / 1e3;  // weight bytes / µs -> GB/s
  std::printf(
      "%5lld x %5lld x %5lld  cuBLASLt %7.2f us (%5.0f GB/s)  skinny %7.2f us (%5.0f GB/s) "
      "bias+gelu %7.2f us  ratio %.2fx  diff/max %.2e  gelu err %.2e  [bn %d split %d kb %d st %d; "
      "ksub %d]\n",
      (long long)M, (long long)N, (long long)K, t_lt, gb / t_lt, t_sk, gb / t_sk, t_ske,
      t_lt / t_sk, maxd / std::fmax(maxy, 1e-30), maxe, cfg.bn, cfg.split, cfg.kb_per, cfg.stages,
      cfg.ksub);
  std::printf("  clusters held (split 1 2 4 8, 96 KB / 200 KB):");
  for (int i = 0; i < 4; ++i) std::printf(" %d/%d", cap.clusters[i][0], cap.clusters[i][1]);
  std::printf("\n");
#ifdef SKINNY_TRACE
  {  // the last kernel run: the plain one, its CTA 0's phases and every CTA's span
    skinny(0, nullptr, SkinnyAct::kNone);
    CK(cudaStreamSynchronize(s));
    long long t[16];
    CK(cudaMemcpyFromSymbol(t, anvil::cuda_backend::g_trace, sizeof t));
    std::printf(
        "  CTA 0 cycles from start: init %lld, issued %lld, first data %lld, MMAs done %lld, "
        "partial written / stored %lld, cluster synced %lld, summed %lld, end %lld\n",
        t[1] - t[0], t[2] - t[0], t[3] - t[0], t[4] - t[0], t[5] - t[0], t[6] - t[0], t[7] - t[0],
        t[9] - t[0]);
    static unsigned long long span[2][4096];
    CK(cudaMemcpyFromSymbol(span, anvil::cuda_backend::g_span, sizeof span));
    const int64_t ctas = (N + cfg.bn - 1) / cfg.bn * ((M + 63) / 64) * cfg.split;
    unsigned long long s0 = ~0ull, s1 = 0, e0 = ~0ull, e1 = 0;
    double dur = 0;
    for (int64_t i = 0; i < ctas && i < 4096; ++i) {
      s0 = std::min(s0, span[0][i]), s1 = std::max(s1, span[0][i]);
      e0 = std::min(e0, span[1][i]), e1 = std::max(e1, span[1][i]);
      dur += double(span[1][i] - span[0][i]);
    }
    std::printf(
        "  %lld CTAs, ns from the first start: last start %llu, first end %llu, last end "
        "%llu, mean CTA %.0f\n",
        (long long)ctas, s1 - s0, e0 - s0, e1 - s0, dur / ctas);
  }
#endif
  if (getenv("SKINNY_SWEEP")) {  // tile widths, splits, K blocks, budgets; the chosen marked
    for (const int bn : {256, 128, 64})
      for (int split = 1; split <= 8; split *= 2)
        for (const int ksub : {1, 2, 4})
          for (int level = 0; level < 2; ++level) {
            const int64_t kb_total = (K + 64 * ksub - 1) / (64 * ksub),
                          kb_per = (kb_total + split - 1) / split;
            if ((split - 1) * kb_per >= kb_total) continue;
            SkinnyGemm g;
            g.m = M, g.n = N, g.k = K, g.lda = K, g.ldb = K, g.ldd = N;
            const auto c = anvil::cuda_backend::make_config(g, bn, split, ksub, level);
            if (anvil::cuda_backend::smem_bytes(bn, c.stages, ksub) >
                anvil::cuda_backend::kSmemLimit)
              continue;
            const double t = time_graph(
                [&](int i) {
                  SkinnyGemm h = g;
                  h.a = x[i], h.b = w[i], h.d = z[i];
                  if (getenv("SKINNY_SWEEP_GELU")) h.bias = bias, h.act = SkinnyAct::kGeluErf;
                  const cudaError_t e =
                      bn == 256   ? anvil::cuda_backend::launch<256, true>(h, c, 0, s)
                      : bn == 128 ? anvil::cuda_backend::launch<128, true>(h, c, 0, s)
                                  : anvil::cuda_backend::launch<64, true>(h, c, 0, s);
                  CK(e);
                },
                s, copies);
            std::printf(
                "    bn %3d split %d ksub %d st %2d: %7.2f us%s\n", bn, split, ksub, c.stages, t,
                bn == cfg.bn && split == cfg.split && ksub == cfg.ksub && c.stages == cfg.stages
                    ? "  (chosen)"
                    : "");
          }
  }
  for (int i = 0; i < copies; ++i) {
    cudaFree(x[i]);
    cudaFree(w[i]);
    cudaFree(y[i]);
    cudaFree(z[i]);
  }
  cudaFree(bias);
  CK(cudaStreamDestroy(s));
}

int main(int argc, char** argv) {
  std::vector<int64_t> shapes;
  for (int i = 1; i + 2 < argc; i += 3)
    for (int j = 0; j < 3; ++j) shapes.push_back(atoll(argv[i + j]));
  if (shapes.empty())
    shapes = {64, 4096, 1024, 64, 4096, 4096, 64, 1024,  4096, 16, 4096, 4096, 1, 4096, 4096,
              32, 3072, 1024, 64, 1024, 1024, 64, 11008, 4096, 48, 1000, 520,  8, 2817, 1024};
  for (size_t i = 0; i < shapes.size(); i += 3) probe(shapes[i], shapes[i + 1], shapes[i + 2]);
  return 0;
}
