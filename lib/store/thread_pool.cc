#include "lib/store/thread_pool.h"

namespace cb::store {

ThreadPool::ThreadPool(size_t n) {
  if (n == 0) n = 1;
  for (size_t i = 0; i < n; ++i) workers_.emplace_back([this] { run(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> g(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::wait_idle() {
  std::unique_lock<std::mutex> g(mu_);
  idle_cv_.wait(g, [this] { return queue_.empty() && running_ == 0; });
}

bool ThreadPool::wait_idle_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> g(mu_);
  return idle_cv_.wait_until(g, deadline, [this] { return queue_.empty() && running_ == 0; });
}

void ThreadPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    task();
    {
      std::lock_guard<std::mutex> g(mu_);
      --running_;
      if (queue_.empty() && running_ == 0) idle_cv_.notify_all();
    }
  }
}

}  // namespace cb::store
