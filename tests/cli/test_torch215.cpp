// Exports of a newer PyTorch (2.15, schema 8.20; tests/fixtures_215, written by
// scripts/export_fixtures_215.py) beside the 2.11 fixtures: every model is read, interpreted and
// compiled, and its package run, against PyTorch's own outputs, for every shape set it was
// saved with. An archive of a newer schema major is refused naming both versions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "core/error.h"
#include "core/npy.h"
#include "driver/compile.h"
#include "frontend/archive_util.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "runtime/model.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;

const char* const kModels[] = {"mlp_dynbatch", "const_and_buffer", "small_cnn",
                               "attn_block",   "cond_model",       "embed_argmax"};

std::string dir215() { return std::string(ANVIL_SOURCE_DIR) + "/tests/fixtures_215"; }
std::string pt2(const std::string& name) { return dir215() + "/" + name + ".pt2"; }

/// The shape-set suffixes saved for `name`: "" and then "_0", "_1", ... while inputs exist.
std::vector<std::string> suffixes(const std::string& name) {
  std::vector<std::string> out = {""};
  for (int k = 0; fs::exists(dir215() + "/" + name + ".in0_" + std::to_string(k) + ".npy"); ++k)
    out.push_back("_" + std::to_string(k));
  return out;
}

/// NAME.{kind}{i}{suffix}.npy for i = 0, 1, ... while the file exists.
std::vector<Tensor> read_set(const std::string& name, const char* kind, const std::string& sfx) {
  std::vector<Tensor> out;
  for (int i = 0;; ++i) {
    const std::string f = dir215() + "/" + name + "." + kind + std::to_string(i) + sfx + ".npy";
    if (!fs::exists(f)) break;
    out.push_back(read_npy(f));
  }
  return out;
}

/// Every output within the suite's tolerance of PyTorch's (integer outputs exactly).
void expect_match(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].sizes(), want[i].sizes()) << what << " output " << i;
    const double tol = is_floating(want[i].dtype()) ? 1e-4 : 0.0;
    EXPECT_TRUE(test::close(got[i].to_doubles(), want[i].to_doubles(), tol))
        << what << " output " << i;
  }
}

TEST(Torch215, ReadsAndInterpretsEveryFixture) {
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    const auto graph = frontend::load_pt2(pt2(name));
    EXPECT_EQ(graph->attributes.at("torch_version").rfind("2.15.", 0), 0u)
        << graph->attributes.at("torch_version");
    EXPECT_EQ(graph->attributes.at("schema_version"), "8.20");
    for (const std::string& sfx : suffixes(name)) {
      interp::Interpreter interp(*graph);  // fresh buffers for every set, as the export ran
      expect_match(interp.run(read_set(name, "in", sfx)), read_set(name, "out", sfx),
                   std::string(name) + " interpreted, set '" + sfx + "'");
    }
  }
}

TEST(Torch215, CompilesAndRunsEveryFixture) {
  const fs::path dir = fs::temp_directory_path() / ("anvil_torch215_" + std::to_string(getpid()));
  fs::remove_all(dir);
  driver::CompileOptions opts;
  opts.cache_dir = (dir / "cache").string();
  opts.progress = codegen::ProgressMode::kQuiet;
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    const std::string pkg = (dir / (std::string(name) + ".anvil")).string();
    driver::compile_pt2(pt2(name), pkg, opts);
    for (const std::string& sfx : suffixes(name)) {
      // A fresh model per set: const_and_buffer's buffers start from their exported values.
      const runtime::Model m = runtime::Model::load(pkg);
      expect_match(m.run(read_set(name, "in", sfx)), read_set(name, "out", sfx),
                   std::string(name) + " compiled, set '" + sfx + "'");
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

/// mlp_dynbatch of PyTorch 2.15 with its model.json edited by `edit`, as archive bytes.
std::string doctored(const std::function<void(nlohmann::json&)>& edit) {
  test::Archive a = test::Archive::from_bytes(test::read_file_bytes(pt2("mlp_dynbatch")));
  nlohmann::json model = nlohmann::json::parse(a.at("models/model.json"));
  edit(model);
  a.at("models/model.json") = model.dump();
  return a.bytes();
}

TEST(Torch215, NewerSchemaMajorNamesBothVersions) {
  const std::string bytes = doctored([](nlohmann::json& m) {
    m["schema_version"]["major"] = 9;
    m["schema_version"]["minor"] = 2;
    m["torch_version"] = "2.19.0";
  });
  std::string msg;
  try {
    frontend::load_pt2_bytes(bytes, "future.pt2");
  } catch (const Error& e) {
    msg = e.what();
  }
  for (const char* part :
       {"future.pt2", "models/model.json: schema_version", "schema version too new for this anvil",
        "schema 8.x", "PyTorch 2.11 to 2.15", "8.17 to 8.20", "got 9.2",
        "written by PyTorch 2.19.0"})
    EXPECT_NE(msg.find(part), std::string::npos) << "lacks \"" << part << "\": " << msg;
}

TEST(Torch215, NewerSchemaMinorIsRead) {
  // A minor bump only adds optional fields: the graph still loads, and says what it read.
  const std::string bytes = doctored([](nlohmann::json& m) { m["schema_version"]["minor"] = 99; });
  const auto graph = frontend::load_pt2_bytes(bytes, "minor.pt2");
  EXPECT_EQ(graph->attributes.at("schema_version"), "8.99");
  interp::Interpreter interp(*graph);
  expect_match(interp.run(read_set("mlp_dynbatch", "in", "")), read_set("mlp_dynbatch", "out", ""),
               "schema 8.99");
}

}  // namespace
}  // namespace anvil
