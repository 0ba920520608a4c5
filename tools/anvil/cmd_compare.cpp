// `anvil compare GOT.npy WANT.npy`: checks one output against a reference with anvil's test
// tolerance (float: max|got - want| <= TOL * max(1, max|want|); integers and bools exactly).
#include <cmath>
#include <iostream>

#include "commands.h"
#include "core/error.h"
#include "core/npy.h"

namespace anvil::cli {

ArgParser compare_parser() {
  ArgParser p("compare", "compare GOT.npy WANT.npy [--tol T]",
              "Compare two .npy arrays with anvil's numeric tolerance; exit 1 when they differ.");
  p.positional("GOT.npy", "the array to check")
      .positional("WANT.npy", "the reference array")
      .option("--tol", "", "T",
              "relative tolerance for floats (default 1e-4; 2e-2 for float16 arrays)")
      .notes(
          "Floats pass when max|got - want| <= T * max(1, max|want|); integers and bools must be\n"
          "equal. NaNs must appear at the same positions. Shapes must be equal.\n");
  return p;
}

int cmd_compare(const ParsedArgs& args) {
  const std::string got_path = args.positionals().at(0), want_path = args.positionals().at(1);
  require_file(got_path, "input");
  require_file(want_path, "input");
  const Tensor got = read_npy(got_path), want = read_npy(want_path);
  if (got.sizes() != want.sizes())
    throw Error("shapes differ", got_path + " vs " + want_path, shape_str(want.sizes()),
                shape_str(got.sizes()));
  const bool exact = !is_floating(got.dtype()) && !is_floating(want.dtype()) &&
                     !is_complex(got.dtype()) && !is_complex(want.dtype());
  double tol = (got.dtype() == DType::kFloat16 || want.dtype() == DType::kFloat16) ? 2e-2 : 1e-4;
  if (auto t = args.value("--tol")) {
    try {
      size_t used = 0;
      tol = std::stod(*t, &used);
      if (used != t->size() || !(tol >= 0)) throw std::invalid_argument(*t);
    } catch (const std::exception&) {
      throw UsageError("--tol needs a non-negative number, got '" + *t + "'");
    }
  }
  const std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  double max_want = 0, max_diff = 0;
  size_t worst = 0, nan_mismatch = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(g[i]) || std::isnan(w[i])) {
      nan_mismatch += std::isnan(g[i]) != std::isnan(w[i]);
      continue;
    }
    max_want = std::max(max_want, std::fabs(w[i]));
    const double d = std::fabs(g[i] - w[i]);
    if (d > max_diff) max_diff = d, worst = i;
  }
  const double bound = exact ? 0.0 : tol * std::max(1.0, max_want);
  const bool ok = nan_mismatch == 0 && max_diff <= bound;
  std::cout << (ok ? "match" : "MISMATCH") << ": " << got.type_str() << " vs " << want.type_str()
            << ", max|got - want| = " << max_diff << " (bound " << bound << ")";
  if (max_diff > 0) std::cout << ", worst at flat index " << worst;
  if (nan_mismatch) std::cout << ", " << nan_mismatch << " NaN position(s) differ";
  std::cout << "\n";
  return ok ? kExitOk : kExitFailure;
}

}  // namespace anvil::cli
