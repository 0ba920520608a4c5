// Runtime extern kernels for pooling with indices and 3-D pooling:
// aten.max_pool2d_with_indices.default, aten.max_pool3d.default,
// aten.max_pool3d_with_indices.default, aten.avg_pool3d.default and
// aten.adaptive_avg_pool3d.default / aten._adaptive_avg_pool3d.default. The computation is
// core/pool_nd.h, the one the reference kernels run (src/ops/pool_nd.cpp); inputs may have any
// strides, outputs are the contiguous buffers the generated code allocates.
#include "core/pool_nd.h"

#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime {

namespace {

/// The window of a pooling call's attributes (dilation 1 for average pooling).
pool::Window window_of(const ExternCall& call, int rank, bool with_dilation) {
  return pool::make_window(
      rank, call.attr_ints("kernel_size"), call.attr_ints("stride", {}),
      call.attr_ints("padding", {0}),
      with_dilation ? call.attr_ints("dilation", {1}) : std::vector<int64_t>{1}, call.target());
}

/// Max pooling over `rank` dims: output 0 the values, output 1 the indices when `with_indices`.
int max_pool_extern(ExternCall& call, int rank, bool with_indices) {
  const Tensor x = call.input_tensor(0);
  const pool::Window w = window_of(call, rank, true);
  const bool ceil_mode = call.attr_bool("ceil_mode", false);
  const Shape sizes = pool::output_sizes(x, w, ceil_mode, call.target());
  const Tensor values = kern::checked_output(call, 0, sizes, x.dtype());
  if (!with_indices) {
    pool::max_pool(x, w, ceil_mode, values, nullptr, call.target(), true);
    return 0;
  }
  const Tensor indices = kern::checked_output(call, 1, sizes, DType::kInt64);
  pool::max_pool(x, w, ceil_mode, values, &indices, call.target(), true);
  return 0;
}

int max_pool2d_with_indices_extern(ExternCall& call) { return max_pool_extern(call, 2, true); }
int max_pool3d_extern(ExternCall& call) { return max_pool_extern(call, 3, false); }
int max_pool3d_with_indices_extern(ExternCall& call) { return max_pool_extern(call, 3, true); }

/// aten.avg_pool3d.default.
int avg_pool3d_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0);
  const pool::Window w = window_of(call, 3, false);
  const bool ceil_mode = call.attr_bool("ceil_mode", false);
  const int64_t divisor = call.attr_int("divisor_override", 0);
  ANVIL_CHECK(!call.has_attr("divisor_override") || divisor != 0, call.target(),
              "divisor must be non-zero", "divisor_override != 0", "0");
  const Tensor out =
      kern::checked_output(call, 0, pool::output_sizes(x, w, ceil_mode, call.target()), x.dtype());
  pool::avg_pool(x, w, ceil_mode, call.attr_bool("count_include_pad", true), divisor, out,
                 call.target(), true);
  return 0;
}

/// aten.adaptive_avg_pool3d.default / aten._adaptive_avg_pool3d.default.
int adaptive_avg_pool3d_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0);
  const Shape sizes = pool::adaptive_sizes(x, 3, call.attr_ints("output_size"), call.target());
  const Tensor out = kern::checked_output(call, 0, sizes, x.dtype());
  pool::adaptive_avg_pool(x, 3, out, call.target(), true);
  return 0;
}

}  // namespace

/// Registers the N-d pooling externs.
void register_pool_nd_externs() {
  register_extern("aten.max_pool2d_with_indices.default", max_pool2d_with_indices_extern);
  register_extern("aten.max_pool3d.default", max_pool3d_extern);
  register_extern("aten.max_pool3d_with_indices.default", max_pool3d_with_indices_extern);
  register_extern("aten.avg_pool3d.default", avg_pool3d_extern);
  register_extern("aten.adaptive_avg_pool3d.default", adaptive_avg_pool3d_extern);
  register_extern("aten._adaptive_avg_pool3d.default", adaptive_avg_pool3d_extern);
}

}  // namespace anvil::runtime
