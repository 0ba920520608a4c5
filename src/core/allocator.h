// Device memory behind Storage: an allocator per device type. Host memory is built in
// (storage.cpp); a device backend (the runtime's runtime/device_backend.cpp, which dlopens
// libanvil_cuda.so) registers the allocator of its device type. core knows no device library.
#pragma once

#include <cstddef>
#include <functional>

#include "core/device.h"

namespace anvil {

/// Memory of one device type. Implementations are thread-safe and live for the whole process.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  /// `nbytes` of memory on device `index` (>= 0); throws Error (what, device, actual) on failure.
  virtual void* allocate(int index, size_t nbytes) = 0;
  /// Returns memory from allocate(); never throws.
  virtual void deallocate(int index, void* ptr) noexcept = 0;
  /// Copies `nbytes` from `src` to `dst`, one or both of them on a device of this type (the other
  /// may be host memory); complete on return. Throws Error on failure.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device,
                    size_t nbytes) = 0;
  /// Zero-fills `nbytes` at `ptr` on device `index`.
  virtual void zero(int index, void* ptr, size_t nbytes) = 0;
};

/// Registers the allocator of device type `type` (not kCPU). `allocator` must outlive every
/// storage it allocates (backends register a process-lifetime object).
void register_device_allocator(Device::Type type, DeviceAllocator* allocator);

/// Called when memory of a device type without an allocator is asked for: the runtime installs
/// one that loads the type's backend library (and registers its allocator) or throws Error
/// saying why it cannot.
void set_device_backend_loader(std::function<void(Device::Type)> loader);

/// The allocator of `device`'s type, loading its backend when needed. Throws Error naming the
/// device when none can be had (no backend library, no loader: a build without the runtime).
DeviceAllocator& device_allocator(Device device);

/// `device` with index -1 ("cuda": the current device) made concrete (0).
inline Device concrete(Device device) {
  if (!device.is_cpu() && device.index < 0) device.index = 0;
  return device;
}

}  // namespace anvil
