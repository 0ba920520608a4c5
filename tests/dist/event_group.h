// Test doubles of a device backend, for the tests of event completion and streams without a GPU:
// FakeEvent (a DeviceEvent the test fires by hand, recording the streams made to wait on it) and
// EventGroup (a ProcessGroup implemented directly on the interface, not on the host engine, whose
// ops complete on a FakeEvent and record what they were given). Neither touches tensor memory.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/process_group.h"

namespace anvil::dist::test {

/// A device event the test fires by hand (or makes fail); records the streams told to wait.
class FakeEvent : public DeviceEvent {
 public:
  void fire() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      fired_ = true;
    }
    cv_.notify_all();
  }
  /// Every later call fails with `message` (an asynchronous device error).
  void fail(const std::string& message) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      error_ = message;
    }
    cv_.notify_all();
  }
  bool query() override {
    std::lock_guard<std::mutex> lk(mu_);
    ++queries;
    throw_if_failed();
    return fired_;
  }
  void synchronize() override {
    std::unique_lock<std::mutex> lk(mu_);
    ++synchronizes;
    // Bounded, so that a host wait where a stream wait was due fails instead of hanging.
    if (!cv_.wait_for(lk, std::chrono::seconds(10), [&] { return fired_ || !error_.empty(); }))
      throw Error("synchronize on an event that never fired (a host wait)", "fake device");
    throw_if_failed();
  }
  void block_stream(void* stream) override {
    std::lock_guard<std::mutex> lk(mu_);
    throw_if_failed();
    blocked.push_back(stream);
  }
  std::string device() const override { return "cuda:0"; }

  std::vector<void*> blocked_streams() {
    std::lock_guard<std::mutex> lk(mu_);
    return blocked;
  }
  std::atomic<int> queries{0}, synchronizes{0};

 private:
  void throw_if_failed() {
    if (!error_.empty()) throw Error(error_, "fake device");
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool fired_ = false;
  std::string error_;
  std::vector<void*> blocked;
};

/// A group on the interface alone (no queue, no threads): every op "queues" at once and
/// completes on its own FakeEvent; records the op kind, the stream and the tensors it was given.
class EventGroup : public ProcessGroup {
 public:
  EventGroup(int rank, int size, Device device)
      : ProcessGroup(rank, size, {}, GroupOptions{}), device_(device) {}
  std::string backend_name() const override { return "event"; }
  Device device() const override { return device_; }
  uint64_t sequence_number() const override { return seq_; }
  bool shutdown(Millis) override { return true; }

  struct Call {
    OpType op;
    void* stream;
    std::vector<Tensor> tensors;
    AllToAllCounts counts;
    std::shared_ptr<FakeEvent> event;
    std::shared_ptr<Work> work;
  };
  std::vector<Call> calls;
  /// The device of each barrier(device_ids) that reached the backend.
  std::vector<int> barrier_devices;

 protected:
  std::shared_ptr<Work> issue(OpType op, const OpOptions& opts, std::vector<Tensor> ts,
                              AllToAllCounts counts = {}) {
    const uint64_t seq = ++seq_;
    auto work = std::make_shared<Work>(op, seq, where(op, seq));
    auto ev = std::make_shared<FakeEvent>();
    work->set_result(ts);
    work->finish_on(ev);
    calls.push_back(Call{op, opts.stream, std::move(ts), std::move(counts), ev, work});
    return work;
  }
  std::shared_ptr<Work> issue_all_reduce(Tensor& t, ReduceOp, const OpOptions& o) override {
    return issue(OpType::kAllReduce, o, {t});
  }
  // out of place: recorded with both tensors (the interface's default would copy the input
  // into the output through the device's allocator first, touching memory this fake has not)
  std::shared_ptr<Work> issue_all_reduce_into(Tensor& out, const Tensor& in, ReduceOp,
                                              const OpOptions& o) override {
    return issue(OpType::kAllReduce, o, {out, in});
  }
  std::shared_ptr<Work> issue_all_reduce_coalesced(std::vector<Tensor>& ts, ReduceOp,
                                                   const OpOptions& o) override {
    return issue(OpType::kAllReduceCoalesced, o, ts);
  }
  std::shared_ptr<Work> issue_all_gather(Tensor& out, const Tensor& in,
                                         const OpOptions& o) override {
    return issue(OpType::kAllGather, o, {out, in});
  }
  std::shared_ptr<Work> issue_all_gather_coalesced(std::vector<Tensor>& outs,
                                                   const std::vector<Tensor>&,
                                                   const OpOptions& o) override {
    return issue(OpType::kAllGatherCoalesced, o, outs);
  }
  std::shared_ptr<Work> issue_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp,
                                             const OpOptions& o) override {
    return issue(OpType::kReduceScatter, o, {out, in});
  }
  std::shared_ptr<Work> issue_reduce_scatter_coalesced(std::vector<Tensor>& outs,
                                                       const std::vector<Tensor>&, ReduceOp,
                                                       const OpOptions& o) override {
    return issue(OpType::kReduceScatterCoalesced, o, outs);
  }
  std::shared_ptr<Work> issue_all_to_all(Tensor& out, const Tensor& in, const AllToAllCounts& c,
                                         const OpOptions& o) override {
    return issue(OpType::kAllToAll, o, {out, in}, c);
  }
  std::shared_ptr<Work> issue_broadcast(Tensor& t, int, const OpOptions& o) override {
    return issue(OpType::kBroadcast, o, {t});
  }
  std::shared_ptr<Work> issue_barrier(const OpOptions& o) override {
    return issue(OpType::kBarrier, o, {});
  }
  std::shared_ptr<Work> issue_barrier_on(int device_index, const OpOptions& o) override {
    barrier_devices.push_back(device_index);
    return issue(OpType::kBarrier, o, {});
  }
  std::shared_ptr<Work> issue_send(const Tensor& t, int, int, const OpOptions& o) override {
    return issue(OpType::kSend, o, {t});
  }
  std::shared_ptr<Work> issue_recv(Tensor& t, int, int, const OpOptions& o) override {
    return issue(OpType::kRecv, o, {t});
  }
  std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& members,
                                              const std::string&) override {
    return std::make_shared<EventGroup>(0, static_cast<int>(members.size()), device_);
  }

 private:
  Device device_;
  uint64_t seq_ = 0;
};

/// A tensor that claims to live on `device` but whose memory is host memory (never read by the
/// checks or by EventGroup): stands for a GPU tensor on a machine without one.
inline Tensor tensor_on(Device device, const Shape& sizes, DType dtype = DType::kFloat32) {
  Tensor host = Tensor::empty(sizes, dtype);
  auto storage = Storage::wrap(
      host.data_ptr(), host.nbytes(), [host](void*) {}, device);
  return Tensor(storage, dtype, host.sizes(), host.strides(), 0);
}

}  // namespace anvil::dist::test
