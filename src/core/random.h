// Random number generation with PyTorch CPU's algorithms, so that a model exported with
// torch.randn / torch.rand gives the values PyTorch gives after torch.manual_seed(seed).
//
// The engine is mt19937 (seeded like std::mt19937 / at::mt19937 with the low 32 bits of the
// seed). Sampling follows ATen's CPU kernels:
//   - uniform (rand): one 32-bit draw per f32/f16/bf16 element, (x & (2^digits - 1)) * 2^-digits
//     (digits 24 / 11 / 8), or one 64-bit draw (two 32-bit draws, first one high) per f64 element
//     with 53 digits; then x * (to - from) + from.
//   - normal (randn), f32/f64 with numel >= 16 ("normal_fill"): every element gets a uniform
//     sample first; then each chunk of 16 becomes 8 Box-Muller pairs (element j with j + 8); when
//     numel % 16 != 0 the last 16 elements are drawn again and transformed again.
//   - normal with numel < 16 (and f16/bf16 at any size): the scalar path (normal_distribution
//     <double>: two 64-bit uniforms, a cached second sample) one element at a time.
// f16/bf16 results are computed in f32 and rounded (the distribution is right; the bits may
// differ from PyTorch's half-precision arithmetic).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <random>

#include "core/tensor.h"

namespace anvil {

/// A seeded generator with PyTorch CPU's sampling (see the top of this file). All methods are
/// thread-safe: each fill holds the generator's lock, so concurrent users draw disjoint parts of
/// one stream (in some order).
class RandomGenerator {
 public:
  explicit RandomGenerator(uint64_t seed = 0) { manual_seed(seed); }

  /// Restarts the stream, as torch.manual_seed(seed) does (also clears the cached normal).
  void manual_seed(uint64_t seed);
  /// The seed of the last manual_seed.
  uint64_t seed() const;

  /// Fills `t` (floating dtype, any layout) with N(mean, std) samples like Tensor.normal_.
  void normal_(const Tensor& t, double mean = 0.0, double std = 1.0);
  /// Fills `t` (floating dtype, any layout) with U[from, to) samples like Tensor.uniform_.
  void uniform_(const Tensor& t, double from = 0.0, double to = 1.0);
  /// Fills 1-D `t` (a real dtype that holds 0 .. numel-1 exactly) with a random permutation of
  /// 0 .. numel-1 (aten.randperm): Fisher-Yates, element i swapped with i + (64-bit draw mod
  /// (n - i)). Anvil's own stream: the values are not PyTorch's.
  void randperm_(const Tensor& t);

 private:
  uint32_t random32() { return engine_(); }
  uint64_t random64();
  double scalar_normal(double mean, double std);
  void normal_f32(float* data, int64_t n, float mean, float std);

  mutable std::mutex mutex_;
  std::mt19937 engine_;
  uint64_t seed_ = 0;
  std::optional<double> next_double_normal_;
};

/// The process-wide generator the reference kernels (interpreter, constant folding never: random
/// ops are not folded) use; seeded with seed_from_env(0) on first use.
RandomGenerator& default_generator();

/// The seed named by environment variable ANVIL_SEED (a non-negative integer), or `fallback`
/// when it is unset or empty. Throws Error for a value that is not an integer.
uint64_t seed_from_env(uint64_t fallback = 0);

}  // namespace anvil
