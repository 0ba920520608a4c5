// `anvil run`: loads a .pt2, reads .npy inputs, runs the graph (for now always through the
// reference interpreter) and writes OUTDIR/out0.npy ... with a summary of each output.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"

namespace anvil::cli {

namespace {
constexpr const char* kNpyNote =
    ".npy has no bfloat16: outputs of 16-bit float types are written as float32, and a\n"
    "float32 .npy is accepted (and converted) for a bfloat16 or float16 input.\n";

/// The tensor as it goes into a .npy file: 16-bit and other non-.npy floats become float32.
Tensor npy_ready(const Tensor& t) {
  const DType d = t.dtype();
  if (d == DType::kBFloat16 || d == DType::kFloat16 || is_float8(d)) return t.to(DType::kFloat32);
  if (d == DType::kComplex32) return t.to(DType::kComplex64);
  return t;
}
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
  ArgParser p("run", "run MODEL.pt2 [--interpret] -i IN.npy [-i IN.npy ...] [-o OUTDIR]",
              "Run a model on .npy inputs and write its outputs as OUTDIR/out0.npy, out1.npy, ...");
  p.positional("MODEL.pt2", "archive written by torch.export.save")
      .flag("--interpret", "", "run with the reference interpreter")
      .option("--input", "-i", "FILE", "a .npy input, in the model's input order", true)
      .option("--output", "-o", "OUTDIR", "directory for out0.npy ... (created if missing)")
      .option("--repeat", "", "N",
              "run N times in one session; buffers mutated by the model persist from run to "
              "run; the last run's outputs are written (default 1)")
      .flag("--quiet", "-q", "do not print the output summary")
      .notes(std::string(kNpyNote) +
             "Without --interpret the model is interpreted as well (there is no AOT compiler "
             "yet).\nInputs are checked against the signature: count, dtype, rank, static dims "
             "and\nthe ranges of symbolic dims.\n");
  return p;
}

int cmd_run(const ParsedArgs& args) {
  const std::string model = args.positionals().at(0);
  const std::vector<std::string> in_paths = args.values("--input");
  const int64_t repeat = args.int_value("--repeat", 1, 1, 1000000);
  const bool quiet = args.has("--quiet");
  require_file(model, "model");
  for (const auto& p : in_paths) require_file(p, "input");
  if (!args.has("--interpret"))
    std::cerr << "anvil: note: no AOT compiler yet: interpreting " << model << "\n";

  std::unique_ptr<ir::Graph> graph = frontend::load_pt2(model);
  std::vector<Tensor> inputs;
  for (const auto& p : in_paths) inputs.push_back(read_npy(p));

  interp::Interpreter interp(*graph);
  std::vector<Tensor> outputs;
  for (int64_t r = 0; r < repeat; ++r) {
    outputs = interp.run(inputs);
    if (repeat > 1 && !quiet) {
      std::cout << "run " << r + 1 << "/" << repeat << ":\n";
      for (size_t k = 0; k < outputs.size(); ++k)
        std::cout << "  out" << k << "  " << tensor_summary(outputs[k], 4) << "\n";
    }
  }

  std::vector<std::string> names;
  for (const auto& o : graph->output_specs())
    if (o.kind == ir::OutputKind::kUserOutput || o.kind == ir::OutputKind::kLossOutput)
      names.push_back(o.value ? o.value->name : "?");
  const auto out_dir = args.value("--output");
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
