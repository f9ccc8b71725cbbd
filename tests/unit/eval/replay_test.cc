// Replay driver: trace turns become engine sessions (random ids of length traces in range,
// seeded, answer caps), policy names, and a replay run's summary facts.
#include "eval/replay.h"

#include <gtest/gtest.h>

#include <set>

#include "datasets/trace.h"
#include "lib/core/error.h"
#include "lib/model/model_source.h"
#include "tests/support/test_data.h"

namespace cb::eval {
namespace {

datasets::Trace length_trace() {
  datasets::Trace t;
  t.kind = "lengths";
  for (uint64_t s = 0; s < 3; ++s) {
    datasets::TraceSession ss;
    ss.id = s;
    for (int k = 0; k < 2; ++k) {
      datasets::TraceTurn turn;
      turn.input_tokens = 50 + 10 * k;
      turn.output_tokens = 300;
      ss.turns.push_back(turn);
    }
    t.sessions.push_back(ss);
  }
  return t;
}

TEST(Replay, LengthTracesBecomeSeededRandomIdsInTheVocabulary) {
  const auto a = trace_sessions(length_trace(), 512, 7), b = trace_sessions(length_trace(), 512, 7);
  const auto c = trace_sessions(length_trace(), 512, 8);
  ASSERT_EQ(a.size(), 3u);
  std::set<int32_t> seen;
  for (size_t s = 0; s < a.size(); ++s) {
    ASSERT_EQ(a[s].turns.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(a[s].turns[k].ids.size(), 50u + 10 * k);
      EXPECT_EQ(a[s].turns[k].ids, b[s].turns[k].ids);
      EXPECT_EQ(a[s].turns[k].output_tokens, 300);
      for (int32_t id : a[s].turns[k].ids) {
        EXPECT_GE(id, 3);
        EXPECT_LT(id, 512);
        seen.insert(id);
      }
    }
  }
  EXPECT_GT(seen.size(), 200u);  // spread over the vocabulary
  EXPECT_NE(a[0].turns[0].ids, c[0].turns[0].ids);
  EXPECT_NE(a[0].turns[0].ids, a[1].turns[0].ids);  // sessions differ
  for (const auto& s : trace_sessions(length_trace(), 512, 7, 16)) {
    for (const auto& t : s.turns) EXPECT_EQ(t.output_tokens, 16);
  }
}

TEST(Replay, TokenizedTracesMustFitTheVocabulary) {
  datasets::Trace t;
  t.path = "conv.json";
  t.kind = "sharegpt";
  datasets::TraceSession s;
  datasets::TraceTurn turn;
  turn.input_ids = {1, 2, 900};
  turn.input_tokens = 3;
  turn.output_tokens = 4;
  s.turns.push_back(turn);
  t.sessions.push_back(s);
  try {
    trace_sessions(t, 512, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv.json"), std::string::npos);
  }
  t.sessions[0].turns[0].input_ids = {1, 2, 3};
  EXPECT_EQ(trace_sessions(t, 512, 0)[0].turns[0].ids, (std::vector<int32_t>{1, 2, 3}));
}

TEST(Replay, AMessageAboutAKeptStoresFileNamesItWhereItIsNow) {
  const std::string from = "/s/cachebench-replay-ca-7", to = "/s/cachebench-store-ca-7";
  EXPECT_EQ(under_renamed_dir("write of " + from + "/data-0.bin at byte 4096: No space", from, to),
            "write of " + to + "/data-0.bin at byte 4096: No space");
  // Only paths under it: the directory's name as a prefix of another's is not one.
  EXPECT_EQ(under_renamed_dir(from + "-old/x and " + from + "/y", from, to),
            from + "-old/x and " + to + "/y");
  EXPECT_EQ(under_renamed_dir("no path", from, to), "no path");
  EXPECT_EQ(under_renamed_dir(from + "/a", "", to), from + "/a");
}

TEST(Replay, PolicyNames) {
  EXPECT_EQ(policy_name("sched"), "scheduler-aware");
  EXPECT_EQ(policy_name("optimal"), "belady");
  EXPECT_EQ(policy_name("lru"), "lru");
  EXPECT_THROW(policy_name("random"), Error);
}

TEST(Replay, CaAgainstReOnStories260K) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = model::ModelSource::open(path);
  auto m = model::Model::load(*src);
  const auto sessions = trace_sessions(length_trace(), m->config().vocab_size, 1, 8);
  ReplayOptions o;
  o.store.dram_bytes = 16 << 20;
  o.store.chunk_bytes = 64 << 10;
  o.engine.sched.rate = 0;
  const ReplayRun ca = run_replay(*m, sessions, engine::Mode::CA, o);
  const ReplayRun re = run_replay(*m, sessions, engine::Mode::RE, o);
  EXPECT_EQ(ca.summary["mode"], "ca");
  EXPECT_EQ(ca.summary["completed"], 6);
  EXPECT_EQ(ca.summary["hit_rate"]["overall"], 1.0);
  EXPECT_EQ(re.summary["hit_rate"]["overall"], 0.0);
  // The second turns' histories (first message + 8 answer tokens, the last not fed) are
  // reused by CA and recomputed by RE.
  EXPECT_EQ(ca.summary["reused_tokens"], 3 * (50 + 7));
  EXPECT_EQ(re.summary["recomputed_tokens"], 3 * (50 + 7));
  EXPECT_TRUE(ca.summary.contains("store"));
  EXPECT_EQ(replay_config_json(o)["store"]["policy"], "scheduler-aware");
}

}  // namespace
}  // namespace cb::eval
