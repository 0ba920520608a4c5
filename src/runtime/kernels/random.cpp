// Random extern kernels: aten.randn / aten.rand (.default), their *_like forms and
// aten.randperm. They fill the
// preallocated output from the calling Model's generator (ExternCall::generator(): seed 0 or
// ANVIL_SEED at load, one stream continued by every run, shared by concurrent runners under the
// generator's lock) with PyTorch CPU's algorithms (core/random.h).
#include "core/error.h"
#include "core/random.h"
#include "runtime/externs.h"

namespace anvil::runtime {

namespace {

/// Checks that the call has one output and returns it as a Tensor.
Tensor random_output(ExternCall& call) {
  ANVIL_CHECK(call.num_outputs() == 1, call.target(), "random ops have one output", "1 output",
              std::to_string(call.num_outputs()));
  return call.output_tensor(0);
}

/// randn / randn_like: N(0, 1) samples.
int normal_extern(ExternCall& call) {
  call.generator().normal_(random_output(call));
  return 0;
}

/// rand / rand_like: U[0, 1) samples.
int uniform_extern(ExternCall& call) {
  call.generator().uniform_(random_output(call));
  return 0;
}

/// randperm: a permutation of 0 .. n-1 into the 1-D output.
int randperm_extern(ExternCall& call) {
  call.generator().randperm_(random_output(call));
  return 0;
}

}  // namespace

void register_random_externs() {
  register_extern("aten.randperm.default", randperm_extern);
  register_extern("aten.randn.default", normal_extern);
  register_extern("aten.randn_like.default", normal_extern);
  register_extern("aten.rand.default", uniform_extern);
  register_extern("aten.rand_like.default", uniform_extern);
}

}  // namespace anvil::runtime
