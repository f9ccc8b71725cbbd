#pragma once
/// Helpers shared by the policy tests: building entries, checking plans move by move,
/// and a one-tier cache simulator that counts hits.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <vector>

#include "lib/policy/clock.h"
#include "lib/policy/eviction.h"
#include "lib/policy/types.h"

namespace cb::policy {

/// Readable moves in gtest failure messages: {session from->to bytes}.
inline void PrintTo(const Move& m, std::ostream* os) {
  *os << "{" << m.session << " " << tier_name(m.from) << "->" << tier_name(m.to) << " " << m.bytes
      << "}";
}

}  // namespace cb::policy

namespace cb::policy::test {

inline EntryMeta entry(uint64_t session, Tier tier, uint64_t bytes, int64_t last_access = 0,
                       int64_t inserted = 0) {
  return EntryMeta{session, tier, bytes, last_access, inserted};
}

/// Sorted sessions of the entries in `tier`.
inline std::vector<uint64_t> sessions_in(const std::vector<EntryMeta>& entries, Tier tier) {
  std::vector<uint64_t> out;
  for (const EntryMeta& e : entries) {
    if (e.tier == tier) out.push_back(e.session);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Applies `moves` one at a time and checks DRAM and SSD stay within `cap` after each.
inline ::testing::AssertionResult applies_within_capacity(std::vector<EntryMeta>& entries,
                                                          const Capacity& cap,
                                                          const std::vector<Move>& moves) {
  for (size_t k = 0; k < moves.size(); ++k) {
    apply_moves(entries, {moves[k]});
    const uint64_t d = used_bytes(entries, Tier::kDram), s = used_bytes(entries, Tier::kSsd);
    if (d > cap.dram || s > cap.ssd) {
      return ::testing::AssertionFailure()
             << "after move " << k << " (session " << moves[k].session << "): dram " << d << "/"
             << cap.dram << ", ssd " << s << "/" << cap.ssd;
    }
  }
  return ::testing::AssertionSuccess();
}

/// Replays `trace` on a single DRAM tier of `slots` unit-size entries (no SSD: evictions
/// drop) under `policy`, with the rest of the trace as the look-ahead and a ManualClock
/// stamping accesses. A miss inserts the entry (demand paging). Returns the hit count.
inline int count_hits(const EvictionPolicy& policy, const std::vector<uint64_t>& trace,
                      uint64_t slots) {
  ManualClock clock;
  std::vector<EntryMeta> cache;
  const Capacity cap{slots, 0};
  int hits = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    clock.advance(1);
    const uint64_t s = trace[i];
    const auto it = std::find_if(cache.begin(), cache.end(),
                                 [&](const EntryMeta& e) { return e.session == s; });
    if (it != cache.end()) {
      ++hits;
      it->last_access = clock.now();
      continue;
    }
    LookAhead ahead;
    ahead.queue.assign(trace.begin() + static_cast<std::ptrdiff_t>(i), trace.end());
    ahead.skv = 1;
    const Plan plan = policy.make_room(cache, cap, Tier::kDram, 1, ahead);
    EXPECT_TRUE(plan.ok);
    EXPECT_LE(plan.moves.size(), 1u);
    for (const Move& m : plan.moves) EXPECT_EQ(m.to, Tier::kDrop);
    apply_moves(cache, plan.moves);
    cache.push_back(entry(s, Tier::kDram, 1, clock.now(), clock.now()));
  }
  return hits;
}

}  // namespace cb::policy::test
