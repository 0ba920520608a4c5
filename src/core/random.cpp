#include "core/random.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace anvil {

namespace {

constexpr double kPi = 3.14159265358979323846;

/// U[0, 1) from a 32-bit draw with 24 significant bits (ATen's uniform_real for float).
inline float uniform_f32(uint32_t x) {
  return static_cast<float>(x & ((1u << 24) - 1)) * (1.0f / static_cast<float>(1u << 24));
}

/// U[0, 1) from a 64-bit draw with 53 significant bits (ATen's uniform_real for double).
inline double uniform_f64(uint64_t x) {
  return static_cast<double>(x & ((uint64_t{1} << 53) - 1)) *
         (1.0 / static_cast<double>(uint64_t{1} << 53));
}

/// ATen's normal_fill_16 for float: 8 Box-Muller pairs (j, j + 8) over uniforms in data[0..16).
void normal_fill_16(float* data, float mean, float std) {
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1 - data[j];  // [0, 1) -> (0, 1] for log
    const float u2 = data[j + 8];
    const float radius = std::sqrt(-2 * std::log(u1));
    const float theta = static_cast<float>(2.0f * kPi * u2);
    data[j] = radius * std::cos(theta) * std + mean;
    data[j + 8] = radius * std::sin(theta) * std + mean;
  }
}

/// ATen's normal_fill_16 for double.
void normal_fill_16(double* data, double mean, double std) {
  for (int j = 0; j < 8; ++j) {
    const double u1 = 1 - data[j];
    const double u2 = data[j + 8];
    const double radius = std::sqrt(-2 * std::log(u1));
    const double theta = 2.0 * kPi * u2;
    data[j] = radius * std::cos(theta) * std + mean;
    data[j + 8] = radius * std::sin(theta) * std + mean;
  }
}

/// Checks that `t` is a floating tensor the generator can fill.
void check_floating(const Tensor& t, const char* where) {
  ANVIL_CHECK(t.defined(), where, "no tensor to fill", "a tensor", "undefined");
  const DType d = t.dtype();
  ANVIL_CHECK(d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 ||
                  d == DType::kBFloat16,
              where, "random sampling needs a floating dtype", "f32, f64, f16 or bf16",
              dtype_name(d));
}

}  // namespace

void RandomGenerator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  engine_.seed(static_cast<uint32_t>(seed & 0xffffffffu));
  next_double_normal_.reset();
}

uint64_t RandomGenerator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

uint64_t RandomGenerator::random64() {
  const uint64_t hi = engine_();
  const uint64_t lo = engine_();
  return (hi << 32) | lo;
}

double RandomGenerator::scalar_normal(double mean, double std) {
  if (next_double_normal_) {
    const double r = *next_double_normal_;
    next_double_normal_.reset();
    return r * std + mean;
  }
  const double u1 = uniform_f64(random64());
  const double u2 = uniform_f64(random64());
  const double r = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * kPi * u1;
  next_double_normal_ = r * std::sin(theta);
  return r * std::cos(theta) * std + mean;
}

void RandomGenerator::normal_f32(float* data, int64_t n, float mean, float std) {
  if (n < 16) {
    for (int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(scalar_normal(mean, std));
    return;
  }
  for (int64_t i = 0; i < n; ++i) data[i] = uniform_f32(random32());
  for (int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16(data + i, mean, std);
  if (n % 16 != 0) {
    float* tail = data + n - 16;  // the last 16 values are drawn and transformed again
    for (int i = 0; i < 16; ++i) tail[i] = uniform_f32(random32());
    normal_fill_16(tail, mean, std);
  }
}

void RandomGenerator::normal_(const Tensor& t, double mean, double std) {
  check_floating(t, "RandomGenerator::normal_");
  ANVIL_CHECK(std >= 0.0, "RandomGenerator::normal_", "normal needs a non-negative std",
              "std >= 0", std::to_string(std));
  const int64_t n = t.numel();
  if (n == 0) return;
  const bool direct = t.is_contiguous() && t.storage_offset() >= 0;
  Tensor out = direct && (t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat64)
                   ? t
                   : Tensor::empty(t.sizes(), t.dtype() == DType::kFloat64 ? DType::kFloat64
                                                                            : DType::kFloat32);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (out.dtype() == DType::kFloat32) {
      normal_f32(out.data<float>(), n, static_cast<float>(mean), static_cast<float>(std));
    } else {
      double* data = out.data<double>();
      if (n < 16) {
        for (int64_t i = 0; i < n; ++i) data[i] = scalar_normal(mean, std);
      } else {
        for (int64_t i = 0; i < n; ++i) data[i] = uniform_f64(random64());
        for (int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16(data + i, mean, std);
        if (n % 16 != 0) {
          double* tail = data + n - 16;
          for (int i = 0; i < 16; ++i) tail[i] = uniform_f64(random64());
          normal_fill_16(tail, mean, std);
        }
      }
    }
  }
  if (out.data_ptr() != t.data_ptr() || out.dtype() != t.dtype()) Tensor(t).copy_from(out);
}

void RandomGenerator::uniform_(const Tensor& t, double from, double to) {
  check_floating(t, "RandomGenerator::uniform_");
  ANVIL_CHECK(from <= to, "RandomGenerator::uniform_", "uniform needs from <= to",
              "from <= to", std::to_string(from) + " > " + std::to_string(to));
  const int64_t n = t.numel();
  if (n == 0) return;
  const DType d = t.dtype();
  Tensor out = t.is_contiguous() ? t : Tensor::empty(t.sizes(), d);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (d == DType::kFloat64) {
      double* data = out.data<double>();
      for (int64_t i = 0; i < n; ++i) data[i] = uniform_f64(random64()) * (to - from) + from;
    } else if (d == DType::kFloat32) {
      float* data = out.data<float>();
      const float f = static_cast<float>(from), w = static_cast<float>(to) - f;
      for (int64_t i = 0; i < n; ++i) data[i] = uniform_f32(random32()) * w + f;
    } else {
      // f16 (11 digits) / bf16 (8 digits): ATen masks the draw to the type's precision.
      const int digits = d == DType::kFloat16 ? 11 : 8;
      const float scale = 1.0f / static_cast<float>(1u << digits);
      const float f = static_cast<float>(from), w = static_cast<float>(to) - f;
      std::vector<float> vals(static_cast<size_t>(n));
      for (auto& v : vals)
        v = static_cast<float>(random32() & ((1u << digits) - 1)) * scale * w + f;
      Tensor tmp = Tensor::from_vector(vals, t.sizes());
      out.copy_from(tmp);
    }
  }
  if (out.data_ptr() != t.data_ptr()) Tensor(t).copy_from(out);
}

void RandomGenerator::randperm_(const Tensor& t) {
  ANVIL_CHECK(t.dim() == 1, "RandomGenerator::randperm_", "randperm fills a 1-D tensor", "1-D",
              t.type_str());
  const int64_t n = t.numel();
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t i = 0; i + 1 < n; ++i) {
      const int64_t j = i + static_cast<int64_t>(random64() % static_cast<uint64_t>(n - i));
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
    }
  }
  Tensor(t).copy_from(Tensor::from_vector(perm, {n}).to(t.dtype()));
}

RandomGenerator& default_generator() {
  static RandomGenerator gen(seed_from_env(0));
  return gen;
}

uint64_t seed_from_env(uint64_t fallback) {
  const char* s = std::getenv("ANVIL_SEED");
  if (!s || !*s) return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  ANVIL_CHECK(end && *end == '\0' && errno == 0 && s[0] != '-', "seed_from_env",
              "ANVIL_SEED is not a seed", "a non-negative integer", std::string(s));
  return static_cast<uint64_t>(v);
}

}  // namespace anvil
