// The runtime side of include/anvil/anvil_rt.h: the AnvilRtApi table generated code calls
// (thread pool, GEMM, extern kernels, errors) and the per-run context behind run_ctx.
//
// Threading: parallel_for runs on the thread pool current on the calling thread (Model::run
// installs the Model's pool). GEMM: OpenBLAS is kept single-threaded (openblas_set_num_threads(1)
// on first use) and large products are split into row or column blocks over anvil's pool, so the
// process never has two sets of worker threads competing for the cores.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"
#include "core/random.h"
#include "core/storage.h"
#include "core/thread_pool.h"
#include "runtime/kernels/gemm_packed.h"  // GemmAct
#include "runtime/packed_weights.h"

namespace anvil::runtime {

/// The state of one run, passed to generated code as AnvilRunArgs::run_ctx.
class RunContext {
 public:
  /// Records `message` unless an error was recorded already (first one wins). Thread-safe.
  void set_error(const std::string& message);
  bool failed() const;
  std::string error() const;

  /// Packed copies of constant GEMM operands (the run's constant set); null: pack per call.
  PackedWeightCache* packed_weights = nullptr;
  /// The Model's random generator (randn / rand externs); null: the process-wide one.
  RandomGenerator* generator = nullptr;
  /// The run's stream (AnvilRunArgs::stream; null for CPU packages): the stream of the
  /// collective services without one of their own (api->coll_issue / coll_wait).
  void* stream = nullptr;
  /// The device backend and ordinal of a device package's run (null for CPU packages): the
  /// extern calls of such a run get device memory and are staged through the host
  /// (runtime/host_staging.h).
  const AnvilDeviceApi* device_api = nullptr;
  int device_index = 0;
  /// The run's NaN / Inf check (Model::set_check_nan_inf), called through
  /// AnvilRunArgs::after_step with the step's index; throws anvil::Error. Empty: off.
  std::function<void(int32_t)> after_step;

  /// Collective handles this run issued and has not waited yet (api->coll_issue / coll_wait):
  /// a run that fails between an issue and its wait leaves them for Model::run to finish.
  void issued(int64_t handle);
  void waited(int64_t handle);
  std::vector<int64_t> take_in_flight();

  /// Memory sized during the run (api->run_alloc): 64-byte aligned, owned by the context, so it
  /// is freed after Model::run has finished the run's collectives. Throws anvil::Error.
  void* alloc_scratch(int64_t bytes);

  /// User outputs whose storage run() allocates (layout base_kind 3, api->output_alloc):
  /// `slots` is AnvilRunArgs::outputs (the runtime's array), `late[i]` says which are allowed.
  void expect_late_outputs(void** slots, std::vector<bool> late);
  /// Allocates late output `index` and stores it in its slot. Throws anvil::Error.
  void* alloc_output(int32_t index, int64_t bytes);
  /// The storage run() allocated for output `index` (null when it did not).
  const std::shared_ptr<Storage>& late_output(size_t index) const;

 private:
  /// `bytes` (at least 1) of the run's memory: host, or the device's for a device package.
  std::shared_ptr<Storage> allocate(int64_t bytes) const;

  std::vector<int64_t> in_flight_;
  std::vector<std::shared_ptr<Storage>> scratch_;
  void** out_slots_ = nullptr;
  std::vector<bool> late_;
  std::vector<std::shared_ptr<Storage>> late_storage_;
  mutable std::mutex mutex_;
  bool failed_ = false;
  std::string error_;
};

/// Row-major C = alpha * op(A) * op(B) (beta = 0) for a B that stays unchanged across calls:
/// packed once into `cache` (when given) and multiplied with runtime/kernels/gemm_packed.h on
/// the current thread pool. ANVIL_GEMM=blas sends it to sgemm (OpenBLAS) instead. `bias` (n
/// floats, added to every row), ReLU and `act` are applied in the kernel's store (after the
/// product on the OpenBLAS path).
void sgemm_const_b(PackedWeightCache* cache, bool trans_a, bool trans_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                   float* c, int64_t ldc, const float* bias = nullptr, bool relu = false,
                   GemmAct act = GemmAct::kNone);

/// How sgemm_const_b / sgemm_prepacked split an m x n x k product over `threads` threads:
/// serially below 2^18 multiply-adds or on one thread; else column panels (chunks of `block`
/// 16-column panels, every chunk all m rows, each thread reading all of A in place) when there
/// are at least two panels per thread and m <= 2n (or m < 32); else row blocks of `block` rows
/// (all n columns each; a multiple of 8 rows from 64 up). Chunks are near-equal
/// (ThreadPool::parallel_for): at m = 197, n = 768 on 8 threads every thread computes 197 x 96;
/// at m = 3136, n = 384 (ConvNeXt-T's first MLP) 392 x 384.
struct PackedGemmSplit {
  enum Kind { kSerial, kColumnPanels, kRowBlocks } kind = kSerial;
  int64_t block = 0;   // panels (kColumnPanels, kSerial: all of them) or rows per chunk
  int64_t chunks = 1;  // chunks = threads that get work
};
PackedGemmSplit packed_gemm_split(int64_t m, int64_t n, int64_t k, int threads);

/// Row-major C = alpha * op(A) * B (+ row_bias[i] on row i when given, then max(x, 0) with
/// `relu`) for a B already packed by
/// pack_b (gemm_packed.h), split over the current thread pool (column panels, or row blocks when
/// the panels are too few to share).
void sgemm_prepacked(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* packed_b, float* c, int64_t ldc,
                     const float* row_bias = nullptr, bool relu = false);

/// The process-wide AnvilRtApi table.
const AnvilRtApi* rt_api();

/// The host GEMM every runtime path uses (api->sgemm / dgemm, the extern kernels): row-major
/// C = alpha * op(A) * op(B) + beta * C on the current thread pool (serial inside a
/// parallel_for; see above).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc);

}  // namespace anvil::runtime
