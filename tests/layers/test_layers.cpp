// The layers of docs/architecture.md, checked on the sources: a file in src/<layer>/ may include
// headers of its own layer and of the layers in its "may use" column only (and the public
// include/anvil/ headers). An upward include (the runtime including the IR, the reference
// kernels including the runtime's kernels, the frontend including dist) fails here, naming the
// file, the line and the layer it reached.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// layer -> the layers it may use (besides itself), read from src/layers.txt: the table the build
/// makes each layer's include root from.
const std::map<std::string, std::set<std::string>>& may_use() {
  static const std::map<std::string, std::set<std::string>> kTable = [] {
    std::map<std::string, std::set<std::string>> t;
    std::ifstream in(fs::path(ANVIL_SOURCE_DIR) / "src" / "layers.txt");
    for (std::string l; std::getline(in, l);) {
      const size_t colon = l.find(':');
      if (l.empty() || l[0] == '#' || colon == std::string::npos) continue;
      auto& uses = t[l.substr(0, colon)];
      std::istringstream rest(l.substr(colon + 1));
      for (std::string u; rest >> u;) uses.insert(u);
    }
    return t;
  }();
  return kTable;
}

struct Violation {
  std::string file;
  int line;
  std::string text;
};

/// Every `#include "X/..."` of a file under `dir` whose X is a layer `layer` may not use.
std::vector<Violation> violations(const fs::path& src, const std::string& layer) {
  std::vector<Violation> out;
  const auto& allowed = may_use().at(layer);
  for (const auto& e : fs::recursive_directory_iterator(src / layer)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".def" && ext != ".cu"))
      continue;
    std::ifstream in(e.path());
    int n = 0;
    for (std::string l; std::getline(in, l);) {
      ++n;
      const size_t inc = l.find("#include \"");
      if (inc == std::string::npos || l.find_first_not_of(" \t") != inc) continue;
      const size_t start = inc + 10, slash = l.find('/', start);
      if (slash == std::string::npos) continue;
      const std::string target = l.substr(start, slash - start);
      if (target == layer || target == "anvil" || allowed.count(target)) continue;
      if (!may_use().count(target)) continue;  // not a layer (a relative folder of its own)
      out.push_back({fs::relative(e.path(), src.parent_path()).string(), n, l});
    }
  }
  return out;
}

/// Upward includes allowed on purpose, each with its reason; a new one fails, and so does a
/// listed one that is gone (the list cannot go stale). Empty: the reference kernels of scatter,
/// transposed convolution and embedding_bag no longer call the runtime's kernels.
const std::map<std::string, const char*>& known_violations() {
  static const std::map<std::string, const char*> kList = {};
  return kList;
}

TEST(Layers, NoLayerIncludesALayerAboveIt) {
  const fs::path src = fs::path(ANVIL_SOURCE_DIR) / "src";
  std::set<std::string> seen, listed_seen;
  for (const auto& e : fs::directory_iterator(src))
    if (e.is_directory()) seen.insert(e.path().filename().string());
  for (const auto& [layer, allowed] : may_use()) {
    SCOPED_TRACE(layer);
    EXPECT_TRUE(seen.count(layer)) << "src/" << layer << " is in the table but not in src/";
    for (const Violation& v : violations(src, layer)) {
      if (known_violations().count(v.file)) {
        listed_seen.insert(v.file);
        continue;
      }
      ADD_FAILURE() << v.file << ":" << v.line << ": layer '" << layer
                    << "' may not include this: " << v.text;
    }
  }
  for (const auto& [file, why] : known_violations())
    EXPECT_TRUE(listed_seen.count(file))
        << file << " no longer includes upward: remove it from known_violations() (" << why
        << ")";
  for (const auto& d : seen)
    EXPECT_TRUE(may_use().count(d)) << "src/" << d << " is a folder with no row in the layer table";
}

// The scanner itself: a planted upward include in a scratch tree is reported.
TEST(Layers, APlantedUpwardIncludeIsReported) {
  const fs::path root = fs::temp_directory_path() / ("anvil_layers_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "src" / "ops");
  std::ofstream(root / "src" / "ops" / "bad.cpp")
      << "#include \"ops/common.h\"\n#include \"core/tensor.h\"\n"
         "#include \"runtime/kernels/scatter.h\"\n#include <vector>\n";
  const auto v = violations(root / "src", "ops");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].line, 3);
  EXPECT_NE(v[0].text.find("runtime/kernels/scatter.h"), std::string::npos);
  fs::remove_all(root);
}

// The build enforces the table too: a layer's sources see only its include root
// (build/layer_roots/<layer>/), so an upward include does not compile while a downward one does.
TEST(Layers, TheBuildRefusesAnUpwardInclude) {
  ASSERT_EQ(may_use().at("ops"), (std::set<std::string>{"ir", "core"}));
  const fs::path dir = fs::temp_directory_path() / ("anvil_layers_cc_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto compiles = [&](const std::string& include, std::string& log) {
    const fs::path file = dir / "planted.cpp", out = dir / "log.txt";
    std::ofstream(file) << "#include \"" << include << "\"\nint main() { return 0; }\n";
    const std::string cmd = std::string(ANVIL_CXX) + " -std=c++20 -fsyntax-only -I" +
                            ANVIL_LAYER_ROOTS + "/ops -I" + ANVIL_SOURCE_DIR + "/include " +
                            file.string() + " > " + out.string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(out);
    log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return rc == 0;
  };
  std::string log;
  EXPECT_TRUE(compiles("ir/graph.h", log)) << log;  // ops may use ir
  EXPECT_FALSE(compiles("runtime/kernels/scatter.h", log));
  EXPECT_NE(log.find("runtime/kernels/scatter.h"), std::string::npos) << log;
  EXPECT_FALSE(compiles("passes/loop_ir.h", log));  // nor a layer above it
  fs::remove_all(dir);
}

// Generated code is unbounded input: no std::regex may scan it (libstdc++'s regex recursed per
// character and overflowed the stack on a long BLOOM kernel).
TEST(Layers, NoStdRegexInTheCompiler) {
  const fs::path src = fs::path(ANVIL_SOURCE_DIR) / "src";
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path());
    int n = 0;
    for (std::string l; std::getline(in, l);) {
      ++n;
      if (l.find("#include <regex>") != std::string::npos ||
          (l.find("std::regex") != std::string::npos && l.find("//") == std::string::npos))
        ADD_FAILURE() << e.path().string() << ":" << n << ": " << l;
    }
  }
}

}  // namespace
