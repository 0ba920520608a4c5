// `anvil inspect`: the signature of a .pt2 (inputs with symbolic shapes and ranges, weights,
// outputs), an op histogram and the text IR; or the same facts as JSON. A .anvil package is
// described by cmd_inspect_package.cpp.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "commands.h"
#include "frontend/pt2_reader.h"
#include "ir/printer.h"

namespace anvil::cli {

namespace {

/// Bytes a weight takes: from the loaded tensor, else from its (static) declared type.
size_t weight_bytes(const ir::Graph& g, const ir::InputSpec& s) {
  auto it = g.constants.find(s.target);
  if (it != g.constants.end()) return it->second.nbytes();
  int64_t n = 1;
  for (const auto& d : s.value->type.sizes) n *= d.maybe_constant().value_or(0);
  return static_cast<size_t>(n) * dtype_size(s.value->type.dtype);
}

/// "s77 in [1, 64]" for every symbol of a type, or "".
std::string ranges_of(const ir::Graph& g, const ir::TensorType& t) {
  std::set<std::string> syms;
  for (const auto& d : t.sizes) d.collect_symbols(syms);
  std::string out;
  for (const auto& s : syms) {
    auto it = g.symbol_ranges.find(s);
    out += (out.empty() ? "" : ", ") + s + " in " +
           (it == g.symbol_ranges.end() ? std::string("[0, inf]") : it->second.str());
  }
  return out;
}

/// Target -> count, most frequent first (ties by name).
std::vector<std::pair<std::string, int>> op_histogram(const ir::Graph& g) {
  std::map<std::string, int> counts;
  for (const ir::Node* n : g.nodes()) ++counts[n->target];
  std::vector<std::pair<std::string, int>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string value_type_str(const ir::Value* v) {
  return v ? ir::print_value_type(*v) : std::string("constant");
}

void print_text(const std::string& path, const ir::Graph& g, bool with_ir) {
  std::cout << "model: " << path;
  for (const char* key : {"torch_version", "schema_version"})
    if (auto it = g.attributes.find(key); it != g.attributes.end())
      std::cout << "  " << key << " " << it->second;
  std::cout << "\n\ninputs:\n";
  size_t k = 0;
  for (const auto& s : g.input_specs()) {
    if (s.kind != ir::InputKind::kUserInput) continue;
    std::ostringstream line;
    line << "  " << k++ << "  " << std::left << std::setw(20) << s.value->name << " "
         << std::setw(24) << value_type_str(s.value);
    if (s.constant_int) line << " constant " << *s.constant_int;
    if (s.value->is_tensor()) line << " " << ranges_of(g, s.value->type);
    std::string text = line.str();
    text.erase(text.find_last_not_of(' ') + 1);
    std::cout << text << "\n";
  }
  size_t total = 0;
  for (auto kind : {ir::InputKind::kParameter, ir::InputKind::kBuffer, ir::InputKind::kConstant}) {
    size_t count = 0, bytes = 0;
    std::ostringstream rows;
    for (const auto& s : g.input_specs()) {
      if (s.kind != kind) continue;
      const size_t b = weight_bytes(g, s);
      ++count, bytes += b;
      rows << "  " << std::left << std::setw(28) << s.target << " " << std::setw(24)
           << value_type_str(s.value) << " " << b << " bytes"
           << (kind == ir::InputKind::kBuffer && !s.persistent ? "  (non-persistent)" : "") << "\n";
    }
    total += bytes;
    const char* title = kind == ir::InputKind::kParameter ? "parameters"
                        : kind == ir::InputKind::kBuffer  ? "buffers"
                                                          : "constants";
    std::cout << "\n" << title << ": ";
    if (count == 0)
      std::cout << "none\n";
    else
      std::cout << count << ", " << bytes_str(bytes) << "\n" << rows.str();
  }
  std::cout << "\ntotal weight bytes: " << bytes_str(total) << "\n\noutputs:\n";
  k = 0;
  for (const auto& o : g.output_specs()) {
    std::cout << "  " << k++ << "  " << std::left << std::setw(20)
              << (o.value ? o.value->name : std::string("-")) << " " << std::setw(24)
              << value_type_str(o.value) << " " << ir::output_kind_name(o.kind);
    if (!o.target.empty()) std::cout << " -> " << o.target;
    std::cout << "\n";
  }
  std::cout << "\nsymbols:\n";
  if (g.symbol_ranges.empty()) std::cout << "  (none: all shapes static)\n";
  for (const auto& [name, r] : g.symbol_ranges)
    std::cout << "  " << name << " in " << r.str() << "\n";
  std::cout << "\nops: " << g.num_nodes() << " nodes\n";
  for (const auto& [target, count] : op_histogram(g))
    std::cout << "  " << std::right << std::setw(5) << count << "  " << target << "\n";
  if (with_ir) std::cout << "\nir:\n" << ir::print_graph(g);
}

void print_json(const std::string& path, const ir::Graph& g, bool with_ir) {
  using nlohmann::json;
  json j;
  j["model"] = path;
  j["attributes"] = g.attributes;
  j["inputs"] = json::array();
  j["weights"] = json::array();
  for (const auto& s : g.input_specs()) {
    json e = {{"kind", ir::input_kind_name(s.kind)}, {"type", value_type_str(s.value)}};
    if (s.value) e["name"] = s.value->name;
    if (s.kind == ir::InputKind::kUserInput) {
      if (s.constant_int) e["constant"] = *s.constant_int;
      j["inputs"].push_back(e);
    } else if (s.kind == ir::InputKind::kParameter || s.kind == ir::InputKind::kBuffer ||
               s.kind == ir::InputKind::kConstant) {
      e["target"] = s.target;
      e["bytes"] = weight_bytes(g, s);
      j["weights"].push_back(e);
    }
  }
  j["outputs"] = json::array();
  for (const auto& o : g.output_specs()) {
    json e = {{"kind", ir::output_kind_name(o.kind)}, {"type", value_type_str(o.value)}};
    if (o.value) e["name"] = o.value->name;
    if (!o.target.empty()) e["target"] = o.target;
    j["outputs"].push_back(e);
  }
  j["symbols"] = json::object();
  for (const auto& [name, r] : g.symbol_ranges) {
    j["symbols"][name] = {{"min", r.min}};
    if (r.max != SymRange::kSymMax) j["symbols"][name]["max"] = r.max;
  }
  j["ops"] = json::array();
  for (const auto& [target, count] : op_histogram(g))
    j["ops"].push_back({{"target", target}, {"count", count}});
  if (with_ir) j["ir"] = ir::print_graph(g);
  std::cout << j.dump(2) << "\n";
}

}  // namespace

ArgParser inspect_parser() {
  ArgParser p("inspect", "inspect MODEL [--no-ir] [--json]",
              "Print a .pt2's signature, op histogram and IR, or a .anvil package's manifest.");
  p.positional("MODEL", "a .pt2 written by torch.export.save, or a .anvil package")
      .flag("--no-ir", "", "leave out the text IR")
      .flag("--json", "", "print the same facts as one JSON object")
      .notes(
          "The signature lists the user inputs with dtypes, symbolic shapes and symbol ranges;\n"
          "the parameters, buffers and constants with names, dtypes, shapes and bytes; and the\n"
          "outputs with their kinds (user_output, buffer_mutation, ...). The op histogram counts\n"
          "nodes per export target, most frequent first.\n"
          "For a .anvil package: the target, CPU features and compile flags, input/output\n"
          "specs, symbols, constants (names, original names, dtypes, shapes, bytes), kernels,\n"
          "planned scratch memory and the sources it holds (--no-ir has no effect).\n");
  return p;
}

int cmd_inspect(const ParsedArgs& args) {
  const std::string path = args.positionals().at(0);
  require_file(path, "model");
  if (is_package(path)) return inspect_package(path, args.has("--json"));
  const auto graph = frontend::load_pt2(path);
  if (args.has("--json"))
    print_json(path, *graph, !args.has("--no-ir"));
  else
    print_text(path, *graph, !args.has("--no-ir"));
  return kExitOk;
}

}  // namespace anvil::cli
