// for_each_piece: the pieces cover [0, n) exactly once, in consecutive ranges of at least the
// minimum size, no more of them than threads, whatever the split.
#include "lib/core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace {

TEST(ForEachPiece, CoversEveryElementOnceInPiecesOfAtLeastTheMinimum) {
  for (int64_t n : {0, 1, 7, 100, 1000, 4097}) {
    for (int64_t min_piece : {1, 10, 1000, 5000}) {
      for (int threads : {1, 2, 3, 8}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> pieces;
        cb::for_each_piece(n, min_piece, threads, [&](int64_t b, int64_t c) {
          for (int64_t i = b; i < b + c; ++i) hits[static_cast<size_t>(i)]++;
          std::lock_guard<std::mutex> g(mu);
          pieces.emplace_back(b, c);
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << min_piece << " " << i;
        }
        if (n == 0) {
          EXPECT_TRUE(pieces.empty());
          continue;
        }
        EXPECT_LE(static_cast<int64_t>(pieces.size()), threads);
        for (const auto& [b, c] : pieces) {
          if (pieces.size() > 1) {
            EXPECT_GE(c, min_piece) << n << " " << min_piece << " " << threads << " at " << b;
          }
        }
        if (n >= 2 * min_piece && threads > 1) {
          EXPECT_GT(pieces.size(), 1u) << n << " " << min_piece;
        }
      }
    }
  }
  EXPECT_GE(cb::worker_threads(), 1);
  EXPECT_LE(cb::worker_threads(), 16);
}

}  // namespace
