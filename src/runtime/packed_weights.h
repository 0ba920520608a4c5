// Packed copies of constant GEMM operands. Generated code calls api->sgemm_const_b for a matrix
// product whose B is an immutable constant of the model; the runtime packs that matrix once into
// the panel layout of runtime/kernels/gemm_packed.h (the first run that needs it pays the packing)
// and reuses it until the constant set changes. The cache belongs to one ConstantSet: an update
// builds a new set whose cache starts with the packs of the constants it kept, so a pointer can
// never name a stale value.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace anvil::runtime {

/// op(B) (k x n) packed in 16-column panels (see pack_b), 64-byte aligned.
class PackedMatrix {
 public:
  PackedMatrix(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb);
  const float* data() const { return data_.get(); }
  /// Bytes the packed copy takes.
  int64_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> data_;
  int64_t bytes_ = 0;
};

/// Thread-safe map from (address, layout) of a constant matrix to its packed copy.
class PackedWeightCache {
 public:
  /// The packed copy of op(B), made on first use.
  std::shared_ptr<const PackedMatrix> get(bool trans_b, int64_t k, int64_t n, const float* b,
                                          int64_t ldb);
  /// A copy of a constant in some other layout (oneDNN's reordered convolution weights): an
  /// opaque object and the bytes it takes.
  struct Derived {
    std::shared_ptr<const void> object;
    int64_t bytes = 0;
  };
  /// The copy of the constant at `address` in `layout` (a string naming the layout and shape
  /// completely), made by `make` on first use. Thread-safe; `make` runs without the lock held
  /// (racing makers: the first stored copy wins).
  Derived derived(const void* address, const std::string& layout,
                  const std::function<Derived()>& make);

  /// A cache holding this one's packs of matrices whose address is in `kept` (the constants a
  /// new constant set shares with this one's set).
  std::shared_ptr<PackedWeightCache> carried_over(const std::vector<void*>& kept) const;
  /// Packed matrices and derived copies held and their bytes (tests, `anvil inspect`-style reporting).
  size_t size() const;
  int64_t bytes() const;

 private:
  using Key = std::tuple<const float*, bool, int64_t, int64_t, int64_t>;  // b, trans, k, n, ld
  mutable std::shared_mutex mutex_;
  std::map<Key, std::shared_ptr<const PackedMatrix>> packs_;
  std::map<std::pair<const void*, std::string>, Derived> derived_;
};

}  // namespace anvil::runtime
