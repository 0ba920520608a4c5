// scaled_dot_product_attention on the CUDA target: anvil's own kernels (one block per query row;
// tiled over keys for a fixed head size; WMMA tensor cores for 16-bit inputs) and the dispatch
// that puts cuDNN's fused attention (the device backend's `attention`) in front of them where
// it applies, choosing per shape by timing both once.
#include <cstdlib>
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cuda/extern_kernel.h"
#include "core/error.h"

namespace anvil::codegen::cuda::ext {

namespace {

/// What both attention kernels read off the step: operands, dtype of the math, scale, sizes
/// as expressions, the key / value head of query head `h` (grouped-query attention: each key /
/// value head serves H / Hk query heads), and the masking of a score.
struct Attention {
  const TensorView &q, &k, &v, &out;
  const TensorView* mask;
  bool causal, f64;
  std::string ct, B, H, L, S, hk, hv;
  explicit Attention(const ExternStep& e)
      : q(e.inputs[0]), k(e.inputs[1]), v(e.inputs[2]), out(e.outputs[0]),
        mask(e.inputs.size() > 3 && e.inputs[3].buffer >= 0 ? &e.inputs[3] : nullptr),
        causal(int_attr(e, "is_causal", 0) != 0), f64(q.dtype == DType::kFloat64),
        ct(f64 ? "double" : "float"), B(paren(q.sizes[0])), H(paren(q.sizes[1])),
        L(paren(q.sizes[2])), S(paren(k.sizes[2])),
        hk("(h / (" + H + " / " + paren(k.sizes[1]) + "))"),
        hv("(h / (" + H + " / " + paren(v.sizes[1]) + "))") {}
  /// The softmax scale: the step's, else 1 / sqrt(head size `e`).
  std::string scale(const ExternStep& e, const std::string& head) const {
    const passes::ExternAttr* sa = passes::find_attr(e, "scale");
    if (sa && sa->kind == 1) return float_literal(sa->f, f64 ? DType::kFloat64 : DType::kFloat32);
    return "(static_cast<" + ct + ">(1) / sqrt(static_cast<" + ct + ">(" + head + ")))";
  }
  /// Statements applying causality and the mask (its dims aligned to (b, h, i, j) from the
  /// right, read from parameter v3) to score variable `sc` of row i and key j.
  std::string masking(const std::string& sc, const std::string& ind) const {
    std::string out_text;
    if (causal) out_text += ind + "if (j > i) " + sc + " = -INFINITY;\n";
    if (mask) {
      std::vector<std::string> mv;
      const std::vector<std::string> all = {"b", "h", "i", "j"};
      for (size_t d = 0; d < mask->sizes.size(); ++d)
        mv.push_back(all[4 - mask->sizes.size() + d]);
      const std::string m = load(mask->dtype, "v3", offset_of(*mask, mv));
      if (mask->dtype == DType::kBool)
        out_text += ind + "if (" + m + " == 0) " + sc + " = -INFINITY;\n";
      else
        out_text += ind + sc + " += static_cast<" + ct + ">(" + m + ");\n";
    }
    return out_text;
  }
  /// The parameters (q, k, v, the mask when there is one, the output) and body of a kernel of
  /// 128 threads; `rows` > 0: a grid of (query-row blocks of `rows`, H, B) and an empty-problem
  /// guard.
  KernelText kernel(const std::string& body, int rows) const {
    KernelText t;
    t.params = {{"v0", &q}, {"v1", &k}, {"v2", &v}};
    if (mask) t.params.push_back({"v3", mask});
    t.params.push_back({"y0", &out});
    t.body = body;
    t.block = "128";
    if (rows > 0) {
      t.grid = "dim3(static_cast<unsigned>((" + L + " + " + std::to_string(rows - 1) + ") / " +
               std::to_string(rows) + "), static_cast<unsigned>(" + H +
               "), static_cast<unsigned>(" + B + "))";
      t.guard = "  if (" + B + " * " + H + " * " + L + " <= 0) return 0;\n";
    }
    return t;
  }
};

/// scaled_dot_product_attention, one block per query row: scores in shared memory, a block max
/// and sum, then each thread one output feature.
std::string sdpa(const Program& p, const ExternStep& e) {
  const Attention a(e);
  const TensorView &q = a.q, &kk = a.k, &v = a.v, &out = a.out;
  const std::string &ct = a.ct, &B = a.B, &H = a.H, &L = a.L, &S = a.S, &hk = a.hk, &hv = a.hv;
  const std::string E = paren(q.sizes[3]), Ev = paren(v.sizes[3]);
  const std::string scale = a.scale(e, E);
  auto at4 = [](const TensorView& t, const std::string& a, const std::string& b,
                const std::string& c, const std::string& d) {
    return offset_of(t, {a, b, c, d});
  };
  std::ostringstream in;
  in << "  extern __shared__ unsigned char anvil_dyn_smem[];\n";
  in << "  " << ct << "* sc = reinterpret_cast<" << ct << "*>(anvil_dyn_smem);\n";
  in << "  __shared__ " << ct << " red[32];\n";
  in << "  const int64_t rows = " << B << " * " << H << " * " << L << ";\n";
  in << "  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {\n";
  in << "    const int64_t i = row % " << L << ", h = (row / " << L << ") % " << H
     << ", b = row / (" << L << " * " << H << ");\n";
  in << "    " << ct << " mx = -INFINITY;\n";
  in << "    for (int64_t j = threadIdx.x; j < " << S << "; j += blockDim.x) {\n";
  in << "      " << ct << " acc = 0;\n";
  in << "      for (int64_t d = 0; d < " << E << "; ++d)\n";
  in << "        acc += static_cast<" << ct << ">(" << load(q.dtype, "v0", at4(q, "b", "h", "i", "d"))
     << ") * static_cast<" << ct << ">(" << load(kk.dtype, "v1", at4(kk, "b", hk, "j", "d"))
     << ");\n";
  in << "      acc *= " << scale << ";\n";
  in << a.masking("acc", "      ");
  in << "      sc[j] = acc;\n      mx = acc > mx ? acc : mx;\n    }\n";
  in << "    mx = block_reduce(mx, MaxOp(), red);\n";
  in << "    " << ct << " sum = 0;\n";
  in << "    for (int64_t j = threadIdx.x; j < " << S << "; j += blockDim.x) {\n";
  in << "      const " << ct << " pj = exp(sc[j] - mx);\n      sc[j] = pj;\n      sum += pj;\n    }\n";
  in << "    sum = block_reduce(sum, SumOp(), red);  // its barriers publish sc[]\n";
  in << "    for (int64_t d = threadIdx.x; d < " << Ev << "; d += blockDim.x) {\n";
  in << "      " << ct << " acc = 0;\n";
  in << "      for (int64_t j = 0; j < " << S << "; ++j)\n";
  in << "        acc += sc[j] * static_cast<" << ct << ">(" << load(v.dtype, "v2", at4(v, "b", hv, "j", "d"))
     << ");\n";
  in << "      " << store(out.dtype, "y0", at4(out, "b", "h", "i", "d"), "acc / sum") << "\n    }\n";
  in << "    __syncthreads();  // sc[] is rewritten by the next row\n  }\n";
  KernelText k = a.kernel(in.str(), 0);
  k.shared = "smem";
  k.grid = "anvil_blocks(" + B + " * " + H + " * " + L + ", 1)";
  std::ostringstream guard;
  guard << "  const size_t smem = static_cast<size_t>(" << S << ") * sizeof(" << ct << ");\n";
  guard << "  if (" << B << " * " << H << " * " << L << " <= 0) return 0;\n";
  guard << "  if (smem > 99 * 1024) {\n"
        << "    s.api->set_error(s.run_ctx, \"" << e.name
        << ": the CUDA attention kernel keeps a row of scores in shared memory; this key length "
           "is too long for it\");\n    return 1;\n  }\n";
  guard << "  if (smem > 48 * 1024)\n"
        << "    cudaFuncSetAttribute(" << e.name
        << "_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));\n";
  k.guard = guard.str();
  return finish(p, e, k);
}

/// scaled_dot_product_attention with compile-time head sizes (E, Ev <= 128), flash-style: a
/// block of 128 threads takes 32 query rows of one (batch, head), four threads per row, each
/// with the query and its own output accumulator in registers and every fourth key of each tile;
/// key and value tiles are staged in shared memory (rows padded by one element so the four
/// lanes' different keys fall in different banks) and the softmax runs online (running max and
/// sum per thread, merged across the four lanes with shuffles at the end), so scores never leave
/// registers. Causal blocks stop at their last row's diagonal.
std::string sdpa_tiled(const Program& p, const ExternStep& e) {
  const Attention a(e);
  const TensorView &q = a.q, &kk = a.k, &v = a.v, &out = a.out;
  const bool causal = a.causal, f64 = a.f64;
  const std::string &ct = a.ct, &L = a.L, &S = a.S, &hk = a.hk, &hv = a.hv;
  const int64_t E = q.sizes[3].constant(), EV = v.sizes[3].constant();
  const int64_t BK = (E + EV + 2) * (f64 ? 8 : 4) * 64 <= 48 * 1024 ? 64 : 32;  // keys per tile
  const std::string scale = a.scale(e, std::to_string(E));
  std::ostringstream in;
  in << "  constexpr int E = " << E << ", EV = " << EV << ", BQ = 32, LANES = 4, BK = " << BK
     << ";\n";
  in << "  __shared__ " << ct << " ks[BK][E + 1];\n  __shared__ " << ct << " vs[BK][EV + 1];\n";
  in << "  const int64_t b = blockIdx.z, h = blockIdx.y;\n";
  in << "  const int lane = threadIdx.x % LANES;\n";
  in << "  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * BQ, i = i0 + threadIdx.x / LANES;\n";
  in << "  const bool live = i < " << L << ";\n";
  in << "  " << ct << " qr[E], acc[EV];\n";
  in << "  #pragma unroll\n  for (int d = 0; d < E; ++d)\n";
  in << "    qr[d] = live ? static_cast<" << ct << ">("
     << load(q.dtype, "v0", offset_of(q, {"b", "h", "i", "d"})) << ") * " << scale << " : 0;\n";
  in << "  #pragma unroll\n  for (int d = 0; d < EV; ++d) acc[d] = 0;\n";
  in << "  " << ct << " m = -INFINITY, l = 0;\n";
  std::string kend = S;
  if (causal) kend = "(" + S + " < i0 + BQ ? " + S + " : i0 + BQ)";
  in << "  const int64_t kend = " << kend << ";\n";
  in << "  for (int64_t k0 = 0; k0 < kend; k0 += BK) {\n";
  in << "    const int nk = static_cast<int>(kend - k0 < BK ? kend - k0 : BK);\n";
  in << "    __syncthreads();  // the previous tile is no longer read\n";
  in << "    for (int t = threadIdx.x; t < nk * E; t += blockDim.x) {\n";
  in << "      const int jj = t / E, d = t % E;\n      const int64_t j = k0 + jj;\n";
  in << "      ks[jj][d] = static_cast<" << ct << ">("
     << load(kk.dtype, "v1", offset_of(kk, {"b", hk, "j", "d"})) << ");\n    }\n";
  in << "    for (int t = threadIdx.x; t < nk * EV; t += blockDim.x) {\n";
  in << "      const int jj = t / EV, d = t % EV;\n      const int64_t j = k0 + jj;\n";
  in << "      vs[jj][d] = static_cast<" << ct << ">("
     << load(v.dtype, "v2", offset_of(v, {"b", hv, "j", "d"})) << ");\n    }\n";
  in << "    __syncthreads();\n";
  in << "    if (!live) continue;\n";
  in << "    for (int jj = lane; jj < nk; jj += LANES) {\n";
  in << "      const int64_t j = k0 + jj;\n";
  in << "      " << ct << " sc = 0;\n";
  in << "      #pragma unroll\n      for (int d = 0; d < E; ++d) sc += qr[d] * ks[jj][d];\n";
  in << a.masking("sc", "      ");
  in << "      if (sc == -INFINITY) continue;  // masked: contributes exp(-inf) = 0\n";
  in << "      if (sc > m) {\n";
  in << "        const " << ct << " r = exp(m - sc);\n";
  in << "        l *= r;\n        #pragma unroll\n        for (int d = 0; d < EV; ++d) acc[d] *= r;\n";
  in << "        m = sc;\n      }\n";
  in << "      const " << ct << " pj = exp(sc - m);\n      l += pj;\n";
  in << "      #pragma unroll\n      for (int d = 0; d < EV; ++d) acc[d] += pj * vs[jj][d];\n";
  in << "    }\n  }\n";
  // merge the four lanes of a row (adjacent threads of one warp)
  in << "  #pragma unroll\n  for (int o = 1; o < LANES; o <<= 1) {\n";
  in << "    const " << ct << " mo = __shfl_xor_sync(0xffffffffu, m, o);\n";
  in << "    const " << ct << " lo = __shfl_xor_sync(0xffffffffu, l, o);\n";
  in << "    const " << ct << " mn = mo > m ? mo : m;\n";
  in << "    const " << ct << " a = mn == -INFINITY ? 0 : exp(m - mn), c = mn == -INFINITY ? 0 : exp(mo - mn);\n";
  in << "    #pragma unroll\n    for (int d = 0; d < EV; ++d) {\n";
  in << "      const " << ct << " ao = __shfl_xor_sync(0xffffffffu, acc[d], o);\n";
  in << "      acc[d] = acc[d] * a + ao * c;\n    }\n";
  in << "    l = l * a + lo * c;\n    m = mn;\n  }\n";
  // A row with every key masked: PyTorch's math path gives NaN (softmax of all -inf).
  in << "  if (live) {\n    const " << ct << " inv = l > 0 ? 1 / l : static_cast<" << ct
     << ">(NAN);\n";
  // (a static index keeps acc[] in registers: lane l writes the features d = l mod 4)
  in << "    #pragma unroll\n    for (int d = 0; d < EV; ++d)\n      if (d % LANES == lane) "
     << store(out.dtype, "y0", offset_of(out, {"b", "h", "i", "d"}), "acc[d] * inv") << "\n  }\n";
  return finish(p, e, a.kernel(in.str(), 32));
}

/// True when attention step `e` can run on tensor cores (sdpa_wmma): 16-bit q, k, v and output
/// of one dtype, one compile-time head size that is a multiple of 16 up to 96 (the tiles of a
/// head size of 128 would not fit in 48 KiB of static shared memory).
bool wmma_attention(const ExternStep& e) {
  const TensorView &q = e.inputs[0], &k = e.inputs[1], &v = e.inputs[2], &o = e.outputs[0];
  if (q.dtype != DType::kBFloat16 && q.dtype != DType::kFloat16) return false;
  if (k.dtype != q.dtype || v.dtype != q.dtype || o.dtype != q.dtype) return false;
  if (!q.sizes[3].is_constant() || !v.sizes[3].is_constant()) return false;
  const int64_t E = q.sizes[3].constant();
  return E == v.sizes[3].constant() && E % 16 == 0 && E >= 16 && E <= 96;
}

/// Attention on tensor cores (WMMA, fp32 accumulation) for 16-bit inputs: a block takes 64
/// query rows of one (b, h), a warp 16 of them. Pass 1 computes S = Q·Kᵀ tile by tile (32
/// keys) and each row's maximum and exp-sum; pass 2 computes S again, P = exp(S·scale − max)
/// rounded to the input dtype (as flash attention does), and O += P·V in accumulator
/// fragments; O / sum is stored. Causal blocks stop at their last row's key.
std::string sdpa_wmma(const Program& p, const ExternStep& e) {
  const Attention a(e);
  const TensorView &q = a.q, &kk = a.k, &v = a.v, &out = a.out;
  const std::string &L = a.L, &S = a.S, &hk = a.hk, &hv = a.hv;
  const int64_t E = q.sizes[3].constant();
  const std::string wt = q.dtype == DType::kBFloat16 ? "__nv_bfloat16" : "__half";
  const std::string scale = a.scale(e, std::to_string(E));
  std::ostringstream in;
  in << "  using namespace nvcuda;\n";
  // 64 query rows, 32 keys per tile; the row pitches keep WMMA's 32-byte alignment
  in << "  constexpr int E = " << E << ", BQ = 64, BK = 32, EP = E + 8, KP = BK + 8, SP = BK + 4;\n";
  in << "  __shared__ __align__(32) uint16_t qs[BQ * EP];\n";
  in << "  __shared__ __align__(32) uint16_t ks[BK * EP];\n";
  in << "  __shared__ __align__(32) uint16_t vs[BK * EP];\n";
  in << "  __shared__ __align__(32) float ss[4][16 * SP];\n";
  in << "  __shared__ __align__(32) uint16_t ps[4][16 * KP];\n";
  in << "  const int64_t b = blockIdx.z, h = blockIdx.y;\n";
  in << "  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * BQ;\n";
  in << "  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;\n";
  in << "  const int r = lane / 2, half = lane % 2;  // the row and half-tile a lane scores\n";
  in << "  const int64_t i = i0 + w * 16 + r;\n";
  in << "  const " << a.ct << " scale = " << scale << ";\n";
  // Q tile (zero beyond L)
  in << "  for (int t = threadIdx.x; t < BQ * E; t += blockDim.x) {\n";
  in << "    const int rr = t / E, d = t % E;\n    const int64_t iq = i0 + rr;\n";
  in << "    qs[rr * EP + d] = iq < " << L << " ? "
     << "v0[" << offset_of(q, {"b", "h", "iq", "d"}) << "] : uint16_t(0);\n  }\n";
  in << "  __syncthreads();\n";
  in << "  wmma::fragment<wmma::matrix_a, 16, 16, 16, " << wt << ", wmma::row_major> qf[E / 16];\n";
  in << "  #pragma unroll\n  for (int c = 0; c < E / 16; ++c)\n";
  in << "    wmma::load_matrix_sync(qf[c], reinterpret_cast<const " << wt
     << "*>(qs + w * 16 * EP + c * 16), EP);\n";
  std::string kend = S;
  if (a.causal) kend = "(" + S + " < i0 + BQ ? " + S + " : i0 + BQ)";
  in << "  const int64_t kend = " << kend << ";\n";
  // loads a K (and V) tile; scores the warp's 16 rows into ss[w]
  auto tile = [&](bool with_v) {
    std::ostringstream t;
    t << "    __syncthreads();\n";
    t << "    for (int t = threadIdx.x; t < BK * E; t += blockDim.x) {\n";
    t << "      const int jj = t / E, d = t % E;\n      const int64_t j = k0 + jj;\n";
    t << "      const bool in = j < " << S << ";\n";
    t << "      ks[jj * EP + d] = in ? v1[" << offset_of(kk, {"b", hk, "j", "d"}) << "] : uint16_t(0);\n";
    if (with_v)
      t << "      vs[jj * EP + d] = in ? v2[" << offset_of(v, {"b", hv, "j", "d"})
        << "] : uint16_t(0);\n";
    t << "    }\n    __syncthreads();\n";
    t << "    #pragma unroll\n    for (int n = 0; n < BK / 16; ++n) {\n";
    t << "      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;\n";
    t << "      wmma::fill_fragment(sf, 0.0f);\n";
    t << "      #pragma unroll\n      for (int c = 0; c < E / 16; ++c) {\n";
    t << "        wmma::fragment<wmma::matrix_b, 16, 16, 16, " << wt << ", wmma::col_major> kf;\n";
    t << "        wmma::load_matrix_sync(kf, reinterpret_cast<const " << wt
      << "*>(ks + n * 16 * EP + c * 16), EP);\n";
    t << "        wmma::mma_sync(sf, qf[c], kf, sf);\n      }\n";
    t << "      wmma::store_matrix_sync(ss[w] + n * 16, sf, SP, wmma::mem_row_major);\n    }\n";
    t << "    __syncwarp();\n";
    return t.str();
  };
  // score of (i, j) with the scale and masking applied, into `sc`
  const std::string score = "        " + a.ct + " sc = ss[w][r * SP + jj] * scale;\n" +
                            "        if (j >= " + S + " || i >= " + L + ") sc = -INFINITY;\n" +
                            a.masking("sc", "        ");
  in << "  float m = -INFINITY, l = 0;\n";
  in << "  for (int64_t k0 = 0; k0 < kend; k0 += BK) {\n" << tile(false);
  in << "    for (int jj = half * (BK / 2); jj < (half + 1) * (BK / 2); ++jj) {\n";
  in << "      {\n        const int64_t j = k0 + jj;\n" << score;
  in << "        if (sc > m) {\n          l *= expf(m - sc);\n          m = sc;\n        }\n";
  in << "        if (sc != -INFINITY) l += expf(sc - m);\n      }\n    }\n  }\n";
  // combine the two lanes of a row
  in << "  {\n    const float mo = __shfl_xor_sync(0xffffffffu, m, 1), lo = __shfl_xor_sync(0xffffffffu, l, 1);\n";
  in << "    const float mn = mo > m ? mo : m;\n";
  in << "    l = mn == -INFINITY ? 0.0f : l * expf(m - mn) + lo * expf(mo - mn);\n    m = mn;\n  }\n";
  // pass 2
  in << "  wmma::fragment<wmma::accumulator, 16, 16, 16, float> of[E / 16];\n";
  in << "  #pragma unroll\n  for (int c = 0; c < E / 16; ++c) wmma::fill_fragment(of[c], 0.0f);\n";
  in << "  for (int64_t k0 = 0; k0 < kend; k0 += BK) {\n" << tile(true);
  in << "    for (int jj = half * (BK / 2); jj < (half + 1) * (BK / 2); ++jj) {\n";
  in << "      {\n        const int64_t j = k0 + jj;\n" << score;
  in << "        const float pv = sc == -INFINITY ? 0.0f : expf(sc - m);\n";
  in << "        ps[w][r * KP + jj] = " << to_storage(q.dtype, "pv") << ";\n      }\n    }\n";
  in << "    __syncwarp();\n";
  in << "    #pragma unroll\n    for (int c = 0; c < BK / 16; ++c) {\n";
  in << "      wmma::fragment<wmma::matrix_a, 16, 16, 16, " << wt << ", wmma::row_major> pf;\n";
  in << "      wmma::load_matrix_sync(pf, reinterpret_cast<const " << wt << "*>(ps[w] + c * 16), KP);\n";
  in << "      #pragma unroll\n      for (int n = 0; n < E / 16; ++n) {\n";
  in << "        wmma::fragment<wmma::matrix_b, 16, 16, 16, " << wt << ", wmma::row_major> vf;\n";
  in << "        wmma::load_matrix_sync(vf, reinterpret_cast<const " << wt
     << "*>(vs + c * 16 * EP + n * 16), EP);\n";
  in << "        wmma::mma_sync(of[n], pf, vf, of[n]);\n      }\n    }\n  }\n";
  // O / l through ss[w], 16 columns at a time; a row with every key masked gives NaN (PyTorch)
  in << "  const float inv = l > 0 ? 1.0f / l : NAN;\n";
  in << "  #pragma unroll\n  for (int n = 0; n < E / 16; ++n) {\n";
  in << "    __syncwarp();\n";
  in << "    wmma::store_matrix_sync(ss[w], of[n], SP, wmma::mem_row_major);\n    __syncwarp();\n";
  in << "    if (i < " << L << ")\n";
  in << "      for (int c = half * 8; c < half * 8 + 8; ++c) {\n";
  in << "        const int64_t d = n * 16 + c;\n";
  in << "        " << store(out.dtype, "y0", offset_of(out, {"b", "h", "i", "d"}),
                           "ss[w][r * SP + c] * inv") << "\n      }\n  }\n";
  return finish(p, e, a.kernel(in.str(), 64));
}

/// True when cuDNN's fused attention is a candidate for step `e`: q, k, v and the output of one
/// 16-bit dtype, and no mask or an additive one of that dtype (a boolean mask stays with
/// anvil's kernels). The backend checks the rest (strides, alignment, an engine) at run time.
bool cudnn_candidate(const ExternStep& e) {
  const Attention a(e);
  const DType t = a.q.dtype;
  if (t != DType::kBFloat16 && t != DType::kFloat16) return false;
  if (a.k.dtype != t || a.v.dtype != t || a.out.dtype != t) return false;
  if (a.mask && (a.mask->dtype != t || a.mask->sizes.size() > 4)) return false;
  return std::getenv("ANVIL_CUDA_NO_CUDNN_ATTENTION") == nullptr;
}

/// "x[0] = ...; x[1] = ...;" of four strides.
std::string four(const std::string& field, const std::vector<std::string>& v) {
  std::string out;
  for (size_t d = 0; d < 4; ++d)
    out += "  a." + field + "[" + std::to_string(d) + "] = " + v[d] + ";\n";
  return out;
}

std::vector<std::string> strides_of(const TensorView& t) {
  std::vector<std::string> v;
  for (const SymInt& s : t.strides) v.push_back(paren(s));
  return v;
}

std::string pointer_of(const Program& p, const TensorView& t) {
  return "reinterpret_cast<" + storage_type(t.dtype) + "*>(" + buffer_base(p, t.buffer) + ") + (" +
         t.offset.str() + ")";
}

/// `int NAME(const RunState& s)` filling AnvilAttentionArgs and calling anvil_attention (the
/// preamble), which runs cuDNN's attention or `NAME_own`.
std::string cudnn_dispatch(const Program& p, const ExternStep& e) {
  const Attention a(e);
  std::ostringstream body;
  body << "  static AnvilAttentionChoice choice;\n";
  body << "  AnvilAttentionArgs a{};\n";
  body << "  a.dtype = " << static_cast<int>(a.q.dtype) << ";\n";
  body << "  a.causal = " << (a.causal ? 1 : 0) << ";\n";
  body << "  a.batch = " << a.B << ";\n  a.heads = " << a.H << ";\n  a.kv_heads = "
       << paren(a.k.sizes[1]) << ";\n";
  body << "  a.len_q = " << a.L << ";\n  a.len_kv = " << a.S << ";\n";
  body << "  a.head_dim = " << paren(a.q.sizes[3]) << ";\n  a.head_dim_v = "
       << paren(a.v.sizes[3]) << ";\n";
  body << "  a.scale = static_cast<float>(" << a.scale(e, paren(a.q.sizes[3])) << ");\n";
  body << "  a.q = " << pointer_of(p, a.q) << ";\n";
  body << "  a.k = " << pointer_of(p, a.k) << ";\n";
  body << "  a.v = " << pointer_of(p, a.v) << ";\n";
  body << "  a.o = " << pointer_of(p, a.out) << ";\n";
  body << four("q_stride", strides_of(a.q)) << four("k_stride", strides_of(a.k))
       << four("v_stride", strides_of(a.v)) << four("o_stride", strides_of(a.out));
  if (a.mask) {
    // the mask's dims align with (b, h, i, j) from the right; missing ones broadcast
    std::vector<std::string> sizes(4, "1"), strides(4, "0");
    const size_t off = 4 - a.mask->sizes.size();
    for (size_t d = 0; d < a.mask->sizes.size(); ++d) {
      sizes[off + d] = paren(a.mask->sizes[d]);
      strides[off + d] = paren(a.mask->strides[d]);
    }
    body << "  a.bias = " << pointer_of(p, *a.mask) << ";\n";
    body << four("bias_size", sizes) << four("bias_stride", strides);
  }
  body << "  return anvil_attention(s, \"" << e.name << "\", &choice, &a, " << e.name
       << "_own);\n";
  std::ostringstream fn;
  fn << "// " << e.name << ": cuDNN's fused attention where it applies and is faster, else "
     << e.name << "_own\n";
  fn << "ANVIL_HIDDEN int " << e.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, body.str(), "s.sym", "  ") << body.str() << "}\n";
  return fn.str();
}

}  // namespace

std::string attention(const Program& p, const ExternStep& e) {
  const TensorView &q = e.inputs[0], &v = e.inputs[2];
  const bool fixed = q.sizes[3].is_constant() && v.sizes[3].is_constant() &&
                     q.sizes[3].constant() <= 128 && v.sizes[3].constant() <= 128;
  const bool cudnn = cudnn_candidate(e);
  ExternStep own = e;
  if (cudnn) own.name = e.name + "_own";
  std::string text;
  if (wmma_attention(own) && !std::getenv("ANVIL_CUDA_NO_WMMA_ATTENTION"))
    text = sdpa_wmma(p, own);
  else
    text = fixed ? sdpa_tiled(p, own) : sdpa(p, own);
  return cudnn ? text + "\n" + cudnn_dispatch(p, e) : text;
}

}  // namespace anvil::codegen::cuda::ext
