// AttentionStore behaviour: save/load per tier, lookups that must miss, truncation, TTL,
// eviction through the advisor, prefetch and the DRAM reserve, statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/core/sysinfo.h"
#include "lib/store/attention_store.h"
#include "lib/store/entry.h"
#include "lib/store/faulty_io.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using testing::GatedIo;
using testing::iota_positions;
using testing::load_check;
using testing::save_entry;

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{4, 256};  // 64 tokens per chunk

struct FakeClock {
  std::shared_ptr<double> t = std::make_shared<double>(100.0);
  Clock fn() const {
    auto p = t;
    return [p] { return *p; };
  }
};

StoreConfig dram_cfg(uint64_t dram, FakeClock* clock = nullptr) {
  StoreConfig c;
  c.dram_bytes = dram;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  if (clock) c.clock = clock->fn();
  return c;
}

TEST(Store, DramRoundTripLayerByLayer) {
  AttentionStore st(dram_cfg(8 << 20));
  const auto pos = iota_positions(150);  // 3 chunks, last partial
  ASSERT_TRUE(save_entry(st, 1, 11, kShape, pos));
  TierKind t;
  ASSERT_TRUE(st.where(1, &t));
  EXPECT_EQ(t, TierKind::Dram);
  EXPECT_EQ(load_check(st, 1, 11, kShape, pos), 150);
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 2 * 4 * 3 * kChunk);
  // Per-layer waits.
  std::vector<std::vector<char>> bufs(8, std::vector<char>(150 * 256));
  std::vector<LayerTarget> tg;
  for (int l = 0; l < 4; ++l) tg.push_back({bufs[2 * l].data(), bufs[2 * l + 1].data()});
  LoadHandle h = st.load(testing::key_for(1, 11, pos), tg);
  ASSERT_TRUE(h.ok());
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(h.wait_layer(l));
  EXPECT_EQ(bufs[5], testing::layer_bytes(11, kShape, 2, 1, pos));
  auto s = st.stats();
  EXPECT_EQ(s.get(TierKind::Dram, TierCounter::Hits), 2u);
  EXPECT_EQ(s.get(Counter::Saves), 1u);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "session 1: 1 pin(s)\n");  // `h`'s
  h = LoadHandle();
  EXPECT_EQ(st.audit_slots(), "");
}

TEST(Store, EntryInvisibleUntilCommitAndAbortFreesSpace) {
  AttentionStore st(dram_cfg(8 << 20));
  const auto pos = iota_positions(64);
  auto toks = testing::tokens_for(5, pos);
  {
    SaveHandle h =
        st.begin_save(SaveRequest{9, testing::test_fp(), KeyEncoding::PreRope, kShape, toks});
    ASSERT_TRUE(h.ok());
    auto k = testing::layer_bytes(5, kShape, 0, 0, pos),
         v = testing::layer_bytes(5, kShape, 0, 1, pos);
    EXPECT_TRUE(h.write_layer(0, {k.data(), v.data()}).get());
    EXPECT_FALSE(st.lookup(testing::key_for(9, 5, pos)).hit());
    EXPECT_GT(st.used_bytes(TierKind::Dram), 0u);
  }  // aborted
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 0u);
  // Committing with a missing layer fails and frees the space.
  SaveHandle h =
      st.begin_save(SaveRequest{9, testing::test_fp(), KeyEncoding::PreRope, kShape, toks});
  EXPECT_FALSE(h.commit().get());
  EXPECT_FALSE(st.where(9, nullptr));
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 0u);
}

TEST(Store, MissesForFingerprintEncodingHistoryAndUnknown) {
  AttentionStore st(dram_cfg(8 << 20));
  const auto pos = iota_positions(130);
  ASSERT_TRUE(save_entry(st, 1, 3, kShape, pos));
  EXPECT_EQ(load_check(st, 2, 3, kShape, pos), -1);
  EXPECT_EQ(load_check(st, 1, 3, kShape, pos, KeyEncoding::PostRope), -1);
  EXPECT_EQ(load_check(st, 1, 3, kShape, pos, KeyEncoding::PreRope, testing::test_fp("other")), -1);
  EXPECT_EQ(load_check(st, 1, 4, kShape, pos), -1);  // another conversation's tokens
  // A caller whose targets hold another geometry (a journal that lies about an entry's shape
  // under the right fingerprint): its layers would overrun them, so it misses.
  EXPECT_EQ(load_check(st, 1, 3, EntryShape{kShape.n_layers, 2 * kShape.token_bytes}, pos), -1);
  EXPECT_EQ(load_check(st, 1, 3, EntryShape{kShape.n_layers + 1, kShape.token_bytes}, pos), -1);
  auto s = st.stats();
  EXPECT_EQ(s.get(Counter::Misses), 6u);
  EXPECT_EQ(s.get(Counter::MissNotFound), 1u);
  EXPECT_EQ(s.get(Counter::MissFingerprint), 4u);
  EXPECT_EQ(s.get(Counter::MissHistory), 1u);
  // A longer history matches the whole entry; a shorter one the agreeing whole chunks.
  auto longer = iota_positions(200);
  EXPECT_EQ(load_check(st, 1, 3, kShape, longer), 130);
  EXPECT_EQ(load_check(st, 1, 3, kShape, iota_positions(100)), 64);
  // An edit inside chunk 1 keeps chunk 0 servable.
  LookupKey k = testing::key_for(1, 3, pos);
  k.history[70] += 1;
  LookupResult r = st.lookup(k);
  EXPECT_TRUE(r.hit());
  EXPECT_EQ(r.matched_tokens, 64);
}

TEST(Store, TruncateAlignedIsMetadataOnly) {
  AttentionStore st(dram_cfg(8 << 20));
  auto pos = iota_positions(300);  // 5 chunks: 64*4 + 44
  ASSERT_TRUE(save_entry(st, 1, 8, kShape, pos));
  const uint64_t before = st.used_bytes(TierKind::Dram);
  // Keep 64 sink tokens, drop 128: chunks 1 and 2 go.
  ASSERT_TRUE(st.truncate(1, TruncateSpec{128, 0, 64}));
  std::vector<int64_t> kept(pos.begin(), pos.begin() + 64);
  kept.insert(kept.end(), pos.begin() + 192, pos.end());
  EXPECT_EQ(load_check(st, 1, 8, kShape, kept), 172);
  EXPECT_EQ(st.used_bytes(TierKind::Dram), before - 2 * 4 * 2 * kChunk);
  EXPECT_EQ(st.stats().get(Counter::TruncationRewrites), 0u);
  // The pre-truncation history no longer matches beyond the sink.
  EXPECT_EQ(load_check(st, 1, 8, kShape, pos), 64);
}

TEST(Store, TruncateUnalignedRewritesAndRatio) {
  AttentionStore st(dram_cfg(8 << 20));
  auto pos = iota_positions(200);
  ASSERT_TRUE(save_entry(st, 1, 8, kShape, pos));
  ASSERT_TRUE(st.truncate(1, TruncateSpec{0, 0.25, 4}));  // drop 50 after 4 sink tokens
  std::vector<int64_t> kept(pos.begin(), pos.begin() + 4);
  kept.insert(kept.end(), pos.begin() + 54, pos.end());
  EXPECT_EQ(load_check(st, 1, 8, kShape, kept), 150);
  EXPECT_EQ(st.stats().get(Counter::TruncationRewrites), 1u);
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 2 * 4 * 3 * kChunk);
  EXPECT_FALSE(st.truncate(1, TruncateSpec{500, 0, 0}));  // more than it holds
  EXPECT_FALSE(st.truncate(77, TruncateSpec{1, 0, 0}));
  ASSERT_TRUE(st.truncate(1, TruncateSpec{150, 0, 0}));  // everything: erased
  EXPECT_FALSE(st.where(1, nullptr));
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 0u);
}

TEST(Store, TtlExpiryAndErase) {
  FakeClock clock;
  StoreConfig c = dram_cfg(8 << 20, &clock);
  c.default_ttl = 10;
  AttentionStore st(c);
  auto pos = iota_positions(64);
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
  ASSERT_TRUE(save_entry(st, 2, 2, kShape, pos, KeyEncoding::PreRope, testing::test_fp(), 0));
  ASSERT_TRUE(save_entry(st, 3, 3, kShape, pos));
  *clock.t += 5;
  EXPECT_EQ(load_check(st, 1, 1, kShape, pos), 64);  // refreshes last access
  *clock.t += 7;
  EXPECT_EQ(st.expire(), 1u);  // session 3
  EXPECT_FALSE(st.where(3, nullptr));
  *clock.t += 20;
  EXPECT_EQ(load_check(st, 1, 1, kShape, pos), -1);  // expired at lookup
  EXPECT_EQ(st.stats().get(Counter::MissExpired), 1u);
  EXPECT_EQ(load_check(st, 2, 2, kShape, pos), 64);  // ttl 0: never expires
  // A truncation does not revive an expired entry (its rewrite would be a fresh save).
  ASSERT_TRUE(save_entry(st, 4, 4, kShape, pos));
  *clock.t += 20;
  EXPECT_FALSE(st.truncate(4, TruncateSpec{5, 0, 0}));
  EXPECT_FALSE(st.where(4, nullptr));
  EXPECT_EQ(st.stats().get(Counter::TruncationRewrites), 0u);
  EXPECT_TRUE(st.erase(2));
  EXPECT_FALSE(st.erase(2));
  EXPECT_EQ(st.used_bytes(TierKind::Dram), 0u);
}

// Time the caller skipped (an engine's idle gap) counts on the store's clock: entries age
// across it as on the caller's clock, and access times after it are later by as much.
TEST(Store, SkippedTimeAgesEntries) {
  FakeClock clock;
  StoreConfig c = dram_cfg(8 << 20, &clock);
  c.default_ttl = 10;
  AttentionStore st(c);
  auto pos = iota_positions(64);
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
  ASSERT_TRUE(save_entry(st, 2, 2, kShape, pos));
  st.skip_time(6);
  *clock.t += 1;
  EXPECT_EQ(load_check(st, 2, 2, kShape, pos), 64);  // 7 s: alive, its access refreshed
  EntryMeta m;
  ASSERT_TRUE(st.entry_meta(2, &m));
  EXPECT_DOUBLE_EQ(m.last_access, *clock.t + 6);
  st.skip_time(5);
  EXPECT_EQ(load_check(st, 1, 1, kShape, pos), -1);  // 12 s unused: expired
  EXPECT_EQ(st.stats().get(Counter::MissExpired), 1u);
  EXPECT_EQ(load_check(st, 2, 2, kShape, pos), 64);  // 5 s since its access
}

TEST(Store, FullDramWithoutSsdDropsLruAndNeverExceedsBudget) {
  AttentionStore st(dram_cfg(16 * kChunk));  // 2 entries of 8 chunks
  auto pos = iota_positions(64);
  FakeClock unused;
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
  ASSERT_TRUE(save_entry(st, 2, 2, kShape, pos));
  EXPECT_EQ(load_check(st, 1, 1, kShape, pos), 64);  // 1 is now more recent
  ASSERT_TRUE(save_entry(st, 3, 3, kShape, pos));
  EXPECT_TRUE(st.where(1, nullptr));
  EXPECT_FALSE(st.where(2, nullptr));
  EXPECT_LE(st.used_bytes(TierKind::Dram), 16 * kChunk);
  EXPECT_EQ(st.stats().get(TierKind::Dram, TierCounter::Drops), 1u);
  // Bigger than the whole tier: refused, nothing dropped.
  EXPECT_FALSE(save_entry(st, 4, 4, kShape, iota_positions(64 * 3)));
  EXPECT_TRUE(st.where(1, nullptr) && st.where(3, nullptr));
  EXPECT_EQ(st.stats().get(Counter::SaveFailures), 1u);
}

TEST(Store, DemotionToSsdPrefetchAndReserve) {
  const std::string dir = testing::fresh_dir("tiers");
  StoreConfig c = dram_cfg(24 * kChunk);
  c.dram_reserve_bytes = 8 * kChunk;  // saves may use 16 chunks: two entries
  c.ssd_bytes = 64 * kChunk;
  c.store_dir = dir;
  AttentionStore st(c);
  auto pos = iota_positions(64);
  for (SessionId s = 1; s <= 4; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos));
  TierKind t;
  ASSERT_TRUE(st.where(1, &t));
  EXPECT_EQ(t, TierKind::Ssd);
  ASSERT_TRUE(st.where(4, &t));
  EXPECT_EQ(t, TierKind::Dram);
  EXPECT_EQ(st.stats().get(TierKind::Dram, TierCounter::Evictions), 2u);
  EXPECT_GE(st.capacity_bytes(TierKind::Dram) - st.used_bytes(TierKind::Dram), 8 * kChunk);
  // An entry on SSD loads directly from SSD.
  EXPECT_EQ(load_check(st, 2, 2, kShape, pos), 64);
  EXPECT_EQ(st.stats().get(TierKind::Ssd, TierCounter::Hits), 1u);
  // Prefetch session 1: it goes into the reserve, then the reserve is restored by demotion.
  EXPECT_EQ(st.prefetch({1}), 1u);
  st.wait_idle();
  ASSERT_TRUE(st.where(1, &t));
  EXPECT_EQ(t, TierKind::Dram);
  EXPECT_EQ(st.stats().get(Counter::Prefetches), 1u);
  EXPECT_GE(st.capacity_bytes(TierKind::Dram) - st.used_bytes(TierKind::Dram), 8 * kChunk);
  for (SessionId s = 1; s <= 4; ++s) EXPECT_EQ(load_check(st, s, s, kShape, pos), 64) << s;
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  auto j = nlohmann::json::parse(st.stats().to_json());
  EXPECT_EQ(j["prefetches"], 1);
  EXPECT_TRUE(j["tiers"].contains("ssd"));
  EXPECT_GT(j["tiers"]["ssd"]["bytes_written"].get<uint64_t>(), 0u);
  EXPECT_GT(j["tiers"]["dram"]["write_gbps"].get<double>(), 0.0);
  std::filesystem::remove_all(dir);
}

TEST(Store, HbmTierIsFirstAndDemotesToDram) {
  StoreConfig c = dram_cfg(32 * kChunk);
  c.hbm_bytes = 8 * kChunk;
  AttentionStore st(c);
  auto pos = iota_positions(64);
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
  TierKind t;
  ASSERT_TRUE(st.where(1, &t));
  EXPECT_EQ(t, TierKind::Hbm);
  ASSERT_TRUE(save_entry(st, 2, 2, kShape, pos));
  ASSERT_TRUE(st.where(1, &t));
  EXPECT_EQ(t, TierKind::Dram);
  EXPECT_EQ(load_check(st, 1, 1, kShape, pos), 64);
  EXPECT_EQ(load_check(st, 2, 2, kShape, pos), 64);
}

class ScriptedAdvisor : public PlacementAdvisor {
 public:
  std::vector<Victim> choose_victims(TierKind, uint64_t, const std::vector<EntryInfo>& c,
                                     const std::vector<SessionId>& lookahead, double) override {
    ++victim_calls;
    last_lookahead = lookahead;
    std::vector<Victim> out;
    for (const auto& e : c) {
      if (e.session == prefer) out.push_back({e.session, drop});
    }
    return out;
  }
  std::vector<SessionId> choose_prefetch(const std::vector<SessionId>&,
                                         const std::vector<EntryInfo>&, uint64_t, double) override {
    return {};
  }
  SessionId prefer = 0;
  bool drop = false;
  int victim_calls = 0;
  std::vector<SessionId> last_lookahead;
};

TEST(Store, AdvisorDecidesVictimsAndCanRefuse) {
  auto adv = std::make_shared<ScriptedAdvisor>();
  StoreConfig c = dram_cfg(16 * kChunk);
  c.advisor = adv;
  AttentionStore st(c);
  auto pos = iota_positions(64);
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
  ASSERT_TRUE(save_entry(st, 2, 2, kShape, pos));
  st.prefetch({2, 1});  // records the window (no SSD: nothing fetched)
  adv->prefer = 2;
  ASSERT_TRUE(save_entry(st, 3, 3, kShape, pos));
  EXPECT_FALSE(st.where(2, nullptr));
  EXPECT_TRUE(st.where(1, nullptr));
  EXPECT_EQ(adv->last_lookahead, (std::vector<SessionId>{2, 1}));
  adv->prefer = 99;  // refuses: the save fails, nothing is dropped
  EXPECT_FALSE(save_entry(st, 4, 4, kShape, pos));
  EXPECT_TRUE(st.where(1, nullptr) && st.where(3, nullptr));
}

// First in, first out by EntryInfo::created (lib/policy's Fifo, which test_store cannot link).
class FifoAdvisor : public PlacementAdvisor {
 public:
  std::vector<Victim> choose_victims(TierKind, uint64_t bytes_needed,
                                     const std::vector<EntryInfo>& c, const std::vector<SessionId>&,
                                     double) override {
    std::vector<EntryInfo> order = c;
    std::sort(order.begin(), order.end(), [](const EntryInfo& a, const EntryInfo& b) {
      return a.created != b.created ? a.created < b.created : a.session < b.session;
    });
    std::vector<Victim> out;
    uint64_t freed = 0;
    for (const EntryInfo& e : order) {
      if (freed >= bytes_needed) break;
      out.push_back({e.session, false});
      freed += e.bytes;
    }
    return out;
  }
  std::vector<SessionId> choose_prefetch(const std::vector<SessionId>&,
                                         const std::vector<EntryInfo>&, uint64_t, double) override {
    return {};
  }
};

// Every turn re-saves its session's entry. The new entry keeps the first insertion time
// (created) whichever way it replaces the old one: a plain re-save, the engine's erase then
// save with inserted_at(), or an unaligned truncation's rewrite; last_access moves on. So
// FIFO evicts the session saved first even though it was re-saved later, LRU the session
// idle longest.
TEST(Store, ResaveKeepsFirstInsertionSoFifoAndLruDiffer) {
  for (const bool fifo : {false, true}) {
    for (const bool erase_first : {false, true}) {
      SCOPED_TRACE(std::string(fifo ? "fifo" : "lru") + (erase_first ? ", erase first" : ""));
      FakeClock clock;
      StoreConfig c = dram_cfg(24 * kChunk, &clock);  // three entries of 8 chunks, no SSD
      if (fifo) {
        c.advisor = std::make_shared<FifoAdvisor>();
      } else {
        c.advisor = std::make_shared<LruAdvisor>();
      }
      AttentionStore st(c);
      const auto pos = iota_positions(64);
      EXPECT_TRUE(std::isnan(st.inserted_at(1)));
      *clock.t = 100;
      ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
      *clock.t = 101;
      ASSERT_TRUE(save_entry(st, 2, 2, kShape, pos));
      *clock.t = 102;  // session 1's next turn re-saves its entry
      if (erase_first) {
        const double created = st.inserted_at(1);
        EXPECT_TRUE(st.erase(1));
        ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos, KeyEncoding::PreRope, testing::test_fp(), -1,
                               created));
      } else {
        ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));  // old entry replaced at commit
      }
      EntryMeta m;
      ASSERT_TRUE(st.entry_meta(1, &m));
      EXPECT_EQ(m.created, 100);
      EXPECT_EQ(m.last_access, 102);
      EXPECT_EQ(st.inserted_at(1), 100);
      *clock.t = 103;  // unaligned: read, cut, rewritten as a new entry
      ASSERT_TRUE(st.truncate(1, TruncateSpec{16, 0, 0}));
      ASSERT_TRUE(st.entry_meta(1, &m));
      EXPECT_EQ(m.n_tokens(), 48);
      EXPECT_EQ(m.created, 100);
      EXPECT_EQ(m.last_access, 103);
      EXPECT_EQ(st.stats().get(Counter::TruncationRewrites), 1u);
      *clock.t = 104;
      ASSERT_TRUE(save_entry(st, 3, 3, kShape, pos));  // the tier is full: 1, 2, 3
      *clock.t = 105;
      ASSERT_TRUE(save_entry(st, 4, 4, kShape, pos));  // one of them must go
      // FIFO: 1 entered first (t=100) although it was written last before 3; LRU: 2 has
      // been idle since t=101.
      const SessionId victim = fifo ? 1 : 2, kept = fifo ? 2 : 1;
      EXPECT_FALSE(st.where(victim, nullptr));
      EXPECT_TRUE(st.where(kept, nullptr));
      EXPECT_TRUE(st.where(3, nullptr) && st.where(4, nullptr));
      EXPECT_EQ(st.stats().get(TierKind::Dram, TierCounter::Drops), 1u);
      EXPECT_TRUE(std::isnan(st.inserted_at(victim)));
      EXPECT_EQ(st.inserted_at(4), 105);  // a session's first save is its insertion
    }
  }
}

// Both memory tiers are host memory: budgets beyond it are refused naming the option given,
// and two that add past 2^64 (which wrapped to a small sum) as well.
TEST(Store, MemoryBudgetsBeyondTheMachineNameTheirOptions) {
  const auto error = [](uint64_t dram, uint64_t hbm) {
    StoreConfig c = dram_cfg(0);
    c.dram_bytes = dram;
    c.hbm_bytes = hbm;
    try {
      AttentionStore st(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const uint64_t pib = 1ull << 50, half = 1ull << 63, chunk = dram_cfg(0).chunk_bytes;
  EXPECT_EQ(error(pib, 0).rfind("--dram: ", 0), 0u) << error(pib, 0);
  // The other tier at a budget of its own (replay's default DRAM tier) does not take the blame.
  EXPECT_EQ(error(chunk, pib).rfind("--hbm: the budget", 0), 0u) << error(chunk, pib);
  EXPECT_EQ(error(half, half).rfind("--dram: ", 0), 0u) << error(half, half);
  // Each fits, together they do not.
  const uint64_t phys = physical_memory_bytes();
  ASSERT_GT(phys, 4 * chunk);
  const uint64_t most = phys / 4 * 3 / chunk * chunk;
  const std::string both = error(most, most);
  EXPECT_EQ(both.rfind("--dram/--hbm: the DRAM and HBM budgets together", 0), 0u) << both;
}

TEST(Store, StartupErrorsAreClear) {
  StoreConfig c = dram_cfg(0);
  EXPECT_THROW(AttentionStore{c}, Error);  // no tier
  c.dram_bytes = c.chunk_bytes - 1;        // a tier that could hold nothing
  try {
    AttentionStore st(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dram"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("smaller than one chunk"), std::string::npos) << e.what();
  }
  c.dram_bytes = 0;
  c.store_dir = testing::fresh_dir("startup") + "/missing";
  c.ssd_bytes = 1 << 20;
  try {
    AttentionStore st(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  const std::string dir = testing::fresh_dir("startup2");
  c.store_dir = dir;
  c.ssd_bytes = 1ull << 60;  // larger than the device
  try {
    AttentionStore st(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("available"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/cachebench_store.json"));
  c.ssd_bytes = 0;  // adopting a store that is not there
  EXPECT_THROW(AttentionStore{c}, Error);
  c.ssd_bytes = 1 << 20;
  { AttentionStore st(c); }
  c.ssd_bytes = 2 << 20;  // another geometry
  try {
    AttentionStore st(c);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("clear"), std::string::npos) << e.what();
  }
  c.ssd_bytes = 0;  // adopt
  {
    AttentionStore st(c);
    EXPECT_EQ(st.capacity_bytes(TierKind::Ssd), 1u << 20);
  }
  c.chunk_bytes = 1000;
  c.store_dir.clear();
  c.ssd_bytes = 0;
  c.dram_bytes = 1 << 20;
  EXPECT_THROW(AttentionStore{c}, Error);
  c.chunk_bytes = kChunk;
  c.dram_reserve_bytes = 2 << 20;
  EXPECT_THROW(AttentionStore{c}, Error);
  AttentionStore ok(dram_cfg(1 << 20));
  EXPECT_THROW(
      ok.begin_save(SaveRequest{1, testing::test_fp(), KeyEncoding::PreRope, {4, 256}, {}}), Error);
  EXPECT_THROW(
      ok.begin_save(SaveRequest{1, testing::test_fp(), KeyEncoding::PreRope, {4, 1 << 20}, {1}}),
      Error);
  std::filesystem::remove_all(dir);
}

// ---- saves in flight: visible to loads from commit() until the commit lands ----------------

struct GatedStore {
  std::string dir;
  std::shared_ptr<FaultyIo> faults;
  std::shared_ptr<GatedIo> gate;
  std::unique_ptr<AttentionStore> st;
  explicit GatedStore(const std::string& name) {
    dir = testing::fresh_dir(name);
    faults = std::make_shared<FaultyIo>(make_pread_backend());
    gate = std::make_shared<GatedIo>(faults);
    StoreConfig c;
    c.store_dir = dir;
    c.ssd_bytes = 128 * kChunk;
    c.chunk_bytes = kChunk;
    c.io_threads = 2;
    c.io_backend = gate;
    st = std::make_unique<AttentionStore>(c);
  }
  ~GatedStore() {
    gate->open();
    st.reset();
    std::filesystem::remove_all(dir);
  }
};

/// Opens the gate when it goes out of scope (before the handles declared ahead of it).
struct OpenOnExit {
  GatedIo* gate;
  ~OpenOnExit() { gate->open(); }
};

/// A save of layer_bytes(seed, ...) whose layers are queued and whose commit() was called.
struct InFlight {
  std::vector<std::vector<char>> bufs;
  SaveHandle h;
  std::shared_future<bool> commit;
};

std::unique_ptr<InFlight> save_in_flight(AttentionStore& st, SessionId s, uint64_t seed,
                                         const std::vector<int64_t>& pos) {
  auto f = std::make_unique<InFlight>();
  f->h = st.begin_save(SaveRequest{s, testing::test_fp(), KeyEncoding::PreRope, kShape,
                                   testing::tokens_for(seed, pos)});
  if (!f->h.ok()) return nullptr;
  for (int l = 0; l < kShape.n_layers; ++l) {
    f->bufs.push_back(testing::layer_bytes(seed, kShape, l, 0, pos));
    f->bufs.push_back(testing::layer_bytes(seed, kShape, l, 1, pos));
  }
  for (int l = 0; l < kShape.n_layers; ++l) {
    f->h.write_layer(l, LayerSource{f->bufs[2 * l].data(), f->bufs[2 * l + 1].data()});
  }
  f->commit = f->h.commit();
  return f;
}

bool pending(const std::shared_future<bool>& f) {
  return f.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
}

TEST(Store, LoadOfASaveInFlightWaitsForItsWrites) {
  GatedStore g("in_flight_load");
  const auto pos = iota_positions(150);
  g.gate->close();
  auto f = save_in_flight(*g.st, 1, 7, pos);
  ASSERT_TRUE(f);
  EXPECT_TRUE(g.st->lookup(testing::key_for(1, 7, pos)).hit());
  EXPECT_FALSE(g.st->where(1, nullptr));  // not committed
  std::vector<std::vector<char>> bufs(8, std::vector<char>(150 * 256, 0x5a));
  std::vector<LayerTarget> tg;
  for (int l = 0; l < 4; ++l) tg.push_back({bufs[2 * l].data(), bufs[2 * l + 1].data()});
  LoadHandle h = g.st->load(testing::key_for(1, 7, pos), tg);
  const OpenOnExit guard{g.gate.get()};  // a failed assertion must not leave `h` waiting
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h.tokens(), 150);
  EXPECT_TRUE(pending(f->commit));  // nothing has been written: the load must wait
  g.gate->open();
  EXPECT_TRUE(h.wait_all());
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(bufs[2 * l], testing::layer_bytes(7, kShape, l, 0, pos)) << l;
    EXPECT_EQ(bufs[2 * l + 1], testing::layer_bytes(7, kShape, l, 1, pos)) << l;
  }
  EXPECT_TRUE(f->commit.get());
  TierKind t;
  ASSERT_TRUE(g.st->where(1, &t));
  EXPECT_EQ(t, TierKind::Ssd);
  EXPECT_EQ(g.st->stats().get(TierKind::Ssd, TierCounter::Hits), 1u);
  h = LoadHandle();
  EXPECT_EQ(testing::load_check(*g.st, 1, 7, kShape, pos), 150);
  EXPECT_TRUE(g.st->erase(1));
  EXPECT_EQ(g.st->used_bytes(TierKind::Ssd), 0u);
  EXPECT_EQ(g.st->accounting_errors(), 0u);
  EXPECT_EQ(g.st->audit_slots(), "");
}

// A load of an append save in flight pins the save's base as well as its entry. One that
// ends before the commit lands drops that pin itself; the commit then drops only the pins
// of the loads still running. (It dropped this one again: the base's count went below zero,
// and the slots later lent to the base were never freed.)
TEST(Store, ALoadEndingBeforeAnAppendLandsUnpinsTheBaseOnce) {
  GatedStore g("in_flight_append_load");
  ASSERT_TRUE(save_entry(*g.st, 1, 7, kShape, iota_positions(150)));  // 2 whole chunks
  const auto pos = iota_positions(300);
  g.gate->hold_syncs();  // the append's writes are done; its commit waits in the data sync
  auto f = save_in_flight(*g.st, 1, 7, pos);
  const OpenOnExit guard{g.gate.get()};
  ASSERT_TRUE(f);
  ASSERT_EQ(f->h.shared_tokens(), 128);
  EXPECT_EQ(testing::load_check(*g.st, 1, 7, kShape, pos), 300);  // pins and unpins the base
  EXPECT_TRUE(pending(f->commit));
  g.gate->open();
  EXPECT_TRUE(f->commit.get());
  EXPECT_EQ(testing::load_check(*g.st, 1, 7, kShape, pos), 300);
  EXPECT_EQ(g.st->audit_slots(), "");
  EXPECT_TRUE(g.st->erase(1));  // the new entry's slots pass through the base (its lender)
  EXPECT_EQ(g.st->used_bytes(TierKind::Ssd), 0u);
  EXPECT_EQ(g.st->audit_slots(), "");
  EXPECT_EQ(g.st->accounting_errors(), 0u);
  EXPECT_EQ(g.st->audit_slots(), "");
}

// An unaligned truncation reads the entry, then rewrites it. A save of the session that lands
// meanwhile holds a newer history: the truncation gives up (false) rather than erase it.
TEST(Store, ATruncationRewriteLosesToASaveThatLandsWhileItReads) {
  GatedStore g("truncate_race");
  ASSERT_TRUE(save_entry(*g.st, 1, 7, kShape, iota_positions(150)));
  g.gate->hold_reads();
  const OpenOnExit guard{g.gate.get()};
  auto cut = std::async(std::launch::async, [&] {  // 10 tokens: not whole chunks, a rewrite
    return g.st->truncate(1, TruncateSpec{10, 0, 0});
  });
  g.gate->wait_until_held();  // the truncation is reading the entry
  ASSERT_TRUE(save_entry(*g.st, 1, 8, kShape, iota_positions(100)));  // another history
  g.gate->open();
  EXPECT_FALSE(cut.get());
  EXPECT_EQ(testing::load_check(*g.st, 1, 8, kShape, iota_positions(100)), 100);
  EXPECT_EQ(g.st->used_bytes(TierKind::Ssd), 2u * 4u * 2u * kChunk);  // the new entry only
  EXPECT_EQ(g.st->accounting_errors(), 0u);
  EXPECT_EQ(g.st->audit_slots(), "");
}

TEST(Store, EraseOrANewerSaveDropsASaveInFlight) {
  GatedStore g("in_flight_drop");
  const auto pos = iota_positions(150);
  g.gate->close();
  auto a = save_in_flight(*g.st, 1, 7, pos);
  ASSERT_TRUE(a);
  TruncateSpec spec;
  spec.drop_tokens = 64;
  EXPECT_FALSE(g.st->truncate(1, spec));  // not before its commit lands
  EXPECT_TRUE(g.st->erase(1));
  EXPECT_FALSE(g.st->lookup(testing::key_for(1, 7, pos)).hit());
  auto b = save_in_flight(*g.st, 2, 8, pos);
  auto c = save_in_flight(*g.st, 2, 9, pos);
  ASSERT_TRUE(b && c);
  EXPECT_FALSE(g.st->lookup(testing::key_for(2, 8, pos)).hit());
  EXPECT_TRUE(g.st->lookup(testing::key_for(2, 9, pos)).hit());
  g.gate->open();
  EXPECT_FALSE(a->commit.get());
  EXPECT_FALSE(b->commit.get());
  EXPECT_TRUE(c->commit.get());
  EXPECT_FALSE(g.st->where(1, nullptr));
  EXPECT_EQ(testing::load_check(*g.st, 2, 9, kShape, pos), 150);
  EXPECT_EQ(g.st->used_bytes(TierKind::Ssd), 2u * 4u * 3u * kChunk);  // c's entry only
  EXPECT_EQ(g.st->accounting_errors(), 0u);
  EXPECT_EQ(g.st->audit_slots(), "");
}

TEST(Store, AFailedWriteFailsTheLoadOfASaveInFlight) {
  GatedStore g("in_flight_fail");
  const auto pos = iota_positions(150);
  g.gate->close();
  g.faults->fail_writes(1, EIO);
  auto f = save_in_flight(*g.st, 1, 7, pos);
  ASSERT_TRUE(f);
  std::vector<std::vector<char>> bufs(8, std::vector<char>(150 * 256));
  std::vector<LayerTarget> tg;
  for (int l = 0; l < 4; ++l) tg.push_back({bufs[2 * l].data(), bufs[2 * l + 1].data()});
  LoadHandle h = g.st->load(testing::key_for(1, 7, pos), tg);
  const OpenOnExit guard{g.gate.get()};  // a failed assertion must not leave `h` waiting
  ASSERT_TRUE(h.ok());
  g.gate->open();
  EXPECT_FALSE(h.wait_all());
  EXPECT_FALSE(f->commit.get());
  EXPECT_FALSE(g.st->lookup(testing::key_for(1, 7, pos)).hit());
  h = LoadHandle();  // the last pin: the failed save's slots go now
  EXPECT_EQ(g.st->used_bytes(TierKind::Ssd), 0u);
  EXPECT_GE(g.st->stats().get(Counter::LoadFailures), 1u);
  EXPECT_EQ(g.st->accounting_errors(), 0u);
  EXPECT_EQ(g.st->audit_slots(), "");
  EXPECT_TRUE(save_entry(*g.st, 1, 7, kShape, pos));  // the session saves again afterwards
  EXPECT_EQ(testing::load_check(*g.st, 1, 7, kShape, pos), 150);
}

TEST(Store, ASaveThatMustEvictLetsTheSavesInFlightLandFirst) {
  GatedStore g("in_flight_settle");  // 128 chunks: five entries of 24 chunks fit, not six
  const auto pos = iota_positions(150);
  for (SessionId id = 1; id <= 4; ++id) ASSERT_TRUE(save_entry(*g.st, id, id, kShape, pos));
  g.gate->close();
  auto f = save_in_flight(*g.st, 5, 5, pos);  // fits without evicting
  ASSERT_TRUE(f);
  // Touch 1-4 (reads pass the gate): once 5 has landed it is the least recently used entry,
  // and only a save that waits for it to land can choose it.
  for (SessionId id = 1; id <= 4; ++id) {
    ASSERT_EQ(testing::load_check(*g.st, id, id, kShape, pos), 150) << id;
  }
  // The sixth must evict: it waits until session 5 has landed, whatever the writes' speed.
  auto sixth = std::async(std::launch::async, [&] {
    std::vector<std::vector<char>> bufs;
    for (int l = 0; l < kShape.n_layers; ++l) {
      bufs.push_back(testing::layer_bytes(6, kShape, l, 0, pos));
      bufs.push_back(testing::layer_bytes(6, kShape, l, 1, pos));
    }
    SaveHandle h = g.st->begin_save(SaveRequest{6, testing::test_fp(), KeyEncoding::PreRope, kShape,
                                                testing::tokens_for(6, pos)});
    if (!h.ok()) return false;
    for (int l = 0; l < kShape.n_layers; ++l) {
      h.write_layer(l, LayerSource{bufs[2 * l].data(), bufs[2 * l + 1].data()});
    }
    return h.commit().get();
  });
  const OpenOnExit guard{g.gate.get()};  // `sixth` must not wait forever on a failure
  EXPECT_EQ(sixth.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  EXPECT_TRUE(pending(f->commit));
  g.gate->open();
  EXPECT_TRUE(f->commit.get());
  EXPECT_TRUE(sixth.get());
  EXPECT_FALSE(g.st->where(5, nullptr));  // LRU's victim: the save that had to land first
  for (SessionId id : {1, 2, 3, 4, 6}) EXPECT_TRUE(g.st->where(id, nullptr)) << id;
  EXPECT_EQ(g.st->accounting_errors(), 0u);
  EXPECT_EQ(g.st->audit_slots(), "");
}

// The room a save's HBM victim needs in DRAM is made as the save's own room is: once the saves
// in flight that DRAM depends on have landed, so which DRAM entry goes does not depend on how far
// their writes have got (SimStore does the same). DRAM writes are slowed here so that session
// 3's save is still being written when session 4's save demotes session 1; until 2026-12-07 the
// demotion chose among the entries that happened to have landed, and dropped session 2.
TEST(Store, AVictimsDemotionLetsTheSavesInFlightToItsTierLandFirst) {
  FakeClock clock;
  StoreConfig c = dram_cfg(48 * kChunk, &clock);  // two entries of 192 tokens (24 chunks each)
  c.hbm_bytes = 8 * kChunk;                       // one of 64 tokens
  c.write_gbps[static_cast<int>(TierKind::Dram)] = 0.004;  // 384 KiB in about 0.1 s
  AttentionStore st(c);
  const auto big = iota_positions(192), small = iota_positions(64);
  ASSERT_TRUE(save_entry(st, 2, 2, kShape, big));  // too big for the HBM tier: DRAM
  *clock.t += 1;
  ASSERT_TRUE(save_entry(st, 1, 1, kShape, small));  // HBM
  *clock.t += 1;
  auto f = save_in_flight(st, 3, 3, big);  // DRAM, full once it lands
  ASSERT_TRUE(f);
  *clock.t += 1;
  ASSERT_EQ(load_check(st, 2, 2, kShape, big), 192);  // 2 is used after 3 was saved
  *clock.t += 1;
  EXPECT_TRUE(pending(f->commit));
  ASSERT_TRUE(save_entry(st, 4, 4, kShape, small));  // HBM: 1 goes to DRAM, which must evict
  EXPECT_TRUE(f->commit.get());
  // LRU's victim in DRAM is 3, which only a demotion that lets it land first can choose.
  EXPECT_FALSE(st.where(3, nullptr));
  EXPECT_EQ(testing::where(st, 2), TierKind::Dram);
  EXPECT_EQ(testing::where(st, 1), TierKind::Dram);
  EXPECT_EQ(testing::where(st, 4), TierKind::Hbm);
  EXPECT_EQ(load_check(st, 1, 1, kShape, small), 64);  // demoted whole
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
}

}  // namespace
}  // namespace cb::store
