// The paper's Figure 9 on the real AttentionStore (DRAM arena + SSD files), with placement
// decided by lib/policy's scheduler-aware policy through engine::PolicyAdvisor:
// (a) job 3's entry is fetched from SSD, (b) job 4's entry is evicted from DRAM to SSD,
// (c) job 9's entry, outside the look-ahead eviction window, is evicted out of the SSD.
#include <gtest/gtest.h>

#include "lib/engine/policy_advisor.h"
#include "lib/store/attention_store.h"
#include "tests/unit/store/store_test_util.h"

namespace {

using namespace cb::store;           // NOLINT
using namespace cb::store::testing;  // NOLINT

const EntryShape kShape{1, 1024};  // one layer, 1 KiB per token for K and for V
const std::vector<int64_t> kPos = iota_positions(4);
constexpr uint64_t kChunk = 4096;

TierKind tier_of(const AttentionStore& st, SessionId s) {
  TierKind t = TierKind::Hbm;
  EXPECT_TRUE(st.where(s, &t)) << "session " << s << " is not stored";
  return t;
}

/// Bytes one entry occupies, measured on a DRAM-only store (0 if the save failed).
uint64_t measured_entry_bytes() {
  StoreConfig c;
  c.dram_bytes = 64 * kChunk;
  c.chunk_bytes = kChunk;
  AttentionStore probe(c);
  EXPECT_TRUE(save_entry(probe, 100, 1, kShape, kPos));
  return probe.used_bytes(TierKind::Dram);
}

TEST(StorePolicyTest, Figure9OnTheRealStore) {
  const std::string dir = fresh_dir("figure9");
  const uint64_t entry_bytes = measured_entry_bytes();
  ASSERT_GT(entry_bytes, 0u);
  const uint64_t cmem = 3 * entry_bytes, cdisk = 5 * entry_bytes;
  // Sessions 3, 5, 6, 7, 9 start on SSD: save them into an SSD-only store, then reopen.
  {
    StoreConfig c;
    c.ssd_bytes = cdisk;
    c.store_dir = dir;
    c.chunk_bytes = kChunk;
    AttentionStore st(c);
    for (SessionId s : {3, 5, 6, 7, 9}) ASSERT_TRUE(save_entry(st, s, s, kShape, kPos)) << s;
    st.wait_idle();
  }
  StoreConfig c;
  c.dram_bytes = cmem;
  c.ssd_bytes = 0;  // adopt the store on disk
  c.store_dir = dir;
  c.chunk_bytes = kChunk;
  c.advisor = std::make_shared<cb::engine::PolicyAdvisor>(
      "scheduler-aware", cb::policy::Capacity{cmem, cdisk}, entry_bytes);
  AttentionStore st(c);
  for (SessionId s : {3, 5, 6, 7, 9}) EXPECT_EQ(tier_of(st, s), TierKind::Ssd);
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, kPos));
  ASSERT_TRUE(save_entry(st, 4, 4, kShape, kPos));
  EXPECT_EQ(tier_of(st, 1), TierKind::Dram);
  EXPECT_EQ(tier_of(st, 4), TierKind::Dram);

  // (a) Jobs 1..9 are queued (job k is session k): the prefetch window (Cmem/Skv = 3 jobs)
  // covers sessions 1, 2, 3; 3 is on SSD and is fetched into DRAM.
  const std::vector<SessionId> queue = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  st.prefetch(queue);
  st.wait_idle();
  EXPECT_EQ(tier_of(st, 3), TierKind::Dram);
  EXPECT_EQ(tier_of(st, 5), TierKind::Ssd);  // beyond the prefetch window

  // (b) A running job (session 0, not queued) saves; DRAM (1, 4, 3) is full. All three are in
  // the eviction window; 1 is about to run, and 4 runs after 3: 4 moves to SSD.
  ASSERT_TRUE(save_entry(st, 0, 10, kShape, kPos));
  st.wait_idle();
  EXPECT_EQ(tier_of(st, 4), TierKind::Ssd);
  EXPECT_EQ(tier_of(st, 3), TierKind::Dram);
  EXPECT_EQ(tier_of(st, 1), TierKind::Dram);
  // The SSD (5, 6, 7, 9 and the copy 3 kept when fetched) was full: the copy made room, since
  // the look-ahead holds every entry there and nothing is known of when 3 is demoted again.
  EXPECT_EQ(st.ssd_copy_bytes(), 0u);
  for (SessionId s : {5, 6, 7, 9}) EXPECT_EQ(tier_of(st, s), TierKind::Ssd) << s;

  // (c) Session 10 saves: DRAM (1, 3, 0) evicts 0 (outside the window) to SSD, which is full
  // (5, 6, 7, 9, 4): 9 is beyond the eviction window of (Cmem + Cdisk)/Skv = 8 jobs and leaves.
  ASSERT_TRUE(save_entry(st, 10, 11, kShape, kPos));
  st.wait_idle();
  EXPECT_EQ(tier_of(st, 0), TierKind::Ssd);
  TierKind t;
  EXPECT_FALSE(st.where(9, &t)) << "session 9 should have been evicted from the store";
  for (SessionId s : {4, 5, 6, 7}) EXPECT_EQ(tier_of(st, s), TierKind::Ssd) << s;

  // Whatever moved, every remaining entry still loads with its exact bytes.
  for (SessionId s : {1, 3, 4, 5, 6, 7}) EXPECT_EQ(load_check(st, s, s, kShape, kPos), 4) << s;
  EXPECT_EQ(load_check(st, 0, 10, kShape, kPos), 4);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
}

// A prefetch makes room only at the expense of entries needed after it: with DRAM full of the
// two jobs ahead of it, the third job's entry stays on SSD (fetching it would evict one of them
// and the next plan would fetch that back); behind the fetched job, an entry may go, also when
// the plan fetches another entry after it (queue 1, 3, 2, 4: the store used to hold every
// entry up to the plan's last fetch, so 3 found no room and 2, needed later, kept DRAM).
TEST(StorePolicyTest, PrefetchNeverEvictsAnEntryNeededSooner) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool fetched_ahead = variant > 0;
    const std::vector<std::vector<SessionId>> queues = {{1, 2, 3}, {1, 3, 2}, {1, 3, 2, 4}};
    SCOPED_TRACE(::testing::PrintToString(queues[variant]));
    const std::string dir = fresh_dir("prefetch-" + std::to_string(variant));
    const uint64_t entry_bytes = measured_entry_bytes();
    ASSERT_GT(entry_bytes, 0u);
    {
      StoreConfig c;
      c.ssd_bytes = 4 * entry_bytes;
      c.store_dir = dir;
      c.chunk_bytes = kChunk;
      AttentionStore st(c);
      ASSERT_TRUE(save_entry(st, 3, 3, kShape, kPos));
      ASSERT_TRUE(save_entry(st, 4, 4, kShape, kPos));
      st.wait_idle();
    }
    StoreConfig c;
    c.dram_bytes = 2 * entry_bytes;
    c.store_dir = dir;
    c.chunk_bytes = kChunk;
    // Skv of half an entry: a prefetch window of 4 jobs, wider than DRAM holds.
    c.advisor = std::make_shared<cb::engine::PolicyAdvisor>(
        "scheduler-aware", cb::policy::Capacity{2 * entry_bytes, 4 * entry_bytes}, entry_bytes / 2);
    AttentionStore st(c);
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, kPos));
    ASSERT_TRUE(save_entry(st, 2, 2, kShape, kPos));
    st.wait_idle();
    st.prefetch(queues[variant]);
    st.wait_idle();
    EXPECT_EQ(tier_of(st, 1), TierKind::Dram);
    EXPECT_EQ(tier_of(st, 3), fetched_ahead ? TierKind::Dram : TierKind::Ssd);
    EXPECT_EQ(tier_of(st, 2), fetched_ahead ? TierKind::Ssd : TierKind::Dram);
    EXPECT_EQ(tier_of(st, 4), TierKind::Ssd);  // no room left ahead of it
    for (SessionId s : {1, 2, 3, 4}) EXPECT_EQ(load_check(st, s, s, kShape, kPos), 4) << s;
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
}

}  // namespace
