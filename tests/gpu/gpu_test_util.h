// Helpers of the GPU tests (label gpu): fixtures, the skip-or-fail GPU check, CUDA compiles.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "driver/compile.h"
#include "runtime/device_backend.h"

namespace anvil::gpu_test {

namespace fs = std::filesystem;

inline std::string fixture(const std::string& name) { return std::string(ANVIL_FIXTURES_DIR) + "/" + name; }

/// Empty when cuda:0 can run packages; else why not.
inline std::string gpu_missing() {
  try {
    runtime::require_device(Device::cuda(0), "tests/gpu");
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

#define ANVIL_REQUIRE_GPU()                                                               \
  do {                                                                                    \
    static const std::string why = ::anvil::gpu_test::gpu_missing();                      \
    if (!why.empty()) {                                                                   \
      const char* req = std::getenv("ANVIL_REQUIRE_GPU");                                 \
      if (req && (std::string(req) == "1" || std::string(req) == "2"))                  \
        FAIL() << "ANVIL_REQUIRE_GPU=" << req << " but: " << why;                        \
      GTEST_SKIP() << "no GPU: " << why;                                                  \
    }                                                                                     \
  } while (0)

inline fs::path out_dir() {
  const char* d = std::getenv("ANVIL_TEST_OUTDIR");
  fs::path p = d && *d ? fs::path(d) : fs::temp_directory_path();
  p /= "anvil_gpu_" + std::to_string(::getpid());
  fs::create_directories(p);
  return p;
}

inline std::vector<Tensor> read_set(const std::string& stem, const char* kind,
                             const std::string& suffix = "") {
  std::vector<Tensor> out;
  for (int k = 0;; ++k) {
    const std::string f = stem + "." + kind + std::to_string(k) + suffix + ".npy";
    if (!fs::exists(f)) break;
    out.push_back(read_npy(f));
  }
  return out;
}

/// Compiles `pt2` for cuda-sm90 (object cache shared by the suite).
inline std::string compile_cuda(const std::string& pt2) {
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (out_dir() / "cache").string();
  const std::string pkg = (out_dir() / (fs::path(pt2).stem().string() + ".anvil")).string();
  driver::compile_pt2(pt2, pkg, o);
  return pkg;
}

}  // namespace anvil::gpu_test
