// spec/collectives.md section 4 case 47: a collective issued outside the compiled graph (through
// the functional API) whose result the graph waits on (coll_c47_wait_input: wait_tensor(x) + 1).
// Model::run waits for work pending on its inputs' storage, so the graph reads the reduced
// values even when the peer joins the collective late.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "dist/functional.h"
#include "dist_harness.h"
#include "driver/compile.h"
#include "runtime/model.h"

namespace anvil::dist::test {
namespace {

namespace fs = std::filesystem;

/// Rank 1 joins the all_reduce 300 ms late: rank 0's run would read its unreduced input if
/// Model::run did not wait for the pending work.
DIST_WORKER(compiled_waits_on_input) {
  runtime::Model model = runtime::Model::load(std::getenv("ANVIL_TEST_PACKAGE"));
  for (int iter = 0; iter < 2; ++iter) {
    const Tensor x = Tensor::full({4, 8}, ctx.rank + 1 + iter, DType::kFloat32);
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const Tensor pending = functional::all_reduce(x, "sum", "0");
    const Tensor got = model.run({pending})[0];
    // sum over ranks of (r + 1 + iter), plus one
    double want = 1;
    for (int r = 0; r < ctx.world; ++r) want += r + 1 + iter;
    for (double v : got.to_doubles()) ASSERT_EQ(v, want) << "rank " << ctx.rank << " iter " << iter;
  }
}

class CompiledBoundary : public ::testing::TestWithParam<std::string> {};

TEST_P(CompiledBoundary, Case47_GraphWaitsOnACollectiveIssuedBeforeTheRun) {
  const std::string backend = GetParam();
  if (!backend_available(backend)) GTEST_SKIP() << backend << " not available";
  const std::string dir = (fs::temp_directory_path() / "anvil_c47_XXXXXX").string();
  std::string tmp = dir;
  ASSERT_NE(mkdtemp(tmp.data()), nullptr);
  const std::string pkg = tmp + "/c47.anvil";
  driver::CompileOptions o;
  o.jobs = 2;
  o.progress = codegen::ProgressMode::kQuiet;
  driver::compile_pt2(std::string(ANVIL_FIXTURES_DIR) + "/coll/coll_c47_wait_input.pt2", pkg, o);
  JobOptions jo;
  jo.env["ANVIL_TEST_PACKAGE"] = pkg;
  jo.deadline = std::chrono::milliseconds(60000);
  const auto r = run_job(backend, 2, "compiled_waits_on_input", jo);
  EXPECT_TRUE(r.ok()) << r.all_output();
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

INSTANTIATE_TEST_SUITE_P(Dist, CompiledBoundary, ::testing::Values("gloo", "mpi"));

}  // namespace
}  // namespace anvil::dist::test
