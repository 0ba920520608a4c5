#include "runtime/packed_weights.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <set>

#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/kernels/gemm_packed.h"

namespace anvil::runtime {

void PackedMatrix::Free::operator()(float* p) const { std::free(p); }

PackedMatrix::PackedMatrix(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb) {
  const int64_t floats = std::max<int64_t>(packed_b_floats(k, n), 1);
  bytes_ = (floats * static_cast<int64_t>(sizeof(float)) + 63) / 64 * 64;
  data_.reset(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes_))));
  if (!data_)
    throw Error("out of memory packing a constant matrix", "runtime GEMM", "",
                str(bytes_, " bytes"));
  // Column panels in parallel on the current pool (a model's first run packs every weight:
  // ViT-B/16's 330 MB would otherwise be one thread's work); each range's panels are laid out
  // exactly as in the whole matrix.
  const int64_t panels = (n + kPackedPanel - 1) / kPackedPanel;
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(k * kPackedPanel, 1));
  current_thread_pool().parallel_for(0, panels, grain, [&](int64_t p0, int64_t p1) {
    const int64_t j0 = p0 * kPackedPanel, j1 = std::min(n, p1 * kPackedPanel);
    pack_b(trans_b, k, j1 - j0, trans_b ? b + j0 * ldb : b + j0, ldb, data_.get() + j0 * k);
  });
}

std::shared_ptr<const PackedMatrix> PackedWeightCache::get(bool trans_b, int64_t k, int64_t n,
                                                           const float* b, int64_t ldb) {
  const Key key{b, trans_b, k, n, ldb};
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = packs_.find(key);
    if (it != packs_.end()) return it->second;
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto& slot = packs_[key];
  if (!slot) slot = std::make_shared<const PackedMatrix>(trans_b, k, n, b, ldb);
  return slot;
}

PackedWeightCache::Derived PackedWeightCache::derived(const void* address,
                                                      const std::string& layout,
                                                      const std::function<Derived()>& make) {
  const auto key = std::make_pair(address, layout);
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = derived_.find(key);
    if (it != derived_.end()) return it->second;
  }
  Derived made = make();
  std::unique_lock<std::shared_mutex> lock(mutex_);
  return derived_.emplace(key, std::move(made)).first->second;
}

std::shared_ptr<PackedWeightCache> PackedWeightCache::carried_over(
    const std::vector<void*>& kept) const {
  const std::set<const void*> alive(kept.begin(), kept.end());
  auto next = std::make_shared<PackedWeightCache>();
  std::shared_lock<std::shared_mutex> lock(mutex_);
  for (const auto& [key, pack] : packs_)
    if (alive.count(std::get<0>(key))) next->packs_.emplace(key, pack);
  for (const auto& [key, copy] : derived_)
    if (alive.count(key.first)) next->derived_.emplace(key, copy);
  return next;
}

size_t PackedWeightCache::size() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return packs_.size() + derived_.size();
}

int64_t PackedWeightCache::bytes() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  int64_t total = 0;
  for (const auto& [key, pack] : packs_) total += pack->bytes();
  for (const auto& [key, copy] : derived_) total += copy.bytes;
  return total;
}

}  // namespace anvil::runtime
