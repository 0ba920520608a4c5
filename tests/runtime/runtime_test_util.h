// Shared pieces of the runtime tests: a hand-written model.so implementing anvil_rt.h (so the
// runtime is tested without the compiler), built once per process through the toolchain, and
// helpers that package it.
//
// The model: inputs x f32[s0, 4] (s0 in [1, 64]) and z f32[s0 + 1];
//   y     = (x @ W) * 2 + b      f32[s0, 4]   (sgemm into the arena, then parallel_for)
//   z1    = z + amount (=1.0)    f32[s0 + 1]  (through the extern "anvil_test.add.default")
//   count = ++counter            i64[1]       (counter: a mutable i64[1] buffer)
// Constants (manifest order): p_w f32[4, 4], p_b f32[4], b_counter i64[1] (mutable).
// The "stateless" variant has no counter (count is always 0, no mutable buffer).
// s0 == 13 makes the model report an error through set_error.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "codegen/toolchain.h"
#include "core/tensor.h"
#include "runtime/externs.h"
#include "runtime/package.h"

namespace anvil::runtime::test {

/// A fresh folder for this test process, removed when the process exits.
inline const std::string& temp_dir() {
  struct Dir {
    std::string path;
    Dir() {
      auto p =
          std::filesystem::temp_directory_path() / ("anvil_rt_test_" + std::to_string(::getpid()));
      std::filesystem::create_directories(p);
      path = p.string();
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

/// The include folder holding anvil/anvil_rt.h.
inline std::string include_dir() { return std::string(ANVIL_SOURCE_DIR) + "/include"; }

/// The kernels translation unit of the hand-written model.
inline std::string kernels_source() {
  return R"(// hand-written test kernels
#include "anvil/anvil_rt.h"
struct PointwiseCtx { const float* mm; const float* bias; float* y; };
void test_pointwise(void* c, int64_t b, int64_t e) {
  const PointwiseCtx* ctx = static_cast<const PointwiseCtx*>(c);
  for (int64_t i = b * 4; i < e * 4; ++i) ctx->y[i] = ctx->mm[i] * 2.0f + ctx->bias[i % 4];
}
)";
}

/// The entry translation unit of the hand-written model.
inline std::string entry_source(bool stateless) {
  return std::string(stateless ? "#define STATELESS 1\n" : "") + R"(// hand-written test model
#include "anvil/anvil_rt.h"
#include <new>
struct PointwiseCtx { const float* mm; const float* bias; float* y; };
void test_pointwise(void* c, int64_t b, int64_t e);
namespace {
struct Instance { const AnvilRtApi* api; };
const char* metadata() { return "{\"kernels\": [\"k0_mm\", \"k1_pointwise\"], \"test\": true}"; }
void* create(const AnvilRtApi* api) {
  if (!api || api->abi_version != ANVIL_MODEL_ABI_VERSION) return nullptr;
  return new (std::nothrow) Instance{api};
}
void destroy(void* m) { delete static_cast<Instance*>(m); }
int64_t arena_bytes(const int64_t* s) { return s[0] * 4 * static_cast<int64_t>(sizeof(float)); }
void output_sizes(const int64_t* s, int32_t i, int64_t* sizes) {
  if (i == 0) { sizes[0] = s[0]; sizes[1] = 4; }
  else if (i == 1) { sizes[0] = s[0] + 1; }
  else { sizes[0] = 1; }
}
int run(void* m, const AnvilRunArgs* a) {
  const AnvilRtApi* api = static_cast<Instance*>(m)->api;
  const int64_t n = a->symbols[0];
  if (n == 13) { api->set_error(a->run_ctx, "unlucky batch 13"); return 1; }
  const float* x = static_cast<const float*>(a->inputs[0]);
  const float* w = static_cast<const float*>(a->constants[0]);
  const float* bias = static_cast<const float*>(a->constants[1]);
  float* tmp = static_cast<float*>(a->arena);
  api->sgemm(0, 0, n, 4, 4, 1.0f, x, 4, w, 4, 0.0f, tmp, 4);
  PointwiseCtx ctx{tmp, bias, static_cast<float*>(a->outputs[0])};
  api->parallel_for(0, n, 1, test_pointwise, &ctx);
  AnvilRtTensor in{}, out{};
  in.data = const_cast<void*>(a->inputs[1]);
  in.dtype = 7;
  in.ndim = 1;
  in.sizes[0] = n + 1;
  in.strides[0] = 1;
  out = in;
  out.data = a->outputs[1];
  AnvilRtScalar amount{};
  amount.name = "amount";
  amount.kind = 1;
  amount.f = 1.0;
  if (api->extern_call(a->run_ctx, "anvil_test.add.default", &in, 1, &amount, 1, &out, 1) != 0)
    return 1;
  int64_t* count = static_cast<int64_t*>(a->outputs[2]);
#ifdef STATELESS
  count[0] = 0;
#else
  int64_t* counter = static_cast<int64_t*>(a->constants[2]);
  counter[0] += 1;
  count[0] = counter[0];
#endif
  return 0;
}
const AnvilModelEntry kEntry = {ANVIL_MODEL_ABI_VERSION, metadata, create, destroy,
                                arena_bytes, output_sizes, run};
}  // namespace
extern "C" __attribute__((visibility("default"))) const AnvilModelEntry* anvil_model_entry(void) {
  return &kEntry;
}
)";
}

/// The test extern: out = in + attr "amount" (f32, 1-D).
inline int test_add_extern(ExternCall& call) {
  if (call.num_inputs() != 1 || call.num_outputs() != 1) return call.fail("expects 1 in, 1 out");
  Tensor in = call.input_tensor(0), out = call.output_tensor(0);
  const float amount = static_cast<float>(call.attr_float("amount"));
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] + amount;
  return 0;
}

/// Registers the test extern (idempotent).
inline void register_test_externs() { register_extern("anvil_test.add.default", test_add_extern); }

/// Toolchain options for the tests: a private cache, quiet, a generic x86-64 target.
inline codegen::ToolchainOptions test_toolchain_options(const std::string& cache_name = "cache") {
  codegen::ToolchainOptions o;
  o.target = "x86_64";
  o.cache_dir = temp_dir() + "/" + cache_name;
  o.include_dir = include_dir();
  o.progress = codegen::ProgressMode::kQuiet;
  o.opt_level = "-O1";
  return o;
}

/// Builds the test model.so once per process per variant; returns its path.
inline const std::string& test_model_so(bool stateless = false) {
  static std::map<bool, std::string> built;
  auto it = built.find(stateless);
  if (it != built.end()) return it->second;
  const std::string so = temp_dir() + (stateless ? "/stateless.so" : "/model.so");
  codegen::build_shared_library(
      {{"kernels.cpp", kernels_source()}, {"entry.cpp", entry_source(stateless)}}, so,
      test_toolchain_options());
  return built[stateless] = so;
}

/// The manifest text of the test model (constants without offsets: write_package fills them).
inline std::string test_manifest(bool stateless = false, int64_t format_version = 1,
                                 const std::string& target = "cpu-x86_64",
                                 const std::string& extra_extern = "") {
  std::string externs = "\"anvil_test.add.default\"";
  if (!extra_extern.empty()) externs += ", \"" + extra_extern + "\"";
  return std::string(R"({
  "format_version": )") +
         std::to_string(format_version) + R"(,
  "abi_version": )" + std::to_string(ANVIL_MODEL_ABI_VERSION) + R"(,
  "anvil_version": "0.1.0",
  "target": ")" +
         target + R"(",
  "symbols": [{"name": "s0", "min": 1, "max": 64}],
  "inputs": [{"name": "x", "dtype": "f32", "sizes": ["s0", 4]},
             {"name": "z", "dtype": "f32", "sizes": ["s0 + 1"]}],
  "outputs": [{"name": "y", "dtype": "f32", "sizes": ["s0", 4]},
              {"name": "z1", "dtype": "f32", "sizes": ["s0 + 1"]},
              {"name": "count", "dtype": "i64", "sizes": [1]}],
  "constants": [
    {"name": "p_w", "original_name": "lin.weight", "kind": "parameter"},
    {"name": "p_b", "original_name": "lin.bias", "kind": "parameter"})" +
         (stateless ? "" : R"(,
    {"name": "b_counter", "original_name": "counter", "kind": "buffer", "mutable": true})") +
         R"(
  ],
  "externs": [)" +
         externs + R"(],
  "planned_peak_bytes": "16*s0"
})";
}

/// W (row-major 4x4) and b used by default: W[i][j] = i + 4j (as float), b = [0.5, -1, 2, 0].
inline Tensor default_weight() {
  std::vector<float> w(16);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) w[i * 4 + j] = static_cast<float>(i + 4 * j);
  return Tensor::from_vector(w, {4, 4});
}
inline Tensor default_bias() {
  return Tensor::from_vector(std::vector<float>{0.5f, -1, 2, 0}, {4});
}

/// Writes a package of the test model; returns its path.
inline std::string write_test_package(const std::string& name, bool stateless = false,
                                      Tensor weight = {}, Tensor bias = {},
                                      const std::string& manifest = "") {
  register_test_externs();
  PackageContents c;
  c.manifest_json = manifest.empty() ? test_manifest(stateless) : manifest;
  c.model_so_path = test_model_so(stateless);
  c.constants = {weight.defined() ? weight : default_weight(),
                 bias.defined() ? bias : default_bias()};
  if (!stateless) c.constants.push_back(Tensor::from_vector(std::vector<int64_t>{100}, {1}));
  c.sources = {{"kernels.cpp", kernels_source()}, {"entry.cpp", entry_source(stateless)}};
  const std::string path = temp_dir() + "/" + name + ".anvil";
  write_package(path, c);
  return path;
}

/// The expected y for x (n x 4) with weight W and bias b: (x @ W) * 2 + b, in double.
inline std::vector<double> expected_y(const std::vector<float>& x, const Tensor& w,
                                      const Tensor& b) {
  const int64_t n = static_cast<int64_t>(x.size()) / 4;
  std::vector<double> wv = w.to_doubles(), bv = b.to_doubles(), out(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += static_cast<double>(x[i * 4 + k]) * wv[k * 4 + j];
      out[i * 4 + j] = acc * 2 + bv[j];
    }
  return out;
}

/// x[i][k] = 0.25 * (i + 1) - 0.5 * k, for n rows.
inline std::vector<float> make_x(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n * 4));
  for (int64_t i = 0; i < n; ++i)
    for (int k = 0; k < 4; ++k) x[i * 4 + k] = 0.25f * static_cast<float>(i + 1) - 0.5f * k;
  return x;
}

}  // namespace anvil::runtime::test
