// GEMM autotuning with a symbolic M (issue 16, deliver 4; driver/gemm_buckets.h): the bucket
// rule, one choice per bucket recorded in the package's manifest and dispatched on M's run-time
// value, every bucket's kernel matching PyTorch / the interpreter, the choices cached per bucket.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "codegen/gemm/gemm_candidate.h"
#include "common/check.h"
#include "core/npy.h"
#include "core/zip_reader.h"
#include "driver/compile.h"
#include "driver/gemm_buckets.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;
namespace gm = codegen::gemm;

std::string fixture215(const std::string& file) {
  return std::string(ANVIL_SOURCE_DIR) + "/tests/fixtures_215/" + file;
}

std::vector<std::tuple<int64_t, int64_t, int64_t>> as_tuples(
    const std::vector<driver::MBucket>& b) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out;
  for (const auto& x : b) out.emplace_back(x.min, x.max, x.at);
  return out;
}

TEST(MBuckets, TheRuleClipsPowerOfFourBucketsToTheRange) {
  using T = std::vector<std::tuple<int64_t, int64_t, int64_t>>;
  constexpr int64_t inf = SymRange::kSymMax;
  EXPECT_EQ(as_tuples(driver::m_buckets({1, 64})),
            (T{{1, 1, 1}, {2, 8, 8}, {9, 32, 32}, {33, 64, 64}}));
  EXPECT_EQ(as_tuples(driver::m_buckets({2, inf})),
            (T{{2, 8, 8}, {9, 32, 32}, {33, 128, 128}, {129, 512, 512}, {513, 2048, 2048},
               {2049, inf, 4096}}));
  EXPECT_EQ(as_tuples(driver::m_buckets({0, 3})), (T{{1, 1, 1}, {2, 3, 3}}));  // M = 0: no GEMM
  EXPECT_EQ(as_tuples(driver::m_buckets({100, 100})), (T{{100, 100, 100}}));
  EXPECT_EQ(as_tuples(driver::m_buckets({600, 3000})), (T{{600, 2048, 2048}, {2049, 3000, 3000}}));
  EXPECT_EQ(as_tuples(driver::m_buckets({5000, inf})), (T{{5000, inf, 5000}}));
  EXPECT_TRUE(driver::m_buckets({0, 0}).empty());
}

/// A timing child (set as $ANVIL_GEMM_TIME) that reports 1 us for the candidate each rule
/// names at the M it names ("lib" N: library N; "so" 1: any template) and 9 us for the others.
struct FastRule {
  int64_t m;
  std::string field, value;
};
void fake_timing_child_in(const fs::path& dir, const std::vector<FastRule>& rules) {
  const fs::path tool = dir / "fake_time.sh";
  {
    std::ofstream out(tool);
    out << "#!/bin/sh\n"
           "m=; lib=; so=\n"
           "for a in \"$@\"; do case \"$a\" in m=*) m=${a#m=};; library=*) lib=${a#library=};;\n"
           "  so=*) so=1;; esac; done\n"
           "t=9000\n";
    for (const FastRule& r : rules)
      out << "[ \"$m\" = " << r.m << " ] && [ \"$" << r.field << "\" = " << r.value
          << " ] && t=1000\n";
    out << "echo time_ns=$t\n";
  }
  ::chmod(tool.c_str(), 0755);
  ::setenv("ANVIL_GEMM_TIME", tool.c_str(), 1);
}

class GemmBuckets : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("anvil_buckets_test_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    opts_.cache_dir = (dir_ / "cache").string();
    opts_.progress = codegen::ProgressMode::kQuiet;
    opts_.gemm.mode = gm::AutotuneMode::kFast;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    ::unsetenv("ANVIL_GEMM_TIME");
  }
  nlohmann::json manifest_of(const std::string& pkg) {
    const ZipReader zip = ZipReader::open(pkg);
    const auto* e = zip.find("manifest.json");
    EXPECT_NE(e, nullptr);
    return nlohmann::json::parse(zip.read(*e));
  }
  void fake_timing_child(const std::vector<FastRule>& rules) { fake_timing_child_in(dir_, rules); }
  fs::path dir_;
  driver::CompileOptions opts_;
};

/// x [rows, 32] of seeded values.
Tensor rows_of(int64_t rows, int seed) {
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::vector<float> v(static_cast<size_t>(rows * 32));
  for (float& x : v) x = static_cast<float>(gen() / 2147483648.0 - 1.0);
  return Tensor::from_vector(v, {rows, 32});
}

/// mlp_dynbatch (Linear 32->64, gelu, Linear 64->16; batch in [1, 64]) run at M in every bucket:
/// PyTorch's outputs at 4, 1 and 13 rows, the interpreter's at 33, 50 and 64.
void expect_matches_everywhere(const std::string& pkg) {
  const runtime::Model model = runtime::Model::load(pkg);
  for (const std::string suffix : {"", "_0", "_1"}) {
    const Tensor x = read_npy(fixture215("mlp_dynbatch.in0" + suffix + ".npy"));
    const auto out = model.run({x});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(::anvil::test::close(out[0], read_npy(fixture215("mlp_dynbatch.out0" + suffix +
                                                                 ".npy")),
                                     1e-4))
        << x.sizes()[0] << " rows";
  }
  const auto graph = frontend::load_pt2(fixture215("mlp_dynbatch.pt2"));
  interp::Interpreter ref(*graph);
  for (int64_t rows : {33, 50, 64}) {
    const Tensor x = rows_of(rows, static_cast<int>(rows));
    const auto want = ref.run({x});
    const auto got = model.run({x});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(::anvil::test::matches_reference(got[0], want[0])) << rows << " rows";
  }
}

// `--autotune fast` with the real timing child: both GEMMs of the dynamic-batch MLP get one
// choice per bucket of M in [1, 64]; the package matches PyTorch and the interpreter in every
// bucket; a second compile takes every bucket's choice from the cache and times nothing.
TEST_F(GemmBuckets, SymbolicMIsTunedPerBucketAndMatchesInEveryBucket) {
  const std::string pkg = (dir_ / "m.anvil").string();
  const driver::CompileReport r = driver::compile_pt2(fixture215("mlp_dynbatch.pt2"), pkg, opts_);
  EXPECT_EQ(r.gemms_bucketed, 2);
  EXPECT_EQ(r.gemms_tuned, 8) << ::testing::PrintToString(r.tune_warnings);  // 2 GEMMs x 4
  EXPECT_GT(r.gemm_candidates_timed, 8);
  const nlohmann::json m = manifest_of(pkg);
  ASSERT_EQ(m["gemm"]["steps"].size(), 2u) << m["gemm"].dump();
  for (const auto& st : m["gemm"]["steps"]) {
    EXPECT_EQ(st["kernel"], "per bucket") << st.dump();
    ASSERT_EQ(st["buckets"].size(), 4u) << st.dump();
    const std::vector<std::pair<int, int>> ranges = {{1, 1}, {2, 8}, {9, 32}, {33, 64}};
    for (size_t i = 0; i < 4; ++i) {
      const auto& b = st["buckets"][i];
      EXPECT_EQ(b["m_min"].get<int>(), ranges[i].first) << b.dump();
      EXPECT_EQ(b["m_max"].get<int>(), ranges[i].second) << b.dump();
      EXPECT_NE(b["kernel"], "default") << b.dump();
      EXPECT_GT(b["candidates"].get<int>(), 1) << b.dump();
    }
  }
  expect_matches_everywhere(pkg);
  // `anvil inspect` lists the buckets' kernels
  const fs::path listing = dir_ / "inspect.txt";
  ASSERT_EQ(std::system((std::string("'") + ANVIL_CLI + "' inspect '" + pkg + "' > '" +
                         listing.string() + "' 2>&1")
                            .c_str()),
            0);
  std::ifstream in(listing);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("GEMM kernels (--autotune fast):"), std::string::npos) << text;
  EXPECT_NE(text.find("per bucket of m:"), std::string::npos) << text;
  EXPECT_NE(text.find("    m in [9, 32]: " +
                      m["gemm"]["steps"][0]["buckets"][2]["kernel"].get<std::string>()),
            std::string::npos)
      << text;
  const driver::CompileReport again =
      driver::compile_pt2(fixture215("mlp_dynbatch.pt2"), (dir_ / "m2.anvil").string(), opts_);
  EXPECT_EQ(again.gemms_from_cache, 8);
  EXPECT_EQ(again.gemm_candidates_timed, 0);
}

// A timing child that makes a different candidate win in each bucket (by the M it is timed at):
// OpenBLAS at M = 1, oneDNN at 8, a generated template at 32, the packed kernel at 64. The
// package dispatches each M to its bucket's kernel (the generated code shows the tests), and
// every bucket's kernel computes the right values.
TEST_F(GemmBuckets, EachBucketRunsItsOwnChoice) {
  fake_timing_child({{1, "lib", "1"}, {8, "lib", "3"}, {32, "so", "1"}, {64, "lib", "2"}});
  const fs::path src = dir_ / "src";
  opts_.emit_source_dir = src.string();
  const std::string pkg = (dir_ / "m.anvil").string();
  const driver::CompileReport r = driver::compile_pt2(fixture215("mlp_dynbatch.pt2"), pkg, opts_);
  EXPECT_EQ(r.gemms_tuned, 8) << ::testing::PrintToString(r.tune_warnings);
  const nlohmann::json m = manifest_of(pkg);
  bool any_template = false;
  for (const auto& st : m["gemm"]["steps"]) {
    ASSERT_EQ(st["buckets"].size(), 4u) << st.dump();
    EXPECT_EQ(st["buckets"][0]["kernel"], "openblas_sgemm") << st.dump();
    EXPECT_EQ(st["buckets"][1]["kernel"].get<std::string>().rfind("onednn_", 0), 0u) << st.dump();
    const std::string t = st["buckets"][2]["kernel"];
    any_template |= t.rfind("own_f32_", 0) == 0;
    EXPECT_EQ(st["buckets"][3]["kernel"].get<std::string>().rfind("own_packed_", 0), 0u)
        << st.dump();
  }
  EXPECT_TRUE(any_template) << m["gemm"].dump();  // where the CPU has a template ISA
  std::string code;
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().extension() == ".cpp") {
      std::ifstream in(e.path());
      code += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
  EXPECT_NE(code.find("if (m <= 1) {  // m in [1, 1]: openblas_sgemm"), std::string::npos);
  EXPECT_NE(code.find("} else if (m <= 8) {  // m in [2, 8]: onednn_"), std::string::npos);
  EXPECT_NE(code.find("} else {  // m in [33, 64]: own_packed_"), std::string::npos);
  expect_matches_everywhere(pkg);
}

// Every bucket's kernel applies a bias and an activation (oneDNN's post-ops at M <= 8, a
// template's store above): the bias + gelu of the first linear and the bias of the second leave
// their loop kernels for every M, and the package still matches in every bucket. One bucket on
// a kernel that fuses nothing (OpenBLAS) keeps the loop kernels.
TEST_F(GemmBuckets, AnEpilogueFusesOnlyWhenEveryBucketsKernelAppliesIt) {
  fake_timing_child({{1, "lib", "3"}, {8, "lib", "3"}, {32, "so", "1"}, {64, "so", "1"}});
  const std::string pkg = (dir_ / "fused.anvil").string();
  driver::compile_pt2(fixture215("mlp_dynbatch.pt2"), pkg, opts_);
  const nlohmann::json m = manifest_of(pkg);
  EXPECT_EQ(m.at("gemm_fused_epilogues").get<int>(), 2) << m["gemm"].dump();
  for (const auto& st : m["gemm"]["steps"])
    EXPECT_EQ(st["buckets"][3]["kernel"].get<std::string>().rfind("own_f32_", 0), 0u) << st.dump();
  expect_matches_everywhere(pkg);
  fake_timing_child({{1, "lib", "1"}, {8, "lib", "3"}, {32, "so", "1"}, {64, "so", "1"}});
  opts_.cache_dir = (dir_ / "cache2").string();
  const std::string pkg2 = (dir_ / "unfused.anvil").string();
  driver::compile_pt2(fixture215("mlp_dynbatch.pt2"), pkg2, opts_);
  EXPECT_EQ(manifest_of(pkg2).at("gemm_fused_epilogues").get<int>(), 0);
  expect_matches_everywhere(pkg2);
}

// An unbounded M (torch.export's default range [2, inf]): six buckets, the last one open,
// timed at 4096 and recorded with m_max null; M past the last closed bucket (3000) runs its
// kernel, and every bucket matches the interpreter.
TEST_F(GemmBuckets, AnUnboundedRangeEndsInAnOpenBucket) {
  const auto g = ir::parse_graph(R"(graph {
  symbols {
    s0 in [2, inf]
  }
  inputs {
    %x: f32[s0, 16] = user_input
    %w: f32[16, 8] = user_input
  }
  %m: f32[s0, 8] = aten.mm.default(self=%x, mat2=%w)
  outputs {
    user_output %m
  }
})");
  const std::string pkg = (dir_ / "open.anvil").string();
  const driver::CompileReport r = driver::compile_graph(*g, pkg, opts_);
  EXPECT_EQ(r.gemms_bucketed, 1);
  EXPECT_EQ(r.gemms_tuned, 6) << ::testing::PrintToString(r.tune_warnings);
  bool timed_at_4096 = false;
  for (const auto& l : r.tune_lines) timed_at_4096 |= l.find(" 4096x8x16 f32 ") != std::string::npos;
  EXPECT_TRUE(timed_at_4096) << ::testing::PrintToString(r.tune_lines);
  const nlohmann::json m = manifest_of(pkg);
  const auto& buckets = m["gemm"]["steps"][0]["buckets"];
  ASSERT_EQ(buckets.size(), 6u) << m["gemm"].dump();
  EXPECT_EQ(buckets[0]["m_min"].get<int>(), 2);
  EXPECT_EQ(buckets[5]["m_min"].get<int>(), 2049);
  EXPECT_TRUE(buckets[5]["m_max"].is_null()) << buckets[5].dump();
  const runtime::Model model = runtime::Model::load(pkg);
  interp::Interpreter ref(*g);
  std::mt19937 gen(5);
  std::vector<float> wv(16 * 8);
  for (float& v : wv) v = static_cast<float>(gen() / 2147483648.0 - 1.0);
  const Tensor w = Tensor::from_vector(wv, {16, 8});
  for (int64_t rows : {2, 9, 100, 600, 2048, 3000}) {
    std::vector<float> xv(static_cast<size_t>(rows * 16));
    for (float& v : xv) v = static_cast<float>(gen() / 2147483648.0 - 1.0);
    const Tensor x = Tensor::from_vector(xv, {rows, 16});
    const auto got = model.run({x, w});
    EXPECT_TRUE(::anvil::test::matches_reference(got[0], ref.run({x, w})[0])) << rows << " rows";
  }
}

// A GEMM whose K is symbolic has no buckets: it keeps the default path with a warning (spec
// B.5 case 5) and runs every size.
TEST_F(GemmBuckets, ASymbolicKKeepsTheDefaultPathWithAWarning) {
  const auto g = ir::parse_graph(R"(graph {
  symbols {
    s0 in [1, 64]
  }
  inputs {
    %x: f32[16, s0] = user_input
    %w: f32[s0, 16] = user_input
  }
  %m: f32[16, 16] = aten.mm.default(self=%x, mat2=%w)
  outputs {
    user_output %m
  }
})");
  const std::string pkg = (dir_ / "dyn.anvil").string();
  const driver::CompileReport r = driver::compile_graph(*g, pkg, opts_);
  EXPECT_EQ(r.gemms_tuned, 0);
  EXPECT_EQ(r.gemms_bucketed, 0);
  EXPECT_EQ(r.gemms_default, 1);
  bool warned = false;
  for (const auto& w : r.tune_warnings)
    warned |= w.find("1 GEMM(s) with dynamic sizes (gemm0) have no autotuning candidates") !=
              std::string::npos;
  EXPECT_TRUE(warned) << ::testing::PrintToString(r.tune_warnings);
  const runtime::Model model = runtime::Model::load(pkg);
  interp::Interpreter ref(*g);
  for (int64_t k : {1, 37}) {
    std::mt19937 gen(static_cast<uint32_t>(k));
    std::vector<float> xv(static_cast<size_t>(16 * k)), wv(static_cast<size_t>(16 * k));
    for (float& v : xv) v = static_cast<float>(gen() / 2147483648.0 - 1.0);
    for (float& v : wv) v = static_cast<float>(gen() / 2147483648.0 - 1.0);
    const std::vector<Tensor> in = {Tensor::from_vector(xv, {16, k}),
                                    Tensor::from_vector(wv, {k, 16})};
    const auto got = model.run(in);
    EXPECT_TRUE(::anvil::test::matches_reference(got[0], ref.run(in)[0])) << "k " << k;
  }
}

}  // namespace
}  // namespace anvil
