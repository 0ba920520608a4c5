#include "runtime/externs.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "core/error.h"

namespace anvil::runtime {

#define ANVIL_DECLARE_EXTERN_FAMILY_(name) void register_##name##_externs();
ANVIL_EXTERN_FAMILIES(ANVIL_DECLARE_EXTERN_FAMILY_)
#undef ANVIL_DECLARE_EXTERN_FAMILY_

namespace {

/// The (device, target) -> kernel table.
struct Registry {
  std::shared_mutex mutex;
  std::map<std::pair<Device::Type, std::string>, ExternFn> fns;
};

Registry& registry() {
  static Registry r;
  return r;
}

const char* kind_name(int32_t kind) {
  switch (kind) {
    case 0:
      return "int";
    case 1:
      return "float";
    case 2:
      return "string";
    case 3:
      return "int list";
    default:
      return "unknown";
  }
}

}  // namespace

void register_builtin_externs() {
  static std::once_flag once;
  std::call_once(once, [] {
#define ANVIL_CALL_EXTERN_FAMILY_(name) register_##name##_externs();
    ANVIL_EXTERN_FAMILIES(ANVIL_CALL_EXTERN_FAMILY_)
#undef ANVIL_CALL_EXTERN_FAMILY_
  });
}

void register_extern(const char* target, ExternFn fn, Device::Type device) {
  ANVIL_CHECK(target != nullptr && *target != '\0' && fn != nullptr, "runtime::register_extern",
              "bad registration", "a target name and a kernel", "null or empty");
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  r.fns[{device, target}] = fn;
}

ExternFn find_extern(const std::string& target, Device::Type device) {
  register_builtin_externs();
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.fns.find({device, target});
  return it == r.fns.end() ? nullptr : it->second;
}

std::vector<std::string> registered_externs(Device::Type device) {
  register_builtin_externs();
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [key, fn] : r.fns)
    if (key.first == device) out.push_back(key.second);
  return out;
}

Tensor tensor_from_rt(const AnvilRtTensor& t, const std::string& where) {
  ANVIL_CHECK(t.ndim >= 0 && t.ndim <= 8, where, "bad tensor rank", "0 to 8",
              std::to_string(t.ndim));
  // The runtime's extern kernels are host code.
  ANVIL_CHECK(t.device_type == ANVIL_DEVICE_CPU, where, "extern kernels run on host memory",
              "a cpu tensor", str("device type ", t.device_type, ":", t.device_index));
  const DType dtype = dtype_from_code(t.dtype);
  Shape sizes(t.sizes, t.sizes + t.ndim), strides(t.strides, t.strides + t.ndim);
  // Extent of the memory the view may touch (negative strides are not produced by anvil).
  int64_t last = 0;
  bool empty = false;
  for (int32_t d = 0; d < t.ndim; ++d) {
    ANVIL_CHECK(sizes[d] >= 0, where, str("negative size at dim ", d), ">= 0",
                std::to_string(sizes[d]));
    if (sizes[d] == 0) empty = true;
    if (sizes[d] > 0) last += (sizes[d] - 1) * std::max<int64_t>(strides[d], 0);
  }
  const size_t nbytes = empty ? 0 : static_cast<size_t>(last + 1) * dtype_size(dtype);
  auto storage = Storage::wrap(t.data, nbytes, nullptr);
  return Tensor(std::move(storage), dtype, std::move(sizes), std::move(strides), 0);
}

AnvilRtTensor rt_from_tensor(const Tensor& t) {
  ANVIL_CHECK(t.dim() <= 8, "runtime::rt_from_tensor", "tensor rank too large", "at most 8",
              std::to_string(t.dim()));
  AnvilRtTensor r{};
  r.data = t.defined() ? t.data_ptr() : nullptr;
  r.dtype = static_cast<int32_t>(t.dtype());
  r.ndim = static_cast<int32_t>(t.dim());
  const Device dev = t.defined() ? t.device() : Device::cpu();
  r.device_type = dev.is_cpu() ? ANVIL_DEVICE_CPU : ANVIL_DEVICE_CUDA;
  r.device_index = dev.is_cpu() ? 0 : dev.index;
  for (int64_t d = 0; d < t.dim(); ++d) {
    r.sizes[d] = t.sizes()[d];
    r.strides[d] = t.strides()[d];
  }
  return r;
}

ExternCall::ExternCall(const char* target, const AnvilRtTensor* inputs, int32_t n_inputs,
                       const AnvilRtScalar* attrs, int32_t n_attrs, AnvilRtTensor* outputs,
                       int32_t n_outputs)
    : target_(target ? target : ""),
      inputs_(inputs),
      n_inputs_(inputs ? n_inputs : 0),
      attrs_(attrs),
      n_attrs_(attrs ? n_attrs : 0),
      outputs_(outputs),
      n_outputs_(outputs ? n_outputs : 0) {}

const AnvilRtTensor& ExternCall::input(int32_t i) const {
  ANVIL_CHECK(i >= 0 && i < n_inputs_, target_, "input index out of range", str("< ", n_inputs_),
              std::to_string(i));
  return inputs_[i];
}

AnvilRtTensor& ExternCall::output(int32_t i) const {
  ANVIL_CHECK(i >= 0 && i < n_outputs_, target_, "output index out of range", str("< ", n_outputs_),
              std::to_string(i));
  return outputs_[i];
}

const AnvilRtScalar& ExternCall::attr_at(int32_t i) const {
  ANVIL_CHECK(i >= 0 && i < n_attrs_, target_, "attribute index out of range", str("< ", n_attrs_),
              std::to_string(i));
  return attrs_[i];
}

Tensor ExternCall::input_tensor(int32_t i) const {
  return tensor_from_rt(input(i), str(target_, " input ", i));
}

Tensor ExternCall::output_tensor(int32_t i) const {
  return tensor_from_rt(output(i), str(target_, " output ", i));
}

DType ExternCall::input_dtype(int32_t i) const { return dtype_from_code(input(i).dtype); }
DType ExternCall::output_dtype(int32_t i) const { return dtype_from_code(output(i).dtype); }

const AnvilRtScalar* ExternCall::find_attr(const char* name) const {
  for (int32_t i = 0; i < n_attrs_; ++i)
    if (attrs_[i].name && std::string_view(attrs_[i].name) == name) return &attrs_[i];
  return nullptr;
}

namespace {
const AnvilRtScalar& need(const ExternCall& call, const char* name) {
  const AnvilRtScalar* a = call.find_attr(name);
  ANVIL_CHECK(a != nullptr, call.target(), str("missing attribute '", name, "'"), "the attribute",
              "none");
  return *a;
}
[[noreturn]] void bad_kind(const ExternCall& call, const char* name, const char* want,
                           int32_t kind) {
  throw Error(str("attribute '", name, "' has the wrong kind"), call.target(), want,
              kind_name(kind));
}
}  // namespace

int64_t ExternCall::attr_int(const char* name) const {
  const AnvilRtScalar& a = need(*this, name);
  if (a.kind == 0) return a.i;
  if (a.kind == 3 && a.n_ints == 1 && a.ints) return a.ints[0];
  bad_kind(*this, name, "int", a.kind);
}
int64_t ExternCall::attr_int(const char* name, int64_t fallback) const {
  return has_attr(name) ? attr_int(name) : fallback;
}

double ExternCall::attr_float(const char* name) const {
  const AnvilRtScalar& a = need(*this, name);
  if (a.kind == 1) return a.f;
  if (a.kind == 0) return static_cast<double>(a.i);
  bad_kind(*this, name, "float", a.kind);
}
double ExternCall::attr_float(const char* name, double fallback) const {
  return has_attr(name) ? attr_float(name) : fallback;
}

bool ExternCall::attr_bool(const char* name) const { return attr_int(name) != 0; }
bool ExternCall::attr_bool(const char* name, bool fallback) const {
  return has_attr(name) ? attr_bool(name) : fallback;
}

std::string ExternCall::attr_string(const char* name) const {
  const AnvilRtScalar& a = need(*this, name);
  if (a.kind == 2) return a.s ? a.s : "";
  bad_kind(*this, name, "string", a.kind);
}
std::string ExternCall::attr_string(const char* name, const std::string& fallback) const {
  return has_attr(name) ? attr_string(name) : fallback;
}

std::vector<int64_t> ExternCall::attr_ints(const char* name) const {
  const AnvilRtScalar& a = need(*this, name);
  if (a.kind == 3) {
    ANVIL_CHECK(a.n_ints == 0 || a.ints != nullptr, target_,
                str("attribute '", name, "' has a null list"), "a list", "null");
    return std::vector<int64_t>(a.ints, a.ints + a.n_ints);
  }
  if (a.kind == 0) return {a.i};
  bad_kind(*this, name, "int list", a.kind);
}
std::vector<int64_t> ExternCall::attr_ints(const char* name,
                                           const std::vector<int64_t>& fallback) const {
  return has_attr(name) ? attr_ints(name) : fallback;
}

int ExternCall::fail(const std::string& message) {
  if (error_.empty()) error_ = message.empty() ? "failed" : message;
  return 1;
}

}  // namespace anvil::runtime
