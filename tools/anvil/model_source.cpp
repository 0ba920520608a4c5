// Helpers of the commands that accept a .anvil package or a .pt2 (run, bench, inspect): telling
// them apart, compiling a .pt2 into the package cache, reading .npy inputs for a Model.
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "commands.h"
#include "codegen/target.h"
#include "core/error.h"
#include "core/npy.h"
#include "core/zip_reader.h"
#include "codegen/cache.h"
#include "runtime/model.h"

namespace anvil::cli {

namespace fs = std::filesystem;

const std::vector<std::string>& target_names() {
  // every registered code generation target (codegen/target.h), "generic" being an alias
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const std::string& n : codegen::target_names())
      if (n != "generic") names.push_back(n);
    return names;
  }();
  return kNames;
}

bool is_package(const std::string& path) {
  require_file(path, "model");
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".anvil") return true;
  if (ext == ".pt2") return false;
  const ZipReader zip = ZipReader::open(path);
  return zip.find("manifest.json") != nullptr;
}

driver::CompileOptions compile_options(const ParsedArgs& args, bool quiet) {
  driver::CompileOptions o;
  if (auto t = args.value("--target")) {
    bool known = false;
    std::string names;
    for (const auto& n : target_names()) {
      known = known || n == *t;
      names += (names.empty() ? "" : ", ") + n;
    }
    if (!known) throw UsageError("unknown --target '" + *t + "' (targets: " + names + ")");
    o.target = *t;
  }
  if (auto d = args.value("--cache-dir")) o.cache_dir = *d;
  if (args.value("--jobs")) o.jobs = static_cast<int>(args.int_value("--jobs", 0, 1, 1024));
  o.progress = quiet ? codegen::ProgressMode::kQuiet : codegen::ProgressMode::kAuto;
  return o;
}

std::string package_for(const std::string& model, const ParsedArgs& args, bool quiet) {
  if (is_package(model)) return model;
  const driver::CompileOptions o = compile_options(args, quiet);
  const std::string cached = driver::package_cache_path(model, o);
  if (codegen::touch_cache_entry(cached)) return cached;  // a hit, marked used (codegen/cache.h)
  if (!quiet)
    std::cerr << "anvil: note: compiling " << model << " (target " << o.target
              << ") into the package cache: " << cached << "\n";
  // The same as driver::cached_package_for, without hashing the .pt2 a second time.
  const driver::CompileReport r = driver::compile_pt2(model, cached, o);
  codegen::prune_after_insert(o.cache_dir.empty() ? codegen::default_cache_dir() : o.cache_dir,
                             cached);
  if (!quiet)
    std::cerr << "anvil: note: compiled in " << std::fixed << std::setprecision(2) << r.total_s
              << std::defaultfloat << " s (" << r.num_kernels << " kernels)\n";
  return cached;
}

std::vector<Tensor> read_inputs(const std::vector<std::string>& paths,
                                const runtime::Model& model) {
  for (const auto& p : paths) require_file(p, "input");
  const auto& specs = model.input_specs();
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < paths.size(); ++k) {
    Tensor t = read_npy(paths[k]);
    if (k < specs.size() && t.dtype() == DType::kFloat32 &&
        (specs[k].dtype == DType::kBFloat16 || specs[k].dtype == DType::kFloat16))
      t = t.to(specs[k].dtype);
    inputs.push_back(t.to(model.device()));
  }
  return inputs;
}

runtime::ModelOptions model_options(const ParsedArgs& args, const std::string& package) {
  runtime::ModelOptions mo;
  if (auto d = args.value("--device")) {
    try {
      mo.device = Device::parse(*d);
    } catch (const Error&) {
      throw UsageError("--device needs cpu, cuda or cuda:N, got '" + *d + "'");
    }
  } else {
    mo.device = runtime::package_device(package);
  }
  return mo;
}

Tensor npy_ready(const Tensor& dev) {
  const Tensor t = dev.device().is_cpu() ? dev : dev.to(Device::cpu());
  const DType d = t.dtype();
  if (d == DType::kBFloat16 || d == DType::kFloat16 || is_float8(d)) return t.to(DType::kFloat32);
  if (d == DType::kComplex32) return t.to(DType::kComplex64);
  return t;
}

void set_env(const std::string& name, const std::string& value) {
  if (::setenv(name.c_str(), value.c_str(), 1) != 0)
    throw Error("cannot set environment variable", name, "setenv to succeed", value);
}

}  // namespace anvil::cli
