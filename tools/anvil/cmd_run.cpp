// `anvil run`: runs a model on .npy inputs and writes OUTDIR/out0.npy ... with a summary of each
// output. MODEL is a .anvil package (run by runtime::Model), or a .pt2 that is first compiled
// into the package cache (driver::cached_package_for); --interpret runs a .pt2 through the
// reference interpreter instead.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "dist/world.h"
#include "interp/interpreter.h"
#include "ir/op_schema.h"
#include "runtime/model.h"

namespace anvil::cli {

namespace {
constexpr const char* kNpyNote =
    ".npy has no bfloat16: outputs of 16-bit float types are written as float32, and a\n"
    "float32 .npy is accepted (and converted) for a bfloat16 or float16 input.\n";
}  // namespace

std::string tensor_summary(const Tensor& t, size_t first) {
  std::ostringstream os;
  os << t.type_str();
  const std::vector<double> v = t.to_doubles();
  if (v.empty()) return os.str() + "  (empty)";
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0;
  for (double x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  os.precision(6);
  os << "  min " << lo << "  max " << hi << "  mean " << sum / static_cast<double>(v.size())
     << "  first [";
  for (size_t i = 0; i < std::min(first, v.size()); ++i) os << (i ? ", " : "") << v[i];
  os << (v.size() > first ? ", ...]" : "]");
  return os.str();
}

ArgParser run_parser() {
  ArgParser p("run",
              "run MODEL [-i IN.npy ...] [-o OUTDIR] [--interpret] [--threads T] [--repeat N] "
              "[--check-nan]",
              "Run a model on .npy inputs and write its outputs as OUTDIR/out0.npy, out1.npy, ...");
  p.positional("MODEL", "a .anvil package, or a .pt2 (compiled into the package cache first)")
      .flag("--interpret", "", "run a .pt2 with the reference interpreter instead of compiling")
      .option("--input", "-i", "FILE", "a .npy input, in the model's input order", true)
      .option("--output", "-o", "OUTDIR", "directory for out0.npy ... (created if missing)")
      .option("--repeat", "", "N",
              "run N times in one session; buffers mutated by the model persist from run to "
              "run; the last run's outputs are written (default 1)")
      .option("--device", "", "DEV",
              "where a package runs: cpu, cuda or cuda:N (default: the device it was compiled "
              "for)")
      .option("--threads", "", "T",
              "threads of the model's pool (default: ANVIL_NUM_THREADS or "
              "the hardware threads)")
      .option("--backend", "", "NAME",
              "distributed backend for collectives, gloo, mpi or nccl (sets ANVIL_BACKEND)")
      .option("--target", "", "T", "target when compiling a .pt2 (default native)")
      .option("--cache-dir", "", "D", "package and object cache when compiling a .pt2")
      .flag("--check-nan", "",
            "scan what every step writes and stop at the first NaN or infinity, naming the "
            "step, its graph nodes, the buffer, the element and its value (a package only)")
      .flag("--quiet", "-q", "do not print the output summary or compile notes")
      .notes(std::string(kNpyNote) +
             "Inputs are checked against the signature: count, dtype, rank, static dims and\n"
             "the ranges of symbolic dims. A .pt2 is compiled once per content, target and\n"
             "anvil build (a note on stderr says when); later runs reuse the cached package.\n"
             "Under `anvil launch` or mpirun (more than one rank) outputs go to "
             "OUTDIR/rank<RANK>/.\n");
  return p;
}

namespace {

/// The first of `names` set in the environment, parsed as an integer >= `min`; nullopt when
/// none is set. Throws Error for a value that is not such an integer.
std::optional<long> env_int(std::initializer_list<const char*> names, long min) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (!v) continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < min)
      throw Error(str("bad ", name, " in the environment"), "anvil run", str("an integer >= ", min),
                  v);
    return x;
  }
  return std::nullopt;
}

/// OUTDIR, or OUTDIR/rank<RANK> when the world has more than one rank (WORLD_SIZE / RANK as
/// anvil launch and torchrun set them, else Open MPI's or PMI's variables).
std::string output_dir(const std::string& dir) {
  const auto world = env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1);
  if (!world || *world == 1) return dir;
  const auto rank = env_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}, 0);
  if (!rank)
    throw Error("the world has several ranks but RANK is not set", "anvil run",
                str("RANK in [0, ", *world, ")"), "unset");
  if (*rank >= *world)
    throw Error("RANK is outside the world", "anvil run", str("RANK in [0, ", *world, ")"),
                std::to_string(*rank));
  return (std::filesystem::path(dir) / ("rank" + std::to_string(*rank))).string();
}

}  // namespace

int cmd_run(const ParsedArgs& args) {
  const std::string model = args.positionals().at(0);
  const std::vector<std::string> in_paths = args.values("--input");
  const int64_t repeat = args.int_value("--repeat", 1, 1, 1000000);
  const int64_t threads = args.int_value("--threads", 0, 1, 4096);
  const bool quiet = args.has("--quiet");
  const bool interpret = args.has("--interpret");
  apply_backend_option(args);
  if (interpret && (args.has("--target") || args.has("--cache-dir")))
    throw UsageError("--target and --cache-dir compile a .pt2; they do not go with --interpret");
  if (interpret && args.has("--check-nan"))
    throw UsageError("--check-nan checks a compiled run; it does not go with --interpret");
  std::optional<std::string> out_dir = args.value("--output");
  if (out_dir) out_dir = output_dir(*out_dir);
  require_file(model, "model");
  for (const auto& p : in_paths) require_file(p, "input");
  const bool package = is_package(model);
  if (interpret && package)
    throw Error("--interpret runs a .pt2, not a compiled package", model, "a .pt2 archive",
                "a .anvil package");
  if (threads > 0 && interpret) set_env("ANVIL_NUM_THREADS", std::to_string(threads));

  std::vector<Tensor> outputs;
  std::vector<std::string> names;
  auto report_run = [&](int64_t r) {
    if (repeat > 1 && !quiet) {
      std::cout << "run " << r + 1 << "/" << repeat << ":\n";
      for (size_t k = 0; k < outputs.size(); ++k)
        std::cout << "  out" << k << "  " << tensor_summary(outputs[k], 4) << "\n";
    }
  };
  if (interpret) {
    std::unique_ptr<ir::Graph> graph = frontend::load_pt2(model);
    std::vector<Tensor> inputs;
    for (const auto& p : in_paths) inputs.push_back(read_npy(p));
    // A graph with collectives joins the world from the launcher's environment, as a package
    // does at load (ANVIL_BACKEND / --backend picks the engine).
    const std::vector<ir::Node*> nodes = graph->nodes();
    const bool has_collectives = std::any_of(nodes.begin(), nodes.end(), [](const ir::Node* n) {
      return n->schema && n->schema->category == ir::OpCategory::kCollective;
    });
    if (has_collectives && !dist::world_initialized()) {
      const char* backend = std::getenv("ANVIL_BACKEND");
      dist::init_world_from_env(backend ? backend : "");
    }
    interp::Interpreter interp(*graph);
    for (int64_t r = 0; r < repeat; ++r) {
      outputs = interp.run(inputs);
      report_run(r);
    }
    for (const auto& o : graph->output_specs())
      if (o.kind == ir::OutputKind::kUserOutput || o.kind == ir::OutputKind::kLossOutput)
        names.push_back(o.value ? o.value->name : "?");
  } else {
    const std::string pkg = package ? model : package_for(model, args, quiet);
    runtime::ModelOptions mo = model_options(args, pkg);
    mo.num_threads = static_cast<int>(threads);
    const runtime::Model m = runtime::Model::load(pkg, mo);
    if (args.has("--check-nan")) m.set_check_nan_inf(true);
    const std::vector<Tensor> inputs = read_inputs(in_paths, m);
    for (int64_t r = 0; r < repeat; ++r) {
      outputs = m.run(inputs);
      for (Tensor& o : outputs) o = o.to(Device::cpu());  // device outputs come to the host
      report_run(r);
    }
    for (const auto& o : m.output_specs()) names.push_back(o.name);
  }

  if (out_dir) {
    std::error_code ec;
    std::filesystem::create_directories(*out_dir, ec);
    if (ec || !std::filesystem::is_directory(*out_dir))
      throw Error("cannot create output directory", *out_dir, "a writable directory",
                  ec ? ec.message() : "not a directory");
  }
  if (!quiet) std::cout << model << ": " << outputs.size() << " output(s)\n";
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor out = npy_ready(outputs[k]);
    std::string line = "out" + std::to_string(k) + "  " + (k < names.size() ? names[k] : "");
    if (out.dtype() != outputs[k].dtype())
      line += "  (" + std::string(dtype_name(outputs[k].dtype())) + ", written as " +
              dtype_name(out.dtype()) + ")";
    if (out_dir) {
      const std::string path =
          (std::filesystem::path(*out_dir) / ("out" + std::to_string(k) + ".npy")).string();
      write_npy(path, out);
      line += "  -> " + path;
    }
    if (!quiet) std::cout << line << "\n    " << tensor_summary(outputs[k]) << "\n";
  }
  return kExitOk;
}

}  // namespace anvil::cli
