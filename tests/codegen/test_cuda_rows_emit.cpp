// Row kernels of the CUDA target (codegen/cuda/emit_cuda_rows.cpp) without a GPU: which form
// each kernel of tests/gpu/cuda_row_graphs.inc gets — a thread per row for rows strided in memory
// whose neighbours are adjacent (a layer_norm over an NCHW activation's channels, an amax over
// them), a warp per row for short rows, a block per row for long ones — and that nvcc compiles
// them. tests/gpu/test_cuda_rows.cpp runs the graph on a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "../gpu/cuda_row_graphs.inc"
#include "common/check.h"
#include "common/nvcc_sample.h"
#include "common/scoped_env.h"
#include "common/text.h"
#include "cuda_compile_fixture.h"
#include "driver/compile.h"
#include "ir/parser.h"
#include "runtime/package.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

using test::count;

class CudaRowsEmit : public test::CudaCompileTest {
 protected:
  /// Compiles graph `text` into dir_/name.anvil (nvcc; in CI for a seeded sample of the
  /// compiles, common/nvcc_sample.h, the others emit their sources only), keeping the .cu
  /// sources' text.
  void compile(const std::string& name, const std::string& text) {
    opts_.emit_source_dir = (dir_ / name).string();
    const bool build = test::nvcc_this_test(name);
    opts_.emit_only = !build;
    const auto g = ir::parse_graph(text);
    driver::compile_graph(*g, (dir_ / (name + ".anvil")).string(), opts_);
    opts_.emit_only = false;
    if (build) {
      EXPECT_FALSE(runtime::Package::open((dir_ / (name + ".anvil")).string())->model_so().empty());
    }
    source_.clear();
    for (const auto& f : fs::directory_iterator(dir_ / name)) {
      if (f.path().extension() != ".cu") continue;
      std::ifstream in(f.path());
      source_ +=
          std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    }
  }

  /// That launcher text `l` launches `kernel` on `grid` blocks of `threads` threads
  /// (`anvil_launch(s, KERNEL, GRID, THREADS, sy, ...)`).
  static void expect_launch(const std::string& l, const std::string& kernel,
                            const std::string& grid, int threads) {
    EXPECT_NE(
        l.find("anvil_launch(s, " + kernel + ", " + grid + ", " + std::to_string(threads) + ", sy"),
        std::string::npos)
        << kernel << " on " << grid << " x " << threads << ":\n"
        << l;
  }

  /// The loop kernel whose comment ("// k3: a, b") names graph node `node` ("k3"), or "".
  std::string kernel_of(const std::string& node) const {
    std::istringstream in(source_);
    for (std::string line; std::getline(in, line);) {
      const size_t colon = line.find(": ");
      if (line.rfind("// k", 0) != 0 || colon == std::string::npos ||
          line.find_first_of("_ ", 3) < colon)  // "// k3_kernel: ...", "// k3 vectorized: ..."
        continue;
      std::istringstream nodes(line.substr(colon + 2));
      for (std::string n; std::getline(nodes, n, ',');)
        if (n.substr(n.find_first_not_of(' ')) == node) return line.substr(3, colon - 3);
    }
    return "";
  }

  /// The text of launcher `k` (`ANVIL_HIDDEN void k(const RunState& s) {` ... `}`).
  std::string launcher(const std::string& k) const {
    const size_t at = source_.find("ANVIL_HIDDEN void " + k + "(const RunState& s) {");
    if (at == std::string::npos) return "";
    return source_.substr(at, source_.find("\n}\n", at) - at);
  }

  std::string source_;
};

TEST_F(CudaRowsEmit, EachRowKernelGetsItsFormAndCompiles) {
  compile("rows", kRowGraph);
  const std::string warp = "_kernel: one warp per row, 8 rows per block of 256 threads";
  const std::string thread = "_kernel_rt: one thread per row (rows of ";
  // strided rows whose neighbours are adjacent: a thread per row with 8192+ rows, the scalar
  // warp-per-row kernel otherwise; no vector form (the rows are not contiguous)
  for (const char* node : {"ln", "lnf", "lns", "lnsf", "cmax", "cmin", "colsum"}) {
    const std::string k = kernel_of(node);
    ASSERT_FALSE(k.empty()) << node << " in\n" << source_;
    EXPECT_NE(source_.find("// " + k + thread), std::string::npos) << node;
    const std::string l = launcher(k);
    EXPECT_NE(l.find("if (n_outer >= 8192) {"), std::string::npos) << l;
    expect_launch(l, k + "_kernel_rt", "anvil_blocks(n_outer, 64)", 64);
    // ConvNeXt's layer_norm (96 channels), the amax over 33 channels, columns of 40: short
    EXPECT_NE(source_.find("// " + k + warp), std::string::npos) << node;
    expect_launch(l, k + "_kernel", "anvil_blocks(n_outer, 8)", 256);
    EXPECT_EQ(l.find("_kernel_rv"), std::string::npos) << l;
  }
  // the thread-per-row kernel has neither a cross-thread reduction nor a barrier
  {
    const std::string k = kernel_of("ln");
    const size_t at = source_.find("__global__ void __launch_bounds__(64) " + k + "_kernel_rt(");
    ASSERT_NE(at, std::string::npos) << source_;
    const std::string body = source_.substr(at, source_.find("\n}\n", at) - at);
    for (const char* absent : {"block_reduce", "warp_reduce", "__sync", "if (threadIdx.x == 0)"})
      EXPECT_EQ(body.find(absent), std::string::npos) << absent << " in\n" << body;
    EXPECT_NE(body.find("for (int64_t rr = 0; rr < (96); ++rr)"), std::string::npos) << body;
  }
  // short contiguous rows: a warp per row, scalar and (whole vectors) vectorized; so are the
  // strided rows of the sliced activation, only 4 of which lie next to each other
  struct Short {
    const char* node;
    int vector;  // the vector form's width, 0: none
  };
  for (const Short& c : {Short{"lnq", 0}, Short{"l7", 0}, Short{"sm33", 0}, Short{"max33", 0},
                         Short{"min33", 0}, Short{"l96", 8}, Short{"sm96", 4}, Short{"sum128", 4},
                         Short{"l128", 8}, Short{"max128", 8}}) {
    const std::string k = kernel_of(c.node);
    ASSERT_FALSE(k.empty()) << c.node;
    const std::string l = launcher(k);
    EXPECT_NE(source_.find("// " + k + warp), std::string::npos) << c.node;
    EXPECT_EQ(source_.find("// " + k + "_kernel_rt"), std::string::npos) << c.node;
    EXPECT_EQ(l.find("n_outer >= 8192"), std::string::npos) << l;
    expect_launch(l, k + "_kernel", "anvil_blocks(n_outer, 8)", 256);
    if (c.vector == 0) {
      EXPECT_EQ(l.find("_kernel_rv"), std::string::npos) << l;
      continue;
    }
    // at most 16 vectors (l96, l128, max128): 2 rows per warp, 16 lanes each
    // (ShortVectorRowsShareAWarp); sm96 and sum128 (24 and 32 vectors): a warp each
    const bool shared = c.vector == 8;
    EXPECT_NE(source_.find("// " + k + " vectorized: rows of " + std::to_string(c.vector) +
                           (shared ? "-element vectors, 2 rows per warp (16 lanes each)"
                                   : "-element vectors, one warp per row")),
              std::string::npos)
        << c.node;
    expect_launch(l, k + "_kernel_rv",
                  shared ? "anvil_blocks(n_outer, 16)" : "anvil_blocks(n_outer, 8)", 256);
  }
  // 200 bf16: the scalar kernel is a block of 256 threads, its vectorized form (25 vectors)
  // a warp per row
  {
    const std::string k = kernel_of("sm200");
    const std::string l = launcher(k);
    EXPECT_NE(source_.find("// " + k + "_kernel: one block of 256 threads per row"),
              std::string::npos);
    expect_launch(l, k + "_kernel", "anvil_blocks(n_outer, 1)", 256);
    expect_launch(l, k + "_kernel_rv", "anvil_blocks(n_outer, 8)", 256);
  }
  // a long row keeps a block per row, scalar and vectorized (1024 vectors: 256 threads)
  {
    const std::string k = kernel_of("l4096");
    const std::string l = launcher(k);
    EXPECT_NE(source_.find("// " + k + "_kernel: one block of 256 threads per row"),
              std::string::npos);
    EXPECT_NE(
        source_.find("// " + k +
                     " vectorized: rows of 4-element vectors, one block of 256 threads per row"),
        std::string::npos);
    expect_launch(l, k + "_kernel", "anvil_blocks(n_outer, 1)", 256);
    expect_launch(l, k + "_kernel_rv", "anvil_blocks(n_outer, 1)", 256);
    EXPECT_EQ(l.find("n_outer >= 8192"), std::string::npos) << l;
  }
  // warp kernels reduce within the warp, with no shared scratch and no block barrier
  {
    const std::string k = kernel_of("sm96");
    const size_t at = source_.find("__global__ void __launch_bounds__(256) " + k + "_kernel(");
    ASSERT_NE(at, std::string::npos);
    const std::string body = source_.substr(at, source_.find("\n}\n", at) - at);
    for (const char* absent : {"block_reduce", "__syncthreads", "__shared__"})
      EXPECT_EQ(body.find(absent), std::string::npos) << absent << " in\n" << body;
    EXPECT_NE(body.find("= warp_reduce(acc"), std::string::npos) << body;
  }
}

TEST_F(CudaRowsEmit, ShortVectorRowsShareAWarp) {
  // vectorized rows of at most 16 vectors share a warp, 16 lanes each for 9-16 vectors (the
  // values on a GPU: CudaRows.SegmentedWarpRowsMatchTheInterpreter); longer rows keep a warp
  // each. ANVIL_CUDA_ROW_SEGMENTS=0 at compile time gives every such row a warp of its own.
  {
    const test::ScopedEnv seg("ANVIL_CUDA_ROW_SEGMENTS", "0");
    compile("rows_noseg", kRowGraph);
    for (const char* node : {"l96", "l128", "max128"})
      EXPECT_NE(source_.find("// " + kernel_of(node) +
                             " vectorized: rows of 8-element vectors, one warp per row"),
                std::string::npos)
          << node;
  }
  compile("rows_seg", kRowGraph);
  const std::string seg16 =
      " vectorized: rows of 8-element vectors, 2 rows per warp (16 lanes each), 16 rows per "
      "block of 256 threads";
  for (const char* node : {"l96", "l128", "max128"}) {  // 12, 16, 16 vectors
    const std::string k = kernel_of(node);
    ASSERT_FALSE(k.empty()) << node;
    EXPECT_NE(source_.find("// " + k + seg16), std::string::npos) << node;
    const std::string l = launcher(k);
    expect_launch(l, k + "_kernel_rv", "anvil_blocks(n_outer, 16)", 256);
    expect_launch(l, k + "_kernel", "anvil_blocks(n_outer, 8)", 256);  // the scalar form stays
    const size_t at = source_.find("__global__ void __launch_bounds__(256) " + k + "_kernel_rv(");
    ASSERT_NE(at, std::string::npos);
    const std::string body = source_.substr(at, source_.find("\n}\n", at) - at);
    EXPECT_NE(body.find("const unsigned seg_mask = 65535u << (threadIdx.x & 31 & ~15u);"),
              std::string::npos)
        << body;
    EXPECT_NE(body.find("= seg_reduce<16>(acc"), std::string::npos) << body;
    EXPECT_EQ(body.find("warp_reduce"), std::string::npos) << body;
  }
  {  // the max's NaN flag is reduced over the segment too
    const std::string k = kernel_of("max128");
    const size_t at = source_.find("__global__ void __launch_bounds__(256) " + k + "_kernel_rv(");
    const std::string body = source_.substr(at, source_.find("\n}\n", at) - at);
    EXPECT_NE(body.find(", OrOp(), seg_mask);"), std::string::npos) << body;
  }
  for (const char* node : {"sm96", "sum128"}) {  // 24 and 32 four-element vectors
    const std::string k = kernel_of(node);
    EXPECT_NE(source_.find("// " + k + " vectorized: rows of 4-element vectors, one warp per row"),
              std::string::npos)
        << node;
  }
}

TEST_F(CudaRowsEmit, SymbolicRowCountsChooseAtRunTime) {
  // s0 images of 640 rows: the thread-per-row kernel for 8192+ rows, a warp per row otherwise
  compile("sym", kSymbolicRowGraph);
  for (const char* node : {"sm", "cm"}) {
    const std::string k = kernel_of(node);
    ASSERT_FALSE(k.empty()) << node << " in\n" << source_;
    const std::string l = launcher(k);
    EXPECT_NE(l.find("const int64_t n_outer = 640*s0"), std::string::npos) << l;
    EXPECT_NE(l.find("if (n_outer >= 8192) {"), std::string::npos) << l;
    expect_launch(l, k + "_kernel_rt", "anvil_blocks(n_outer, 64)", 64);
    expect_launch(l, k + "_kernel", "anvil_blocks(n_outer, 8)", 256);
  }
}

TEST_F(CudaRowsEmit, BlockKeepsABlockPerRowEverywhere) {
  // ANVIL_CUDA_ROWS=block at compile time: a block per row everywhere (unset or =auto: the
  // forms above, the default)
  const auto block_only = [&](const std::string& name) {
    compile(name, kRowGraph);
    EXPECT_EQ(count(source_, "one thread per row"), 0u) << name;
    EXPECT_EQ(count(source_, "one warp per row"), 0u) << name;
    EXPECT_EQ(count(source_, "= warp_reduce(acc"), 0u) << name;
    EXPECT_EQ(source_.find("n_outer >= 8192"), std::string::npos) << name;
    const std::string k = kernel_of("l7");
    expect_launch(launcher(k), k + "_kernel", "anvil_blocks(n_outer, 1)", 32);
  };
  const test::ScopedEnv rows("ANVIL_CUDA_ROWS", "block");
  block_only("block");
  // a value naming no form is an error, not a silent default
  const test::ScopedEnv bad("ANVIL_CUDA_ROWS", "warp");
  opts_.emit_source_dir.clear();
  const std::string msg = test::error_message([&] {
    driver::compile_graph(*ir::parse_graph(kRowGraph), (dir_ / "bad.anvil").string(), opts_);
  });
  EXPECT_TRUE(test::error_says(msg, "ANVIL_CUDA_ROWS names no form of row kernels")) << msg;
  EXPECT_TRUE(test::error_says(msg, "auto or block (or unset: auto)")) << msg;
  EXPECT_TRUE(test::error_says(msg, "warp")) << msg;
}

}  // namespace
}  // namespace anvil
