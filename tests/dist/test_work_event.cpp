// Work completion (on the host or on a device event), stream waits, and the process-group
// interface split: the argument checks hold for a backend on the interface alone (EventGroup,
// event_group.h), and the host engine refuses device tensors naming the device. No GPU needed:
// the device is a fake whose event the test fires by hand.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "common/check.h"
#include "dist/fake_process_group.h"
#include "event_group.h"

namespace anvil::dist::test {
namespace {

using std::chrono::milliseconds;
void* const kStream = reinterpret_cast<void*>(0x5157);
void* const kOtherStream = reinterpret_cast<void*>(0x7e57);

std::shared_ptr<Work> event_work(std::shared_ptr<FakeEvent>& ev) {
  auto w = std::make_shared<Work>(OpType::kAllReduce, 1, "event all_reduce #1 on group 'g'");
  ev = std::make_shared<FakeEvent>();
  w->finish_on(ev);
  return w;
}

TEST(WorkCompletion, HostWorkStreamWaitBlocksTheHostUntilFinish) {
  auto w = std::make_shared<Work>(OpType::kAllReduce, 1, "host all_reduce #1");
  std::atomic<bool> finished{false};
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    finished = true;
    w->finish(nullptr);
  });
  EXPECT_FALSE(w->is_completed());
  w->wait_stream(kStream);  // a host Work has no event: the host waits
  EXPECT_TRUE(finished.load()) << "wait_stream returned before the host op finished";
  EXPECT_TRUE(w->is_completed());
  EXPECT_TRUE(w->is_success());
  EXPECT_FALSE(w->completes_on_event());
  t.join();
}

TEST(WorkCompletion, HostWorkErrorPropagatesThroughStreamWait) {
  Work w(OpType::kBroadcast, 2, "host broadcast #2");
  w.finish(std::make_exception_ptr(Error("peer 1 is gone", "host broadcast #2")));
  EXPECT_TRUE(w.is_completed());
  EXPECT_FALSE(w.is_success());
  ANVIL_EXPECT_ERROR(w.wait_stream(kStream), "peer 1 is gone");
  ANVIL_EXPECT_ERROR(w.wait(), "peer 1 is gone");
}

TEST(WorkCompletion, EventWorkIsCompleteOnlyOnceTheEventFires) {
  std::shared_ptr<FakeEvent> ev;
  auto w = event_work(ev);
  EXPECT_TRUE(w->completes_on_event());
  EXPECT_FALSE(w->is_completed()) << "the host part is done, the device is not";
  EXPECT_FALSE(w->is_success());
  EXPECT_GE(ev->queries.load(), 1);
  ev->fire();
  EXPECT_TRUE(w->is_completed());
  EXPECT_TRUE(w->is_success());
  EXPECT_TRUE(w->wait());
  EXPECT_EQ(ev->synchronizes.load(), 0) << "a passed event needs no synchronize";
}

TEST(WorkCompletion, EventWorkStreamWaitQueuesAWaitInsteadOfBlocking) {
  std::shared_ptr<FakeEvent> ev;
  auto w = event_work(ev);
  // The event never fires before wait_stream returns: a blocking wait would hang here.
  w->wait_stream(kStream, milliseconds(2000));
  EXPECT_EQ(ev->blocked_streams(), std::vector<void*>{kStream});
  EXPECT_EQ(ev->synchronizes.load(), 0) << "the host must not wait for the device";
  EXPECT_FALSE(w->is_completed());
  ev->fire();
  EXPECT_TRUE(w->is_completed());
  w->wait_stream(kOtherStream);  // passed already: nothing left to order
  EXPECT_EQ(ev->blocked_streams(), std::vector<void*>{kStream});
}

TEST(WorkCompletion, EventWorkHostWaitBlocksUntilTheEventAndHonoursItsBound) {
  std::shared_ptr<FakeEvent> ev;
  auto w = event_work(ev);
  ANVIL_EXPECT_ERROR(w->wait(milliseconds(30)), "timed out after 30 ms");
  EXPECT_FALSE(w->is_completed()) << "a timed-out wait leaves the op in flight";
  std::atomic<bool> fired{false};
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    fired = true;
    ev->fire();
  });
  w->wait_stream(nullptr);  // no stream: the host is the consumer, so it waits for the device
  EXPECT_TRUE(fired.load());
  EXPECT_EQ(ev->synchronizes.load(), 1);
  EXPECT_TRUE(ev->blocked_streams().empty());
  t.join();
}

TEST(WorkCompletion, DeviceErrorBecomesTheOpsErrorNamingDeviceAndOp) {
  std::shared_ptr<FakeEvent> ev;
  auto w = event_work(ev);
  ev->fail("illegal memory access");
  EXPECT_TRUE(w->is_completed()) << "is_completed never throws: a failed op is complete";
  EXPECT_FALSE(w->is_success());
  ASSERT_NE(w->exception(), nullptr);
  ANVIL_EXPECT_ERROR(w->wait(), "failed on cuda:0: fake device: illegal memory access");
  ANVIL_EXPECT_ERROR(w->wait_stream(kStream), "event all_reduce #1 on group 'g'");
  EXPECT_TRUE(ev->blocked_streams().empty());

  // A failure seen first by the stream wait is the op's error as well.
  std::shared_ptr<FakeEvent> ev2;
  auto w2 = event_work(ev2);
  ev2->fail("launch failed");
  ANVIL_EXPECT_ERROR(w2->wait_stream(kStream), "launch failed");
  EXPECT_TRUE(w2->is_completed());
  ANVIL_EXPECT_ERROR(w2->wait(), "launch failed");
}

TEST(WorkCompletion, HostPartFailureOfADeviceOpNeverTouchesTheStream) {
  Work w(OpType::kAllReduce, 3, "event all_reduce #3");
  w.finish(std::make_exception_ptr(Error("communicator aborted", "event all_reduce #3")));
  ANVIL_EXPECT_ERROR(w.wait_stream(kStream), "communicator aborted");
  EXPECT_FALSE(w.completes_on_event());
}

// ---- the interface: checks for every backend ------------------------------------------------

TEST(ProcessGroupInterface, ChecksRunBeforeABackendOnTheInterfaceAlone) {
  auto pg = std::make_shared<EventGroup>(0, 2, Device::cuda(0));
  pg->set_name("g");
  const Device gpu = Device::cuda(0);
  Tensor host = Tensor::empty({4}, DType::kFloat32);
  ANVIL_EXPECT_ERROR(pg->all_reduce(host, ReduceOp::kSum),
                     "the input tensor is on cpu, not on the group's device cuda:0");
  Tensor other_gpu = tensor_on(Device::cuda(1), {4});
  ANVIL_EXPECT_ERROR(pg->all_reduce(other_gpu, ReduceOp::kSum),
                     "is on cuda:1, not on the group's device cuda:0 (a group uses one device: "
                     "multi-device ops are not supported)");
  Tensor out = tensor_on(gpu, {6}), in = tensor_on(gpu, {4});
  ANVIL_EXPECT_ERROR(pg->all_gather_into_tensor(out, in),
                     "the output tensor of all_gather has the wrong shape");
  Tensor odd = tensor_on(gpu, {3}), half = tensor_on(gpu, {1});
  ANVIL_EXPECT_ERROR(pg->reduce_scatter_tensor(half, odd, ReduceOp::kSum),
                     "is not divisible by the group size 2");
  Tensor ints = tensor_on(gpu, {4}, DType::kInt32);
  ANVIL_EXPECT_ERROR(pg->all_reduce(ints, ReduceOp::kAvg), "avg");
  Tensor a2a_out = tensor_on(gpu, {4, 2}), a2a_in = tensor_on(gpu, {4, 2});
  ANVIL_EXPECT_ERROR(pg->all_to_all_single(a2a_out, a2a_in, {1, 2}, {2, 2}),
                     "split sizes don't match");
  ANVIL_EXPECT_ERROR(pg->send(in, 0), "cannot send to self");
  ANVIL_EXPECT_ERROR(pg->broadcast(in, 2), "src rank 2 is outside the group");
  EXPECT_TRUE(pg->calls.empty()) << "a bad call reached the backend";

  // Good calls reach the backend with the checked counts and the caller's stream.
  OpOptions o;
  o.stream = kStream;
  auto w = pg->all_to_all_single(a2a_out, a2a_in, {1, 3}, {2, 2}, o);
  ASSERT_EQ(pg->calls.size(), 1u);
  EXPECT_EQ(pg->calls[0].stream, kStream);
  EXPECT_EQ(pg->calls[0].counts.out_counts, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(pg->calls[0].counts.in_rows, (std::vector<int64_t>{2, 2}));
  Tensor gathered = tensor_on(gpu, {8});
  pg->all_gather_into_tensor(gathered, in, o);
  ASSERT_EQ(pg->calls.size(), 2u);
  EXPECT_EQ(pg->calls[1].tensors[0].device(), gpu);
  // and the Work of a device op makes the stream wait, not the host
  w->wait_stream(kOtherStream);
  EXPECT_EQ(pg->calls[0].event->blocked_streams(), std::vector<void*>{kOtherStream});
  auto sub = pg->new_subgroup({1}, "sub");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->name(), "sub");
  ANVIL_EXPECT_ERROR(pg->new_subgroup({1, 1}, "bad"), "strictly increasing");
}

// all_reduce_into on a device backend: the checks run on the interface, then the backend gets
// the output and the input (no copy first), the caller's stream, and one op; the same tensor
// for both is the in-place all_reduce.
TEST(ProcessGroupInterface, AllReduceIntoReachesADeviceBackendWithBothTensors) {
  auto pg = std::make_shared<EventGroup>(0, 2, Device::cuda(0));
  pg->set_name("g");
  const Device gpu = Device::cuda(0);
  Tensor out = tensor_on(gpu, {6}), in = tensor_on(gpu, {6}), small = tensor_on(gpu, {5});
  ANVIL_EXPECT_ERROR(pg->all_reduce_into(small, in, ReduceOp::kSum),
                     "operand counts must be same");
  Tensor host = Tensor::empty({6}, DType::kFloat32);
  ANVIL_EXPECT_ERROR(pg->all_reduce_into(out, host, ReduceOp::kSum),
                     "the input tensor is on cpu, not on the group's device cuda:0");
  EXPECT_TRUE(pg->calls.empty()) << "a bad call reached the backend";
  OpOptions o;
  o.stream = kStream;
  pg->all_reduce_into(out, in, ReduceOp::kSum, o);
  ASSERT_EQ(pg->calls.size(), 1u);
  EXPECT_EQ(pg->calls[0].op, OpType::kAllReduce);
  EXPECT_EQ(pg->calls[0].stream, kStream);
  ASSERT_EQ(pg->calls[0].tensors.size(), 2u);
  EXPECT_EQ(pg->calls[0].tensors[0].data_ptr(), out.data_ptr());
  EXPECT_EQ(pg->calls[0].tensors[1].data_ptr(), in.data_ptr());
  pg->all_reduce_into(in, in, ReduceOp::kSum, o);  // in place
  ASSERT_EQ(pg->calls.size(), 2u);
  ASSERT_EQ(pg->calls[1].tensors.size(), 1u);
  EXPECT_EQ(pg->calls[1].tensors[0].data_ptr(), in.data_ptr());
}

// all_reduce_into's overlap check goes by address: two storages wrapping one buffer (as two
// DLPack imports or a compiled run's descriptors do) overlap as views of one storage would.
TEST(ProcessGroupInterface, AllReduceIntoRefusesAnOutputOverlappingItsInputThroughTwoStorages) {
  auto pg = std::make_shared<FakeProcessGroup>(0, 2);
  pg->set_name("host");
  Tensor buf = Tensor::zeros({8}, DType::kFloat32);
  auto wrap = [&](int64_t offset) {
    auto st = Storage::wrap(buf.data_ptr(), buf.nbytes(), [buf](void*) {});
    return Tensor(st, DType::kFloat32, {6}, {1}, offset);
  };
  Tensor lo = wrap(0), hi = wrap(2);
  ASSERT_NE(lo.storage(), hi.storage());
  ANVIL_EXPECT_ERROR(pg->all_reduce_into(hi, lo, ReduceOp::kSum),
                     "the output of an out-of-place all_reduce overlaps its input");
  ANVIL_EXPECT_ERROR(pg->all_reduce_into(lo, hi, ReduceOp::kSum), "bytes [0, 24) and [8, 32)");
  EXPECT_EQ(pg->sequence_number(), 0u) << "a refused op was posted";
  // apart: the first two elements and the last two (the fake all_reduce copies its data)
  Tensor a = wrap(0).as_strided({2}, {1}, 0), b = wrap(0).as_strided({2}, {1}, 6);
  buf.copy_from(Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, {8}));
  pg->all_reduce_into(a, b, ReduceOp::kMax)->wait();
  EXPECT_EQ(pg->sequence_number(), 1u);
  EXPECT_TRUE(::anvil::test::matches_reference(
      buf, Tensor::from_vector(std::vector<float>{6, 7, 2, 3, 4, 5, 6, 7}, {8})));
}

// all_reduce_into of two views of the same elements in the same order, their strides differing
// only along a dim of size 1 (a [1, 6] tensor and its view with another leading stride): one
// tensor, so the in-place all_reduce, not an overlap.
TEST(ProcessGroupInterface, AllReduceIntoOfOneViewWithAnotherStrideAlongASize1DimIsInPlace) {
  auto pg = std::make_shared<FakeProcessGroup>(0, 2);
  Tensor base = Tensor::full({12}, 2, DType::kFloat32);
  Tensor t = base.as_strided({1, 6}, {6, 1}, 0), same = base.as_strided({1, 6}, {1, 1}, 0);
  pg->all_reduce_into(t, same, ReduceOp::kSum)->wait();
  EXPECT_EQ(pg->sequence_number(), 1u);
  Tensor other = base.as_strided({1, 6}, {12, 2}, 0);  // every other element: another view
  ANVIL_EXPECT_ERROR(pg->all_reduce_into(t, other, ReduceOp::kSum), "overlaps its input");
}

// barrier(device_ids) (spec A.3 #43): the interface checks the list, hands one id to the backend
// (a device backend binds its group there: the nccl tests), and a host backend refuses any id.
TEST(ProcessGroupInterface, BarrierDeviceIdsAreCheckedThenGivenToTheBackend) {
  auto pg = std::make_shared<EventGroup>(0, 2, Device::cuda(0));
  pg->set_name("g");
  ANVIL_EXPECT_ERROR(pg->barrier(std::vector<int>{0, 1}),
                     "barrier takes at most one device id (one GPU per rank)");
  ANVIL_EXPECT_ERROR(pg->barrier(std::vector<int>{-1}), "device id must be non-negative");
  EXPECT_EQ(pg->sequence_number(), 0u) << "a refused barrier was posted";
  pg->barrier(std::vector<int>{1});
  pg->barrier(std::vector<int>{});  // no id: the plain barrier
  ASSERT_EQ(pg->calls.size(), 2u);
  EXPECT_EQ(pg->calls[0].op, OpType::kBarrier);
  EXPECT_EQ(pg->calls[1].op, OpType::kBarrier);
  EXPECT_EQ(pg->barrier_devices, std::vector<int>{1});

  auto host = std::make_shared<FakeProcessGroup>(0, 2);
  host->set_name("host");
  ANVIL_EXPECT_ERROR(host->barrier(std::vector<int>{0}),
                     "backend fake runs its barrier on cpu; device_ids choose the GPU");
  ANVIL_EXPECT_ERROR(host->barrier(std::vector<int>{0}), "device_ids = [0]");
  EXPECT_EQ(host->sequence_number(), 0u);
  host->barrier(std::vector<int>{})->wait();
  EXPECT_EQ(host->sequence_number(), 1u);
}

TEST(HostProcessGroup, RefusesDeviceTensorsNamingTheDeviceBeforePosting) {
  auto pg = std::make_shared<FakeProcessGroup>(0, 2);
  pg->set_name("host");
  Tensor gpu = tensor_on(Device::cuda(0), {4});
  Tensor cpu_out = Tensor::empty({8}, DType::kFloat32);
  ANVIL_EXPECT_ERROR(pg->all_reduce(gpu, ReduceOp::kSum),
                     "the input tensor is on cuda:0, not on the CPU");
  ANVIL_EXPECT_ERROR(pg->all_gather_into_tensor(cpu_out, gpu), "on cuda:0");
  ANVIL_EXPECT_ERROR(pg->send(gpu, 1), "fake send on group 'host'");
  std::vector<Tensor> outs{Tensor::empty({4}, DType::kFloat32), gpu};
  ANVIL_EXPECT_ERROR(pg->all_reduce_coalesced(outs, ReduceOp::kSum), "input 1 tensor is on cuda:0");
  EXPECT_EQ(pg->sequence_number(), 0u) << "a refused op was posted";
}

TEST(HostProcessGroup, IgnoresTheStreamAndCompletesOnTheHost) {
  auto pg = std::make_shared<FakeProcessGroup>(0, 2);
  Tensor in = Tensor::full({2}, 3, DType::kFloat32), out = Tensor::empty({4}, DType::kFloat32);
  OpOptions o;
  o.stream = kStream;
  auto w = pg->all_gather_into_tensor(out, in, o);
  w->wait_stream(kStream);
  EXPECT_TRUE(w->is_completed()) << "a host Work's stream wait returns once the op is done";
  EXPECT_FALSE(w->completes_on_event());
  EXPECT_TRUE(::anvil::test::matches_reference(out, Tensor::full({4}, 3, DType::kFloat32)));
  EXPECT_EQ(pg->sequence_number(), 1u);
}

}  // namespace
}  // namespace anvil::dist::test
