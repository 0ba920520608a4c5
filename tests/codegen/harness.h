// Test harness for generated CPU code: compiles the sources of one or more graphs into one
// shared library with the system compiler, loads it, and runs each model through a minimal
// AnvilRtApi (chunked serial parallel_for, naive GEMMs, extern calls forwarded to the reference
// kernels of the op table). No dependency on src/runtime.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "anvil/anvil_rt.h"
#include "codegen/generate.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace anvil::testing {

/// One model inside a loaded test library.
class LoadedModel {
 public:
  LoadedModel(const AnvilModelEntry* entry, codegen::CpuCodegenResult gen,
              const passes::Program* program);
  ~LoadedModel();
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;

  /// Runs with contiguous user inputs; returns the outputs. Throws Error with the run's message
  /// when run() fails.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  const codegen::CpuCodegenResult& generated() const { return gen_; }
  /// Current constants (mutable buffers hold their updated values).
  const std::vector<Tensor>& constants() const { return constants_; }

 private:
  const AnvilModelEntry* entry_;
  void* model_ = nullptr;
  codegen::CpuCodegenResult gen_;
  std::vector<Tensor> constants_;
  std::vector<std::string> symbols_;
  std::vector<std::vector<SymInt>> input_sizes_;
  std::vector<std::pair<DType, size_t>> outputs_;  // dtype, rank
};

/// A compiled library holding several models.
class TestLibrary {
 public:
  ~TestLibrary();
  LoadedModel& model(const std::string& name) { return *models_.at(name); }
  std::map<std::string, std::unique_ptr<LoadedModel>> models_;
  void* handle_ = nullptr;
};

/// Generates every graph (entry symbol "entry_<name>"), compiles all sources into one library
/// through the object cache of test_cache_dir() (compiler failures throw Error with the
/// compiler's output) and loads the models.
/// `merge_into` > 0 concatenates all sources into that many files (fewer compiler runs; each
/// model has its own namespace, so the texts do not clash).
std::unique_ptr<TestLibrary> build_library(
    const std::vector<std::pair<std::string, const ir::Graph*>>& graphs,
    const codegen::CpuCodegenOptions& base = {}, int merge_into = 0);

/// The object cache the tests' generated libraries are built through: $ANVIL_TEST_CACHE_DIR,
/// else test_cache/codegen/ in the build folder.
std::string test_cache_dir();

/// max |a - b| / max(1, max |b|) over all elements (shapes must match); complex tensors on
/// both parts.
double rel_error(const Tensor& got, const Tensor& want);

/// A complex tensor's values as its real dtype with a trailing dim of 2 (a view of its storage,
/// like torch.view_as_real); a real tensor as it is.
Tensor complex_parts(const Tensor& t);

/// Random tensor (normal-ish floats in [-2, 2], complex values with both parts so, ints in
/// [0, 5), bools).
Tensor random_tensor(const Shape& sizes, DType dtype, uint64_t seed);

}  // namespace anvil::testing
