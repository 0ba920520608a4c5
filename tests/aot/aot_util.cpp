// Batched compilation of the section 4 fixtures into packages, and output comparison.
#include "aot_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "codegen/generate.h"
#include "codegen/toolchain.h"
#include "core/error.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "runtime/package.h"

namespace anvil::aot_test {

namespace fs = std::filesystem;

namespace {

constexpr int kMergedFiles = 2;  // translation units all models' code is merged into

std::string fixture(const std::string& file) {
  return std::string(ANVIL_FIXTURES_DIR) + "/aot/" + file;
}

/// One model's generated code, before building.
struct Generated {
  codegen::CpuCodegenResult gen;
  std::string error;
};

/// Every fixture generated once per process, and the packages built so far.
class Suite {
 public:
  Suite() {
    dir_ = fs::temp_directory_path() / ("anvil_aot_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(std::string(ANVIL_FIXTURES_DIR) + "/aot"))
      // Fixtures with a NAME.weights.json ship zeroed weights that their own test regenerates
      // (test_aot_resnet.cpp); compiling them here would only cost time and memory.
      if (e.path().extension() == ".pt2" &&
          !fs::exists(fs::path(e.path()).replace_extension(".weights.json")))
        names.push_back(e.path().stem().string());
    std::sort(names.begin(), names.end());
    merged_.assign(kMergedFiles, "");
    size_t next = 0;
    for (const std::string& name : names) {
      Generated& g = generated_[name];
      try {
        auto graph = frontend::load_pt2(fixture(name + ".pt2"));
        codegen::CpuCodegenOptions o;
        o.cpp_namespace = "aot_" + name;
        o.entry_symbol = "entry_" + name;
        g.gen = codegen::generate_cpu(*graph, o);
      } catch (const Error& e) {
        g.error = e.what();
        continue;
      }
      flags_ = g.gen.compile_flags;
      for (const auto& src : g.gen.sources) merged_[next++ % merged_.size()] += src.text + "\n";
    }
  }
  ~Suite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  const Built& build_graph(const std::string& name, const ir::Graph& graph,
                           const std::string& target) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = built_.find("graph:" + name);
    if (it != built_.end()) return it->second;
    Built& b = built_["graph:" + name];
    try {
      codegen::CpuCodegenOptions o;
      o.target = target;
      const auto gen = codegen::generate_cpu(graph, o);
      b.stats = gen.stats;
      b.program_text = gen.program_text;
      std::vector<codegen::SourceFile> sources;
      for (const auto& s : gen.sources) sources.push_back({s.filename, s.text});
      codegen::ToolchainOptions to = toolchain();
      to.extra_flags = gen.compile_flags;
      to.target = target;
      const std::string so = (dir_ / ("graph_" + name + ".so")).string();
      codegen::build_shared_library(sources, so, to);
      runtime::PackageContents pc;
      pc.manifest_json = gen.manifest_json;
      pc.model_so_path = so;
      for (const auto& c : gen.constants) pc.constants.push_back(c.tensor);
      b.package = (dir_ / ("graph_" + name + ".anvil")).string();
      runtime::write_package(b.package, pc);
    } catch (const Error& e) {
      b.error = e.what();
    }
    return b;
  }

  const Built& build(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = built_.find(name);
    if (it != built_.end()) return it->second;
    Built& b = built_[name];
    auto g = generated_.find(name);
    if (g == generated_.end()) {
      b.error = "no fixture " + fixture(name + ".pt2");
      return b;
    }
    if (!g->second.error.empty()) {
      b.error = g->second.error;
      return b;
    }
    const codegen::CpuCodegenResult& gen = g->second.gen;
    b.stats = gen.stats;
    b.program_text = gen.program_text;
    const std::string so = (dir_ / (name + ".so")).string();
    try {
      try {
        build_merged(name, so);
      } catch (const Error& e) {
        std::fprintf(stderr, "note: the merged build failed, building %s alone: %.300s\n",
                     name.c_str(), e.what());
        build_alone(name, so);  // isolates a compiler error to the model that causes it
      }
      runtime::PackageContents pc;
      pc.manifest_json = gen.manifest_json;
      pc.model_so_path = so;
      for (const auto& c : gen.constants) pc.constants.push_back(c.tensor);
      for (const auto& s : gen.sources) pc.sources.emplace_back(s.filename, s.text);
      b.package = (dir_ / (name + ".anvil")).string();
      runtime::write_package(b.package, pc);
      runtime::Model::load(b.package);  // missing runtime kernels show here
    } catch (const Error& e) {
      b.error = e.what();
    }
    return b;
  }

 private:
  codegen::ToolchainOptions toolchain() const {
    codegen::ToolchainOptions to;
    to.extra_flags = flags_;
    to.progress = codegen::ProgressMode::kQuiet;
    to.include_dir = std::string(ANVIL_SOURCE_DIR) + "/include";
    return to;
  }

  /// model.so = the merged units (cached objects) + a stub exporting anvil_model_entry.
  void build_merged(const std::string& name, const std::string& so) {
    std::vector<codegen::SourceFile> sources;
    for (size_t i = 0; i < merged_.size(); ++i)
      sources.push_back({"aot_models_" + std::to_string(i) + ".cpp", merged_[i]});
    sources.push_back({"entry_" + name + ".cpp",
                       "#include \"anvil/anvil_rt.h\"\n"
                       "extern \"C\" const AnvilModelEntry* entry_" + name + "(void);\n"
                       "extern \"C\" __attribute__((visibility(\"default\"))) const "
                       "AnvilModelEntry* anvil_model_entry(void) {\n  return entry_" + name +
                           "();\n}\n"});
    codegen::build_shared_library(sources, so, toolchain());
  }

  /// model.so from this model's own sources (the package layout anvil compile writes).
  void build_alone(const std::string& name, const std::string& so) {
    auto graph = frontend::load_pt2(fixture(name + ".pt2"));
    const auto gen = codegen::generate_cpu(*graph, {});
    std::vector<codegen::SourceFile> sources;
    for (const auto& s : gen.sources) sources.push_back({s.filename, s.text});
    codegen::ToolchainOptions to = toolchain();
    to.extra_flags = gen.compile_flags;
    codegen::build_shared_library(sources, so, to);
  }

  fs::path dir_;
  std::map<std::string, Generated> generated_;
  std::vector<std::string> merged_;
  std::vector<std::string> flags_;
  std::map<std::string, Built> built_;
  std::mutex mutex_;
};

Suite& suite() {
  static Suite s;
  return s;
}

}  // namespace

const Built& build(const std::string& name) { return suite().build(name); }

const Built& build_graph(const std::string& name, const ir::Graph& graph,
                         const std::string& target) {
  return suite().build_graph(name, graph, target);
}

const char* known_unsupported(const std::string& name) {
  // Fixtures of tests/fixtures/aot that are expected not to build yet, each with its reason.
  // Empty today: every fixture builds. Add a row only with the issue that will remove it.
  static const std::map<std::string, const char*> kList = {};
  const auto it = kList.find(name);
  return it == kList.end() ? nullptr : it->second;
}

runtime::Model load(const Built& b, const runtime::ModelOptions& options) {
  return runtime::Model::load(b.package, options);
}

std::vector<Tensor> read_set(const std::string& name, const char* kind, const std::string& suffix) {
  std::vector<Tensor> out;
  for (int k = 0;; ++k) {
    const std::string f = fixture(name + "." + kind + std::to_string(k) + suffix + ".npy");
    if (!fs::exists(f)) break;
    out.push_back(read_npy(f));
  }
  return out;
}

std::vector<Tensor> inputs_for(const runtime::Model& m, const std::vector<Tensor>& ins) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < ins.size(); ++i) {
    const DType want = i < m.input_specs().size() ? m.input_specs()[i].dtype : ins[i].dtype();
    out.push_back(ins[i].to(want));
  }
  return out;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return 5e-3;
    case DType::kBFloat16:
      return 3e-2;
    default:
      return 1e-4;
  }
}

double rel_error(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes()) return INFINITY;
  return ::anvil::test::rel_error(got.to_doubles(), want.to_doubles());
}

void expect_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                    const std::string& label) {
  ASSERT_EQ(got.size(), want.size()) << label << ": number of outputs";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].sizes(), want[i].sizes()) << label << " output " << i;
    EXPECT_LE(rel_error(got[i], want[i]), tolerance(got[i].dtype()))
        << label << " output " << i << " (" << got[i].type_str() << ")";
  }
}

void check_against_pytorch(const std::string& name) {
  ANVIL_AOT_LOAD(model, name);
  auto graph = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2");
  interp::Interpreter ref(*graph);
  int sets = 0;
  for (const std::string suffix : {"", "_0", "_1"}) {
    const auto ins = read_set(name, "in", suffix);
    const auto want = read_set(name, "out", suffix);
    if (want.empty()) continue;
    ++sets;
    expect_outputs(model.run(inputs_for(model, ins)), want, name + suffix + " (package)");
    expect_outputs(ref.run(inputs_for(model, ins)), want, name + suffix + " (interpreter)");
  }
  EXPECT_GT(sets, 0) << name << ": no fixture outputs";
}

std::set<std::string> imported_targets(const std::string& name) {
  auto g = frontend::load_pt2(std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2");
  std::set<std::string> t;
  for (const ir::Node* n : g->nodes()) t.insert(n->target);
  return t;
}

}  // namespace anvil::aot_test
