// Write-back ahead of eviction (StoreConfig::clean_ahead_bytes): the DRAM entries the advisor
// would evict next get SSD copies, so that their demotion writes only what changed since. And
// demotion ahead of need (StoreConfig::demote_ahead_bytes): the HBM entries it would evict
// next move to DRAM in the background, so that a save into HBM finds room.
#include <gtest/gtest.h>

#include <filesystem>

#include "lib/store/attention_store.h"
#include "lib/store/entry.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using testing::iota_positions;
using testing::load_check;
using testing::save_entry;
using testing::ssd_written;
using testing::where;

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{2, 512};  // 32 tokens per chunk; 64 tokens = 8 chunks (2 x K/V x 2)
constexpr uint64_t kEntryChunks = 8;

StoreConfig cfg(const std::string& dir, uint64_t dram_entries, uint64_t ssd_chunks) {
  StoreConfig c;
  c.dram_bytes = dram_entries * kEntryChunks * kChunk;
  c.ssd_bytes = ssd_chunks * kChunk;
  c.store_dir = dir;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  c.clean_ahead_bytes = kEntryChunks * kChunk;  // the LRU entry
  return c;
}

TEST(CleanAhead, TheNextVictimsDemotionWritesNothingAndSurvivesARestart) {
  const std::string dir = testing::fresh_dir("clean_reuse");
  {
    AttentionStore st(cfg(dir, 3, 64));
    for (SessionId s = 1; s <= 3; ++s)
      ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
    EXPECT_EQ(ssd_written(st), 0u);
    EXPECT_EQ(st.prefetch({}), 0u);  // nothing to fetch; 1, the LRU entry, is written back
    st.wait_idle();
    EXPECT_EQ(where(st, 1), TierKind::Dram);
    EXPECT_EQ(st.stats().get(Counter::SsdChunksCleaned), kEntryChunks);
    EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
    EXPECT_EQ(ssd_written(st), kEntryChunks * kChunk);
    EXPECT_EQ(st.prefetch({}), 0u);  // already clean: not written again
    st.wait_idle();
    EXPECT_EQ(st.stats().get(Counter::SsdChunksCleaned), kEntryChunks);
    // Session 4's save evicts 1, whose copy is whole: nothing more is written.
    ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));
    ASSERT_EQ(where(st, 1), TierKind::Ssd);
    EXPECT_EQ(ssd_written(st), kEntryChunks * kChunk);
    EXPECT_EQ(st.stats().get(Counter::SsdCopyChunksReused), kEntryChunks);
    EXPECT_EQ(st.ssd_copy_bytes(), 0u);
    EXPECT_EQ(st.used_bytes(TierKind::Ssd), kEntryChunks * kChunk);
    EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  AttentionStore again(cfg(dir, 3, 64));  // the demotion journaled the written-back chunks
  EXPECT_EQ(again.sessions(), std::vector<SessionId>{1});
  EXPECT_EQ(load_check(again, 1, 1, kShape, iota_positions(64)), 64);
  std::filesystem::remove_all(dir);
}

TEST(CleanAhead, ASaveOrADemotionMakesTheNextPlanDue) {
  const std::string dir = testing::fresh_dir("clean_due");
  AttentionStore st(cfg(dir, 3, 64));
  EXPECT_EQ(st.write_back(), 0u);  // nothing saved yet
  for (SessionId s = 1; s <= 3; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
  EXPECT_EQ(st.write_back(), 1u);  // saves landed: 1, the LRU entry
  EXPECT_EQ(st.write_back(), 0u);  // nothing changed since
  st.wait_idle();
  EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
  ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));  // demotes 1 onto its copy
  EXPECT_EQ(st.write_back(), 1u);                                 // now 2 is first in line
  st.wait_idle();
  EXPECT_EQ(st.stats().get(Counter::SsdChunksCleaned), 2 * kEntryChunks);
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

TEST(CleanAhead, AnAppendInPlaceInvalidatesOnlyTheGrownChunk) {
  const std::string dir = testing::fresh_dir("clean_append");
  AttentionStore st(cfg(dir, 4, 64));
  // 50 tokens: chunk 0 whole (32 tokens), chunk 1 partial (18), of each layer's K and V.
  for (SessionId s = 1; s <= 3; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(50)));
  st.prefetch({});
  st.wait_idle();
  EXPECT_EQ(ssd_written(st), 2 * 2 * 50 * 512u);  // 1's chunks, the partial one too
  // 1 grows to 70 tokens in place: chunk 0 shared, chunk 1 grown (32), chunk 2 new (6).
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(70)));
  EXPECT_EQ(st.stats().get(Counter::AppendSaves), 1u);
  EXPECT_EQ(load_check(st, 2, 2, kShape, iota_positions(50)), 50);  // 1 becomes the LRU
  EXPECT_EQ(load_check(st, 3, 3, kShape, iota_positions(50)), 50);
  const uint64_t before = ssd_written(st);
  ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));  // evicts 1
  ASSERT_EQ(where(st, 1), TierKind::Ssd);
  EXPECT_EQ(ssd_written(st) - before, 2 * 2 * (32 + 6) * 512u);  // not chunk 0
  EXPECT_EQ(st.stats().get(Counter::SsdCopyChunksReused), 4u);
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(70)), 70);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

TEST(CleanAhead, AWriteBackUsesFreeSsdSpaceOnlyAndCopiesGoFirst) {
  const std::string dir = testing::fresh_dir("clean_full");
  AttentionStore st(cfg(dir, 3, kEntryChunks));  // room for one entry on the SSD
  for (SessionId s = 1; s <= 4; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
  ASSERT_EQ(where(st, 1), TierKind::Ssd);  // the SSD is full
  const uint64_t before = ssd_written(st);
  st.prefetch({});
  st.wait_idle();
  EXPECT_EQ(st.stats().get(Counter::SsdChunksCleaned), 0u);  // 2 is not written back
  EXPECT_EQ(ssd_written(st), before);
  EXPECT_EQ(where(st, 1), TierKind::Ssd);
  ASSERT_TRUE(st.erase(1));
  st.prefetch({});  // now there is room: 2 gets a copy
  st.wait_idle();
  EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
  // 5's save evicts 2 onto its own copy: the SSD, full of that copy, needs no room.
  ASSERT_TRUE(save_entry(st, 5, 5, kShape, iota_positions(64)));
  EXPECT_EQ(where(st, 2), TierKind::Ssd);
  EXPECT_EQ(st.ssd_copy_bytes(), 0u);
  for (SessionId s = 2; s <= 5; ++s)
    EXPECT_EQ(load_check(st, s, s, kShape, iota_positions(64)), 64);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

TEST(CleanAhead, TruncationCutsAndEraseDropsTheCopy) {
  const std::string dir = testing::fresh_dir("clean_drop");
  AttentionStore st(cfg(dir, 3, 64));
  for (SessionId s = 1; s <= 3; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
  st.prefetch({});
  st.wait_idle();
  ASSERT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
  ASSERT_TRUE(st.truncate(1, TruncateSpec{32, 0, 0}));  // the first chunk goes, in the copy too
  EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks / 2 * kChunk);
  // 1 (32 tokens, 4 chunks, its copy whole) is still the LRU entry; the window's other 4
  // chunks take 2.
  st.prefetch({});
  st.wait_idle();
  EXPECT_EQ(st.ssd_copy_bytes(), (kEntryChunks / 2 + kEntryChunks) * kChunk);
  ASSERT_TRUE(st.erase(1));
  EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
  EXPECT_EQ(st.used_bytes(TierKind::Ssd), kEntryChunks * kChunk);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

// HBM for three entries over DRAM for four, no SSD; `ahead` entries kept free in HBM.
StoreConfig hbm_cfg(uint64_t ahead, double dram_write_gbps = 0) {
  StoreConfig c;
  c.hbm_bytes = 3 * kEntryChunks * kChunk;
  c.dram_bytes = 4 * kEntryChunks * kChunk;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  c.demote_ahead_bytes = ahead * kEntryChunks * kChunk;
  c.write_gbps[static_cast<int>(TierKind::Dram)] = dram_write_gbps;
  return c;
}

uint64_t hbm_evictions(const AttentionStore& st) {
  return st.stats().get(TierKind::Hbm, TierCounter::Evictions);
}

// Sessions first..last saved, 64 tokens each (one entry each; 1 to 3 fill the HBM tier).
void save_sessions(AttentionStore& st, SessionId first, SessionId last) {
  for (SessionId s = first; s <= last; ++s)
    ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64))) << s;
}

// 1 in DRAM, 2 to 4 in HBM, after one HBM eviction.
void expect_only_the_first_demoted(const AttentionStore& st) {
  EXPECT_EQ(hbm_evictions(st), 1u);
  EXPECT_EQ(where(st, 1), TierKind::Dram);
  for (SessionId s = 2; s <= 4; ++s) EXPECT_EQ(where(st, s), TierKind::Hbm) << s;
}

TEST(DemoteAhead, KeepsRoomInHbmSoTheNextSaveEvictsNothing) {
  for (const bool on : {false, true}) {
    AttentionStore st(hbm_cfg(on ? 1 : 0));
    ASSERT_NO_FATAL_FAILURE(save_sessions(st, 1, 3));
    EXPECT_EQ(st.used_bytes(TierKind::Hbm), 3 * kEntryChunks * kChunk);
    EXPECT_EQ(st.write_back(), on ? 1u : 0u) << on;  // 1, the LRU entry, moves to DRAM
    st.wait_idle();
    EXPECT_EQ(where(st, 1), on ? TierKind::Dram : TierKind::Hbm) << on;
    EXPECT_EQ(st.stats().get(Counter::DemotionsAhead), on ? 1u : 0u);
    EXPECT_EQ(hbm_evictions(st), on ? 1u : 0u);
    EXPECT_EQ(st.write_back(), 0u);  // nothing saved since, and the room is there
    // 4's save finds its room free; without the demotion ahead it demotes 1 itself.
    ASSERT_NO_FATAL_FAILURE(save_sessions(st, 4, 4));
    expect_only_the_first_demoted(st);
    for (SessionId s = 1; s <= 4; ++s)
      EXPECT_EQ(load_check(st, s, s, kShape, iota_positions(64)), 64) << s;
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
}

TEST(DemoteAhead, ASaveShortOfRoomWaitsForTheDemotionUnderWay) {
  // DRAM written at 1 MB/s: moving 1 (128 KiB) takes about 0.13 s, and 4's save, begun at
  // once, finds HBM full. It waits for 1's demotion instead of demoting 2, the next in line.
  AttentionStore st(hbm_cfg(1, 0.001));
  ASSERT_NO_FATAL_FAILURE(save_sessions(st, 1, 3));
  ASSERT_EQ(st.write_back(), 1u);
  ASSERT_NO_FATAL_FAILURE(save_sessions(st, 4, 4));
  expect_only_the_first_demoted(st);
  st.wait_idle();
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
}

TEST(DemoteAhead, AnEntryBeingDemotedIsStillServed) {
  AttentionStore st(hbm_cfg(1, 0.001));
  ASSERT_NO_FATAL_FAILURE(save_sessions(st, 1, 3));
  ASSERT_EQ(st.write_back(), 1u);
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);  // from HBM, as it moves
  st.wait_idle();
  EXPECT_EQ(where(st, 1), TierKind::Dram);
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
}

}  // namespace
}  // namespace cb::store
