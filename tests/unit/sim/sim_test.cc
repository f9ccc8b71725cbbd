// Sim mode's parts: the cost model against datasheet arithmetic, link queueing, and the
// sizes-only store's placement (hardware profiles: sim_limits_test.cc).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eval/sim_replay.h"
#include "lib/core/error.h"
#include "lib/engine/policy_advisor.h"
#include "lib/model/presets.h"
#include "lib/sim/cost_model.h"
#include "lib/sim/profile.h"
#include "lib/sim/sim_store.h"
#include "tests/support/test_data.h"

namespace cb::sim {
namespace {

// Sim replays here check every indexed eviction decision against the advisor's ranking of all
// candidates (eval/sim_replay.cc reads it).
[[maybe_unused]] const int kVerifySimEnv = setenv("CACHEBENCH_SIM_VERIFY", "1", 1);

TEST(CostModel, DecodeAtBatchOneIsBoundByReadingTheWeights) {
  // Datasheet arithmetic, independent of the code: a decode step of LLaMA-13B reads every
  // weight once; on one A100 at the profile's HBM rate that alone takes bytes / bandwidth.
  const model::ModelConfig mc = model::preset_config("llama-13b");
  HardwareProfile p = builtin_profile("a100-80gb");
  p.gpus = 1;
  const CostModel cm(ModelShape::from_config(mc), p);
  const double params = 40.0 * (4 * 5120.0 * 5120 + 3 * 5120.0 * 13824) + 5120.0 * 32000;
  const double floor_s = params * 2 / (p.hbm_gbps * 1e9);
  const double t = cm.step_time({{1, 512, true}});
  EXPECT_GT(t, floor_s);
  EXPECT_LT(t, floor_s * 1.1 + p.step_overhead_s + 40 * p.layer_overhead_s + 1e-3);
  // Two GPUs in tensor parallel: about half.
  p.gpus = 2;
  const CostModel cm2(ModelShape::from_config(mc), p);
  EXPECT_LT(cm2.step_time({{1, 512, true}}), 0.6 * t + p.step_overhead_s);
}

TEST(CostModel, PrefillOfTwoThousandTokensIsComputeBound) {
  const model::ModelConfig mc = model::preset_config("llama-13b");
  HardwareProfile p = builtin_profile("a100-80gb");
  p.gpus = 1;
  const CostModel cm(ModelShape::from_config(mc), p);
  const double gemm = 2.0 * 40 * (4 * 5120.0 * 5120 + 3 * 5120.0 * 13824) * 2048;
  const double t = cm.step_time({{2048, 0, true}});
  EXPECT_GT(t, gemm / (p.gemm_tflops * 1e12));
  EXPECT_LT(t, 1.3 * gemm / (p.gemm_tflops * 1e12));
  // More context, more time; more tokens, more time.
  EXPECT_GT(cm.step_time({{512, 1024, true}}), cm.step_time({{512, 0, true}}));
  EXPECT_GT(cm.step_time({{1024, 0, true}}), cm.step_time({{512, 0, true}}));
}

TEST(CostModel, TensorParallelAllReducesFollowTheBlockLayout) {
  // A ring all-reduce of B bytes over g GPUs moves 2 (g - 1) / g x B per GPU. A LLaMA layer
  // reduces its T x hidden fp16 activations twice (after attention, after the MLP); Falcon's
  // parallel attention and MLP add their partial sums first and reduce once.
  HardwareProfile p = builtin_profile("a100-80gb");
  p.gpus = 4;
  const std::vector<StepLoad> step = {{512, 1024, true}};
  for (const auto& [name, reductions] : {std::pair<std::string, int>{"llama-2-70b", 2},
                                         std::pair<std::string, int>{"falcon-40b", 1}}) {
    const model::ModelConfig mc = model::preset_config(name);
    HardwareProfile free_links = p;
    free_links.nvlink_gbps = 0;  // free all-reduces
    const double comm = CostModel(ModelShape::from_config(mc), p).layer_time(step) -
                        CostModel(ModelShape::from_config(mc), free_links).layer_time(step);
    const double bytes = 512.0 * mc.hidden * 2;
    EXPECT_NEAR(comm, reductions * 2.0 * 3 / 4 * bytes / (p.nvlink_gbps * 1e9), 1e-12) << name;
  }
}

TEST(Link, OverlappingTransfersQueue) {
  Link l(1.0, 0.001);  // 1 GB/s, 1 ms
  const double a = l.transfer(0, 1e9);
  const double b = l.transfer(0.5, 1e9);  // issued while the first still runs
  EXPECT_NEAR(a, 1.001, 1e-9);
  EXPECT_NEAR(b, 2.002, 1e-9);
  EXPECT_NEAR(l.transfer(5, 0), 5.001, 1e-9);  // an idle link starts at once
}

TEST(Link, ATransferIssuedSoonerUsesTheIdleTimeBeforeOneBookedForLater) {
  Link l(1.0, 0);                              // 1 GB/s
  EXPECT_NEAR(l.transfer(10, 2e9), 12, 1e-9);  // booked first, runs 10..12
  // Issued at 1 and short enough: done before the later one starts, which stays put.
  EXPECT_NEAR(l.transfer(1, 3e9), 4, 1e-9);
  EXPECT_NEAR(l.last_start(), 1, 1e-9);
  // Issued at 5, 7 s of work: 5..10, then after the booked one 12..14.
  EXPECT_NEAR(l.completion(5, 7e9), 14, 1e-9);
  EXPECT_NEAR(l.transfer(5, 7e9), 14, 1e-9);
  EXPECT_NEAR(l.busy_s(), 12, 1e-9);
  // A transfer that fills a gap exactly (or within rounding) ends at the next reservation.
  Link g(1.0, 0);
  g.transfer(10, 2e9);
  EXPECT_NEAR(g.transfer(1, 9e9), 10, 1e-9);
  Link h(1.0, 0);
  h.transfer(0.3, 0.6e9);
  EXPECT_NEAR(h.transfer(0.1, 0.2e9), 0.3, 1e-9);
  // Issued inside a reservation: starts when it ends.
  EXPECT_NEAR(l.transfer(13, 1e9), 15, 1e-9);
  EXPECT_NEAR(l.last_start(), 14, 1e-9);
  // The past is forgotten; nothing starts before the clock.
  l.retire(20);
  EXPECT_NEAR(l.transfer(0, 1e9), 21, 1e-9);
  EXPECT_NEAR(l.completion(20.5, 1e9), 22, 1e-9);
}

SimStoreConfig small(uint64_t dram_entries, uint64_t ssd_entries, const std::string& pol) {
  SimStoreConfig c;
  c.chunk_bytes = 4096;
  // An entry of <= 32 tokens of 128-byte K rows, 2 layers: 2 * 2 * 1 chunks = 16 KiB.
  c.dram_bytes = dram_entries * 4 * 4096;
  c.ssd_bytes = ssd_entries * 4 * 4096;
  policy::Capacity cap{c.dram_bytes, c.ssd_bytes};
  c.advisor = std::make_shared<engine::PolicyAdvisor>(pol, cap);
  c.h2d = c.d2h = c.d2d = Link(1, 0);
  c.ssd_read = c.ssd_write = Link(0.1, 0);
  c.verify_decisions = true;  // every indexed decision checked against the advisor's ranking
  return c;
}

TEST(SimStore, ATierBudgetBelowOneChunkIsRefusedAsTheRealStoreRefusesIt) {
  for (int tier = 0; tier < 3; ++tier) {
    SimStoreConfig c = small(2, 1, "lru");
    uint64_t* budget[3] = {&c.hbm_bytes, &c.dram_bytes, &c.ssd_bytes};
    *budget[tier] = c.chunk_bytes - 1;
    const char* option[3] = {"--hbm", "--dram", "--ssd"};
    try {
      SimStore s(c, 2, 128);
      FAIL() << option[tier] << " below one chunk was accepted";
    } catch (const cb::Error& e) {
      EXPECT_NE(std::string(e.what()).find(option[tier]), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("smaller than one chunk"), std::string::npos)
          << e.what();
    }
  }
}

TEST(SimStore, LruEvictsTheLeastRecentlyUsedToSsdThenDrops) {
  SimStore s(small(2, 1, "lru"), 2, 128);
  for (uint64_t id = 1; id <= 2; ++id) {
    ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
    s.commit(id);
  }
  ASSERT_TRUE(s.lookup(1, 32, 3).hit);  // 1 is now the most recently used
  s.unpin(1);
  ASSERT_GE(s.save(3, 32, 4), 0);  // evicts 2 to SSD
  s.commit(3);
  EXPECT_EQ(s.lookup(2, 32, 5).tier, store::TierKind::Ssd);
  s.unpin(2);
  EXPECT_EQ(s.lookup(1, 32, 6).tier, store::TierKind::Dram);
  s.unpin(1);
  ASSERT_GE(s.save(4, 32, 7), 0);  // DRAM full (1, 3) -> 3 to SSD; SSD full -> 2 dropped
  s.commit(4);
  EXPECT_FALSE(s.lookup(2, 32, 8).hit);
  EXPECT_EQ(s.entries(), 3);
}

// As in lib/store: a session's re-save (every turn makes one) and an unaligned truncation's
// rewrite keep the entry's first insertion time, so FIFO evicts the session saved first even
// after it was re-saved, while LRU evicts the session idle longest.
TEST(SimStore, ResaveKeepsFirstInsertionSoFifoAndLruDiffer) {
  for (const char* pol : {"lru", "fifo"}) {
    SCOPED_TRACE(pol);
    SimStore s(small(3, 0, pol), 2, 128);  // three entries, no SSD: an eviction drops
    ASSERT_GE(s.save(1, 32, 1), 0);
    s.commit(1);
    ASSERT_GE(s.save(2, 32, 2), 0);
    s.commit(2);
    // Session 1's next turn, as SimEngine runs it: a hit, then the re-save.
    ASSERT_TRUE(s.lookup(1, 32, 3).hit);
    s.unpin(1);
    ASSERT_GE(s.save(1, 32, 3), 0);
    s.commit(1);
    s.truncate(1, 1, 4);  // 31 tokens: unaligned, rewritten
    ASSERT_TRUE(s.lookup(1, 31, 4).hit);
    s.unpin(1);
    ASSERT_GE(s.save(3, 32, 5), 0);  // the tier is full: 1, 2, 3
    s.commit(3);
    ASSERT_GE(s.save(4, 32, 6), 0);  // one of them is dropped
    s.commit(4);
    // FIFO: 1 entered first (t=1); LRU: 2 has been idle since t=2.
    const bool fifo = std::string(pol) == "fifo";
    const store::SessionId victim = fifo ? 1 : 2, kept = fifo ? 2 : 1;
    EXPECT_FALSE(s.lookup(victim, 32, 7).hit);
    EXPECT_TRUE(s.lookup(kept, 32, 7).hit);
    EXPECT_TRUE(s.lookup(3, 32, 7).hit);
    EXPECT_TRUE(s.lookup(4, 32, 7).hit);
    EXPECT_EQ(s.entries(), 3);
  }
}

// As in lib/store: a re-save's new entry becomes visible at commit, and the entry it replaces
// stays visible, evictable and holding its space until then.
// lib/store's saves in flight: from commit() on, lookups see the new entry (a load waits for
// its writes); the entry it replaces holds its space until the commit lands, and a save that
// must evict lets the saves in flight land first (so the candidates do not depend on timing).
TEST(SimStore, ASaveInFlightAnswersAndLandsBeforeAnEviction) {
  SimStore s(small(3, 0, "lru"), 2, 128);  // three entries, no SSD
  ASSERT_GE(s.save(1, 32, 1), 0);
  s.commit(1);
  ASSERT_GE(s.save(2, 32, 2), 0);
  s.commit(2);
  // Session 1's re-save of another history (shorter: not an append), in flight: old 1, 2, new 1.
  const double c1 = s.save(1, 31, 3);
  ASSERT_GT(c1, 3);
  EXPECT_EQ(s.shared_tokens(1), 0);
  const SimStore::Hit h = s.lookup(1, 31, 4);
  EXPECT_TRUE(h.hit);  // the save in flight answers, once its commit lands
  EXPECT_EQ(h.ready_at, std::max(4.0, c1));
  s.unpin(1);
  EXPECT_EQ(s.entries(), 2);  // old 1 and 2 are committed
  // Full: the new 1 lands first and frees the old one's space, so nothing is evicted.
  ASSERT_GE(s.save(3, 32, 5), 0);
  s.commit(1);  // already landed: nothing to do
  s.commit(3);
  EXPECT_EQ(s.entries(), 3);
  for (store::SessionId id : {1, 2, 3}) {
    EXPECT_TRUE(s.lookup(id, 32, 7).hit) << id;
    s.unpin(id);
  }
  // Full again: a fourth session evicts the least recently used of them.
  ASSERT_GE(s.save(4, 32, 8), 0);
  s.commit(4);
  EXPECT_EQ(s.entries(), 3);
}

// As lib/store: the room a save's HBM victim needs in DRAM is made once the saves in flight
// that DRAM depends on have landed (the caller waits for them), so a save still in flight there
// is a candidate victim too. Session 3's save to DRAM is in flight when 4's save demotes 1.
TEST(SimStore, AVictimsDemotionLetsTheSavesInFlightToItsTierLandFirst) {
  SimStoreConfig c = small(6, 0, "lru");  // DRAM: two entries of 96 tokens (12 chunks each)
  c.hbm_bytes = 4 * 4096;                 // HBM: one of 32 tokens
  SimStore s(c, 2, 128);
  ASSERT_GE(s.save(2, 96, 1), 0);  // too big for the HBM tier: DRAM
  s.commit(2);
  ASSERT_GE(s.save(1, 32, 2), 0);  // HBM
  s.commit(1);
  const double c3 = s.save(3, 96, 3);  // DRAM, full once it lands
  ASSERT_GT(c3, 3);
  ASSERT_EQ(s.lookup(2, 96, 4).tier, store::TierKind::Dram);  // 2 is used after 3 was saved
  s.unpin(2);
  ASSERT_GE(s.save(4, 32, 5), 0);           // HBM: 1 goes to DRAM, which must evict
  EXPECT_GE(s.caller_blocked_until(), c3);  // the save waited for 3 to land
  s.commit(4);
  // LRU's victim in DRAM is 3, which only a demotion that lets it land first can choose.
  EXPECT_FALSE(s.lookup(3, 96, 6).hit);
  EXPECT_EQ(s.lookup(2, 96, 6).tier, store::TierKind::Dram);
  EXPECT_EQ(s.lookup(1, 32, 6).tier, store::TierKind::Dram);
  EXPECT_EQ(s.lookup(4, 32, 6).tier, store::TierKind::Hbm);
}

// As lib/store's append saves: a save that extends the session's entry reserves and writes only
// the chunks from the entry's last partial one on, so here it fits without an eviction.
TEST(SimStore, AnAppendSharesTheWholeChunksOfTheEntryItExtends) {
  SimStore s(small(3, 0, "lru"), 2, 128);  // 12 chunks; 32 tokens per chunk
  ASSERT_GE(s.save(1, 32, 1), 0);
  s.commit(1);
  ASSERT_GE(s.save(2, 32, 2), 0);
  s.commit(2);
  const double c = s.save(1, 64, 3);  // 8 chunks, 4 of them session 1's: 4 new ones fit
  EXPECT_EQ(s.shared_tokens(1), 32);
  EXPECT_NEAR(c - 3, 32 * 2 * 128 * 2 / 1e9, 1e-12);  // tokens 32..63 of 2 layers, K and V
  s.commit(1);
  for (store::SessionId id : {1, 2}) {
    EXPECT_TRUE(s.lookup(id, 64, 4).hit) << id;
    s.unpin(id);
  }
  // (A full save, the old entry kept until its commit, needs 4 + 4 + 8 > 12 chunks: an
  // eviction.) The store is full now, so 4 more chunks evict the least recently used (1).
  ASSERT_GE(s.save(3, 32, 5), 0);
  s.commit(3);
  EXPECT_FALSE(s.lookup(1, 64, 6).hit);
  EXPECT_TRUE(s.lookup(2, 64, 6).hit);
  s.unpin(2);
  // append = false (--full-saves): the whole history is written again.
  const double full = s.save(2, 64, 7, -1, true, false);
  EXPECT_EQ(s.shared_tokens(2), 0);
  EXPECT_NEAR(full - 7, 64 * 2 * 128 * 2 / 1e9, 1e-12);
}

// lib/store's inclusive tiers (tests/unit/store/ssd_copy_test.cc): a prefetched entry keeps
// its SSD chunks as a copy; demoting it again writes only what changed; copies go first when
// the SSD needs room. Sessions 1, 2, 3 of 32 tokens (4 chunks each) in a 2-entry DRAM: 3's
// save sends 1 to the SSD, the prefetch of 1 sends 2 there.
/// Saves 1, 2 and 3 (32 tokens each) at times 1, 2, 3: in a DRAM tier of two entries, 3's save
/// sends 1 to the SSD.
void save_first_three(SimStore& s) {
  for (store::SessionId id = 1; id <= 3; ++id) {
    ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
    s.commit(id);
  }
}

void prefetch_one(SimStore& s) {
  ASSERT_NO_FATAL_FAILURE(save_first_three(s));
  s.prefetch({1}, 4);
  s.advance(100);
  s.prefetch({}, 100);  // 1 leaves the look-ahead window
  EXPECT_EQ(s.ssd_copy_chunks(), 4u);
  for (store::SessionId id : {1, 2}) {
    EXPECT_EQ(s.lookup(id, 32, 101).tier, id == 1 ? store::TierKind::Dram : store::TierKind::Ssd);
    s.unpin(id);
  }
}

double ssd_written(const SimStore& s) {
  return static_cast<double>(s.tier_totals()[2].bytes_written);
}

// lib/store moves a prefetched entry to DRAM when its copy is done, and a load meanwhile reads
// the SSD without waiting for the move: a hit before the fetch lands is an SSD hit, served now;
// after, a DRAM hit. While the fetch runs, its SSD chunks are not a copy the SSD could drop.
TEST(SimStore, AHitOnAnEntryStillBeingFetchedIsAnSsdHit) {
  SimStore s(small(2, 4, "scheduler-aware"), 2, 128);
  ASSERT_NO_FATAL_FAILURE(save_first_three(s));  // 3's save sends 1 to the SSD
  // DRAM is full: the fetch first demotes 2 (16 KiB at 0.1 GB/s, written by 4.00016), then
  // reads 1 (16 KiB more, landing at 4.00033), as lib/store's fetch task does in turn.
  s.prefetch({1}, 4);
  const SimStore::Hit early = s.lookup(1, 32, 4.0002);  // after the read alone would land
  ASSERT_TRUE(early.hit);
  EXPECT_EQ(early.tier, store::TierKind::Ssd);
  EXPECT_DOUBLE_EQ(early.ready_at, 4.0002);
  s.unpin(1);
  s.advance(5);
  const SimStore::Hit late = s.lookup(1, 32, 5);
  EXPECT_EQ(late.tier, store::TierKind::Dram);
  s.unpin(1);
}

// While a fetch runs, the SSD chunks it reads are its entry's own in lib/store (the move has
// not landed), not a copy the SSD may drop to make room: a save that needs SSD room then takes
// another victim, and the copy is there once the fetch lands.
TEST(SimStore, AnEntryBeingFetchedKeepsItsSsdChunks) {
  SimStore s(small(2, 2, "scheduler-aware"), 2, 128);
  ASSERT_NO_FATAL_FAILURE(save_first_three(s));  // 3's save sends 1 to the SSD
  s.prefetch({1}, 4);  // demotes 2 to the SSD (now full: 1's chunks and 2), then reads 1
  // 3 to the SSD, which must drop 2, not 1's chunks (as a copy, ranked with 1's access times,
  // they would go first).
  ASSERT_GE(s.save(4, 32, 4.0001), 0);
  s.commit(4);
  s.advance(5);
  EXPECT_EQ(s.ssd_copy_chunks(), 4u);
  const SimStore::Hit one = s.lookup(1, 32, 5);
  EXPECT_TRUE(one.hit);
  EXPECT_EQ(one.tier, store::TierKind::Dram);
  s.unpin(1);
  EXPECT_FALSE(s.lookup(2, 32, 5).hit);
}

TEST(SimStore, ADemotionOfAPrefetchedEntryReusesItsSsdCopy) {
  SimStore s(small(2, 4, "scheduler-aware"), 2, 128);
  prefetch_one(s);
  ASSERT_TRUE(s.lookup(3, 32, 102).hit);  // 1 is the least recently used
  s.unpin(3);
  const double before = ssd_written(s);
  ASSERT_GE(s.save(4, 32, 103), 0);
  s.commit(4);
  EXPECT_EQ(s.lookup(1, 32, 104).tier, store::TierKind::Ssd);
  s.unpin(1);
  EXPECT_EQ(ssd_written(s), before);
  EXPECT_EQ(s.copy_reused_chunks(), 4u);
  EXPECT_EQ(s.ssd_copy_chunks(), 0u);
}

TEST(SimStore, AnAppendKeepsTheSsdCopyOfItsWholeSharedChunks) {
  SimStore s(small(2, 4, "scheduler-aware"), 2, 128);
  prefetch_one(s);
  ASSERT_GE(s.save(1, 64, 102), 0);  // 32 tokens shared (chunk 0), 32 appended
  s.commit(1);
  EXPECT_EQ(s.ssd_copy_chunks(), 4u);
  const double before = ssd_written(s);
  ASSERT_GE(s.save(4, 32, 110), 0);  // DRAM holds 1 alone (8 chunks): 1 goes down
  s.commit(4);
  EXPECT_EQ(s.lookup(1, 64, 111).tier, store::TierKind::Ssd);
  s.unpin(1);
  EXPECT_EQ(ssd_written(s) - before, 32 * 2 * 128 * 2);  // tokens 32..63 only
  EXPECT_EQ(s.copy_reused_chunks(), 4u);
}

// When the SSD is full (2 and 1's copy fill it) and 4's save demotes 3, the copy competes
// with 2 (store::kCopyCandidate): with no known next use, as the entries nothing needs.
TEST(SimStore, AnSsdCopyGoesBeforeAnEntryTheLookAheadHolds) {
  SimStore s(small(2, 2, "scheduler-aware"), 2, 128);
  prefetch_one(s);
  ASSERT_TRUE(s.lookup(1, 32, 102).hit);  // 3 is the least recently used
  s.unpin(1);
  s.prefetch({5, 6, 2}, 102);  // 2 is needed, after two sessions with nothing stored
  ASSERT_GE(s.save(4, 32, 103), 0);
  s.commit(4);
  EXPECT_EQ(s.ssd_copy_chunks(), 0u);
  for (store::SessionId id : {2, 3}) {
    EXPECT_EQ(s.lookup(id, 32, 104).tier, store::TierKind::Ssd) << id;
    s.unpin(id);
  }
  EXPECT_EQ(s.entries(), 4);
}

TEST(SimStore, AnSsdEntryNothingNeedsGoesBeforeTheCopyOfOneUsedSince) {
  SimStore s(small(2, 2, "scheduler-aware"), 2, 128);
  prefetch_one(s);                        // the look-ahead is empty again
  ASSERT_TRUE(s.lookup(1, 32, 102).hit);  // 3 is the least recently used in DRAM
  s.unpin(1);
  ASSERT_GE(s.save(4, 32, 103), 0);  // 3 to the SSD, where 2 was used longest ago: it goes
  s.commit(4);
  EXPECT_EQ(s.ssd_copy_chunks(), 4u);
  EXPECT_FALSE(s.lookup(2, 32, 104).hit);
  EXPECT_EQ(s.lookup(3, 32, 104).tier, store::TierKind::Ssd);
  s.unpin(3);
  EXPECT_EQ(s.entries(), 3);
}

// lib/store's write-back ahead of eviction (StoreConfig::clean_ahead_bytes): at prefetch() the
// entries the advisor would evict first get SSD copies on the SSD's write link; a demotion
// onto a whole copy writes nothing, but waits for the copy to land.
TEST(SimStore, AWriteBackMakesTheNextDemotionWriteNothing) {
  SimStoreConfig c = small(2, 4, "lru");
  c.clean_ahead_bytes = 4 * 4096;  // one entry
  SimStore s(c, 2, 128);
  for (store::SessionId id = 1; id <= 2; ++id) {
    ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
    s.commit(id);
  }
  const double bytes = 32 * 2 * 128 * 2;  // a 32-token entry, 2 layers, K and V
  s.prefetch({}, 3);                      // 1, the LRU entry, is written back
  EXPECT_EQ(s.cleaned_chunks(), 4u);
  EXPECT_EQ(s.ssd_copy_chunks(), 4u);
  EXPECT_EQ(ssd_written(s), bytes);
  const double landed = 3 + bytes / 0.1e9;
  s.prefetch({}, 3);  // still in flight: not written twice
  EXPECT_EQ(ssd_written(s), bytes);
  ASSERT_GE(s.save(3, 32, 3), 0);  // evicts 1 onto its copy, which has not landed yet
  EXPECT_NEAR(s.caller_blocked_until(), landed, 1e-12);
  EXPECT_EQ(ssd_written(s), bytes);
  EXPECT_EQ(s.copy_reused_chunks(), 4u);
  s.commit(3);
  EXPECT_EQ(s.lookup(1, 32, 4).tier, store::TierKind::Ssd);
  s.unpin(1);
  ASSERT_GE(s.save(4, 32, 10), 0);  // evicts 2, never written back: the whole entry
  EXPECT_NEAR(s.caller_blocked_until(), 10 + bytes / 0.1e9, 1e-12);
  EXPECT_EQ(ssd_written(s), 2 * bytes);
}

// lib/store's DemoteAhead tests (StoreConfig::demote_ahead_bytes): with HBM for three entries
// over DRAM, the LRU entry moves to DRAM in the background at write_back(), on the
// device-to-host link, and its HBM chunks are free once the copy lands. A save that finds HBM
// full waits for the demotion under way instead of demoting the next entry in line.
TEST(SimStore, ADemotionAheadOfNeedKeepsTheSaversThreadFree) {
  const double move = 32 * 2 * 128 * 2 / 1e9;  // a 32-token entry over the 1 GB/s link
  // {demote ahead, save at}: 5 is after the demotion landed, 4 while it is under way.
  for (const auto& [on, at] : {std::pair{true, 5.0}, {true, 4.0}, {false, 5.0}}) {
    SimStoreConfig c = small(4, 0, "lru");
    c.hbm_bytes = 3 * 4 * 4096;
    c.demote_ahead_bytes = on ? 4 * 4096 : 0;
    SimStore s(c, 2, 128);
    for (store::SessionId id = 1; id <= 3; ++id) {
      ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
      s.commit(id);
    }
    s.advance(3.5);
    s.write_back(4);
    EXPECT_EQ(s.demoted_ahead(), on ? 1u : 0u);
    if (on) {
      const auto moving = s.lookup(1, 32, 4);  // under way: still read from HBM
      EXPECT_EQ(moving.tier, store::TierKind::Hbm);
      EXPECT_EQ(moving.ready_at, 4);
      s.unpin(1);
    }
    s.advance(at);
    ASSERT_GE(s.save(4, 32, at), 0);
    // Landed: nothing to wait for. Under way: until it lands. Off: 1's demotion, now.
    const double blocked = on && at == 5 ? 5 : on ? 4 + move : at + move;
    EXPECT_NEAR(s.caller_blocked_until(), blocked, 1e-12) << on << " " << at;
    s.commit(4);
    s.advance(10);
    for (store::SessionId id = 1; id <= 4; ++id) {
      EXPECT_EQ(s.lookup(id, 32, 10).tier, id == 1 ? store::TierKind::Dram : store::TierKind::Hbm)
          << on << " " << at << " " << id;
      s.unpin(id);
    }
  }
}

// lib/store's SaveAdmission tests: an append save whose own entry LRU would evict first goes
// to the SSD on that entry's copy, writing the new tokens only, and its caller waits for no
// demotion; with admission off, the next entry is demoted for it.
TEST(SimStore, TheFirstVictimsOwnSaveGoesToTheSsdOnItsCopy) {
  for (const bool admission : {true, false}) {
    SimStoreConfig c = small(2, 4, "lru");
    c.clean_ahead_bytes = 4 * 4096;  // one entry
    c.save_admission = admission;
    SimStore s(c, 2, 128);
    for (store::SessionId id = 1; id <= 2; ++id) {
      ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
      s.commit(id);
    }
    const double bytes = 32 * 2 * 128 * 2;  // 32 tokens, 2 layers, K and V
    s.prefetch({}, 3);                      // 1, the LRU entry, gets a copy
    ASSERT_EQ(s.ssd_copy_chunks(), 4u);
    const double done = s.save(1, 64, 10);  // DRAM is full; LRU would evict 1 first
    ASSERT_GE(done, 0);
    if (admission) {
      EXPECT_EQ(s.admitted_below(), 1u);
      EXPECT_EQ(s.caller_blocked_until(), 10);                     // nothing demoted
      EXPECT_NEAR(done, 10 + bytes / 1e9 + bytes / 0.1e9, 1e-12);  // tokens 32..63: PCIe, SSD
      EXPECT_EQ(s.shared_tokens(1), 32);
      EXPECT_EQ(s.copy_reused_chunks(), 4u);
      EXPECT_EQ(s.ssd_copy_chunks(), 0u);
      EXPECT_EQ(ssd_written(s), 2 * bytes);
    } else {
      EXPECT_EQ(s.admitted_below(), 0u);
      EXPECT_NEAR(s.caller_blocked_until(), 10 + bytes / 0.1e9, 1e-12);  // 2 is demoted
    }
    s.commit(1);
    const auto h1 = s.lookup(1, 64, 20);
    EXPECT_TRUE(h1.hit);
    EXPECT_EQ(h1.tokens, 64);
    EXPECT_EQ(h1.tier, admission ? store::TierKind::Ssd : store::TierKind::Dram);
    s.unpin(1);
    EXPECT_EQ(s.lookup(2, 32, 21).tier, admission ? store::TierKind::Dram : store::TierKind::Ssd);
    s.unpin(2);
  }
}

// lib/store's DemotionBudget tests. budget_store(): sessions 1 and 2 saved and committed
// (at t = 1, 2) in a DRAM of two entries over the SSD, LRU, a write-back window of
// `clean_ahead` entries, and recomputing an entry costing `recompute` entry writes.
constexpr double kEntryWrite = 32 * 2 * 128 * 2 / 0.1e9;  // one entry's SSD write: 164 us

std::unique_ptr<SimStore> budget_store(bool on, uint64_t clean_ahead, double recompute) {
  SimStoreConfig c = small(2, 4, "lru");
  c.clean_ahead_bytes = clean_ahead * 4 * 4096;
  c.drop_slow_demotions = on;
  auto s = std::make_unique<SimStore>(c, 2, 128);
  s->set_recompute_estimate([recompute](int64_t) { return recompute * kEntryWrite; });
  for (store::SessionId id = 1; id <= 2; ++id) {
    EXPECT_GE(s->save(id, 32, static_cast<double>(id)), 0);
    s->commit(id);
  }
  return s;
}

// A save's victim whose demotion would keep the caller waiting longer than recomputing it is
// dropped; the wait includes the SSD writes queued before it (here a write-back of another
// entry).
TEST(SimStore, AVictimSlowerToDemoteThanToRecomputeIsDropped) {
  struct Case {
    bool on;
    uint64_t clean_ahead;  // write-back window (entries): 1 queues 1's copy on the SSD
    bool dropped;
  };
  for (const Case k : {Case{true, 0, false}, Case{true, 1, true}, Case{false, 1, false}}) {
    // Recomputing costs 1.5 entry writes: the victim's own write fits, behind another does not.
    const auto s = budget_store(k.on, k.clean_ahead, 1.5);
    s->prefetch({}, 3);                    // with a window: 1's copy is written from t = 3
    ASSERT_TRUE(s->lookup(1, 32, 3).hit);  // 2 is the LRU entry now, with no copy
    s->unpin(1);
    ASSERT_GE(s->save(3, 32, 3), 0);  // evicts 2
    const auto h = s->lookup(2, 32, 4);
    EXPECT_EQ(h.hit, !k.dropped) << k.on << k.clean_ahead;
    EXPECT_EQ(s->slow_dropped(), k.dropped ? 1u : 0u);
    if (k.dropped) {
      EXPECT_EQ(s->caller_blocked_until(), 3);  // nothing written for it
    } else {
      EXPECT_EQ(h.tier, store::TierKind::Ssd);
      EXPECT_NEAR(s->caller_blocked_until(), 3 + (k.clean_ahead + 1) * kEntryWrite, 1e-12);
      s->unpin(2);
    }
  }
}

TEST(SimStore, AVictimBeingWrittenBackIsNeverDropped) {
  // As in lib/store: its demotion waits for the write-back and writes nothing more, and a drop
  // there would free nothing before the write-back ends.
  const auto s = budget_store(true, 1, 0.1);
  s->prefetch({}, 3);               // 1, the LRU entry, is written back from t = 3
  ASSERT_GE(s->save(3, 32, 3), 0);  // evicts 1 while that write-back runs
  EXPECT_EQ(s->slow_dropped(), 0u);
  EXPECT_NEAR(s->caller_blocked_until(), 3 + kEntryWrite, 1e-12);  // the write-back's landing
  EXPECT_EQ(s->lookup(1, 32, 4).tier, store::TierKind::Ssd);
}

TEST(SimStore, AVictimWhoseWriteBackIsStillQueuedCanBeDropped) {
  // Its write-back waits behind another one: lib/store would write it on the caller's
  // thread, behind the writes under way, so the wait is weighed against the recompute.
  const auto s = budget_store(true, 2, 1.5);
  s->prefetch({}, 3);                    // 1's write-back from t = 3, then 2's
  ASSERT_TRUE(s->lookup(1, 32, 3).hit);  // 2 is the LRU entry now
  s->unpin(1);
  ASSERT_GE(s->save(3, 32, 3), 0);  // 2's copy would land at 3 + 2 entries: dropped
  EXPECT_EQ(s->slow_dropped(), 1u);
  EXPECT_FALSE(s->lookup(2, 32, 4).hit);
  EXPECT_EQ(s->caller_blocked_until(), 3);
}

TEST(SimStore, AnEntryUsedSinceIsNotAdmittedBelow) {
  SimStoreConfig c = small(2, 4, "lru");
  c.save_admission = true;
  SimStore s(c, 2, 128);
  for (store::SessionId id = 1; id <= 2; ++id) {
    ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
    s.commit(id);
  }
  ASSERT_TRUE(s.lookup(1, 32, 3).hit);  // 2 is now the LRU entry
  s.unpin(1);
  ASSERT_GE(s.save(1, 64, 4), 0);
  EXPECT_EQ(s.admitted_below(), 0u);
  s.commit(1);
  EXPECT_EQ(s.lookup(1, 64, 5).tier, store::TierKind::Dram);
  s.unpin(1);
  EXPECT_EQ(s.lookup(2, 32, 6).tier, store::TierKind::Ssd);
}

TEST(SimStore, AWriteBackIsPlannedAfterASaveOrADemotion) {
  SimStoreConfig c = small(2, 4, "lru");
  c.clean_ahead_bytes = 4 * 4096;
  SimStore s(c, 2, 128);
  s.write_back(0);  // nothing saved yet
  EXPECT_EQ(s.cleaned_chunks(), 0u);
  for (store::SessionId id = 1; id <= 2; ++id) {
    ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
    s.commit(id);
  }
  s.write_back(3);  // the saves landed: 1 is written back
  EXPECT_EQ(s.cleaned_chunks(), 4u);
  ASSERT_GE(s.save(3, 32, 10), 0);  // demotes 1 onto its copy
  s.commit(3);
  s.write_back(10);  // 2 is first in line now
  EXPECT_EQ(s.cleaned_chunks(), 8u);
  s.write_back(11);  // nothing changed since
  EXPECT_EQ(s.cleaned_chunks(), 8u);
}

TEST(SimStore, AWriteBackUsesFreeSsdSpaceOnly) {
  SimStoreConfig c = small(2, 1, "lru");
  c.clean_ahead_bytes = 4 * 4096;
  SimStore s(c, 2, 128);
  for (store::SessionId id = 1; id <= 3; ++id) {
    ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
    s.commit(id);
  }
  const double before = ssd_written(s);  // 1 fills the SSD
  s.prefetch({}, 4);
  EXPECT_EQ(s.cleaned_chunks(), 0u);
  EXPECT_EQ(ssd_written(s), before);
  EXPECT_EQ(s.lookup(1, 32, 5).tier, store::TierKind::Ssd);
  s.unpin(1);
}

// lib/store's begin_save runs on the caller's thread: it waits for the saves in flight when it
// must evict, then copies its victims to the lower tier; the save's writes start after that.
TEST(SimStore, ASaveThatEvictsBlocksItsCallerForTheSettlingAndTheCopy) {
  SimStore s(small(1, 2, "lru"), 2, 128);  // one entry in DRAM, two on SSD (0.1 GB/s)
  const double c1 = s.save(1, 32, 1);      // in flight until c1
  EXPECT_EQ(s.caller_blocked_until(), 1);  // room: no wait
  const double bytes = 32 * 2 * 128 * 2;   // a 32-token entry, 2 layers, K and V
  EXPECT_NEAR(c1 - 1, bytes / 1e9, 1e-12);
  const double c2 = s.save(2, 32, 1);  // full: session 1 lands, then is copied to SSD
  const double back = c1 + bytes / 0.1e9;
  EXPECT_NEAR(s.caller_blocked_until(), back, 1e-12);
  EXPECT_NEAR(c2, back + bytes / 1e9, 1e-12);
  s.commit(2);
  EXPECT_TRUE(s.lookup(1, 32, 2).hit);
  EXPECT_EQ(s.lookup(1, 32, 2).tier, store::TierKind::Ssd);
}

// lib/store's clock orders operations as they happen; on the virtual clock several share a
// time, and LRU must still see them in that order (not fall back to session ids).
TEST(SimStore, OperationsAtTheSameTimeKeepTheirOrderForLru) {
  SimStore s(small(2, 0, "lru"), 2, 128);
  ASSERT_GE(s.save(2, 32, 1), 0);
  s.commit(2);
  ASSERT_GE(s.save(1, 32, 1), 0);  // the same virtual time, but after session 2's save
  s.commit(1);
  ASSERT_GE(s.save(3, 32, 1), 0);  // full: the least recently used is session 2
  s.commit(3);
  EXPECT_TRUE(s.lookup(1, 32, 2).hit);
  EXPECT_FALSE(s.lookup(2, 32, 2).hit);
}

TEST(SimStore, EraseOrANewerSaveDropsASaveInFlight) {
  SimStore s(small(2, 0, "lru"), 2, 128);  // two entries
  ASSERT_GE(s.save(1, 32, 1), 0);
  s.erase(1);
  EXPECT_FALSE(s.lookup(1, 32, 2).hit);
  s.commit(1);  // nothing left to commit
  EXPECT_EQ(s.entries(), 0);
  ASSERT_GE(s.save(2, 32, 3), 0);
  ASSERT_GE(s.save(2, 32, 4), 0);  // supersedes the first: its space is freed
  ASSERT_GE(s.save(3, 32, 5), 0);  // so this fits without evicting anything
  s.commit(2);
  s.commit(3);
  EXPECT_EQ(s.entries(), 2);
}

// lib/store's prefetch rule (tests/unit/engine/store_policy_test.cc has the same case on the
// real store): a fetch may evict only entries needed after it.
TEST(SimStore, PrefetchNeverEvictsAnEntryNeededSooner) {
  for (bool fetched_ahead : {false, true}) {
    SCOPED_TRACE(fetched_ahead ? "queue 2, 1, 3" : "queue 2, 3, 1");
    SimStoreConfig c = small(2, 4, "scheduler-aware");
    // Skv of half an entry: a prefetch window of 4 jobs, wider than DRAM holds.
    c.advisor = std::make_shared<engine::PolicyAdvisor>(
        "scheduler-aware", policy::Capacity{c.dram_bytes, c.ssd_bytes}, 2 * 4096);
    SimStore s(c, 2, 128);
    for (uint64_t id = 1; id <= 3; ++id) {  // 3 is evicted to SSD by the third save
      ASSERT_GE(s.save(id, 32, static_cast<double>(id)), 0);
      s.commit(id);
    }
    ASSERT_EQ(s.lookup(1, 32, 4).tier, store::TierKind::Ssd);  // LRU of the three
    s.unpin(1);
    s.prefetch(fetched_ahead ? std::vector<store::SessionId>{2, 1, 3}
                             : std::vector<store::SessionId>{2, 3, 1},
               101);
    s.advance(200);
    const auto tier = [&](store::SessionId id) {
      const auto h = s.lookup(id, 32, 300);
      s.unpin(id);
      return h.tier;
    };
    EXPECT_EQ(tier(2), store::TierKind::Dram);
    EXPECT_EQ(tier(1), fetched_ahead ? store::TierKind::Dram : store::TierKind::Ssd);
    EXPECT_EQ(tier(3), fetched_ahead ? store::TierKind::Ssd : store::TierKind::Dram);
  }
}

TEST(SimStore, PinnedEntriesAreNotEvictedAndTtlExpires) {
  SimStoreConfig c = small(1, 0, "lru");
  c.ttl = 10;
  SimStore s(c, 2, 128);
  ASSERT_GE(s.save(1, 32, 0), 0);
  s.commit(1);
  ASSERT_TRUE(s.lookup(1, 32, 1).hit);  // pinned by the load
  EXPECT_LT(s.save(2, 32, 2), 0);       // no room: the only entry is in use
  s.unpin(1);
  EXPECT_FALSE(s.lookup(1, 32, 20).hit);  // idle 19 s > TTL
  EXPECT_EQ(s.entries(), 0);
  ASSERT_GE(s.save(3, 32, 30), 0);
  s.commit(3);
  s.truncate(3, 5, 50);  // expired: dropped, not rewritten (which would revive it)
  EXPECT_EQ(s.entries(), 0);
}

TEST(SimStore, AlignedTruncationShrinksInPlace) {
  SimStore s(small(4, 0, "lru"), 2, 128);  // 32 tokens per chunk
  ASSERT_GE(s.save(1, 64, 0), 0);
  s.commit(1);
  EXPECT_EQ(s.entry_bytes(64), 8u * 4096);
  s.truncate(1, 32, 1);
  const SimStore::Hit h = s.lookup(1, 32, 2);
  ASSERT_TRUE(h.hit);
  EXPECT_EQ(h.tokens, 32);
}

// lib/store's cut_copy_locked (tests/unit/store/ssd_copy_test.cc): a whole-chunk truncation
// of a prefetched entry keeps its SSD copy past the cut, so its demotion writes nothing.
TEST(SimStore, AWholeChunkTruncationKeepsTheSsdCopyPastTheCut) {
  SimStore s(small(4, 4, "scheduler-aware"), 2, 128);  // 16 + 16 chunks; 64 tokens: 8 chunks
  for (store::SessionId id = 1; id <= 3; ++id) {       // 3's save sends 1 to the SSD
    ASSERT_GE(s.save(id, 64, static_cast<double>(id)), 0);
    s.commit(id);
  }
  s.prefetch({1}, 4);  // and 1's fetch sends 2
  s.advance(100);
  s.prefetch({}, 100);
  ASSERT_EQ(s.ssd_copy_chunks(), 8u);
  s.truncate(1, 32, 101);
  EXPECT_EQ(s.ssd_copy_chunks(), 4u);
  ASSERT_TRUE(s.lookup(3, 64, 102).hit);  // 1 is the least recently used
  s.unpin(3);
  const double before = ssd_written(s);
  ASSERT_GE(s.save(4, 64, 103), 0);  // evicts 1 onto its copy
  s.commit(4);
  const SimStore::Hit h = s.lookup(1, 32, 104);
  EXPECT_EQ(h.tier, store::TierKind::Ssd);
  EXPECT_EQ(h.tokens, 32);
  s.unpin(1);
  EXPECT_EQ(ssd_written(s), before);
  EXPECT_EQ(s.copy_reused_chunks(), 4u);
  EXPECT_EQ(s.ssd_copy_chunks(), 0u);
}

}  // namespace
}  // namespace cb::sim
