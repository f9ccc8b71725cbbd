// SimStore's indexed eviction decisions (lib/sim/sim_store_index.cc) against the advisor's
// ranking of every candidate: random operation sequences run on a store that checks each
// indexed decision (verify_decisions: a difference throws) and on one that hands the advisor
// every candidate (indexed_decisions off); both must answer every call alike. Entries of
// different sizes (so the window, from their mean, moves), whole-chunk truncations and
// look-aheads longer than some windows: rounding the mean size down, or leaving the admission
// base out of it, fails here.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/engine/policy_advisor.h"
#include "lib/policy/registry.h"
#include "lib/sim/sim_store.h"

namespace cb::sim {
namespace {

struct Pair {
  std::unique_ptr<SimStore> indexed, scanned;
};

// Tokens of 128-byte K rows, 2 layers, 4 KiB chunks: 32 tokens a chunk, an entry of up to 224
// tokens 4 to 28 chunks, so entries differ in size and Skv (the candidates' mean) moves.
Pair make_pair_of_stores(const std::string& policy, std::mt19937_64& rng) {
  const auto uni = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  SimStoreConfig c;
  c.chunk_bytes = 4096;
  c.hbm_bytes = uni(0, 3) == 0 ? uni(1, 3) * 16 * 4096 : 0;
  c.dram_bytes = uni(1, 8) * 16 * 4096;
  c.dram_reserve_bytes = uni(0, 2) == 0 ? 4 * 4096 : 0;
  c.ssd_bytes = uni(0, 4) == 0 ? 0 : uni(1, 24) * 16 * 4096;
  c.ttl = uni(0, 3) == 0 ? 40 : 0;
  c.clean_ahead_bytes = uni(0, 1) == 0 ? uni(1, 3) * 16 * 4096 : 0;
  c.demote_ahead_bytes = uni(0, 1) == 0 ? uni(1, 2) * 16 * 4096 : 0;
  c.save_admission = uni(0, 1) == 0;
  c.drop_slow_demotions = uni(0, 1) == 0;
  const uint64_t skv = uni(0, 2) == 0 ? uni(1, 24) * 4096 : 0;  // else the candidates' mean
  c.advisor = std::make_shared<engine::PolicyAdvisor>(
      policy, policy::Capacity{c.dram_bytes, c.ssd_bytes}, skv);
  c.d2d = Link(4, 0);
  c.h2d = c.d2h = Link(1, 0.0001);
  c.ssd_read = Link(0.2, 0.0002);
  c.ssd_write = Link(0.1, 0.0002);
  Pair p;
  c.verify_decisions = true;
  p.indexed = std::make_unique<SimStore>(c, 2, 128);
  c.indexed_decisions = false;
  c.verify_decisions = false;
  p.scanned = std::make_unique<SimStore>(c, 2, 128);
  for (SimStore* s : {p.indexed.get(), p.scanned.get()}) {
    s->set_recompute_estimate([](int64_t tokens) { return 1e-4 * static_cast<double>(tokens); });
  }
  return p;
}

TEST(SimStoreIndex, IndexedDecisionsMatchTheAdvisorsRankingOfEveryCandidate) {
  std::mt19937_64 rng(2026);
  int hits = 0, misses = 0, failed_saves = 0, ssd_hits = 0;
  for (const std::string& policy : policy::eviction_policy_names()) {
    for (int run = 0; run < 400; ++run) {
      SCOPED_TRACE(policy + " run " + std::to_string(run));
      Pair p = make_pair_of_stores(policy, rng);
      SimStore& a = *p.indexed;
      SimStore& b = *p.scanned;
      std::map<store::SessionId, int64_t> len;  // tokens saved per session (the history)
      std::vector<store::SessionId> pinned;
      double now = 0;
      const auto uni = [&](uint64_t lo, uint64_t hi) {
        return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
      };
      for (int op = 0; op < 400; ++op) {
        now += static_cast<double>(uni(0, 20)) * 1e-3;
        const store::SessionId s = uni(1, 14);
        switch (uni(0, 9)) {
          case 0:
          case 1:
          case 2: {  // a turn's save: the history grows (sometimes cut, sometimes a new entry)
            const int64_t t = std::min<int64_t>(224, len[s] + static_cast<int64_t>(uni(1, 48)));
            const bool replace = uni(0, 7) == 0, append = uni(0, 3) != 0;
            const double ca = a.save(s, t, now, -1, replace, append);
            const double cb = b.save(s, t, now, -1, replace, append);
            ASSERT_EQ(ca, cb);
            ASSERT_EQ(a.caller_blocked_until(), b.caller_blocked_until());
            if (ca < 0) {
              ++failed_saves;
            } else {
              len[s] = t;
            }
            break;
          }
          case 3:  // its commit lands
            a.commit(s);
            b.commit(s);
            break;
          case 4: {  // a turn looks its history up
            const auto ha = a.lookup(s, len[s], now);
            const auto hb = b.lookup(s, len[s], now);
            ASSERT_EQ(ha.hit, hb.hit);
            ASSERT_EQ(ha.tier, hb.tier);
            ASSERT_EQ(ha.tokens, hb.tokens);
            ASSERT_EQ(ha.ready_at, hb.ready_at);
            if (ha.hit) {
              ++hits;
              ssd_hits += ha.tier == store::TierKind::Ssd;
              pinned.push_back(s);
            } else {
              ++misses;
            }
            break;
          }
          case 5:  // and is done with it
            if (!pinned.empty()) {
              const size_t i = uni(0, pinned.size() - 1);
              a.unpin(pinned[i]);
              b.unpin(pinned[i]);
              pinned.erase(pinned.begin() + static_cast<std::ptrdiff_t>(i));
            }
            break;
          case 6: {  // the scheduler's look-ahead changes (repeats: a session's later turns)
            std::vector<store::SessionId> ahead(uni(0, 30));
            for (auto& x : ahead) x = uni(1, 16);
            a.prefetch(ahead, now);
            b.prefetch(ahead, now);
            break;
          }
          case 7: {  // a context overflow drops the oldest tokens (whole chunks: cut in place)
            const int64_t drop = static_cast<int64_t>(uni(0, 1) == 0 ? 32 * uni(1, 3) : uni(1, 40));
            a.truncate(s, drop, now);
            b.truncate(s, drop, now);
            len[s] = std::max<int64_t>(0, len[s] - drop);
            break;
          }
          case 8:
            a.advance(now);
            b.advance(now);
            a.write_back(now);
            b.write_back(now);
            break;
          default:
            if (uni(0, 5) == 0) {  // the conversation ends
              a.erase(s);
              b.erase(s);
              len.erase(s);
            }
        }
        ASSERT_EQ(a.entries(), b.entries()) << "op " << op;
      }
      const auto ta = a.tier_totals(), tb = b.tier_totals();
      for (size_t t = 0; t < ta.size(); ++t) {
        EXPECT_EQ(ta[t].hits, tb[t].hits);
        EXPECT_EQ(ta[t].bytes_written, tb[t].bytes_written);
        EXPECT_EQ(ta[t].bytes_read, tb[t].bytes_read);
      }
      EXPECT_EQ(a.slow_dropped(), b.slow_dropped());
      EXPECT_EQ(a.admitted_below(), b.admitted_below());
      EXPECT_EQ(a.cleaned_chunks(), b.cleaned_chunks());
    }
  }
  // The runs put the stores under pressure: hits from both tiers, misses and refused saves.
  EXPECT_GT(hits, 1000);
  EXPECT_GT(ssd_hits, 100);
  EXPECT_GT(misses, 1000);
  EXPECT_GT(failed_saves, 10);
}

TEST(SimStoreIndex, ASessionIdTaggedAsACopyIsRefused) {
  std::mt19937_64 rng(1);
  Pair p = make_pair_of_stores("scheduler-aware", rng);
  try {
    p.indexed->save(store::kCopyCandidate | 5, 32, 0);
    FAIL() << "expected cb::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bit 63"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.indexed->entries(), 0);
}

}  // namespace
}  // namespace cb::sim
