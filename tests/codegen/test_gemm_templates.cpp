// anvil's CPU GEMM templates (codegen/gemm/cpu_templates.h): the candidate list (ISAs, dtypes,
// names, order) and, compiled with the system compiler, a seeded sample of the kernels against a
// naive double-precision reference on edge and random shapes, every layout, the epilogues,
// thread-count independence and bad calls. The sample is compiled as ONE translation unit.
// ANVIL_GEMM_SWEEP=full: every candidate of every dtype on more shapes
// (bench/gemm_templates_sweep.sh).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "codegen/gemm/cpu_templates.h"
#include "codegen/toolchain.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/rt_api.h"

namespace anvil::codegen::gemm {
namespace {

const std::vector<std::string> kAllIsas = {"avx2", "fma", "avx512f", "avx512bw", "avx512bf16"};

GemmProblem problem(DType in, DType out, bool ta = false, bool tb = false) {
  GemmProblem p;
  p.a_dtype = p.b_dtype = in;
  p.out_dtype = out;
  p.trans_a = ta;
  p.trans_b = tb;
  return p;
}

std::vector<std::string> names(const std::vector<GemmCandidate>& c) {
  std::vector<std::string> out;
  for (const auto& x : c) out.push_back(x.name);
  return out;
}

bool sweep_full() {
  const char* s = std::getenv("ANVIL_GEMM_SWEEP");
  return s && std::string(s) == "full";
}

// ---------------------------------------------------------------------------------------------
// The list.

TEST(GemmTemplates, Fp32ListIsDeterministicAndWellFormed) {
  const auto a = cpu_template_candidates(problem(DType::kFloat32, DType::kFloat32), kAllIsas);
  const auto b = cpu_template_candidates(problem(DType::kFloat32, DType::kFloat32), kAllIsas);
  ASSERT_EQ(names(a), names(b));
  EXPECT_EQ(a.size(), cpu_template_configs(CpuGemmTypes::kF32, CpuIsa::kAvx512).size() +
                          cpu_template_configs(CpuGemmTypes::kF32, CpuIsa::kAvx2).size());
  EXPECT_EQ(a.front().name, "own_f32_avx512_mr6_nr32_kc256_mc144_nc1024_nn");
  std::set<std::string> seen_names, seen_entries;
  bool avx2_seen = false;
  const std::set<std::string> allowed = {"\"anvil/anvil_rt.h\"",
                                         "<immintrin.h>",
                                         "<atomic>",
                                         "<cmath>",
                                         "<cstdint>",
                                         "<cstdio>",
                                         "<cstdlib>",
                                         "<cstring>"};
  for (size_t i = 0; i < a.size(); ++i) {
    const GemmCandidate& c = a[i];
    EXPECT_EQ(c.source, b[i].source);
    EXPECT_EQ(c.backend, GemmBackend::kOwn);
    EXPECT_TRUE(c.fuses_bias && c.fuses_activation);
    EXPECT_EQ(c.entry, "anvil_gemm_" + c.name);
    EXPECT_TRUE(seen_names.insert(c.name).second) << c.name;
    EXPECT_TRUE(seen_entries.insert(c.entry).second) << c.entry;
    EXPECT_EQ(c.name.rfind("own_f32_", 0), 0u) << c.name;
    EXPECT_EQ(c.name.substr(c.name.size() - 3), "_nn");
    const bool avx2 = c.name.find("_avx2_") != std::string::npos;
    EXPECT_TRUE(avx2 || c.name.find("_avx512_") != std::string::npos) << c.name;
    EXPECT_FALSE(avx2_seen && !avx2) << "avx512 after avx2: " << c.name;  // widest ISA first
    avx2_seen = avx2_seen || avx2;
    EXPECT_NE(c.source.find("extern \"C\" int " + c.entry + "(const AnvilRtApi* api"),
              std::string::npos);
    size_t pos = 0;
    while ((pos = c.source.find("#include ", pos)) != std::string::npos) {
      const size_t end = c.source.find('\n', pos);
      EXPECT_TRUE(allowed.count(c.source.substr(pos + 9, end - pos - 9)))
          << c.source.substr(pos, end - pos);
      pos = end;
    }
  }
  EXPECT_TRUE(avx2_seen);
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kAvx512Bf16}) {
    const size_t n = cpu_template_configs(CpuGemmTypes::kBf16, isa).size();
    EXPECT_TRUE(n >= 3 && n <= 30) << cpu_isa_name(isa) << " " << n;
  }
  EXPECT_GE(cpu_template_configs(CpuGemmTypes::kF32, CpuIsa::kAvx512).size(), 10u);
  EXPECT_GE(cpu_template_configs(CpuGemmTypes::kF32, CpuIsa::kAvx2).size(), 10u);
}

TEST(GemmTemplates, OnlyIsasTheFeaturesHave) {
  const auto f32 = problem(DType::kFloat32, DType::kFloat32);
  const auto avx2 = cpu_template_candidates(f32, {"sse4.2", "avx", "avx2", "fma"});
  ASSERT_EQ(avx2.size(), cpu_template_configs(CpuGemmTypes::kF32, CpuIsa::kAvx2).size());
  for (const auto& c : avx2) EXPECT_EQ(c.name.find("avx512"), std::string::npos) << c.name;
  EXPECT_TRUE(cpu_template_candidates(f32, {}).empty());
  EXPECT_TRUE(cpu_template_candidates(f32, {"bogus", "neon"}).empty());
  EXPECT_TRUE(cpu_template_candidates(f32, {"avx2"}).empty());  // no fma
  // bf16 without avx512bf16: only the widening kernels.
  const auto bf = cpu_template_candidates(problem(DType::kBFloat16, DType::kBFloat16),
                                          {"avx2", "fma", "avx512f", "avx512bw"});
  ASSERT_FALSE(bf.empty());
  for (const auto& c : bf) {
    EXPECT_EQ(c.name.find("avx512bf16"), std::string::npos) << c.name;
    EXPECT_EQ(c.name.rfind("own_bf16_", 0), 0u) << c.name;
  }
  const auto bf_dot =
      cpu_template_candidates(problem(DType::kBFloat16, DType::kFloat32, true, true), kAllIsas);
  ASSERT_FALSE(bf_dot.empty());
  EXPECT_EQ(bf_dot.front().name, "own_bf16f32_avx512bf16_mr6_nr32_kc512_mc144_nc1024_tt");
  const std::string tn =
      cpu_template_candidates(problem(DType::kFloat32, DType::kFloat32, true, false), kAllIsas)
          .front()
          .name;
  EXPECT_EQ(tn.substr(tn.size() - 3), "_tn");
}

TEST(GemmTemplates, Int8NeedsVnni) {
  const auto c = cpu_template_candidates(problem(DType::kInt8, DType::kInt32, false, true),
                                         {"avx2", "fma", "avx512f", "avx512bw", "avx512vnni"});
  ASSERT_EQ(c.size(), cpu_template_configs(CpuGemmTypes::kI8I32, CpuIsa::kAvx512Vnni).size());
  ASSERT_GE(c.size(), 10u);
  for (const auto& x : c) {
    EXPECT_EQ(x.name.rfind("own_i8i32_avx512vnni_", 0), 0u) << x.name;
    EXPECT_EQ(x.name.substr(x.name.size() - 3), "_nt");
    EXPECT_FALSE(x.fuses_bias || x.fuses_activation) << x.name;
  }
  EXPECT_TRUE(cpu_template_configs(CpuGemmTypes::kF32, CpuIsa::kAvx512Vnni).empty());
  EXPECT_TRUE(cpu_template_configs(CpuGemmTypes::kI8I32, CpuIsa::kAvx512).empty());
}

TEST(GemmTemplates, DtypesWithoutTemplatesGiveNothing) {
  EXPECT_TRUE(cpu_template_candidates(problem(DType::kFloat64, DType::kFloat64), kAllIsas).empty());
  EXPECT_TRUE(cpu_template_candidates(problem(DType::kInt8, DType::kInt32), kAllIsas).empty());
  EXPECT_TRUE(cpu_template_candidates(problem(DType::kInt8, DType::kInt8),
                                      {"avx2", "fma", "avx512f", "avx512bw", "avx512vnni"})
                  .empty());
  EXPECT_TRUE(cpu_template_candidates(problem(DType::kFloat16, DType::kFloat16), kAllIsas).empty());
  GemmProblem mixed = problem(DType::kFloat32, DType::kFloat32);
  mixed.b_dtype = DType::kBFloat16;
  EXPECT_TRUE(cpu_template_candidates(mixed, kAllIsas).empty());
}

TEST(GemmTemplates, InvalidConfigurationIsAnError) {
  CpuTemplateConfig c;
  c.nr = 24;  // not a multiple of 16 on avx512
  EXPECT_THROW(cpu_template_source(c), Error);
  c = CpuTemplateConfig{};
  c.mc = 100;  // not a multiple of mr = 6
  try {
    cpu_template_source(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mc"), std::string::npos) << e.what();
  }
  c = CpuTemplateConfig{};
  c.isa = CpuIsa::kAvx512Bf16;  // fp32 inputs
  EXPECT_THROW(cpu_template_source(c), Error);
}

// ---------------------------------------------------------------------------------------------
// Running the kernels.

uint16_t to_bf16(float f) {  // round to nearest even (the test values are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The api table of the tests: parallel_for over `g_threads` std::threads (contiguous chunks).
int g_threads = 1;
// Set: check_case runs the kernel through the runtime's table with this run context and B
// marked constant (AnvilGemmCall::b_constant), twice: the second call reads the kept pack.
runtime::RunContext* g_run_ctx = nullptr;
std::string g_error;
void test_parallel_for(int64_t begin, int64_t end, int64_t, void (*fn)(void*, int64_t, int64_t),
                       void* ctx) {
  const int64_t n = end - begin, t_count = std::min<int64_t>(g_threads, n);
  if (t_count <= 1) return n > 0 ? fn(ctx, begin, end) : void();
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < t_count; ++t)
    threads.emplace_back([=] { fn(ctx, begin + n * t / t_count, begin + n * (t + 1) / t_count); });
  for (auto& th : threads) th.join();
}
void test_set_error(void*, const char* message) { g_error = message; }
const AnvilRtApi* test_api() {
  static const AnvilRtApi api = [] {
    AnvilRtApi a{};
    a.parallel_for = test_parallel_for;
    a.set_error = test_set_error;
    return a;
  }();
  return &api;
}

using EntryFn = int (*)(const AnvilRtApi*, void*, const AnvilGemmCall*);
struct Kernel {
  std::string name;
  CpuGemmTypes types;
  EntryFn fn;
};

CpuGemmTypes types_of(const std::string& name) {
  if (name.rfind("own_i8i32_", 0) == 0) return CpuGemmTypes::kI8I32;
  if (name.rfind("own_bf16f32_", 0) == 0) return CpuGemmTypes::kBf16F32;
  if (name.rfind("own_bf16_", 0) == 0) return CpuGemmTypes::kBf16;
  return CpuGemmTypes::kF32;
}

// The kernels under test, built once: a seeded sample of the native target's candidates in one
// translation unit (the sweep: all of them, one unit each).
const std::vector<Kernel>& kernels() {
  static const std::vector<Kernel> built = [] {
    const std::vector<std::string> features = resolve_target("native").cpu_features;
    struct Pick {
      CpuGemmTypes types;
      const char* isa_token;
      int count;
    };
    const Pick picks[] = {
        {CpuGemmTypes::kF32, "_avx512_", 2},         {CpuGemmTypes::kF32, "_avx2_", 2},
        {CpuGemmTypes::kBf16, "_avx512bf16_", 2},    {CpuGemmTypes::kBf16, "_avx512_", 1},
        {CpuGemmTypes::kBf16F32, "_avx512bf16_", 1}, {CpuGemmTypes::kBf16F32, "_avx2_", 1},
        {CpuGemmTypes::kI8I32, "_avx512vnni_", 2},   {CpuGemmTypes::kBf16, "_avx2_", 0},
        {CpuGemmTypes::kBf16F32, "_avx512_", 0}};  // count 0: in the sweep only
    std::mt19937 rng(16);
    std::vector<GemmCandidate> chosen;
    for (const Pick& pick : picks) {
      const bool i8 = pick.types == CpuGemmTypes::kI8I32;
      const DType out = i8                                  ? DType::kInt32
                        : pick.types == CpuGemmTypes::kBf16 ? DType::kBFloat16
                                                            : DType::kFloat32;
      const DType in = i8                                 ? DType::kInt8
                       : pick.types == CpuGemmTypes::kF32 ? DType::kFloat32
                                                          : DType::kBFloat16;
      std::vector<GemmCandidate> group;
      for (auto& c : cpu_template_candidates(problem(in, out), features))
        if (c.name.find(pick.isa_token) != std::string::npos) group.push_back(std::move(c));
      if (sweep_full()) {
        for (auto& c : group) chosen.push_back(std::move(c));
        continue;
      }
      for (int i = 0; i < pick.count && !group.empty(); ++i) {
        const size_t at = std::uniform_int_distribution<size_t>(0, group.size() - 1)(rng);
        chosen.push_back(std::move(group[at]));
        group.erase(group.begin() + static_cast<std::ptrdiff_t>(at));
      }
    }
    std::vector<Kernel> out;
    if (chosen.empty()) return out;
    std::vector<SourceFile> files;
    std::string merged;
    for (const auto& c : chosen) {
      if (sweep_full())
        files.push_back({c.entry + ".cpp", c.source});
      else
        merged += c.source;
    }
    if (!sweep_full()) files.push_back({"gemm_templates_sample.cpp", merged});
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("anvil_gemm_templates_" + std::to_string(::getpid())))
                                .string();
    std::filesystem::create_directories(dir);
    ToolchainOptions opt;
    opt.target = "native";
    opt.progress = ProgressMode::kQuiet;
    opt.jobs = sweep_full() ? 0 : 1;
    const BuildResult r = build_shared_library(files, dir + "/templates.so", opt);
    void* handle = dlopen(r.so_path.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open: process-wide
    std::filesystem::remove_all(dir);
    if (!handle) throw Error("dlopen failed", "gemm templates test", "a library", dlerror());
    for (const auto& c : chosen) {
      auto fn = reinterpret_cast<EntryFn>(dlsym(handle, c.entry.c_str()));
      if (!fn) throw Error("missing entry", "gemm templates test", c.entry, "none");
      out.push_back({c.name, types_of(c.name), fn});
    }
    return out;
  }();
  return built;
}

struct Case {
  int64_t m, n, k;
  bool ta = false, tb = false;
  int bias_kind = 0, act = 0;
  float alpha = 1.0f, beta = 0.0f;
  int64_t pad = 0;  // extra elements at the end of each stored row (lda, ldb, ldc)
};

std::string describe(const Kernel& kn, const Case& c) {
  return str(kn.name, " m=", c.m, " n=", c.n, " k=", c.k, " ta=", c.ta, " tb=", c.tb,
             " bias=", c.bias_kind, " act=", c.act, " alpha=", c.alpha, " beta=", c.beta,
             " pad=", c.pad, " threads=", g_threads);
}

double activation(double v, int act) {
  switch (act) {
    case ANVIL_GEMM_ACT_RELU:
      return v > 0 ? v : 0;
    case ANVIL_GEMM_ACT_RELU6:
      return std::min(std::max(v, 0.0), 6.0);
    case ANVIL_GEMM_ACT_GELU_ERF:
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case ANVIL_GEMM_ACT_GELU_TANH:
      return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case ANVIL_GEMM_ACT_SILU:
      return v / (1 + std::exp(-v));
    default:
      return v;
  }
}

/// Runs one case against the double reference (EXPECTs inside); returns C as fp32 values.
std::vector<float> check_case(const Kernel& kn, const Case& c, std::mt19937& rng) {
  const bool in_bf = kn.types != CpuGemmTypes::kF32, out_bf = kn.types == CpuGemmTypes::kBf16;
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = (c.ta ? c.m : c.k), lda = a_cols + c.pad;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = (c.tb ? c.k : c.n), ldb = b_cols + c.pad;
  const int64_t ldc = c.n + c.pad;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](int64_t count, bool bf) {
    std::vector<float> v(static_cast<size_t>(std::max<int64_t>(count, 1)));
    for (auto& x : v) x = bf ? from_bf16(to_bf16(u(rng))) : u(rng);
    return v;
  };
  const std::vector<float> a = fill(a_rows * lda, in_bf), b = fill(b_rows * ldb, in_bf);
  std::vector<float> c0 = fill(c.m * ldc, out_bf);
  const std::vector<float> bias = fill(std::max(c.m, c.n), out_bf);
  const float sentinel = 12352.0f;  // exact in bf16
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      float& x = c0[static_cast<size_t>(i * ldc + j)];
      if (j >= c.n)
        x = sentinel;  // padding: must stay
      else if (c.beta == 0.0f)
        x = std::nanf("");  // beta 0: C is not read
    }
  std::vector<double> ref(static_cast<size_t>(c.m * c.n));
  double max_ref = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < c.k; ++p)
        acc += double(c.ta ? a[p * lda + i] : a[i * lda + p]) *
               double(c.tb ? b[j * ldb + p] : b[p * ldb + j]);
      double v = double(c.alpha) * acc;
      if (c.beta != 0.0f) v += double(c.beta) * c0[i * ldc + j];
      if (c.bias_kind == ANVIL_GEMM_BIAS_COL) v += bias[j];
      if (c.bias_kind == ANVIL_GEMM_BIAS_ROW) v += bias[i];
      v = activation(v, c.act);
      ref[i * c.n + j] = v;
      max_ref = std::max(max_ref, std::fabs(v));
    }
  auto to_h = [](const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = to_bf16(v[i]);
    return h;
  };
  std::vector<uint16_t> ah = to_h(a), bh = to_h(b), ch = to_h(c0), biash = to_h(bias);
  std::vector<float> cf = c0;
  AnvilGemmCall g{};
  g.a_dtype = g.b_dtype = in_bf ? 13 : 7;
  g.c_dtype = out_bf ? 13 : 7;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.a = in_bf ? static_cast<const void*>(ah.data()) : a.data();
  g.lda = lda;
  g.b = in_bf ? static_cast<const void*>(bh.data()) : b.data();
  g.ldb = ldb;
  g.c = out_bf ? static_cast<void*>(ch.data()) : cf.data();
  g.ldc = ldc;
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.bias = c.bias_kind ? (out_bf ? static_cast<const void*>(biash.data()) : bias.data()) : nullptr;
  g.bias_kind = c.bias_kind;
  g.activation = c.act;
  g_error.clear();
  int rc = 0;
  if (g_run_ctx) {
    g.b_constant = 1;
    const std::vector<float> cf0 = cf;
    const std::vector<uint16_t> ch0 = ch;
    rc = kn.fn(runtime::rt_api(), g_run_ctx, &g);  // packs B and keeps it
    EXPECT_EQ(rc, 0) << describe(kn, c) << ": " << g_run_ctx->error();
    const std::vector<float> first_f = cf;
    const std::vector<uint16_t> first_h = ch;
    cf = cf0;  // C as before (beta reads it)
    ch = ch0;
    rc = kn.fn(runtime::rt_api(), g_run_ctx, &g);  // reads the kept pack
    EXPECT_EQ(rc, 0) << describe(kn, c) << ": " << g_run_ctx->error();
    EXPECT_TRUE(out_bf ? ch == first_h : std::memcmp(cf.data(), first_f.data(), cf.size() * 4) == 0)
        << describe(kn, c) << ": the call with B's kept pack differs from the first";
  } else {
    rc = kn.fn(test_api(), nullptr, &g);
    EXPECT_EQ(rc, 0) << describe(kn, c) << ": " << g_error;
  }
  std::vector<float> got(static_cast<size_t>(c.m * c.n));
  double max_err = 0;
  int64_t pad_broken = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const float v = out_bf ? from_bf16(ch[i * ldc + j]) : cf[i * ldc + j];
      if (j >= c.n) {
        pad_broken += v != sentinel;
        continue;
      }
      got[i * c.n + j] = v;
      const double e = std::fabs(double(v) - ref[i * c.n + j]);
      max_err = std::isnan(v) ? INFINITY : std::max(max_err, e);
    }
  // fp32 accumulation: 1e-4 of max |ref|; a bf16 output adds its rounding (2^-9 relative).
  const double tol = (out_bf ? 5e-3 : 1e-4) * std::max(max_ref, 1e-3);
  EXPECT_LE(max_err, tol) << describe(kn, c) << " max |ref| " << max_ref;
  EXPECT_EQ(pad_broken, 0) << describe(kn, c) << ": the padding of C was written";
  return got;
}

/// int8 x int8 -> int32: the full int8 range, exact against int64 sums. Returns C.
std::vector<int32_t> check_int8(const Kernel& kn, const Case& c, std::mt19937& rng) {
  const int64_t a_rows = c.ta ? c.k : c.m, lda = (c.ta ? c.m : c.k) + c.pad;
  const int64_t b_rows = c.tb ? c.n : c.k, ldb = (c.tb ? c.k : c.n) + c.pad, ldc = c.n + c.pad;
  std::uniform_int_distribution<int> u(-128, 127);
  auto fill = [&](int64_t count) {
    std::vector<int8_t> v(static_cast<size_t>(std::max<int64_t>(count, 1)));
    for (auto& x : v) x = static_cast<int8_t>(u(rng));
    return v;
  };
  const std::vector<int8_t> a = fill(a_rows * lda), b = fill(b_rows * ldb);
  const int32_t sentinel = 0x5eed;
  std::vector<int32_t> cv(static_cast<size_t>(std::max<int64_t>(c.m * ldc, 1)), sentinel);
  AnvilGemmCall g{};
  g.a_dtype = g.b_dtype = 2;
  g.c_dtype = 4;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.a = a.data(), g.lda = lda, g.b = b.data(), g.ldb = ldb, g.c = cv.data(), g.ldc = ldc;
  g.alpha = 1.0f;
  g_error.clear();
  EXPECT_EQ(kn.fn(test_api(), nullptr, &g), 0) << describe(kn, c) << ": " << g_error;
  std::vector<int32_t> got(static_cast<size_t>(c.m * c.n));
  int64_t wrong = 0, pad_broken = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const int32_t v = cv[i * ldc + j];
      if (j >= c.n) {
        pad_broken += v != sentinel;
        continue;
      }
      int64_t ref = 0;
      for (int64_t p = 0; p < c.k; ++p)
        ref += int64_t(c.ta ? a[p * lda + i] : a[i * lda + p]) *
               int64_t(c.tb ? b[j * ldb + p] : b[p * ldb + j]);
      wrong += ref != v;
      got[i * c.n + j] = v;
    }
  EXPECT_EQ(wrong, 0) << describe(kn, c);
  EXPECT_EQ(pad_broken, 0) << describe(kn, c) << ": the padding of C was written";
  return got;
}

std::vector<Case> shapes(std::mt19937& rng, int randoms, int64_t max_volume) {
  std::vector<Case> out = {{1, 1, 1},     {1, 37, 1},     {7, 13, 5},   {3, 1, 2},
                           {97, 31, 263}, {29, 53, 1024}, {1024, 3, 2}, {2, 1024, 17},
                           {131, 67, 0},  {61, 127, 521}, {11, 257, 7}, {13, 17, 1031}};
  std::uniform_int_distribution<int64_t> size(1, 1024);
  for (int i = 0; i < randoms; ++i) {
    Case c{size(rng), size(rng), size(rng)};
    while (c.m * c.n * c.k > max_volume)
      (c.m >= c.n && c.m >= c.k ? c.m : c.n >= c.k ? c.n : c.k) /= 2;
    out.push_back(c);
  }
  return out;
}

TEST(GemmTemplatesRun, SampleAgainstDoubleReference) {
  const auto& ks = kernels();
  if (ks.empty()) GTEST_SKIP() << "this CPU has none of the templates' ISAs (avx2+fma, avx512f)";
  std::mt19937 rng(1016);
  const float alphas[] = {1.0f, 0.75f, -1.5f}, betas[] = {0.0f, 0.5f, 1.0f};
  int v = 0;
  for (const Kernel& kn : ks) {
    for (Case c : shapes(rng, sweep_full() ? 10 : 2, sweep_full() ? 40'000'000 : 2'000'000))
      for (int layout = 0; layout < 4; ++layout, ++v) {
        c.ta = layout & 1;
        c.tb = layout >> 1;
        c.bias_kind = v % 3;
        c.act = (v / 3) % 6;
        c.alpha = alphas[v % 3];
        c.beta = betas[(v / 2) % 3];
        c.pad = v % 5 == 0 ? 3 : 0;
        g_threads = 1 + v % 3;
        if (kn.types == CpuGemmTypes::kI8I32) {
          c.bias_kind = c.act = 0, c.alpha = 1.0f, c.beta = 0.0f;
          check_int8(kn, c, rng);
        } else {
          check_case(kn, c, rng);
        }
      }
  }
  g_threads = 1;
}

TEST(GemmTemplatesRun, ResultsDoNotDependOnThreads) {
  const auto& ks = kernels();
  if (ks.empty()) GTEST_SKIP() << "no template ISA on this CPU";
  for (const Kernel& kn : ks) {
    Case c{150, 300, 600};  // several K blocks, M and N blocks
    c.bias_kind = ANVIL_GEMM_BIAS_ROW;
    c.act = ANVIL_GEMM_ACT_GELU_TANH;
    c.beta = 0.5f;
    std::mt19937 r1(7), r3(7), rp(7);
    if (kn.types == CpuGemmTypes::kI8I32) {  // exact: only needs to be right with 3 threads
      g_threads = 3;
      check_int8(kn, Case{150, 300, 1100}, r3);
      g_threads = 1;
      continue;
    }
    g_threads = 1;
    const auto one = check_case(kn, c, r1);
    g_threads = 3;
    const auto three = check_case(kn, c, r3);
    g_threads = 1;
    EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * 4), 0) << kn.name;
    // The runtime's own table (its thread pool, 2 threads) gives the same bits.
    ThreadPool pool(2);
    ScopedThreadPool scope(&pool);
    const AnvilRtApi* rt = runtime::rt_api();
    std::vector<float> a(150 * 600), b(600 * 300), cc(150 * 300), cc1(150 * 300);
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto& x : a) x = u(rp);
    for (auto& x : b) x = u(rp);
    if (kn.types != CpuGemmTypes::kF32) continue;
    AnvilGemmCall g{};
    g.a_dtype = g.b_dtype = g.c_dtype = 7;
    g.m = 150, g.n = 300, g.k = 600;
    g.a = a.data(), g.lda = 600, g.b = b.data(), g.ldb = 300, g.c = cc.data(), g.ldc = 300;
    g.alpha = 1.0f;
    ASSERT_EQ(kn.fn(rt, nullptr, &g), 0);
    g.c = cc1.data();
    ASSERT_EQ(kn.fn(test_api(), nullptr, &g), 0);
    EXPECT_EQ(std::memcmp(cc.data(), cc1.data(), cc.size() * 4), 0) << kn.name;
  }
}

// A constant B (a weight) is packed once per constant set through the runtime's
// const_derived (ABI minor 10) and kept: small M (the per-block slices otherwise) and large M
// alike, every layout, against the double reference; a second call reads the pack and gives
// the same bits; one pack per (template, B); a new constant set (a fresh cache) packs again;
// past the memory budget (ANVIL_PACKED_CONSTANTS_MB) B is packed per call.
TEST(GemmTemplatesRun, ConstantBIsPackedOnceAndKept) {
  const auto& ks = kernels();
  if (ks.empty()) GTEST_SKIP() << "no template ISA on this CPU";
  ThreadPool pool(2);
  ScopedThreadPool scope(&pool);
  std::mt19937 rng(2026);
  for (const Kernel& kn : ks) {
    if (kn.types == CpuGemmTypes::kI8I32) continue;  // int8 packs per call (column sums)
    for (const Case& base : {Case{5, 100, 300}, Case{300, 70, 520}})
      for (int layout = 0; layout < 4; ++layout) {
        Case c = base;
        c.ta = layout & 1;
        c.tb = layout >> 1;
        c.bias_kind = ANVIL_GEMM_BIAS_COL;
        c.act = ANVIL_GEMM_ACT_SILU;
        c.pad = layout == 3 ? 3 : 0;
        runtime::PackedWeightCache cache;
        runtime::RunContext ctx;
        ctx.packed_weights = &cache;
        g_run_ctx = &ctx;
        check_case(kn, c, rng);
        g_run_ctx = nullptr;
        EXPECT_EQ(cache.size(), 1u) << describe(kn, c);
        EXPECT_GE(cache.bytes(), c.k * c.n * 2) << describe(kn, c);  // 16-bit panels at least
      }
    // Over the budget (ANVIL_PACKED_CONSTANTS_MB, here 0): packed per call, still right; a value
    // that is not a number fails the run naming the variable.
    for (const char* budget : {"0", "lots"}) {
      ::setenv("ANVIL_PACKED_CONSTANTS_MB", budget, 1);
      runtime::PackedWeightCache cache;
      runtime::RunContext ctx;
      ctx.packed_weights = &cache;
      g_run_ctx = &ctx;
      const Case c{40, 70, 300};
      check_case(kn, c, rng);
      g_run_ctx = nullptr;
      ::unsetenv("ANVIL_PACKED_CONSTANTS_MB");
      EXPECT_EQ(cache.bytes(), 0) << describe(kn, c) << " budget " << budget;
      EXPECT_EQ(ctx.failed(), std::string(budget) == "lots") << ctx.error();
      if (ctx.failed()) {
        EXPECT_NE(ctx.error().find("ANVIL_PACKED_CONSTANTS_MB"), std::string::npos);
      }
    }
  }
}

TEST(GemmTemplatesRun, BadCallsAreErrors) {
  const auto& ks = kernels();
  if (ks.empty()) GTEST_SKIP() << "no template ISA on this CPU";
  for (const Kernel& kn : ks) {
    const bool i8 = kn.types == CpuGemmTypes::kI8I32;
    const bool in_bf = kn.types == CpuGemmTypes::kBf16 || kn.types == CpuGemmTypes::kBf16F32;
    const bool out_bf = kn.types == CpuGemmTypes::kBf16;
    std::vector<float> buf(64, 1.0f);
    AnvilGemmCall good{};
    good.a_dtype = good.b_dtype = i8 ? 2 : in_bf ? 13 : 7;
    good.c_dtype = i8 ? 4 : out_bf ? 13 : 7;
    good.m = good.n = good.k = 4;
    good.a = good.b = buf.data();
    good.c = buf.data() + 32;
    good.lda = good.ldb = good.ldc = 4;
    good.alpha = 1.0f;
    ASSERT_EQ(kn.fn(test_api(), nullptr, &good), 0) << kn.name << ": " << g_error;
    auto expect_error = [&](AnvilGemmCall g, const std::string& what) {
      g_error.clear();
      EXPECT_NE(kn.fn(test_api(), nullptr, &g), 0) << kn.name << " " << what;
      EXPECT_NE(g_error.find(what), std::string::npos) << g_error;
      EXPECT_NE(g_error.find(kn.name), std::string::npos) << g_error;
    };
    AnvilGemmCall g = good;
    g.c_dtype = out_bf || i8 ? 7 : 13;
    expect_error(g, "C dtype");
    if (i8) {
      g = good;
      g.alpha = 2.0f;
      expect_error(g, "plain product");
      g = good;
      g.activation = ANVIL_GEMM_ACT_RELU;
      expect_error(g, "plain product");
    }
    g = good;
    g.a_dtype = 3;
    expect_error(g, "A dtype");
    g = good;
    g.m = -1;
    expect_error(g, "negative size");
    if (!i8) {
      g = good;
      g.bias_kind = ANVIL_GEMM_BIAS_COL;
      expect_error(g, "null bias");
      g = good;
      g.activation = 9;
      expect_error(g, "activation");
    }
    g = good;
    g.lda = 3;
    expect_error(g, "lda");
    g = good;
    g.ldc = 2;
    expect_error(g, "ldc");
    g_error.clear();
    EXPECT_NE(kn.fn(test_api(), nullptr, nullptr), 0);
    EXPECT_NE(g_error.find("null AnvilGemmCall"), std::string::npos) << g_error;
  }
}

}  // namespace
}  // namespace anvil::codegen::gemm
