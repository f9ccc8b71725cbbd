// The demotion budget (StoreConfig::drop_slow_demotions): a save that must make room in DRAM
// drops a victim whose demotion to the SSD would take longer than recomputing it, predicted
// from the SSD's measured write rate; it demotes the victim otherwise, and always before the
// rate is known or without a recompute estimate.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "lib/store/attention_store.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using testing::iota_positions;
using testing::load_check;
using testing::save_entry;
using testing::where;

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{2, 512};  // 64 tokens = 8 chunks of 16 KiB (128 KiB)
constexpr uint64_t kEntryChunks = 8;

StoreConfig cfg(const std::string& dir, bool on) {
  StoreConfig c;
  c.dram_bytes = 3 * kEntryChunks * kChunk;  // three 64-token entries
  c.ssd_bytes = 64 * kChunk;
  c.store_dir = dir;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  c.drop_slow_demotions = on;
  c.write_gbps[static_cast<int>(TierKind::Ssd)] = 0.01;  // 10 MB/s: an entry takes ~13 ms
  return c;
}

// Installs a recompute estimate of `recompute_s` and saves sessions 1..n (64 tokens each).
bool fill(AttentionStore& st, SessionId n, double recompute_s = 1e-6) {
  st.set_recompute_estimate([recompute_s](int64_t) { return recompute_s; });
  for (SessionId s = 1; s <= n; ++s) {
    if (!save_entry(st, s, s, kShape, iota_positions(64))) return false;
  }
  return true;
}

// Sessions 1..3 fill DRAM; 4 demotes 1 (LRU), the SSD's first write; 5 must evict 2.
struct Outcome {
  bool two_stored = false;
  TierKind two_tier = TierKind::Hbm;
  uint64_t dropped = 0, dram_drops = 0;
};

Outcome run(const std::string& name, bool on, double recompute_s, bool estimate = true) {
  const std::string dir = testing::fresh_dir(name);
  Outcome o;
  {
    AttentionStore st(cfg(dir, on));
    if (estimate) st.set_recompute_estimate([recompute_s](int64_t) { return recompute_s; });
    for (SessionId s = 1; s <= 4; ++s) {
      EXPECT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
    }
    EXPECT_EQ(where(st, 1), TierKind::Ssd);  // no rate yet: demoted whatever the estimate
    EXPECT_EQ(st.stats().get(Counter::SlowDemotionsDropped), 0u);
    EXPECT_TRUE(save_entry(st, 5, 5, kShape, iota_positions(64)));
    o.two_stored = st.where(2, &o.two_tier);
    o.dropped = st.stats().get(Counter::SlowDemotionsDropped);
    o.dram_drops = st.stats().get(TierKind::Dram, TierCounter::Drops);
    EXPECT_EQ(load_check(st, 5, 5, kShape, iota_positions(64)), 64);
    EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  std::filesystem::remove_all(dir);
  return o;
}

TEST(DemotionBudget, AVictimSlowerToDemoteThanToRecomputeIsDropped) {
  const Outcome o = run("budget_drop", true, 1e-6);  // ~13 ms to write vs 1 us to recompute
  EXPECT_FALSE(o.two_stored);
  EXPECT_EQ(o.dropped, 1u);
  EXPECT_EQ(o.dram_drops, 1u);
}

TEST(DemotionBudget, AVictimCheaperToDemoteIsDemoted) {
  const Outcome o = run("budget_keep", true, 10.0);
  EXPECT_TRUE(o.two_stored);
  EXPECT_EQ(o.two_tier, TierKind::Ssd);
  EXPECT_EQ(o.dropped, 0u);
  EXPECT_EQ(o.dram_drops, 0u);
}

TEST(DemotionBudget, OffOrWithoutAnEstimateEveryVictimIsDemoted) {
  for (const bool on : {false, true}) {
    const Outcome o = run(on ? "budget_noest" : "budget_off", on, 1e-6, /*estimate=*/!on);
    EXPECT_TRUE(o.two_stored) << on;
    EXPECT_EQ(o.two_tier, TierKind::Ssd) << on;
    EXPECT_EQ(o.dropped, 0u) << on;
  }
}

TEST(DemotionBudget, TheEntrysSsdCopyIsNotWrittenAgainSoItsDemotionIsCheap) {
  // With a write-back window of one entry, the LRU entry has a whole SSD copy: its demotion
  // writes nothing, so its predicted wait is the SSD's (idle) backlog, and it is demoted.
  const std::string dir = testing::fresh_dir("budget_copy");
  StoreConfig c = cfg(dir, true);
  c.clean_ahead_bytes = kEntryChunks * kChunk;
  {
    AttentionStore st(c);
    ASSERT_TRUE(fill(st, 3));
    st.write_back();
    st.wait_idle();  // 1's copy is written (and the SSD's rate measured)
    ASSERT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
    ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));
    EXPECT_EQ(where(st, 1), TierKind::Ssd);
    EXPECT_EQ(st.stats().get(Counter::SlowDemotionsDropped), 0u);
    EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  std::filesystem::remove_all(dir);
}

TEST(DemotionBudget, AWholeCopyIsDemotedWhileTheSsdIsBusy) {
  // A write-back window of two entries: once 1's copy has landed, 2's write-back keeps the
  // SSD busy. Demoting 1 writes nothing, so the backlog does not make it slow: it is demoted.
  const std::string dir = testing::fresh_dir("budget_busy_copy");
  StoreConfig c = cfg(dir, true);
  c.clean_ahead_bytes = 2 * kEntryChunks * kChunk;
  {
    AttentionStore st(c);
    ASSERT_TRUE(fill(st, 3));
    st.write_back();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (st.ssd_copy_bytes() < kEntryChunks * kChunk &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_GE(st.ssd_copy_bytes(), kEntryChunks * kChunk) << "1's write-back never landed";
    ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));
    EXPECT_EQ(where(st, 1), TierKind::Ssd);
    EXPECT_EQ(st.stats().get(Counter::SlowDemotionsDropped), 0u);
    st.wait_idle();
    EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  std::filesystem::remove_all(dir);
}

TEST(DemotionBudget, AVictimBeingWrittenBackIsNeverDropped) {
  // 4 demotes 1 (the SSD's rate is then known); a write-back of 2 is under way when 5 makes
  // 2 its victim. Its demotion waits for that write-back and writes nothing more, and
  // dropping it would free nothing sooner (the write-back holds its DRAM): it is demoted, and
  // the save costs no other entry, however small the recompute estimate.
  const std::string dir = testing::fresh_dir("budget_cleaning");
  StoreConfig c = cfg(dir, true);
  c.clean_ahead_bytes = kEntryChunks * kChunk;
  c.write_gbps[static_cast<int>(TierKind::Ssd)] = 0.0002;  // 200 KB/s: an entry ~ 0.65 s
  {
    AttentionStore st(c);
    ASSERT_TRUE(fill(st, 4));
    st.wait_idle();
    const uint64_t ssd_used = st.used_bytes(TierKind::Ssd);
    ASSERT_EQ(st.write_back(), 1u);  // 2, the LRU entry in DRAM
    // Under way once it holds its SSD slots (it then writes for ~0.65 s).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (st.used_bytes(TierKind::Ssd) == ssd_used &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    ASSERT_GT(st.used_bytes(TierKind::Ssd), ssd_used) << "2's write-back never started";
    ASSERT_TRUE(save_entry(st, 5, 5, kShape, iota_positions(64)));
    EXPECT_EQ(where(st, 2), TierKind::Ssd);
    EXPECT_EQ(where(st, 3), TierKind::Dram);
    EXPECT_EQ(st.stats().get(Counter::SlowDemotionsDropped), 0u);
    EXPECT_EQ(st.stats().get(TierKind::Dram, TierCounter::Drops), 0u);
    st.wait_idle();
    EXPECT_EQ(load_check(st, 2, 2, kShape, iota_positions(64)), 64);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
