// The registry of runtime extern kernels: ops the generated code does not inline (convolution,
// pooling, attention, indexing, ...) and reaches through AnvilRtApi::extern_call by their export
// target name ("aten.convolution.default").
//
// Contract for kernel families (src/runtime/kernels/FAMILY.cpp):
//   - define `void register_FAMILY_externs()` in namespace anvil::runtime, calling register_extern()
//     once per target it implements;
//   - add `X(FAMILY)` to ANVIL_EXTERN_FAMILIES below (an explicit list, not static initialisers:
//     the families register on the first lookup, in one known order).
// An ExternFn returns 0 on success. It reports failure by throwing anvil::Error (the dispatcher
// catches it and records the message for the run) or by returning call.fail("message").
// Output tensors are preallocated by the generated code (sizes/strides/dtype already set); the
// kernel writes their elements. Inputs must not be written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "anvil/anvil_rt.h"
#include "core/device.h"
#include "core/random.h"
#include "core/tensor.h"

/// Kernel families registered by register_builtin_externs(): one X(name) per family file, each
/// defining anvil::runtime::register_<name>_externs(). Kernel authors append to this list.
#define ANVIL_EXTERN_FAMILIES(X)                                                                \
  X(conv) X(pool) X(attention) X(linalg) X(index) X(shape) X(reduce) X(conv_transpose) X(scatter) \
  X(embedding_bag) X(random) X(dynamic) X(fft) X(sort) X(pool_nd) X(sample) X(dist)

namespace anvil::runtime {

class PackedWeightCache;

/// One extern call: the target, its tensor inputs and outputs (AnvilRtTensor descriptors) and
/// its scalar attributes, looked up by ATen argument name ("stride", "padding", "groups").
class ExternCall {
 public:
  ExternCall(const char* target, const AnvilRtTensor* inputs, int32_t n_inputs,
             const AnvilRtScalar* attrs, int32_t n_attrs, AnvilRtTensor* outputs,
             int32_t n_outputs);

  /// The export target name, e.g. "aten.convolution.default".
  const char* target() const { return target_; }
  int32_t num_inputs() const { return n_inputs_; }
  int32_t num_outputs() const { return n_outputs_; }
  int32_t num_attrs() const { return n_attrs_; }

  /// Raw descriptors; throw Error when `i` is out of range.
  const AnvilRtTensor& input(int32_t i) const;
  AnvilRtTensor& output(int32_t i) const;
  /// The attribute at position `i` (in the order the generated code passed them).
  const AnvilRtScalar& attr_at(int32_t i) const;

  /// Input `i` as an anvil Tensor viewing the caller's memory (no copy; do not write to it).
  Tensor input_tensor(int32_t i) const;
  /// Output `i` as an anvil Tensor viewing the preallocated output memory (write results here).
  Tensor output_tensor(int32_t i) const;
  /// DType of input / output `i`.
  DType input_dtype(int32_t i) const;
  DType output_dtype(int32_t i) const;

  /// The attribute called `name`, or null when the call has none.
  const AnvilRtScalar* find_attr(const char* name) const;
  bool has_attr(const char* name) const { return find_attr(name) != nullptr; }
  /// Typed attribute accessors. The one-argument forms throw Error naming the target and the
  /// attribute when it is missing or has another kind; the two-argument forms return `fallback`
  /// when it is missing. attr_float accepts an int attribute; attr_bool reads an int (!= 0);
  /// attr_ints accepts a single int as a one-element list.
  int64_t attr_int(const char* name) const;
  int64_t attr_int(const char* name, int64_t fallback) const;
  double attr_float(const char* name) const;
  double attr_float(const char* name, double fallback) const;
  bool attr_bool(const char* name) const;
  bool attr_bool(const char* name, bool fallback) const;
  std::string attr_string(const char* name) const;
  std::string attr_string(const char* name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const char* name) const;
  std::vector<int64_t> attr_ints(const char* name, const std::vector<int64_t>& fallback) const;

  /// The random generator of the calling Model (randn / rand): the one set by set_generator,
  /// else the process-wide default_generator().
  RandomGenerator& generator() const { return generator_ ? *generator_ : default_generator(); }
  void set_generator(RandomGenerator* g) { generator_ = g; }

  /// The run's cache of derived copies of constants (the Model's constant set; null outside a
  /// Model run): a kernel may keep a copy of an input there only when the call says that input
  /// is an immutable constant (e.g. the convolution's weight_constant attribute).
  PackedWeightCache* packed_weights() const { return packed_weights_; }
  void set_packed_weights(PackedWeightCache* c) { packed_weights_ = c; }

  /// Records `message` as this call's error and returns 1 (so a kernel can `return call.fail(..)`).
  int fail(const std::string& message);
  /// The message recorded by fail(), empty when none.
  const std::string& error() const { return error_; }

 private:
  const char* target_;
  const AnvilRtTensor* inputs_;
  int32_t n_inputs_;
  const AnvilRtScalar* attrs_;
  int32_t n_attrs_;
  AnvilRtTensor* outputs_;
  int32_t n_outputs_;
  std::string error_;
  RandomGenerator* generator_ = nullptr;
  PackedWeightCache* packed_weights_ = nullptr;
};

/// An extern kernel: returns 0 on success (see the contract at the top of this file).
using ExternFn = int (*)(ExternCall& call);

/// Registers `fn` for export target `target` on `device` (replacing an earlier registration).
/// Kernels are keyed by (target, device): a device backend registers its own kernels for the
/// ops its packages reach through the runtime. Thread-safe.
void register_extern(const char* target, ExternFn fn, Device::Type device = Device::Type::kCPU);
/// The kernel registered for (`target`, `device`) (after registering the built-in families), or
/// null.
ExternFn find_extern(const std::string& target, Device::Type device = Device::Type::kCPU);
/// Every target registered for `device`, sorted.
std::vector<std::string> registered_externs(Device::Type device = Device::Type::kCPU);
/// Registers the built-in families listed in ANVIL_EXTERN_FAMILIES, once per process. Called
/// by find_extern / registered_externs and by Model::load; safe to call again.
void register_builtin_externs();

/// A view of an AnvilRtTensor descriptor as an anvil Tensor over the same memory (no copy, no
/// ownership). Throws Error for a bad dtype code or rank. `where` names the caller in messages.
Tensor tensor_from_rt(const AnvilRtTensor& t, const std::string& where);
/// Fills a descriptor for a tensor (rank <= 8) in place; throws Error for a larger rank.
AnvilRtTensor rt_from_tensor(const Tensor& t);

}  // namespace anvil::runtime
