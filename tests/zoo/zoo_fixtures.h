// The model zoo of issue 18 (scripts/export_zoo.py): real architectures from torchvision, timm
// and transformers exported with PyTorch 2.11, their weights and inputs given by index formulas
// (tests/aot/formula_archive.h), stored in tests/fixtures/zoo/ with PyTorch eager's outputs.
//
// ZOO.json lists the models (family, source, dynamic, shapes, ops, tolerance, "ci");
// NAME.weights.json gives each shape set's input formulas and output files;
// EXPECTED_FAILURES.txt lists the models anvil cannot compile yet, each with its exact reason.
#pragma once

#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace anvil::zoo_test {

/// The fixture folder, tests/fixtures/zoo.
std::string zoo_dir();

/// One checked shape: the inputs (built from their formulas) and PyTorch's outputs.
struct ShapeSet {
  Shape shape;  // the first input's shape, e.g. {3, 17} (batch x sequence)
  std::vector<Tensor> inputs;
  std::vector<Tensor> want;
};

/// A model of ZOO.json.
struct ZooModel {
  std::string name, family, source;
  bool dynamic = false;
  bool ci = false;  // in the CI sample
  double tolerance = 1e-4;
  int64_t params = 0;
  std::vector<std::string> ops;  // distinct op targets of the exported graph
};

/// Names the model in gtest's output.
inline void PrintTo(const ZooModel& m, std::ostream* os) { *os << m.name; }

/// The models of ZOO.json in file order (an empty list when the file is missing, so the
/// suite's one sentinel test reports it).
const std::vector<ZooModel>& zoo_models();

/// The shape sets of model `name` from NAME.weights.json, inputs and outputs loaded.
std::vector<ShapeSet> load_sets(const std::string& name);

/// What is expected to fail for a model: compiling it, with exactly the missing op targets
/// ("ops") or an error containing a text ("error"); or running the reference interpreter, with
/// an error containing a text ("interp"; the compiled package is still checked).
struct ExpectedFailure {
  std::set<std::string> missing_ops;
  std::string error_substring;
  std::string interp_error_substring;
  bool compile_fails() const { return !missing_ops.empty() || !error_substring.empty(); }
};

/// EXPECTED_FAILURES.txt: lines "NAME ops TARGET...", "NAME error TEXT" or "NAME interp TEXT"
/// (several lines of one model merge); '#' starts a comment line.
const std::map<std::string, ExpectedFailure>& expected_failures();

/// The op targets an "unsupported ops: a ×2, b ×1" compile error names (empty when the
/// message is of another kind).
std::set<std::string> missing_ops_of(const std::string& message);

/// max |got - want| / max |want|: +inf on a shape mismatch or a NaN / infinity in got where
/// want is finite.
double max_rel_error(const Tensor& got, const Tensor& want);

/// max |want| (0 for an all-zero reference).
double max_abs(const Tensor& t);

/// True when ANVIL_ZOO_ALL is set to something other than "" or "0".
bool run_all();

}  // namespace anvil::zoo_test
