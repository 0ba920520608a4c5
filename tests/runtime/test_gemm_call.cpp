// AnvilRtApi::gemm (runtime/gemm_call.h): every library x dtype x (trans_a, trans_b) x bias kind x
// activation, with alpha / beta and padded leading dimensions, against a naive double-precision
// reference on the rounded inputs; int8 bit-exact. CI runs a seeded sample of sizes in 1..1024
// (1 and primes among them) with M*N*K capped; ANVIL_GEMM_SWEEP=full (bench/gemm_sweep.sh) runs
// three size draws per combination with a much larger cap. Bad calls give a clear error through
// api->gemm's return code and the run context's message.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "runtime/gemm_call.h"
#include "runtime/gemm_onednn.h"
#include "runtime/kernels/gemm_packed.h"
#include "runtime/rt_api.h"
#include "runtime/test_externs_util.h"

namespace anvil::runtime {
namespace {

constexpr int32_t kF32 = static_cast<int32_t>(DType::kFloat32);
constexpr int32_t kF64 = static_cast<int32_t>(DType::kFloat64);
constexpr int32_t kBf16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kF16 = static_cast<int32_t>(DType::kFloat16);
constexpr int32_t kS8 = static_cast<int32_t>(DType::kInt8);
constexpr int32_t kS32 = static_cast<int32_t>(DType::kInt32);

bool full_sweep() {
  const char* v = std::getenv("ANVIL_GEMM_SWEEP");
  return v && std::string(v) == "full";
}

size_t elem_size(int32_t code) {
  return code == kS8 ? 1 : (code == kBf16 || code == kF16) ? 2 : code == kF64 ? 8 : 4;
}

/// A matrix buffer of one dtype whose elements are set and read as double.
struct Buf {
  int32_t code;
  std::vector<unsigned char> bytes;
  Buf(int32_t c, int64_t count) : code(c), bytes(static_cast<size_t>(count) * elem_size(c)) {}
  void* data() { return bytes.data(); }
  void set(int64_t i, double v) {
    switch (code) {
      case kF32: reinterpret_cast<float*>(data())[i] = float(v); break;
      case kF64: reinterpret_cast<double*>(data())[i] = v; break;
      case kBf16: reinterpret_cast<BFloat16*>(data())[i] = BFloat16(float(v)); break;
      case kF16: reinterpret_cast<Half*>(data())[i] = Half(float(v)); break;
      case kS8: reinterpret_cast<int8_t*>(data())[i] = int8_t(v); break;
      default: reinterpret_cast<int32_t*>(data())[i] = int32_t(v); break;
    }
  }
  double get(int64_t i) const {
    const void* p = bytes.data();
    switch (code) {
      case kF32: return static_cast<const float*>(p)[i];
      case kF64: return static_cast<const double*>(p)[i];
      case kBf16: return float(static_cast<const BFloat16*>(p)[i]);
      case kF16: return float(static_cast<const Half*>(p)[i]);
      case kS8: return static_cast<const int8_t*>(p)[i];
      default: return static_cast<const int32_t*>(p)[i];
    }
  }
};

double act_ref(double x, int act) {
  switch (act) {
    case ANVIL_GEMM_ACT_RELU: return std::max(x, 0.0);
    case ANVIL_GEMM_ACT_RELU6: return std::min(std::max(x, 0.0), 6.0);
    case ANVIL_GEMM_ACT_GELU_ERF: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ANVIL_GEMM_ACT_GELU_TANH:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case ANVIL_GEMM_ACT_SILU: return x / (1.0 + std::exp(-x));
    default: return x;
  }
}

/// Relative tolerance of the output (against the magnitude of the terms that made it).
double tolerance(int32_t in, int32_t out) {
  if (out == kBf16) return 1.6e-2;  // 8 mantissa bits, plus the per-row bias seeded in bf16
  if (out == kF16) return 3e-3;
  if (out == kF64) return 1e-12;
  return in == kF32 ? 2e-5 : 2e-5;  // fp32 accumulation (bf16/fp16 products are exact in fp32)
}

struct Case {
  int32_t library, variant, in, out;
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  int32_t bias_kind, act;
};

std::string str(const Case& c) {
  return "lib " + std::to_string(c.library) + " var " + std::to_string(c.variant) + " dt " +
         std::to_string(c.in) + "->" + std::to_string(c.out) + " ta " + std::to_string(c.ta) +
         " tb " + std::to_string(c.tb) + " " + std::to_string(c.m) + "x" + std::to_string(c.n) +
         "x" + std::to_string(c.k) + " alpha " + std::to_string(c.alpha) + " beta " +
         std::to_string(c.beta) + " bias " + std::to_string(c.bias_kind) + " act " +
         std::to_string(c.act);
}

/// Runs one case through api->gemm and compares with the double reference. Returns the number
/// of elements out of tolerance (0 expected), reporting the first.
int64_t check_case(const Case& c, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(-128, 127), pad(0, 3);
  const bool ints = c.in == kS8;
  auto draw = [&] { return ints ? double(small(gen)) : real(gen); };
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int64_t lda = a_cols + pad(gen), ldb = b_cols + pad(gen), ldc = c.n + pad(gen);
  Buf a(c.in, a_rows * lda), b(c.in, b_rows * ldb), out(c.out, c.m * ldc);
  Buf bias(c.out, c.bias_kind == ANVIL_GEMM_BIAS_ROW ? c.m : c.n);
  for (int64_t i = 0; i < a_rows * lda; ++i) a.set(i, draw());
  for (int64_t i = 0; i < b_rows * ldb; ++i) b.set(i, draw());
  for (int64_t i = 0; i < c.m * ldc; ++i) out.set(i, ints ? small(gen) * 1000.0 : real(gen));
  for (int64_t i = 0; i < (c.bias_kind == ANVIL_GEMM_BIAS_ROW ? c.m : c.n); ++i)
    bias.set(i, ints ? small(gen) * 100.0 : real(gen));
  const Buf c0 = out;
  AnvilGemmCall g{};
  g.library = c.library;
  g.variant = c.variant;
  g.a_dtype = g.b_dtype = c.in;
  g.c_dtype = c.out;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.a = a.data();
  g.lda = lda;
  g.b = b.data();
  g.ldb = ldb;
  g.c = out.data();
  g.ldc = ldc;
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.bias = c.bias_kind ? bias.data() : nullptr;
  g.bias_kind = c.bias_kind;
  g.activation = c.act;
  RunContext ctx;
  const int rc = rt_api()->gemm(&ctx, &g);
  EXPECT_EQ(rc, 0) << str(c) << ": " << ctx.error();
  if (rc != 0) return 1;
  const double tol = tolerance(c.in, c.out);
  int64_t bad = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double acc = 0.0, mag = 0.0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double x = c.ta ? a.get(p * lda + i) : a.get(i * lda + p);
        const double y = c.tb ? b.get(j * ldb + p) : b.get(p * ldb + j);
        acc += x * y;
        mag += std::fabs(x * y);
      }
      double ref = double(c.alpha) * acc, scale = std::fabs(double(c.alpha)) * mag;
      if (c.beta != 0.0f) {
        ref += double(c.beta) * c0.get(i * ldc + j);
        scale += std::fabs(double(c.beta) * c0.get(i * ldc + j));
      }
      if (c.bias_kind) {
        const double bv = bias.get(c.bias_kind == ANVIL_GEMM_BIAS_ROW ? i : j);
        ref += bv;
        scale += std::fabs(bv);
      }
      ref = act_ref(ref, c.act);
      const double got = out.get(i * ldc + j);
      const bool ok = ints ? got == ref : std::fabs(got - ref) <= tol * (scale + 1e-3);
      if (!ok && bad++ == 0)
        ADD_FAILURE() << str(c) << " at (" << i << ", " << j << "): got " << got << " want "
                      << ref << " (scale " << scale << ")";
    }
  // Padding between rows of C is never written.
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = c.n; j < ldc; ++j)
      if (out.get(i * ldc + j) != c0.get(i * ldc + j) && bad++ == 0)
        ADD_FAILURE() << str(c) << ": padding of C written at (" << i << ", " << j << ")";
  return bad;
}

/// Library x dtype combinations each library takes.
struct Combo {
  int32_t library, variant, in, out;
};
std::vector<Combo> combos() {
  std::vector<Combo> v = {{ANVIL_GEMM_LIB_OPENBLAS, 0, kF32, kF32},
                          {ANVIL_GEMM_LIB_OPENBLAS, 0, kF64, kF64},
                          {ANVIL_GEMM_LIB_PACKED, 0, kF32, kF32}};
  for (int var = 1; var <= 3; ++var)
    if (gemm_isa_available(var == 1 ? GemmIsa::kGeneric : var == 2 ? GemmIsa::kAvx2 : GemmIsa::kAvx512))
      v.push_back({ANVIL_GEMM_LIB_PACKED, var, kF32, kF32});
  const std::vector<std::pair<int32_t, int32_t>> low = {
      {kF32, kF32}, {kBf16, kBf16}, {kBf16, kF32}, {kF16, kF16}, {kF16, kF32}, {kS8, kS32}};
  for (const auto& [in, out] : low) {
    if (onednn_available()) v.push_back({ANVIL_GEMM_LIB_ONEDNN, 0, in, out});
    if (onednn_available() && in == kBf16)  // both bf16 variants, whatever auto picks here
      for (int var : {kOneDnnVariantNative, kOneDnnVariantWiden})
        v.push_back({ANVIL_GEMM_LIB_ONEDNN, var, in, out});
    v.push_back({ANVIL_GEMM_LIB_DEFAULT, 0, in, out});
  }
  v.push_back({ANVIL_GEMM_LIB_DEFAULT, 0, kF64, kF64});
  return v;
}

/// A size in 1..1024: 1, primes and powers of two more often than the rest.
int64_t draw_size(std::mt19937& gen) {
  static const int64_t special[] = {1, 2, 3, 7, 13, 16, 31, 64, 97, 127, 128, 257, 509, 1021, 1024};
  std::uniform_int_distribution<int> pick(0, 2), idx(0, 14), any(1, 1024);
  return pick(gen) == 0 ? any(gen) : special[idx(gen)];
}

TEST(GemmCall, SweepEveryLibraryDtypeLayoutEpilogue) {
  const bool full = full_sweep();
  const int64_t cap = full ? (int64_t{1} << 27) : (int64_t{1} << 15);
  const int draws = full ? 3 : 1;
  std::mt19937 gen(20240616);
  int64_t cases = 0, bad = 0;
  for (const Combo& co : combos())
    for (int t = 0; t < 4; ++t)
      for (int bias = 0; bias <= 2; ++bias)
        for (int act = 0; act <= 5; ++act)
          for (int d = 0; d < draws; ++d) {
            const bool int_out = co.out == kS32;
            if (int_out && act != ANVIL_GEMM_ACT_NONE) continue;  // rejected (ErrorCases)
            const bool plain = int_out && co.library == ANVIL_GEMM_LIB_ONEDNN;
            if (plain && bias != 0) continue;  // oneDNN int8: plain product only
            Case c{co.library, co.variant, co.in, co.out, (t & 1) != 0, (t & 2) != 0,
                   0, 0, 0, 1.0f, 0.0f, bias, act};
            do {
              c.m = draw_size(gen);
              c.n = draw_size(gen);
              c.k = draw_size(gen);
            } while (c.m * c.n * c.k > cap);
            const int ab = static_cast<int>(gen() % 4);  // alpha / beta pattern
            if (int_out) {
              if (!plain) c.beta = ab == 1 ? 1.0f : 0.0f;
            } else {
              c.alpha = ab == 1 ? 0.5f : ab == 2 ? -1.25f : 1.0f;
              if (co.library != ANVIL_GEMM_LIB_PACKED) c.beta = ab == 1 ? 0.75f : ab == 3 ? 1.0f : 0.0f;
            }
            ++cases;
            bad += check_case(c, static_cast<uint32_t>(gen()));
          }
  EXPECT_EQ(bad, 0);
  std::printf("[ GemmCall ] %lld cases (%s)\n", static_cast<long long>(cases),
              full ? "full sweep" : "CI sample");
}

TEST(GemmCall, LargeProductsSplitOverThePool) {
  // Above the single-call threshold: row blocks (m >= n) and column blocks (n > m) on the pool.
  ThreadPool pool(2);
  ScopedThreadPool scope(&pool);
  for (int32_t lib : {ANVIL_GEMM_LIB_ONEDNN, ANVIL_GEMM_LIB_DEFAULT}) {
    if (lib == ANVIL_GEMM_LIB_ONEDNN && !onednn_available()) continue;
    EXPECT_EQ(check_case({lib, 0, kBf16, kBf16, false, true, 301, 67, 200, 1.0f, 0.5f,
                          ANVIL_GEMM_BIAS_ROW, ANVIL_GEMM_ACT_GELU_TANH}, 1), 0);
    EXPECT_EQ(check_case({lib, 0, kF32, kF32, true, false, 40, 515, 100, 2.0f, 0.0f,
                          ANVIL_GEMM_BIAS_COL, ANVIL_GEMM_ACT_SILU}, 2), 0);
    EXPECT_EQ(check_case({lib, 0, kS8, kS32, true, true, 129, 130, 131, 1.0f, 0.0f,
                          ANVIL_GEMM_BIAS_NONE, ANVIL_GEMM_ACT_NONE}, 3), 0);
  }
}

int process_threads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

TEST(GemmCall, OneDnnPoolModeStartsNoThreadsAndCachesPrimitives) {
  if (!onednn_available()) GTEST_SKIP() << "runtime built without oneDNN";
  ThreadPool pool(2);
  ScopedThreadPool scope(&pool);
  ASSERT_EQ(onednn_threading(), OneDnnThreading::kPoolChunks);
  const Case c{ANVIL_GEMM_LIB_ONEDNN, 0, kBf16, kF32, false, false, 256, 192, 160, 1.0f, 0.0f,
               ANVIL_GEMM_BIAS_COL, ANVIL_GEMM_ACT_RELU};
  EXPECT_EQ(check_case(c, 7), 0);  // first call creates the primitives (and the pool's workers)
  const int threads = process_threads();
  const size_t prims = onednn_cached_primitives();
  EXPECT_EQ(check_case(c, 7), 0);  // same seed: same leading dimensions
  EXPECT_EQ(process_threads(), threads) << "oneDNN started threads of its own in pool mode";
  EXPECT_EQ(onednn_cached_primitives(), prims) << "a repeated call created a primitive";
}

TEST(GemmCall, OneDnnOmpModeIsCorrectToo) {
  if (!onednn_available()) GTEST_SKIP() << "runtime built without oneDNN";
  ThreadPool pool(2);
  ScopedThreadPool scope(&pool);
  set_onednn_threading(OneDnnThreading::kOmp);
  EXPECT_EQ(check_case({ANVIL_GEMM_LIB_ONEDNN, 0, kBf16, kBf16, true, false, 200, 180, 170, 1.0f,
                        1.0f, ANVIL_GEMM_BIAS_ROW, ANVIL_GEMM_ACT_RELU6}, 9), 0);
  set_onednn_threading(OneDnnThreading::kPoolChunks);
}

TEST(GemmCall, EmptyAndZeroKProducts) {
  for (int32_t lib : {ANVIL_GEMM_LIB_OPENBLAS, ANVIL_GEMM_LIB_PACKED, ANVIL_GEMM_LIB_ONEDNN}) {
    if (lib == ANVIL_GEMM_LIB_ONEDNN && !onednn_available()) continue;
    // K = 0: C = beta * C + bias, then the activation.
    EXPECT_EQ(check_case({lib, 0, kF32, kF32, false, false, 5, 6, 0, 1.0f,
                          lib == ANVIL_GEMM_LIB_PACKED ? 0.0f : 0.5f, ANVIL_GEMM_BIAS_COL,
                          ANVIL_GEMM_ACT_RELU}, 11), 0);
  }
  AnvilGemmCall g{};
  g.library = ANVIL_GEMM_LIB_ONEDNN;
  g.a_dtype = g.b_dtype = g.c_dtype = kBf16;
  g.m = 0;
  g.n = 4;
  g.k = 3;  // nothing to do, null pointers included
  RunContext ctx;
  EXPECT_EQ(rt_api()->gemm(&ctx, &g), 0) << ctx.error();
}

/// api->gemm's return code and the context's message for a bad call.
std::string gemm_error(const AnvilGemmCall* g) {
  RunContext ctx;
  EXPECT_NE(rt_api()->gemm(&ctx, g), 0);
  return ctx.error();
}

TEST(GemmCall, ErrorCases) {
  float a[16] = {}, b[16] = {}, c[16] = {};
  AnvilGemmCall g{};
  g.a_dtype = g.b_dtype = g.c_dtype = kF32;
  g.m = g.n = g.k = 4;
  g.a = a;
  g.b = b;
  g.c = c;
  g.lda = g.ldb = g.ldc = 4;
  g.alpha = 1.0f;
  auto with = [&](auto edit) {
    AnvilGemmCall x = g;
    edit(x);
    return gemm_error(&x);
  };
  EXPECT_NE(gemm_error(nullptr).find("null AnvilGemmCall"), std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) { x.library = 9; }).find("unknown GEMM library"),
            std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) { x.m = -1; }).find("negative GEMM size"),
            std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) { x.lda = 3; }).find("leading dimension too small"),
            std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) { x.b = nullptr; }).find("null GEMM operand"),
            std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) { x.activation = 17; }).find("unknown GEMM epilogue"),
            std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) { x.bias_kind = ANVIL_GEMM_BIAS_COL; }).find("bias is null"),
            std::string::npos);
  const std::string mixed = with([](AnvilGemmCall& x) { x.c_dtype = kBf16; });
  EXPECT_NE(mixed.find("GEMM dtypes not supported"), std::string::npos);
  EXPECT_NE(mixed.find("fp32 x fp32 -> bf16"), std::string::npos) << mixed;
  // A dtype a library does not take.
  EXPECT_NE(with([](AnvilGemmCall& x) {
              x.library = ANVIL_GEMM_LIB_OPENBLAS;
              x.a_dtype = x.b_dtype = x.c_dtype = kBf16;
            }).find("does not take"),
            std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) {
              x.library = ANVIL_GEMM_LIB_PACKED;
              x.beta = 1.0f;
            }).find("does not take"),
            std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) {
              x.library = ANVIL_GEMM_LIB_ONEDNN;
              x.a_dtype = x.b_dtype = x.c_dtype = kF64;
            }).find(onednn_available() ? "does not take" : "not available"),
            std::string::npos);
  EXPECT_NE(with([](AnvilGemmCall& x) {
              x.a_dtype = x.b_dtype = kS8;
              x.c_dtype = kS32;
              x.activation = ANVIL_GEMM_ACT_RELU;
            }).find("takes no activation"),
            std::string::npos);
  if (onednn_available())
    EXPECT_NE(with([](AnvilGemmCall& x) {
                x.library = ANVIL_GEMM_LIB_ONEDNN;
                x.a_dtype = x.b_dtype = kS8;
                x.c_dtype = kS32;
                x.alpha = 2.0f;
              }).find("exact only without an epilogue"),
              std::string::npos);
  for (int var = 1; var <= 3; ++var) {
    const GemmIsa isa = var == 1 ? GemmIsa::kGeneric : var == 2 ? GemmIsa::kAvx2 : GemmIsa::kAvx512;
    if (gemm_isa_available(isa)) continue;
    EXPECT_NE(with([&](AnvilGemmCall& x) {
                x.library = ANVIL_GEMM_LIB_PACKED;
                x.variant = var;
              }).find("ISA not available"),
              std::string::npos);
  }
  EXPECT_NE(with([](AnvilGemmCall& x) {
              x.library = ANVIL_GEMM_LIB_PACKED;
              x.variant = 4;
            }).find("does not take"),
            std::string::npos);
}

TEST(GemmCall, Bf16MmExternMatchesTheReference) {
  // The runtime's aten.mm / aten.bmm externs (what bf16 GemmSteps call): oneDNN when the runtime
  // has it, with a transposed operand taken in place; compared with the op's reference kernel.
  using test::ExternCase;
  using test::rand_tensor;
  ExternCase("aten.mm.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {67, 129}, 50))
      .tensor("mat2", rand_tensor(DType::kBFloat16, {45, 129}, 51).transpose(0, 1))
      .check();
  ExternCase("aten.mm.default")
      .tensor("self", rand_tensor(DType::kFloat16, {31, 64}, 52).transpose(0, 1))
      .tensor("mat2", rand_tensor(DType::kFloat16, {31, 17}, 53))
      .check();
  ExternCase("aten.bmm.default")
      .tensor("self", rand_tensor(DType::kBFloat16, {3, 33, 40}, 54))
      .tensor("mat2", rand_tensor(DType::kBFloat16, {3, 40, 21}, 55))
      .check();
}

}  // namespace
}  // namespace anvil::runtime
