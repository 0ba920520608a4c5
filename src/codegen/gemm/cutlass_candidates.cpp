// CUTLASS sm90 candidate enumeration (B.4.4 a-g; 3.x kernels, and the 2.x 3xTF32 ones for fp32),
// configuration names, header discovery.
#include "codegen/gemm/cutlass_candidates.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "codegen/gemm/cuda_skinny.h"

namespace anvil::codegen::gemm {

namespace fs = std::filesystem;

namespace {

const char* dtype_token(DType t) {
  switch (t) {
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "f16";
    case DType::kFloat32: return "f32";
    case DType::kInt8: return "s8";
    case DType::kInt32: return "s32";
    default: return "?";
  }
}

struct Tile {
  int m, n, k;
};

bool is_16bit(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }

// Activations CUTLASS's sm90 fusion operations express (cutlass::epilogue::thread::*).
bool fusable_activation(GemmActivation a) {
  return a == GemmActivation::kRelu || a == GemmActivation::kGeluErf ||
         a == GemmActivation::kGeluTanh || a == GemmActivation::kSilu;
}

const char* const kFastF32Prefix = "cutlass2x_sm80_tensorop_3xtf32_gemm_";

/// The fast_f32 (3xTF32) configurations of an fp32 problem (cutlass_candidates.h).
std::vector<CutlassConfig> fast_f32_configs(const GemmProblem& p) {
  // One matrix (device::Gemm); 16-byte aligned rows of every operand (4 floats).
  if (p.batch != 1 || p.acc_dtype != DType::kFloat32) return {};
  if (p.align_a < 4 || p.align_b < 4 || p.align_c < 4) return {};
  if (p.bias != GemmBias::kNone && p.bias != GemmBias::kFull) return {};  // no fused vector
  if (p.activation != GemmActivation::kNone) return {};
  CutlassConfig base;
  base.fast_f32 = true;
  base.a = base.b = base.acc = base.d = DType::kFloat32;
  base.a_row_major = !p.trans_a;
  base.b_row_major = !p.trans_b;
  base.align_a = base.align_b = base.align_c = 4;
  base.tma = base.tma_epilogue = false;
  base.has_source = p.beta != 0.0 || p.bias == GemmBias::kFull;
  // Tile, warp tile, stages: on an H200 (bench/probe/fp32_gemm_probe.cu) 128x64x32 with 64x32
  // warps ran 59-70 TFLOP/s from M 512 (cuBLASLt's fp32 GEMM 37-51), 64x64x32 tied cuBLASLt at
  // M 256 N 1024; warp tiles of 64x64 spill (8-25 TFLOP/s).
  struct Shape {
    int tm, tn, tk, wm, wn, wk, stages;
  };
  std::vector<Shape> shapes = {{128, 64, 32, 64, 32, 32, 4},
                               {64, 64, 32, 32, 32, 32, 4},
                               {64, 128, 32, 32, 64, 32, 3},
                               {128, 128, 32, 64, 32, 32, 3}};
  if (*p.m <= 256) std::swap(shapes[0], shapes[1]);
  std::vector<CutlassConfig> out;
  for (const Shape& s : shapes) {
    CutlassConfig c = base;
    c.tile_m = s.tm, c.tile_n = s.tn, c.tile_k = s.tk;
    c.warp_m = s.wm, c.warp_n = s.wn, c.warp_k = s.wk;
    c.stages = s.stages;
    out.push_back(c);
  }
  return out;
}

}  // namespace

bool is_fast_f32_name(const std::string& name) { return name.rfind(kFastF32Prefix, 0) == 0; }

bool has_library_fallback(const std::string& name) {
  return is_skinny_name(name) || is_fast_f32_name(name);
}

std::string cutlass_config_name(const CutlassConfig& c) {
  // e.g. cutlass2x_sm80_tensorop_3xtf32_gemm_f32_f32_f32_f32_128x64x32_64x32x32_4_tnt_align4
  if (c.fast_f32) {
    std::string s = kFastF32Prefix;
    s += "f32_f32_f32_f32_";
    s += std::to_string(c.tile_m) + "x" + std::to_string(c.tile_n) + "x" +
         std::to_string(c.tile_k) + "_";
    s += std::to_string(c.warp_m) + "x" + std::to_string(c.warp_n) + "x" +
         std::to_string(c.warp_k) + "_" + std::to_string(c.stages) + "_";
    s += c.a_row_major ? "t" : "n";
    s += c.b_row_major ? "t" : "n";
    s += "t_align" + std::to_string(c.align_a);
    return s;
  }
  std::string s = "cutlass3x_sm90_tensorop_gemm_";
  s += dtype_token(c.a);
  s += "_";
  s += dtype_token(c.b);
  s += "_";
  s += dtype_token(c.acc);
  s += "_";
  s += c.has_source ? dtype_token(c.d) : "void";
  s += "_";
  s += dtype_token(c.d);
  s += "_" + std::to_string(c.tile_m) + "x" + std::to_string(c.tile_n) + "x" +
       std::to_string(c.tile_k);
  s += "_" + std::to_string(c.cluster_m) + "x" + std::to_string(c.cluster_n) + "x1";
  s += "_0_";  // stage count: 0 = as many as shared memory holds (StageCountAutoCarveout)
  // CUTLASS's layout letters: t = row-major, n = column-major; A, B, then C/D (always row-major).
  s += c.a_row_major ? "t" : "n";
  s += c.b_row_major ? "t" : "n";
  s += "t";
  s += "_align" + std::to_string(c.align_a);
  if (c.b != c.a) s += "x" + std::to_string(c.align_b);  // mixed input: B's alignment differs
  if (!c.tma) s += "_cpasync";
  switch (c.schedule) {
    case CutlassSchedule::kCooperative: s += "_warpspecialized_cooperative"; break;
    case CutlassSchedule::kPingpong: s += "_warpspecialized_pingpong"; break;
    case CutlassSchedule::kStreamK: s += "_stream_k_warpspecialized_cooperative"; break;
  }
  s += c.tma_epilogue ? "_epi_tma" : "_epi_nosmem";
  // The fused epilogue (two GEMMs of one shape may differ only in it: distinct entry names).
  if (c.bias == GemmBias::kPerColumn) s += "_bias_col";
  if (c.bias == GemmBias::kPerRow) s += "_bias_row";
  switch (c.activation) {
    case GemmActivation::kRelu: s += "_relu"; break;
    case GemmActivation::kGeluErf: s += "_gelu_erf"; break;
    case GemmActivation::kGeluTanh: s += "_gelu_tanh"; break;
    case GemmActivation::kSilu: s += "_silu"; break;
    default: break;
  }
  if (c.batch > 1) s += "_batched";
  return s;
}

std::vector<CutlassConfig> cutlass_configs(const GemmProblem& p, int sm, const CutlassOptions& options) {
  std::vector<CutlassConfig> out;
  // B.4.3 / B.4.4 b: 3.x GemmUniversal kernels built for sm_90a only run on compute capability 9.0.
  if (sm != 90) return out;
  // B.4.3: static shapes, every dim non-zero.
  if (!p.is_static() || *p.m <= 0 || *p.n <= 0 || *p.k <= 0 || p.batch < 1) return out;

  CutlassConfig base;
  base.batch = p.batch;
  base.a = p.a_dtype;
  base.b = p.b_dtype;
  base.d = p.out_dtype;
  base.a_row_major = !p.trans_a;
  base.b_row_major = !p.trans_b;
  std::vector<Tile> tiles;
  const bool mixed = is_16bit(p.a_dtype) && p.b_dtype == DType::kInt8 && p.out_dtype == p.a_dtype;
  if (p.op == GemmOp::kMixedMm && !mixed) return out;
  // d. dtypes (B.4.5 accumulators).
  if (mixed) {
    // int8 B converted to A's type in the mainloop (see the header): fp32 accumulation only.
    if (p.acc_dtype != DType::kFloat32) return out;
    base.acc = DType::kFloat32;
    // e. the converted operand must be K-major (B column-major); A row-major (K-major too).
    if (p.trans_a || !p.trans_b) return out;
    // f. the TMA mainloop: 16-byte rows of A (8 elements) and B (16 int8s); C / D rows of 16
    // bytes take the TMA epilogue, else the non-TMA one at C's alignment.
    if (p.align_a < 8 || p.align_b < 16) return out;
    base.align_a = 8;
    base.align_b = 16;
    base.align_c = p.align_c >= 8 ? 8 : p.align_c >= 4 ? 4 : p.align_c >= 2 ? 2 : 1;
    base.tma_epilogue = base.align_c == 8;
    // The kernel's tiles are of the transposed problem (N x M); K tile 64 (128 bytes of A).
    tiles = {{128, 128, 64}, {64, 128, 64}, {128, 256, 64}};
  } else if (is_16bit(p.a_dtype) && p.b_dtype == p.a_dtype && p.out_dtype == p.a_dtype) {
    if (p.acc_dtype == DType::kFloat16 && p.a_dtype == DType::kFloat16) {
      base.acc = DType::kFloat16;
    } else if (p.acc_dtype == DType::kFloat32) {
      base.acc = DType::kFloat32;
    } else {
      return out;
    }
    // f. TMA needs 16-byte aligned rows: 8 elements of every operand. Below that, the cp.async
    // kernels: A and B aligned to 4 or 2 elements (the largest both allow), C to 8, 4, 2 or 1.
    if (p.align_a >= 8 && p.align_b >= 8 && p.align_c >= 8) {
      base.align_a = base.align_b = base.align_c = 8;
      tiles = {{64, 128, 64}, {128, 128, 64}, {128, 256, 64}, {256, 128, 64}};
      // Skinny problems (a few rows, e.g. a batch of tokens against a weight): a 64 x 64 tile
      // puts twice the CTAs of 64 x 128 on the weight's columns.
      if (*p.m <= 64) tiles.insert(tiles.begin(), Tile{64, 64, 64});
    } else {
      const int ab = std::min({p.align_a, p.align_b, 8});
      if (ab < 2) return out;
      base.tma = base.tma_epilogue = false;
      base.align_a = base.align_b = ab >= 8 ? 8 : ab >= 4 ? 4 : 2;
      base.align_c = p.align_c >= 8 ? 8 : p.align_c >= 4 ? 4 : p.align_c >= 2 ? 2 : 1;
      tiles = {{64, 128, 64}, {128, 128, 64}};
    }
  } else if (p.a_dtype == DType::kInt8 && p.b_dtype == DType::kInt8 &&
             p.out_dtype == DType::kInt32) {
    if (p.acc_dtype != DType::kInt32) return out;
    base.acc = DType::kInt32;
    // e. int8 tensor cores read both operands K-major: A row-major, B column-major; K % 16.
    if (p.trans_a || !p.trans_b || *p.k % 16 != 0) return out;
    if (p.align_a < 16 || p.align_b < 16 || p.align_c < 4) return out;
    base.align_a = base.align_b = 16;
    base.align_c = 4;
    tiles = {{64, 128, 128}, {128, 128, 128}, {128, 256, 128}, {256, 128, 128}};
  } else if (p.a_dtype == DType::kFloat32 && p.b_dtype == DType::kFloat32 &&
             p.out_dtype == DType::kFloat32) {
    // 1xTF32 (allow_tf32) is not generated; fp32 accuracy through the 3xTF32 kernels.
    return options.fast_f32 ? fast_f32_configs(p) : out;
  } else {
    return out;  // fp64 and other dtypes have no tensor-core kernels here
  }

  // Epilogue: bias and activation fused where CUTLASS's fusion operations express them.
  const bool integer = base.acc == DType::kInt32;
  base.has_source = p.beta != 0.0 || p.bias == GemmBias::kFull;
  if (!integer && !mixed && base.tma) {  // the non-TMA epilogue applies alpha and beta only
    if (p.bias == GemmBias::kPerColumn) base.bias = GemmBias::kPerColumn;
    // The per-row bias is read in vectors of 8 along M.
    if (p.bias == GemmBias::kPerRow && *p.m % 8 == 0) base.bias = GemmBias::kPerRow;
    if (fusable_activation(p.activation)) base.activation = p.activation;
  }

  const std::pair<int, int> clusters[] = {{1, 1}, {2, 1}, {1, 2}};
  const CutlassSchedule schedules[] = {CutlassSchedule::kCooperative, CutlassSchedule::kPingpong,
                                       CutlassSchedule::kStreamK};
  for (const Tile& t : tiles) {
    for (auto [cm, cn] : clusters) {
      for (CutlassSchedule s : schedules) {
        // Cooperative kernels split the tile's M between two consumer warp groups (M % 128);
        // a ping-pong warp group holds a whole tile's accumulators (M <= 128, N <= 128).
        if (s != CutlassSchedule::kPingpong && t.m % 128 != 0) continue;
        if (s == CutlassSchedule::kPingpong && (t.m > 128 || t.n > 128)) continue;
        // cp.async kernels: no clusters, no stream-K.
        if (!base.tma && (cm != 1 || cn != 1 || s == CutlassSchedule::kStreamK)) continue;
        // Mixed input: single-CTA clusters, data-parallel tiles (multicast and stream-K untested).
        if (mixed && (cm != 1 || cn != 1 || s == CutlassSchedule::kStreamK)) continue;
        CutlassConfig c = base;
        c.tile_m = t.m;
        c.tile_n = t.n;
        c.tile_k = t.k;
        c.cluster_m = cm;
        c.cluster_n = cn;
        c.schedule = s;
        out.push_back(c);
      }
    }
  }
  // Skinny problems are bound by reading B: the kernels that spread it over the most SMs come
  // first, so that `--autotune fast` (the first four) times them: stream-K on 128 x 128 tiles
  // (the K loop split across SMs), then 64-row ping-pong tiles, single-CTA clusters.
  if (*p.m <= 64 && !mixed) {
    auto rank = [](const CutlassConfig& c) {
      if (c.cluster_m != 1 || c.cluster_n != 1) return 9;
      const bool sk = c.schedule == CutlassSchedule::kStreamK;
      const bool pp = c.schedule == CutlassSchedule::kPingpong;
      if (sk && c.tile_m == 128 && c.tile_n == 128) return 0;
      if (pp && c.tile_m == 64 && c.tile_n == 64) return 1;
      if (pp && c.tile_m == 64 && c.tile_n == 128) return 2;
      if (sk && c.tile_m == 128 && c.tile_n == 256) return 3;
      return 8;
    };
    std::stable_sort(out.begin(), out.end(), [&](const CutlassConfig& a, const CutlassConfig& b) {
      return rank(a) < rank(b);
    });
  } else if (!mixed && base.tma && !integer) {
    // Other 16-bit problems (M > 64): the configurations that won `--autotune max` on an H200
    // (bf16, session 34) come first, so that `fast` times them. With at least 256 tiles of
    // 128 x 256 (about two waves on 132 SMs: 4096³, 8192³): 128 x 256 tiles on 2 x 1 clusters
    // (stream-K, then data-parallel), 256 x 128 on 1 x 2, 128 x 128 ping-pong on 1 x 2; with
    // fewer (2048³ and smaller): 128 x 128 ping-pong on 1 x 2 first, then 64 x 128 ping-pong
    // (the best at 1024³).
    const int64_t big_tiles = (*p.m + 127) / 128 * ((*p.n + 255) / 256) * p.batch;
    const bool big = big_tiles >= 256;
    auto is = [](const CutlassConfig& c, int tm, int tn, int cm, int cn, CutlassSchedule s) {
      return c.tile_m == tm && c.tile_n == tn && c.cluster_m == cm && c.cluster_n == cn &&
             c.schedule == s;
    };
    const CutlassSchedule co = CutlassSchedule::kCooperative, pp = CutlassSchedule::kPingpong,
                          sk = CutlassSchedule::kStreamK;
    auto rank = [&](const CutlassConfig& c) {
      if (big) {
        if (is(c, 128, 256, 2, 1, sk)) return 0;
        if (is(c, 128, 256, 2, 1, co)) return 1;
        if (is(c, 256, 128, 1, 2, co)) return 2;
        if (is(c, 128, 128, 1, 2, pp)) return 3;
      } else {
        if (is(c, 128, 128, 1, 2, pp)) return 0;
        if (is(c, 64, 128, 1, 1, pp)) return 1;
        if (is(c, 128, 128, 1, 1, sk)) return 2;
        if (is(c, 128, 256, 2, 1, sk)) return 3;
      }
      return 8;
    };
    std::stable_sort(out.begin(), out.end(), [&](const CutlassConfig& a, const CutlassConfig& b) {
      return rank(a) < rank(b);
    });
  }
  return out;
}

std::vector<GemmCandidate> cutlass_candidates(const GemmProblem& p, int sm, const CutlassOptions& options) {
  std::vector<GemmCandidate> out;
  for (const CutlassConfig& c : cutlass_configs(p, sm, options)) {
    GemmCandidate g;
    g.name = cutlass_config_name(c);
    g.backend = GemmBackend::kCutlass;
    g.entry = "anvil_" + g.name;
    g.source = render_cutlass_source(c, g.entry);
    g.fuses_bias = c.bias != GemmBias::kNone;
    g.fuses_activation = c.activation != GemmActivation::kNone;
    g.fuses_residual = c.fast_f32;
    out.push_back(std::move(g));
  }
  return out;
}

std::optional<CutlassHeaders> find_cutlass_headers(std::string* why) {
  // A CUTLASS tree (include/, tools/util/include/) or the folder above the wheel's one.
  auto probe = [](const fs::path& dir) -> std::optional<CutlassHeaders> {
    std::error_code ec;
    for (const fs::path& root : {dir, dir / "cutlass_library" / "source"}) {
      if (fs::exists(root / "include" / "cutlass" / "cutlass.h", ec) &&
          fs::exists(root / "include" / "cute" / "tensor.hpp", ec)) {
        return CutlassHeaders{root.string(), (root / "include").string(),
                              (root / "tools" / "util" / "include").string()};
      }
    }
    return std::nullopt;
  };
  std::string looked;
  if (const char* d = std::getenv("ANVIL_CUTLASS_DIR"); d && *d) {
    if (auto h = probe(d)) return h;
    looked = std::string("ANVIL_CUTLASS_DIR=") + d + " has no include/cutlass/cutlass.h";
  } else {
#ifdef ANVIL_CUTLASS_DEFAULT_DIR
    if (auto h = probe(ANVIL_CUTLASS_DEFAULT_DIR)) return h;
    looked = std::string("no include/cutlass/cutlass.h under ") + ANVIL_CUTLASS_DEFAULT_DIR +
             " (the build's default; set ANVIL_CUTLASS_DIR or run scripts/fetch_cutlass_headers.sh)";
#else
    looked = "ANVIL_CUTLASS_DIR is not set and the build found no CUTLASS (run "
             "scripts/fetch_cutlass_headers.sh and reconfigure)";
#endif
  }
  if (why) *why = looked;
  return std::nullopt;
}

std::vector<std::string> cutlass_nvcc_flags(const CutlassHeaders& h) {
  // Hidden by default (the entries say otherwise): CUTLASS's templates then export nothing, and a
  // package holding them can be unloaded (default-visibility inline statics are STB_GNU_UNIQUE,
  // which glibc never unloads). sm_90a machine code alone: "-arch=sm_90a" also ran a compute_90
  // pass (its PTX never loaded: the sm90 kernels are empty there), 3 of 11 s of a unit.
  return {"-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-DNDEBUG",
          "--expt-relaxed-constexpr",
          "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-cudart", "shared", "-w",
          "-isystem", h.include, "-isystem", h.util_include};
}

ToolchainOptions nvcc_unit_options(std::vector<std::string> compile_flags) {
  ToolchainOptions o;
  o.compiler = "/usr/local/cuda/bin/nvcc";
  if (const char* e = std::getenv("CUDA_HOME"); e && *e) o.compiler = std::string(e) + "/bin/nvcc";
  if (const char* e = std::getenv("ANVIL_NVCC"); e && *e) o.compiler = e;
  o.target = "cuda-sm90";
  o.opt_level = "-O3";
  o.compile_flags = std::move(compile_flags);
  o.link_flags = {"-shared", "-Xcompiler", "-fPIC", "-cudart", "shared"};
  o.progress = ProgressMode::kQuiet;
  return o;
}

ToolchainOptions cutlass_toolchain_options(const CutlassHeaders& h) {
  return nvcc_unit_options(cutlass_nvcc_flags(h));
}

std::vector<GemmCandidate> cutlass_candidates_if_available(const GemmProblem& p, int sm,
                                                           std::string* warning,
                                                           const CutlassOptions& options) {
  std::string why;
  if (!find_cutlass_headers(&why)) {
    if (warning) *warning = "CUTLASS headers not found (" + why + "): CUTLASS candidates skipped";
    return {};
  }
  return cutlass_candidates(p, sm, options);
}

}  // namespace anvil::codegen::gemm
