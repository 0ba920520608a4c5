// Helpers of the spec/aot.md section 4 tests: compile a fixture of tests/fixtures/aot through the
// real path (frontend -> passes -> generate_cpu -> toolchain -> write_package) into a .anvil
// package, load it with runtime::Model, and compare outputs with PyTorch's.
//
// Batching (CI has 2 cores): the first build() of a process generates every fixture's sources,
// each model in its own C++ namespace with its own entry symbol, and concatenates them into
// kMergedFiles translation units. Each package's model.so links those shared objects plus a
// tiny per-model translation unit whose anvil_model_entry forwards to that model's entry. The
// toolchain caches objects (and linked libraries) by content hash, so the merged units are
// compiled once for all models and all test processes (ctest runs each test in its own
// process).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "common/check.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "passes/loop_ir.h"
#include "runtime/model.h"

namespace anvil::aot_test {

/// The outcome of compiling one fixture.
struct Built {
  std::string package;  // path of the .anvil package (empty on failure)
  std::string error;    // the compile / load error text (empty on success)
  passes::ProgramStats stats;
  std::string program_text;  // the loop-kernel IR
};

/// Compiles fixture `name` (tests/fixtures/aot/<name>.pt2) into a package; cached per process.
const Built& build(const std::string& name);

/// Compiles a graph (e.g. parsed from the text IR) on its own into a package named `name` for
/// `target` (codegen/toolchain.h: native, x86_64-avx2, x86_64-avx512, x86_64); cached per
/// process by name.
const Built& build_graph(const std::string& name, const ir::Graph& graph,
                         const std::string& target = "native");

/// The message of the Error `f` throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// True when `s` contains `part`.
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Why fixture `name` is expected not to build yet, or nullptr: the explicit list of fixtures
/// whose build may fail (each with its reason). Any other build or load error fails the test.
const char* known_unsupported(const std::string& name);

/// Loads a built package (build() already loaded it once, so this does not fail for missing
/// runtime kernels). Use the ANVIL_AOT_LOAD macro in tests.
runtime::Model load(const Built& b, const runtime::ModelOptions& options = {});

/// Fixture inputs / outputs of a shape set: kind "in" or "out", suffix "" or "_0", "_1"...
std::vector<Tensor> read_set(const std::string& name, const char* kind, const std::string& suffix);
/// Inputs converted to the dtypes the model's input specs want (fp16 / bf16 fixtures are
/// stored as float32 .npy files).
std::vector<Tensor> inputs_for(const runtime::Model& m, const std::vector<Tensor>& ins);

/// Tolerance for comparing an output of `dtype` with PyTorch (relative to max(1, max |want|)).
double tolerance(DType dtype);
/// Largest error of `got` against `want` relative to max(1, max |want|); NaNs must be at the
/// same positions and infinities equal. Returns +inf on a shape mismatch or misplaced NaN.
double rel_error(const Tensor& got, const Tensor& want);
/// Expects every output to match `want` within tolerance(dtype).
void expect_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                    const std::string& label);

/// An op-surface fixture (tests/fixtures/aot/`name`.pt2 with its .npy sets): compiled, run on
/// every stored shape set ("", "_0", "_1") and compared with PyTorch's outputs, and the
/// reference interpreter compared the same way.
void check_against_pytorch(const std::string& name);

/// The distinct op targets of a fixture's graph after import.
std::set<std::string> imported_targets(const std::string& name);

}  // namespace anvil::aot_test

/// Compiles and loads fixture NAME into `model`. A build or load error fails the test, unless
/// NAME is on the known_unsupported() list, where it skips with the listed reason (and a fixture
/// on the list that builds fails too, so the list cannot go stale).
#define ANVIL_AOT_LOAD(model, NAME)                                                          \
  const ::anvil::aot_test::Built& model##_built = ::anvil::aot_test::build(NAME);           \
  if (const char* why_ = ::anvil::aot_test::known_unsupported(NAME)) {                       \
    ASSERT_FALSE(model##_built.error.empty())                                                \
        << NAME << " builds now: remove it from known_unsupported() (" << why_ << ")";       \
    GTEST_SKIP() << "known unsupported (" << why_ << "): " << model##_built.error;          \
  }                                                                                          \
  ASSERT_TRUE(model##_built.error.empty()) << model##_built.error;                           \
  ::anvil::runtime::Model model = ::anvil::aot_test::load(model##_built)
