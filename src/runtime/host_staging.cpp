// Host staging of a device package's extern calls (runtime/host_staging.h).
#include "runtime/host_staging.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "runtime/device_backend.h"

namespace anvil::runtime {

namespace {

/// Host copies are laid out with the device's alignment modulo this, so a kernel that checks
/// alignment sees what it would see on the device.
constexpr uintptr_t kAlign = 256;

/// The byte range [lo, hi) a descriptor's elements occupy; empty (lo == hi) for no data or no
/// elements.
struct Span {
  uintptr_t lo = 0, hi = 0;
};

Span span_of(const AnvilRtTensor& t, const std::string& what) {
  if (!t.data || t.ndim < 0) return {};
  ANVIL_CHECK(t.ndim <= 8, what, "a tensor descriptor has too many dims", "<= 8",
              std::to_string(t.ndim));
  const auto elem = static_cast<int64_t>(dtype_size(dtype_from_code(t.dtype)));
  int64_t lo = 0, hi = 0;  // element offsets of the lowest and highest element
  for (int d = 0; d < t.ndim; ++d) {
    if (t.sizes[d] <= 0) return {};
    const int64_t reach = (t.sizes[d] - 1) * t.strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  const auto base = reinterpret_cast<uintptr_t>(t.data);
  return {base + static_cast<uintptr_t>(lo * elem), base + static_cast<uintptr_t>((hi + 1) * elem)};
}

struct Region {
  uintptr_t lo, hi;  // device range (lo aligned down to kAlign)
  char* host = nullptr;
  bool written = false;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

int run_on_host(const AnvilDeviceApi& api, int device, void* stream, const std::string& what,
                const AnvilRtTensor* inputs, int n_inputs, AnvilRtTensor* outputs,
                int n_outputs,
                const std::function<int(const AnvilRtTensor*, AnvilRtTensor*)>& kernel) {
  const int n = std::max(n_inputs, 0) + std::max(n_outputs, 0);
  std::vector<AnvilRtTensor> all;
  all.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n_inputs; ++i) all.push_back(inputs[i]);
  for (int i = 0; i < n_outputs; ++i) all.push_back(outputs[i]);
  std::vector<Span> spans;
  for (const auto& t : all) spans.push_back(span_of(t, what));

  // Merge overlapping ranges: one host copy per connected range.
  std::vector<Region> regions;
  {
    std::vector<Span> sorted;
    for (const Span& s : spans)
      if (s.hi > s.lo) sorted.push_back({s.lo / kAlign * kAlign, s.hi});
    std::sort(sorted.begin(), sorted.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
    for (const Span& s : sorted) {
      if (!regions.empty() && s.lo < regions.back().hi)
        regions.back().hi = std::max(regions.back().hi, s.hi);
      else
        regions.push_back({s.lo, s.hi});
    }
  }
  auto region_of = [&](uintptr_t p) -> Region& {
    for (Region& r : regions)
      if (p >= r.lo && p < r.hi) return r;
    throw Error("internal error: a tensor outside every staged range", what);
  };

  // The device work queued so far produced the inputs: wait for it, then copy.
  std::vector<std::unique_ptr<void, FreeDeleter>> owned;
  for (Region& r : regions) {
    const size_t bytes = r.hi - r.lo;
    void* h = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (!h) throw Error("out of host memory staging a host step", what, "", str(bytes, " bytes"));
    owned.emplace_back(h);
    r.host = static_cast<char*>(h);
    device_copy(api, device, r.host, reinterpret_cast<const void*>(r.lo), bytes,
                ANVIL_COPY_DEVICE_TO_HOST, stream, what + " (device to host)");
  }
  if (!regions.empty() && api.stream_synchronize(device, stream) != 0)
    throw Error("the device failed before a host step", what, "success",
                api.last_error ? api.last_error() : "no message");

  std::vector<AnvilRtTensor> host_in(inputs, inputs + std::max(n_inputs, 0));
  std::vector<AnvilRtTensor> host_out(outputs, outputs + std::max(n_outputs, 0));
  for (int i = 0; i < n; ++i) {
    AnvilRtTensor& t = i < n_inputs ? host_in[static_cast<size_t>(i)]
                                    : host_out[static_cast<size_t>(i - n_inputs)];
    t.device_type = ANVIL_DEVICE_CPU;
    t.device_index = 0;
    const Span& s = spans[static_cast<size_t>(i)];
    if (s.hi <= s.lo) continue;  // no elements: the pointer is never read
    const auto p = reinterpret_cast<uintptr_t>(t.data);
    Region& r = region_of(s.lo);
    t.data = r.host + (p - r.lo);
    if (i >= n_inputs) r.written = true;
  }
  const int rc = kernel(host_in.empty() ? nullptr : host_in.data(),
                        host_out.empty() ? nullptr : host_out.data());
  if (rc != 0) return rc;
  // A kernel may change an output descriptor's sizes (none does today): keep the caller's.
  bool copied = false;
  for (const Region& r : regions) {
    if (!r.written) continue;
    device_copy(api, device, reinterpret_cast<void*>(r.lo), r.host, r.hi - r.lo,
                ANVIL_COPY_HOST_TO_DEVICE, stream, what + " (host to device)");
    copied = true;
  }
  // The host copies are freed on return: the stream must have read them.
  if (copied && api.stream_synchronize(device, stream) != 0)
    throw Error("the device failed after a host step", what, "success",
                api.last_error ? api.last_error() : "no message");
  return 0;
}

}  // namespace anvil::runtime
