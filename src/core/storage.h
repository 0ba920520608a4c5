// Storage: one reference-counted block of memory that tensors view.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "core/device.h"

namespace anvil {

/// Alignment of every host allocation anvil makes, in bytes.
inline constexpr size_t kStorageAlignment = 64;

/// A block of memory. Host allocations are 64-byte aligned and zero-filled; wrapped memory
/// (an mmapped file, a caller's buffer) is released through the given deleter.
class Storage {
 public:
  using Deleter = std::function<void(void*)>;

  /// Allocates `nbytes` of zeroed, 64-byte aligned host memory.
  static std::shared_ptr<Storage> allocate(size_t nbytes);
  /// Allocates `nbytes` on `device` (host memory for the CPU; a device's memory through its
  /// allocator, core/allocator.h, loading the device backend when needed), zero-filled when
  /// `zero`. Throws Error when the device has no backend or is out of memory.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device, bool zero = true);
  /// Like allocate() but the bytes are left as they are (for buffers the caller overwrites
  /// completely, such as compiled models' outputs). Large blocks come from a reuse cache.
  static std::shared_ptr<Storage> allocate_uninitialized(size_t nbytes);
  /// Wraps memory anvil does not own; `deleter` (may be empty) runs when the last view dies.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Deleter deleter,
                                       Device device = Device::cpu());

  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  Storage(void* data, size_t nbytes, Deleter deleter, Device device)
      : data_(data), nbytes_(nbytes), deleter_(std::move(deleter)), device_(device) {}
  void* data_;
  size_t nbytes_;
  Deleter deleter_;
  Device device_;
};

}  // namespace anvil
