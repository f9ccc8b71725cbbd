// Scheduler: arrivals, think times, FCFS admission, step planning within the batch bounds,
// next-turn arrivals and the look-ahead window.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "lib/core/error.h"
#include "lib/sched/arrivals.h"
#include "lib/sched/scheduler.h"

namespace cb::sched {
namespace {

TEST(Arrivals, PoissonIsSeededAndHasTheRequestedRate) {
  const auto a = poisson_arrivals(20000, 2.0, 7), b = poisson_arrivals(20000, 2.0, 7);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, poisson_arrivals(20000, 2.0, 8));
  EXPECT_EQ(a[0], 0.0);
  for (size_t i = 1; i < a.size(); ++i) ASSERT_GE(a[i], a[i - 1]);
  // Mean gap 1/rate within 3%; exponential gaps: coefficient of variation near 1.
  const double mean = a.back() / (a.size() - 1);
  EXPECT_NEAR(mean, 0.5, 0.015);
  double var = 0;
  for (size_t i = 1; i < a.size(); ++i) var += std::pow(a[i] - a[i - 1] - mean, 2);
  EXPECT_NEAR(std::sqrt(var / (a.size() - 1)) / mean, 1.0, 0.05);
  for (double t : poisson_arrivals(5, 0, 1)) EXPECT_EQ(t, 0.0);
  for (double t : poisson_arrivals(5, INFINITY, 1)) EXPECT_EQ(t, 0.0);
  // Arrivals spread past the span the clock resolves to a microsecond are refused.
  EXPECT_NO_THROW(poisson_arrivals(11, 1e-8, 1));  // 10 gaps of 1e8 s: 1e9 s
  EXPECT_THROW(poisson_arrivals(12, 1e-8, 1), cb::Error);
  EXPECT_THROW(poisson_arrivals(2, 1e-20, 1), cb::Error);
  EXPECT_NO_THROW(poisson_arrivals(1, 1e-20, 1));  // one session arrives at 0 whatever the rate
}

TEST(ThinkTime, ParsesEveryFormAndRejectsGarbage) {
  std::mt19937_64 rng(1);
  EXPECT_EQ(ThinkTime::parse("0").sample(rng), 0.0);
  EXPECT_EQ(ThinkTime::parse("2.5").sample(rng), 2.5);
  EXPECT_EQ(ThinkTime::parse("const:3").sample(rng), 3.0);
  const ThinkTime u = ThinkTime::parse("uniform:1:2");
  for (int i = 0; i < 100; ++i) {
    const double v = u.sample(rng);
    EXPECT_GE(v, 1.0);
    EXPECT_LT(v, 2.0);
  }
  const ThinkTime e = ThinkTime::parse("exp:4");
  double sum = 0;
  for (int i = 0; i < 20000; ++i) sum += e.sample(rng);
  EXPECT_NEAR(sum / 20000, 4.0, 0.15);
  EXPECT_EQ(ThinkTime::parse(e.describe()).describe(), "exp:4");
  for (const char* text :
       {"exp:0.1234567", "const:1e-07", "uniform:0.1:2.718281828459045", "until:30.5"}) {
    const ThinkTime t = ThinkTime::parse(text);
    const ThinkTime back = ThinkTime::parse(t.describe());  // what results record
    EXPECT_EQ(back.kind, t.kind) << text;
    EXPECT_EQ(back.a, t.a) << text;
    EXPECT_EQ(back.b, t.b) << text;
    EXPECT_EQ(t.describe(), text);
  }
  EXPECT_EQ(ThinkTime::parse("const:1e6").sample(rng), 1e6);  // the largest accepted
  for (const char* bad : {"", "-1", "exp:", "exp:-2", "uniform:3:1", "normal:1", "abc",
                          "const:1e15", "uniform:0:2e6", "until:", "until:-1"}) {
    try {
      ThinkTime::parse(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("--think-time"), std::string::npos);
    }
  }
  // A number out of range is named as such, not as unparsable.
  for (const char* far : {"2000000", "const:1e15", "exp:-2", "uniform:0:2e6", "inf"}) {
    try {
      ThinkTime::parse(far);
      ADD_FAILURE() << far;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("outside 0..1e6"), std::string::npos) << err.what();
    }
  }
}

SchedConfig cfg(int max_batch, int64_t max_tokens) {
  SchedConfig c;
  c.max_batch = max_batch;
  c.max_batch_tokens = max_tokens;
  c.rate = 0;  // all sessions at t = 0
  return c;
}

TEST(Scheduler, DecodeFirstThenPrefillChunksWithinTheTokenBudget) {
  Scheduler s(cfg(4, 10), {1, 1, 1});
  s.advance(0);
  ASSERT_EQ(s.waiting().size(), 3u);
  const Request a = s.admit_head(25, 3);
  const Request b = s.admit_head(4, 1);
  EXPECT_EQ(a.session, 0u);
  EXPECT_EQ(b.session, 1u);
  auto items = s.plan_step();  // a gets 10 tokens, b nothing (budget spent)
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].tokens, 10);
  EXPECT_FALSE(items[0].emits);
  s.complete_step(items, 1);
  items = s.plan_step();
  ASSERT_EQ(items.size(), 1u);
  s.complete_step(items, 2);  // a: 20 of 25
  items = s.plan_step();      // a: last 5 (emits), b: 4 (emits)
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].tokens, 5);
  EXPECT_TRUE(items[0].emits);
  EXPECT_EQ(items[1].tokens, 4);
  auto done = s.complete_step(items, 3);
  ASSERT_EQ(done.size(), 1u);  // b had one output token
  EXPECT_EQ(done[0].id, b.id);
  items = s.plan_step();  // a decodes
  ASSERT_EQ(items.size(), 1u);
  EXPECT_FALSE(items[0].prefill);
  EXPECT_EQ(items[0].tokens, 1);
  s.complete_step(items, 4);
  done = s.complete_step(s.plan_step(), 5);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(s.done(), 2);
  EXPECT_FALSE(s.finished());
}

TEST(Scheduler, MaxBatchBoundsAdmissionAndEveryStep) {
  Scheduler s(cfg(2, 1000), {1, 1, 1});
  s.advance(0);
  s.admit_head(3, 5);
  EXPECT_TRUE(s.can_admit());
  s.admit_head(3, 5);
  EXPECT_FALSE(s.can_admit());
  EXPECT_THROW(s.admit_head(3, 5), Error);
  for (int i = 0; i < 3; ++i) {
    const auto items = s.plan_step();
    EXPECT_LE(items.size(), 2u);
    s.complete_step(items, i);
  }
}

TEST(Scheduler, NextTurnArrivesAfterTheAnswerPlusThinkTime) {
  SchedConfig c = cfg(4, 100);
  c.think = ThinkTime::parse("const:2");
  Scheduler s(c, {2});
  s.advance(0);
  s.admit_head(5, 1);
  auto done = s.complete_step(s.plan_step(), 10.0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(s.waiting().empty());
  EXPECT_DOUBLE_EQ(s.next_arrival(), 12.0);
  s.advance(11.9);
  EXPECT_TRUE(s.waiting().empty());
  s.advance(12.0);
  ASSERT_EQ(s.waiting().size(), 1u);
  EXPECT_EQ(s.waiting().front().turn, 1);
  EXPECT_DOUBLE_EQ(s.waiting().front().arrival, 12.0);
  s.admit_head(5, 1);
  s.complete_step(s.plan_step(), 13);
  EXPECT_TRUE(s.finished());
  EXPECT_TRUE(std::isinf(s.next_arrival()));
}

// A turn's think time is its own (seeded by the session and turn), not the next draw of a
// stream shared in completion order: a mode that finishes turns in another order gives every
// turn the same think time.
TEST(Scheduler, AThinkTimeBelongsToItsTurnNotToTheOrderTurnsFinish) {
  SchedConfig c = cfg(4, 100);
  c.think = ThinkTime::parse("exp:100");
  const auto next_after = [&](bool zero_first) -> std::map<SessionId, double> {
    Scheduler s(c, {2, 2});
    s.advance(0);
    s.admit_head(5, 1);
    s.admit_head(5, 1);
    std::vector<StepItem> items = s.plan_step();
    EXPECT_EQ(items.size(), 2u);
    if (items.size() != 2) return {};
    // Finish one session's turn at t=1, the other's at t=2.
    std::vector<StepItem> first{items[zero_first ? 0 : 1]}, second{items[zero_first ? 1 : 0]};
    s.complete_step(first, 1.0);
    s.complete_step(second, 2.0);
    std::map<SessionId, double> think;
    while (!std::isinf(s.next_arrival())) {
      s.advance(s.next_arrival());
      const Request& r = s.waiting().back();
      think[r.session] = r.arrival - ((r.session == 0) == zero_first ? 1.0 : 2.0);
    }
    return think;
  };
  const auto a = next_after(true), b = next_after(false);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_DOUBLE_EQ(a.at(0), b.at(0));
  EXPECT_DOUBLE_EQ(a.at(1), b.at(1));
  EXPECT_NE(a.at(0), a.at(1));
  Scheduler s(c, {2, 2});
  EXPECT_DOUBLE_EQ(a.at(0), s.turn_arrival(0, 0, 1));
  EXPECT_NE(s.turn_arrival(0, 0, 1), s.turn_arrival(0, 0, 2));
  c.seed = 1;
  EXPECT_NE(Scheduler(c, {2, 2}).turn_arrival(0, 0, 1), s.turn_arrival(0, 0, 1));
}

// until:T: every next turn arrives at T, or right after its answer when that is later.
TEST(Scheduler, UntilThinkTimeMakesABurstAtItsTime) {
  SchedConfig c;
  c.think = ThinkTime::parse("until:10");
  const Scheduler s(c, {3, 3});
  EXPECT_EQ(s.turn_arrival(1.0, 0, 1), 10.0);
  EXPECT_EQ(s.turn_arrival(2.5, 1, 1), 10.0);
  EXPECT_EQ(s.turn_arrival(12.0, 0, 2), 12.0);
}

// Warm-up turns are the first N in trace order (arrival with no service time: the session's
// arrival plus the think times before the turn), whatever order the run releases them in.
TEST(Scheduler, WarmupTurnsAreTheFirstInTraceOrder) {
  SchedConfig c = cfg(8, 1000);
  c.rate = 0;  // every session at t=0: ties go by turn, then session
  Scheduler s(c, {3, 1, 2});
  s.mark_warmup(4);
  EXPECT_TRUE(s.is_warmup(0, 0) && s.is_warmup(1, 0) && s.is_warmup(2, 0));
  EXPECT_TRUE(s.is_warmup(0, 1));
  EXPECT_FALSE(s.is_warmup(2, 1) || s.is_warmup(0, 2));
  s.advance(0);
  for (const Request& r : s.waiting()) EXPECT_TRUE(r.warmup) << r.session;
  // With think times the nominal arrival decides: a late session's first turn can come after
  // an early session's third.
  c.rate = 0.001;  // sessions far apart
  c.think = ThinkTime::parse("const:1");
  Scheduler t(c, {3, 3});
  t.mark_warmup(3);
  EXPECT_TRUE(t.is_warmup(0, 0) && t.is_warmup(0, 1) && t.is_warmup(0, 2));
  EXPECT_FALSE(t.is_warmup(1, 0));
  t.mark_warmup(0);
  EXPECT_FALSE(t.is_warmup(0, 0));
}

TEST(Scheduler, LookaheadIsTheQueueThenFutureArrivalsByTime) {
  SchedConfig c = cfg(4, 100);
  c.rate = 1.0;
  c.lookahead = 3;
  Scheduler s(c, {1, 1, 1, 1, 1});
  EXPECT_EQ(s.lookahead(), (std::vector<SessionId>{0, 1, 2}));  // all in the future
  s.advance(s.next_arrival());
  s.advance(s.next_arrival());
  ASSERT_EQ(s.waiting().size(), 2u);
  EXPECT_EQ(s.lookahead(), (std::vector<SessionId>{0, 1, 2}));
  s.admit_head(1, 1);
  EXPECT_EQ(s.lookahead(), (std::vector<SessionId>{1, 2, 3}));
}

TEST(Scheduler, LookaheadListsFutureArrivalsInTheOrderTheyArrive) {
  // 300 next turns pending at random think times: the window must be the first 64 of them in
  // the order advance() releases them (earliest first, ties by session).
  SchedConfig c = cfg(300, 1000);
  c.lookahead = 64;
  c.think = ThinkTime::parse("exp:100");
  Scheduler s(c, std::vector<int>(300, 2));
  s.advance(0);
  while (!s.waiting().empty()) s.admit_head(1, 1);
  s.complete_step(s.plan_step(), 1.0);
  ASSERT_TRUE(s.waiting().empty());
  const std::vector<SessionId> window = s.lookahead();
  ASSERT_EQ(window.size(), 64u);
  std::vector<SessionId> released;
  while (released.size() < 64) {
    s.advance(s.next_arrival());
    released.clear();
    for (const Request& r : s.waiting()) released.push_back(r.session);
  }
  released.resize(64);
  EXPECT_EQ(window, released);
}

TEST(Scheduler, StopTokensAndRestartedPrefills) {
  Scheduler s(cfg(2, 100), {1, 1});
  s.advance(0);
  const Request a = s.admit_head(10, 50);
  const Request b = s.admit_head(10, 50);
  s.complete_step(s.plan_step(), 1);  // both prefilled, one token each
  s.limit_output(a.id, 2);            // a stops at its second token
  auto done = s.complete_step(s.plan_step(), 2);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, a.id);
  EXPECT_EQ(done[0].decoded, 2);
  s.restart_prefill(b.id, 30);  // b's loaded history was bad: recompute 30 tokens
  const auto items = s.plan_step();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_TRUE(items[0].prefill);
  EXPECT_EQ(items[0].tokens, 30);
  EXPECT_EQ(s.find_running(b.id)->decoded, 0);
  EXPECT_THROW(s.limit_output(999, 1), Error);
  EXPECT_THROW(s.restart_prefill(b.id, 0), Error);
}

TEST(Scheduler, RejectsBadBounds) {
  EXPECT_THROW(Scheduler(cfg(0, 10), {1}), Error);
  EXPECT_THROW(Scheduler(cfg(1, 0), {1}), Error);
  // Fewer tokens a step than sequences: the last admitted could not even decode.
  try {
    Scheduler(cfg(8, 4), {1});
    ADD_FAILURE() << "max_batch_tokens 4 < max_batch 8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-batch-tokens"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(Scheduler(cfg(8, 8), {1}));
}

}  // namespace
}  // namespace cb::sched
