// Scheduler-aware fetching and eviction (CachedAttention section 3.4): the Figure 9
// walk-through, window lengths, in-window exemption, tail-first eviction, the DRAM -> SSD
// -> drop cascade and prefetch planning.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "lib/core/error.h"
#include "lib/policy/placement.h"
#include "tests/unit/policy/policy_test_util.h"

namespace cb::policy {
namespace {

using test::entry;
using test::sessions_in;

constexpr Tier D = Tier::kDram;
constexpr Tier S = Tier::kSsd;
constexpr Tier X = Tier::kDrop;

LookAhead queue_of(std::vector<uint64_t> q, uint64_t skv = 100) {
  LookAhead a;
  a.queue = std::move(q);
  a.skv = skv;
  return a;
}

// Figure 9, made concrete. Every entry is Skv = 100 bytes; host memory holds Cmem = 300
// (3 entries) and disk Cdisk = 500 (5 entries), so the prefetch window is Cmem/Skv = 3 jobs
// and the look-ahead eviction window (Cmem+Cdisk)/Skv = 8 jobs. The queue holds jobs J1..J9;
// job Jk continues conversation k. J2 starts a new conversation (nothing stored), J8's
// entry was dropped earlier. Initially (last access in parentheses, clock units):
//   DRAM: s1 (70), s4 (60)                      200/300
//   SSD:  s3 (50), s5 (20), s6 (30), s7 (40), s9 (10)   500/500
// (a) Prefetch: the window J1..J3 holds s3 on disk; it is fetched into host memory.
// (b) Job J0 (conversation 0, whose next turn is not queued) finishes and saves its 100 B
//     KV cache; host memory is full. Candidates are s3 (J3) and s4 (J4), both inside the
//     eviction window, s1 belongs to the job about to run. J4 runs last, so s4 goes to disk
//     (it is in the eviction window but outside the prefetch window).
// (c) Job J10 (conversation 10, not queued) finishes and saves 100 B; host memory is full
//     again. s0 is outside the eviction window, so it is evicted rather than s3; the disk is
//     full, so among the disk entries and s0 the out-of-window ones go first, least recently
//     used first: s9 (J9, past the 8-job window) leaves the store, then s0 moves to disk.
TEST(SchedulerAwareTest, Figure9StepByStep) {
  const Capacity cap{300, 500};
  const Windows w = window_lengths(cap, 100);
  EXPECT_EQ(w.prefetch, 3u);
  EXPECT_EQ(w.eviction, 8u);
  std::vector<EntryMeta> entries = {
      entry(1, D, 100, 70), entry(4, D, 100, 60), entry(3, S, 100, 50), entry(5, S, 100, 20),
      entry(6, S, 100, 30), entry(7, S, 100, 40), entry(9, S, 100, 10)};
  const LookAhead ahead = queue_of({1, 2, 3, 4, 5, 6, 7, 8, 9});

  // (a) job 3's KV is fetched from disk into host memory.
  const std::vector<Move> fetch = plan_prefetch(entries, cap, ahead);
  ASSERT_EQ(fetch, (std::vector<Move>{{3, S, D, 100}}));
  ASSERT_TRUE(test::applies_within_capacity(entries, cap, fetch));
  EXPECT_EQ(sessions_in(entries, D), (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_TRUE(plan_prefetch(entries, cap, ahead).empty()) << "nothing left to fetch";

  // (b) host memory is full: job 4's KV is evicted to disk.
  const SchedulerAware policy;
  const Plan b = policy.make_room(entries, cap, D, 100, ahead);
  ASSERT_TRUE(b.ok);
  ASSERT_EQ(b.moves, (std::vector<Move>{{4, D, S, 100}}));
  ASSERT_TRUE(test::applies_within_capacity(entries, cap, b.moves));
  entries.push_back(entry(0, D, 100, 80, 80));
  EXPECT_EQ(sessions_in(entries, D), (std::vector<uint64_t>{0, 1, 3}));
  EXPECT_EQ(used_bytes(entries, S), cap.ssd) << "the disk is now full";

  // (c) disk is full: job 9's KV (outside the eviction window) leaves the store.
  const Plan c = policy.make_room(entries, cap, D, 100, ahead);
  ASSERT_TRUE(c.ok);
  ASSERT_EQ(c.moves, (std::vector<Move>{{9, S, X, 100}, {0, D, S, 100}}));
  ASSERT_TRUE(test::applies_within_capacity(entries, cap, c.moves));
  entries.push_back(entry(10, D, 100, 90, 90));
  EXPECT_EQ(sessions_in(entries, D), (std::vector<uint64_t>{1, 3, 10}));
  EXPECT_EQ(sessions_in(entries, S), (std::vector<uint64_t>{0, 4, 5, 6, 7}));
}

TEST(SchedulerAwareTest, WindowLengthsRoundDownAndAreAtLeastOne) {
  EXPECT_EQ(window_lengths({300, 500}, 100).prefetch, 3u);
  EXPECT_EQ(window_lengths({399, 500}, 100).prefetch, 3u);
  EXPECT_EQ(window_lengths({399, 500}, 100).eviction, 8u);
  EXPECT_EQ(window_lengths({399, 501}, 100).eviction, 9u);
  EXPECT_EQ(window_lengths({50, 0}, 100).prefetch, 1u);
  EXPECT_EQ(window_lengths({0, 0}, 100).eviction, 1u);
  const uint64_t big = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(window_lengths({big, big}, 1).eviction, static_cast<size_t>(big)) << "saturates";
  EXPECT_THROW(window_lengths({300, 500}, 0), cb::Error);
}

TEST(SchedulerAwareTest, EffectiveSkvIsExplicitOrRoundedUpMean) {
  std::vector<EntryMeta> e = {entry(1, D, 100), entry(2, S, 101), entry(3, Tier::kHbm, 9999)};
  EXPECT_EQ(effective_skv(e, queue_of({}, 0)), 101u);  // ceil(201 / 2); HBM ignored
  EXPECT_EQ(effective_skv(e, queue_of({}, 64)), 64u);
  EXPECT_EQ(effective_skv({}, queue_of({}, 0)), 1u);
}

// Entries of jobs in the eviction window stay even when they are least recently used.
TEST(SchedulerAwareTest, InWindowEntriesAreExemptWhileOthersRemain) {
  const Capacity cap{300, 1000};  // eviction window = 13 jobs of 100 B
  const std::vector<EntryMeta> e = {entry(1, D, 100, 1), entry(2, D, 100, 2), entry(3, D, 100, 3)};
  const LookAhead ahead = queue_of({7, 1, 2});  // s3 has no queued job
  const Plan p = SchedulerAware().make_room(e, cap, D, 100, ahead);
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{3, D, S, 100}}));
}

// Outside the window: least recently used first.
TEST(SchedulerAwareTest, OutOfWindowEntriesLeaveInLruOrder) {
  const Capacity cap{400, 1000};
  const std::vector<EntryMeta> e = {entry(1, D, 100, 40), entry(2, D, 100, 10),
                                    entry(3, D, 100, 30), entry(4, D, 100, 20)};
  const Plan p = SchedulerAware().make_room(e, cap, D, 300, queue_of({9, 3}));
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{2, D, S, 100}, {4, D, S, 100}, {1, D, S, 100}}));
}

// The window length comes from the capacities: a job just past it is evicted first.
TEST(SchedulerAwareTest, WindowBoundaryFollowsCapacities) {
  const Capacity cap{200, 100};  // eviction window = 3 jobs
  const std::vector<EntryMeta> e = {entry(3, D, 100, 1), entry(4, D, 100, 2)};
  // s3 is at position 2 (inside), s4 at position 3 (outside): s4 goes although s3 is older.
  Plan p = SchedulerAware().make_room(e, cap, D, 100, queue_of({1, 2, 3, 4}));
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{4, D, S, 100}}));
  // With a larger disk the window covers both: tail first, s4 still goes.
  p = SchedulerAware().make_room(e, {200, 500}, D, 100, queue_of({1, 2, 3, 4}));
  EXPECT_EQ(p.moves, (std::vector<Move>{{4, D, S, 100}}));
  // Reverse the queue order: now s3 is at the tail.
  p = SchedulerAware().make_room(e, {200, 500}, D, 100, queue_of({1, 2, 4, 3}));
  EXPECT_EQ(p.moves, (std::vector<Move>{{3, D, S, 100}}));
}

// All candidates in the window: the job nearest the tail is evicted first.
TEST(SchedulerAwareTest, TailFirstAmongInWindowCandidates) {
  const Capacity cap{400, 1000};
  const std::vector<EntryMeta> e = {entry(1, D, 100, 4), entry(2, D, 100, 3), entry(3, D, 100, 2),
                                    entry(4, D, 100, 1)};
  // First positions: s2 0 (about to run: pinned), s4 1, s1 2, s3 3.
  const LookAhead ahead = queue_of({2, 4, 1, 3, 2, 4});
  const Plan p = SchedulerAware().make_room(e, cap, D, 300, ahead);
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{3, D, S, 100}, {1, D, S, 100}, {4, D, S, 100}}));
}

TEST(SchedulerAwareTest, JobAboutToRunAndPinnedEntriesNeverMove) {
  const Capacity cap{200, 1000};
  const std::vector<EntryMeta> e = {entry(1, D, 100), entry(2, D, 100)};
  LookAhead ahead = queue_of({1});
  ahead.pinned = {2};
  Plan p = SchedulerAware().make_room(e, cap, D, 100, ahead);
  EXPECT_FALSE(p.ok);
  EXPECT_TRUE(p.moves.empty());
  ahead.pinned.clear();
  p = SchedulerAware().make_room(e, cap, D, 100, ahead);
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{2, D, S, 100}}));
}

TEST(NextUsesTest, FirstPositionWithinTheLimitForCandidatesOnly) {
  // Oracle: a linear scan for each candidate.
  std::vector<EntryMeta> entries;
  for (uint64_t s = 0; s < 40; ++s) entries.push_back(entry(s * 7 % 40, Tier::kDram, 1));
  std::vector<uint64_t> queue;
  for (uint64_t i = 0; i < 200; ++i) queue.push_back((i * 13 + i / 7) % 53);  // repeats, gaps
  std::vector<size_t> cands;
  for (size_t i = 0; i < entries.size(); i += 2) cands.push_back(i);
  for (size_t limit : {size_t{0}, size_t{5}, size_t{60}, size_t{1000}}) {
    const std::vector<size_t> got = next_uses(entries, cands, queue, limit);
    ASSERT_EQ(got.size(), entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      size_t want = SIZE_MAX;
      const bool cand = std::find(cands.begin(), cands.end(), i) != cands.end();
      for (size_t p = 0; cand && p < std::min(limit, queue.size()); ++p) {
        if (queue[p] == entries[i].session) {
          want = p;
          break;
        }
      }
      EXPECT_EQ(got[i], want) << "entry " << i << " limit " << limit;
    }
  }
}

TEST(SchedulerAwareTest, ImpossibleRequestsChangeNothing) {
  const std::vector<EntryMeta> e = {entry(1, D, 100), entry(2, D, 100)};
  EXPECT_FALSE(SchedulerAware().make_room(e, {200, 0}, D, 201, queue_of({})).ok);
  const Plan none = SchedulerAware().make_room(e, {300, 0}, D, 100, queue_of({}));
  EXPECT_TRUE(none.ok);
  EXPECT_TRUE(none.moves.empty()) << "room already there";
  const Plan zero = SchedulerAware().make_room(e, {200, 0}, D, 0, queue_of({}));
  EXPECT_TRUE(zero.ok && zero.moves.empty());
}

// Making room in DRAM needs room on SSD first: SSD drops come before the demotions.
TEST(SchedulerAwareTest, CascadeDramToSsdToDrop) {
  const Capacity cap{200, 300};  // window 5 jobs
  std::vector<EntryMeta> e = {entry(1, D, 100, 5), entry(2, D, 100, 6), entry(3, S, 100, 1),
                              entry(4, S, 100, 2), entry(5, S, 100, 3)};
  const LookAhead ahead = queue_of({9, 1, 2, 3, 4});  // window 5 jobs; s5 has no job
  const Plan p = SchedulerAware().make_room(e, cap, D, 200, ahead);
  ASSERT_TRUE(p.ok);
  // DRAM victims s2 (tail of the two), s1. SSD needs 200 B: pool {s1,s2,s3,s4,s5}; s5 is
  // outside the window (dropped first), then the tail of the window: s4 (position 4).
  EXPECT_EQ(p.moves,
            (std::vector<Move>{{5, S, X, 100}, {4, S, X, 100}, {2, D, S, 100}, {1, D, S, 100}}));
  EXPECT_TRUE(test::applies_within_capacity(e, cap, p.moves));
  EXPECT_EQ(used_bytes(e, D), 0u);
}

// A DRAM victim worth less than every SSD entry is dropped directly.
TEST(SchedulerAwareTest, CascadeDropsDramVictimThatRanksBelowSsdEntries) {
  const Capacity cap{100, 200};
  std::vector<EntryMeta> e = {entry(1, D, 100, 9), entry(2, S, 100, 1), entry(3, S, 100, 2)};
  const Plan p = SchedulerAware().make_room(e, cap, D, 100, queue_of({7, 2, 3}));
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{1, D, X, 100}}));
  EXPECT_TRUE(test::applies_within_capacity(e, cap, p.moves));
}

TEST(SchedulerAwareTest, WithoutDiskEvictionsDrop) {
  const Capacity cap{200, 0};
  const std::vector<EntryMeta> e = {entry(1, D, 100, 1), entry(2, D, 100, 2)};
  const Plan p = SchedulerAware().make_room(e, cap, D, 150, queue_of({}));
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{1, D, X, 100}, {2, D, X, 100}}));
}

TEST(SchedulerAwareTest, SsdRoomDropsOutOfWindowFirst) {
  const Capacity cap{100, 300};
  const std::vector<EntryMeta> e = {entry(1, S, 100, 1), entry(2, S, 100, 2), entry(3, S, 100, 3),
                                    entry(4, D, 100, 0)};
  const Plan p = SchedulerAware().make_room(e, cap, S, 100, queue_of({8, 1}));
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.moves, (std::vector<Move>{{2, S, X, 100}}));
}

// HBM entries are neither counted nor moved.
TEST(SchedulerAwareTest, HbmEntriesAreIgnored) {
  const std::vector<EntryMeta> e = {entry(1, Tier::kHbm, 1000), entry(2, D, 100)};
  const Plan p = SchedulerAware().make_room(e, {200, 0}, D, 100, queue_of({}));
  EXPECT_TRUE(p.ok && p.moves.empty());
  EXPECT_THROW(SchedulerAware().make_room(e, {200, 0}, Tier::kHbm, 1, queue_of({})), cb::Error);
}

TEST(SchedulerAwareTest, MalformedInputThrows) {
  const std::vector<EntryMeta> dup = {entry(1, D, 100), entry(1, S, 100)};
  EXPECT_THROW(SchedulerAware().make_room(dup, {200, 200}, D, 1, queue_of({})), cb::Error);
  EXPECT_THROW(plan_prefetch(dup, {200, 200}, queue_of({1})), cb::Error);
  const std::vector<EntryMeta> dropped = {entry(1, X, 100)};
  EXPECT_THROW(SchedulerAware().make_room(dropped, {200, 200}, D, 1, queue_of({})), cb::Error);
  std::vector<EntryMeta> e = {entry(1, D, 100)};
  EXPECT_THROW(apply_moves(e, {{1, S, D, 100}}), cb::Error);
  EXPECT_THROW(apply_moves(e, {{2, D, S, 100}}), cb::Error);
}

// Prefetch makes room from entries outside the window, tail first, but never from an entry
// of a job that runs no later than the one being fetched.
TEST(PrefetchTest, EvictsOnlyLessUrgentEntries) {
  const Capacity cap{200, 1000};  // prefetch window 2, eviction window 12
  std::vector<EntryMeta> e = {entry(1, D, 100, 1), entry(3, D, 100, 2), entry(2, S, 100, 3)};
  // J1, J2 in the prefetch window; s3 is J3's entry (less urgent than J2): demoted.
  std::vector<Move> m = plan_prefetch(e, cap, queue_of({1, 2, 3}));
  EXPECT_EQ(m, (std::vector<Move>{{3, D, S, 100}, {2, S, D, 100}}));
  EXPECT_TRUE(test::applies_within_capacity(e, cap, m));
  // With Skv = 50 the window is 4 jobs; both DRAM entries belong to jobs ahead of J2's in
  // the queue 1, 3, 2: nothing may be displaced, so nothing is fetched.
  e = {entry(1, D, 100, 1), entry(3, D, 100, 2), entry(2, S, 100, 3)};
  m = plan_prefetch(e, cap, queue_of({1, 3, 2}, 50));
  EXPECT_TRUE(m.empty());
}

// Fetching stops at the first entry that cannot fit, so a later job never overtakes it.
TEST(PrefetchTest, StopsAtFirstEntryThatCannotFit) {
  const Capacity cap{300, 1000};  // prefetch window 3 with Skv = 100
  const std::vector<EntryMeta> e = {entry(1, D, 100), entry(2, S, 250), entry(3, S, 100)};
  // J2's 250 B cannot fit next to J1's 100 B; J3's would, but must not overtake J2.
  EXPECT_TRUE(plan_prefetch(e, cap, queue_of({1, 2, 3})).empty());
  // Without J1 in the queue, s1 is evictable and both come in.
  const std::vector<Move> m = plan_prefetch(e, cap, queue_of({2, 3}));
  EXPECT_EQ(m, (std::vector<Move>{{1, D, S, 100}, {2, S, D, 250}}));
}

// The fetch's own SSD space is freed only by its move, so a full disk drops an entry first.
TEST(PrefetchTest, FullTiersCascadeBeforeTheFetch) {
  const Capacity cap{100, 200};  // prefetch window 1, eviction window 3
  std::vector<EntryMeta> e = {entry(5, D, 100, 9), entry(1, S, 100, 1), entry(6, S, 100, 2)};
  const std::vector<Move> m = plan_prefetch(e, cap, queue_of({1}));
  // s5 and s6 are outside the window: LRU among them is s6 (2) before s5 (9) on the disk.
  EXPECT_EQ(m, (std::vector<Move>{{6, S, X, 100}, {5, D, S, 100}, {1, S, D, 100}}));
  EXPECT_TRUE(test::applies_within_capacity(e, cap, m));
}

TEST(PrefetchTest, SkipsPinnedAbsentAndRepeatedSessions) {
  const Capacity cap{500, 1000};  // prefetch window 5
  const std::vector<EntryMeta> e = {entry(1, S, 100), entry(2, S, 100), entry(3, Tier::kHbm, 100)};
  LookAhead ahead = queue_of({1, 1, 4, 3, 2});
  ahead.pinned = {2};
  EXPECT_EQ(plan_prefetch(e, cap, ahead), (std::vector<Move>{{1, S, D, 100}}));
  EXPECT_TRUE(plan_prefetch(e, cap, queue_of({})).empty());
}

TEST(PrefetchTest, WindowIsCmemOverSkv) {
  const Capacity cap{250, 1000};  // window floor(250 / 100) = 2
  const std::vector<EntryMeta> e = {entry(1, S, 100), entry(2, S, 100), entry(3, S, 50)};
  EXPECT_EQ(plan_prefetch(e, cap, queue_of({1, 2, 3})),
            (std::vector<Move>{{1, S, D, 100}, {2, S, D, 100}}));
}

}  // namespace
}  // namespace cb::policy
