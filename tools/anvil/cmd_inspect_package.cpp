// `anvil inspect MODEL.anvil`: a package's manifest in readable form (target and compile flags,
// symbols, input/output specs, constants, kernels, planned memory, sources), or as JSON. Reads
// the package with runtime::Package (no dlopen, no CPU check), so packages built for another
// ISA can be inspected too.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "runtime/cpu_features.h"
#include "runtime/package.h"

namespace anvil::cli {

namespace {

using nlohmann::json;

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string sizes_text(const runtime::TensorSpec& t) {
  return std::string(dtype_name(t.dtype)) + "[" + join(t.size_strings(), ", ") + "]";
}

std::string shape_text(const Shape& s) {
  std::vector<std::string> parts;
  for (int64_t d : s) parts.push_back(std::to_string(d));
  return "[" + join(parts, ", ") + "]";
}

/// The planned peak bytes at the symbols' maxima; -1 when a symbol is unbounded or the
/// formula does not parse.
int64_t peak_at_max(const runtime::Manifest& m) {
  if (m.planned_peak_bytes.empty()) return -1;
  try {
    SymEnv env;
    for (const auto& s : m.symbols) {
      if (s.range.max == SymRange::kSymMax) return -1;
      env[s.name] = s.range.max;
    }
    return SymInt::parse(m.planned_peak_bytes).evaluate(env);
  } catch (const std::exception&) {
    return -1;
  }
}

/// The features the package needs that this CPU lacks ("" when none or unknown).
std::string missing_features(const runtime::Manifest& m) {
  try {
    std::vector<std::string> need = runtime::target_cpu_features(m.target);
    need.insert(need.end(), m.cpu_features.begin(), m.cpu_features.end());
    std::vector<std::string> missing;
    for (const auto& f : need)
      if (!runtime::cpu_supports(f)) missing.push_back(f);
    return join(missing, ", ");
  } catch (const std::exception&) {
    return "";
  }
}

json manifest_object(const runtime::Manifest& m) {
  try {
    return json::parse(m.json);
  } catch (const std::exception&) {
    return json::object();
  }
}

/// The autotuner's choice per GEMM step (the manifest's "gemm" record), a symbolic M's per
/// bucket; nothing when the package was compiled without --autotune.
void print_gemm_choices(const json& gemm) {
  if (gemm.value("autotune", "off") == "off" || !gemm.contains("steps")) return;
  std::cout << "\nGEMM kernels (--autotune " << gemm.value("autotune", "?") << "):\n";
  auto choice = [](const json& c) {
    std::ostringstream os;
    os << c.value("kernel", "?");
    if (c.value("candidates", 0) > 0)
      os << "  (" << c.value("time_us", 0.0) << " us, best of " << c.value("candidates", 0) << ")";
    return os.str();
  };
  for (const auto& st : gemm["steps"]) {
    std::cout << "  " << std::left << std::setw(16) << st.value("step", "?") << " ";
    if (!st.contains("buckets")) {
      std::cout << choice(st) << "\n";
      continue;
    }
    std::cout << "per bucket of m:\n";
    for (const auto& b : st["buckets"]) {
      const std::string hi = b["m_max"].is_null() ? "inf" : std::to_string(b["m_max"].get<int64_t>());
      std::cout << "    m in [" << b.value("m_min", int64_t{0}) << ", " << hi << "]: " << choice(b)
                << "\n";
    }
  }
}

}  // namespace

int inspect_package(const std::string& path, bool as_json) {
  const auto pkg = runtime::Package::open(path);
  const runtime::Manifest& m = pkg->manifest();
  const json raw = manifest_object(m);
  const json build = raw.value("build", json::object());
  const json kernels = raw.value("kernels", json::array());
  const int64_t peak = peak_at_max(m);
  const std::string missing = missing_features(m);
  std::error_code ec;
  const auto file_bytes = std::filesystem::file_size(path, ec);

  if (as_json) {
    json j;
    j["model"] = path;
    j["package_bytes"] = file_bytes;
    j["weights_bytes"] = pkg->weights().size();
    j["model_so_bytes"] = pkg->model_so().size();
    j["format_version"] = m.format_version;
    j["anvil_version"] = m.anvil_version;
    j["target"] = m.target;
    j["cpu_features"] = m.cpu_features;
    j["runs_on_this_cpu"] = missing.empty();
    j["compile_flags"] = build.value("compile_flags", json::array());
    j["symbols"] = json::array();
    for (const auto& s : m.symbols) {
      json e = {{"name", s.name}, {"min", s.range.min}};
      if (s.range.max != SymRange::kSymMax) e["max"] = s.range.max;
      j["symbols"].push_back(e);
    }
    for (const char* key : {"inputs", "outputs"}) {
      j[key] = json::array();
      for (const auto& t : key[0] == 'i' ? m.inputs : m.outputs)
        j[key].push_back(
            {{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"sizes", t.size_strings()}});
    }
    j["constants"] = json::array();
    for (const auto& c : m.constants)
      j["constants"].push_back({{"name", c.name},
                                {"original_name", c.original_name},
                                {"kind", c.kind},
                                {"dtype", dtype_name(c.dtype)},
                                {"sizes", c.sizes},
                                {"bytes", c.nbytes},
                                {"mutable", c.is_mutable}});
    j["kernels"] = kernels;
    j["kernels_shared"] = raw.value("kernels_shared", 0);
    if (raw.contains("gemm")) j["gemm"] = raw["gemm"];  // the autotuner's choices
    if (raw.contains("host_steps")) {
      j["host_steps"] = raw["host_steps"];
      j["cudnn_convs"] = raw.value("cudnn_convs", json::array());
      j["direct_convs"] = raw.value("direct_convs", json::array());
      j["cuda_graphs"] = m.graph_capturable && m.host_steps == 0;
    }
    j["planned_peak_bytes"] = m.planned_peak_bytes;
    if (peak >= 0) j["planned_peak_bytes_at_max"] = peak;
    j["sources"] = pkg->source_names();
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }

  std::cout << "package: " << path << "  (" << bytes_str(file_bytes) << ")\n"
            << "anvil version " << m.anvil_version << ", format " << m.format_version << "\n"
            << "target: " << m.target;
  if (!m.cpu_features.empty()) std::cout << "  (needs " << join(m.cpu_features, ", ") << ")";
  std::cout << (missing.empty() ? "" : "  -- this CPU lacks " + missing) << "\n";
  if (build.contains("compile_flags"))
    std::cout << "compile flags: "
              << join(build["compile_flags"].get<std::vector<std::string>>(), " ") << "\n";
  std::cout << "\ninputs:\n";
  for (size_t k = 0; k < m.inputs.size(); ++k)
    std::cout << "  " << k << "  " << std::left << std::setw(20) << m.inputs[k].name << " "
              << sizes_text(m.inputs[k]) << "\n";
  std::cout << "\noutputs:\n";
  for (size_t k = 0; k < m.outputs.size(); ++k)
    std::cout << "  " << k << "  " << std::left << std::setw(20) << m.outputs[k].name << " "
              << sizes_text(m.outputs[k]) << "\n";
  std::cout << "\nsymbols:\n";
  if (m.symbols.empty()) std::cout << "  (none: all shapes static)\n";
  for (const auto& s : m.symbols) std::cout << "  " << s.name << " in " << s.range.str() << "\n";

  std::cout << "\nconstants: " << m.constants.size() << ", weights.bin "
            << bytes_str(pkg->weights().size()) << "\n";
  for (const auto& c : m.constants) {
    std::ostringstream line;
    line << "  " << std::left << std::setw(28) << c.name << " " << std::setw(24)
         << (c.original_name.empty() ? "-" : c.original_name) << " " << std::setw(10) << c.kind
         << " " << dtype_name(c.dtype) << shape_text(c.sizes) << "  " << c.nbytes << " bytes"
         << (c.is_mutable ? "  (mutable)" : "");
    std::cout << line.str() << "\n";
  }
  std::cout << "\nkernels: " << kernels.size();
  if (raw.value("kernels_shared", 0) > 0)  // kernel de-duplication (docs/design_notes.md)
    std::cout << " (" << raw.value("kernels_shared", 0) << " share another kernel's code)";
  std::cout << "\n";
  for (const auto& k : kernels) {
    std::vector<std::string> nodes;
    if (k.contains("nodes") && k["nodes"].is_array())
      for (const auto& n : k["nodes"])
        if (n.is_string()) nodes.push_back(n.get<std::string>());
    std::cout << "  " << std::left << std::setw(16) << k.value("name", "?") << " " << std::setw(7)
              << k.value("kind", "?") << " " << join(nodes, ", ");
    if (k.contains("target") && k["target"].is_string())
      std::cout << "  -> " << k["target"].get<std::string>();
    std::cout << "\n";
  }
  print_gemm_choices(raw.value("gemm", json::object()));
  if (raw.contains("host_steps") && raw["host_steps"].is_array()) {
    // Device packages: the steps that run their CPU kernel on host copies of the tensors.
    const json& hs = raw["host_steps"];
    std::cout << "\nhost steps: " << hs.size()
              << (hs.empty() ? " (every step runs on the device)"
                             : " (CPU kernels on host copies: the stream is drained around each)")
              << "\n";
    for (const auto& h : hs)
      std::cout << "  " << std::left << std::setw(16) << h.value("name", "?") << " "
                << h.value("target", "?") << "  (" << h.value("why", "") << ")\n";
    const json convs = raw.value("cudnn_convs", json::array());
    if (!convs.empty())  // on cuDNN (device ABI 5), their host path kept behind them
      std::cout << "cuDNN convolutions: " << convs.size()
                << " (each runs its host path where cuDNN has no engine at run time)\n";
    const json direct = raw.value("direct_convs", json::array());
    if (!direct.empty())
      std::cout << "anvil's direct convolution kernels (depthwise, few input channels): "
                << direct.size() << "\n";
    const json syncs = raw.value("host_syncs", json::array());
    std::cout << "CUDA graphs: ";
    if (m.graph_capturable && m.host_steps == 0)
      std::cout << "yes (a run is captured on its shape's second run, then replayed)\n";
    else
      std::cout << "no (" << (hs.empty() ? "" : "host steps") << (hs.empty() || syncs.empty() ? "" : ", ")
                << (syncs.empty() ? "" : str(syncs.size(), " step(s) wait on the host")) << ")\n";
  }
  std::cout << "\nplanned memory: ";
  if (m.planned_peak_bytes.empty())
    std::cout << "unknown";
  else if (peak >= 0 && m.planned_peak_bytes == std::to_string(peak))
    std::cout << bytes_str(static_cast<size_t>(peak)) << " of scratch";
  else
    std::cout << m.planned_peak_bytes << " bytes of scratch"
              << (peak >= 0
                      ? " (" + bytes_str(static_cast<size_t>(peak)) + " at the largest shapes)"
                      : std::string(" (unbounded)"));
  std::cout << "\nmodel.so: " << bytes_str(pkg->model_so().size())
            << "\nsources: " << join(pkg->source_names(), ", ") << "\n";
  return kExitOk;
}

}  // namespace anvil::cli
