// runtime::Model: a loaded .anvil package, ready to run.
//
// Load reads the package (mmapped; constants are used in place), checks format and ABI versions
// and the CPU's features, dlopens model.so from a private in-memory file and creates
// `num_runners` model instances, each with its own scratch arena. No compiler or other process
// runs at load.
//
// run() is thread-safe: up to num_runners calls proceed at once and further callers block until
// an instance is free. Every input is checked first (count, device, dtype, rank, static dims,
// symbolic dims against their ranges, derived dims); a failing check throws Error naming the
// input, the dim, the expected and the actual value, and leaves the Model usable. Non-contiguous
// inputs are accepted and copied to contiguous memory first (documented implicit copy).
// Outputs are owned by the caller and never alias the Model's memory (outputs that are views of
// constants or mutable buffers come back as copies). As in PyTorch, outputs that are the same
// tensor or views of one another share one storage (with their own strides and offsets), and
// outputs that are views of an input share the input's storage (of the copy, when the input
// was copied); an output may be a non-contiguous view (docs/package_format.md, "Outputs").
//
// Constants are shared by all runners. Mutable buffers (constants the model updates, e.g.
// BatchNorm statistics or counters) are copied out of the mapping at load and persist across
// runs; runs of a model with mutable buffers are serialised by a lock, since the buffers are
// shared state. update_constants() replaces constant values (copied) either in the active set
// (copy-on-write: runs in flight keep the values they started with) or in an inactive set that
// swap_constants() later makes active atomically with respect to run(). New values for mutable
// buffers are copied into the live buffers at once, whichever set is named.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/symint.h"
#include "core/tensor.h"
#include "runtime/package.h"

namespace anvil {
class ThreadPool;
}

namespace anvil::runtime {

/// Options of Model::load.
struct ModelOptions {
  /// Where the model runs: cpu for CPU packages, cuda / cuda:N for CUDA packages (a package is
  /// refused on a device type it was not compiled for). package_device() gives a package's.
  Device device = Device::cpu();
  /// Model instances (each with its own arena) serving concurrent run() calls; at least 1.
  int num_runners = 1;
  /// Threads of the Model's pool (the calling thread included); 0: ANVIL_NUM_THREADS or the
  /// hardware thread count (the process-wide pool).
  int num_threads = 0;
  /// Device packages: capture each input-shape set's run as a CUDA graph (on its second run)
  /// and replay it, where the package allows it (no step waits on the host: `anvil inspect`
  /// says so). ANVIL_CUDA_GRAPHS=0 in the environment at load turns it off as well.
  bool cuda_graphs = true;
};

/// The device type a package was compiled for, as cuda:0 or cpu (opens its manifest only).
Device package_device(const std::string& path);

/// A user input or output as the Model describes it.
struct IOSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<std::string> sizes;  // "s77", "256", "s77 + 1"
  std::vector<SymRange> ranges;    // the values each dim may take ([256, 256] when static)
  /// Inputs only: run() writes this input, as the exported graph does in eager (an aten.copy_
  /// or in-place op on it, e.g. dist.all_reduce(x) of an input): the caller's tensor holds the
  /// new value afterwards (a non-contiguous one gets it copied back).
  bool mutated = false;
};

/// One step of run() as profiled (Model::set_profiling): the manifest's kernel with its totals.
struct StepProfile {
  std::string name, kind, nodes;
  int64_t calls = 0;     // profiled runs
  double total_ms = 0;   // summed wall time of the step over those runs
  int64_t bytes = 0;     // bytes one call moves (reads + writes) at the last profiled sizes
  /// Effective bandwidth: bytes * calls / time.
  double gb_per_s() const { return total_ms > 0 ? bytes * 1e-6 * calls / total_ms : 0.0; }
};

/// A loaded, runnable package.
class Model {
 public:
  /// Loads the package at `path`. Throws Error when it is missing, corrupt, newer than this
  /// runtime, built for another ABI, device or for ISA features this CPU lacks.
  static Model load(const std::string& path, const ModelOptions& options = {});

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  /// Runs the model on `inputs` (manifest order) and returns its outputs. Thread-safe. A device
  /// package takes inputs on its device (outputs come back there) or all on the host: then they
  /// are copied over, the outputs copied back to the host, and inputs the model writes are
  /// updated in the caller's memory. Inputs on two devices are an error.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  /// Device packages: run() that queues the work on the runner's stream and returns without
  /// waiting for it. The outputs hold the results once synchronize() returns; the inputs must
  /// stay alive and unchanged until then. Runs queued on one runner run in order; errors of
  /// the queued work surface in synchronize(). For CPU packages it is run(). Thread-safe.
  std::vector<Tensor> enqueue(const std::vector<Tensor>& inputs) const;
  /// Waits for every run enqueue() queued; throws Error when one failed on the device.
  void synchronize() const;
  /// True when runs are captured and replayed as CUDA graphs (ModelOptions::cuda_graphs and a
  /// package with no step that waits on the host).
  bool uses_cuda_graphs() const;

  const std::vector<IOSpec>& input_specs() const;
  const std::vector<IOSpec>& output_specs() const;
  /// Internal constant names in manifest order, and name -> original (module path) name.
  std::vector<std::string> constant_names() const;
  std::map<std::string, std::string> constant_original_names() const;
  /// The manifest's constants table.
  const std::vector<ConstantSpec>& constant_specs() const;
  /// A copy of a constant's current value (mutable buffers: their state now). Throws Error for
  /// an unknown name.
  Tensor constant(const std::string& name) const;

  /// Replaces constants by name (values are copied; dtype and sizes must match). With
  /// `inactive`, the values go to the inactive set (started from the active one) and take
  /// effect at swap_constants(); otherwise they become active at once (copy-on-write).
  /// `require_full` demands a value for every immutable constant. Throws Error on unknown
  /// names, wrong dtype, sizes or device, or a partial update when a full one is required; then
  /// nothing is changed.
  void update_constants(const std::map<std::string, Tensor>& values, bool inactive,
                        bool require_full = false);
  /// Makes the inactive constant set active, atomically with respect to run(). Throws Error
  /// when no inactive set was filled since the last swap.
  void swap_constants();

  /// Per-step timing of later runs, on or off (off by default; ANVIL_PROFILE=1 in the
  /// environment at load turns it on). The outputs are the same either way. Thread-safe.
  void set_profiling(bool on) const;
  /// The per-step totals of the profiled runs since load or reset_profile(), in run() order
  /// (empty when the package records no steps, e.g. a model of views only).
  std::vector<StepProfile> profile() const;
  void reset_profile() const;

  /// The NaN / Inf check of later runs, on or off (off by default: nothing is scanned;
  /// ANVIL_CHECK_NAN_INF=1 in the environment at load turns it on). On, each run scans the
  /// floating and complex buffers every step wrote (outputs and intermediates, each once its
  /// last writer has run; on a device package, copied to the host after the step) and fails at
  /// the first NaN or infinity with an Error naming the step, its graph nodes, the buffer, the
  /// element and its value; the Model stays usable. Runs are not captured as CUDA graphs while
  /// it is on. Packages compiled before the check existed have nothing to scan. Thread-safe.
  void set_check_nan_inf(bool on) const;
  bool check_nan_inf() const;

  const Manifest& manifest() const;
  const Package& package() const;
  /// model.so's compile-time metadata (its metadata_json()).
  std::string metadata_json() const;
  int num_runners() const;
  /// The device the model runs on (inputs must be there; outputs come back there).
  Device device() const;
  /// The pool runs use for parallel_for.
  ThreadPool& thread_pool() const;

  /// Implementation state (src/runtime/model_impl.h); public only so runtime internals name it.
  struct Impl;
  /// (runtime internals) run() of a device package with host tensors: run_impl's `inputs` are
  /// their device buffers, filled from `host_inputs` (contiguous) on the runner's stream; the
  /// outputs run_impl could copy to the host on that stream before its one synchronize come
  /// back in `host_outputs` (an undefined entry: the caller copies that output itself).
  struct HostIo {
    const std::vector<Tensor>* host_inputs = nullptr;
    std::vector<Tensor>* host_outputs = nullptr;
  };

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::vector<Tensor> run_impl(const std::vector<Tensor>& inputs, bool wait,
                               const HostIo* host_io = nullptr) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil::runtime
