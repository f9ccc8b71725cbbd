#include "lib/engine/policy_advisor.h"

#include <gtest/gtest.h>

#include "lib/core/error.h"

namespace {

using cb::engine::PolicyAdvisor;
using cb::store::EntryInfo;
using cb::store::TierKind;

EntryInfo entry(uint64_t s, TierKind t, double last_access, uint64_t bytes = 100) {
  EntryInfo e;
  e.session = s;
  e.tier = t;
  e.bytes = bytes;
  e.last_access = last_access;
  e.created = last_access;
  return e;
}

// Cmem 300, Cdisk 500, Skv 100: prefetch window 3 jobs, eviction window 8 jobs.
const cb::policy::Capacity kCap{300, 500};

TEST(PolicyAdvisorTest, SchedulerAwareEvictsOutsideTheWindowFirstThenFromTheTail) {
  PolicyAdvisor a("scheduler-aware", kCap, 100);
  // DRAM holds sessions 1, 4, 20; 20 is not in the look-ahead at all (though most recent).
  std::vector<EntryInfo> dram = {entry(1, TierKind::Dram, 1.0), entry(4, TierKind::Dram, 2.0),
                                 entry(20, TierKind::Dram, 9.0)};
  const std::vector<uint64_t> queue = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto v = a.choose_victims(TierKind::Dram, 100, dram, queue, 10.0);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].session, 20u);
  EXPECT_FALSE(v[0].drop);
  // Without 20, the in-window entry nearest the tail (session 4) goes; session 1 (head) never.
  dram.pop_back();
  v = a.choose_victims(TierKind::Dram, 200, dram, queue, 10.0);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].session, 4u);
}

TEST(PolicyAdvisorTest, LruIgnoresTheQueueAndSsdVictimsAreDropped) {
  PolicyAdvisor a("lru", kCap, 100);
  std::vector<EntryInfo> ssd = {entry(3, TierKind::Ssd, 5.0), entry(9, TierKind::Ssd, 1.0),
                                entry(7, TierKind::Ssd, 3.0)};
  auto v = a.choose_victims(TierKind::Ssd, 150, ssd, {3, 9}, 10.0);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].session, 9u);  // least recently used, though it is in the queue
  EXPECT_EQ(v[1].session, 7u);
  EXPECT_TRUE(v[0].drop && v[1].drop);
}

TEST(PolicyAdvisorTest, PrefetchesSsdEntriesOfThePrefetchWindowInQueueOrder) {
  PolicyAdvisor a("scheduler-aware", kCap, 100);
  std::vector<EntryInfo> ssd = {entry(3, TierKind::Ssd, 1.0), entry(5, TierKind::Ssd, 1.0),
                                entry(2, TierKind::Ssd, 1.0)};
  // Window of 3 jobs: 1, 2, 3 -> fetch 2 then 3; 5 is beyond the window.
  EXPECT_EQ(a.choose_prefetch({1, 2, 3, 4, 5}, ssd, 300, 0.0), (std::vector<uint64_t>{2, 3}));
}

TEST(PolicyAdvisorTest, OnlyLookaheadPoliciesPrefetch) {
  // LRU and FIFO never read the queue: they load SSD hits on demand. Belady, like the
  // scheduler-aware policy, fetches the window's SSD entries.
  std::vector<EntryInfo> ssd = {entry(2, TierKind::Ssd, 1.0), entry(3, TierKind::Ssd, 1.0)};
  for (const char* blind : {"lru", "fifo"}) {
    PolicyAdvisor a(blind, kCap, 100);
    EXPECT_TRUE(a.choose_prefetch({1, 2, 3}, ssd, 300, 0.0).empty()) << blind;
    EXPECT_TRUE(a.choose_prefetch_with_mean({1, 2, 3}, ssd, 100).empty()) << blind;
  }
  PolicyAdvisor b("belady", kCap, 100);
  EXPECT_EQ(b.choose_prefetch({1, 2, 3}, ssd, 300, 0.0), (std::vector<uint64_t>{2, 3}));
}

TEST(PolicyAdvisorTest, UnknownPolicyIsAClearError) {
  EXPECT_THROW(PolicyAdvisor("mru", kCap), cb::Error);
}

}  // namespace
