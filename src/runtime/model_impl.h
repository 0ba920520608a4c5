// Model::Impl: the state behind runtime::Model (private to src/runtime/model*.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "runtime/model.h"
#include "runtime/package.h"
#include "runtime/rt_api.h"
#include "runtime/packed_weights.h"

namespace anvil::runtime {

/// One set of constant values (manifest order) on the package's device, with the raw pointers
/// handed to run(). A CPU set also owns the packed copies of its GEMM operands (CPU backend
/// state, filled by runs; runtime/packed_weights.h); a device set has none.
struct ConstantSet {
  explicit ConstantSet(Device d)
      : device(d), packed(d.is_cpu() ? std::make_shared<PackedWeightCache>() : nullptr) {}
  /// `value` as a constant of a set on `device`: uploaded to a device, or on the host the value
  /// itself (a view of the mapping) unless `copy` asks for a private copy (written by runs, or
  /// a caller's tensor that may be reused).
  static Tensor place(const Tensor& value, Device device, bool copy);
  /// Sets constant `i` (appending when i == size) to an already placed tensor.
  void set(size_t i, Tensor t);
  /// A copy of this set sharing its tensors; the packed cache keeps the entries of unchanged
  /// pointers once the new values are set (call carry_packed_from after the last set()).
  void carry_packed_from(const ConstantSet& base);

  Device device;
  std::vector<Tensor> tensors;
  std::vector<void*> ptrs;
  std::shared_ptr<PackedWeightCache> packed;  // CPU sets only
};

/// How run() checks one input dim.
struct DimRule {
  enum class Kind {
    kStatic,  // must equal `value`
    kBind,    // the first plain occurrence of symbol `symbol`: binds it (range-checked)
    kSame,    // a later plain occurrence: must equal the bound value
    kExpr,    // an expression: evaluated once every symbol is bound
  };
  Kind kind = Kind::kStatic;
  int64_t value = 0;
  int symbol = -1;
  SymInt expr;
  std::vector<int> expr_symbols;  // kExpr: indices of the symbols the expression uses
};

/// One model instance and its scratch arena.
/// A device run captured as a CUDA graph (model_graph.cpp): replayed with the inputs copied into
/// `in_stage` and the outputs copied out of `out_stage`, the buffers the capture saw.
struct RunGraph {
  void* exec = nullptr;  // AnvilDeviceApi::graph_end's instance
  int runs = 0;          // runs with this key so far (the first runs plainly: a warm-up)
  bool failed = false;   // the capture failed: runs with this key stay plain
  std::vector<std::shared_ptr<Storage>> in_stage, out_stage;
  std::vector<int> out_slot;  // output -> out_stage index (outputs sharing storage share one)
};

struct Runner {
  void* instance = nullptr;
  void* arena = nullptr;  // host arena (std::aligned_alloc), or arena_storage's memory
  size_t arena_bytes = 0;
  std::shared_ptr<Storage> arena_storage;  // a device package's arena (device memory)
  void* stream = nullptr;                  // a device package's stream (AnvilRunArgs::stream)
  // Captured runs by key (the symbols, the arena and constant pointers: everything a capture
  // bakes in besides the staged inputs and outputs), at most kMaxGraphs per runner.
  std::map<std::vector<int64_t>, RunGraph> graphs;
};

/// A dlopened model.so and the in-memory file it was loaded from (both closed on destruction;
/// the file stays open so no other model is loaded from the same /proc/self/fd path).
struct Library {
  void* handle = nullptr;
  int fd = -1;
  Library() = default;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();
};

struct Model::Impl {
  std::string path;
  ModelOptions options;
  std::shared_ptr<Package> package;
  Library library;
  const AnvilModelEntry* entry = nullptr;
  // The services handed to model.so (rt_api() plus the device backend of a device package).
  AnvilRtApi api{};
  const AnvilDeviceApi* device_api = nullptr;  // null for CPU packages
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = nullptr;

  std::vector<IOSpec> input_specs, output_specs;
  std::vector<std::vector<DimRule>> input_rules;
  std::vector<std::pair<int, int>> bind_site;  // symbol -> (input, dim) that binds it, or -1s
  bool has_expr_dims = false;

  // Runners: a free list guarded by runners_mutex.
  std::vector<Runner> runners;
  std::vector<int> free_runners;
  std::mutex runners_mutex;
  std::condition_variable runners_cv;

  // Constants: the active and inactive sets (copy-on-write), guarded by constants_mutex.
  mutable std::mutex constants_mutex;
  std::shared_ptr<const ConstantSet> active, inactive;
  // Mutable buffers (by constant index; undefined for immutable constants) and their lock.
  std::vector<Tensor> buffers;
  bool has_mutable = false;
  mutable std::mutex buffer_mutex;
  // The random stream of randn / rand extern calls: seed 0 (or ANVIL_SEED) at load, continued
  // by every run (thread-safe; core/random.h).
  std::unique_ptr<RandomGenerator> generator = std::make_unique<RandomGenerator>(seed_from_env(0));
  // Per-step profile (Model::set_profiling; ANVIL_PROFILE=1 at load): summed step times, the
  // number of profiled runs and the symbols of the last one, guarded by profile_mutex.
  std::atomic<bool> profiling{false};
  mutable std::mutex profile_mutex;
  std::vector<int64_t> profile_ns;
  int64_t profile_runs = 0;
  std::vector<int64_t> profile_symbols;

  // The NaN / Inf check of runs (Model::set_check_nan_inf; ANVIL_CHECK_NAN_INF=1 at load).
  std::atomic<bool> check_nan_inf{false};

  // CUDA graphs (ModelOptions::cuda_graphs, decided at load): the package is capturable (no
  // host synchronization, no host steps) and the backend has graphs.
  bool graphs = false;

  ~Impl();
  /// Runs `args` on runner `r` as a replay of its captured graph for this key (capturing it on
  /// the key's second run); false when this run must go the plain way (then nothing was queued).
  /// `in_bytes` / `out_bytes`: bytes of each input and output storage the run reads / writes.
  bool graph_run(Runner& r, const AnvilRunArgs& args, RunContext& ctx,
                 const std::vector<int64_t>& symbols, const std::vector<size_t>& in_bytes,
                 const std::vector<size_t>& out_bytes, int& rc);
  /// Destroys runner `r`'s graphs and their staging buffers.
  void drop_graphs(Runner& r);
  /// Builds the per-input dim rules and symbol bind sites (load time).
  void plan_input_checks();
  /// Checks `inputs` and fills the symbol values; throws Error naming input, dim, expected, actual.
  void check_inputs(const std::vector<Tensor>& inputs, std::vector<int64_t>& symbols) const;
  /// Throws when an input the model writes overlaps itself or another input.
  void check_written_inputs(const std::vector<Tensor>& inputs) const;
  /// Gives outputs whose sizes use run-time counts their actual shape (they were allocated at
  /// the capacity): contiguous views of the first elements of their storage.
  void shape_data_dependent_outputs(const std::vector<int64_t>& symbols,
                                    const std::vector<int64_t>& run_symbols,
                                    const RunContext& ctx, std::vector<Tensor>& outputs) const;
  int acquire_runner();
  void release_runner(int r);
};

}  // namespace anvil::runtime
