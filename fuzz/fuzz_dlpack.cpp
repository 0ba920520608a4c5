// libFuzzer target: the C ABI's DLPack intake (runtime/dlpack.h, which anvil_model_run and
// anvil_model_update_constants call on every caller tensor). The input fills a DLManagedTensor:
// device, dtype, rank, shape, strides (or none), byte offset, a null or real data pointer, and
// the dtype the model would want. Intake either raises anvil::Error or gives a tensor with the
// caller's sizes, strides and dtype whose bytes, when the caller's buffer holds them, read in
// full and export back to the same DLPack description.
#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_util.h"
#include "runtime/dlpack.h"

namespace {

/// Reads fixed-size fields from the input; zeros once it runs out.
struct Reader {
  const uint8_t* p;
  size_t n;
  template <typename T>
  T take() {
    T v{};
    const size_t k = std::min(sizeof(T), n);
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    return v;
  }
};

/// Small values are the interesting ones for shapes and strides: mostly 0..15, sometimes a raw
/// 64-bit value (negative, huge).
int64_t take_dim(Reader& r) {
  const uint8_t tag = r.take<uint8_t>();
  if (tag < 0xF0) return tag % 16;
  return r.take<int64_t>();
}

constexpr size_t kBufferBytes = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r{data, size};
  static std::vector<char> buffer(kBufferBytes, 1);
  DLManagedTensor m{};
  DLTensor& t = m.dl_tensor;
  const uint8_t flags = r.take<uint8_t>();
  t.device.device_type = static_cast<DLDeviceType>(flags & 1 ? kDLCPU : r.take<uint8_t>() % 16);
  t.device.device_id = (flags & 2) ? r.take<int32_t>() : 0;
  t.dtype.code = r.take<uint8_t>() % 8;
  t.dtype.bits = std::vector<uint8_t>{8, 16, 32, 64, 128, 0, 1, 255}[r.take<uint8_t>() % 8];
  t.dtype.lanes = (flags & 4) ? r.take<uint16_t>() : 1;
  t.ndim = static_cast<int8_t>(r.take<uint8_t>()) % 11;
  std::vector<int64_t> shape(std::max<int32_t>(t.ndim, 0)), strides(shape.size());
  for (auto& s : shape) s = take_dim(r);
  for (auto& s : strides) s = take_dim(r);
  t.shape = (flags & 8) && t.ndim > 0 ? nullptr : shape.data();
  t.strides = (flags & 16) ? strides.data() : nullptr;
  t.byte_offset = (flags & 32) ? r.take<uint64_t>() : r.take<uint8_t>();
  t.data = (flags & 64) ? nullptr : buffer.data();
  const anvil::DType want_bool = anvil::DType::kBool;
  const anvil::DType* want = (flags & 128) ? &want_bool : nullptr;

  anvil::Tensor x;
  try {
    x = anvil::runtime::borrow_dlpack(&m, "fuzz input", want);
  } catch (const anvil::Error&) {
    return 0;
  }
  if (x.dim() != t.ndim) anvil::fuzz::fail_property("rank changed");
  for (int32_t d = 0; d < t.ndim; ++d)
    if (x.sizes()[d] != t.shape[d] || (t.strides && x.strides()[d] != t.strides[d]))
      anvil::fuzz::fail_property("sizes or strides changed at dim " + std::to_string(d));
  // The bytes a non-empty tensor spans, in exact arithmetic (intake accepted it, so each term
  // is below 2^64): read them when the buffer holds them.
  if (x.numel() == 0 || !t.data || t.device.device_type == kDLCUDA) return 0;
  __int128 extent = 0;
  for (int32_t d = 0; d < x.dim(); ++d)
    extent += static_cast<__int128>(x.sizes()[d] - 1) * x.strides()[d];
  const __int128 end =
      static_cast<__int128>(t.byte_offset) + (extent + 1) * static_cast<__int128>(x.element_size());
  // (A zero stride may repeat a few bytes many times: the copy is kept small.)
  if (end <= __int128{kBufferBytes} && x.numel() <= int64_t{1} << 16) {
    const anvil::Tensor copy = x.clone();  // reads every element
    DLManagedTensor* out = anvil::runtime::export_dlpack(copy);
    if (out->dl_tensor.ndim != t.ndim ||
        anvil::runtime::dtype_from_dlpack(out->dl_tensor.dtype, "export") != x.dtype())
      anvil::fuzz::fail_property("export changed the rank or the dtype");
    out->deleter(out);
  }
  return 0;
}
