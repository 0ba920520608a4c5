// Helpers of the extern-kernel tests (test_externs_*.cpp): ExternCase builds one call with named
// arguments for both the runtime extern (AnvilRtTensor descriptors + AnvilRtScalar attributes,
// laid out as docs/externs.md says) and the op table's reference kernel (OpRunner), runs both and
// compares. Random tensor makers cover contiguous, non-contiguous and broadcast (stride 0) inputs.
//
//   ExternCase("aten.conv2d.default").tensor("input", x).tensor("weight", w).absent()
//       .ints("stride", {2, 2}).check();
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/op_test_util.h"
#include "runtime/externs.h"
#include "runtime/rt_api.h"

namespace anvil::runtime::test {

using anvil::testing::matches;
using anvil::testing::OpRunner;

/// A contiguous tensor of `sizes` with uniform random values in [lo, hi) (integers for integer
/// dtypes), converted to `dtype`. `seed` makes it reproducible.
inline Tensor rand_tensor(DType dtype, const Shape& sizes, uint32_t seed, double lo = -2.0,
                          double hi = 2.0) {
  std::mt19937 gen(seed);
  std::vector<double> v(static_cast<size_t>(shape_numel(sizes)));
  if (is_integral(dtype, true)) {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo),
                                                static_cast<int64_t>(hi) - 1);
    for (double& x : v) x = static_cast<double>(dist(gen));
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (double& x : v) x = dist(gen);
  }
  return anvil::testing::make_tensor(dtype, sizes, v);
}

/// A non-contiguous tensor of `sizes`: every other element of a tensor twice as wide in the
/// last dim, with the first two dims stored transposed when the rank allows.
inline Tensor rand_strided(DType dtype, const Shape& sizes, uint32_t seed, double lo = -2.0,
                           double hi = 2.0) {
  Shape wide = sizes;
  if (wide.empty()) return rand_tensor(dtype, sizes, seed, lo, hi);
  wide.back() *= 2;
  if (wide.size() >= 2) std::swap(wide[0], wide[1]);
  Tensor t = rand_tensor(dtype, wide, seed, lo, hi);
  if (sizes.size() >= 2) t = t.transpose(0, 1);
  return t.slice(static_cast<int64_t>(sizes.size()) - 1, 0, sizes.back() * 2, 2);
}

/// Runs one extern call and (optionally) the reference kernel with the same arguments.
class ExternCase {
 public:
  explicit ExternCase(std::string target) : target_(std::move(target)), ref_(target_) {}

  /// A tensor argument (reference and extern).
  ExternCase& tensor(const std::string& name, const Tensor& t) {
    ref_.tensor(name, t);
    inputs_.push_back(rt_from_tensor(t));
    keep_.push_back(t);
    return *this;
  }
  /// An optional tensor argument given as None.
  ExternCase& none(const std::string& name) {
    ref_.none(name);
    return absent();
  }
  /// An optional tensor argument the node omits: only the extern sees a "none" descriptor.
  ExternCase& absent() {
    AnvilRtTensor t{};
    t.data = nullptr;
    t.ndim = -1;
    inputs_.push_back(t);
    return *this;
  }
  /// An int attribute only the extern sees (anvil's own, such as fused_relu).
  ExternCase& extern_int(const std::string& name, int64_t v) { return add_int(name, v); }
  /// A Tensor[] argument: expanded in place plus an int attribute with the count.
  ExternCase& tensors(const std::string& name, const std::vector<Tensor>& ts) {
    ref_.tensors(name, ts);
    for (const Tensor& t : ts) {
      inputs_.push_back(rt_from_tensor(t));
      keep_.push_back(t);
    }
    return add_int(name, static_cast<int64_t>(ts.size()));
  }
  /// A Tensor?[] argument (None entries become "none" descriptors).
  ExternCase& opt_tensors(const std::string& name, const std::vector<std::optional<Tensor>>& ts) {
    ref_.opt_tensors(name, ts);
    for (const auto& t : ts) {
      if (t) {
        inputs_.push_back(rt_from_tensor(*t));
        keep_.push_back(*t);
      } else {
        absent();
      }
    }
    return add_int(name, static_cast<int64_t>(ts.size()));
  }
  ExternCase& scalar(const std::string& name, int64_t v) {
    ref_.scalar(name, v);
    return add_int(name, v);
  }
  ExternCase& scalar(const std::string& name, int v) { return scalar(name, int64_t{v}); }
  ExternCase& scalar(const std::string& name, bool v) {
    ref_.scalar(name, v);
    return add_int(name, v ? 1 : 0);
  }
  ExternCase& scalar(const std::string& name, double v) {
    ref_.scalar(name, v);
    AnvilRtScalar& a = add_attr(name, 1);
    a.f = v;
    return *this;
  }
  ExternCase& dtype(const std::string& name, DType v) {
    ref_.dtype(name, v);
    return add_int(name, static_cast<int64_t>(v));
  }
  ExternCase& ints(const std::string& name, const std::vector<int64_t>& v) {
    ref_.ints(name, v);
    lists_.push_back(v);
    AnvilRtScalar& a = add_attr(name, 3);
    a.ints = lists_.back().data();
    a.n_ints = static_cast<int32_t>(lists_.back().size());
    return *this;
  }
  ExternCase& string(const std::string& name, const std::string& v) {
    ref_.string(name, v);
    strings_.push_back(v);
    AnvilRtScalar& a = add_attr(name, 2);
    a.s = strings_.back().c_str();
    return *this;
  }

  /// The reference kernel's result.
  Tensor reference() const { return ref_.run1(); }

  /// Runs the extern into a fresh contiguous output of `sizes` / `dtype` (through find_extern);
  /// throws the kernel's Error, or an Error with call.fail()'s message.
  Tensor run_extern(const Shape& sizes, DType dtype) {
    Tensor out = Tensor::full(sizes, -777.0, dtype);  // a sentinel: every element must be written
    AnvilRtTensor od = rt_from_tensor(out);
    ExternFn fn = find_extern(target_);
    if (!fn) throw Error("no extern kernel", target_);
    ExternCall call(target_.c_str(), inputs_.data(), static_cast<int32_t>(inputs_.size()),
                    attrs_.data(), static_cast<int32_t>(attrs_.size()), &od, 1);
    if (fn(call) != 0) throw Error(call.error(), target_);
    return out;
  }

  /// Runs the extern through AnvilRtApi::extern_call; returns its status and the run's error.
  std::pair<int, std::string> run_api(const Shape& sizes, DType dtype) {
    Tensor out = Tensor::empty(sizes, dtype);
    AnvilRtTensor od = rt_from_tensor(out);
    RunContext ctx;
    const int rc = rt_api()->extern_call(&ctx, target_.c_str(), inputs_.data(),
                                         static_cast<int32_t>(inputs_.size()), attrs_.data(),
                                         static_cast<int32_t>(attrs_.size()), &od, 1);
    return {rc, ctx.error()};
  }

  /// Runs the reference, then the extern into an output shaped like the reference's result, and
  /// compares (ARCHITECTURE.md tolerances). Returns the extern's output.
  Tensor check() {
    const Tensor want = reference();
    const Tensor got = run_extern(want.sizes(), want.dtype());
    EXPECT_TRUE(matches(got, want)) << target_;
    return got;
  }

 private:
  AnvilRtScalar& add_attr(const std::string& name, int32_t kind) {
    names_.push_back(name);
    AnvilRtScalar a{};
    a.name = names_.back().c_str();
    a.kind = kind;
    attrs_.push_back(a);
    return attrs_.back();
  }
  ExternCase& add_int(const std::string& name, int64_t v) {
    add_attr(name, 0).i = v;
    return *this;
  }

  std::string target_;
  OpRunner ref_;
  std::vector<AnvilRtTensor> inputs_;
  std::vector<Tensor> keep_;
  std::vector<AnvilRtScalar> attrs_;
  std::deque<std::string> names_, strings_;
  std::deque<std::vector<int64_t>> lists_;
};

}  // namespace anvil::runtime::test
