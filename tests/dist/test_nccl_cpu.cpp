// The nccl backend seen from a machine without a GPU (CI): it is built and listed, creating a
// group is a clear Error (never a crash), a malformed nccl setting is an Error naming it, and a
// CPU-only program (gloo collectives, the whole runtime linked) never loads the CUDA runtime,
// NCCL or anvil's CUDA / NCCL libraries. The 2-GPU tests of the backend are in tests/gpu.
#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/shared_library.h"
#include "dist/nccl_backend.h"
#include "dist/store.h"
#include "dist/world.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

/// The shared objects mapped into this process whose names contain one of `names`.
std::vector<std::string> mapped(const std::vector<std::string>& names) {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> found;
  std::string line;
  while (std::getline(maps, line))
    for (const auto& n : names)
      if (line.find(n) != std::string::npos) {
        const std::string path = line.substr(line.find('/') == std::string::npos
                                                 ? line.size()
                                                 : line.find('/'));
        bool seen = false;
        for (const auto& f : found) seen = seen || f == path;
        if (!seen) found.push_back(path);
      }
  return found;
}

const std::vector<std::string> kDeviceLibs = {"libcudart", "libnccl", "libanvil_nccl",
                                              "libanvil_cuda", "libcuda.so", "libcublas"};

// A rank of a CPU-only job: gloo collectives on host tensors, then no CUDA / NCCL library is
// mapped (the nccl backend is loaded only when an nccl group is created).
DIST_WORKER(cpu_only_never_loads_device_libraries) {
  Tensor x = Tensor::full({16}, ctx.rank + 1, DType::kFloat32);
  ctx.pg->all_reduce(x, ReduceOp::kSum)->wait();
  EXPECT_TRUE(all_equal(x, ctx.world * (ctx.world + 1) / 2));
  const auto libs = mapped(kDeviceLibs);
  std::string list;
  for (const auto& l : libs) list += "\n  " + l;
  EXPECT_TRUE(libs.empty()) << "a CPU-only rank mapped device libraries:" << list;
  // And the mapping check sees what it looks for: anvil's own dist library is mapped.
  EXPECT_FALSE(mapped({"libanvil_dist"}).empty());
}

TEST(NcclBackend, CpuOnlyRanksNeverLoadCudaOrNccl) {
  if (!backend_available("gloo")) GTEST_SKIP() << "gloo backend not available";
  const auto r = run_job("gloo", 2, "cpu_only_never_loads_device_libraries");
  EXPECT_TRUE(r.ok()) << r.all_output();
}

TEST(NcclBackend, ListedWhenBuilt) {
  const auto b = available_backends();
  const bool listed = std::find(b.begin(), b.end(), "nccl") != b.end();
#ifdef ANVIL_HAVE_NCCL
  EXPECT_TRUE(listed);
#else
  EXPECT_FALSE(listed);
  EXPECT_TRUE(throws_error([] { create_process_group("nccl", nullptr, 0, 1); },
                           {"backend 'nccl' is not built into this anvil", "CUDA + NCCL"}));
#endif
}

#ifdef ANVIL_HAVE_NCCL
// Without a GPU, creating an nccl group loads the backend and fails with a clear Error.
TEST(NcclBackend, CreatingAGroupWithoutAGpuIsAClearError) {
  auto store = std::make_shared<HashStore>();
  std::shared_ptr<ProcessGroup> pg;
  try {
    pg = create_process_group("nccl", store, 0, 1);
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the nccl backend needs a CUDA GPU, and none is usable here"),
              std::string::npos) << m;
    EXPECT_NE(m.find("nccl group (rank 0 of 1)"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaError"), std::string::npos) << m;  // CUDA's own reason
    std::printf("the error: %s\n", m.c_str());
    // The backend was loaded for it (and the maps check of the CPU-only job sees such a load).
    EXPECT_FALSE(mapped({"libanvil_nccl"}).empty());
    return;
  }
  ASSERT_NE(pg, nullptr);
  GTEST_SKIP() << "this machine has a GPU: the group was created (tests/gpu cover it)";
}

// The backend must resolve this process's dist layer: the program itself does (a library linking
// libanvil_dist.so would), a library without it (as the backend seen from the public
// libanvil_rt, whose dist is a local copy) is refused, saying why.
TEST(NcclBackend, RefusedWhereItWouldBringASecondDistLayer) {
  void* self = ::dlopen(nullptr, RTLD_NOW);
  ASSERT_NE(self, nullptr);
  require_same_dist(self, "this program");
  void* z = ::dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(z, nullptr) << ::dlerror();
  EXPECT_TRUE(throws_error([&] { require_same_dist(z, "libz.so.1"); },
                           {"libz.so.1 was built against anvil's dist library",
                            "public libanvil_rt", "no anvil dist layer"}));
  ::dlclose(z);
}

TEST(NcclBackend, AStoreIsRequired) {
  EXPECT_TRUE(throws_error([] { create_process_group("nccl", nullptr, 0, 1); },
                           {"the nccl backend needs a rendezvous store"}));
}
#endif

// The search the nccl backend shares with the device backends: $ANVIL_DEVICE_BACKEND_DIR first,
// then beside anvil's libraries; a missing library names every place looked.
TEST(NcclBackend, LibrarySearchOrderAndMissingLibrary) {
  ::setenv("ANVIL_DEVICE_BACKEND_DIR", "/nonexistent/anvil_libs", 1);
  const auto dirs = anvil_library_dirs();
  ::unsetenv("ANVIL_DEVICE_BACKEND_DIR");
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], "/nonexistent/anvil_libs");
  bool beside_dist = false;  // libanvil_dist.so sits beside libanvil_core.so
  for (const auto& d : dirs)
    beside_dist = beside_dist || std::ifstream(d + "/libanvil_dist.so").good();
  EXPECT_TRUE(beside_dist);
  std::string looked, error;
  EXPECT_EQ(open_anvil_library("libanvil_no_such_backend.so", looked, error), nullptr);
  EXPECT_NE(looked.find("libanvil_no_such_backend.so"), std::string::npos) << looked;
  EXPECT_NE(looked.find("the dynamic loader's search path"), std::string::npos) << looked;
  EXPECT_FALSE(error.empty());
}

// The nccl settings are validated when read: a malformed value names the variable. (The
// blocking-wait op list, ANVIL_NCCL_BLOCKING_WAIT, is a process setting: test_pg_infra.cpp.)
TEST(NcclBackend, MalformedSettingsAreClearErrors) {
  const char* var = "ANVIL_NCCL_EAGER_INIT";
  ::setenv(var, "yes", 1);
  EXPECT_TRUE(throws_error([] { group_options_from_env(); }, {var, "is not 0 or 1", "'yes'"}));
  ::setenv(var, "1", 1);
  EXPECT_TRUE(group_options_from_env().eager_init);
  ::unsetenv(var);
  const GroupOptions o = group_options_from_env();
  EXPECT_FALSE(o.blocking_wait);
  EXPECT_FALSE(o.eager_init);
  EXPECT_EQ(o.device_index, -1);
}

}  // namespace
}  // namespace anvil::dist::test
