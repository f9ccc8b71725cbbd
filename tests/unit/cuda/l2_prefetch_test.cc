// kernels/cuda l2_prefetch: the plan (how much of each row, which lines, how many blocks) on the
// host, the launcher's argument checks without a GPU, and on a GPU a launch that leaves the
// matrix as it was.
#include "kernels/cuda/l2_prefetch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;

TEST(L2PrefetchPlan, PrefixFitsTheBudgetInWholeLines) {
  // llama-2-7b's output projection in fp16 (4,096 rows of 8 KiB) against half of a 50 MiB L2:
  // 25 MiB / 4,096 rows = 6,400 bytes, 50 lines of 128.
  EXPECT_EQ(kc::l2_prefetch_prefix(4096, 8192, 25 << 20), 50 * 128);
  // A budget above the matrix takes whole rows, the last line included when a row is not a
  // multiple of a line.
  EXPECT_EQ(kc::l2_prefetch_prefix(64, 8192, 1 << 30), 8192);
  EXPECT_EQ(kc::l2_prefetch_prefix(10, 1000, 1 << 20), 1000);
  EXPECT_EQ(kc::l2_prefetch_prefix(10, 1000, 10 * 896), 896);  // 7 of its 8 lines
  // Not one line a row, or nothing to fetch.
  EXPECT_EQ(kc::l2_prefetch_prefix(4096, 8192, 4096 * 127), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(0, 8192, 1 << 20), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(16, 0, 1 << 20), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(16, 8192, 0), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(16, 8192, -5), 0);
}

// Every line of every row's prefix once, none past it.
TEST(L2PrefetchPlan, LinesCoverEachRowsPrefixOnce) {
  for (const auto& [rows, row_bytes, prefix] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {5, 1000, 384}, {3, 1000, 1000}, {7, 256, 128}, {1, 8192, 8192}}) {
    kc::L2PrefetchParams p;
    p.rows = rows;
    p.row_bytes = row_bytes;
    p.prefix_bytes = prefix;
    const int64_t per_row = kc::l2_prefetch_lines_per_row(p);
    EXPECT_EQ(per_row, (prefix + 127) / 128);
    std::set<int64_t> seen;
    for (int64_t i = 0; i < rows * per_row; ++i) {
      const int64_t off = kc::l2_prefetch_offset(row_bytes, per_row, i);
      const int64_t r = off / row_bytes, in_row = off % row_bytes;
      EXPECT_LT(r, rows);
      EXPECT_LT(in_row, prefix) << "line " << i;
      EXPECT_EQ(in_row % 128, 0);
      EXPECT_TRUE(seen.insert(off).second) << "line " << i << " twice";
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), rows * per_row);
  }
  kc::L2PrefetchParams none;
  none.rows = 4;
  none.row_bytes = 512;
  EXPECT_EQ(kc::l2_prefetch_lines_per_row(none), 0);  // prefix 0
}

TEST(L2PrefetchPlan, BlocksCoverTheLinesUpToFourPerMultiprocessor) {
  EXPECT_EQ(kc::l2_prefetch_blocks(1, 132), 1u);
  EXPECT_EQ(kc::l2_prefetch_blocks(256, 132), 1u);
  EXPECT_EQ(kc::l2_prefetch_blocks(257, 132), 2u);
  EXPECT_EQ(kc::l2_prefetch_blocks(4096 * 50, 132), 528u);  // the threads loop
  EXPECT_EQ(kc::l2_prefetch_blocks(0, 132), 1u);
  EXPECT_EQ(kc::l2_prefetch_blocks(1 << 20, 0), 4u);
}

// Checked before anything is launched, so these hold without a GPU.
TEST(L2PrefetchPlan, LauncherRefusesBadArguments) {
  kc::L2PrefetchParams p;
  p.rows = 4;
  p.row_bytes = 512;
  p.prefix_bytes = 256;
  EXPECT_EQ(kc::launch_l2_prefetch(p, 132, nullptr), cudaErrorInvalidValue);  // no data
  int dummy = 0;
  p.data = &dummy;
  p.prefix_bytes = 1024;  // past the row
  EXPECT_EQ(kc::launch_l2_prefetch(p, 132, nullptr), cudaErrorInvalidValue);
  p.prefix_bytes = -1;
  EXPECT_EQ(kc::launch_l2_prefetch(p, 132, nullptr), cudaErrorInvalidValue);
  p.prefix_bytes = 0;  // nothing to fetch: nothing launched
  EXPECT_EQ(kc::launch_l2_prefetch(p, 132, nullptr), cudaSuccess);
  p.data = nullptr;
  EXPECT_EQ(kc::launch_l2_prefetch(p, 132, nullptr), cudaSuccess);
}

// A prefetch writes nothing: the matrix is unchanged, and the stream reports no error.
TEST(L2Prefetch, LaunchLeavesTheMatrixAsItWas) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t rows = 1000, row_bytes = 4104;  // rows not a multiple of a line
  std::vector<uint8_t> host(static_cast<size_t>(rows * row_bytes));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 131 + 7);
  cb::cuda_test::DeviceArray<uint8_t> m(host);
  for (int64_t prefix : {int64_t{128}, int64_t{2048}, row_bytes}) {
    kc::L2PrefetchParams p;
    p.data = m.get();
    p.rows = rows;
    p.row_bytes = row_bytes;
    p.prefix_bytes = prefix;
    ASSERT_EQ(kc::launch_l2_prefetch(p, 4, nullptr), cudaSuccess) << prefix;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << prefix;
  }
  EXPECT_EQ(m.download(), host);
}

}  // namespace
