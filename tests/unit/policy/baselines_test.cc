// LRU and FIFO driven by an injected ManualClock, and the policy registry.
#include "lib/policy/baselines.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "lib/core/error.h"
#include "lib/policy/clock.h"
#include "lib/policy/registry.h"
#include "tests/unit/policy/policy_test_util.h"

namespace cb::policy {
namespace {

constexpr Tier D = Tier::kDram;
constexpr Tier S = Tier::kSsd;

// A tiny store front: inserts and accesses stamped by the injected clock.
struct Stamped {
  ManualClock clock;
  std::vector<EntryMeta> entries;

  void insert(uint64_t session, Tier tier, uint64_t bytes) {
    clock.advance(10);
    entries.push_back({session, tier, bytes, clock.now(), clock.now()});
  }
  void access(uint64_t session) {
    clock.advance(10);
    for (EntryMeta& e : entries) {
      if (e.session == session) e.last_access = clock.now();
    }
  }
};

std::vector<uint64_t> victims(const Plan& p) {
  std::vector<uint64_t> out;
  for (const Move& m : p.moves) out.push_back(m.session);
  return out;
}

TEST(BaselinesTest, LruFollowsAccessesFifoFollowsInsertion) {
  Stamped s;
  s.insert(1, D, 100);  // t=10
  s.insert(2, D, 100);  // t=20
  s.insert(3, D, 100);  // t=30
  s.access(1);          // t=40
  s.access(2);          // t=50
  const Capacity cap{300, 1000};
  const LookAhead none;
  EXPECT_EQ(victims(Lru().make_room(s.entries, cap, D, 100, none)), (std::vector<uint64_t>{3}));
  EXPECT_EQ(victims(Lru().make_room(s.entries, cap, D, 200, none)), (std::vector<uint64_t>{3, 1}));
  EXPECT_EQ(victims(Fifo().make_room(s.entries, cap, D, 100, none)), (std::vector<uint64_t>{1}));
  EXPECT_EQ(victims(Fifo().make_room(s.entries, cap, D, 300, none)),
            (std::vector<uint64_t>{1, 2, 3}));
  s.access(3);  // t=60: now 1 is least recently used
  EXPECT_EQ(victims(Lru().make_room(s.entries, cap, D, 100, none)), (std::vector<uint64_t>{1}));
  EXPECT_EQ(victims(Fifo().make_room(s.entries, cap, D, 100, none)), (std::vector<uint64_t>{1}));
}

// Ties on the clock are broken by insertion time, then session id: never by list order.
TEST(BaselinesTest, TiesAreBrokenDeterministically) {
  std::vector<EntryMeta> e = {{7, D, 10, 5, 2}, {3, D, 10, 5, 2}, {5, D, 10, 5, 1}};
  const Capacity cap{30, 0};
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(victims(Lru().make_room(e, cap, D, 30, {})), (std::vector<uint64_t>{5, 3, 7}));
    EXPECT_EQ(victims(Fifo().make_room(e, cap, D, 30, {})), (std::vector<uint64_t>{5, 3, 7}));
    std::rotate(e.begin(), e.begin() + 1, e.end());
  }
}

// Baselines ignore the look-ahead except for the job about to run.
TEST(BaselinesTest, IgnoreWindowButKeepTheNextJob) {
  Stamped s;
  s.insert(1, D, 100);
  s.insert(2, D, 100);
  LookAhead ahead;
  ahead.queue = {1, 2};
  const Capacity cap{200, 1000};
  EXPECT_EQ(victims(Lru().make_room(s.entries, cap, D, 100, ahead)), (std::vector<uint64_t>{2}));
  EXPECT_EQ(victims(Fifo().make_room(s.entries, cap, D, 100, ahead)), (std::vector<uint64_t>{2}));
  ahead.queue = {2, 1};
  EXPECT_EQ(victims(Lru().make_room(s.entries, cap, D, 100, ahead)), (std::vector<uint64_t>{1}));
}

TEST(BaselinesTest, LruCascadesThroughSsd) {
  Stamped s;
  s.insert(1, S, 100);
  s.insert(2, S, 100);
  s.insert(3, D, 100);
  const Capacity cap{100, 200};
  const Plan p = Lru().make_room(s.entries, cap, D, 100, {});
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{1, S, Tier::kDrop, 100}, {3, D, S, 100}}));
  EXPECT_TRUE(test::applies_within_capacity(s.entries, cap, p.moves));
}

TEST(BaselinesTest, ManualClockNeverGoesBack) {
  ManualClock c(5);
  c.advance(-3);
  EXPECT_EQ(c.now(), 5);
  c.advance(2);
  EXPECT_EQ(c.now(), 7);
}

TEST(RegistryTest, MakesEveryNamedPolicy) {
  for (const std::string& n : eviction_policy_names()) {
    EXPECT_EQ(make_eviction_policy(n)->name(), n);
  }
  try {
    make_eviction_policy("random");
    FAIL() << "expected cb::Error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("scheduler-aware, lru, fifo, belady"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(tier_name(Tier::kSsd), "ssd");
}

}  // namespace
}  // namespace cb::policy
