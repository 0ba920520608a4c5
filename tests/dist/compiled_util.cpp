#include "compiled_util.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <gtest/gtest.h>

#include "dist/fake_process_group.h"
#include "dist/world.h"
#include "dist_harness.h"
#include "driver/compile.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "passes/collectives.h"
#include "passes/pipeline.h"

namespace anvil::dist::test {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  const std::string top = std::string(ANVIL_FIXTURES_DIR) + "/" + name + ".pt2";
  if (fs::exists(top)) return top;
  return std::string(ANVIL_FIXTURES_DIR) + "/coll/" + name + ".pt2";
}

Tensor world_scaled_reference(const std::string& name, const Tensor& x, int world) {
  // A one-rank fake world for the interpreter, taken down again after (the test binary's
  // later tests, run in one process, must not find a world already made)
  struct FakeWorld {
    bool mine = !dist::world_initialized();
    FakeWorld() {
      if (mine) dist::set_world(std::make_shared<dist::FakeProcessGroup>(0, 1));
    }
    ~FakeWorld() {
      if (mine) dist::clear_world();
    }
  } world_guard;
  auto g = frontend::load_pt2(fixture(name));
  interp::Interpreter interp(*g);
  const auto out = interp.run({x});
  std::vector<double> v = out[0].to_doubles();
  for (double& d : v) d *= world;
  return Tensor::from_vector(v, out[0].sizes()).to(out[0].dtype());
}

const std::string& temp_dir() {
  struct Dir {
    std::string path;
    Dir() {
      path = (fs::temp_directory_path() / "anvil_coll_XXXXXX").string();
      if (!mkdtemp(path.data())) throw std::runtime_error("mkdtemp failed");
    }
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static Dir dir;
  return dir.path;
}

std::string compile_fixture(const std::string& name, bool reorder, bool bucket) {
  static std::map<std::string, std::string> done;
  const std::string out = temp_dir() + "/" + name + (reorder ? "_r" : "") + (bucket ? "_b" : "") +
                          ".anvil";
  if (done.count(out)) return out;
  setenv("ANVIL_COLLECTIVE_REORDER", reorder ? "1" : "0", 1);
  setenv("ANVIL_COLLECTIVE_BUCKET", bucket ? "1" : "0", 1);
  driver::CompileOptions o;
  o.jobs = 2;
  o.progress = codegen::ProgressMode::kQuiet;
  driver::compile_pt2(fixture(name), out, o);
  unsetenv("ANVIL_COLLECTIVE_REORDER");
  unsetenv("ANVIL_COLLECTIVE_BUCKET");
  done[out] = out;
  return out;
}

passes::Program program_of(const std::string& name, bool reorder, bool bucket) {
  auto g = frontend::load_pt2(fixture(name));
  passes::PipelineOptions o;
  o.collectives.reorder = reorder;
  o.collectives.bucket = bucket;
  return passes::compile_to_program(*g, o);
}

const passes::ExternStep* issue_at(const passes::Program& p, size_t i) {
  const auto* e = std::get_if<passes::ExternStep>(&p.steps[i]);
  return e && passes::is_collective_issue(*e) ? e : nullptr;
}

const passes::ExternStep* wait_at(const passes::Program& p, size_t i) {
  const auto* e = std::get_if<passes::ExternStep>(&p.steps[i]);
  return e && passes::is_collective_wait(*e) ? e : nullptr;
}

std::vector<size_t> issues(const passes::Program& p) {
  std::vector<size_t> out;
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (issue_at(p, i)) out.push_back(i);
  return out;
}

size_t first_wait(const passes::Program& p, int id) {
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (const auto* w = wait_at(p, i); w && passes::collective_id(*w) == id) return i;
  return p.steps.size();
}

bool step_has_node(const passes::Program& p, size_t i, const std::string& node) {
  for (const auto& n : passes::step_nodes(p.steps[i]))
    if (n == node) return true;
  return false;
}

void PrintTo(const CaseRun& c, std::ostream* os) {
  *os << "case " << c.number << ": " << c.fixture << " on " << c.backend << ", " << c.world
      << " ranks";
}

std::vector<CaseRun> runs_on_2_to_4_ranks(const std::vector<std::pair<int, const char*>>& cases) {
  std::vector<CaseRun> v;
  for (const auto& [n, f] : cases)
    for (int w : {2, 3, 4})
      for (const char* b : {"gloo", "mpi"})
        v.push_back(
            {n, f, w == 2 ? std::string(f) : f + std::string("_w") + std::to_string(w), b, w});
  return v;
}

void run_package_job(const CaseRun& c, const char* worker) {
  if (!backend_available(c.backend)) GTEST_SKIP() << c.backend << " not available";
  JobOptions o;
  o.env["ANVIL_TEST_PACKAGE"] = compile_fixture(c.fixture);
  o.env["ANVIL_TEST_FIXTURE"] = fixture(c.fixture);
  o.deadline = std::chrono::milliseconds(90000);
  const auto r = run_job(c.backend, c.world, worker, o);
  EXPECT_TRUE(r.ok()) << r.all_output();
}

}  // namespace anvil::dist::test
