#include "formula_archive.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/zip_reader.h"

namespace anvil::aot_test {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "anvil_test_XXXXXX").string();
  ANVIL_CHECK(::mkdtemp(tmpl.data()) != nullptr, "TempDir", "cannot create a temporary folder",
              tmpl, std::strerror(errno));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::operator/(const std::string& name) const {
  return (std::filesystem::path(path_) / name).string();
}

double formula_value(uint64_t i, int64_t seed, double scale, double offset) {
  const uint64_t h =
      (i * 2654435761ull + static_cast<uint64_t>(seed) * 40503ull + 12345ull) & 0xffffffffull;
  return offset + scale * (static_cast<double>(h) / 4294967296.0 - 0.5);
}

namespace {

/// `n` formula values as little-endian bytes of `dtype`.
std::string formula_bytes(uint64_t n, DType dtype, int64_t seed, double scale, double offset) {
  std::string out(n * dtype_size(dtype), '\0');
  if (dtype == DType::kFloat32) {
    auto* p = reinterpret_cast<float*>(out.data());
    for (uint64_t i = 0; i < n; ++i) p[i] = static_cast<float>(formula_value(i, seed, scale, offset));
  } else if (dtype == DType::kFloat64) {
    auto* p = reinterpret_cast<double*>(out.data());
    for (uint64_t i = 0; i < n; ++i) p[i] = formula_value(i, seed, scale, offset);
  } else {
    throw Error("formula weights: unsupported dtype", "formula_archive", "float32 or float64",
                dtype_name(dtype));
  }
  return out;
}

DType dtype_of(const nlohmann::json& j) {
  return formula_dtype(j.value("dtype", std::string("float64")));
}

}  // namespace

DType formula_dtype(const std::string& name) {
  if (name == "float32") return DType::kFloat32;
  if (name == "float64") return DType::kFloat64;
  if (name == "int64") return DType::kInt64;
  throw Error("formula weights: unsupported dtype", "formula_archive",
              "float32, float64 or int64", name);
}

Tensor formula_tensor(const Shape& sizes, DType dtype, int64_t seed, double scale, double offset) {
  if (dtype == DType::kInt64) {
    Tensor t = Tensor::empty(sizes, dtype);
    auto* p = static_cast<int64_t*>(t.data_ptr());
    const auto top = static_cast<int64_t>(scale) - 1;
    for (int64_t i = 0; i < shape_numel(sizes); ++i) {
      const auto v = static_cast<int64_t>(
          std::floor(formula_value(static_cast<uint64_t>(i), seed, scale, offset)));
      p[i] = std::clamp<int64_t>(v, 0, top);
    }
    return t;
  }
  const std::string bytes =
      formula_bytes(static_cast<uint64_t>(shape_numel(sizes)), dtype, seed, scale, offset);
  Tensor t = Tensor::empty(sizes, dtype);
  std::copy(bytes.begin(), bytes.end(), static_cast<char*>(t.data_ptr()));
  return t;
}

std::vector<Tensor> rebuild_formula_archive(const std::string& name, const std::string& out_path,
                                            const std::string& folder) {
  const std::string base =
      (folder.empty() ? std::string(ANVIL_FIXTURES_DIR) + "/aot" : folder) + "/" + name;
  std::ifstream f(base + ".weights.json");
  ANVIL_CHECK(f.good(), "rebuild_formula_archive", "missing sidecar", base + ".weights.json",
              "no file");
  std::stringstream text;
  text << f.rdbuf();
  const auto j = nlohmann::json::parse(text.str());
  std::map<std::string, const nlohmann::json*> formula;
  for (const auto& e : j.at("entries")) formula[e.at("entry").get<std::string>()] = &e;
  const ZipReader in = ZipReader::open(base + ".pt2");
  ZipWriter out(out_path);
  size_t replaced = 0;
  for (const ZipEntry& e : in.entries()) {
    auto it = formula.find(e.name);
    if (it == formula.end()) {
      out.add(e.name, in.read(e));
      continue;
    }
    const auto& w = *it->second;
    const DType dt = dtype_of(w);
    const auto n = w.at("numel").get<uint64_t>();
    ANVIL_CHECK(n * dtype_size(dt) == e.size, "rebuild_formula_archive(" + name + ")",
                "entry size disagrees with its formula", str(n * dtype_size(dt), " bytes"),
                str(e.size, " bytes in ", e.name));
    out.add(e.name, formula_bytes(n, dt, w.at("seed").get<int64_t>(), w.at("scale").get<double>(),
                                  w.at("offset").get<double>()));
    ++replaced;
  }
  out.finish();
  ANVIL_CHECK(replaced == formula.size(), "rebuild_formula_archive(" + name + ")",
              "entries listed in the sidecar are missing from the archive",
              str(formula.size(), " entries"), str(replaced, " found"));
  std::vector<nlohmann::json> specs;
  if (j.contains("inputs"))
    for (const auto& s : j.at("inputs")) specs.push_back(s);
  else if (j.contains("input"))
    specs.push_back(j.at("input"));
  std::vector<Tensor> inputs;
  for (const auto& s : specs)
    inputs.push_back(formula_tensor(s.at("shape").get<Shape>(), dtype_of(s),
                                    s.at("seed").get<int64_t>(), s.at("scale").get<double>(),
                                    s.at("offset").get<double>()));
  return inputs;
}

}  // namespace anvil::aot_test
