// The run's NaN / Inf check (runtime/nan_check.h).
#include "runtime/nan_check.h"

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/half.h"

namespace anvil::runtime {

namespace {

/// Index of the first non-finite value among `n` elements of `dtype` at `p` (complex values
/// count as two components, the index is the element's), or -1; its value as text in `value`.
int64_t first_non_finite(const void* p, int64_t n, DType dtype, std::string& value) {
  auto scan = [&](auto tag, int comps) -> int64_t {
    using T = decltype(tag);
    const T* v = static_cast<const T*>(p);
    for (int64_t i = 0; i < n * comps; ++i) {
      const double x = static_cast<double>(v[i]);  // 16-bit types through float
      if (!std::isfinite(x)) {
        value = std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");
        if (comps == 2) value += i % 2 == 0 ? " (real part)" : " (imaginary part)";
        return i / comps;
      }
    }
    return -1;
  };
  switch (dtype) {
    case DType::kFloat32:
      return scan(float{}, 1);
    case DType::kFloat64:
      return scan(double{}, 1);
    case DType::kFloat16:
      return scan(Half{}, 1);
    case DType::kBFloat16:
      return scan(BFloat16{}, 1);
    case DType::kComplex32:
      return scan(Half{}, 2);
    case DType::kComplex64:
      return scan(float{}, 2);
    case DType::kComplex128:
      return scan(double{}, 2);
    default:
      return -1;  // integers, bool: always finite (float8 is not listed)
  }
}

/// "[1, 0, 3]": flat element `i` of a row-major tensor of `sizes` (empty when they do not
/// describe `numel` elements).
std::string multi_index(int64_t i, const std::vector<int64_t>& sizes, int64_t numel) {
  int64_t prod = 1;
  for (int64_t s : sizes) prod *= s;
  if (sizes.empty() || prod != numel) return "";
  std::vector<int64_t> idx(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    idx[d] = sizes[d] > 0 ? i % sizes[d] : 0;
    i = sizes[d] > 0 ? i / sizes[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

const char* memory_name(BufferCheck::Memory m) {
  switch (m) {
    case BufferCheck::Memory::kInput:
      return "input";
    case BufferCheck::Memory::kOutput:
      return "output";
    case BufferCheck::Memory::kConstant:
      return "constant";
    case BufferCheck::Memory::kArena:
      return "arena";
  }
  return "?";
}

}  // namespace

void check_step_finite(const KernelSpec& kernel, size_t step, const RunMemory& memory,
                       const std::string& where) {
  std::vector<char> host;  // device packages: the buffer copied over
  bool synced = false;
  const std::string what = str("NaN/Inf check: step ", step, " '", kernel.name, "'");
  for (const BufferCheck& c : kernel.checks) {
    const int64_t numel = c.numel.evaluate(memory.env);
    size_t bytes = 0;
    ANVIL_CHECK(numel >= 0 && !__builtin_mul_overflow(static_cast<size_t>(numel),
                                                      dtype_size(c.dtype), &bytes),
                where, what + str(": buffer '", c.buffer, "' has a bad element count"),
                "a count >= 0 whose bytes fit in memory", std::to_string(numel));
    RunMemory::Region region;
    size_t offset = 0;
    if (c.memory == BufferCheck::Memory::kArena) {
      const int64_t off = c.offset.evaluate(memory.env);
      ANVIL_CHECK(off >= 0, where, what + str(": buffer '", c.buffer, "' has a negative offset"),
                  ">= 0", std::to_string(off));
      region = memory.arena;
      offset = static_cast<size_t>(off);
    } else {
      const auto& slots = c.memory == BufferCheck::Memory::kInput    ? memory.inputs
                          : c.memory == BufferCheck::Memory::kOutput ? memory.outputs
                                                                     : memory.constants;
      ANVIL_CHECK(
          c.index >= 0 && static_cast<size_t>(c.index) < slots.size(), where,
          what + str(": buffer '", c.buffer, "' names an unknown ", memory_name(c.memory), " slot"),
          str("an index < ", slots.size()), std::to_string(c.index));
      region = slots[static_cast<size_t>(c.index)];
    }
    if (bytes == 0) continue;
    ANVIL_CHECK(region.data && offset <= region.bytes && bytes <= region.bytes - offset, where,
                what + str(": buffer '", c.buffer, "' reaches outside the run's ",
                           memory_name(c.memory), " memory"),
                str(region.bytes, " bytes"), str(offset, " + ", bytes, " bytes"));
    const void* data = static_cast<const char*>(region.data) + offset;
    if (memory.device_api) {
      if (!synced && memory.device_api->stream_synchronize(memory.device_index, memory.stream) != 0)
        throw Error(what + ": the step failed on the device", where, "success",
                    memory.device_api->last_error());
      synced = true;
      host.resize(bytes);
      if (memory.device_api->copy(memory.device_index, host.data(), data, bytes,
                                  ANVIL_COPY_DEVICE_TO_HOST, nullptr) != 0)
        throw Error(what + str(": cannot copy buffer '", c.buffer, "' to the host"), where,
                    "success", memory.device_api->last_error());
      data = host.data();
    }
    std::string value;
    const int64_t bad = first_non_finite(data, numel, c.dtype, value);
    if (bad < 0) continue;
    std::vector<int64_t> sizes;
    for (const SymInt& s : c.sizes) sizes.push_back(s.evaluate(memory.env));
    const std::string idx = multi_index(bad, sizes, numel);
    std::ostringstream shape;
    for (size_t d = 0; d < sizes.size(); ++d) shape << (d ? ", " : "") << sizes[d];
    throw Error(
        what + str(" (", kernel.kind, kernel.nodes.empty() ? "" : ", nodes " + kernel.nodes,
                   ") wrote ", value, " into buffer '", c.buffer, "' (", memory_name(c.memory),
                   c.memory == BufferCheck::Memory::kArena ? std::string() : str(" ", c.index),
                   ", ", dtype_name(c.dtype), "[", shape.str(), "]",
                   c.nodes.empty() ? "" : ", holding " + c.nodes, ") at element ", bad,
                   idx.empty() ? "" : " " + idx),
        where, "finite values", value);
  }
}

}  // namespace anvil::runtime
