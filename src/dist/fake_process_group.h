// The fake backend (spec/collectives.md §2.7 b): one process claims one rank of a larger group;
// collectives move no data but produce outputs of the right shapes (as if every rank held this
// rank's data), which is enough to compile, run and AOT-compile graphs with collectives.
#pragma once

#include "dist/host_process_group.h"

namespace anvil::dist {

/// A host-engine group that never communicates. all_reduce leaves data unchanged (sum/avg/min/max
/// of identical copies, except that sum and product then differ from a real W-rank run), all_gather
/// repeats the input W times, reduce_scatter keeps this rank's chunk, all_to_all copies this
/// rank's own block into every slot, broadcast and barrier do nothing, recv leaves its buffer.
class FakeProcessGroup : public HostProcessGroup {
 public:
  FakeProcessGroup(int rank, int size, GroupOptions options = {});
  ~FakeProcessGroup() override;
  std::string backend_name() const override { return "fake"; }

 protected:
  void run_all_reduce(Tensor& t, ReduceOp op, Millis timeout) override;
  void run_all_gather(Tensor& out, const Tensor& in, Millis timeout) override;
  void run_all_to_all(Tensor& out, const Tensor& in, const std::vector<int64_t>& out_counts,
                      const std::vector<int64_t>& in_counts, Millis timeout) override;
  void run_broadcast(Tensor& t, int src, Millis timeout) override;
  void run_barrier(Millis timeout) override;
  P2PWaiter post_send(const Tensor& t, int dst, int tag) override;
  P2PWaiter post_recv(Tensor& t, int src, int tag) override;
  std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& members,
                                              const std::string& name) override;
};

}  // namespace anvil::dist
