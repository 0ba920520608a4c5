#include "runtime/rt_api.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <utility>

#include "core/error.h"
#include "runtime/collectives.h"
#include "runtime/externs.h"
#include "runtime/gemm_call.h"
#include "runtime/host_staging.h"
#include "runtime/kernels/gemm_packed.h"

#ifdef ANVIL_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace anvil::runtime {

void RunContext::set_error(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return;
  failed_ = true;
  error_ = message.empty() ? "model run failed" : message;
}

bool RunContext::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

std::string RunContext::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void RunContext::issued(int64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.push_back(handle);
}

void RunContext::waited(int64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.erase(std::remove(in_flight_.begin(), in_flight_.end(), handle), in_flight_.end());
}

std::vector<int64_t> RunContext::take_in_flight() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(in_flight_, {});
}

std::shared_ptr<Storage> RunContext::allocate(int64_t bytes) const {
  const auto n = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  if (device_api)  // a device package's run: every pointer it gets is the device's memory
    return Storage::allocate(n, Device::cuda(device_index), /*zero=*/false);
  return Storage::allocate_uninitialized(n);
}

void* RunContext::alloc_scratch(int64_t bytes) {
  ANVIL_CHECK(bytes >= 0, "api->run_alloc", "negative size", ">= 0 bytes", std::to_string(bytes));
  auto st = allocate(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  scratch_.push_back(std::move(st));
  return scratch_.back()->data();
}

void RunContext::expect_late_outputs(void** slots, std::vector<bool> late) {
  std::lock_guard<std::mutex> lock(mutex_);
  out_slots_ = slots;
  late_storage_.assign(late.size(), nullptr);
  late_ = std::move(late);
}

void* RunContext::alloc_output(int32_t index, int64_t bytes) {
  const auto i = static_cast<size_t>(index);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ANVIL_CHECK(index >= 0 && i < late_.size() && late_[i], "api->output_alloc",
                "an output whose storage the runtime did not leave to run()",
                "an output with layout base_kind 3", "output " + std::to_string(index));
    ANVIL_CHECK(!late_storage_[i], "api->output_alloc", "output storage allocated twice",
                "one call per output", "output " + std::to_string(index));
  }
  ANVIL_CHECK(bytes >= 0, "api->output_alloc", "negative size", ">= 0 bytes",
              std::to_string(bytes));
  auto st = allocate(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  late_storage_[i] = std::move(st);
  out_slots_[i] = late_storage_[i]->data();
  return out_slots_[i];
}

const std::shared_ptr<Storage>& RunContext::late_output(size_t index) const {
  static const std::shared_ptr<Storage> kNone;
  std::lock_guard<std::mutex> lock(mutex_);
  return index < late_storage_.size() ? late_storage_[index] : kNone;
}

namespace {

/// Products smaller than this many multiply-adds run on the calling thread.
constexpr int64_t kParallelGemmWork = int64_t{1} << 18;
/// The smallest row / column block one thread takes.
constexpr int64_t kMinGemmBlock = 16;

/// A leading dimension that BLAS accepts: when the stored matrix has at most one row the value
/// is never used for addressing, but cblas still checks it against the row length.
int64_t fix_ld(int64_t rows, int64_t cols, int64_t ld) {
  return rows <= 1 ? std::max<int64_t>({ld, cols, 1}) : ld;
}

template <typename T>
void blas_serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                 int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == T(0)) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  lda = ta ? fix_ld(k, m, lda) : fix_ld(m, k, lda);
  ldb = tb ? fix_ld(n, k, ldb) : fix_ld(k, n, ldb);
  ldc = fix_ld(m, n, ldc);
#ifdef ANVIL_HAVE_OPENBLAS
  const CBLAS_TRANSPOSE cta = ta ? CblasTrans : CblasNoTrans, ctb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, cta, ctb, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
                static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
  else
    cblas_dgemm(CblasRowMajor, cta, ctb, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
                static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
#else
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      T acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * acc + (beta == T(0) ? T(0) : beta * c[i * ldc + j]);
    }
  }
#endif
}

void init_blas() {
#ifdef ANVIL_HAVE_OPENBLAS
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
#endif
}

template <typename T>
void gemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  init_blas();
  ThreadPool& pool = current_thread_pool();
  const int threads = ThreadPool::in_parallel_region() ? 1 : pool.num_threads();
  if (threads <= 1 || m * n * std::max<int64_t>(k, 1) < kParallelGemmWork ||
      std::max(m, n) < 2 * kMinGemmBlock) {
    blas_serial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (m >= n || n < 2 * kMinGemmBlock) {
    // Row blocks: rows [r0, r1) of op(A) and C.
    const int64_t grain = std::max<int64_t>(kMinGemmBlock, (m + threads - 1) / threads);
    pool.parallel_for(0, m, grain, [&](int64_t r0, int64_t r1) {
      const T* ab = ta ? a + r0 : a + r0 * lda;
      blas_serial(ta, tb, r1 - r0, n, k, alpha, ab, lda, b, ldb, beta, c + r0 * ldc, ldc);
    });
  } else {
    // Column blocks: columns [c0, c1) of op(B) and C.
    int64_t grain = std::max<int64_t>(kMinGemmBlock, (n + threads - 1) / threads);
    grain = (grain + kMinGemmBlock - 1) / kMinGemmBlock * kMinGemmBlock;
    pool.parallel_for(0, n, grain, [&](int64_t c0, int64_t c1) {
      const T* bb = tb ? b + c0 * ldb : b + c0;
      blas_serial(ta, tb, m, c1 - c0, k, alpha, a, lda, bb, ldb, beta, c + c0, ldc);
    });
  }
}

/// Whether ANVIL_GEMM=blas routes constant-B products to OpenBLAS (benchmarks compare both).
bool const_b_uses_blas() {
  static const bool blas = [] {
    const char* v = std::getenv("ANVIL_GEMM");
    return v && std::string(v) == "blas";
  }();
  return blas;
}

/// C = alpha * op(A) * packed B on the current pool, split as packed_gemm_split says.
void packed_gemm_impl(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                      int64_t lda, const float* packed, float* c, int64_t ldc,
                      const float* row_bias, bool relu, const float* bias = nullptr,
                      GemmAct act = GemmAct::kNone) {
  ThreadPool& pool = current_thread_pool();
  const int threads = ThreadPool::in_parallel_region() ? 1 : pool.num_threads();
  const PackedGemmSplit split = packed_gemm_split(m, n, k, threads);
  if (split.kind == PackedGemmSplit::kSerial) {
    sgemm_packed(ta, m, n, k, alpha, a, lda, packed, bias, relu, c, ldc, 0, n, GemmIsa::kAuto,
                 row_bias, act);
  } else if (split.kind == PackedGemmSplit::kColumnPanels) {
    pool.parallel_for(
        0, (n + kPackedPanel - 1) / kPackedPanel, split.block, [&](int64_t p0, int64_t p1) {
          sgemm_packed(ta, m, n, k, alpha, a, lda, packed, bias, relu, c, ldc, p0 * kPackedPanel,
                       std::min(n, p1 * kPackedPanel), GemmIsa::kAuto, row_bias, act);
        });
  } else {
    pool.parallel_for(0, m, split.block, [&](int64_t r0, int64_t r1) {
      const float* ab = ta ? a + r0 : a + r0 * lda;
      sgemm_packed(ta, r1 - r0, n, k, alpha, ab, lda, packed, bias, relu, c + r0 * ldc, ldc, 0, n,
                   GemmIsa::kAuto, row_bias ? row_bias + r0 : nullptr, act);
    });
  }
}

void api_set_error(void* run_ctx, const char* message);

void api_sgemm_const_b(void* run_ctx, int ta, int tb, int64_t m, int64_t n, int64_t k,
                       float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc) {
  PackedWeightCache* cache =
      run_ctx ? static_cast<RunContext*>(run_ctx)->packed_weights : nullptr;
  try {
    sgemm_const_b(cache, ta != 0, tb != 0, m, n, k, alpha, a, lda, b, ldb, c, ldc);
  } catch (const std::exception& e) {
    api_set_error(run_ctx, e.what());
  }
}

void api_parallel_for(int64_t begin, int64_t end, int64_t grain,
                      void (*fn)(void* ctx, int64_t b, int64_t e), void* ctx) {
  current_thread_pool().parallel_for(begin, end, grain, fn, ctx);
}

void api_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_impl<float>(ta != 0, tb != 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void api_dgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
               int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_impl<double>(ta != 0, tb != 0, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void api_set_error(void* run_ctx, const char* message) {
  if (run_ctx) static_cast<RunContext*>(run_ctx)->set_error(message ? message : "");
}

int api_extern_call(void* run_ctx, const char* target, const AnvilRtTensor* inputs,
                    int32_t n_inputs, const AnvilRtScalar* attrs, int32_t n_attrs,
                    AnvilRtTensor* outputs, int32_t n_outputs) {
  const std::string name = target ? target : "(null)";
  try {
    auto* ctx = static_cast<RunContext*>(run_ctx);
    // A device run: a kernel registered for the device takes its memory as is; otherwise the
    // CPU kernel runs on host copies.
    ExternFn device_fn =
        ctx && ctx->device_api
            ? find_extern(name, static_cast<Device::Type>(ctx->device_api->device_type))
            : nullptr;
    ExternFn fn = device_fn ? device_fn : find_extern(name);
    if (!fn) {
      api_set_error(run_ctx,
                    str("no runtime kernel is registered for extern op '", name, "'").c_str());
      return 1;
    }
    std::string error;
    auto run = [&](const AnvilRtTensor* in, AnvilRtTensor* out) {
      ExternCall call(target, in, n_inputs, attrs, n_attrs, out, n_outputs);
      if (ctx) {
        call.set_generator(ctx->generator);
        call.set_packed_weights(ctx->packed_weights);
      }
      const int rc = fn(call);
      if (rc != 0) error = call.error();
      return rc;
    };
    // A device package's tensors are device memory: the CPU kernel runs on host copies.
    const int rc = ctx && ctx->device_api && !device_fn
                       ? run_on_host(*ctx->device_api, ctx->device_index, ctx->stream,
                                     "host step " + name, inputs, n_inputs, outputs, n_outputs,
                                     run)
                       : run(inputs, outputs);
    if (rc != 0) api_set_error(run_ctx, str(name, ": ", error.empty() ? "failed" : error).c_str());
    return rc;
  } catch (const std::exception& e) {
    api_set_error(run_ctx, str(name, ": ", e.what()).c_str());
  } catch (...) {
    api_set_error(run_ctx, str(name, ": unknown exception").c_str());
  }
  return 1;
}

}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_impl<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_impl<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemm_const_b(PackedWeightCache* cache, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                   int64_t ldc, const float* bias, bool relu, GemmAct act) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || const_b_uses_blas()) {
    gemm_impl<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
    for (int64_t i = 0; i < m && (bias || relu || act != GemmAct::kNone); ++i) {
      float* row = c + i * ldc;  // the same epilogue, as a pass over C
      for (int64_t j = 0; bias && j < n; ++j) row[j] += bias[j];
      for (int64_t j = 0; relu && j < n; ++j) row[j] = row[j] < 0.0f ? 0.0f : row[j];
      gemm_activate(act, row, n);
    }
    return;
  }
  if (ta) lda = fix_ld(k, m, lda);
  if (cache) {
    const auto packed = cache->get(tb, k, n, b, ldb);
    packed_gemm_impl(ta, m, n, k, alpha, a, lda, packed->data(), c, ldc, nullptr, relu, bias, act);
  } else {
    const PackedMatrix packed(tb, k, n, b, ldb);
    packed_gemm_impl(ta, m, n, k, alpha, a, lda, packed.data(), c, ldc, nullptr, relu, bias, act);
  }
}

PackedGemmSplit packed_gemm_split(int64_t m, int64_t n, int64_t k, int threads) {
  PackedGemmSplit s;
  const int64_t panels = (n + kPackedPanel - 1) / kPackedPanel;
  if (threads <= 1 || m * n * k < kParallelGemmWork) {
    s.block = panels;
    return s;
  }
  // Column chunks make every thread read all of A and 1/T of B, row blocks 1/T of A and all of
  // B: columns unless A is clearly the larger operand (m > 2n: ConvNeXt's 3136 x 96 x 384; at
  // m ~ n the column chunks are the better balanced) or the panels are too few to share, and
  // always when there are too few rows to share.
  const bool columns_share = panels >= 2 * threads, rows_share = m >= 2 * kMinGemmBlock;
  if (!rows_share || (columns_share && m <= 2 * n)) {
    s.kind = PackedGemmSplit::kColumnPanels;
    s.block = (panels + threads - 1) / threads;
    s.chunks = (panels + s.block - 1) / s.block;
  } else {
    s.kind = PackedGemmSplit::kRowBlocks;
    // whole 8-row register blocks per chunk where that still gives every thread rows
    const int64_t per = (m + threads - 1) / threads;
    s.block = std::max<int64_t>(kMinGemmBlock, per >= 64 ? (per + 7) / 8 * 8 : per);
    s.chunks = (m + s.block - 1) / s.block;
  }
  return s;
}

void sgemm_prepacked(bool ta, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* packed_b, float* c, int64_t ldc,
                     const float* row_bias, bool relu) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) {
      const float v = row_bias ? row_bias[i] : 0.0f;
      std::fill(c + i * ldc, c + i * ldc + n, relu && v < 0.0f ? 0.0f : v);
    }
    return;
  }
  packed_gemm_impl(ta, m, n, k, alpha, a, lda, packed_b, c, ldc, row_bias, relu);
}

/// api->run_alloc / api->output_alloc: errors go to the run's context, not across the C ABI.
void* api_run_alloc(void* run_ctx, int64_t bytes) {
  if (!run_ctx) return nullptr;
  auto* ctx = static_cast<RunContext*>(run_ctx);
  try {
    return ctx->alloc_scratch(bytes);
  } catch (const std::exception& e) {
    ctx->set_error(e.what());
    return nullptr;
  }
}

void* api_output_alloc(void* run_ctx, int32_t index, int64_t bytes) {
  if (!run_ctx) return nullptr;
  auto* ctx = static_cast<RunContext*>(run_ctx);
  try {
    return ctx->alloc_output(index, bytes);
  } catch (const std::exception& e) {
    ctx->set_error(e.what());
    return nullptr;
  }
}

/// The most bytes the kept copies of one constant set may take before const_derived keeps no
/// more (ANVIL_PACKED_CONSTANTS_MB; default a quarter of the machine's memory); -1 with
/// `*bad` set when the variable is not a non-negative integer.
int64_t packed_constants_budget(std::string* bad) {
  const char* v = std::getenv("ANVIL_PACKED_CONSTANTS_MB");
  if (!v || !*v) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? int64_t(pages) * page / 4 : int64_t(1) << 32;
  }
  char* end = nullptr;
  errno = 0;
  const long long mb = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || mb < 0 || mb > (int64_t(1) << 40)) {
    *bad = v;
    return -1;
  }
  return int64_t(mb) << 20;
}

/// api->const_derived: the run's PackedWeightCache keeps the copy (none: null, no error), up to
/// packed_constants_budget(); past it the caller builds its copy per call (a declined key stays
/// declined for the constant set).
const void* api_const_derived(void* run_ctx, const void* address, const char* layout,
                              int64_t bytes, void (*fill)(void* fill_ctx, void* dst),
                              void* fill_ctx) {
  auto* ctx = static_cast<RunContext*>(run_ctx);
  if (!ctx) return nullptr;
  PackedWeightCache* cache = ctx->packed_weights;
  if (!cache || !address || !layout || !fill || bytes <= 0) return nullptr;
  try {
    const PackedWeightCache::Derived d =
        cache->derived(address, layout, [&]() -> PackedWeightCache::Derived {
          std::string bad;  // read on a miss only: once per constant and layout
          const int64_t budget = packed_constants_budget(&bad);
          if (budget < 0)
            throw Error("ANVIL_PACKED_CONSTANTS_MB is not a number of MiB", "const_derived",
                        "an integer >= 0", "'" + bad + "'");
          if (cache->bytes() + bytes > budget) return {};  // over the budget: per call
          void* p = std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64));
          if (!p)
            throw Error("out of memory for a packed copy of a constant", "const_derived",
                        std::to_string(bytes) + " bytes", "allocation failed");
          std::shared_ptr<void> keep(p, std::free);
          fill(fill_ctx, p);
          return {keep, bytes};
        });
    return d.object.get();
  } catch (const std::exception& e) {
    ctx->set_error(e.what());
    return nullptr;
  }
}

const AnvilRtApi* rt_api() {
  static const AnvilRtApi api = {
      ANVIL_MODEL_ABI_VERSION, api_parallel_for, api_sgemm, api_dgemm,
      api_extern_call,         api_set_error,
      ANVIL_MODEL_ABI_MINOR_VERSION, coll_issue, coll_wait,
      api_sgemm_const_b,       api_run_alloc, api_output_alloc,
      nullptr,  // device: set per model by Model::load for device packages
      coll_issue_stream,       coll_wait_stream,
      api_gemm,               api_const_derived,
  };
  return &api;
}

}  // namespace anvil::runtime
