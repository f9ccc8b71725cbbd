// Belady's MIN against exhaustive search on tiny traces and against every online policy.
#include "lib/policy/belady.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "lib/policy/registry.h"
#include "tests/unit/policy/policy_test_util.h"

namespace cb::policy {
namespace {

// The most hits any demand-paging cache of `slots` unit entries can get on trace[i..]:
// on a miss with a full cache, try every victim (memoized on position and contents).
class Optimum {
 public:
  Optimum(std::vector<uint64_t> trace, size_t slots) : trace_(std::move(trace)), slots_(slots) {}

  int best(size_t i, std::vector<uint64_t> cache) {
    if (i == trace_.size()) return 0;
    std::sort(cache.begin(), cache.end());
    const auto key = std::make_pair(i, cache);
    const auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    const uint64_t s = trace_[i];
    int r = 0;
    if (std::find(cache.begin(), cache.end(), s) != cache.end()) {
      r = 1 + best(i + 1, cache);
    } else if (cache.size() < slots_) {
      cache.push_back(s);
      r = best(i + 1, cache);
    } else {
      for (size_t v = 0; v < cache.size(); ++v) {
        std::vector<uint64_t> next = cache;
        next[v] = s;
        r = std::max(r, best(i + 1, next));
      }
    }
    memo_.emplace(key, r);
    return r;
  }

 private:
  std::vector<uint64_t> trace_;
  size_t slots_;
  std::map<std::pair<size_t, std::vector<uint64_t>>, int> memo_;
};

std::vector<uint64_t> random_trace(std::mt19937_64& rng, size_t len, uint64_t sessions) {
  std::uniform_int_distribution<uint64_t> pick(1, sessions);
  std::vector<uint64_t> t(len);
  for (uint64_t& s : t) s = pick(rng);
  return t;
}

TEST(BeladyTest, MatchesExhaustiveOptimumOnTinyTraces) {
  std::mt19937_64 rng(20240717);
  const Belady belady;
  for (int round = 0; round < 300; ++round) {
    const size_t slots = 1 + round % 3;
    const std::vector<uint64_t> trace = random_trace(rng, 4 + round % 11, 2 + round % 4);
    const int opt = Optimum(trace, slots).best(0, {});
    EXPECT_EQ(test::count_hits(belady, trace, slots), opt) << "round " << round;
  }
}

TEST(BeladyTest, NoPolicyBeatsBelady) {
  std::mt19937_64 rng(7);
  const Belady belady;
  for (int round = 0; round < 60; ++round) {
    const size_t slots = 2 + round % 4;
    const std::vector<uint64_t> trace = random_trace(rng, 200, 4 + round % 9);
    const int best = test::count_hits(belady, trace, slots);
    for (const std::string& name : eviction_policy_names()) {
      const auto policy = make_eviction_policy(name);
      EXPECT_LE(test::count_hits(*policy, trace, slots), best) << name << ", round " << round;
    }
    if (round < 20) {  // small enough for the exhaustive search too
      const std::vector<uint64_t> shorter(trace.begin(), trace.begin() + 40);
      EXPECT_EQ(test::count_hits(belady, shorter, slots), Optimum(shorter, slots).best(0, {}));
    }
  }
}

// Farthest next use first, never-used-again before everything.
TEST(BeladyTest, EvictsFarthestNextUse) {
  const std::vector<EntryMeta> e = {
      test::entry(1, Tier::kDram, 1, 3), test::entry(2, Tier::kDram, 1, 2),
      test::entry(3, Tier::kDram, 1, 1), test::entry(4, Tier::kDram, 1, 0)};
  LookAhead ahead;
  ahead.queue = {9, 2, 1, 3, 2, 1};  // s4 never used again
  const Plan p = Belady().make_room(e, {4, 0}, Tier::kDram, 4, ahead);
  ASSERT_TRUE(p.ok);
  std::vector<uint64_t> order;
  for (const Move& m : p.moves) order.push_back(m.session);
  EXPECT_EQ(order, (std::vector<uint64_t>{4, 3, 1, 2}));
}

}  // namespace
}  // namespace cb::policy
