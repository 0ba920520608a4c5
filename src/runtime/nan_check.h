// The NaN / Inf check of a run (Model::set_check_nan_inf; ANVIL_CHECK_NAN_INF=1 at load): after
// each step the manifest gives "checks" for, the generated run() calls AnvilRunArgs::after_step
// and the runtime scans the buffers that step wrote last (passes::nan_check_buffers). The first
// NaN or infinity fails the run with an Error naming the step, its graph nodes, the buffer, the
// element and its value; the Model stays usable. Off, nothing is scanned and nothing is called.
#pragma once

#include <cstddef>
#include <vector>

#include "anvil/anvil_device.h"
#include "core/symint.h"
#include "runtime/package.h"

namespace anvil::runtime {

/// Where one run's memory is: each slot's first byte and how many bytes are valid from it.
struct RunMemory {
  struct Region {
    const void* data = nullptr;
    size_t bytes = 0;
  };
  std::vector<Region> inputs, outputs, constants;  // AnvilRunArgs slots
  Region arena;
  SymEnv env;  // the run's symbol values
  /// Device packages: the memory is the device's, copied to the host (after the stream has
  /// finished the step) to be scanned. Null for CPU packages.
  const AnvilDeviceApi* device_api = nullptr;
  int device_index = 0;
  void* stream = nullptr;
};

/// Scans the buffers manifest step `step` (`kernel`) lists in its "checks". Throws Error for the
/// first NaN or infinity, and for a check that reaches outside the run's memory (a damaged
/// manifest).
void check_step_finite(const KernelSpec& kernel, size_t step, const RunMemory& memory,
                       const std::string& where);

}  // namespace anvil::runtime
