// Helpers of the nccl backend's 2-GPU tests (test_nccl.cpp): host <-> group-device tensors,
// exact test values, the all_to_all case, and the two-GPU skip-or-fail check.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "../dist/dist_harness.h"

#include "core/tensor.h"
#include "dist/process_group.h"
#include "runtime/device_backend.h"

namespace anvil::nccl_test {

/// The number of CUDA GPUs (0 when there is no CUDA device or backend).
inline int gpu_count() {
  try {
    return runtime::device_backend(Device::Type::kCUDA).device_count();
  } catch (const Error&) {
    return 0;
  }
}

/// Skips a test that needs 2 GPUs when fewer are present; ANVIL_REQUIRE_GPU=2 makes that a
/// failure. ANVIL_REQUIRE_GPU=1 requires one GPU only, so a 1-GPU machine still skips.
#define ANVIL_REQUIRE_TWO_GPUS()                                                              \
  do {                                                                                        \
    const int n_ = ::anvil::nccl_test::gpu_count();                                           \
    if (n_ < 2) {                                                                             \
      const char* req_ = std::getenv("ANVIL_REQUIRE_GPU");                                    \
      const std::string r_ = req_ ? req_ : "";                                                \
      if (r_ == "2") FAIL() << "ANVIL_REQUIRE_GPU=2 but this machine has " << n_ << " GPU(s)"; \
      GTEST_SKIP() << "needs 2 GPUs, this machine has " << n_                                 \
                   << (r_ == "1" ? " (ANVIL_REQUIRE_GPU=1 requires one GPU only: skipped; set " \
                                   "ANVIL_REQUIRE_GPU=2 to make this a failure)"              \
                                 : "");                                                       \
    }                                                                                         \
  } while (0)

/// A host tensor of `sizes` holding `values` (row-major) converted to `dt`.
inline Tensor host_of(const Shape& sizes, const std::vector<double>& values, DType dt) {
  return Tensor::from_vector(values, sizes).to(dt);
}

/// The host tensor `f * k` (1-D) in `dt`.
inline Tensor scaled(const std::vector<double>& k, double f, DType dt) {
  std::vector<double> v;
  for (double x : k) v.push_back(f * x);
  return host_of({static_cast<int64_t>(v.size())}, v, dt);
}

inline Tensor on_gpu(const Tensor& host, const dist::ProcessGroup& pg) {
  return host.to(pg.device());
}
inline Tensor on_host(const Tensor& t) { return t.to(Device::cpu()); }

/// all_to_all_single with uneven splits on W ranks, seen from rank r: rank r sends r + j + 1 rows
/// (2 values each: 100 r + 2 row + col) to rank j.
struct A2aCase {
  std::vector<int64_t> in_splits, out_splits;
  int64_t in_rows = 0, out_rows = 0;
  std::vector<double> in_values, expected;
};

inline A2aCase a2a_case(int world, int r) {
  A2aCase c;
  for (int j = 0; j < world; ++j) {
    c.in_splits.push_back(r + j + 1);
    c.out_splits.push_back(j + r + 1);
  }
  for (int64_t x : c.in_splits) c.in_rows += x;
  for (int64_t x : c.out_splits) c.out_rows += x;
  for (int64_t row = 0; row < c.in_rows; ++row)
    for (int col = 0; col < 2; ++col) c.in_values.push_back(100.0 * r + 2.0 * row + col);
  for (int j = 0; j < world; ++j) {
    int64_t off = 0;  // where rank j's block for rank r starts in rank j's input
    for (int q = 0; q < r; ++q) off += j + q + 1;
    for (int64_t row = off; row < off + j + r + 1; ++row)
      for (int col = 0; col < 2; ++col) c.expected.push_back(100.0 * j + 2.0 * row + col);
  }
  return c;
}

/// Runs dist worker `worker` as 2 ranks of an nccl job (rank r on cuda:r), NVLink multicast off.
inline dist::test::JobResult run_nccl_job(
    const std::string& worker, std::map<std::string, std::string> env = {},
    std::chrono::milliseconds deadline = std::chrono::milliseconds(180000)) {
  dist::test::JobOptions o;
  o.env = std::move(env);
  o.env.emplace("NCCL_NVLS_ENABLE", "0");
  o.env.emplace("ANVIL_DIST_TIMEOUT", "60");
  o.deadline = deadline;
  return dist::test::run_job("nccl", 2, worker, o);
}

}  // namespace anvil::nccl_test
