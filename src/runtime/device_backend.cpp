// Loading device backends and registering their allocators (runtime/device_backend.h).
#include "runtime/device_backend.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "anvil/anvil_rt.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/shared_library.h"

namespace anvil::runtime {

namespace {

std::string backend_error(const AnvilDeviceApi& api) {
  const char* e = api.last_error ? api.last_error() : nullptr;
  return e && *e ? e : "no message";
}

/// core's DeviceAllocator over a backend's table.
class BackendAllocator final : public DeviceAllocator {
 public:
  explicit BackendAllocator(const AnvilDeviceApi& api) : api_(api) {}
  void* allocate(int index, size_t nbytes) override {
    void* p = api_.alloc(index, nbytes);
    if (!p)
      throw Error(str("cannot allocate ", nbytes, " bytes on ", api_.name, ":", index),
                  "device memory", "an allocation", backend_error(api_));
    return p;
  }
  void deallocate(int index, void* ptr) noexcept override { api_.free(index, ptr); }
  void copy(void* dst, Device dst_device, const void* src, Device src_device,
            size_t nbytes) override {
    int direction = ANVIL_COPY_DEVICE_TO_DEVICE;
    if (src_device.is_cpu()) direction = ANVIL_COPY_HOST_TO_DEVICE;
    if (dst_device.is_cpu()) direction = ANVIL_COPY_DEVICE_TO_HOST;
    const int device = dst_device.is_cpu() ? src_device.index : dst_device.index;
    device_copy(api_, device, dst, src, nbytes, direction, nullptr,
                str("copy ", src_device.str(), " -> ", dst_device.str()));
  }
  void zero(int index, void* ptr, size_t nbytes) override {
    if (api_.memset_zero(index, ptr, nbytes, nullptr) != 0)
      throw Error(str("cannot zero ", nbytes, " bytes on ", api_.name, ":", index),
                  "device memory", "success", backend_error(api_));
  }

 private:
  const AnvilDeviceApi& api_;
};

const char* type_name(Device::Type type) { return type == Device::Type::kCUDA ? "cuda" : "cpu"; }

struct Loaded {
  std::mutex mu;
  const AnvilDeviceApi* api[2] = {nullptr, nullptr};
  BackendAllocator* allocator[2] = {nullptr, nullptr};
};

Loaded& loaded() {
  static Loaded* l = new Loaded();  // never destroyed: device memory may be freed at exit
  return *l;
}

/// Installs the loader core calls when device memory is first asked for.
const bool kLoaderInstalled = [] {
  set_device_backend_loader([](Device::Type t) { device_backend(t); });
  return true;
}();

}  // namespace

std::string device_backend_library(Device::Type type) {
  return std::string("libanvil_") + type_name(type) + ".so";
}

const AnvilDeviceApi& device_backend(Device::Type type) {
  (void)kLoaderInstalled;
  ANVIL_CHECK(type != Device::Type::kCPU, "device_backend", "the CPU has no device backend",
              "a device type", "cpu");
  Loaded& l = loaded();
  const int t = static_cast<int>(type);
  std::lock_guard<std::mutex> lock(l.mu);
  if (l.api[t]) return *l.api[t];
  const std::string lib = device_backend_library(type);
  std::string looked, last_error;
  void* handle = open_anvil_library(lib, looked, last_error);
  if (!handle)
    throw Error(str("the ", type_name(type), " device backend (", lib,
                    ") cannot be loaded: anvil was built without it, or it is not installed "
                    "beside the runtime, or a library it needs (the CUDA runtime, cuBLASLt) is "
                    "missing; set ANVIL_DEVICE_BACKEND_DIR to its folder"),
                "device_backend", "a loadable " + lib, "looked in " + looked +
                (last_error.empty() ? "" : "; dlopen: " + last_error));
  auto fn = reinterpret_cast<AnvilDeviceBackendFn>(::dlsym(handle, ANVIL_DEVICE_BACKEND_SYMBOL));
  ANVIL_CHECK(fn != nullptr, "device_backend", lib + " does not export the backend entry point",
              ANVIL_DEVICE_BACKEND_SYMBOL, "no such symbol");
  const AnvilDeviceApi* api = fn();
  ANVIL_CHECK(api != nullptr && api->abi_version == ANVIL_DEVICE_ABI_VERSION, "device_backend",
              lib + " was built for another device ABI version; rebuild anvil",
              std::to_string(ANVIL_DEVICE_ABI_VERSION),
              api ? std::to_string(api->abi_version) : std::string("a null table"));
  ANVIL_CHECK(api->device_type == t, "device_backend", lib + " serves another device type",
              std::to_string(t), std::to_string(api->device_type));
  l.api[t] = api;
  l.allocator[t] = new BackendAllocator(*api);
  register_device_allocator(type, l.allocator[t]);
  return *api;
}

Device require_device(Device device, const std::string& where) {
  device = concrete(device);
  if (device.is_cpu()) return device;
  const AnvilDeviceApi& api = device_backend(device.type);
  const int n = api.device_count();
  ANVIL_CHECK(n > 0, where, str("no ", type_name(device.type), " device is available"),
              str("a ", type_name(device.type), " device"), backend_error(api));
  ANVIL_CHECK(device.index < n, where, str(device.str(), " does not exist"),
              str("a device index below ", n), std::to_string(device.index));
  return device;
}

void device_copy(const AnvilDeviceApi& api, int device, void* dst, const void* src, size_t bytes,
                 int direction, void* stream, const std::string& where) {
  if (bytes == 0) return;
  if (api.copy(device, dst, src, bytes, direction, stream) != 0)
    throw Error(str("device copy of ", bytes, " bytes failed"), where, "success",
                backend_error(api));
}

}  // namespace anvil::runtime
