// Runtime extern kernels for grid sampling and sliding blocks: aten.grid_sampler.default /
// aten.grid_sampler_2d.default (4-D inputs), aten.im2col.default and aten.col2im.default. The
// computation is core/sample.h, the one the reference kernels run (src/ops/sample.cpp); inputs
// may have any strides, outputs are the contiguous buffers the generated code allocates.
#include "core/sample.h"

#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime {

namespace {

/// grid_sampler / grid_sampler_2d: inputs input, grid.
int grid_sampler_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0), g = call.input_tensor(1);
  ANVIL_CHECK(x.dim() != 5, call.target(), "3-D grid sampling (a 5-D input) is not supported",
              "a 4-D input", x.type_str());
  const int64_t mode = call.attr_int("interpolation_mode"), pad = call.attr_int("padding_mode");
  const Tensor out = kern::checked_output(
      call, 0, sample::grid_sample_sizes(x, g, mode, pad, call.target()), x.dtype());
  sample::grid_sample_2d(x, g, mode, pad, call.attr_bool("align_corners", false), out,
                         call.target(), true);
  return 0;
}

sample::Blocks blocks_of(const ExternCall& call) {
  return sample::make_blocks(call.attr_ints("kernel_size"), call.attr_ints("dilation"),
                             call.attr_ints("padding"), call.attr_ints("stride"), call.target());
}

int im2col_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0);
  const sample::Blocks b = blocks_of(call);
  const Tensor out =
      kern::checked_output(call, 0, sample::im2col_sizes(x, b, call.target()), x.dtype());
  sample::im2col(x, b, out, call.target(), true);
  return 0;
}

int col2im_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0);
  const sample::Blocks b = blocks_of(call);
  const Tensor out = kern::checked_output(
      call, 0, sample::col2im_sizes(x, call.attr_ints("output_size"), b, call.target()), x.dtype());
  sample::col2im(x, b, out, call.target(), true);
  return 0;
}

}  // namespace

/// Registers the sampling externs.
void register_sample_externs() {
  register_extern("aten.grid_sampler.default", grid_sampler_extern);
  register_extern("aten.grid_sampler_2d.default", grid_sampler_extern);
  register_extern("aten.im2col.default", im2col_extern);
  register_extern("aten.col2im.default", col2im_extern);
}

}  // namespace anvil::runtime
