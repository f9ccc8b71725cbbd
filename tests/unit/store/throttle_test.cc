// Emulated tier bandwidth (BandwidthLimiter) and loads gated by a read buffer
// (AttentionStore::load's start_layers, LoadHandle::start_layers).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "lib/store/attention_store.h"
#include "lib/store/bandwidth_limiter.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using Clock_ = std::chrono::steady_clock;

double seconds_since(Clock_::time_point t0) {
  return std::chrono::duration<double>(Clock_::now() - t0).count();
}

TEST(BandwidthLimiter, ConcurrentTransfersShareThePipe) {
  BandwidthLimiter lim(0.01);  // 10 MB/s: 1 MB takes 100 ms
  const auto t0 = Clock_::now();
  const auto transfer = [&] { std::this_thread::sleep_until(lim.reserve(1000000, Clock_::now())); };
  std::thread a(transfer), b(transfer);
  a.join();
  b.join();
  EXPECT_GE(seconds_since(t0), 0.195);  // two transfers queue: >= 200 ms, not 100 ms
  BandwidthLimiter unlimited(0);
  const auto t1 = Clock_::now();
  EXPECT_EQ(unlimited.reserve(1ull << 40, t1), t1);
}

// The pipe is served in the order of reservation: a transfer that reserved first ends first,
// however long it takes to move its bytes.
TEST(BandwidthLimiter, IntervalsFollowTheOrderOfReservation) {
  BandwidthLimiter lim(0.01);  // 1 MB: 100 ms
  const auto t0 = Clock_::now();
  const auto first = lim.reserve(1000000, t0);
  const auto second = lim.reserve(500000, t0);
  EXPECT_EQ(first - t0, std::chrono::milliseconds(100));
  EXPECT_EQ(second - first, std::chrono::milliseconds(50));
  // A transfer that starts after the pipe went idle begins its interval when it starts.
  const auto later = second + std::chrono::seconds(1);
  EXPECT_EQ(lim.reserve(1000000, later) - later, std::chrono::milliseconds(100));
}

StoreConfig cfg(double read_gbps) {
  StoreConfig c;
  c.dram_bytes = 8 << 20;
  c.chunk_bytes = 16 << 10;
  c.io_threads = 2;
  c.read_gbps[static_cast<int>(TierKind::Dram)] = read_gbps;
  return c;
}

const EntryShape kShape{4, 256};

TEST(StoreThrottle, SlowedTierLoadTakesBytesOverBandwidth) {
  AttentionStore st(cfg(0.002));                 // 2 MB/s
  const auto pos = testing::iota_positions(64);  // one 16 KiB chunk per layer and K/V
  ASSERT_TRUE(testing::save_entry(st, 1, 3, kShape, pos));
  const auto t0 = Clock_::now();
  EXPECT_EQ(testing::load_check(st, 1, 3, kShape, pos), 64);
  // 4 layers * 2 * 16 KiB = 128 KiB at 2 MB/s = 65 ms.
  EXPECT_GE(seconds_since(t0), 0.060);
}

TEST(StoreThrottle, HeldBackLayersStartOnDemand) {
  AttentionStore st(cfg(0));
  const auto pos = testing::iota_positions(100);
  ASSERT_TRUE(testing::save_entry(st, 7, 5, kShape, pos));
  std::vector<std::vector<char>> bufs(8, std::vector<char>(100 * 256));
  std::vector<LayerTarget> tg;
  for (int l = 0; l < 4; ++l) tg.push_back({bufs[2 * l].data(), bufs[2 * l + 1].data()});
  LoadHandle h = st.load(testing::key_for(7, 5, pos), tg, -1, /*start_layers=*/1);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.started_layers(), 1);
  EXPECT_TRUE(h.wait_layer(0));
  h.start_layers(2);
  EXPECT_EQ(h.started_layers(), 2);
  EXPECT_TRUE(h.wait_layer(3));  // starts 2 and 3 itself
  EXPECT_EQ(h.started_layers(), 4);
  EXPECT_TRUE(h.wait_all());
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(bufs[2 * l], testing::layer_bytes(5, kShape, l, 0, pos));
    EXPECT_EQ(bufs[2 * l + 1], testing::layer_bytes(5, kShape, l, 1, pos));
  }
}

TEST(StoreThrottle, DroppingAHandleWithHeldBackLayersReleasesTheEntry) {
  AttentionStore st(cfg(0));
  const auto pos = testing::iota_positions(64);
  ASSERT_TRUE(testing::save_entry(st, 2, 9, kShape, pos));
  std::vector<std::vector<char>> bufs(8, std::vector<char>(64 * 256));
  std::vector<LayerTarget> tg;
  for (int l = 0; l < 4; ++l) tg.push_back({bufs[2 * l].data(), bufs[2 * l + 1].data()});
  {
    LoadHandle h = st.load(testing::key_for(2, 9, pos), tg, -1, 0);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h.started_layers(), 0);
  }
  // Not treated as a failure: the entry is still there, unpinned (erase works), no I/O error.
  EXPECT_EQ(st.stats().get(Counter::LoadFailures), 0u);
  EXPECT_TRUE(st.lookup(testing::key_for(2, 9, pos)).hit());
  EXPECT_TRUE(st.erase(2));
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 0u);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
}

}  // namespace
}  // namespace cb::store
