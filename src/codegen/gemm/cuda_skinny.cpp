// anvil's skinny CUDA GEMM (cuda_skinny.h): which configurations fit a problem, in what order.
#include "codegen/gemm/cuda_skinny.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "codegen/gemm/cutlass_candidates.h"  // nvcc_unit_options

namespace anvil::codegen::gemm {

namespace {

constexpr int kSms = 132;               // H100 / H200 SXM; the estimate only ranks configurations
constexpr int kSmemPerSm = 227 * 1024;  // usable shared memory per SM (sm_90)
constexpr int kMaxSmemPerCta = 227 * 1024;

// A relative time estimate: every SM streams its CTAs' weight rows at the same rate, a CTA costs
// two K steps of latency (pipeline fill, partial-tile sum and store), a cluster sum a half step
// more; A comes from the L2, a fraction of a weight byte each.
double estimate(const SkinnyConfig& c, int64_t m, int64_t n, int64_t k) {
  const int64_t bm = 16 * c.m_tiles;
  const int64_t ctas = (n + c.n_tile - 1) / c.n_tile * c.split_k * ((m + bm - 1) / bm);
  const int per_sm_slots = std::max(1, std::min(8, kSmemPerSm / (c.smem_bytes() + 1024)));
  const double per_sm = std::ceil(static_cast<double>(ctas) / kSms);
  const double k_steps = std::ceil(static_cast<double>((k + 127) / 128) / c.split_k);
  const double rows = static_cast<double>(c.n_tile) + 0.3 * static_cast<double>(bm);
  double t = per_sm * (k_steps * rows + 2.0 * c.n_tile + (c.split_k > 1 ? 0.5 * c.n_tile : 0.0));
  // Too few bytes in flight per SM to hide the memory latency (measured on an H200: at M 16 a
  // CTA per SM streams faster 6 stages deep than 4, and 4 than 3).
  const double resident = std::min<double>(per_sm, per_sm_slots);
  const double in_flight = resident * (c.stages - 1) * rows * 256.0;
  if (in_flight < 96 * 1024) t *= std::sqrt(96.0 * 1024 / in_flight);
  return t;
}

bool is_16bit(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }

}  // namespace

std::vector<SkinnyConfig> skinny_configs(const GemmProblem& p, int sm) {
  if (sm < 90 || !p.is_static()) return {};
  const int64_t m = *p.m, n = *p.n, k = *p.k;
  if (m <= 0 || n <= 0 || k <= 0 || m > 256 || k % 8 != 0) return {};
  if (!is_16bit(p.a_dtype) || p.b_dtype != p.a_dtype || p.out_dtype != p.a_dtype) return {};
  if (p.acc_dtype != DType::kFloat32 || p.batch != 1) return {};
  if (p.trans_a || !p.trans_b || p.beta != 0.0) return {};
  if (p.bias != GemmBias::kNone && p.bias != GemmBias::kPerColumn) return {};
  if (p.align_a < 8 || p.align_b < 8) return {};
  if ((p.lda && *p.lda % 8 != 0) || (p.ldb && *p.ldb % 8 != 0)) return {};
  const int m_tiles = m <= 16 ? 1 : m <= 32 ? 2 : 4;
  const int64_t k_steps = (k + 127) / 128;
  std::vector<SkinnyConfig> out;
  for (int warps : {4, 8})
    for (int n_tile : {64, 128})
      for (int warps_n : {1, 2, 4, 8}) {
        const int warp_n = n_tile / warps_n, warps_k = warps / warps_n;
        // 16 to 64 columns per warp (m_tiles · warp_n / 2 accumulator registers per thread); each
        // K warp reads whole groups of 4 chunks of a 128-wide K step
        if (warps_k < 1 || warps_k > 4 || warps_n * warps_k != warps) continue;
        if (warp_n < 16 || warp_n > 64 || m_tiles * warp_n / 2 > 128) continue;
        for (int split : {1, 2, 4, 8}) {
          if (split > 1 && k_steps < 2 * split) continue;  // at least two K steps per CTA
          if ((16 * m_tiles) % split != 0) continue;       // the cluster sum splits rows evenly
          for (int stages : {3, 4, 6}) {
            SkinnyConfig c;
            c.dtype = p.a_dtype;
            c.m_tiles = m_tiles;
            c.n_tile = n_tile;
            c.warps = warps;
            c.warps_n = warps_n;
            c.split_k = split;
            c.stages = stages;
            c.bias = p.bias;
            c.activation = p.activation;
            if (c.smem_bytes() > kMaxSmemPerCta) continue;
            out.push_back(c);
          }
        }
      }
  std::stable_sort(out.begin(), out.end(), [&](const SkinnyConfig& a, const SkinnyConfig& b) {
    return estimate(a, m, n, k) < estimate(b, m, n, k);
  });
  // Each shape (tile, warp split, K split) once, at its best-estimated depth, before any other
  // depth: a capped tuning run then sees different shapes, not one shape at three depths.
  std::vector<SkinnyConfig> first, rest;
  for (const SkinnyConfig& c : out) {
    const bool seen = std::any_of(first.begin(), first.end(), [&](const SkinnyConfig& f) {
      return f.n_tile == c.n_tile && f.warps == c.warps && f.warps_n == c.warps_n &&
             f.split_k == c.split_k;
    });
    (seen ? rest : first).push_back(c);
  }
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

std::vector<GemmCandidate> skinny_candidates(const GemmProblem& p, int sm) {
  std::vector<GemmCandidate> out;
  for (const SkinnyConfig& c : skinny_configs(p, sm)) {
    GemmCandidate g;
    g.name = skinny_config_name(c);
    g.backend = GemmBackend::kOwn;
    g.entry = g.name;
    g.source = render_skinny_source(c, g.entry);
    g.fuses_bias = c.bias != GemmBias::kNone;
    g.fuses_activation = c.activation != GemmActivation::kNone;
    out.push_back(std::move(g));
  }
  return out;
}

bool is_skinny_name(const std::string& name) { return name.rfind("anvil_skinny_", 0) == 0; }

bool is_skinny_candidate(const GemmCandidate& c) {
  return c.backend == GemmBackend::kOwn && is_skinny_name(c.name);
}

std::vector<std::string> skinny_nvcc_flags() {
  // sm_90a machine code alone: "-arch=sm_90a" also runs a compute_90 pass (PTX nobody loads)
  return {"-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-DNDEBUG",
          "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-cudart", "shared", "-w"};
}

ToolchainOptions skinny_toolchain_options() { return nvcc_unit_options(skinny_nvcc_flags()); }

}  // namespace anvil::codegen::gemm
