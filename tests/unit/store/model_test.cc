// Randomized operation sequences checked against a simple in-memory model (contents and
// accounting), and concurrent save/load/evict/truncate/erase from several threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "lib/store/attention_store.h"
#include "lib/store/entry.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using testing::iota_positions;
using testing::load_check;
using testing::save_entry;

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{3, 512};  // 32 tokens per chunk

struct ModelEntry {
  uint64_t seed = 0;
  std::vector<int64_t> positions;
};

// `clean_ahead`: StoreConfig::clean_ahead_bytes (write-backs run alongside everything).
StoreConfig cfg(const std::string& dir, uint64_t clean_ahead = 0) {
  StoreConfig c;
  c.clean_ahead_bytes = clean_ahead;
  c.hbm_bytes = 12 * kChunk;
  c.dram_bytes = 48 * kChunk;
  c.dram_reserve_bytes = 6 * kChunk;
  c.ssd_bytes = 160 * kChunk;
  c.store_dir = dir;
  c.chunk_bytes = kChunk;
  c.io_threads = 3;
  return c;
}

// Exact accounting: every tier's used bytes equal the chunks of the entries it holds (on the
// SSD, plus the copies that prefetched entries keep).
void check_accounting(AttentionStore& st) {
  st.wait_idle();
  uint64_t chunks[kNumTiers] = {};
  for (SessionId s : st.sessions()) {
    EntryMeta m;
    TierKind t;
    if (!st.entry_meta(s, &m) || !st.where(s, &t)) continue;
    chunks[static_cast<int>(t)] += m.n_chunks();
  }
  chunks[static_cast<int>(TierKind::Ssd)] += st.ssd_copy_bytes() / kChunk;
  for (int t = 0; t < kNumTiers; ++t) {
    const auto kind = static_cast<TierKind>(t);
    EXPECT_EQ(st.used_bytes(kind), chunks[t] * kChunk) << tier_name(kind);
    EXPECT_LE(st.used_bytes(kind), st.capacity_bytes(kind)) << tier_name(kind);
  }
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
}

// `replay_like`: DRAM over SSD with save-time admission (StoreConfig::save_admission), as
// replays run the store, instead of HBM over DRAM over SSD; `dram_chunks` of DRAM.
StoreConfig model_cfg(const std::string& dir, uint64_t clean_ahead, bool replay_like,
                      uint64_t dram_chunks) {
  StoreConfig c = cfg(dir, clean_ahead);
  if (replay_like) {
    c.hbm_bytes = 0;
    c.dram_bytes = dram_chunks * kChunk;
    c.ssd_bytes = 320 * kChunk;
    c.save_admission = true;
  }
  return c;
}

constexpr uint64_t kModelDram = 192;  // run_model: about three entries at their longest

void run_model(uint64_t clean_ahead, bool replay_like = false, uint64_t seed = 12345) {
  const std::string dir = testing::fresh_dir("model");
  std::map<SessionId, ModelEntry> model;
  std::mt19937_64 rng(seed);
  std::map<SessionId, TierKind> on_close;
  {
    AttentionStore st(model_cfg(dir, clean_ahead, replay_like, kModelDram));
    for (int step = 0; step < 400; ++step) {
      const SessionId s = 1 + rng() % 14;
      const int op = static_cast<int>(rng() % 10);
      if (op < 4) {  // save: the session's history extended (an append), or a new one
        auto it = model.find(s);
        ModelEntry e{rng(), iota_positions(static_cast<int64_t>(1 + rng() % 300))};
        const int64_t more = static_cast<int64_t>(1 + rng() % 80);
        if (it != model.end() && rng() % 4 != 0 &&
            it->second.positions.size() + static_cast<size_t>(more) <= 300) {
          e.seed = it->second.seed;
          e.positions = it->second.positions;
          for (int64_t k = 1; k <= more; ++k) e.positions.push_back(e.positions.back() + 1);
        }
        if (save_entry(st, s, e.seed, kShape, e.positions)) model[s] = e;
      } else if (op < 7) {  // load with the current history, sometimes extended
        auto it = model.find(s);
        if (it == model.end()) {
          EXPECT_EQ(load_check(st, s, 1, kShape, iota_positions(10)), -1);
          continue;
        }
        std::vector<int64_t> hist = it->second.positions;
        if (rng() % 2) hist.push_back(100000);
        const int64_t n = load_check(st, s, it->second.seed, kShape, hist);
        EXPECT_NE(n, -3) << "wrong data for " << s;
        EXPECT_NE(n, -2) << "failed load for " << s;
        if (n >= 0) {
          EXPECT_EQ(n, static_cast<int64_t>(it->second.positions.size()));
        }
      } else if (op == 7) {  // truncate
        auto it = model.find(s);
        const int64_t n = it == model.end() ? 0 : static_cast<int64_t>(it->second.positions.size());
        TruncateSpec spec{static_cast<int64_t>(rng() % 100), 0,
                          static_cast<int64_t>(rng() % 3) * 32};
        if (rng() % 3 == 0) spec.drop_tokens = 32 * static_cast<int64_t>(rng() % 3);
        const bool ok = st.truncate(s, spec);
        if (it == model.end()) continue;
        if (ok && spec.drop_tokens > 0) {
          auto& p = it->second.positions;
          std::vector<int64_t> kept(p.begin(), p.begin() + spec.sink_tokens);
          kept.insert(kept.end(), p.begin() + spec.sink_tokens + spec.drop_tokens, p.end());
          p = kept;
          if (p.empty()) model.erase(it);
        } else if (!ok && spec.sink_tokens + spec.drop_tokens <= n) {
          EXPECT_FALSE(st.where(s, nullptr));  // a failed rewrite drops the entry
        }
      } else if (op == 8) {
        st.erase(s);
        model.erase(s);
      } else {
        std::vector<SessionId> window;
        for (int i = 0; i < 4; ++i) window.push_back(1 + rng() % 14);
        st.prefetch(window);
      }
      if (step % 50 == 0) check_accounting(st);
      // Whatever the store holds, the model holds with the same history.
      for (SessionId x : st.sessions()) ASSERT_TRUE(model.count(x)) << x;
    }
    check_accounting(st);
    for (SessionId x : st.sessions()) {
      TierKind t;
      st.where(x, &t);
      on_close[x] = t;
      EXPECT_EQ(load_check(st, x, model[x].seed, kShape, model[x].positions),
                static_cast<int64_t>(model[x].positions.size()));
    }
    EXPECT_GT(st.stats().get(TierKind::Dram, TierCounter::Evictions), 0u);
    if (clean_ahead > 0) {
      EXPECT_GT(st.stats().get(Counter::SsdChunksCleaned), 0u);
    }
  }
  // After a restart exactly the SSD entries come back, with the same contents.
  StoreConfig c = model_cfg(dir, 0, replay_like, kModelDram);
  c.hbm_bytes = 0;
  AttentionStore st(c);
  std::vector<SessionId> want;
  for (auto& [s, t] : on_close) {
    if (t == TierKind::Ssd) want.push_back(s);
  }
  EXPECT_EQ(st.sessions(), want);
  for (SessionId x : want) {
    EXPECT_EQ(load_check(st, x, model[x].seed, kShape, model[x].positions),
              static_cast<int64_t>(model[x].positions.size()));
  }
  check_accounting(st);
  std::filesystem::remove_all(dir);
}

TEST(Model, RandomSequencesMatchTheModel) {
  run_model(0);
}

TEST(Model, RandomSequencesMatchTheModelWithWriteBacks) {
  run_model(16 * kChunk);
}

TEST(Model, RandomSequencesOnDramAndSsdWithSaveAdmissionMatchTheModel) {
  for (uint64_t seed : {1, 2, 3}) run_model(16 * kChunk, true, seed);
}

// `demote_ahead`: StoreConfig::demote_ahead_bytes (HBM over DRAM, demotions in the background).
void run_concurrency(uint64_t clean_ahead, bool replay_like = false, uint64_t demote_ahead = 0) {
  const std::string dir = testing::fresh_dir("conc");
  // DRAM for about three of the sessions' entries at their longest (shorter than run_model's).
  StoreConfig c = model_cfg(dir, clean_ahead, replay_like, 128);
  c.demote_ahead_bytes = demote_ahead;
  c.journal_compact_bytes = 4 << 10;  // online compactions all along (a few records each)
  auto owner = std::make_unique<AttentionStore>(c);
  AttentionStore& st = *owner;
  std::atomic<int> wrong{0}, failed{0}, hits{0};
  std::atomic<int64_t> last_len[17] = {};  // the last save's length per session (a hint)
  auto worker = [&](int id) {
    std::mt19937_64 rng(static_cast<uint64_t>(id) * 77 + 1);
    for (int i = 0; i < 120; ++i) {
      const SessionId s = 1 + rng() % 16;  // shared among threads
      const int op = static_cast<int>(rng() % 10);
      // Contents are a function of the session, so any thread can verify any entry.
      if (op < 4) {
        // Mostly a turn's save, extending the session's history (an append), else any length.
        int64_t n = static_cast<int64_t>(1 + rng() % 200);
        if (rng() % 4 != 0) n = std::min<int64_t>(200, last_len[s] + 1 + rng() % 40);
        last_len[s] = n;
        save_entry(st, s, s, kShape, iota_positions(n));
      } else if (op < 8) {
        const int64_t n = load_check(st, s, s, kShape, iota_positions(200));
        if (n == -3) ++wrong;
        if (n == -2) ++failed;
        if (n > 0) ++hits;
      } else if (op == 8) {
        if (rng() % 2)
          st.erase(s);
        else
          st.truncate(s, TruncateSpec{static_cast<int64_t>(rng() % 64), 0, 0});
      } else {
        st.prefetch({s, 1 + rng() % 16});
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  st.wait_idle();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(hits.load(), 0);
  if (demote_ahead > 0) {
    EXPECT_GT(st.stats().get(Counter::DemotionsAhead), 0u);
  }
  // Each online compaction found in the records exactly the SSD entries the index had.
  EXPECT_GT(st.stats().get(Counter::JournalCompactions), 0u);
  EXPECT_EQ(st.stats().get(Counter::JournalIndexCompactions), 0u);
  check_accounting(st);
  uint64_t chunks = 0;
  EXPECT_EQ(st.verify_all(&chunks), 0u);
  std::vector<SessionId> on_ssd;
  for (SessionId s : st.sessions()) {
    TierKind t;
    if (st.where(s, &t) && t == TierKind::Ssd) on_ssd.push_back(s);
  }
  std::map<SessionId, EntryMeta> metas;
  for (SessionId s : on_ssd) st.entry_meta(s, &metas[s]);
  owner.reset();
  c.clean_ahead_bytes = 0;
  AttentionStore again(c);
  // Exactly the SSD entries come back, each with the history it had.
  EXPECT_EQ(again.sessions(), on_ssd);
  for (SessionId s : on_ssd) {
    EntryMeta m;
    ASSERT_TRUE(again.entry_meta(s, &m));
    EXPECT_EQ(m.tokens, metas[s].tokens) << s;
  }
  EXPECT_EQ(again.verify_all(&chunks), 0u);
  std::filesystem::remove_all(dir);
}

TEST(Concurrency, ThreadsSaveLoadEvictTruncateErase) {
  run_concurrency(0);
}

TEST(Concurrency, ThreadsSaveLoadEvictTruncateEraseWithWriteBacks) {
  run_concurrency(16 * kChunk);
}

TEST(Concurrency, ThreadsSaveLoadEvictTruncateEraseWithDemotionsAhead) {
  run_concurrency(16 * kChunk, false, 6 * kChunk);  // half the HBM tier kept free
}

TEST(Concurrency, ThreadsOnDramAndSsdWithSaveAdmissionAndWriteBacks) {
  run_concurrency(16 * kChunk, true);
}

}  // namespace
}  // namespace cb::store
