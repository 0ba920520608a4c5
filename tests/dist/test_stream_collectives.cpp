// The runtime's collective services carry the stream (ABI minor 7): api->coll_issue_stream hands
// it to the group (OpOptions::stream), api->coll_wait_stream makes it wait on the Work (a device
// event: a queued wait, the host does not block); the minor-1 entries use the run's stream. And
// generated code passes the run's stream (s.stream) to both, falling back to the minor-1 entries
// on an older runtime. The device is EventGroup's fake (event_group.h): no GPU needed.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/check.h"
#include "compiled_util.h"
#include "dist/fake_process_group.h"
#include "dist/registry.h"
#include "driver/compile.h"
#include "event_group.h"
#include "ir/parser.h"
#include "runtime/collectives.h"
#include "runtime/externs.h"
#include "runtime/package.h"
#include "runtime/rt_api.h"

namespace anvil::dist::test {
namespace {

namespace fs = std::filesystem;
void* const kStream = reinterpret_cast<void*>(0x5157);
void* const kRunStream = reinterpret_cast<void*>(0x7e57);

/// A descriptor of host memory that says it is on cuda:0 (EventGroup never reads it).
AnvilRtTensor cuda_desc(const Tensor& t) {
  AnvilRtTensor d = runtime::rt_from_tensor(t);
  d.device_type = ANVIL_DEVICE_CUDA;
  d.device_index = 0;
  return d;
}

AnvilRtScalar sum_attr() {
  AnvilRtScalar a{};
  a.name = "reduce_op";
  a.kind = 2;
  a.s = "sum";
  return a;
}

/// Registers `pg` as `name` for the test's lifetime.
struct Registered {
  std::string name;
  Registered(const std::string& n, std::shared_ptr<ProcessGroup> pg) : name(n) {
    GroupRegistry::instance().register_group(n, std::move(pg));
  }
  ~Registered() { GroupRegistry::instance().unregister(name); }
};

TEST(RuntimeCollectiveStreams, IssueAndWaitCarryTheStreamToTheGroupAndItsWork) {
  const AnvilRtApi* api = runtime::rt_api();
  ASSERT_GE(api->abi_minor_version, 7u);
  ASSERT_NE(api->coll_issue_stream, nullptr);
  ASSERT_NE(api->coll_wait_stream, nullptr);
  auto pg = std::make_shared<EventGroup>(0, 2, Device::cuda(0));
  Registered reg("stream_test", pg);
  Tensor x = Tensor::full({4}, 1, DType::kFloat32);
  AnvilRtTensor d = cuda_desc(x);
  AnvilRtScalar at = sum_attr();
  const size_t pending = runtime::pending_collective_handles();

  runtime::RunContext ctx;
  const int64_t h =
      api->coll_issue_stream(&ctx, kStream, "all_reduce", "stream_test", &d, 1, &d, 1, &at, 1);
  ASSERT_GT(h, 0) << ctx.error();
  ASSERT_EQ(pg->calls.size(), 1u);
  EXPECT_EQ(pg->calls[0].stream, kStream) << "the issue did not carry the stream";
  EXPECT_EQ(pg->calls[0].tensors[0].device(), Device::cuda(0));
  // The event never fires: a wait that blocked the host would hang here.
  EXPECT_EQ(api->coll_wait_stream(&ctx, h, kRunStream), 0) << ctx.error();
  EXPECT_EQ(pg->calls[0].event->blocked_streams(), std::vector<void*>{kRunStream});
  EXPECT_EQ(pg->calls[0].event->synchronizes.load(), 0);
  EXPECT_EQ(runtime::pending_collective_handles(), pending) << "the handle was not released";

  // The minor-1 entries order on the run's stream (RunContext::stream, Model::run sets it).
  ctx.stream = kRunStream;
  const int64_t h1 = api->coll_issue(&ctx, "all_reduce", "stream_test", &d, 1, &d, 1, &at, 1);
  ASSERT_GT(h1, 0) << ctx.error();
  EXPECT_EQ(pg->calls[1].stream, kRunStream);
  EXPECT_EQ(api->coll_wait(&ctx, h1), 0) << ctx.error();
  EXPECT_EQ(pg->calls[1].event->blocked_streams(), std::vector<void*>{kRunStream});
  EXPECT_FALSE(ctx.failed());

  // A device error of the collective is the run's error, naming the device.
  runtime::RunContext failing;
  const int64_t h2 =
      api->coll_issue_stream(&failing, kStream, "all_reduce", "stream_test", &d, 1, &d, 1, &at, 1);
  ASSERT_GT(h2, 0) << failing.error();
  pg->calls[2].event->fail("unspecified launch failure");
  EXPECT_NE(api->coll_wait_stream(&failing, h2, kStream), 0);
  EXPECT_TRUE(::anvil::test::error_says(failing.error(), "failed on cuda:0"));
  EXPECT_TRUE(::anvil::test::error_says(failing.error(), "unspecified launch failure"));
  EXPECT_EQ(runtime::pending_collective_handles(), pending);
}

TEST(RuntimeCollectiveStreams, HostGroupRefusesADeviceDescriptorNamingTheDevice) {
  Registered reg("stream_host", std::make_shared<FakeProcessGroup>(0, 2));
  Tensor x = Tensor::full({4}, 1, DType::kFloat32);
  AnvilRtTensor d = cuda_desc(x);
  AnvilRtScalar at = sum_attr();
  runtime::RunContext ctx;
  EXPECT_EQ(runtime::rt_api()->coll_issue_stream(&ctx, kStream, "all_reduce", "stream_host", &d, 1,
                                                 &d, 1, &at, 1),
            0);
  EXPECT_TRUE(::anvil::test::error_says(ctx.error(), "is on cuda:0, not on the CPU"));
}

// ---- generated code --------------------------------------------------------------------------

constexpr const char* kGraph = R"(graph {
  inputs {
    %x: f32[2, 3] = user_input
  }
  %y: f32[2, 3] = aten.add.Tensor(self=%x, other=1)
  %ar: f32[2, 3] = _c10d_functional.all_reduce.default(input=%y, reduce_op="sum", group_name="stream_rec")
  %w: f32[2, 3] = _c10d_functional.wait_tensor.default(tensor=%ar)
  %z: f32[2, 3] = aten.mul.Tensor(self=%w, other=2)
  outputs {
    user_output %z
  }
})";

/// The package's model.so, dlopened from a file (closed at the end of the test).
struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

/// Runs the model once through `api` with `stream` as AnvilRunArgs::stream; returns run()'s code.
int run_once(const AnvilModelEntry* entry, const AnvilRtApi* api, void* stream,
             runtime::RunContext& ctx, const Tensor& x, Tensor& z) {
  void* model = entry->create(api);
  if (!model) return -1;
  const int64_t symbols[1] = {0};
  const int64_t arena_bytes = entry->arena_bytes(symbols);
  void* arena = std::aligned_alloc(64, static_cast<size_t>(std::max<int64_t>(arena_bytes, 64)));
  void* ins[1] = {x.data_ptr()};
  void* outs[1] = {z.data_ptr()};
  void* csts[1] = {nullptr};
  AnvilRunArgs args{};
  args.symbols = symbols;
  args.inputs = ins;
  args.outputs = outs;
  args.constants = csts;
  args.arena = arena;
  args.run_ctx = &ctx;
  args.stream = stream;
  const int rc = entry->run(model, &args);
  std::free(arena);
  entry->destroy(model);
  return rc;
}

TEST(CompiledCollectiveStreams, GeneratedCodePassesTheRunsStreamAndFallsBackOnOlderRuntimes) {
  const std::string pkg = temp_dir() + "/stream_rec.anvil";
  driver::CompileOptions o;
  o.jobs = 2;
  o.progress = codegen::ProgressMode::kQuiet;
  driver::compile_graph(*ir::parse_graph(kGraph), pkg, o);
  auto package = runtime::Package::open(pkg);
  std::string source;
  for (const auto& name : package->source_names()) source += package->source(name);
  EXPECT_NE(source.find("s.api->coll_issue_stream(s.run_ctx, s.stream, \"all_reduce\""),
            std::string::npos);
  EXPECT_NE(source.find("s.api->coll_wait_stream(s.run_ctx, coll_h[0], s.stream)"),
            std::string::npos);
  EXPECT_NE(source.find("abi_minor_version >= 7"), std::string::npos);

  const std::string so = temp_dir() + "/stream_rec.so";
  {
    std::ofstream f(so, std::ios::binary);
    f.write(package->model_so().data(), static_cast<std::streamsize>(package->model_so().size()));
  }
  Library lib;
  lib.handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib.handle, nullptr) << dlerror();
  auto entry_fn = reinterpret_cast<AnvilModelEntryFn>(dlsym(lib.handle, ANVIL_MODEL_ENTRY_SYMBOL));
  ASSERT_NE(entry_fn, nullptr);
  const AnvilModelEntry* entry = entry_fn();

  auto pg = std::make_shared<EventGroup>(0, 2, Device::cpu());
  Registered reg("stream_rec", pg);
  const Tensor x = Tensor::full({2, 3}, 1.5, DType::kFloat32);
  Tensor z = Tensor::empty({2, 3}, DType::kFloat32);

  // This runtime (minor 7): the run's stream reaches the issue and the wait, and the wait is
  // queued on it (the event never fires: a host wait would hang the run).
  runtime::RunContext ctx;
  ASSERT_EQ(run_once(entry, runtime::rt_api(), kStream, ctx, x, z), 0) << ctx.error();
  ASSERT_EQ(pg->calls.size(), 1u);
  EXPECT_EQ(pg->calls[0].stream, kStream);
  EXPECT_EQ(pg->calls[0].event->blocked_streams(), std::vector<void*>{kStream});
  EXPECT_TRUE(::anvil::test::matches_reference(z, Tensor::full({2, 3}, 5, DType::kFloat32)));

  // A runtime of minor 6 has no stream entries (null here, so calling one would crash): the
  // package uses coll_issue / coll_wait, which take the run's stream from the run context.
  AnvilRtApi older = *runtime::rt_api();
  older.abi_minor_version = 6;
  older.coll_issue_stream = nullptr;
  older.coll_wait_stream = nullptr;
  runtime::RunContext ctx6;
  ctx6.stream = kRunStream;
  ASSERT_EQ(run_once(entry, &older, kStream, ctx6, x, z), 0) << ctx6.error();
  ASSERT_EQ(pg->calls.size(), 2u);
  EXPECT_EQ(pg->calls[1].stream, kRunStream);
  EXPECT_EQ(pg->calls[1].event->blocked_streams(), std::vector<void*>{kRunStream});
}

}  // namespace
}  // namespace anvil::dist::test
