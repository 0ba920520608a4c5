// Host steps of device packages (runtime/host_staging.h): an extern call whose tensors are
// device memory runs its CPU kernel on host copies. The "device" here is a fake backend whose
// memory is a host array it alone may touch: every copy goes through its table, so the tests
// see which bytes travel, in which direction, and that the kernel never reads device memory.
#include <cstring>
#include <numeric>
#include <vector>

#include "common/check.h"
#include "core/dtype.h"
#include "runtime/externs.h"
#include "runtime/host_staging.h"
#include "runtime/rt_api.h"
#include "runtime_test_util.h"

namespace anvil::runtime::test {
namespace {

/// A fake device: 64 KiB of "device memory" at a 256-aligned address, copies counted.
struct FakeDevice {
  alignas(256) static inline char memory[1 << 16];
  static inline int d2h = 0, h2d = 0, syncs = 0, fail_copies = 0;
  static inline size_t d2h_bytes = 0, h2d_bytes = 0;
  static bool inside(const void* p, size_t n) {
    auto a = reinterpret_cast<uintptr_t>(p), m = reinterpret_cast<uintptr_t>(memory);
    return a >= m && a + n <= m + sizeof memory;
  }
  static const char* last_error() { return "fake copy failure"; }
  static int copy(int, void* dst, const void* src, size_t n, int dir, void*) {
    if (fail_copies) return 1;
    if (dir == ANVIL_COPY_DEVICE_TO_HOST) {
      if (!inside(src, n) || inside(dst, 1)) return 1;
      ++d2h;
      d2h_bytes += n;
    } else if (dir == ANVIL_COPY_HOST_TO_DEVICE) {
      if (!inside(dst, n) || inside(src, 1)) return 1;
      ++h2d;
      h2d_bytes += n;
    }
    std::memcpy(dst, src, n);
    return 0;
  }
  static int sync(int, void*) {
    ++syncs;
    return 0;
  }
  static AnvilDeviceApi api() {
    AnvilDeviceApi a{};
    a.name = "fake";
    a.device_type = ANVIL_DEVICE_CUDA;
    a.last_error = &last_error;
    a.copy = &copy;
    a.stream_synchronize = &sync;
    return a;
  }
  static void reset() {
    d2h = h2d = syncs = fail_copies = 0;
    d2h_bytes = h2d_bytes = 0;
    std::memset(memory, 0, sizeof memory);
  }
};

AnvilRtTensor desc(void* data, DType t, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  AnvilRtTensor d{};
  d.data = data;
  d.dtype = static_cast<int32_t>(t);
  d.ndim = static_cast<int32_t>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    d.sizes[i] = sizes[i];
    d.strides[i] = strides[i];
  }
  d.device_type = ANVIL_DEVICE_CUDA;
  return d;
}

TEST(HostStaging, TheKernelSeesHostCopiesAndOnlyOutputsGoBack) {
  FakeDevice::reset();
  const AnvilDeviceApi api = FakeDevice::api();
  auto* x = reinterpret_cast<float*>(FakeDevice::memory);           // [4] at 0
  auto* y = reinterpret_cast<float*>(FakeDevice::memory + 1024);    // [4] at 1024
  for (int i = 0; i < 4; ++i) x[i] = static_cast<float>(i + 1);
  AnvilRtTensor in = desc(x, DType::kFloat32, {4}, {1});
  AnvilRtTensor out = desc(y, DType::kFloat32, {4}, {1});
  const int rc = run_on_host(api, 0, nullptr, "test", &in, 1, &out, 1,
                             [&](const AnvilRtTensor* i, AnvilRtTensor* o) {
                               EXPECT_FALSE(FakeDevice::inside(i[0].data, 1));
                               EXPECT_FALSE(FakeDevice::inside(o[0].data, 1));
                               EXPECT_EQ(i[0].device_type, ANVIL_DEVICE_CPU);
                               const auto* a = static_cast<const float*>(i[0].data);
                               auto* b = static_cast<float*>(o[0].data);
                               for (int k = 0; k < 4; ++k) b[k] = a[k] * 10;
                               return 0;
                             });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{10, 20, 30, 40}));
  EXPECT_EQ(FakeDevice::d2h, 2);  // both ranges: an output's gaps and aliases must survive
  EXPECT_EQ(FakeDevice::h2d, 1);  // only the output goes back
  EXPECT_EQ(FakeDevice::h2d_bytes, 16u);
  EXPECT_EQ(FakeDevice::syncs, 2);  // before (inputs ready) and after (host copies read)
}

TEST(HostStaging, AliasedAndStridedViewsShareOneCopyAndGapsSurvive) {
  FakeDevice::reset();
  const AnvilDeviceApi api = FakeDevice::api();
  auto* base = reinterpret_cast<int64_t*>(FakeDevice::memory + 4096);
  std::iota(base, base + 12, 100);  // a [3, 4] matrix
  // input: the whole matrix; output: its column 1 written in place (stride 4), a view of it
  AnvilRtTensor in = desc(base, DType::kInt64, {3, 4}, {4, 1});
  AnvilRtTensor out = desc(base + 1, DType::kInt64, {3}, {4});
  const int rc = run_on_host(api, 0, nullptr, "test", &in, 1, &out, 1,
                             [&](const AnvilRtTensor* i, AnvilRtTensor* o) {
                               // one host copy: the output is inside the input's range
                               EXPECT_EQ(static_cast<const int64_t*>(i[0].data) + 1,
                                         static_cast<const int64_t*>(o[0].data));
                               auto* c = static_cast<int64_t*>(o[0].data);
                               for (int r = 0; r < 3; ++r) c[r * 4] = -c[r * 4];
                               return 0;
                             });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(FakeDevice::d2h, 1);
  EXPECT_EQ(std::vector<int64_t>(base, base + 12),
            (std::vector<int64_t>{100, -101, 102, 103, 104, -105, 106, 107, 108, -109, 110, 111}));
}

TEST(HostStaging, NegativeStridesEmptyTensorsAndAbsentOperands) {
  FakeDevice::reset();
  const AnvilDeviceApi api = FakeDevice::api();
  auto* v = reinterpret_cast<float*>(FakeDevice::memory + 8192);
  for (int i = 0; i < 5; ++i) v[i] = static_cast<float>(i);
  AnvilRtTensor ins[3] = {desc(v + 4, DType::kFloat32, {5}, {-1}),  // reversed view
                          desc(v, DType::kFloat32, {0, 3}, {3, 1}),  // no elements
                          AnvilRtTensor{}};                          // an absent optional
  ins[2].ndim = -1;
  auto* o = reinterpret_cast<float*>(FakeDevice::memory + 16384);
  AnvilRtTensor out = desc(o, DType::kFloat32, {5}, {1});
  const int rc = run_on_host(api, 0, nullptr, "test", ins, 3, &out, 1,
                             [&](const AnvilRtTensor* i, AnvilRtTensor* y) {
                               EXPECT_EQ(i[2].data, nullptr);
                               const auto* a = static_cast<const float*>(i[0].data);
                               auto* b = static_cast<float*>(y[0].data);
                               for (int k = 0; k < 5; ++k) b[k] = a[-k];
                               return 0;
                             });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(std::vector<float>(o, o + 5), (std::vector<float>{4, 3, 2, 1, 0}));
}

TEST(HostStaging, AFailingKernelWritesNothingBackAndAFailedCopyIsAnError) {
  FakeDevice::reset();
  const AnvilDeviceApi api = FakeDevice::api();
  auto* y = reinterpret_cast<float*>(FakeDevice::memory);
  y[0] = 7;
  AnvilRtTensor out = desc(y, DType::kFloat32, {1}, {1});
  EXPECT_EQ(run_on_host(api, 0, nullptr, "test", nullptr, 0, &out, 1,
                        [](const AnvilRtTensor*, AnvilRtTensor* o) {
                          static_cast<float*>(o[0].data)[0] = 1;
                          return 3;
                        }),
            3);
  EXPECT_EQ(y[0], 7);
  EXPECT_EQ(FakeDevice::h2d, 0);
  FakeDevice::fail_copies = 1;
  ANVIL_EXPECT_ERROR(run_on_host(api, 0, nullptr, "host step aten.sort.default", nullptr, 0, &out,
                                 1, [](const AnvilRtTensor*, AnvilRtTensor*) { return 0; }),
                     "fake copy failure");
}

TEST(HostStaging, ExternCallOfADeviceRunGoesThroughTheHost) {
  // The real dispatch: a run context of a device package makes api->extern_call stage.
  FakeDevice::reset();
  const AnvilDeviceApi api = FakeDevice::api();
  auto* x = reinterpret_cast<float*>(FakeDevice::memory);
  auto* vals = reinterpret_cast<float*>(FakeDevice::memory + 1024);
  auto* idx = reinterpret_cast<int64_t*>(FakeDevice::memory + 2048);
  const float src[6] = {3, 1, 2, 9, 7, 8};
  std::memcpy(x, src, sizeof src);
  AnvilRtTensor in = desc(x, DType::kFloat32, {2, 3}, {3, 1});
  AnvilRtTensor outs[2] = {desc(vals, DType::kFloat32, {2, 3}, {3, 1}),
                           desc(idx, DType::kInt64, {2, 3}, {3, 1})};
  std::vector<AnvilRtScalar> attrs(2);
  attrs[0].name = "dim";
  attrs[0].kind = 0;
  attrs[0].i = 1;
  attrs[1].name = "descending";
  attrs[1].kind = 0;
  attrs[1].i = 0;
  RunContext ctx;
  ctx.device_api = &api;
  ASSERT_EQ(rt_api()->extern_call(&ctx, "aten.sort.default", &in, 1, attrs.data(), 2, outs, 2), 0)
      << ctx.error();
  EXPECT_EQ(std::vector<float>(vals, vals + 6), (std::vector<float>{1, 2, 3, 7, 8, 9}));
  EXPECT_EQ(std::vector<int64_t>(idx, idx + 6), (std::vector<int64_t>{1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(FakeDevice::h2d, 2);

  // Without the device, the same descriptors are refused by the CPU kernel's checks (device
  // memory is never read from the host).
  RunContext cpu;
  EXPECT_NE(rt_api()->extern_call(&cpu, "aten.sort.default", &in, 1, attrs.data(), 2, outs, 2), 0);
  EXPECT_NE(cpu.error().find("extern kernels run on host memory"), std::string::npos)
      << cpu.error();
}

}  // namespace
}  // namespace anvil::runtime::test
