// Append saves (SaveRequest::append): a turn's save that extends the session's entry writes
// only the chunks from the entry's last partial one on and shares the whole ones.
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

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{4, 256};  // 64 tokens per chunk
constexpr uint64_t kTokenBytes = 256;

StoreConfig ssd_cfg(const std::string& dir, uint64_t chunks) {
  StoreConfig c;
  c.store_dir = dir;
  c.ssd_bytes = chunks * kChunk;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  return c;
}

uint64_t written(const AttentionStore& st, TierKind t) {
  return st.stats().get(t, TierCounter::BytesWritten);
}

std::vector<std::vector<char>> layer_bufs(uint64_t seed, const std::vector<int64_t>& pos) {
  std::vector<std::vector<char>> bufs;
  for (int l = 0; l < kShape.n_layers; ++l) {
    bufs.push_back(testing::layer_bytes(seed, kShape, l, 0, pos));
    bufs.push_back(testing::layer_bytes(seed, kShape, l, 1, pos));
  }
  return bufs;
}

SaveRequest request(SessionId s, uint64_t seed, const std::vector<int64_t>& pos) {
  return SaveRequest{s, testing::test_fp(), KeyEncoding::PreRope, kShape,
                     testing::tokens_for(seed, pos)};
}

TEST(Append, WritesOnlyTheNewChunksServesEverythingAndSurvivesARestart) {
  const std::string dir = testing::fresh_dir("append");
  {
    AttentionStore st(ssd_cfg(dir, 64));
    ASSERT_TRUE(save_entry(st, 1, 5, kShape, iota_positions(150)));  // chunks 0, 1 whole, 2 partial
    const uint64_t before = written(st, TierKind::Ssd);
    ASSERT_TRUE(save_entry(st, 1, 5, kShape, iota_positions(300)));
    // Tokens 128..299 are written (chunk 2 again, now whole, and chunks 3, 4), 0..127 shared.
    EXPECT_EQ(written(st, TierKind::Ssd) - before, (300 - 128) * kTokenBytes * 2 * 4);
    EXPECT_EQ(st.stats().get(Counter::AppendSaves), 1u);
    EXPECT_EQ(load_check(st, 1, 5, kShape, iota_positions(300)), 300);
    EXPECT_EQ(st.used_bytes(TierKind::Ssd), 2 * 4 * 5 * kChunk);  // the old partial chunk freed
    // A history that is not an extension is a full save.
    ASSERT_TRUE(save_entry(st, 1, 6, kShape, iota_positions(200)));
    EXPECT_EQ(st.stats().get(Counter::AppendSaves), 1u);
    EXPECT_EQ(load_check(st, 1, 6, kShape, iota_positions(200)), 200);
    ASSERT_TRUE(save_entry(st, 1, 6, kShape, iota_positions(260)));
    EXPECT_EQ(st.stats().get(Counter::AppendSaves), 2u);
    EXPECT_EQ(st.used_bytes(TierKind::Ssd), 2 * 4 * 5 * kChunk);
  }
  AttentionStore again(ssd_cfg(dir, 64));  // the journal names the shared chunks too
  EXPECT_EQ(load_check(again, 1, 6, kShape, iota_positions(260)), 260);
  uint64_t chunks = 0;
  EXPECT_EQ(again.verify_all(&chunks), 0u);
  EXPECT_EQ(chunks, 2u * 4 * 5);
  std::filesystem::remove_all(dir);
}

TEST(Append, ReplaceNowDropsAnEntryItCannotExtend) {
  const std::string dir = testing::fresh_dir("append_replace");
  AttentionStore st(ssd_cfg(dir, 64));
  ASSERT_TRUE(save_entry(st, 1, 5, kShape, iota_positions(150)));
  SaveRequest req = request(1, 9, iota_positions(300));  // another history
  req.replace_now = true;
  SaveHandle h = st.begin_save(req);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.shared_tokens(), 0);
  EXPECT_FALSE(st.where(1, nullptr));  // dropped at once, not when the commit lands
  h.abort();
  EXPECT_EQ(st.used_bytes(TierKind::Ssd), 0u);
  std::filesystem::remove_all(dir);
}

TEST(Append, AnEraseOfTheBaseBeforeTheCommitFailsTheAppendAndFreesAll) {
  const std::string dir = testing::fresh_dir("append_erase");
  AttentionStore st(ssd_cfg(dir, 64));
  ASSERT_TRUE(save_entry(st, 1, 5, kShape, iota_positions(150)));
  const auto pos = iota_positions(300);
  SaveHandle h = st.begin_save(request(1, 5, pos));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.shared_tokens(), 128);
  EXPECT_TRUE(st.erase(1));  // the shared chunks are not the append's to keep
  auto bufs = layer_bufs(5, pos);
  for (int l = 0; l < kShape.n_layers; ++l) {
    h.write_layer(l, LayerSource{bufs[2 * l].data(), bufs[2 * l + 1].data()});
  }
  EXPECT_FALSE(h.commit().get());
  st.wait_idle();
  EXPECT_FALSE(st.lookup(testing::key_for(1, 5, pos)).hit());
  EXPECT_EQ(st.used_bytes(TierKind::Ssd), 0u);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

// A load of the base that is still running when the append lands reads chunks that now
// belong to the new entry: when that entry goes and its space is reused, they must wait for
// the load (the new entry's lender).
TEST(Append, ALoadOfTheBaseOutlivesTheNewEntrysSharedChunks) {
  const std::string dir = testing::fresh_dir("append_lender");
  AttentionStore st(ssd_cfg(dir, 64));
  const auto old_pos = iota_positions(150);
  ASSERT_TRUE(save_entry(st, 1, 5, kShape, old_pos));
  std::vector<std::vector<char>> out(8, std::vector<char>(150 * kTokenBytes, 0x5a));
  std::vector<LayerTarget> tg;
  for (int l = 0; l < 4; ++l) tg.push_back({out[2 * l].data(), out[2 * l + 1].data()});
  LoadHandle base_load = st.load(testing::key_for(1, 5, old_pos), tg, -1, 0);  // held back
  ASSERT_TRUE(base_load.ok());
  ASSERT_TRUE(save_entry(st, 1, 5, kShape, iota_positions(300)));  // appends, takes 0..127
  EXPECT_EQ(st.stats().get(Counter::AppendSaves), 1u);
  EXPECT_TRUE(st.erase(1));  // the new entry goes: its shared chunks must not be reused yet
  for (SessionId s = 2; s <= 5; ++s) {  // fill the store: freed slots are reused first
    ASSERT_TRUE(save_entry(st, s, 40 + s, kShape, iota_positions(128)));
  }
  ASSERT_TRUE(base_load.wait_all());  // now start and read the old entry's chunks
  for (int l = 0; l < 4; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      EXPECT_EQ(out[2 * l + kv], testing::layer_bytes(5, kShape, l, kv, old_pos)) << l << kv;
    }
  }
  base_load = LoadHandle();
  st.wait_idle();
  EXPECT_EQ(st.used_bytes(TierKind::Ssd), st.sessions().size() * 2 * 4 * 2 * kChunk);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

std::unique_ptr<SaveHandle> begin_written(AttentionStore& st, SessionId s, uint64_t seed,
                                          const std::vector<int64_t>& pos,
                                          std::vector<std::vector<char>>* bufs) {
  auto h = std::make_unique<SaveHandle>(st.begin_save(request(s, seed, pos)));
  if (!h->ok()) return h;
  *bufs = layer_bufs(seed, pos);
  for (int l = 0; l < kShape.n_layers; ++l) {
    h->write_layer(l, LayerSource{(*bufs)[2 * l].data(), (*bufs)[2 * l + 1].data()});
  }
  return h;
}

// In memory the entry's last partial chunk grows in place: exactly the new tokens are written.
// Two appends of one entry at once: only the first extends it in place, the other rewrites
// that chunk, and only the first can commit.
TEST(Append, InMemoryTheLastPartialChunkGrowsInPlace) {
  StoreConfig c;
  c.dram_bytes = 96 * kChunk;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  AttentionStore st(c);
  ASSERT_TRUE(save_entry(st, 1, 5, kShape, iota_positions(150)));
  const uint64_t before = written(st, TierKind::Dram);
  ASSERT_TRUE(save_entry(st, 1, 5, kShape, iota_positions(300)));
  EXPECT_EQ(written(st, TierKind::Dram) - before, (300 - 150) * kTokenBytes * 2 * 4);
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 2 * 4 * 5 * kChunk);
  EXPECT_EQ(load_check(st, 1, 5, kShape, iota_positions(300)), 300);
  std::vector<std::vector<char>> ba, bb;
  auto a = begin_written(st, 1, 5, iota_positions(350), &ba);
  auto b = begin_written(st, 1, 5, iota_positions(360), &bb);
  ASSERT_TRUE(a->ok() && b->ok());
  EXPECT_EQ(a->shared_tokens(), 300);  // chunk 4 (tokens 256..299) extended in place
  EXPECT_EQ(b->shared_tokens(), 256);  // chunk 4 written anew
  EXPECT_TRUE(a->commit().get());
  EXPECT_FALSE(b->commit().get());  // its base is gone
  st.wait_idle();
  EXPECT_EQ(load_check(st, 1, 5, kShape, iota_positions(360)), 350);
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 2 * 4 * 6 * kChunk);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  uint64_t chunks = 0;
  EXPECT_EQ(st.verify_all(&chunks), 0u);
}

// Only the fastest tier is appended to: an entry demoted to SSD is rewritten whole in DRAM.
TEST(Append, AnEntryBelowTheFastestTierIsSavedWhole) {
  const std::string dir = testing::fresh_dir("append_tier");
  StoreConfig c = ssd_cfg(dir, 64);
  c.dram_bytes = 40 * kChunk;  // one 150-token entry (24 chunks), not two
  AttentionStore st(c);
  ASSERT_TRUE(save_entry(st, 1, 5, kShape, iota_positions(150)));
  ASSERT_TRUE(save_entry(st, 2, 6, kShape, iota_positions(150)));  // demotes session 1
  TierKind t;
  ASSERT_TRUE(st.where(1, &t));
  ASSERT_EQ(t, TierKind::Ssd);
  ASSERT_TRUE(save_entry(st, 2, 6, kShape, iota_positions(200)));  // DRAM: appends
  EXPECT_EQ(st.stats().get(Counter::AppendSaves), 1u);
  SaveRequest req = request(1, 5, iota_positions(300));
  req.replace_now = true;
  SaveHandle h = st.begin_save(req);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.shared_tokens(), 0);
  EXPECT_EQ(h.tier(), TierKind::Dram);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
