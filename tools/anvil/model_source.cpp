// Helpers of the commands that accept a .anvil package or a .pt2 (run, bench, inspect): telling
// them apart, compiling a .pt2 into the package cache, reading .npy inputs for a Model.
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <random>

#include "commands.h"
#include "codegen/gemm/gemm_filter.h"
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
  // GEMM autotuning (commands that declare these options; docs/usage.md).
  namespace gm = codegen::gemm;
  if (auto v = args.value("--autotune")) o.gemm.mode = gm::parse_autotune_mode(*v);
  if (auto v = args.value("--gemm-backends")) o.gemm.backends = gm::parse_backends(*v);
  if (auto v = args.value("--gemm-allow")) o.gemm.allow_regex = *v;
  if (auto v = args.value("--gemm-deny")) o.gemm.deny_regex = *v;
  if (auto v = args.value("--autotune-cache")) o.gemm.cache_dir = *v;
  if (args.value("--gemm-max-candidates"))
    o.gemm.max_profiled = static_cast<int>(args.int_value("--gemm-max-candidates", 0, 1, 100000));
  if (args.value("--gemm-min-size"))
    o.gemm.min_gemm_size = args.int_value("--gemm-min-size", 1, 0, INT64_MAX);
  if (args.has("--no-gemm-fallback")) o.gemm.fallback = false;
  if (args.has("--verbose")) o.gemm.verbose = true;
  o.gemm.jobs = o.jobs;
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
        (specs[k].dtype == DType::kBFloat16 || specs[k].dtype == DType::kFloat16 ||
         is_float8(specs[k].dtype)))
      t = t.to(specs[k].dtype);
    if (k < specs.size() && t.dtype() == DType::kUInt8 && is_float8(specs[k].dtype)) {
      // .npy has no float8: a uint8 array holds the float8 tensor's bytes
      t = t.contiguous();
      t = Tensor(t.storage(), specs[k].dtype, t.sizes(), t.strides(), t.storage_offset());
    }
    inputs.push_back(t.to(model.device()));
  }
  return inputs;
}

/// Random inputs of the manifest's input specs. Symbolic dims take the --dim value or the
/// lower bound of their range (the manifest has no example sizes); `notes` says which.
std::vector<Tensor> random_inputs(const runtime::Model& model,
                                  const std::map<std::string, int64_t>& dims,
                                  std::vector<std::string>& notes) {
  const runtime::Manifest& m = model.manifest();
  SymEnv env;
  for (const auto& [name, value] : dims)
    if (m.symbol_index(name) < 0) {
      std::string known;
      for (const auto& s : m.symbols) known += (known.empty() ? "" : ", ") + s.name;
      throw Error("--dim names an unknown symbol", name,
                  known.empty() ? "no --dim (all shapes static)" : "one of " + known, name);
    }
  for (const auto& s : m.symbols) {
    auto it = dims.find(s.name);
    if (it != dims.end()) {
      if (!s.range.contains(it->second))
        throw Error("--dim value out of the symbol's range", s.name, s.range.str(),
                    std::to_string(it->second));
      env[s.name] = it->second;
      notes.push_back(s.name + " = " + std::to_string(it->second) + " (--dim, range " +
                      s.range.str() + ")");
    } else {
      env[s.name] = s.range.min;
      notes.push_back(s.name + " = " + std::to_string(s.range.min) + " (lower bound of its range " +
                      s.range.str() + "; set with --dim " + s.name + "=N)");
    }
  }
  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::vector<Tensor> out;
  for (const auto& spec : m.inputs) {
    Shape shape;
    for (const auto& d : spec.sizes) shape.push_back(d.evaluate(env));
    const int64_t n = shape_numel(shape);
    std::vector<double> values(static_cast<size_t>(n));
    const bool real_valued = is_floating(spec.dtype) || is_complex(spec.dtype);
    // Integer inputs (token ids, indices) get 0 or 1 so that any embedding table is in range.
    for (auto& v : values) v = real_valued ? real(rng) : static_cast<double>(rng() & 1);
    out.push_back(Tensor::from_vector(values, shape).to(spec.dtype).to(model.device()));
  }
  return out;
}

/// --dim NAME=VALUE overrides, by symbol name.
std::map<std::string, int64_t> dim_overrides(const ParsedArgs& args) {
  std::map<std::string, int64_t> out;
  for (const auto& d : args.values("--dim")) {
    const size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == d.size())
      throw UsageError("--dim needs SYMBOL=VALUE, got '" + d + "'");
    try {
      size_t used = 0;
      const std::string v = d.substr(eq + 1);
      out[d.substr(0, eq)] = std::stoll(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      throw UsageError("--dim needs an integer value, got '" + d + "'");
    }
  }
  return out;
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
    // under a launcher (anvil launch, torchrun, mpirun) rank r of a node takes the node's GPU r,
    // as its nccl group does
    const char* local = std::getenv("LOCAL_RANK");
    if (!local) local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!mo.device.is_cpu() && local && *local) {
      char* end = nullptr;
      const long r = std::strtol(local, &end, 10);
      if (*end == 0 && r >= 0 && r < 1024) mo.device = Device{mo.device.type, static_cast<int>(r)};
    }
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

void apply_backend_option(const ParsedArgs& args) {
  if (auto b = args.value("--backend")) {
    if (*b != "gloo" && *b != "mpi" && *b != "nccl")
      throw UsageError("--backend needs gloo, mpi or nccl, got '" + *b + "'");
    set_env("ANVIL_BACKEND", *b);
  }
}

}  // namespace anvil::cli
