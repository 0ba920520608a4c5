#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>

namespace anvil {

namespace {
/// How long an idle worker (or a waiting caller) polls before blocking.
constexpr std::chrono::microseconds kSpinTime{50};

/// A pause hint for spin loops.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

/// Polls `done` for up to kSpinTime; returns its last value.
template <typename Pred>
bool spin_until(Pred&& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  while (true) {
    for (int i = 0; i < 32; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

thread_local bool t_in_parallel = false;
thread_local ThreadPool* t_current_pool = nullptr;

/// Sets t_in_parallel for a scope and restores the previous value.
struct ParallelFlag {
  bool previous;
  ParallelFlag() : previous(t_in_parallel) { t_in_parallel = true; }
  ~ParallelFlag() { t_in_parallel = previous; }
};
}  // namespace

/// One parallel_for call: its chunks are claimed by an atomic counter.
struct ThreadPool::Job {
  int64_t begin = 0, end = 0, chunk = 1, num_chunks = 0;
  const std::function<void(int64_t, int64_t)>* cpp_fn = nullptr;
  void (*c_fn)(void*, int64_t, int64_t) = nullptr;
  void* ctx = nullptr;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable cv;
  std::exception_ptr error;  // first exception, guarded by mutex
};

ThreadPool::ThreadPool(int num_threads) {
  num_threads_ = num_threads > 0 ? num_threads : default_num_threads();
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::default_num_threads() {
  if (const char* env = std::getenv("ANVIL_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0 && v <= 4096) return static_cast<int>(v);
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

bool ThreadPool::in_parallel_region() { return t_in_parallel; }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(0);
  return pool;
}

void ThreadPool::run_chunks(Job& job) {
  ParallelFlag flag;
  while (true) {
    const int64_t i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.num_chunks) return;
    const int64_t b = job.begin + i * job.chunk;
    const int64_t e = std::min(job.end, b + job.chunk);
    try {
      if (job.cpp_fn)
        (*job.cpp_fn)(b, e);
      else
        job.c_fn(job.ctx, b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.mutex);
      if (!job.error) job.error = std::current_exception();
    }
    if (job.done.fetch_add(1, std::memory_order_acq_rel) + 1 == job.num_chunks) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.cv.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  t_in_parallel = true;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (stop_) return;
    if (!jobs_.empty()) {
      std::shared_ptr<Job> job = jobs_.front();
      if (job->next.load(std::memory_order_relaxed) >= job->num_chunks) {
        jobs_.pop_front();  // fully claimed: the callers finish their own waits
        queued_.fetch_sub(1, std::memory_order_relaxed);
        continue;
      }
      lock.unlock();
      run_chunks(*job);
      lock.lock();
      continue;
    }
    // Nothing queued: spin a little before sleeping.
    lock.unlock();
    const bool work = spin_until([this] { return queued_.load(std::memory_order_relaxed) > 0; });
    lock.lock();
    if (work) continue;
    ++sleepers_;
    cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    --sleepers_;
  }
}

void ThreadPool::parallel_for(int64_t begin, int64_t end, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  const int64_t n = end - begin;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = std::min<int64_t>(num_threads_, (n + grain - 1) / grain);
  if (max_chunks <= 1 || t_in_parallel) {
    fn(begin, end);
    return;
  }
  auto job = std::make_shared<Job>();
  job->begin = begin;
  job->end = end;
  job->chunk = (n + max_chunks - 1) / max_chunks;
  job->num_chunks = (n + job->chunk - 1) / job->chunk;
  job->cpp_fn = &fn;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(job);
    queued_.fetch_add(1, std::memory_order_relaxed);
    wake = sleepers_ > 0;
  }
  if (wake) cv_.notify_all();
  run_chunks(*job);
  // Wait for the chunks other threads claimed: spin a little, then block.
  if (!spin_until([&] { return job->done.load(std::memory_order_acquire) == job->num_chunks; })) {
    std::unique_lock<std::mutex> lock(job->mutex);
    job->cv.wait(lock,
                 [&] { return job->done.load(std::memory_order_acquire) == job->num_chunks; });
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find(jobs_.begin(), jobs_.end(), job);
    if (it != jobs_.end()) {
      jobs_.erase(it);
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  if (job->error) std::rethrow_exception(job->error);
}

void ThreadPool::parallel_for(int64_t begin, int64_t end, int64_t grain,
                              void (*fn)(void* ctx, int64_t b, int64_t e), void* ctx) {
  if (end <= begin) return;
  const int64_t n = end - begin;
  grain = std::max<int64_t>(grain, 1);
  if (t_in_parallel || num_threads_ == 1 || n <= grain) {
    fn(ctx, begin, end);
    return;
  }
  // Route through the std::function form; the wrapper costs one indirect call per chunk.
  const std::function<void(int64_t, int64_t)> wrapped = [fn, ctx](int64_t b, int64_t e) {
    fn(ctx, b, e);
  };
  parallel_for(begin, end, grain, wrapped);
}

ThreadPool& current_thread_pool() {
  return t_current_pool ? *t_current_pool : ThreadPool::global();
}

ScopedThreadPool::ScopedThreadPool(ThreadPool* pool) : previous_(t_current_pool) {
  t_current_pool = pool;
}

ScopedThreadPool::~ScopedThreadPool() { t_current_pool = previous_; }

}  // namespace anvil
