// Device backends: the shared libraries (libanvil_cuda.so) that give the runtime a device's
// memory, streams and GEMMs through include/anvil/anvil_device.h. The runtime dlopens one only
// when a package or a tensor asks for its device, so CPU-only use never needs a device's
// libraries (docs/architecture.md, "Devices").
#pragma once

#include <string>

#include "anvil/anvil_device.h"
#include "core/device.h"

namespace anvil::runtime {

/// The backend of device type `type` (not kCPU), loaded on first use and registered as the
/// type's allocator (core/allocator.h). The library is looked for in $ANVIL_DEVICE_BACKEND_DIR,
/// beside anvil's libraries and in their ../lib, the build tree, then on the loader's search
/// path (core/shared_library.h, the search the nccl backend uses too).
/// Throws Error naming the library and every place looked when it is missing or does not match
/// this runtime.
const AnvilDeviceApi& device_backend(Device::Type type);

/// Loads the backend of `device` and checks that the device exists: throws Error (e.g. "no
/// CUDA device: cudaErrorNoDevice ...", or "cuda:3 does not exist: 2 devices") otherwise.
/// Returns `device` with a concrete index.
Device require_device(Device device, const std::string& where);

/// The file name of a device type's backend library ("libanvil_cuda.so").
std::string device_backend_library(Device::Type type);

/// Copies between host and device memory with the device's backend, queued on `stream` (null:
/// synchronous). Throws Error with the backend's message.
void device_copy(const AnvilDeviceApi& api, int device, void* dst, const void* src, size_t bytes,
                 int direction, void* stream, const std::string& where);

}  // namespace anvil::runtime
