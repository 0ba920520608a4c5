// Runtime extern kernels for pairwise distances: aten.cdist.default /
// aten._cdist_forward.default (inputs x1, x2; attrs p, compute_mode) and aten.pdist.default /
// aten._pdist_forward.default (input; attr p). The computation is core/distance.h, the one the
// reference kernels run (src/ops/dist.cpp).
#include "core/distance.h"
#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime {

namespace {

int cdist_extern(ExternCall& call) {
  const Tensor a = call.input_tensor(0), b = call.input_tensor(1);
  const double p = call.attr_float("p", 2.0);
  std::optional<int64_t> mode;
  if (call.has_attr("compute_mode")) mode = call.attr_int("compute_mode");
  const Tensor out =
      kern::checked_output(call, 0, distance::cdist_sizes(a, b, p, mode, call.target()), a.dtype());
  distance::cdist(a, b, p, out, call.target(), true);
  return 0;
}

int pdist_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0);
  const double p = call.attr_float("p", 2.0);
  const Tensor out =
      kern::checked_output(call, 0, distance::pdist_sizes(x, p, call.target()), x.dtype());
  distance::pdist(x, p, out, call.target(), true);
  return 0;
}

}  // namespace

/// Registers the distance externs.
void register_dist_externs() {
  register_extern("aten.cdist.default", cdist_extern);
  register_extern("aten._cdist_forward.default", cdist_extern);
  register_extern("aten.pdist.default", pdist_extern);
  register_extern("aten._pdist_forward.default", pdist_extern);
}

}  // namespace anvil::runtime
