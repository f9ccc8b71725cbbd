#include "datasets/trace.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "datasets/length_trace.h"
#include "datasets/sharegpt.h"
#include "datasets/trace_synth.h"
#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace cb::datasets {
namespace {

using nlohmann::json;

// A stand-in tokenizer: one token per run of non-whitespace (ASCII whitespace), the id being
// the word's length; it records the longest text it was given.
struct SpaceTokenizer {
  std::shared_ptr<size_t> longest = std::make_shared<size_t>(0);
  std::vector<int32_t> operator()(const std::string& s) const {
    *longest = std::max(*longest, s.size());
    std::vector<int32_t> ids;
    int32_t run = 0;
    for (char c : s) {
      const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
      if (!space) {
        ++run;
      } else if (run > 0) {
        ids.push_back(run);
        run = 0;
      }
    }
    if (run > 0) ids.push_back(run);
    return ids;
  }
};

// The cb::Error message of `f`, checked to be one line naming `path`.
std::string error_of(const std::function<void()>& f, const std::string& path) {
  try {
    f();
  } catch (const cb::Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find(path), std::string::npos) << "error does not name " << path << ": " << m;
    return m;
  }
  ADD_FAILURE() << "no cb::Error for " << path;
  return "";
}

std::string sharegpt_error(const std::string& name, const std::string& content) {
  const std::string p = test::write_tmp(name, content);
  return error_of([&] { load_sharegpt(p, SpaceTokenizer{}, {}); }, p);
}

std::string length_error(const std::string& name, const std::string& content) {
  const std::string p = test::write_tmp(name, content);
  return error_of([&] { load_trace(p, nullptr, {}); }, p);
}

bool has(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(ShareGpt, RolesPairingAndSkips) {
  const std::string p = test::write_tmp("sg_roles.json", R"([
    {"id": "a", "extra": {"x": [1, 2]}, "conversations": [
      {"from": "system", "value": "be nice"},
      {"from": "gpt", "value": "leading answer"},
      {"from": "human", "value": "dropped question", "lang": "en"},
      {"from": "human", "value": "one two three"},
      {"from": "gpt", "value": "four five"},
      {"from": "user", "value": "six"},
      {"from": "bard", "value": null},
      {"from": "chatgpt", "value": "seven eight nine ten"},
      {"from": "human"},
      {"from": "Human", "value": "eleven twelve"},
      {"from": "assistant", "value": ""},
      {"from": "bing", "value": "x"},
      {"value": "no role"},
      {"from": "human", "value": "unanswered"}]},
    {"id": 42, "conversations": [{"from": "user", "value": "q"}, {"from": "assistant", "value": "a b"}]},
    {"conversations": [{"from": "human", "value": "  "}, {"from": "gpt", "value": "a"},
                       {"from": "human", "value": "q"}, {"from": "gpt", "value": " "}]}
  ])");
  const Trace t = load_sharegpt(p, SpaceTokenizer{}, {});
  EXPECT_EQ(t.kind, "sharegpt");
  EXPECT_TRUE(t.tokenized());
  EXPECT_EQ(t.path, p);
  ASSERT_EQ(t.sessions.size(), 3u);
  const TraceSession& a = t.sessions[0];
  EXPECT_EQ(a.id, 0u);
  EXPECT_EQ(a.name, "a");
  ASSERT_EQ(a.turns.size(), 3u);
  EXPECT_EQ(a.turns[0].input_tokens, 3);
  EXPECT_EQ(a.turns[0].input_ids, (std::vector<int32_t>{3, 3, 5}));
  EXPECT_EQ(a.turns[0].output_tokens, 2);
  EXPECT_EQ(a.turns[1].input_tokens, 1);  // "six", the null-valued "bard" skipped
  EXPECT_EQ(a.turns[1].output_tokens, 4);
  EXPECT_EQ(a.turns[2].input_tokens, 2);  // "eleven twelve", answered by "bing" (the "" skipped)
  EXPECT_EQ(a.turns[2].output_tokens, 1);
  EXPECT_EQ(t.sessions[1].id, 1u);
  EXPECT_EQ(t.sessions[1].name, "42");
  ASSERT_EQ(t.sessions[1].turns.size(), 1u);
  EXPECT_EQ(t.sessions[1].turns[0].output_tokens, 2);
  // A blank question drops its turn; an answer with no tokens still decodes one.
  EXPECT_EQ(t.sessions[2].name, "");
  ASSERT_EQ(t.sessions[2].turns.size(), 1u);
  EXPECT_EQ(t.sessions[2].turns[0].output_tokens, 1);
  // system, leading gpt, dropped question, null bard, missing value, "" assistant, no role,
  // unanswered; then the blank question and its answer.
  EXPECT_EQ(t.skipped_messages, 8 + 2);
  EXPECT_EQ(t.skipped_conversations, 0);
  EXPECT_EQ(t.turns(), 5);
}

// With the tokenizer's BOS given, each conversation's first message starts with it (as a
// server and chat send it), and only the first: later turns extend the same context.
TEST(ShareGpt, BosStartsEachConversationOnly) {
  const std::string p = test::write_tmp("sg_bos.json", R"([
    {"id": "a", "conversations": [{"from": "human", "value": "one two"},
                                  {"from": "gpt", "value": "x"},
                                  {"from": "human", "value": "three"},
                                  {"from": "gpt", "value": "y"}]},
    {"id": "b", "conversations": [{"from": "human", "value": "  "}, {"from": "gpt", "value": "a"},
                                  {"from": "human", "value": "q"}, {"from": "gpt", "value": "z"}]}
  ])");
  TraceLoadOptions o;
  o.bos = 1;
  const Trace t = load_sharegpt(p, SpaceTokenizer{}, o);
  ASSERT_EQ(t.sessions.size(), 2u);
  ASSERT_EQ(t.sessions[0].turns.size(), 2u);
  EXPECT_EQ(t.sessions[0].turns[0].input_ids, (std::vector<int32_t>{1, 3, 3}));
  EXPECT_EQ(t.sessions[0].turns[0].input_tokens, 3);
  EXPECT_EQ(t.sessions[0].turns[1].input_ids, (std::vector<int32_t>{5}));
  // The blank first question is dropped: BOS goes before the first kept one.
  ASSERT_EQ(t.sessions[1].turns.size(), 1u);
  EXPECT_EQ(t.sessions[1].turns[0].input_ids, (std::vector<int32_t>{1, 1}));
}

TEST(ShareGpt, ItemsFieldLimitAndEmptyConversations) {
  const std::string p = test::write_tmp("sg_items.json", R"([
    {"id": "empty", "conversations": []},
    {"id": "raw", "items": [{"from": "human", "value": "hi there"}, {"from": "gpt", "value": "hello"}]},
    {"id": "only-q", "conversations": [{"from": "human", "value": "anyone?"}]},
    {"id": "c", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "d", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}
  ])");
  Trace t = load_sharegpt(p, SpaceTokenizer{}, {});
  ASSERT_EQ(t.sessions.size(), 3u);
  EXPECT_EQ(t.sessions[0].name, "raw");
  EXPECT_EQ(t.sessions[1].name, "c");
  EXPECT_EQ(t.sessions[1].id, 1u);
  EXPECT_EQ(t.skipped_conversations, 2);
  EXPECT_EQ(t.skipped_messages, 0);  // the unanswered question is in a skipped conversation
  ASSERT_EQ(t.notes.size(), 2u);
  EXPECT_TRUE(has(t.notes[0], "id empty")) << t.notes[0];
  EXPECT_TRUE(has(t.notes[1], "only-q")) << t.notes[1];

  TraceLoadOptions lim;
  lim.limit = 2;
  t = load_sharegpt(p, SpaceTokenizer{}, lim);
  ASSERT_EQ(t.sessions.size(), 2u);
  EXPECT_EQ(t.sessions[1].name, "c");
}

TEST(ShareGpt, HugeMessageSkipsItsConversationWithoutTokenizing) {
  std::string big(10'000'000, 'x');
  const std::string p = test::write_tmp(
      "sg_huge.json",
      "[{\"id\": \"huge\", \"conversations\": [{\"from\": \"human\", \"value\": \"" + big +
          "\"}, {\"from\": \"gpt\", \"value\": \"ok\"}]},"
          "{\"id\": \"fine\", \"conversations\": [{\"from\": \"human\", "
          "\"value\": \"q\"}, {\"from\": \"gpt\", \"value\": \"a\"}]}]");
  big.clear();
  SpaceTokenizer tok;
  const auto start = std::chrono::steady_clock::now();
  const Trace t = load_sharegpt(p, tok, {});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(s, 20.0);
  EXPECT_LT(*tok.longest, 10u);
  ASSERT_EQ(t.sessions.size(), 1u);
  EXPECT_EQ(t.sessions[0].name, "fine");
  EXPECT_EQ(t.skipped_conversations, 1);
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_TRUE(has(t.notes[0], "huge")) << t.notes[0];
  EXPECT_TRUE(has(t.notes[0], "10000000 characters")) << t.notes[0];
}

TEST(ShareGpt, MalformedFiles) {
  std::string e = sharegpt_error("sg_bad.json", "[{\"id\": 1, \"conversations\": [}]");
  EXPECT_TRUE(has(e, "invalid JSON")) << e;
  EXPECT_TRUE(has(e, "line 1, column")) << e;
  e = sharegpt_error("sg_obj.json", "{\"conversations\": []}");
  EXPECT_TRUE(has(e, "not an array")) << e;
  e = sharegpt_error("sg_noconv.json", "[{\"id\": \"x1\", \"turns\": []}]");
  EXPECT_TRUE(has(e, "conversation 0 (id x1)")) << e;
  EXPECT_TRUE(has(e, "\"conversations\"")) << e;
  e = sharegpt_error("sg_convtype.json", "[{\"id\": \"x\", \"conversations\": \"hi\"}]");
  EXPECT_TRUE(has(e, "is a JSON string, not an array")) << e;
  e = sharegpt_error("sg_entry.json", "[{\"conversations\": []}, 7]");
  EXPECT_TRUE(has(e, "conversation 1")) << e;
  EXPECT_TRUE(has(e, "not an object")) << e;
  e = sharegpt_error("sg_msg.json",
                     "[{\"conversations\": [{\"from\": \"human\", \"value\": "
                     "\"q\"}, \"answer\"]}]");
  EXPECT_TRUE(has(e, "conversation 0, message 1")) << e;
  e = sharegpt_error("sg_from.json", "[{\"conversations\": [{\"from\": 1, \"value\": \"q\"}]}]");
  EXPECT_TRUE(has(e, "\"from\" is a JSON number")) << e;
  e = sharegpt_error("sg_value.json",
                     "[{\"conversations\": [{\"from\": \"gpt\", \"value\": [\"q\"]}]}]");
  EXPECT_TRUE(has(e, "\"value\" is a JSON array")) << e;
  e = sharegpt_error("sg_none.json",
                     "[{\"conversations\": []}, {\"conversations\": "
                     "[{\"from\": \"gpt\", \"value\": \"a\"}]}]");
  EXPECT_TRUE(has(e, "no complete user/assistant turn in")) << e;
  e = sharegpt_error("sg_emptyarray.json", " [ ] ");
  EXPECT_TRUE(has(e, "no complete user/assistant turn in")) << e;
  // Why no turn: questions without answers (a file of first turns only), other roles, no text.
  e = sharegpt_error("sg_questions.json",
                     "[{\"id\": \"q1\", \"conversations\": [{\"from\": \"human\", "
                     "\"value\": \"q\"}, {\"from\": \"martian\", \"value\": \"a\"}, "
                     "{\"from\": \"gpt\", \"value\": null}]}]");
  EXPECT_TRUE(has(e,
                  "conversation 0 (id q1): no complete user/assistant turn (1 question "
                  "(\"human\"), 0 answers (\"gpt\"); 1 message from \"martian\" skipped; 1 "
                  "message without text skipped)"))
      << e;
  // An answer before its question, and two other roles: said so.
  e = sharegpt_error("sg_order.json",
                     "[{\"id\": \"q2\", \"conversations\": [{\"from\": \"gpt\", \"value\": "
                     "\"a\"}, {\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"system\", "
                     "\"value\": \"s\"}, {\"from\": \"tool\", \"value\": \"t\"}]}]");
  EXPECT_TRUE(has(e,
                  "(1 question (\"human\"), 1 answer (\"gpt\"), but no question with an answer "
                  "after it; 2 messages from \"system\" and other roles skipped)"))
      << e;
  // The OpenAI chat format is named as such, not skipped message by message.
  e = sharegpt_error("sg_openai.json",
                     "[{\"conversations\": [{\"role\": \"user\", \"content\": \"q\"}]}]");
  EXPECT_TRUE(has(e,
                  "conversation 0, message 0: has \"role\"/\"content\" (the OpenAI chat "
                  "format)"))
      << e;

  const std::string missing = test::tmp_dir() + "/sg_no_such_file.json";
  error_of([&] { load_sharegpt(missing, SpaceTokenizer{}, {}); }, missing);
  error_of([&] { load_trace(missing, SpaceTokenizer{}, {}); }, missing);
}

// Found by fuzzing (fuzz/trace_fuzz.cc): a number too large for a double is nlohmann's
// out_of_range error, not a parse_error, and escaped the readers uncaught.
TEST(LoadTrace, NumberOverflowIsInvalidJson) {
  for (const std::string& text :
       {std::string("[1E400]"), std::string(R"([{"id": 1e999, "conversations": []}])"),
        std::string(R"({"format": "cachebench-trace", "version": -1E400})")}) {
    SCOPED_TRACE(text);
    const std::string p = test::write_tmp("trace_overflow.json", text);
    const std::string e = error_of([&] { load_trace(p, SpaceTokenizer{}, {}); }, p);
    EXPECT_TRUE(has(e, "invalid JSON (number overflow parsing")) << e;
  }
}

// A value nested thousands of levels deep overflowed the stack when an error message rendered
// it (nlohmann's dump recurses per level); the readers refuse such nesting while parsing.
TEST(LoadTrace, DeepNestingIsRefused) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  std::string e =
      length_error("lt_deep.json", R"({"format": "cachebench-trace", "version": )" + deep + "}");
  EXPECT_TRUE(has(e, "invalid JSON: it nests more than 64 levels deep")) << e;
  e = sharegpt_error("sg_deep.json", R"([{"id": "a", "conversations": )" + deep + "}]");
  EXPECT_TRUE(has(e, "nests more than 64 levels")) << e;
  // 64 levels are fine (and the error is then the trace's own).
  e = length_error("lt_deep64.json", R"({"format": "cachebench-trace", "version": )" +
                                         std::string(63, '[') + std::string(63, ']') + "}");
  EXPECT_TRUE(has(e, "version [[[")) << e;
}

TEST(LoadTrace, DetectsTheFormat) {
  const std::string sg =
      test::write_tmp("lt_sg.json",
                      "\n  [{\"conversations\": [{\"from\": \"human\", \"value\": \"a b\"}, "
                      "{\"from\": \"gpt\", \"value\": \"c\"}]}]");
  const Trace t = load_trace(sg, SpaceTokenizer{}, {});
  EXPECT_EQ(t.kind, "sharegpt");
  EXPECT_EQ(t.sessions.at(0).turns.at(0).input_tokens, 2);
  std::string e = error_of([&] { load_trace(sg, nullptr, {}); }, sg);
  EXPECT_TRUE(has(e, sg + " is a ShareGPT trace: it needs a tokenizer")) << e;
  EXPECT_TRUE(has(e, "--tokenizer")) << e;

  e = length_error("lt_obj.json", "{\"data\": []}");
  EXPECT_TRUE(has(e, "not a cachebench trace")) << e;
  e = length_error("lt_empty.json", "  \n");
  EXPECT_TRUE(has(e, "empty")) << e;
  e = length_error("lt_garbage.json", "hello");
  EXPECT_TRUE(has(e, "invalid JSON")) << e;
  e = length_error("lt_number.json", "42");
  EXPECT_TRUE(has(e, "neither")) << e;
}

TEST(LengthTrace, RoundTrip) {
  SynthOptions o;
  o.sessions = 50;
  o.seed = 7;
  const Trace t = synth_trace(o);
  const std::string p = test::tmp_dir() + "/lt_roundtrip.json";
  write_length_trace(t, p, synth_options_json(o));
  const Trace r = load_trace(p, nullptr, {});
  EXPECT_EQ(r.kind, "lengths");
  EXPECT_FALSE(r.tokenized());
  EXPECT_EQ(r.path, p);
  ASSERT_EQ(r.sessions.size(), t.sessions.size());
  for (size_t i = 0; i < t.sessions.size(); ++i) {
    EXPECT_EQ(r.sessions[i].id, i);
    ASSERT_EQ(r.sessions[i].turns.size(), t.sessions[i].turns.size());
    for (size_t k = 0; k < t.sessions[i].turns.size(); ++k) {
      EXPECT_EQ(r.sessions[i].turns[k].input_tokens, t.sessions[i].turns[k].input_tokens);
      EXPECT_EQ(r.sessions[i].turns[k].output_tokens, t.sessions[i].turns[k].output_tokens);
      EXPECT_TRUE(r.sessions[i].turns[k].input_ids.empty());
    }
  }
  const json j = json::parse(test::read_file(p));
  EXPECT_EQ(j["generator"]["seed"], 7);
  EXPECT_EQ(j["generator"]["sessions"], 50);
  TraceLoadOptions lim;
  lim.limit = 3;
  EXPECT_EQ(load_length_trace(p, lim).sessions.size(), 3u);

  // A tokenized trace writes its lengths (and its names and source).
  const std::string sg =
      test::write_tmp("lt_sg_src.json",
                      "[{\"id\": \"n\\\"1\", \"conversations\": [{\"from\": \"human\", "
                      "\"value\": \"a b c\"}, {\"from\": \"gpt\", \"value\": \"d e\"}]}]");
  const Trace tok = load_sharegpt(sg, SpaceTokenizer{}, {});
  const std::string p2 = test::tmp_dir() + "/lt_from_sg.json";
  write_length_trace(tok, p2);
  const Trace r2 = load_length_trace(p2);
  ASSERT_EQ(r2.sessions.size(), 1u);
  EXPECT_EQ(r2.sessions[0].name, "n\"1");
  EXPECT_EQ(r2.sessions[0].turns.at(0).input_tokens, 3);
  EXPECT_EQ(r2.sessions[0].turns.at(0).output_tokens, 2);
  EXPECT_EQ(json::parse(test::read_file(p2))["source"]["kind"], "sharegpt");

  Trace empty;
  const std::string p3 = test::tmp_dir() + "/lt_empty_out.json";
  error_of([&] { write_length_trace(empty, p3); }, p3);
  const std::string p4 = test::tmp_dir() + "/no_such_dir/lt.json";
  error_of([&] { write_length_trace(t, p4); }, p4);
}

TEST(LengthTrace, Malformed) {
  const std::string head = R"({"format": "cachebench-trace", "version": 1, "kind": "lengths", )";
  const auto with_sessions = [&](const std::string& sessions) {
    return head + "\"sessions\": " + sessions + "}";
  };
  std::string e = length_error("lt_fmt.json", R"({"format": "other", "sessions": []})");
  EXPECT_TRUE(has(e, "not a cachebench trace")) << e;
  e = length_error("lt_ver.json",
                   R"({"format": "cachebench-trace", "version": 2, "kind": "lengths"})");
  EXPECT_TRUE(has(e, "version 2 is not supported")) << e;
  e = length_error("lt_kind.json",
                   R"({"format": "cachebench-trace", "version": 1, "kind": "tokens"})");
  EXPECT_TRUE(has(e, "kind \"tokens\"")) << e;
  e = length_error("lt_nosessions.json", head + "\"x\": 1}");
  EXPECT_TRUE(has(e, "\"sessions\"")) << e;
  e = length_error("lt_zerosessions.json", with_sessions("[]"));
  EXPECT_TRUE(has(e, "no sessions")) << e;
  e = length_error("lt_emptyturns.json",
                   with_sessions(R"([{"id": 0, "turns": [[1, 1]]}, {"id": 1, "turns": []}])"));
  EXPECT_TRUE(has(e, "session 1")) << e;
  EXPECT_TRUE(has(e, "empty turns")) << e;
  e = length_error("lt_zero.json", with_sessions(R"([{"turns": [[1, 1], [0, 5]]}])"));
  EXPECT_TRUE(has(e, "session 0, turn 1")) << e;
  EXPECT_TRUE(has(e, "input length 0 is outside 1..1000000")) << e;
  e = length_error("lt_neg.json", with_sessions(R"([{"turns": [[3, -1]]}])"));
  EXPECT_TRUE(has(e, "output length -1")) << e;
  e = length_error("lt_big.json", with_sessions(R"([{"turns": [[1000001, 1]]}])"));
  EXPECT_TRUE(has(e, "input length 1000001")) << e;
  e = length_error("lt_huge.json", with_sessions(R"([{"turns": [[1, 18446744073709551615]]}])"));
  EXPECT_TRUE(has(e, "outside")) << e;
  e = length_error("lt_float.json", with_sessions(R"([{"turns": [[1.5, 2]]}])"));
  EXPECT_TRUE(has(e, "not an integer")) << e;
  e = length_error("lt_str.json", with_sessions(R"([{"turns": [["12", 2]]}])"));
  EXPECT_TRUE(has(e, "not an integer")) << e;
  e = length_error("lt_triple.json", with_sessions(R"([{"turns": [[1, 2, 3]]}])"));
  EXPECT_TRUE(has(e, "not a pair")) << e;
  e = length_error("lt_sesstype.json", with_sessions(R"([[1, 2]])"));
  EXPECT_TRUE(has(e, "session 0")) << e;
  e = length_error("lt_id.json", with_sessions(R"([{"id": -3, "turns": [[1, 2]]}])"));
  EXPECT_TRUE(has(e, "\"id\"")) << e;
  e = length_error("lt_trunc.json", head + "\"sessions\": [{\"turns\": [[1, 2]");
  EXPECT_TRUE(has(e, "invalid JSON")) << e;
  // Extra fields are fine.
  const std::string ok = test::write_tmp(
      "lt_extra.json", head + R"("note": "x", "sessions": [{"turns": [[1, 2]], "y": 0}]})");
  EXPECT_EQ(load_length_trace(ok).turns(), 1);
}

TEST(Synth, DeterministicForASeed) {
  SynthOptions o;
  o.sessions = 300;
  const Trace a = synth_trace(o);
  const Trace b = synth_trace(o);
  o.seed = 1;
  const Trace c = synth_trace(o);
  o.seed = 0;
  o.sessions = 100;
  const Trace prefix = synth_trace(o);
  const auto lengths = [](const Trace& t, size_t n) {
    std::vector<int64_t> v;
    for (size_t i = 0; i < n; ++i) {
      for (const TraceTurn& turn : t.sessions[i].turns) {
        v.push_back(turn.input_tokens);
        v.push_back(turn.output_tokens);
      }
      v.push_back(-1);
    }
    return v;
  };
  EXPECT_EQ(lengths(a, 300), lengths(b, 300));
  EXPECT_NE(lengths(a, 300), lengths(c, 300));
  EXPECT_EQ(lengths(a, 100), lengths(prefix, 100));
  EXPECT_EQ(a.kind, "lengths");
  EXPECT_EQ(a.sessions.back().id, 299u);
}

TEST(Synth, MeetsTheShareGptTargets) {
  SynthOptions o;
  o.sessions = 10000;
  const Trace t = synth_trace(o);
  for (const TraceSession& s : t.sessions) {
    ASSERT_GE(s.turns.size(), 1u);
    ASSERT_LE(static_cast<int64_t>(s.turns.size()), o.max_turns);
    for (const TraceTurn& turn : s.turns) {
      ASSERT_GE(turn.input_tokens, 1);
      ASSERT_LE(turn.input_tokens, o.input_max);
      ASSERT_GE(turn.output_tokens, 1);
      ASSERT_LE(turn.output_tokens, o.output_max);
    }
  }
  const TraceStats st = trace_stats(t);
  EXPECT_EQ(st.sessions, 10000);
  EXPECT_EQ(st.turns, t.turns());
  EXPECT_NEAR(st.multi_turn_fraction, 0.73, 0.02);
  EXPECT_NEAR(st.mean_turns, 5.75, 0.15);
  EXPECT_NEAR(st.long_fraction, 0.30, 0.02);
  EXPECT_GT(st.mean_input_tokens, 100);
  EXPECT_LT(st.mean_input_tokens, 300);
  EXPECT_GT(st.mean_output_tokens, 200);
  EXPECT_LT(st.mean_output_tokens, 400);
}

TEST(Synth, RejectsBadOptions) {
  SynthOptions o;
  o.sessions = 0;
  EXPECT_THROW(synth_trace(o), cb::Error);
  o = SynthOptions{};
  o.mean_turns = 1.5;  // below 2 - 0.27
  EXPECT_THROW(synth_trace(o), cb::Error);
  o = SynthOptions{};
  o.single_turn_fraction = 1.0;
  EXPECT_THROW(synth_trace(o), cb::Error);
  o = SynthOptions{};
  o.input_median = 0;
  EXPECT_THROW(synth_trace(o), cb::Error);
  o = SynthOptions{};
  o.output_max = kMaxTraceTokens + 1;
  EXPECT_THROW(synth_trace(o), cb::Error);
  // The smallest reachable mean makes every multi-turn conversation two turns long.
  o = SynthOptions{};
  o.sessions = 200;
  o.mean_turns = 2.0 - o.single_turn_fraction;
  for (const TraceSession& s : synth_trace(o).sessions) EXPECT_LE(s.turns.size(), 2u);
}

std::string synth_error(const SynthOptions& o) {
  try {
    synth_trace(o);
  } catch (const cb::Error& e) {
    return e.what();
  }
  return "no error";
}

// The least mean, every multi-turn conversation two turns long, is reached exactly: with
// --max-turns 2 it is the only one (it was refused, "raise --max-turns").
TEST(Synth, TheLeastMeanIsReachedWithMaxTurnsTwo) {
  SynthOptions o;
  o.sessions = 50;
  o.max_turns = 2;
  o.single_turn_fraction = 0;
  o.mean_turns = 2;
  for (const TraceSession& s : synth_trace(o).sessions) EXPECT_EQ(s.turns.size(), 2u);
  o.single_turn_fraction = 0.5;
  o.mean_turns = 1.5;
  EXPECT_EQ(synth_error(o), "no error");
  o.mean_turns = 1.75;
  const std::string e = synth_error(o);
  EXPECT_NE(e.find("with --max-turns 2 every multi-turn conversation has exactly 2 turns, so the "
                   "mean is 1.5"),
            std::string::npos)
      << e;
}

// The bounds of the mean are printed with the digits that tell them apart: a fraction of
// 0.9999999999 printed them as "[1, 1)".
TEST(Synth, TheMeansRangeIsPrintedWithEnoughDigits) {
  SynthOptions o;
  o.single_turn_fraction = 0.9999999999;
  o.max_turns = 10;
  o.mean_turns = 5;
  const std::string e = synth_error(o);
  EXPECT_NE(e.find("a single-turn fraction of 0.9999999999 "), std::string::npos) << e;
  EXPECT_NE(e.find("choose a mean in [1.0000000001, 1.0000000009)"), std::string::npos) << e;
}

TEST(TraceStats, HandCounted) {
  Trace t;
  t.sessions.resize(3);
  t.sessions[0].turns = {{100, 200, {}}};
  t.sessions[1].turns = {{1000, 1000, {}}, {1000, 1000, {}}};  // 4000: not over 4096
  t.sessions[2].turns = {{2000, 2000, {}}, {50, 50, {}}, {1, 1, {}}};
  const TraceStats s = trace_stats(t);
  EXPECT_EQ(s.sessions, 3);
  EXPECT_EQ(s.turns, 6);
  EXPECT_DOUBLE_EQ(s.multi_turn_fraction, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.mean_turns, 2.0);
  EXPECT_DOUBLE_EQ(s.long_fraction, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.mean_input_tokens, 4151.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.mean_output_tokens, 4251.0 / 6.0);
  EXPECT_DOUBLE_EQ(trace_stats(t, 3999).long_fraction, 2.0 / 3.0);
  EXPECT_EQ(trace_stats(Trace{}).mean_turns, 0.0);
}

TEST(ShareGpt, RealMultiturnFileAsSplitPieces) {
  CB_REQUIRE_DATA(p, "data/sharegpt/sharegpt_v3_multiturn_8conv.json");
  TraceLoadOptions pieces;
  pieces.join_split = false;
  const Trace t = load_trace(p, SpaceTokenizer{}, pieces);
  EXPECT_EQ(t.kind, "sharegpt");
  ASSERT_EQ(t.sessions.size(), 8u);
  // Counted with Python: the conversations strictly alternate human/gpt.
  const std::vector<size_t> turns = {4, 2, 2, 6, 5, 5, 2, 2};
  int64_t in = 0;
  int64_t out = 0;
  for (size_t i = 0; i < t.sessions.size(); ++i) {
    EXPECT_GE(t.sessions[i].turns.size(), 1u);
    EXPECT_EQ(t.sessions[i].turns.size(), turns[i]) << "session " << i;
    for (const TraceTurn& turn : t.sessions[i].turns) {
      in += turn.input_tokens;
      out += turn.output_tokens;
    }
  }
  EXPECT_EQ(t.turns(), 28);
  EXPECT_EQ(in, 1293);
  EXPECT_EQ(out, 3932);
  EXPECT_EQ(t.sessions[0].name, "Og9h3C1_0");
  EXPECT_EQ(t.sessions[0].turns[0].input_tokens, 219);
  EXPECT_EQ(t.sessions[0].turns[0].output_tokens, 67);
  EXPECT_EQ(t.skipped_conversations, 0);
  EXPECT_EQ(t.skipped_messages, 0);
  EXPECT_EQ(t.joined_pieces, 0);
}

// The file holds three conversations cut by FastChat's splitter: each piece's suffix is the
// index of its first message in the whole conversation, which the pieces before it confirm.
TEST(ShareGpt, RealSplitPiecesJoinIntoConversations) {
  CB_REQUIRE_DATA(p, "data/sharegpt/sharegpt_v3_multiturn_8conv.json");
  TraceLoadOptions pieces;
  pieces.join_split = false;
  const Trace split = load_trace(p, SpaceTokenizer{}, pieces);
  ASSERT_EQ(split.sessions.size(), 8u);
  std::vector<std::vector<const TraceSession*>> groups;
  std::string base;
  size_t messages = 0;
  for (const TraceSession& s : split.sessions) {
    const size_t us = s.name.rfind('_');
    ASSERT_NE(us, std::string::npos) << s.name;
    const size_t k = std::stoul(s.name.substr(us + 1));
    if (s.name.substr(0, us) != base) {
      base = s.name.substr(0, us);
      messages = 0;
      groups.emplace_back();
    }
    EXPECT_EQ(k, messages) << s.name << " does not start where the pieces before it end";
    messages += 2 * s.turns.size();
    groups.back().push_back(&s);
  }
  ASSERT_EQ(groups.size(), 3u);

  const Trace t = load_trace(p, SpaceTokenizer{}, {});  // join_split is the default
  ASSERT_EQ(t.sessions.size(), groups.size());
  EXPECT_EQ(t.joined_pieces, 5);
  EXPECT_EQ(t.turns(), split.turns());
  for (size_t g = 0; g < groups.size(); ++g) {
    const TraceSession& s = t.sessions[g];
    EXPECT_EQ(s.id, g);
    EXPECT_EQ(s.name, groups[g].front()->name);
    std::vector<TraceTurn> want;
    for (const TraceSession* piece : groups[g]) {
      want.insert(want.end(), piece->turns.begin(), piece->turns.end());
    }
    ASSERT_EQ(s.turns.size(), want.size()) << s.name;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(s.turns[i].input_ids, want[i].input_ids) << s.name << " turn " << i;
      EXPECT_EQ(s.turns[i].output_tokens, want[i].output_tokens) << s.name << " turn " << i;
    }
  }
  TraceLoadOptions first;
  first.limit = 1;
  const Trace one = load_trace(p, SpaceTokenizer{}, first);
  ASSERT_EQ(one.sessions.size(), 1u);
  EXPECT_EQ(one.sessions[0].turns.size(), 19u);
}

TEST(ShareGpt, SplitJoinRules) {
  const std::string p = test::write_tmp("sg_split.json", R"([
    {"id": "a_0", "conversations": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"}]},
    {"id": "a_2", "conversations": [{"from": "gpt", "value": "stray"}, {"from": "human", "value": "q2 x"}]},
    {"id": "a_3", "conversations": [{"from": "gpt", "value": "a2"}]},
    {"id": "a_1", "conversations": [{"from": "human", "value": "back"}, {"from": "gpt", "value": "b"}]},
    {"id": "b_0", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "c_0", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "b_2", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "d", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "d_1", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "e_x", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "e_y", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "_0", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "_1", "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]},
    {"id": "f_0", "conversations": [{"from": "human", "value": "q"}]},
    {"id": "f_1", "conversations": [{"from": "gpt", "value": "joined answer"}]}
  ])");
  const Trace t = load_trace(p, SpaceTokenizer{}, {});
  std::vector<std::string> names;
  for (const TraceSession& s : t.sessions) names.push_back(s.name);
  // a_1 does not continue a_3 (its start is lower); b_2 does not follow b_0 directly; "d" has
  // no suffix; "e_x" is not a split id; "_0" has no base; f's question and answer pair across
  // the pieces.
  EXPECT_EQ(names, (std::vector<std::string>{"a_0", "a_1", "b_0", "c_0", "b_2", "d", "d_1", "e_x",
                                             "e_y", "_0", "_1", "f_0"}));
  ASSERT_EQ(t.sessions[0].turns.size(), 2u);
  EXPECT_EQ(t.sessions[0].turns[1].input_tokens, 2);  // "q2 x", answered in the next piece
  EXPECT_EQ(t.sessions[0].turns[1].output_tokens, 1);
  EXPECT_EQ(t.skipped_messages, 1);  // the stray answer at the start of a_2
  EXPECT_EQ(t.joined_pieces, 3);
  ASSERT_EQ(t.sessions.back().turns.size(), 1u);
  EXPECT_EQ(t.sessions.back().turns[0].output_tokens, 2);
}

}  // namespace
}  // namespace cb::datasets
