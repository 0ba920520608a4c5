// anvil.h — anvil's public C++ API for programs that run compiled packages: load a .anvil
// package, read its input and output specs, run it on DLPack tensors, update and swap its
// constants. Header-only, over the C ABI of anvil_c.h (the one interface libanvil_rt exports),
// so a program built against an installed anvil needs this folder and libanvil_rt only:
//
//   find_package(anvil REQUIRED)             # or: pkg-config --cflags --libs anvil
//   target_link_libraries(app PRIVATE anvil::rt)
//
//   anvil::api::Model m = anvil::api::Model::load("model.anvil");
//   std::vector<float> x(8 * 256, 1.0f);
//   std::vector<anvil::api::Tensor> out = m.run({anvil::api::TensorView::of(x.data(), {8, 256})});
//   const float* y = out[0].data<float>();
//
// Errors of the runtime (a bad input names the input, the dim, the expected and the actual
// value) are thrown as anvil::api::Error carrying anvil's message. Compiling a .pt2 is the CLI's
// job (`anvil compile`); see docs/usage.md.
#pragma once

#include <anvil/anvil_c.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace anvil::api {

/// An error reported by the anvil runtime; what() is anvil's message.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
/// Throws Error with the message of a failed call (`err` from the call, else the thread's last).
inline void check(int rc, char* err) {
  if (rc == 0) return;
  std::string message = err ? err : anvil_last_error();
  anvil_free(err);
  throw Error(message);
}
template <typename>
inline constexpr bool kNoDtype = false;
}  // namespace detail

/// The DLPack dtype of a C++ element type: bool, the floating types, the integer types.
template <typename T>
DLDataType dtype_of() {
  constexpr uint8_t bits = static_cast<uint8_t>(8 * sizeof(T));
  if constexpr (std::is_same_v<T, bool>)
    return {6 /* kDLBool */, 8, 1};
  else if constexpr (std::is_floating_point_v<T>)
    return {static_cast<uint8_t>(kDLFloat), bits, 1};
  else if constexpr (std::is_integral_v<T>)
    return {static_cast<uint8_t>(std::is_signed_v<T> ? kDLInt : kDLUInt), bits, 1};
  else
    static_assert(detail::kNoDtype<T>, "anvil::api::dtype_of: not an arithmetic type");
}

/// Caller-owned memory passed as an input or a constant value: borrowed for the call only.
/// Empty strides mean compact row-major; strides are in elements, as DLPack's.
struct TensorView {
  void* data = nullptr;
  DLDataType dtype{kDLFloat, 32, 1};
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLDevice device{kDLCPU, 0};

  /// A compact host tensor of `shape` over `data` (element type T).
  template <typename T>
  static TensorView of(T* data, std::vector<int64_t> shape) {
    TensorView v;
    v.data = const_cast<void*>(static_cast<const void*>(data));
    v.dtype = dtype_of<std::remove_const_t<T>>();
    v.shape = std::move(shape);
    return v;
  }
};

/// A model output: owns its DLPack tensor and calls its deleter when destroyed.
class Tensor {
 public:
  explicit Tensor(DLManagedTensor* t) : t_(t) {}
  Tensor(Tensor&& o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) reset(std::exchange(o.t_, nullptr));
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() { reset(nullptr); }

  const DLTensor& dl() const { return t_->dl_tensor; }
  DLDataType dtype() const { return dl().dtype; }
  std::vector<int64_t> shape() const { return {dl().shape, dl().shape + dl().ndim}; }
  int64_t numel() const {
    int64_t n = 1;
    for (int32_t d = 0; d < dl().ndim; ++d) n *= dl().shape[d];
    return n;
  }
  /// The elements as T (outputs are compact row-major); throws Error when T is not the dtype.
  template <typename T>
  const T* data() const {
    const DLDataType want = dtype_of<T>();
    if (want.code != dtype().code || want.bits != dtype().bits)
      throw Error("anvil::api::Tensor::data: element type (DLPack code " +
                  std::to_string(want.code) + ", " + std::to_string(want.bits) +
                  " bits) does not match the tensor's dtype (code " + std::to_string(dtype().code) +
                  ", " + std::to_string(dtype().bits) + " bits)");
    return reinterpret_cast<const T*>(static_cast<const char*>(dl().data) + dl().byte_offset);
  }
  /// Hands the DLPack tensor to the caller (who then calls its deleter).
  DLManagedTensor* release() { return std::exchange(t_, nullptr); }

 private:
  void reset(DLManagedTensor* t) {
    if (t_ && t_->deleter) t_->deleter(t_);
    t_ = t;
  }
  DLManagedTensor* t_;
};

/// One input or output of a model: sizes as strings ("8", "s77", "s77 + 1") with each dim's range.
struct TensorSpec {
  std::string name;
  DLDataType dtype{};
  std::vector<std::string> sizes;
  std::vector<int64_t> min_sizes, max_sizes;  // max is INT64_MAX when unbounded
};

/// Options of Model::load.
struct LoadOptions {
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  int num_runners = 1;         // concurrent run() calls served
  int num_threads = 0;         // threads per run; 0: ANVIL_NUM_THREADS or all
};

/// A loaded package. run() may be called from several threads at once (up to num_runners run
/// together); loading, constant updates and destruction are not concurrent with runs.
class Model {
 public:
  static Model load(const std::string& path, const LoadOptions& options = {}) {
    anvil_load_options_t o{};
    o.device = options.device.c_str();
    o.num_runners = options.num_runners;
    o.num_threads = options.num_threads;
    anvil_model_t* m = nullptr;
    char* err = nullptr;
    detail::check(anvil_model_load(path.c_str(), &o, &m, &err), err);
    return Model(m);
  }
  Model(Model&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  Model& operator=(Model&& o) noexcept {
    if (this != &o) anvil_model_free(std::exchange(m_, std::exchange(o.m_, nullptr)));
    return *this;
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model() { anvil_model_free(m_); }

  std::vector<TensorSpec> input_specs() const { return specs(true); }
  std::vector<TensorSpec> output_specs() const { return specs(false); }

  /// Runs the model on `inputs` (input-spec order); outputs are complete when it returns.
  std::vector<Tensor> run(const std::vector<TensorView>& inputs) const {
    std::vector<DLManagedTensor> managed(inputs.size());
    std::vector<DLManagedTensor*> ptrs(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) ptrs[i] = borrow(inputs[i], managed[i]);
    DLManagedTensor** outs = nullptr;
    size_t n = 0;
    char* err = nullptr;
    detail::check(anvil_model_run(m_, ptrs.data(), ptrs.size(), &outs, &n, &err), err);
    std::vector<Tensor> result;
    result.reserve(n);
    for (size_t i = 0; i < n; ++i) result.emplace_back(outs[i]);
    anvil_free(outs);
    return result;
  }

  /// The NaN / Inf check of later runs (off by default): each run scans what every step wrote
  /// and throws at the first NaN or infinity, naming the step, the buffer, the element and value.
  void set_check_nan_inf(bool on) const {
    char* err = nullptr;
    detail::check(anvil_model_set_check_nan_inf(m_, on ? 1 : 0, &err), err);
  }

  /// Internal constant names in manifest order, and their original (module path) names.
  std::vector<std::string> constant_names() const { return constants(false); }
  std::vector<std::string> constant_original_names() const { return constants(true); }

  /// Replaces constants by name (copied; dtype and shape must match). inactive: staged until
  /// swap_constants(). require_full: every immutable constant must be given. All or nothing.
  void update_constants(const std::vector<std::pair<std::string, TensorView>>& values,
                        bool inactive = false, bool require_full = false) {
    std::vector<const char*> names(values.size());
    std::vector<DLManagedTensor> managed(values.size());
    std::vector<DLManagedTensor*> ptrs(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      names[i] = values[i].first.c_str();
      ptrs[i] = borrow(values[i].second, managed[i]);
    }
    char* err = nullptr;
    detail::check(anvil_model_update_constants(m_, names.data(), ptrs.data(), values.size(),
                                               inactive, require_full, &err),
                  err);
  }
  /// Makes the staged constants active, atomically with respect to runs.
  void swap_constants() {
    char* err = nullptr;
    detail::check(anvil_model_swap_constants(m_, &err), err);
  }

  /// The C handle, for calls this header does not wrap.
  anvil_model_t* handle() const { return m_; }

 private:
  explicit Model(anvil_model_t* m) : m_(m) {}

  static DLManagedTensor* borrow(const TensorView& v, DLManagedTensor& m) {
    m = DLManagedTensor{};
    m.dl_tensor.data = v.data;
    m.dl_tensor.device = v.device;
    m.dl_tensor.ndim = static_cast<int32_t>(v.shape.size());
    m.dl_tensor.dtype = v.dtype;
    m.dl_tensor.shape = const_cast<int64_t*>(v.shape.data());
    if (!v.strides.empty() && v.strides.size() != v.shape.size())
      throw Error("anvil::api::TensorView: " + std::to_string(v.strides.size()) + " strides for " +
                  std::to_string(v.shape.size()) + " dims");
    m.dl_tensor.strides = v.strides.empty() ? nullptr : const_cast<int64_t*>(v.strides.data());
    return &m;
  }

  std::vector<TensorSpec> specs(bool inputs) const {
    const size_t n = inputs ? anvil_model_num_inputs(m_) : anvil_model_num_outputs(m_);
    std::vector<TensorSpec> out(n);
    for (size_t i = 0; i < n; ++i) {
      anvil_tensor_spec_t s{};
      char* err = nullptr;
      detail::check(inputs ? anvil_model_input_spec(m_, i, &s, &err)
                           : anvil_model_output_spec(m_, i, &s, &err),
                    err);
      out[i].name = s.name;
      out[i].dtype = s.dtype;
      for (int32_t d = 0; d < s.ndim; ++d) {
        out[i].sizes.emplace_back(s.sizes[d]);
        out[i].min_sizes.push_back(s.min_sizes[d]);
        out[i].max_sizes.push_back(s.max_sizes[d]);
      }
    }
    return out;
  }

  std::vector<std::string> constants(bool original) const {
    std::vector<std::string> out;
    for (size_t i = 0; i < anvil_model_num_constants(m_); ++i) {
      const char* s =
          original ? anvil_model_constant_original_name(m_, i) : anvil_model_constant_name(m_, i);
      out.emplace_back(s ? s : "");
    }
    return out;
  }

  anvil_model_t* m_;
};

/// The C API version of the loaded libanvil_rt (ANVIL_C_API_VERSION when they match).
inline int c_api_version() { return anvil_c_api_version(); }

}  // namespace anvil::api
