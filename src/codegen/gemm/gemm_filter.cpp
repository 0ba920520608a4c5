#include "codegen/gemm/gemm_filter.h"

#include <algorithm>
#include <cctype>
#include <regex.h>

#include <memory>
#include <set>

#include "core/error.h"

namespace anvil::codegen::gemm {

namespace {

std::vector<int> alignment_list(DType d) {
  switch (d) {
    case DType::kFloat16:
    case DType::kBFloat16: return {8, 4, 2, 1};
    case DType::kFloat32: return {4, 2, 1};
    case DType::kInt8:
    case DType::kUInt8: return {16, 8, 4, 2};
    case DType::kInt32: return {4, 2, 1};
    default: return {};
  }
}

std::string lower_trim(std::string s) {
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), [](unsigned char c) { return !std::isspace(c); }));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// A compiled POSIX extended regex (not std::regex: the compiler never uses it, see
/// tests/layers "NoStdRegexInTheCompiler"), searched unanchored.
class Regex {
 public:
  Regex(const std::string& text, const char* option) {
    const int rc = ::regcomp(&re_, text.c_str(), REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
      char buf[256];
      ::regerror(rc, &re_, buf, sizeof buf);
      throw Error("invalid regular expression", option, "a POSIX extended regex",
                  "\"" + text + "\" (" + buf + ")");
    }
  }
  ~Regex() { ::regfree(&re_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  bool search(const std::string& s) const { return ::regexec(&re_, s.c_str(), 0, nullptr, 0) == 0; }

 private:
  regex_t re_{};
};

}  // namespace

int max_alignment(DType dtype, const std::vector<int64_t>& sizes,
                  const std::vector<int64_t>& strides, int64_t offset) {
  const std::vector<int> list = alignment_list(dtype);
  if (list.empty()) return 0;
  size_t unit = sizes.size();
  for (size_t d = sizes.size(); d-- > 0;)
    if (strides[d] == 1) {
      unit = d;
      break;
    }
  if (unit == sizes.size()) return 1;
  for (int a : list) {
    if (sizes[unit] % a != 0 || offset % a != 0) continue;
    bool ok = true;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (d != unit && strides[d] % a != 0) ok = false;
    if (ok) return a;
  }
  return 1;
}

bool template_eligible(const GemmProblem& p, const GemmOptions& options, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (!p.is_static()) return no("symbolic sizes (templates need static shapes)");
  if (*p.m <= 0 || *p.n <= 0 || *p.k <= 0 || p.batch <= 0) return no("a zero-sized dim");
  const int64_t mnk = *p.m * *p.n * *p.k;
  if (mnk < options.min_gemm_size)
    return no("M*N*K = " + std::to_string(mnk) + " below the minimum " +
              std::to_string(options.min_gemm_size));
  switch (p.out_dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kInt32: break;
    default: return no(std::string("output dtype ") + dtype_name(p.out_dtype));
  }
  return true;
}

bool is_library_backend(GemmBackend b) {
  return b == GemmBackend::kOpenBlas || b == GemmBackend::kOneDnn || b == GemmBackend::kCublasLt;
}

std::vector<GemmCandidate> filter_candidates(std::vector<GemmCandidate> candidates,
                                             const GemmOptions& options, int cap) {
  std::unique_ptr<Regex> allow, deny;
  if (!options.allow_regex.empty())
    allow = std::make_unique<Regex>(options.allow_regex, "--gemm-allow");
  if (options.deny_regex && !options.deny_regex->empty())
    deny = std::make_unique<Regex>(*options.deny_regex, "--gemm-deny");
  std::vector<GemmCandidate> out;
  std::set<std::string> seen;
  int templates = 0;
  for (auto& c : candidates) {
    const bool library = is_library_backend(c.backend) || c.source.empty();
    if (allow && !allow->search(c.name)) continue;
    if (deny && deny->search(c.name)) continue;
    if (!seen.insert(c.name).second) continue;
    if (!library) {
      if (cap > 0 && templates >= cap) continue;
      ++templates;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<GemmBackend> parse_backends(const std::string& list) {
  std::vector<GemmBackend> out;
  auto add = [&](GemmBackend b) {
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  };
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = lower_trim(list.substr(start, comma - start));
    start = comma + 1;
    if (name.empty()) continue;
    if (name == "own") add(GemmBackend::kOwn);
    else if (name == "openblas") add(GemmBackend::kOpenBlas);
    else if (name == "onednn") add(GemmBackend::kOneDnn);
    else if (name == "cublaslt") add(GemmBackend::kCublasLt);
    else if (name == "cutlass") add(GemmBackend::kCutlass);
    else if (name == "aten") {
      add(GemmBackend::kOpenBlas);
      add(GemmBackend::kOneDnn);
      add(GemmBackend::kCublasLt);
    } else {
      throw Error("unknown GEMM backend", "--gemm-backends",
                  "own, openblas, onednn, cublaslt, cutlass or aten", "\"" + name + "\"");
    }
  }
  if (out.empty())
    throw Error("no GEMM backend named", "--gemm-backends", "a comma-separated list",
                "\"" + list + "\"");
  return out;
}

AutotuneMode parse_autotune_mode(const std::string& s) {
  const std::string v = lower_trim(s);
  if (v == "off") return AutotuneMode::kOff;
  if (v == "fast") return AutotuneMode::kFast;
  if (v == "max") return AutotuneMode::kMax;
  throw Error("unknown autotune mode", "--autotune", "off, fast or max", "\"" + s + "\"");
}

const char* autotune_mode_name(AutotuneMode m) {
  switch (m) {
    case AutotuneMode::kOff: return "off";
    case AutotuneMode::kFast: return "fast";
    case AutotuneMode::kMax: return "max";
  }
  return "?";
}

bool backend_enabled(const GemmOptions& options, GemmBackend b) {
  return options.backends.empty() ||
         std::find(options.backends.begin(), options.backends.end(), b) != options.backends.end();
}

}  // namespace anvil::codegen::gemm
