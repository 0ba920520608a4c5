// ThreadPool: the worker threads behind AnvilRtApi::parallel_for and the runtime's kernels.
//
// parallel_for(begin, end, grain, fn) splits [begin, end) into at most num_threads() chunks of at
// least `grain` iterations, runs them on the pool's workers and on the calling thread, and returns
// when every chunk is done. It runs serially when the range is small (one chunk), when the pool
// has one thread, or when called from inside another parallel_for (nested calls never fan out).
// Several threads may call parallel_for on one pool at once; their chunks share the workers.
// Idle workers spin briefly (tens of microseconds) before sleeping, so that the back-to-back
// parallel loops of a model run do not pay a futex wake-up each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace anvil {

/// A fixed set of worker threads executing parallel_for chunks.
class ThreadPool {
 public:
  /// A pool using `num_threads` threads in all (the caller counts as one, so num_threads - 1
  /// workers are started); num_threads <= 0 means default_num_threads().
  explicit ThreadPool(int num_threads = 0);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  /// Threads used by one parallel_for, the caller included.
  int num_threads() const { return num_threads_; }

  /// Runs fn(b, e) over chunks of [begin, end); see the file comment. The first exception thrown
  /// by a chunk is rethrown here after all chunks finished.
  void parallel_for(int64_t begin, int64_t end, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn);
  /// The same with a C callback (the AnvilRtApi form); `fn` must not throw.
  void parallel_for(int64_t begin, int64_t end, int64_t grain,
                    void (*fn)(void* ctx, int64_t b, int64_t e), void* ctx);

  /// The process-wide pool, sized by default_num_threads() on first use.
  static ThreadPool& global();
  /// ANVIL_NUM_THREADS when set to a positive integer, else the hardware thread count.
  static int default_num_threads();
  /// True on a thread currently executing a parallel_for chunk (nested calls run serially).
  static bool in_parallel_region();

 private:
  struct Job;
  void worker_loop();
  void run_chunks(Job& job);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;
  std::atomic<int> queued_{0};  // jobs_.size(), readable without the lock (spinning workers)
  int sleepers_ = 0;            // workers blocked on cv_ (guarded by mutex_)
  bool stop_ = false;
};

/// The pool that parallel_for() below uses on this thread: the one installed by a
/// ScopedThreadPool (the runtime installs a Model's pool around each run), else global().
ThreadPool& current_thread_pool();

/// Installs `pool` as this thread's current_thread_pool() for the scope's lifetime.
class ScopedThreadPool {
 public:
  explicit ScopedThreadPool(ThreadPool* pool);
  ~ScopedThreadPool();
  ScopedThreadPool(const ScopedThreadPool&) = delete;
  ScopedThreadPool& operator=(const ScopedThreadPool&) = delete;

 private:
  ThreadPool* previous_;
};

/// current_thread_pool().parallel_for(...): what kernels should call.
inline void parallel_for(int64_t begin, int64_t end, int64_t grain,
                         const std::function<void(int64_t, int64_t)>& fn) {
  current_thread_pool().parallel_for(begin, end, grain, fn);
}

}  // namespace anvil
