#include "core/storage.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace anvil {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  size_t rounded = (nbytes + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment;
  if (rounded == 0) rounded = kStorageAlignment;
  void* p = std::aligned_alloc(kStorageAlignment, rounded);
  if (!p) throw Error("out of memory", "Storage::allocate", "", str(nbytes, " bytes requested"));
  std::memset(p, 0, rounded);
  return std::shared_ptr<Storage>(new Storage(p, nbytes, [](void* q) { std::free(q); }, Device::cpu()));
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
