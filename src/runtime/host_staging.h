// Running a CPU runtime kernel on a device package's tensors (docs/architecture.md, "Host
// steps"). A CUDA package calls api->extern_call for the extern ops the CUDA target has no
// kernel for (convolutions, pooling, sort, scatter, FFT, ...); every tensor of such a call is
// device memory (include/anvil/anvil_rt.h: every data pointer of a device package's run is). The
// call is staged: the stream is drained, the memory the descriptors span is copied to the host,
// the CPU kernel runs there, and the spans the outputs touch are copied back before the call
// returns. `anvil inspect` counts these steps (manifest "host_steps").
#pragma once

#include <functional>
#include <string>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"

namespace anvil::runtime {

/// Runs `kernel` on host copies of `inputs` and `outputs` (device memory of `device`, queued
/// work on `stream`). Descriptors whose data ranges overlap share one host copy, so an output
/// that aliases an input, or a strided view, sees the bytes it would see on the device; the
/// bytes between a strided output's elements are written back unchanged. Returns the kernel's
/// result; a failed copy throws anvil::Error naming `what` and the backend's message.
int run_on_host(const AnvilDeviceApi& api, int device, void* stream, const std::string& what,
                const AnvilRtTensor* inputs, int n_inputs, AnvilRtTensor* outputs,
                int n_outputs,
                const std::function<int(const AnvilRtTensor* inputs, AnvilRtTensor* outputs)>&
                    kernel);

}  // namespace anvil::runtime
