#include "core/storage.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "core/allocator.h"
#include "core/error.h"

namespace anvil {

namespace {

/// Keeps freed large blocks (>= kMinCachedBytes) for reuse, so that a model's outputs, allocated
/// afresh on every run, do not page-fault their memory in again each time (for a 64 MiB output
/// that costs more than computing it). Blocks are keyed by their size rounded up to 64 KiB; the
/// cache holds at most ANVIL_ALLOC_CACHE_MB (default 512; 0 turns it off) and frees the largest
/// blocks first when full. Thread-safe.
class LargeBlockCache {
 public:
  static constexpr size_t kMinCachedBytes = size_t{1} << 20;
  static constexpr size_t kGranule = size_t{64} << 10;

  static LargeBlockCache& instance() {
    static LargeBlockCache* cache = new LargeBlockCache();  // never destroyed: frees may come late
    return *cache;
  }
  static size_t round(size_t nbytes) { return (nbytes + kGranule - 1) / kGranule * kGranule; }

  /// A cached block of exactly `rounded` bytes, or nullptr.
  void* take(size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(rounded);
    if (it == blocks_.end()) return nullptr;
    void* p = it->second;
    blocks_.erase(it);
    held_ -= rounded;
    return p;
  }
  /// Keeps `p` (of `rounded` bytes) for reuse, or frees it when the cache is off or it is too big.
  void give(void* p, size_t rounded) {
    std::lock_guard<std::mutex> lock(mu_);
    if (rounded > limit_) {
      std::free(p);
      return;
    }
    while (held_ + rounded > limit_ && !blocks_.empty()) {
      auto last = std::prev(blocks_.end());
      held_ -= last->first;
      std::free(last->second);
      blocks_.erase(last);
    }
    blocks_.emplace(rounded, p);
    held_ += rounded;
  }

 private:
  LargeBlockCache() {
    const char* env = std::getenv("ANVIL_ALLOC_CACHE_MB");
    limit_ = (env && *env ? std::strtoull(env, nullptr, 10) : 512) << 20;
  }
  std::mutex mu_;
  std::multimap<size_t, void*> blocks_;
  size_t held_ = 0;
  size_t limit_ = 0;
};

std::shared_ptr<Storage> allocate_impl(size_t nbytes, bool zero) {
  size_t rounded = (nbytes + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment;
  if (rounded == 0) rounded = kStorageAlignment;
  if (rounded >= LargeBlockCache::kMinCachedBytes) {
    auto& cache = LargeBlockCache::instance();
    const size_t r = LargeBlockCache::round(rounded);
    void* p = cache.take(r);
    if (!p) p = std::aligned_alloc(kStorageAlignment, r);
    if (!p) throw Error("out of memory", "Storage::allocate", "", str(nbytes, " bytes requested"));
    if (zero) std::memset(p, 0, r);
    return Storage::wrap(p, nbytes, [r](void* q) { LargeBlockCache::instance().give(q, r); });
  }
  void* p = std::aligned_alloc(kStorageAlignment, rounded);
  if (!p) throw Error("out of memory", "Storage::allocate", "", str(nbytes, " bytes requested"));
  if (zero) std::memset(p, 0, rounded);
  return Storage::wrap(p, nbytes, [](void* q) { std::free(q); });
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) { return allocate_impl(nbytes, true); }

namespace {

struct DeviceRegistry {
  std::mutex mu;
  DeviceAllocator* allocators[2] = {nullptr, nullptr};
  std::function<void(Device::Type)> loader;
  static DeviceRegistry& get() {
    static DeviceRegistry* r = new DeviceRegistry();  // never destroyed: frees may come late
    return *r;
  }
};

}  // namespace

void register_device_allocator(Device::Type type, DeviceAllocator* allocator) {
  ANVIL_CHECK(type != Device::Type::kCPU, "register_device_allocator",
              "host memory has a built-in allocator", "a device type", "cpu");
  auto& r = DeviceRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.allocators[static_cast<int>(type)] = allocator;
}

void set_device_backend_loader(std::function<void(Device::Type)> loader) {
  auto& r = DeviceRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.loader = std::move(loader);
}

DeviceAllocator& device_allocator(Device device) {
  ANVIL_CHECK(!device.is_cpu(), "device_allocator", "host memory has no device allocator",
              "a device", "cpu");
  auto& r = DeviceRegistry::get();
  const int t = static_cast<int>(device.type);
  std::function<void(Device::Type)> loader;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.allocators[t]) return *r.allocators[t];
    loader = r.loader;
  }
  ANVIL_CHECK(loader != nullptr, "device_allocator",
              str("no backend for device ", device.str(),
                  ": this program does not link the anvil runtime, which loads device backends"),
              "a loaded device backend", "none");
  loader(device.type);  // throws when the backend cannot be loaded
  std::lock_guard<std::mutex> lock(r.mu);
  ANVIL_CHECK(r.allocators[t] != nullptr, "device_allocator",
              str("the backend of ", device.str(), " registered no allocator"),
              "a registered allocator", "none");
  return *r.allocators[t];
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device, bool zero) {
  if (device.is_cpu()) return allocate_impl(nbytes, zero);
  device = concrete(device);
  DeviceAllocator& a = device_allocator(device);
  void* p = a.allocate(device.index, nbytes);
  auto st = Storage::wrap(p, nbytes, [&a, index = device.index](void* q) {
    a.deallocate(index, q);
  }, device);
  if (zero && nbytes > 0) a.zero(device.index, p, nbytes);
  return st;
}

std::shared_ptr<Storage> Storage::allocate_uninitialized(size_t nbytes) {
  return allocate_impl(nbytes, false);
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Deleter deleter, Device device) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, std::move(deleter), device));
}

Storage::~Storage() {
  if (deleter_) deleter_(data_);
}

std::string Device::str() const {
  if (type == Type::kCPU) return "cpu";
  return index < 0 ? "cuda" : "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(-1);
  if (text.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      int idx = std::stoi(text.substr(5), &used);
      if (used == text.size() - 5 && idx >= 0) return cuda(idx);
    } catch (const std::exception&) {
    }
  }
  throw Error("unknown device", "device", "cpu, cuda or cuda:N", text);
}

}  // namespace anvil
