// `anvil check MODEL.pt2`: runs a compiled package beside the reference interpreter and names
// the first node whose value leaves the tolerance — the tool to bring up a target's kernels
// with, and for users who doubt a result. Every tensor a node computes is made an output of a
// copy of the graph, so the package stores each of them (the kernels still fuse, but a value
// that was a fused temporary is now also written out); both sides run the same inputs and the
// values are compared in the graph's order.
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <set>
#include <unistd.h>

#include "commands.h"
#include "core/error.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/graph.h"
#include "runtime/model.h"

namespace anvil::cli {

namespace fs = std::filesystem;

namespace {

struct Diff {
  double rel = 0;    // max |got - want| / max(1, max |want|)
  int64_t at = -1;   // the element of the largest difference
  double got = 0, want = 0;
  bool nan_mismatch = false;
  bool shape_mismatch = false;
};

Diff diff(const Tensor& got, const Tensor& want) {
  Diff d;
  if (got.sizes() != want.sizes()) {
    d.shape_mismatch = true;
    d.rel = INFINITY;
    return d;
  }
  const std::vector<double> a = got.to_doubles(), b = want.to_doubles();
  double scale = 1, worst = 0;
  for (double v : b)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    const bool na = std::isnan(a[i]), nb = std::isnan(b[i]);
    double e = 0;
    if (na || nb) {
      if (na == nb) continue;
      e = INFINITY;
      d.nan_mismatch = true;
    } else if (a[i] != b[i]) {  // equal infinities are equal
      e = std::fabs(a[i] - b[i]);
    }
    if (e > worst || d.at < 0) {
      d.at = static_cast<int64_t>(i);
      worst = std::max(worst, e);
      d.got = a[i];
      d.want = b[i];
    }
  }
  d.rel = worst / scale;
  return d;
}

double default_tol(DType t) {
  if (t == DType::kBFloat16 || t == DType::kFloat16) return 2e-2;
  return is_floating(t) ? 1e-4 : 0.0;
}

}  // namespace

ArgParser check_parser() {
  ArgParser p("check", "check MODEL.pt2 [-i IN.npy ...] [--target T] [--device D] [--tol T]",
              "Run the compiled model beside the reference interpreter and name the first node "
              "whose value differs.");
  p.positional("MODEL.pt2", "archive written by torch.export.save")
      .option("--input", "-i", "FILE", "a .npy input (default: random inputs of the spec)", true)
      .option("--target", "", "T", "target to compile for (default native; cuda-sm90 ...)")
      .option("--device", "", "DEV", "where the package runs (default: its target's device)")
      .option("--dim", "", "SYM=N", "size of a symbolic dim for random inputs", true)
      .option("--tol", "", "T",
              "relative tolerance (default 1e-4; 2e-2 for bfloat16 / float16 values; "
              "integers and bools exactly)")
      .option("--cache-dir", "", "D", "object cache for the compile")
      .flag("--all", "", "print every node's difference, not only the first one over")
      .flag("--quiet", "-q", "print only the verdict")
      .notes(
          "Every tensor a node computes becomes an output of the compiled copy, so each is\n"
          "stored and compared (max|got - want| <= T * max(1, max|want|), NaNs at the same\n"
          "places). The first node over the tolerance is named with its op, shape, the element\n"
          "of the largest difference and both values; exit status 1 then, 0 when all agree.\n"
          "A node whose inputs already differ inherits the difference: the first one is the\n"
          "place to look.\n");
  return p;
}

int cmd_check(const ParsedArgs& args) {
  const std::string model = args.positionals().at(0);
  require_file(model, "model");
  const bool quiet = args.has("--quiet"), all = args.has("--all");
  std::optional<double> tol_override;
  if (auto t = args.value("--tol")) {
    try {
      size_t used = 0;
      tol_override = std::stod(*t, &used);
      if (used != t->size() || !(*tol_override >= 0)) throw std::invalid_argument(*t);
    } catch (const std::exception&) {
      throw UsageError("--tol needs a number >= 0, got '" + *t + "'");
    }
  }

  // The graph with every node's tensor values as extra user outputs, in node order.
  std::unique_ptr<ir::Graph> graph = frontend::load_pt2(model);
  size_t n_user = 0;
  std::set<const ir::Value*> already;
  for (const auto& o : graph->output_specs()) {
    if (o.kind == ir::OutputKind::kUserOutput) ++n_user;
    if (o.value) already.insert(o.value);
  }
  struct Probe {
    const ir::Node* node;
    const ir::Value* value;
  };
  std::vector<Probe> probes;
  for (const ir::Node* n : graph->nodes()) {
    if (!n->subgraphs.empty()) continue;  // control flow: its results are checked as values
    for (ir::Value* v : n->outputs) {
      if (!v || !v->is_tensor() || already.count(v) || is_complex(v->type.dtype)) continue;
      graph->output_specs().push_back({ir::OutputKind::kUserOutput, v, ""});
      probes.push_back({n, v});
      already.insert(v);
    }
  }
  // kUserOutput specs are returned in order, the appended ones after the model's own (mutation
  // outputs are not user outputs): keep the count straight.
  size_t n_outputs = 0;
  for (const auto& o : graph->output_specs()) n_outputs += o.kind == ir::OutputKind::kUserOutput;

  driver::CompileOptions o = compile_options(args, /*quiet=*/true);
  const fs::path dir = fs::temp_directory_path() / ("anvil_check_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{dir};
  const std::string pkg = (dir / "probed.anvil").string();
  if (!quiet)
    std::cout << "compiling " << model << " for " << o.target << " with " << probes.size()
              << " node values exposed ...\n";
  driver::compile_graph(*graph, pkg, o);
  const runtime::Model m = runtime::Model::load(pkg, model_options(args, pkg));
  std::vector<std::string> notes;
  const std::vector<Tensor> inputs =
      args.values("--input").empty()
          ? random_inputs(m, dim_overrides(args), notes)
          : read_inputs(args.values("--input"), m);
  std::vector<Tensor> host_inputs;
  for (const Tensor& t : inputs) host_inputs.push_back(t.to(Device::cpu()));
  std::vector<Tensor> got = m.run(inputs);
  for (Tensor& t : got) t = t.to(Device::cpu());
  interp::Interpreter ref(*graph);
  const std::vector<Tensor> want = ref.run(host_inputs);
  ANVIL_CHECK(got.size() == n_outputs && want.size() == n_outputs, "anvil check",
              "the package and the interpreter return different numbers of values",
              std::to_string(n_outputs), str(got.size(), " and ", want.size()));
  if (!quiet)
    for (const auto& n : notes) std::cout << "  input " << n << "\n";

  int bad = 0;
  for (size_t k = 0; k < probes.size(); ++k) {
    const size_t idx = n_user + k;
    const Tensor& w = want[idx];
    const Tensor g = got[idx].dtype() == w.dtype() ? got[idx] : got[idx].to(w.dtype());
    const double tol = tol_override ? *tol_override : default_tol(w.dtype());
    const Diff d = diff(g, w);
    const bool over = d.shape_mismatch || d.nan_mismatch || d.rel > tol;
    const ir::Node& n = *probes[k].node;
    if (all && !quiet)
      std::cout << "  " << (over ? "DIFF " : "ok   ") << std::left << std::setw(28)
                << probes[k].value->name << " " << std::setw(36) << n.target << " rel "
                << std::scientific << std::setprecision(2) << d.rel << std::defaultfloat << "\n";
    if (!over || bad++ > 0) continue;
    std::cout << "first difference: node " << n.name << " (" << n.target << "), value "
              << probes[k].value->name << " " << dtype_name(w.dtype()) << shape_str(w.sizes())
              << "\n";
    if (d.shape_mismatch) {
      std::cout << "  shape: got " << shape_str(g.sizes()) << ", want " << shape_str(w.sizes())
                << "\n";
    } else {
      Shape index;  // the element's multi-index
      int64_t rest = d.at;
      for (size_t dim = w.sizes().size(); dim-- > 0;) {
        const int64_t s = std::max<int64_t>(w.sizes()[dim], 1);
        index.insert(index.begin(), rest % s);
        rest /= s;
      }
      std::cout << std::setprecision(9) << "  at " << shape_str(index) << ": got " << d.got
                << ", want " << d.want << " (relative difference " << std::scientific
                << std::setprecision(3) << d.rel << " > tolerance " << tol << std::defaultfloat
                << (d.nan_mismatch ? "; NaN on one side only" : "") << ")\n";
    }
    if (!all) break;
  }
  if (bad == 0)
    std::cout << "all " << probes.size() << " node values agree with the interpreter\n";
  return bad == 0 ? kExitOk : 1;
}

}  // namespace anvil::cli
