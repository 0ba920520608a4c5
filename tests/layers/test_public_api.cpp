// The public surface an installed anvil offers (cmake/anvil_install.cmake): the headers of
// include/anvil/ stand alone (they include nothing from src/ and compile with that folder alone,
// the C ones as C too), and the libanvil_rt that programs link exports exactly the functions
// anvil_c.h declares and depends on no other anvil library.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path include_dir() { return fs::path(ANVIL_SOURCE_DIR) / "include"; }

/// stdout of a shell command and its exit status.
std::pair<std::string, int> shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {"popen failed", -1};
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  return {out, ::pclose(p)};
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// `text` with its /* */ and // comments removed.
std::string strip_comments(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 1;
    } else if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
      out += '\n';
    } else {
      out += text[i];
    }
  }
  return out;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// The functions a C header declares whose names start with `prefix` (an identifier followed,
/// past blanks, by '(').
std::set<std::string> declared_functions(const fs::path& header, const std::string& prefix) {
  const std::string text = strip_comments(read_text(header));
  std::set<std::string> out;
  for (size_t i = text.find(prefix); i != std::string::npos; i = text.find(prefix, i + 1)) {
    if (i > 0 && ident_char(text[i - 1])) continue;
    size_t j = i;
    while (j < text.size() && ident_char(text[j])) ++j;
    size_t k = j;
    while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
    if (k < text.size() && text[k] == '(') out.insert(text.substr(i, j - i));
  }
  return out;
}

TEST(PublicApi, HeadersIncludeNothingFromSrc) {
  size_t headers = 0;
  for (const auto& e : fs::directory_iterator(include_dir() / "anvil")) {
    if (e.path().extension() != ".h") continue;
    ++headers;
    std::ifstream in(e.path());
    int n = 0;
    for (std::string l; std::getline(in, l);) {
      ++n;
      const size_t at = l.find("#include");
      if (at == std::string::npos || l.find_first_not_of(" \t") != at) continue;
      const size_t q = l.find_first_of("<\"", at);
      ASSERT_NE(q, std::string::npos) << e.path() << ":" << n << ": " << l;
      if (l[q] == '<') continue;  // the C and C++ standard headers, <dlpack/dlpack.h>
      EXPECT_EQ(l.compare(q + 1, 6, "anvil/"), 0)
          << e.path() << ":" << n << ": a public header may include only <...> headers and the "
          << "other include/anvil/ headers, not: " << l;
    }
  }
  EXPECT_GE(headers, 4u);
}

TEST(PublicApi, EachHeaderCompilesAlone) {
  const fs::path dir = fs::temp_directory_path() / ("anvil_public_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(include_dir() / "anvil")) {
    if (e.path().extension() != ".h") continue;
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    // As C++ (every header), and as C (those of the C ABIs: all but anvil.h).
    std::vector<std::pair<std::string, std::string>> builds = {{ANVIL_CXX, "-x c++ -std=c++17"}};
    if (name != "anvil.h") builds.push_back({ANVIL_CC, "-x c -std=c99"});
    for (const auto& [compiler, lang] : builds) {
      const fs::path src = dir / "use.txt";
      std::ofstream(src) << "#include <anvil/" << name << ">\nint anvil_test_main(void);\n";
      const auto [out, rc] =
          shell(std::string(compiler) + " " + lang + " -fsyntax-only -Wall -Wextra -Werror -I" +
                include_dir().string() + " " + src.string());
      EXPECT_EQ(rc, 0) << compiler << " " << lang << ":\n" << out;
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST(PublicApi, RuntimeLibraryExportsTheCApiOnly) {
  const auto [nm, rc] = shell(std::string("nm -D --defined-only ") + ANVIL_PUBLIC_RT);
  ASSERT_EQ(rc, 0) << nm;
  std::set<std::string> exported;
  std::istringstream lines(nm);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string addr, kind, name;
    if (!(f >> addr >> kind >> name)) continue;
    if (kind == "A") continue;  // the version-script node, if any
    exported.insert(name.substr(0, name.find('@')));
  }
  const std::set<std::string> declared =
      declared_functions(include_dir() / "anvil" / "anvil_c.h", "anvil_");
  EXPECT_GE(declared.size(), 15u);
  for (const std::string& s : exported)
    EXPECT_TRUE(declared.count(s))
        << ANVIL_PUBLIC_RT << " exports " << s << ", which anvil_c.h does not declare";
  for (const std::string& s : declared)
    EXPECT_TRUE(exported.count(s))
        << "anvil_c.h declares " << s << ", which " << ANVIL_PUBLIC_RT << " does not export";

  // One library: it needs none of the layers' libraries (they stay private to the CLI).
  const auto [dyn, rc2] = shell(std::string("readelf -d ") + ANVIL_PUBLIC_RT);
  ASSERT_EQ(rc2, 0) << dyn;
  EXPECT_NE(dyn.find("(SONAME)             Library soname: [libanvil_rt.so.0]"), std::string::npos)
      << dyn;
  std::istringstream needed(dyn);
  for (std::string line; std::getline(needed, line);)
    if (line.find("(NEEDED)") != std::string::npos)
      EXPECT_EQ(line.find("libanvil_"), std::string::npos) << line;
}

}  // namespace
