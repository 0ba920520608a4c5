// Device: where a tensor's memory lives.
#pragma once

#include <string>

namespace anvil {

/// A device: CPU, or a CUDA device with an index (-1 = current).
struct Device {
  enum class Type { kCPU, kCUDA };
  Type type = Type::kCPU;
  int index = -1;

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {Type::kCUDA, index}; }
  /// Parses "cpu", "cuda", "cuda:1"; throws Error otherwise.
  static Device parse(const std::string& text);
  std::string str() const;
  bool is_cpu() const { return type == Type::kCPU; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

}  // namespace anvil
