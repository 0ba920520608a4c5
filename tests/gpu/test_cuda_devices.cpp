// Which GPU a package uses (issue 14, serving): a package loaded on cuda:1 creates nothing on
// cuda:0 (checked in a fresh child process through the driver's primary-context state, since
// this process may have used cuda:0 already), and a package built for a newer GPU than the one
// present fails at load naming both capabilities. Label gpu: the two-GPU test skips on a
// one-GPU machine (it needs the 2-GPU machine; ANVIL_REQUIRE_GPU=2 turns that skip into a
// failure).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "anvil/anvil_device.h"
#include "common/check.h"
#include "driver/compile.h"
#include "gpu/gpu_test_util.h"
#include "gpu/nccl_test_util.h"
#include "ir/parser.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"
#include "runtime/package.h"

extern char** environ;

namespace anvil {
namespace {

namespace fs = std::filesystem;

const char* kSoftmax = R"(graph {
  inputs {
    %x: f32[4, 64] = user_input
    %w: f32[64, 32] = parameter "w"
  }
  %m: f32[4, 32] = aten.mm.default(self=%x, mat2=%w)
  %s: f32[4, 32] = aten.softmax.int(self=%m, dim=-1)
  outputs {
    user_output %s
  }
})";

std::string compile_text(const char* text, const std::string& name) {
  auto g = ir::parse_graph(text);
  for (const auto& spec : g->input_specs())
    if (spec.kind != ir::InputKind::kUserInput) {
      Shape sizes;
      for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
      g->constants[spec.target] = Tensor::zeros(sizes, spec.value->type.dtype);
    }
  driver::CompileOptions o;
  o.target = "cuda-sm90";
  o.progress = codegen::ProgressMode::kQuiet;
  o.cache_dir = (gpu_test::out_dir() / "cache").string();
  const std::string pkg = (gpu_test::out_dir() / (name + ".anvil")).string();
  driver::compile_graph(*g, pkg, o);
  return pkg;
}

/// The driver's word on whether device `ordinal` has an active primary context: 1 yes, 0 no,
/// -1 when the driver cannot be asked.
int primary_context_active(int ordinal) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return -1;
  using InitFn = int (*)(unsigned);
  using GetFn = int (*)(int*, int);
  using StateFn = int (*)(int, unsigned*, int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto state = reinterpret_cast<StateFn>(dlsym(lib, "cuDevicePrimaryCtxGetState"));
  int dev = 0, active = 0;
  unsigned flags = 0;
  if (!init || !get || !state || init(0) != 0 || get(&dev, ordinal) != 0 ||
      state(dev, &flags, &active) != 0)
    return -1;
  return active ? 1 : 0;
}

// The child's half: runs only when the parent test starts it with ANVIL_DEVICES_CHILD set.
TEST(CudaDevicesChild, LoadAndRunOnCuda1) {
  const char* pkg = std::getenv("ANVIL_DEVICES_CHILD");
  if (pkg == nullptr) GTEST_SKIP() << "started by CudaDevices.LoadingOnCuda1CreatesNothingOnCuda0";
  ASSERT_EQ(primary_context_active(0), 0) << "cuda:0 was in use before the load";
  runtime::ModelOptions mo;
  mo.device = Device::cuda(1);
  mo.num_runners = 2;
  const runtime::Model m = runtime::Model::load(pkg, mo);
  const Tensor x = Tensor::zeros({4, 64}, DType::kFloat32);
  const auto host_in = m.run({x});  // host tensors in: copied to cuda:1 and back
  ASSERT_EQ(host_in.size(), 1u);
  EXPECT_EQ(host_in[0].device(), Device::cpu());
  EXPECT_NEAR(host_in[0].item_at(7), 1.0 / 32, 1e-6);
  const auto dev_out = m.run({x.to(Device::cuda(1))});
  EXPECT_EQ(dev_out[0].device(), Device::cuda(1));
  // softmax of zeros: 1/32 everywhere
  EXPECT_NEAR(dev_out[0].to(Device::cpu()).item_at(5), 1.0 / 32, 1e-6);
  EXPECT_EQ(primary_context_active(1), 1);
  EXPECT_EQ(primary_context_active(0), 0) << "loading and running on cuda:1 touched cuda:0";
}

TEST(CudaDevices, LoadingOnCuda1CreatesNothingOnCuda0) {
  ANVIL_REQUIRE_GPU();
  ANVIL_REQUIRE_TWO_GPUS();
  const std::string pkg = compile_text(kSoftmax, "on_cuda1");
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  self[n] = 0;
  const std::string env_pkg = "ANVIL_DEVICES_CHILD=" + pkg;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("GTEST_", 0) != 0) env.push_back(*e);  // not sharded
  env.push_back(env_pkg);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=CudaDevicesChild.LoadAndRunOnCuda1";
  char* argv[] = {self, filter.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, self, nullptr, nullptr, argv, envp.data()), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's checks failed (its output is above)";
}

TEST(CudaDevices, APackageForANewerGpuFailsAtLoadNamingBoth) {
  ANVIL_REQUIRE_GPU();
  const std::string pkg = compile_text(kSoftmax, "newer_gpu");
  const auto p = runtime::Package::open(pkg);
  std::string json = p->manifest().json;
  const size_t key = json.find("\"cuda_min_capability\"");
  ASSERT_NE(key, std::string::npos) << json.substr(0, 400);
  const size_t at = json.find("80", key);
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 2, "120");
  runtime::PackageContents c;
  c.manifest_json = json;
  c.model_so_bytes = std::string(p->model_so());
  for (size_t i = 0; i < p->manifest().constants.size(); ++i) c.constants.push_back(p->constant(i));
  const std::string newer = (gpu_test::out_dir() / "newer_gpu_120.anvil").string();
  runtime::write_package(newer, c);
  runtime::ModelOptions mo;
  mo.device = Device::cuda(0);
  const std::string e = ::anvil::test::error_message([&] { runtime::Model::load(newer, mo); });
  EXPECT_NE(e.find("12.0"), std::string::npos) << e;
  const int have = runtime::device_backend(Device::Type::kCUDA).capability(0);
  EXPECT_NE(e.find(std::to_string(have / 10) + "." + std::to_string(have % 10)), std::string::npos)
      << e;
}

// The caching allocator (runtime/cuda/cuda_backend.cpp): blocks of 16 KiB and under are pieces
// of slabs (one cudaMalloc cut into 32 equal pieces), larger ones have a cudaMalloc each. Blocks of
// every kind are distinct and never overlap (each is filled with its own byte and read back
// after all were written), freed pieces are handed out again, and a pointer that is not a live
// block (a piece freed twice, an address inside one) is refused, not cached.
TEST(CudaDevices, SmallBlocksAreSlabPiecesThatNeverOverlap) {
  ANVIL_REQUIRE_GPU();
  const AnvilDeviceApi& api = runtime::device_backend(Device::Type::kCUDA);
  struct Block {
    unsigned char* p;
    size_t bytes;
  };
  std::vector<Block> blocks;
  const auto alloc = [&](size_t bytes) {
    auto* p = static_cast<unsigned char*>(api.alloc(0, bytes));
    EXPECT_NE(p, nullptr) << api.last_error();
    if (p) blocks.push_back({p, bytes});
  };
  for (int i = 0; i < 100; ++i) alloc(8);          // 512 B pieces: four slabs
  for (int i = 0; i < 70; ++i) alloc(3000);        // 3 KiB pieces
  for (int i = 0; i < 40; ++i) alloc(16 << 10);    // 16 KiB pieces: the largest kind
  for (int i = 0; i < 5; ++i) alloc(1 << 20);      // blocks of their own
  for (int i = 0; i < 3; ++i) alloc(5 << 20);
  alloc(0);
  ASSERT_EQ(blocks.size(), 219u);
  // pieces of a new slab come in address order, one piece apart (a freshly cut slab: most of
  // the 100 small ones, whatever pieces earlier tests of this process left free)
  int adjacent = 0;
  for (size_t i = 1; i < 100; ++i) adjacent += blocks[i].p - blocks[i - 1].p == 512;
  EXPECT_GE(adjacent, 50) << "8 B blocks are not 512 B pieces of slabs";
  const auto fill_and_check = [&] {
    for (size_t i = 0; i < blocks.size(); ++i) {
      const std::vector<unsigned char> h(std::max<size_t>(blocks[i].bytes, 1),
                                         static_cast<unsigned char>(i * 7 + 1));
      ASSERT_EQ(api.copy(0, blocks[i].p, h.data(), h.size(), ANVIL_COPY_HOST_TO_DEVICE, nullptr),
                0)
          << api.last_error();
    }
    for (size_t i = 0; i < blocks.size(); ++i) {
      std::vector<unsigned char> h(std::max<size_t>(blocks[i].bytes, 1), 0);
      ASSERT_EQ(api.copy(0, h.data(), blocks[i].p, h.size(), ANVIL_COPY_DEVICE_TO_HOST, nullptr),
                0)
          << api.last_error();
      const auto want = static_cast<unsigned char>(i * 7 + 1);
      for (unsigned char c : h) ASSERT_EQ(c, want) << "block " << i << " was overwritten";
    }
  };
  fill_and_check();
  // every other block back, then as many again: the freed pieces come back
  std::vector<Block> kept;
  std::vector<unsigned char*> freed;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i % 2) {
      ASSERT_EQ(api.free(0, blocks[i].p), 0) << api.last_error();
      freed.push_back(blocks[i].p);
    } else {
      kept.push_back(blocks[i]);
    }
  }
  blocks = kept;
  int reused = 0;
  for (int i = 0; i < 50; ++i) {
    alloc(8);
    reused += std::count(freed.begin(), freed.end(), blocks.back().p) > 0;
  }
  EXPECT_GT(reused, 0) << "no freed 512 B piece was handed out again";
  fill_and_check();
  // a piece freed twice, and an address inside a live piece, are refused
  unsigned char* piece = blocks.back().p;
  blocks.pop_back();
  ASSERT_EQ(api.free(0, piece), 0) << api.last_error();
  EXPECT_NE(api.free(0, piece), 0);
  EXPECT_NE(std::string(api.last_error()).find("not a live block"), std::string::npos)
      << api.last_error();
  EXPECT_NE(api.free(0, blocks.front().p + 16), 0);
  fill_and_check();  // the refused frees changed nothing
  for (const Block& b : blocks) EXPECT_EQ(api.free(0, b.p), 0) << api.last_error();
}

}  // namespace
}  // namespace anvil
