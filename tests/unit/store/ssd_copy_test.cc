// Inclusive tiers: an entry prefetched from the SSD keeps its SSD chunks as a copy, so that
// demoting it again writes only what changed (StoreEntry::ssd_copy).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

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

StoreConfig cfg(const std::string& dir, uint64_t ssd_chunks) {
  StoreConfig c;
  c.dram_bytes = 3 * kEntryChunks * kChunk;
  c.dram_reserve_bytes = kEntryChunks * kChunk;  // saves use two entries' worth
  c.ssd_bytes = ssd_chunks * kChunk;
  c.store_dir = dir;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  return c;
}

// Sessions 1, 2, 3 of 64 tokens saved in that order (1 demoted to the SSD by 3's save), then
// 1 prefetched back into the DRAM reserve, which is restored by demoting 2 (the least
// recently used): DRAM holds 3 and 1, the SSD holds 2 and 1's copy.
void prefetch_one(AttentionStore& st) {
  const auto pos = iota_positions(64);
  for (SessionId s = 1; s <= 3; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos));
  ASSERT_EQ(where(st, 1), TierKind::Ssd);
  ASSERT_EQ(st.prefetch({1}), 1u);
  st.wait_idle();
  ASSERT_EQ(where(st, 1), TierKind::Dram);
  ASSERT_EQ(where(st, 2), TierKind::Ssd);
  ASSERT_EQ(where(st, 3), TierKind::Dram);
  EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
  EXPECT_EQ(st.used_bytes(TierKind::Ssd), 2 * kEntryChunks * kChunk);
}

TEST(SsdCopy, ADemotionAfterAPrefetchWritesNothingAndSurvivesARestart) {
  const std::string dir = testing::fresh_dir("ssd_copy_reuse");
  {
    AttentionStore st(cfg(dir, 64));
    prefetch_one(st);
    EXPECT_EQ(st.prefetch({}), 0u);  // 1 leaves the look-ahead window, which LRU spares
    EXPECT_EQ(load_check(st, 3, 3, kShape, iota_positions(64)), 64);  // 1 is now the LRU
    const uint64_t before = ssd_written(st);
    // Session 4's save evicts 1: its copy is still whole.
    ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));
    ASSERT_EQ(where(st, 1), TierKind::Ssd);
    EXPECT_EQ(ssd_written(st), before);
    EXPECT_EQ(st.stats().get(Counter::SsdCopyChunksReused), kEntryChunks);
    EXPECT_EQ(st.ssd_copy_bytes(), 0u);
    EXPECT_EQ(st.used_bytes(TierKind::Ssd), 2 * kEntryChunks * kChunk);
    EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  AttentionStore again(cfg(dir, 64));  // the demotion was journaled with the reused chunks
  EXPECT_EQ(load_check(again, 1, 1, kShape, iota_positions(64)), 64);
  EXPECT_EQ(load_check(again, 2, 2, kShape, iota_positions(64)), 64);
  std::filesystem::remove_all(dir);
}

TEST(SsdCopy, AnAppendKeepsTheCopyOfItsWholeSharedChunks) {
  const std::string dir = testing::fresh_dir("ssd_copy_append");
  AttentionStore st(cfg(dir, 64));
  prefetch_one(st);
  // 1 grows from 64 to 100 tokens: chunks 0 and 1 shared (and on the SSD), 2 and 3 new.
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(100)));
  EXPECT_EQ(st.stats().get(Counter::AppendSaves), 1u);
  EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
  ASSERT_EQ(where(st, 3), TierKind::Ssd);  // made room for the appended chunks
  const uint64_t before = ssd_written(st);
  ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));
  ASSERT_EQ(where(st, 1), TierKind::Ssd);
  // Only chunk 2 (32 tokens) and chunk 3 (4 tokens) of each layer's K and V were written.
  EXPECT_EQ(ssd_written(st) - before, 2 * 2 * (32 + 4) * 512u);
  EXPECT_EQ(st.stats().get(Counter::SsdCopyChunksReused), kEntryChunks);
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(100)), 100);
  EXPECT_EQ(st.ssd_copy_bytes(), 0u);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

// A full SSD ranks the copies with its entries (kCopyCandidate): under LRU a copy counts as
// its entry's last use, so an SSD entry used longer ago goes first. (In
// tests/unit/engine/store_policy_test.cc's Figure 9 a copy goes before the SSD entries the
// look-ahead holds.)
TEST(SsdCopy, AFullSsdRanksCopiesWithItsEntries) {
  const std::string dir = testing::fresh_dir("ssd_copy_full");
  {
    AttentionStore st(cfg(dir, 2 * kEntryChunks));  // 2 and 1's copy fill it
    prefetch_one(st);
    EXPECT_EQ(st.prefetch({}), 0u);
    EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);  // 3 is now the LRU
    ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));    // demotes 3: 2 goes
    EXPECT_EQ(where(st, 3), TierKind::Ssd);
    EXPECT_FALSE(st.where(2, nullptr));
    EXPECT_EQ(where(st, 1), TierKind::Dram);
    EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
    EXPECT_EQ(st.stats().get(TierKind::Ssd, TierCounter::Drops), 1u);
    for (SessionId s : {1, 3, 4}) EXPECT_EQ(load_check(st, s, s, kShape, iota_positions(64)), 64);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  std::filesystem::remove_all(dir);
}

TEST(SsdCopy, AWholeChunkTruncationKeepsTheCopyPastTheCut) {
  const std::string dir = testing::fresh_dir("ssd_copy_cut");
  std::vector<int64_t> kept = iota_positions(64);
  kept.erase(kept.begin(), kept.begin() + 32);
  {
    AttentionStore st(cfg(dir, 64));
    prefetch_one(st);
    TruncateSpec spec;
    spec.drop_tokens = 32;  // token chunk 0 of each layer's K and V
    ASSERT_TRUE(st.truncate(1, spec));
    EXPECT_EQ(st.stats().get(Counter::TruncationRewrites), 0u);
    EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks / 2 * kChunk);
    EXPECT_EQ(st.used_bytes(TierKind::Ssd), (kEntryChunks + kEntryChunks / 2) * kChunk);
    EXPECT_EQ(st.prefetch({}), 0u);  // 1 leaves the look-ahead window, which LRU spares
    EXPECT_EQ(load_check(st, 3, 3, kShape, iota_positions(64)), 64);  // 1 is now the LRU
    const uint64_t before = ssd_written(st);
    ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));  // evicts 1
    ASSERT_EQ(where(st, 1), TierKind::Ssd);
    EXPECT_EQ(ssd_written(st), before);  // its copy held every chunk it kept
    EXPECT_EQ(st.stats().get(Counter::SsdCopyChunksReused), kEntryChunks / 2);
    EXPECT_EQ(load_check(st, 1, 1, kShape, kept), 32);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  AttentionStore again(cfg(dir, 64));  // journaled with the copy's chunks
  EXPECT_EQ(load_check(again, 1, 1, kShape, kept), 32);
  std::filesystem::remove_all(dir);
}

TEST(SsdCopy, EraseReplaceTruncateAndRestartDropTheCopy) {
  const std::string dir = testing::fresh_dir("ssd_copy_drop");
  {
    AttentionStore st(cfg(dir, 64));
    prefetch_one(st);
    ASSERT_TRUE(st.erase(1));
    EXPECT_EQ(st.ssd_copy_bytes(), 0u);
    EXPECT_EQ(st.used_bytes(TierKind::Ssd), kEntryChunks * kChunk);  // 2 alone
    // A prefetched entry replaced by a history that does not extend it.
    ASSERT_TRUE(save_entry(st, 5, 5, kShape, iota_positions(64)));
    ASSERT_TRUE(save_entry(st, 6, 6, kShape, iota_positions(64)));  // evicts 3
    ASSERT_EQ(where(st, 3), TierKind::Ssd);
    ASSERT_EQ(st.prefetch({3}), 1u);
    st.wait_idle();
    ASSERT_EQ(where(st, 3), TierKind::Dram);
    ASSERT_EQ(where(st, 5), TierKind::Ssd);
    EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
    ASSERT_TRUE(save_entry(st, 3, 33, kShape, iota_positions(64)));
    EXPECT_EQ(st.ssd_copy_bytes(), 0u);
    // Truncated from the front mid-chunk: rewritten, no chunk keeps its bytes.
    ASSERT_EQ(st.prefetch({5}), 1u);
    st.wait_idle();
    ASSERT_EQ(where(st, 5), TierKind::Dram);
    EXPECT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
    TruncateSpec spec;
    spec.drop_tokens = 16;
    ASSERT_TRUE(st.truncate(5, spec));
    EXPECT_EQ(st.stats().get(Counter::TruncationRewrites), 1u);
    EXPECT_EQ(st.ssd_copy_bytes(), 0u);
    std::vector<int64_t> kept = iota_positions(64);
    kept.erase(kept.begin(), kept.begin() + 16);
    EXPECT_EQ(load_check(st, 5, 5, kShape, kept), 48);
    // A copy is not journaled: a restart forgets it along with the DRAM entry.
    ASSERT_EQ(where(st, 2), TierKind::Ssd);
    ASSERT_EQ(st.prefetch({2}), 1u);
    st.wait_idle();
    EXPECT_GT(st.ssd_copy_bytes(), 0u);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  AttentionStore again(cfg(dir, 64));
  EXPECT_EQ(again.ssd_copy_bytes(), 0u);
  uint64_t on_ssd = 0;
  for (SessionId s : again.sessions()) {
    EntryMeta m;
    TierKind t;
    if (again.entry_meta(s, &m) && again.where(s, &t) && t == TierKind::Ssd) on_ssd += m.n_chunks();
  }
  EXPECT_EQ(again.used_bytes(TierKind::Ssd), on_ssd * kChunk);
  TierKind t;
  EXPECT_FALSE(again.where(2, &t));  // it was in DRAM
  std::filesystem::remove_all(dir);
}

// A fetch that finds no room is planned again once room may have come (the engines call
// retry_prefetch when prefetch_retry_due says so): without that, the entry stays on the SSD
// until the look-ahead changes, and its turn reads the SSD.
// LRU's victims, and every look-ahead session on the SSD to fetch, room or not (as
// scheduler-aware plans, making room by evicting later jobs' entries).
class FetchEveryone final : public PlacementAdvisor {
 public:
  std::vector<Victim> choose_victims(TierKind tier, uint64_t bytes_needed,
                                     const std::vector<EntryInfo>& candidates,
                                     const std::vector<SessionId>& lookahead, double now) override {
    return lru_.choose_victims(tier, bytes_needed, candidates, lookahead, now);
  }
  std::vector<SessionId> choose_prefetch(const std::vector<SessionId>& lookahead,
                                         const std::vector<EntryInfo>& on_ssd, uint64_t,
                                         double) override {
    std::vector<SessionId> out;
    for (SessionId s : lookahead) {
      for (const EntryInfo& e : on_ssd)
        if (e.session == s) out.push_back(s);
    }
    return out;
  }

 private:
  LruAdvisor lru_;
};

TEST(SsdCopy, AFetchWithoutRoomIsDueAgainOnceAnEntryLeaves) {
  const std::string dir = testing::fresh_dir("ssd_copy_retry");
  StoreConfig c = cfg(dir, 64);
  c.advisor = std::make_shared<FetchEveryone>();
  c.dram_bytes = 2 * kEntryChunks * kChunk;  // two entries, no reserve
  c.dram_reserve_bytes = 0;
  AttentionStore st(c);
  const auto pos = iota_positions(64);
  for (SessionId s = 1; s <= 3; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos));
  ASSERT_EQ(where(st, 1), TierKind::Ssd);
  // 2 and 3 come before 1 in the queue, so 1's fetch may not evict them: no room.
  ASSERT_EQ(st.prefetch({2, 3, 1}), 1u);
  st.wait_idle();
  EXPECT_EQ(where(st, 1), TierKind::Ssd);
  EXPECT_EQ(st.stats().get(Counter::PrefetchFailures), 1u);
  EXPECT_FALSE(st.prefetch_retry_due());  // nothing changed: a retry would fail the same way
  ASSERT_TRUE(st.erase(3));               // 3's turn ended the conversation
  EXPECT_TRUE(st.prefetch_retry_due());
  EXPECT_EQ(st.retry_prefetch(), 1u);  // the same look-ahead, {2, 3, 1}
  st.wait_idle();
  EXPECT_EQ(where(st, 1), TierKind::Dram);
  EXPECT_EQ(where(st, 2), TierKind::Dram);
  EXPECT_FALSE(st.prefetch_retry_due());
  EXPECT_EQ(load_check(st, 1, 1, kShape, pos), 64);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
}

}  // namespace
}  // namespace cb::store
