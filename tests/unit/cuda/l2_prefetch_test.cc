// kernels/cuda l2_prefetch: the plan (how much of each row, how many blocks) and the launcher's
// argument checks on the host, without a GPU too, and on a GPU launches that leave the matrix
// as it was.
#include "kernels/cuda/l2_prefetch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;

TEST(L2PrefetchPlan, PrefixFitsTheBudgetInWholeLines) {
  // llama-2-7b's output projection in fp16 (4,096 rows of 8 KiB) against half of a 50 MiB L2:
  // 25 MiB / 4,096 rows = 6,400 bytes, 50 lines of 128.
  EXPECT_EQ(kc::l2_prefetch_prefix(4096, 8192, 25 << 20), 50 * 128);
  // A budget that holds whole rows takes them, whether or not a row is whole lines.
  EXPECT_EQ(kc::l2_prefetch_prefix(64, 8192, 1 << 30), 8192);
  EXPECT_EQ(kc::l2_prefetch_prefix(10, 1008, 1 << 20), 1008);
  EXPECT_EQ(kc::l2_prefetch_prefix(10, 1008, 10 * 1008), 1008);
  EXPECT_EQ(kc::l2_prefetch_prefix(10, 1008, 10 * 1007), 896);  // 7 of its 8 lines
  // Not one line a row, or nothing to fetch.
  EXPECT_EQ(kc::l2_prefetch_prefix(4096, 8192, 4096 * 127), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(4, 112, 4 * 111), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(0, 8192, 1 << 20), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(16, 0, 1 << 20), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(16, 8192, 0), 0);
  EXPECT_EQ(kc::l2_prefetch_prefix(16, 8192, -5), 0);
}

// Every row's prefix when the GEMV's rows are all resident at once, else the leading rows whole.
TEST(L2PrefetchPlan, PrefixesOfEveryRowOrLeadingRowsWhole) {
  int dummy = 0;
  // llama-2-7b's output projection on 132 multiprocessors, 40 warps each: 4,096 rows resident.
  kc::L2PrefetchParams p = kc::l2_prefetch_plan(&dummy, 4096, 8192, 25 << 20, 40 * 132);
  EXPECT_EQ(p.data, &dummy);
  EXPECT_EQ(p.rows, 4096);
  EXPECT_EQ(p.row_bytes, 8192);
  EXPECT_EQ(p.prefix_bytes, 6400);
  // falcon-7b's MLP up projection: 18,176 rows of 4,544 fp16 values; 25 MiB holds 2,884 rows.
  p = kc::l2_prefetch_plan(&dummy, 18176, 9088, 25 << 20, 40 * 132);
  EXPECT_EQ(p.rows, (25 << 20) / 9088);
  EXPECT_EQ(p.prefix_bytes, 9088);
  EXPECT_LE(p.rows * p.prefix_bytes, 25 << 20);
  // Not one row fits: nothing.
  p = kc::l2_prefetch_plan(&dummy, 18176, 9088, 9000, 40 * 132);
  EXPECT_EQ(p.rows * p.prefix_bytes, 0);
  p = kc::l2_prefetch_plan(&dummy, 0, 9088, 1 << 20, 40 * 132);
  EXPECT_EQ(p.rows * p.prefix_bytes, 0);
}

TEST(L2PrefetchPlan, BlocksCoverTheRowsUpToFourPerMultiprocessor) {
  EXPECT_EQ(kc::l2_prefetch_blocks(1, 132), 1u);
  EXPECT_EQ(kc::l2_prefetch_blocks(256, 132), 1u);
  EXPECT_EQ(kc::l2_prefetch_blocks(257, 132), 2u);
  EXPECT_EQ(kc::l2_prefetch_blocks(4096, 132), 16u);
  EXPECT_EQ(kc::l2_prefetch_blocks(1 << 20, 132), 528u);  // the threads loop
  EXPECT_EQ(kc::l2_prefetch_blocks(0, 132), 1u);
  EXPECT_EQ(kc::l2_prefetch_blocks(1 << 20, 0), 4u);
}

// Checked before anything is launched, so these hold without a GPU.
TEST(L2PrefetchPlan, LauncherRefusesWhatABulkPrefetchCannotTake) {
  alignas(16) static char buf[64] = {};
  kc::L2PrefetchParams p;
  p.data = buf;
  p.rows = 4;
  p.row_bytes = 512;
  p.prefix_bytes = 256;
  EXPECT_TRUE(kc::l2_prefetch_applies(p));
  const auto with = [&](auto&& change) {
    kc::L2PrefetchParams q = p;
    change(q);
    return kc::l2_prefetch_applies(q);
  };
  EXPECT_FALSE(with([](kc::L2PrefetchParams& q) { q.data = nullptr; }));
  EXPECT_FALSE(with([](kc::L2PrefetchParams& q) { q.data = buf + 8; }));       // not 16-aligned
  EXPECT_FALSE(with([](kc::L2PrefetchParams& q) { q.prefix_bytes = 1024; }));  // past the row
  EXPECT_FALSE(with([](kc::L2PrefetchParams& q) { q.prefix_bytes = 200; }));   // not 16s
  EXPECT_FALSE(with([](kc::L2PrefetchParams& q) { q.row_bytes = 520; }));      // not 16s
  EXPECT_FALSE(with([](kc::L2PrefetchParams& q) { q.prefix_bytes = -16; }));
  EXPECT_FALSE(with([](kc::L2PrefetchParams& q) { q.rows = -1; }));
  EXPECT_FALSE(with([](kc::L2PrefetchParams& q) {  // past a bulk prefetch's 32-bit size
    q.row_bytes = int64_t{1} << 33;
    q.prefix_bytes = int64_t{1} << 32;
  }));
  // Nothing to fetch: taken without data, and nothing is launched.
  EXPECT_TRUE(with([](kc::L2PrefetchParams& q) {
    q.data = nullptr;
    q.prefix_bytes = 0;
  }));
  EXPECT_TRUE(with([](kc::L2PrefetchParams& q) {
    q.data = nullptr;
    q.rows = 0;
  }));
  kc::L2PrefetchParams bad = p;
  bad.data = buf + 8;
  EXPECT_EQ(kc::launch_l2_prefetch(bad, 132, nullptr), cudaErrorInvalidValue);
  kc::L2PrefetchParams none = p;
  none.prefix_bytes = 0;
  EXPECT_EQ(kc::launch_l2_prefetch(none, 132, nullptr), cudaSuccess);
}

// A prefetch writes nothing: the matrix is unchanged, and the launches report no error.
TEST(L2Prefetch, LaunchLeavesTheMatrixAsItWas) {
  SKIP_WITHOUT_GPU();
  constexpr int64_t rows = 1000, row_bytes = 4112;  // rows not a multiple of a line
  std::vector<uint8_t> host(static_cast<size_t>(rows * row_bytes));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 131 + 7);
  cb::cuda_test::DeviceArray<uint8_t> m(host);
  for (int64_t prefix : {int64_t{128}, int64_t{2048}, row_bytes}) {
    kc::L2PrefetchParams p;
    p.data = m.get();
    p.rows = rows;
    p.row_bytes = row_bytes;
    p.prefix_bytes = prefix;
    ASSERT_EQ(kc::launch_l2_prefetch(p, 1, nullptr), cudaSuccess) << prefix;  // threads loop
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << prefix;
  }
  EXPECT_EQ(m.download(), host);
}

}  // namespace
