// Save-time admission (StoreConfig::save_admission): an append save that must make room in
// DRAM, where the advisor would evict the saving session's own entry first, goes to the SSD
// on that entry's copy instead of evicting entries the advisor ranks above it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "lib/store/attention_store.h"
#include "lib/store/entry.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using testing::iota_positions;
using testing::layer_bytes;
using testing::load_check;
using testing::save_entry;
using testing::ssd_written;
using testing::tokens_for;
using testing::where;

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{2, 512};  // 32 tokens per chunk; 64 tokens = 8 chunks (2 x K/V x 2)
constexpr uint64_t kEntryChunks = 8;

StoreConfig cfg(const std::string& dir, bool admission, uint64_t clean_ahead_entries) {
  StoreConfig c;
  c.dram_bytes = 3 * kEntryChunks * kChunk;  // three 64-token entries
  c.ssd_bytes = 64 * kChunk;
  c.store_dir = dir;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  c.clean_ahead_bytes = clean_ahead_entries * kEntryChunks * kChunk;  // LRU entries first
  c.save_admission = admission;
  return c;
}

// Sessions 1, 2, 3 fill DRAM in that order (LRU: 1 first); with a write-back window, 1 gets a
// whole SSD copy.
void fill(AttentionStore& st) {
  for (SessionId s = 1; s <= 3; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
  st.prefetch({});
  st.wait_idle();
}

TEST(SaveAdmission, TheFirstVictimsOwnSaveGoesToTheSsdOnItsCopy) {
  const std::string dir = testing::fresh_dir("admit_copy");
  const uint64_t new_bytes = 2 * 2 * 32 * 512;  // tokens 64..95 of 2 layers, K and V
  {
    AttentionStore st(cfg(dir, true, 1));
    fill(st);
    ASSERT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);
    const uint64_t before = ssd_written(st);
    // 1 grows to 96 tokens: DRAM is full and LRU would evict 1 itself first.
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(96)));
    EXPECT_EQ(st.stats().get(Counter::SavesAdmittedBelow), 1u);
    EXPECT_EQ(where(st, 1), TierKind::Ssd);
    EXPECT_EQ(where(st, 2), TierKind::Dram);  // nothing was evicted for it
    EXPECT_EQ(where(st, 3), TierKind::Dram);
    EXPECT_EQ(st.stats().get(TierKind::Dram, TierCounter::Evictions), 0u);
    EXPECT_EQ(ssd_written(st) - before, new_bytes);  // only the new tokens: the copy is taken
    EXPECT_EQ(st.stats().get(Counter::SsdCopyChunksReused), kEntryChunks);
    EXPECT_EQ(st.ssd_copy_bytes(), 0u);
    EXPECT_EQ(st.used_bytes(TierKind::Dram), 2 * kEntryChunks * kChunk);  // 1 left DRAM
    EXPECT_EQ(st.used_bytes(TierKind::Ssd), 12 * kChunk);
    EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(96)), 96);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  AttentionStore again(cfg(dir, true, 1));  // journaled: the taken chunks and the new ones
  EXPECT_EQ(again.sessions(), std::vector<SessionId>{1});
  EXPECT_EQ(load_check(again, 1, 1, kShape, iota_positions(96)), 96);
  uint64_t checked = 0;
  EXPECT_EQ(again.verify_all(&checked), 0u);
  EXPECT_EQ(checked, 12u);
  std::filesystem::remove_all(dir);
}

TEST(SaveAdmission, OffTheSaveEvictsTheNextEntryInstead) {
  const std::string dir = testing::fresh_dir("admit_off");
  AttentionStore st(cfg(dir, false, 1));
  fill(st);
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(96)));
  EXPECT_EQ(st.stats().get(Counter::SavesAdmittedBelow), 0u);
  EXPECT_EQ(st.stats().get(Counter::AppendSaves), 1u);
  EXPECT_EQ(where(st, 1), TierKind::Dram);  // appended in place, pinned: 2 goes instead
  EXPECT_EQ(where(st, 2), TierKind::Ssd);
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(96)), 96);
  EXPECT_EQ(load_check(st, 2, 2, kShape, iota_positions(64)), 64);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

TEST(SaveAdmission, AnEntryUsedSinceStaysAndTheLeastRecentGoes) {
  const std::string dir = testing::fresh_dir("admit_used");
  AttentionStore st(cfg(dir, true, 0));
  fill(st);
  ASSERT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), 64);  // 2 is now the LRU entry
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(96)));
  EXPECT_EQ(st.stats().get(Counter::SavesAdmittedBelow), 0u);
  EXPECT_EQ(where(st, 1), TierKind::Dram);
  EXPECT_EQ(where(st, 2), TierKind::Ssd);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

TEST(SaveAdmission, WithoutACopyTheWholeEntryIsWrittenAndLoadsWhileInFlight) {
  const std::string dir = testing::fresh_dir("admit_nocopy");
  AttentionStore st(cfg(dir, true, 0));  // no write-back: 1 has no SSD copy
  fill(st);
  ASSERT_EQ(st.ssd_copy_bytes(), 0u);
  const std::vector<int64_t> pos = iota_positions(96);
  SaveHandle h = st.begin_save(
      SaveRequest{1, testing::test_fp(), KeyEncoding::PreRope, kShape, tokens_for(1, pos)});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.tier(), TierKind::Ssd);
  EXPECT_EQ(h.shared_tokens(), 0);
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 2 * kEntryChunks * kChunk);  // 1 left at once
  std::vector<std::vector<char>> bufs;
  for (int l = 0; l < kShape.n_layers; ++l) {
    bufs.push_back(layer_bytes(1, kShape, l, 0, pos));
    bufs.push_back(layer_bytes(1, kShape, l, 1, pos));
  }
  for (int l = 0; l < kShape.n_layers; ++l) {
    h.write_layer(l, LayerSource{bufs[2 * l].data(), bufs[2 * l + 1].data()});
  }
  std::shared_future<bool> landed = h.commit();
  EXPECT_EQ(load_check(st, 1, 1, kShape, pos), 96);  // the save in flight answers
  ASSERT_TRUE(landed.get());
  EXPECT_EQ(ssd_written(st), 12 * kChunk);  // all 96 tokens
  EXPECT_EQ(st.stats().get(Counter::SsdCopyChunksReused), 0u);
  EXPECT_EQ(where(st, 2), TierKind::Dram);
  EXPECT_EQ(load_check(st, 1, 1, kShape, pos), 96);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

TEST(SaveAdmission, AnAbortedSaveBelowFreesWhatItTook) {
  const std::string dir = testing::fresh_dir("admit_abort");
  AttentionStore st(cfg(dir, true, 1));
  fill(st);
  {
    SaveHandle h = st.begin_save(SaveRequest{1, testing::test_fp(), KeyEncoding::PreRope, kShape,
                                             tokens_for(1, iota_positions(96))});
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h.tier(), TierKind::Ssd);
    EXPECT_EQ(h.shared_tokens(), 64);
  }  // aborted: the session's entry was dropped at begin_save, so it misses now
  st.wait_idle();
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(64)), -1);
  EXPECT_EQ(st.used_bytes(TierKind::Ssd), 0u);
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 2 * kEntryChunks * kChunk);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

TEST(SaveAdmission, AnEntryTruncatedWhileItsWriteBackRunsIsNotTakenBelow) {
  // A save admitted below waits for its base's running write-back. A whole-chunk truncation
  // meanwhile cuts the base and its copy: the copy's chunks are no longer the save's first
  // ones, so the save must not take them (the checksums, seeded by session, would not tell).
  const std::string dir = testing::fresh_dir("admit_cut");
  StoreConfig c = cfg(dir, true, 0);
  c.dram_bytes = (20 + 2 * kEntryChunks) * kChunk;  // 1 at 160 tokens (20 chunks), 2 and 3
  c.ssd_bytes = 256 * kChunk;
  c.clean_ahead_bytes = 20 * kChunk;                       // 1 only
  c.write_gbps[static_cast<int>(TierKind::Ssd)] = 0.0002;  // 200 KB/s: 2 chunks ~ 0.65 s
  {
    AttentionStore st(c);
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(96)));  // 3 whole chunks
    ASSERT_EQ(st.write_back(), 1u);
    st.wait_idle();
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(160)));  // its copy: 3 of 5
    ASSERT_TRUE(save_entry(st, 2, 2, kShape, iota_positions(64)));
    ASSERT_TRUE(save_entry(st, 3, 3, kShape, iota_positions(64)));
    ASSERT_EQ(st.used_bytes(TierKind::Dram), c.dram_bytes);
    ASSERT_EQ(st.write_back(), 1u);  // 1's chunks 3 and 4
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    bool saved = false;
    std::thread t([&] { saved = save_entry(st, 1, 1, kShape, iota_positions(192)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // t waits for the write-back
    EXPECT_TRUE(st.truncate(1, TruncateSpec{32, 0, 32}));         // chunk 1 goes
    t.join();
    ASSERT_TRUE(saved);
    st.wait_idle();
    EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(192)), 192);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  std::filesystem::remove_all(dir);
}

// A load of an SSD entry that began before the entry's promotion reads the SSD slots that
// then become its copy. A save admitted below takes that copy's chunks; when it is aborted
// they go back only after that load (the save's entry lends through the entry they came
// from), so a demotion cannot write over them while the load still has them to read.
TEST(SaveAdmission, TakenCopyChunksWaitForTheLoadsOfTheEntryTheyCameFrom) {
  const std::string dir = testing::fresh_dir("admit_lender");
  auto gate = std::make_shared<testing::GatedIo>(make_pread_backend());
  StoreConfig c = cfg(dir, true, 0);
  c.io_backend = gate;
  {
    AttentionStore st(c);
    struct Open {  // a failed assertion must not leave the store's threads at the gate
      testing::GatedIo* g;
      ~Open() { g->open(); }
    } open_on_exit{gate.get()};
    const auto pos = iota_positions(64);
    for (SessionId s = 1; s <= 4; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos));
    st.wait_idle();
    ASSERT_EQ(where(st, 1), TierKind::Ssd);  // LRU's victim when 4 came
    ASSERT_TRUE(st.erase(4));                // DRAM room for 1
    gate->hold_reads();
    ASSERT_EQ(st.prefetch({1}), 1u);  // its promotion waits to read it
    std::vector<std::vector<char>> bufs(4, std::vector<char>(64 * 512));
    const std::vector<LayerTarget> tg{{bufs[0].data(), bufs[1].data()},
                                      {bufs[2].data(), bufs[3].data()}};
    LoadHandle h = st.load(testing::key_for(1, 1, pos), tg, -1, 0);  // pinned, nothing read
    ASSERT_TRUE(h.ok());
    gate->open();
    st.wait_idle();
    ASSERT_EQ(where(st, 1), TierKind::Dram);
    ASSERT_EQ(st.ssd_copy_bytes(), kEntryChunks * kChunk);  // the slots `h` reads
    st.prefetch({});  // 1 no longer in the look-ahead
    for (SessionId s : {2, 3}) ASSERT_EQ(load_check(st, s, s, kShape, pos), 64);  // 1 is LRU
    {
      SaveHandle sv = st.begin_save(SaveRequest{1, testing::test_fp(), KeyEncoding::PreRope, kShape,
                                                tokens_for(1, iota_positions(96))});
      ASSERT_TRUE(sv.ok());
      ASSERT_EQ(sv.tier(), TierKind::Ssd);
      ASSERT_EQ(st.stats().get(Counter::SavesAdmittedBelow), 1u);
    }  // aborted: the chunks it took are freed once `h` ends
    // 5 makes room in DRAM: 2 is demoted into whatever SSD slots were freed last.
    ASSERT_TRUE(save_entry(st, 5, 5, kShape, pos));
    st.wait_idle();
    EXPECT_EQ(where(st, 2), TierKind::Ssd);
    EXPECT_TRUE(h.wait_all());
    for (int l = 0; l < 2; ++l) {
      EXPECT_EQ(bufs[2 * l], layer_bytes(1, kShape, l, 0, pos)) << l;
      EXPECT_EQ(bufs[2 * l + 1], layer_bytes(1, kShape, l, 1, pos)) << l;
    }
    EXPECT_EQ(st.stats().get(Counter::ChecksumFailures), 0u);
    h = LoadHandle();
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
