#include "zoo/zoo_fixtures.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "aot/formula_archive.h"
#include "core/error.h"
#include "core/npy.h"

namespace anvil::zoo_test {

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  ANVIL_CHECK(f.good(), "zoo fixtures", "cannot open", "a readable file", path);
  std::stringstream text;
  text << f.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

}  // namespace

std::string zoo_dir() { return std::string(ANVIL_FIXTURES_DIR) + "/zoo"; }

const std::vector<ZooModel>& zoo_models() {
  static const std::vector<ZooModel> models = [] {
    std::vector<ZooModel> out;
    const std::string path = zoo_dir() + "/ZOO.json";
    if (!std::filesystem::exists(path)) return out;
    // ZOO.json keeps models in scripts/export_zoo.py's order (nlohmann::json sorts keys, so
    // the order is the file's only through ordered_json).
    std::ifstream f(path);
    const auto j = nlohmann::ordered_json::parse(f);
    for (const auto& [name, m] : j.at("models").items()) {
      ZooModel z;
      z.name = name;
      z.family = m.at("family").get<std::string>();
      z.source = m.at("source").get<std::string>();
      z.dynamic = m.at("dynamic").get<bool>();
      z.ci = m.at("ci").get<bool>();
      z.tolerance = m.at("tolerance").get<double>();
      z.params = m.at("params").get<int64_t>();
      z.ops = m.at("ops").get<std::vector<std::string>>();
      out.push_back(z);
    }
    return out;
  }();
  return models;
}

std::vector<ShapeSet> load_sets(const std::string& name) {
  const auto j = read_json(zoo_dir() + "/" + name + ".weights.json");
  std::vector<ShapeSet> sets;
  for (const auto& s : j.at("sets")) {
    ShapeSet set;
    set.shape = s.at("shape").get<Shape>();
    for (const auto& in : s.at("inputs"))
      set.inputs.push_back(aot_test::formula_tensor(
          in.at("shape").get<Shape>(), aot_test::formula_dtype(in.at("dtype").get<std::string>()),
          in.at("seed").get<int64_t>(), in.at("scale").get<double>(),
          in.at("offset").get<double>()));
    for (const auto& o : s.at("outputs"))
      set.want.push_back(read_npy(zoo_dir() + "/" + o.at("file").get<std::string>()));
    sets.push_back(std::move(set));
  }
  ANVIL_CHECK(!sets.empty(), "zoo fixtures (" + name + ")", "weights.json has no shape sets",
              "one set or more", "none");
  return sets;
}

const std::map<std::string, ExpectedFailure>& expected_failures() {
  static const std::map<std::string, ExpectedFailure> list = [] {
    std::map<std::string, ExpectedFailure> out;
    const std::string path = zoo_dir() + "/EXPECTED_FAILURES.txt";
    std::ifstream f(path);
    std::string line;
    int number = 0;
    while (std::getline(f, line)) {
      ++number;
      line = trim(line);
      if (line.empty() || line[0] == '#') continue;
      std::istringstream words(line);
      std::string name, kind;
      words >> name >> kind;
      ExpectedFailure& e = out[name];
      std::string text;
      if (kind == "ops") {
        for (std::string op; words >> op;) e.missing_ops.insert(op);
        text = e.missing_ops.empty() ? "" : "ops";
      } else {
        std::getline(words, text);
        text = trim(text);
        if (kind == "error") e.error_substring = text;
        if (kind == "interp") e.interp_error_substring = text;
      }
      ANVIL_CHECK(!text.empty() && (kind == "ops" || kind == "error" || kind == "interp"),
                  str(path, ":", number), "malformed line",
                  "NAME ops TARGET..., NAME error TEXT or NAME interp TEXT", line);
    }
    return out;
  }();
  return list;
}

std::set<std::string> missing_ops_of(const std::string& message) {
  std::set<std::string> ops;
  const std::string key = "unsupported ops: ";
  const auto at = message.find(key);
  if (at == std::string::npos) return ops;
  // "unsupported ops: aten.a.default ×2, aten.b.default ×1" then " (where ...)" or a newline
  std::string rest = message.substr(at + key.size());
  rest = rest.substr(0, rest.find_first_of("\n("));
  std::istringstream items(rest);
  for (std::string item; std::getline(items, item, ',');) {
    item = trim(item);
    const auto space = item.find(' ');
    if (!item.empty()) ops.insert(item.substr(0, space));
  }
  return ops;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_doubles()) m = std::max(m, std::fabs(v));
  return m;
}

double max_rel_error(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes()) return INFINITY;
  const auto a = got.to_doubles(), b = want.to_doubles();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(a[i] - b[i]);
    if (std::isnan(e)) return INFINITY;
    worst = std::max(worst, e);
  }
  const double scale = max_abs(want);
  return scale > 0 ? worst / scale : worst;
}

bool run_all() {
  const char* v = std::getenv("ANVIL_ZOO_ALL");
  return v != nullptr && std::string(v) != "" && std::string(v) != "0";
}

}  // namespace anvil::zoo_test
