#pragma once
/// Splitting element-wise work over the machine's cores.

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace cb {

/// Cores to use for work the caller splits: hardware_concurrency, at least 1, at most 16.
inline int worker_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

/// Calls fn(begin, count) for consecutive pieces covering [0, n), each of at least `min_piece`
/// elements (one piece when n < 2 * min_piece), at most `threads` pieces, each on its own
/// thread (the caller runs the first, and any a thread could not be started for). Returns when
/// all are done. `fn` must not throw, and pieces must write disjoint data.
template <typename Fn>
void for_each_piece(int64_t n, int64_t min_piece, int threads, Fn&& fn) {
  if (n <= 0) return;
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(threads, n / std::max<int64_t>(1, min_piece)));
  if (parts == 1) {
    fn(int64_t{0}, n);
    return;
  }
  const auto piece = [&](int64_t p) {
    const int64_t b = n * p / parts;
    fn(b, n * (p + 1) / parts - b);
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(parts - 1));  // no reallocation while threads run
  for (int64_t p = 1; p < parts; ++p) {
    try {
      pool.emplace_back(piece, p);
    } catch (const std::system_error&) {  // no thread to be had: this one does that piece
      piece(p);
    }
  }
  piece(0);
  for (std::thread& t : pool) t.join();
}

}  // namespace cb
