#pragma once
/// A fixed pool of worker threads (the store's I/O threads, standing in for copy
/// engines on the CPU backend).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cb::store {

/// Runs queued tasks on `n` threads; the destructor finishes queued tasks, then joins.
class ThreadPool {
 public:
  /// Starts `n` (>= 1) workers.
  explicit ThreadPool(size_t n);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Queues `task`.
  void post(std::function<void()> task);
  /// Blocks until the queue is empty and no task is running.
  void wait_idle();
  /// As wait_idle, but gives up at `deadline`; true when the pool is idle.
  bool wait_idle_until(std::chrono::steady_clock::time_point deadline);
  /// Number of workers.
  size_t size() const { return workers_.size(); }

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::function<void()>> queue_;
  size_t running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace cb::store
