// Randomized invariants of every policy's make_room and of plan_prefetch: capacities hold
// after every single move, protected entries never move, failures change nothing, the
// victims are the shortest sufficient prefix, and decisions are deterministic and
// independent of the order the entries are listed in.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "lib/policy/placement.h"
#include "lib/policy/registry.h"
#include "tests/unit/policy/policy_test_util.h"

namespace cb::policy {
namespace {

/// Position of each session's first job in `queue` (its next use): the oracle's view.
std::unordered_map<uint64_t, size_t> first_positions(const std::vector<uint64_t>& queue) {
  std::unordered_map<uint64_t, size_t> pos;
  for (size_t i = 0; i < queue.size(); ++i) pos.emplace(queue[i], i);  // keeps the first
  return pos;
}

struct Case {
  Capacity cap;
  std::vector<EntryMeta> entries;
  LookAhead ahead;
};

Case random_case(std::mt19937_64& rng) {
  const auto uni = [&](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  Case c;
  c.cap = {uni(0, 400), uni(0, 3) == 0 ? 0 : uni(0, 800)};
  const uint64_t sessions = uni(1, 16);
  uint64_t dram = 0, ssd = 0;
  for (uint64_t s = 0; s < sessions; ++s) {
    const uint64_t bytes = uni(0, 5) == 0 ? uni(0, 5) : uni(1, 120);
    const auto time = static_cast<int64_t>(uni(0, 20));
    const uint64_t where = uni(0, 9);
    EntryMeta e{s, Tier::kDram, bytes, time + static_cast<int64_t>(uni(0, 5)), time};
    if (where == 0) {
      e.tier = Tier::kHbm;
    } else if (where <= 4 && dram + bytes <= c.cap.dram) {
      dram += bytes;
    } else if (where >= 5 && ssd + bytes <= c.cap.ssd) {
      e.tier = Tier::kSsd;
      ssd += bytes;
    } else {
      continue;  // not stored
    }
    c.entries.push_back(e);
  }
  std::shuffle(c.entries.begin(), c.entries.end(), rng);
  const uint64_t qlen = uni(0, 12);
  for (uint64_t i = 0; i < qlen; ++i) c.ahead.queue.push_back(uni(0, sessions + 2));
  for (uint64_t s = 0; s < sessions; ++s) {
    if (uni(0, 7) == 0) c.ahead.pinned.push_back(s);
  }
  c.ahead.skv = uni(0, 1) == 0 ? 0 : uni(1, 150);
  return c;
}

std::set<uint64_t> protected_sessions(const LookAhead& ahead) {
  std::set<uint64_t> p(ahead.pinned.begin(), ahead.pinned.end());
  if (!ahead.queue.empty()) p.insert(ahead.queue.front());
  return p;
}

TEST(InvariantsTest, MakeRoomKeepsCapacitiesAndProtectedEntries) {
  std::mt19937_64 rng(99);
  int satisfied = 0, refused = 0, cascaded = 0;
  for (int round = 0; round < 3000; ++round) {
    const Case c = random_case(rng);
    const Tier tier = rng() % 2 == 0 ? Tier::kDram : Tier::kSsd;
    const uint64_t cap = capacity_of(c.cap, tier);
    const uint64_t need = std::uniform_int_distribution<uint64_t>(0, cap + 20)(rng);
    const std::set<uint64_t> keep = protected_sessions(c.ahead);
    for (const std::string& name : eviction_policy_names()) {
      SCOPED_TRACE(name + ", round " + std::to_string(round));
      const auto policy = make_eviction_policy(name);
      const Plan plan = policy->make_room(c.entries, c.cap, tier, need, c.ahead);

      // Deterministic, and independent of the order of the entry list.
      const Plan again = policy->make_room(c.entries, c.cap, tier, need, c.ahead);
      EXPECT_EQ(plan.ok, again.ok);
      EXPECT_EQ(plan.moves, again.moves);
      std::vector<EntryMeta> shuffled = c.entries;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      const Plan other = policy->make_room(shuffled, c.cap, tier, need, c.ahead);
      EXPECT_EQ(plan.ok, other.ok);
      EXPECT_EQ(plan.moves, other.moves);

      uint64_t movable = 0;
      for (const EntryMeta& e : c.entries) {
        if (e.tier == tier && keep.count(e.session) == 0) movable += e.bytes;
      }
      const uint64_t used = used_bytes(c.entries, tier);
      const bool feasible = need <= cap && used - movable + need <= cap;
      EXPECT_EQ(plan.ok, feasible);
      if (!plan.ok) {
        EXPECT_TRUE(plan.moves.empty());
        ++refused;
        continue;
      }
      ++satisfied;

      std::set<uint64_t> moved;
      uint64_t freed = 0, last = 0;
      for (const Move& m : plan.moves) {
        EXPECT_TRUE(moved.insert(m.session).second) << "session moved twice";
        EXPECT_EQ(keep.count(m.session), 0u) << "protected session " << m.session << " moved";
        EXPECT_NE(m.from, Tier::kHbm);
        EXPECT_TRUE((m.from == Tier::kDram && (m.to == Tier::kSsd || m.to == Tier::kDrop)) ||
                    (m.from == Tier::kSsd && m.to == Tier::kDrop));
        if (m.from == tier) {
          freed += m.bytes;
          last = m.bytes;
        }
        if (m.from == Tier::kSsd && tier == Tier::kDram) ++cascaded;
      }
      std::vector<EntryMeta> after = c.entries;
      EXPECT_TRUE(test::applies_within_capacity(after, c.cap, plan.moves));
      EXPECT_LE(used_bytes(after, tier) + need, cap);
      if (freed > 0) {  // the shortest sufficient prefix: one victim fewer would not do
        EXPECT_GT(used - (freed - last) + need, cap);
      }
    }
  }
  EXPECT_GT(satisfied, 1000);
  EXPECT_GT(refused, 100);
  EXPECT_GT(cascaded, 50);
}

TEST(InvariantsTest, PrefetchKeepsCapacitiesAndNeverDisplacesMoreUrgentJobs) {
  std::mt19937_64 rng(4242);
  int fetched = 0;
  for (int round = 0; round < 3000; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const Case c = random_case(rng);
    const std::vector<Move> moves = plan_prefetch(c.entries, c.cap, c.ahead);
    EXPECT_EQ(moves, plan_prefetch(c.entries, c.cap, c.ahead));
    std::vector<EntryMeta> shuffled = c.entries;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    EXPECT_EQ(moves, plan_prefetch(shuffled, c.cap, c.ahead));

    const size_t window = window_lengths(c.cap, effective_skv(c.entries, c.ahead)).prefetch;
    const auto pos = first_positions(c.ahead.queue);
    const std::set<uint64_t> pinned(c.ahead.pinned.begin(), c.ahead.pinned.end());
    const uint64_t head = c.ahead.queue.empty() ? ~uint64_t{0} : c.ahead.queue.front();
    std::vector<uint64_t> pending;  // evictions made for the next fetch
    for (const Move& m : moves) {
      EXPECT_EQ(pinned.count(m.session), 0u);
      if (m.to == Tier::kDram) {
        ++fetched;
        EXPECT_EQ(m.from, Tier::kSsd);
        ASSERT_TRUE(pos.count(m.session));
        const size_t p = pos.at(m.session);
        EXPECT_LT(p, window);
        for (uint64_t v : pending) {
          const auto it = pos.find(v);
          EXPECT_TRUE(it == pos.end() || it->second > p) << "displaced a more urgent job";
        }
        pending.clear();
      } else {
        EXPECT_NE(m.session, head) << "evicted the job about to run";
        pending.push_back(m.session);
      }
    }
    EXPECT_TRUE(pending.empty()) << "evictions without a fetch";
    std::vector<EntryMeta> after = c.entries;
    EXPECT_TRUE(test::applies_within_capacity(after, c.cap, moves));
  }
  EXPECT_GT(fetched, 300);
}

// A two-tier replay of random traces: every policy keeps the tiers within capacity at
// every step, and Belady never gets fewer DRAM hits than LRU or FIFO with unit entries.
TEST(InvariantsTest, TwoTierReplayStaysWithinCapacity) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 40; ++round) {
    std::vector<uint64_t> trace(150);
    for (uint64_t& s : trace) s = rng() % 12;
    const Capacity cap{3, 4};
    std::map<std::string, int> dram_hits;
    for (const std::string& name : eviction_policy_names()) {
      SCOPED_TRACE(name + ", round " + std::to_string(round));
      const auto policy = make_eviction_policy(name);
      std::vector<EntryMeta> entries;
      for (size_t i = 0; i < trace.size(); ++i) {
        const uint64_t s = trace[i];
        LookAhead ahead;
        ahead.queue.assign(trace.begin() + static_cast<std::ptrdiff_t>(i), trace.end());
        ahead.skv = 1;
        auto it = std::find_if(entries.begin(), entries.end(),
                               [&](const EntryMeta& e) { return e.session == s; });
        if (it != entries.end() && it->tier == Tier::kDram) ++dram_hits[name];
        if (it != entries.end()) entries.erase(it);  // loaded into HBM for the job
        const Plan plan = policy->make_room(entries, cap, Tier::kDram, 1, ahead);
        ASSERT_TRUE(plan.ok);
        ASSERT_TRUE(test::applies_within_capacity(entries, cap, plan.moves));
        const auto t = static_cast<int64_t>(i);
        entries.push_back({s, Tier::kDram, 1, t, t});  // saved back after the job
      }
    }
    EXPECT_GE(dram_hits["belady"], dram_hits["lru"]);
    EXPECT_GE(dram_hits["belady"], dram_hits["fifo"]);
  }
}

// order_spec() is what lets sim mode draw victims from a sorted index instead of ranking every
// candidate; this oracle builds the spec's order from its definition and must match order().
std::vector<size_t> spec_order(const std::vector<EntryMeta>& entries,
                               const std::vector<size_t>& cands, const OrderSpec& spec,
                               const std::vector<uint64_t>& queue) {
  std::unordered_map<uint64_t, size_t> pos = first_positions(queue);
  const auto in_window = [&](size_t i) {
    auto it = pos.find(entries[i].session);
    return it != pos.end() && it->second < spec.window;
  };
  std::vector<size_t> outside, inside;
  for (size_t i : cands) (in_window(i) ? inside : outside).push_back(i);
  std::sort(outside.begin(), outside.end(), [&](size_t a, size_t b) {
    const EntryMeta& x = entries[a];
    const EntryMeta& y = entries[b];
    if (spec.base == OrderSpec::Base::kLru) return lru_before(x, y);
    if (x.inserted != y.inserted) return x.inserted < y.inserted;
    return x.session < y.session;
  });
  std::sort(inside.begin(), inside.end(), [&](size_t a, size_t b) {
    return pos.at(entries[a].session) > pos.at(entries[b].session);
  });
  outside.insert(outside.end(), inside.begin(), inside.end());
  return outside;
}

TEST(InvariantsTest, OrderSpecDescribesEveryPolicysOrder) {
  std::mt19937_64 rng(7);
  int windowed = 0;
  for (int round = 0; round < 3000; ++round) {
    Case c = random_case(rng);
    if (round % 2 == 0) {  // ties in last_access and inserted, as the sim's clock has them
      for (EntryMeta& e : c.entries) e.last_access = e.inserted = static_cast<int64_t>(rng() % 3);
    }
    std::vector<size_t> cands;
    for (size_t i = 0; i < c.entries.size(); ++i) {
      if (c.entries[i].tier != Tier::kHbm && rng() % 5 != 0) cands.push_back(i);
    }
    std::vector<EntryMeta> cand_entries;
    for (size_t i : cands) cand_entries.push_back(c.entries[i]);
    const uint64_t skv = effective_skv(cand_entries, c.ahead);
    for (const std::string& name : eviction_policy_names()) {
      SCOPED_TRACE(name + " round " + std::to_string(round));
      const auto policy = make_eviction_policy(name);
      const OrderSpec spec = policy->order_spec(c.cap, skv, c.ahead.queue.size());
      if (spec.window > 0 && !c.ahead.queue.empty()) ++windowed;
      // order() is given every entry (effective_skv over all of them) where the spec was given
      // the candidates' mean: pass the candidates alone, as the store's advisor does.
      std::vector<size_t> idx(cand_entries.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
      EXPECT_EQ(policy->order(cand_entries, idx, c.cap, c.ahead),
                spec_order(cand_entries, idx, spec, c.ahead.queue));
    }
  }
  EXPECT_GT(windowed, 1000);  // the windowed policies were exercised, not only LRU and FIFO
}

}  // namespace
}  // namespace cb::policy
