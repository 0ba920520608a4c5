// What the runtime's oneDNN users share (runtime/gemm_onednn.cpp, runtime/kernels/conv_onednn.cpp):
// the one CPU engine, the OpenMP thread count held for a scope, and a process-wide primitive
// cache. Include only where ANVIL_HAVE_ONEDNN is defined.
#pragma once

#include <omp.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

namespace anvil::runtime::onednn {

/// The process's CPU engine.
inline dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

/// OpenMP threads of this thread's parallel regions for the scope (restored after).
class OmpThreads {
 public:
  explicit OmpThreads(int n) : previous_(omp_get_max_threads()) {
    if (n != previous_) omp_set_num_threads(n);
  }
  ~OmpThreads() {
    if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int previous_;
};

/// Primitives by problem key, made on first use (creation takes tens to hundreds of
/// microseconds, outside the lock; a racing creator's copy wins). Shapes that keep changing:
/// past 4096 entries it starts over.
template <class Key, class Prim, class Hash>
class PrimitiveCache {
 public:
  template <class Make>
  std::shared_ptr<const Prim> get(const Key& key, Make make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = prims_.find(key);
      if (it != prims_.end()) return it->second;
    }
    auto made = std::make_shared<const Prim>(make());
    std::lock_guard<std::mutex> lock(mutex_);
    if (prims_.size() >= 4096) prims_.clear();
    return prims_.emplace(key, made).first->second;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return prims_.size();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<Key, std::shared_ptr<const Prim>, Hash> prims_;
};

}  // namespace anvil::runtime::onednn
