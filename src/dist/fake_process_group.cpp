// FakeProcessGroup: shape-correct collectives without communication.
#include "dist/fake_process_group.h"

#include <algorithm>

namespace anvil::dist {

FakeProcessGroup::FakeProcessGroup(int rank, int size, GroupOptions options)
    : HostProcessGroup(rank, size, {}, options) {}

FakeProcessGroup::~FakeProcessGroup() { stop_threads(); }

void FakeProcessGroup::run_all_reduce(Tensor&, ReduceOp, Millis) {}

void FakeProcessGroup::run_all_gather(Tensor& out, const Tensor& in, Millis) {
  const int64_t n = in.numel();
  Tensor flat_out = out.reshape({size(), n});
  for (int64_t j = 0; j < size(); ++j) flat_out.select(0, j).copy_from(in.reshape({n}));
}

void FakeProcessGroup::run_all_to_all(Tensor& out, const Tensor& in,
                                      const std::vector<int64_t>& out_counts,
                                      const std::vector<int64_t>& in_counts, Millis) {
  // Slot j of the output gets as much of this rank's own block as fits (zeros beyond).
  int64_t in_off = 0;
  for (int64_t j = 0; j < rank(); ++j) in_off += in_counts[static_cast<size_t>(j)];
  const int64_t mine = in_counts[static_cast<size_t>(rank())];
  Tensor src = in.reshape({in.numel()});
  Tensor dst = out.reshape({out.numel()});
  int64_t off = 0;
  for (size_t j = 0; j < out_counts.size(); ++j) {
    const int64_t k = std::min(mine, out_counts[j]);
    if (k > 0) dst.slice(0, off, off + k).copy_from(src.slice(0, in_off, in_off + k));
    off += out_counts[j];
  }
}

void FakeProcessGroup::run_broadcast(Tensor&, int, Millis) {}
void FakeProcessGroup::run_barrier(Millis) {}

HostProcessGroup::P2PWaiter FakeProcessGroup::post_send(const Tensor&, int dst, int) {
  return [dst](Millis) { return dst; };
}
HostProcessGroup::P2PWaiter FakeProcessGroup::post_recv(Tensor&, int src, int) {
  return [src](Millis) { return src; };
}

std::shared_ptr<ProcessGroup> FakeProcessGroup::make_subgroup(const std::vector<int>& members,
                                                              const std::string&) {
  auto it = std::find(members.begin(), members.end(), rank());
  const int my = it == members.end() ? 0 : static_cast<int>(it - members.begin());
  return std::make_shared<FakeProcessGroup>(my, static_cast<int>(members.size()), options());
}

}  // namespace anvil::dist
