#include "eval/mmlu.h"

#include <gtest/gtest.h>

#include <map>

#include "datasets/mmlu.h"
#include "eval/loglik.h"
#include "eval/perplexity.h"
#include "lib/core/error.h"
#include "lib/model/model_source.h"
#include "lib/tokenizer/load.h"
#include "tests/support/test_data.h"

namespace {

using cb::datasets::MmluQuestion;
using cb::datasets::MmluSubject;

/// Byte-level tokenizer for tests: byte b -> id b + 3, BOS 1, EOS 2.
class ByteTokenizer : public cb::tokenizer::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(static_cast<int32_t>(c) + 3);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids)
      if (id >= 3) s += static_cast<char>(id - 3);
    return s;
  }
  std::string piece(int32_t id) const override { return decode({id}); }
  size_t vocab_size() const override { return 259; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  bool add_bos_default() const override { return true; }
  std::string kind() const override { return "bytes (test)"; }
};

std::unique_ptr<cb::model::Model> tiny() {
  auto src = cb::model::ModelSource::open("preset:tiny-llama");
  return std::make_unique<cb::model::Model>(src->config(),
                                            cb::model::Weights::load(*src, src->config(), 7));
}

/// Independent reference: one prefill of the whole lm-eval input, NLLs summed by token_nll.
double direct_loglik(const cb::model::Model& m, const std::vector<int32_t>& ctx,
                     const std::vector<int32_t>& cont, int max_length) {
  std::vector<int32_t> all = ctx;
  all.insert(all.end(), cont.begin(), cont.end());
  if (static_cast<int>(all.size()) > max_length + 1) {
    all.erase(all.begin(), all.end() - (max_length + 1));
  }
  all.pop_back();
  cb::kv::KvCache cache(m.kv_config(64, 16));
  cache.add_sequence(0);
  EXPECT_TRUE(cache.reserve(0, static_cast<int64_t>(all.size())));
  const auto logits = m.forward({{0, all, true}}, cache);
  const int64_t V = m.config().vocab_size;
  const size_t row0 = all.size() - cont.size();
  double ll = 0.0;
  for (size_t j = 0; j < cont.size(); ++j) {
    ll -= cb::eval::token_nll(logits.data() + static_cast<int64_t>(row0 + j) * V, V, cont[j]);
  }
  return ll;
}

MmluQuestion question(const std::string& q, std::array<std::string, 4> c, int answer) {
  MmluQuestion x;
  x.question = q;
  x.choices = std::move(c);
  x.answer = answer;
  return x;
}

TEST(MmluTest, PromptMatchesLmEvalTemplate) {
  const std::vector<MmluQuestion> dev = {
      question("Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field.", {"0", "1", "2", "3"}, 1),
      question("  What is 2+2? \n", {"3", "4", " 5", "6"}, 1)};
  const MmluQuestion test = question("Which is prime?", {"4", "6", "7", "8"}, 2);
  EXPECT_EQ(cb::eval::mmlu_description("abstract_algebra"),
            "The following are multiple choice questions (with answers) about abstract "
            "algebra.\n\n");
  EXPECT_EQ(cb::eval::mmlu_format_question(test),
            "Which is prime?\nA. 4\nB. 6\nC. 7\nD. 8\nAnswer:");
  const std::string expected =
      "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
      "Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field.\nA. 0\nB. 1\nC. 2\nD. 3\n"
      "Answer: B\n\n"
      "What is 2+2?\nA. 3\nB. 4\nC.  5\nD. 6\nAnswer: B\n\n"
      "Which is prime?\nA. 4\nB. 6\nC. 7\nD. 8\nAnswer:";
  EXPECT_EQ(cb::eval::mmlu_prompt("abstract_algebra", dev, 2, test), expected);
  EXPECT_EQ(cb::eval::mmlu_prompt("abstract_algebra", dev, 0, test),
            cb::eval::mmlu_description("abstract_algebra") + cb::eval::mmlu_format_question(test));
  EXPECT_THROW(cb::eval::mmlu_fewshot_prefix("abstract_algebra", dev, 3), cb::Error);
}

TEST(MmluTest, QuestionIsStrippedOfUnicodeWhitespaceAsPythonDoes) {
  // lm-eval's doc["question"].strip() is Python's: it removes U+0085 (NEL; MMLU's
  // sociology_test.csv has one), U+00A0 and U+3000 as well as ASCII whitespace.
  const MmluQuestion q = question("\u3000\u00a0Which is prime?\u0085 \n", {"4", "6", "7", "8"}, 2);
  EXPECT_EQ(cb::eval::mmlu_format_question(q), "Which is prime?\nA. 4\nB. 6\nC. 7\nD. 8\nAnswer:");
}

TEST(LoglikTest, EncodePairMovesTrailingSpaces) {
  ByteTokenizer tok;
  const auto p = cb::eval::encode_pair(tok, "Answer: ", "A", true);
  EXPECT_EQ(p.context, tok.encode("Answer:", true));
  EXPECT_EQ(p.continuation, tok.encode(" A", false));
  EXPECT_THROW(cb::eval::encode_pair(tok, "Answer:", "", true), cb::Error);
}

TEST(LoglikTest, MatchesDirectPrefill) {
  auto m = tiny();
  ByteTokenizer tok;
  cb::eval::LoglikScorer scorer(*m, tok, {});
  const std::vector<std::string> conts = {" A", " B", " yes indeed", " C"};
  const auto check = [&](const std::string& ctx) {
    const auto r = scorer.score("", ctx, conts);
    ASSERT_EQ(r.size(), conts.size());
    for (size_t i = 0; i < conts.size(); ++i) {
      const auto p = cb::eval::encode_pair(tok, ctx, conts[i], true);
      EXPECT_NEAR(r[i].logprob, direct_loglik(*m, p.context, p.continuation, 256), 1e-4)
          << ctx << " / " << conts[i];
      EXPECT_EQ(r[i].n_tokens, static_cast<int>(p.continuation.size()));
      EXPECT_LT(r[i].logprob, 0.0);
      EXPECT_FALSE(r[i].truncated);
    }
  };
  check("Question: which letter?\nAnswer:");
  check("Question: which letter comes first?\nAnswer:");  // reuses the shared prefix
  check("Question: which letter comes first?\nAnswer:");  // reuses everything
  check("Something else entirely:");
  const auto s = scorer.stats();
  EXPECT_EQ(s.requests, 16);
  EXPECT_GT(s.tokens_reused, 0);
}

TEST(LoglikTest, LeftTruncationFollowsLmEval) {
  auto m = tiny();
  ByteTokenizer tok;
  cb::eval::LoglikOptions opt;
  opt.max_length = 24;
  cb::eval::LoglikScorer scorer(*m, tok, opt);
  const std::string ctx = "This context is far longer than twenty-four bytes:";
  const std::vector<std::string> conts = {" A", " a longer answer"};
  const auto r = scorer.score("", ctx, conts);
  for (size_t i = 0; i < conts.size(); ++i) {
    const auto p = cb::eval::encode_pair(tok, ctx, conts[i], true);
    EXPECT_TRUE(r[i].truncated);
    EXPECT_NEAR(r[i].logprob, direct_loglik(*m, p.context, p.continuation, 24), 1e-4);
  }
  EXPECT_EQ(scorer.stats().truncated, 2);
}

TEST(LoglikTest, OverflowScorerMatchesOneStream) {
  auto m = tiny();
  ByteTokenizer tok;
  std::vector<int32_t> history = tok.encode(std::string(150, 'x') + "history text", true);
  cb::eval::OverflowScorerOptions opt;
  opt.stream.n_ctx = 64;
  opt.stream.truncate_ratio = 0.5;
  opt.feed_chunk = 17;
  const int64_t V = m->config().vocab_size;
  for (auto meth : {cb::eval::OverflowMethod::TT, cb::eval::OverflowMethod::CA,
                    cb::eval::OverflowMethod::NKVT}) {
    cb::eval::OverflowScorer scorer(*m, tok, meth, history, opt);
    EXPECT_GT(scorer.history_stream().overflows(), 0);
    const std::string prefix = "Few-shot prefix text.\n\n";
    const std::string rest = "Q: which?\nAnswer:";
    const std::vector<std::string> conts = {" A", " B and more"};
    for (int rep = 0; rep < 2; ++rep) {  // the second run reuses the cached prefix stream
      const auto r = scorer.score(prefix, rest, conts);
      for (size_t i = 0; i < conts.size(); ++i) {
        const auto p = cb::eval::encode_pair(tok, prefix + rest, conts[i], false);
        cb::eval::OverflowStream ref(*m, meth, opt.stream);
        std::vector<int32_t> all = history;
        all.insert(all.end(), p.context.begin(), p.context.end());
        all.insert(all.end(), p.continuation.begin(), p.continuation.end() - 1);
        const auto lg = ref.feed(all);
        const size_t row0 = all.size() - p.continuation.size();
        double ll = 0.0;
        for (size_t j = 0; j < p.continuation.size(); ++j) {
          ll -= cb::eval::token_nll(lg.data() + static_cast<int64_t>(row0 + j) * V, V,
                                    p.continuation[j]);
        }
        EXPECT_NEAR(r[i].logprob, ll, 1e-3) << cb::eval::overflow_method_name(meth);
      }
    }
    EXPECT_GT(scorer.stats().tokens_reused, 0);
  }
}

/// Deterministic scorer: picks the letter given by the question's first character.
class FakeScorer : public cb::eval::ContextScorer {
 public:
  std::vector<cb::eval::LoglikResult> score(const std::string&, const std::string& rest,
                                            const std::vector<std::string>& conts) override {
    std::vector<cb::eval::LoglikResult> r(conts.size());
    for (size_t i = 0; i < conts.size(); ++i) {
      r[i].logprob = conts[i] == std::string(" ") + rest[0] ? -1.0 : -2.0;
    }
    return r;
  }
  cb::eval::ScorerStats stats() const override { return {}; }
  std::string name() const override { return "fake"; }
};

TEST(MmluTest, CountsAndAverages) {
  std::vector<MmluSubject> subjects(3);
  const std::array<std::string, 4> c = {"w", "x", "y", "z"};
  // Subject s has 3 + 2s questions; question i answers A, and names letter A when i is even.
  for (int s = 0; s < 3; ++s) {
    subjects[static_cast<size_t>(s)].name = "subject_" + std::to_string(s);
    for (int i = 0; i < 2; ++i) subjects[static_cast<size_t>(s)].dev.push_back(question("D", c, 0));
    for (int i = 0; i < 3 + 2 * s; ++i) {
      subjects[static_cast<size_t>(s)].test.push_back(question(i % 2 == 0 ? "A?" : "B?", c, 0));
    }
  }
  FakeScorer fake;
  cb::eval::MmluOptions opt;
  opt.shots = 2;
  const auto r = cb::eval::run_mmlu(subjects, opt, fake);
  ASSERT_EQ(r.subjects.size(), 3u);
  int64_t n = 0, correct = 0;
  double macro = 0.0;
  for (const auto& s : r.subjects) {
    n += s.n;
    correct += s.correct;
    macro += s.accuracy();
  }
  EXPECT_EQ(n, 3 + 5 + 7);
  EXPECT_EQ(r.n, n);
  EXPECT_EQ(r.correct, correct);
  EXPECT_EQ(correct, 2 + 3 + 4);
  EXPECT_DOUBLE_EQ(r.micro, static_cast<double>(correct) / static_cast<double>(n));
  EXPECT_DOUBLE_EQ(r.macro, macro / 3.0);
  EXPECT_NE(r.micro, r.macro);

  opt.limit = 4;
  const auto lim = cb::eval::run_mmlu(subjects, opt, fake);
  EXPECT_EQ(lim.n, 3 + 4 + 4);
  opt.shots = 3;
  EXPECT_THROW(cb::eval::run_mmlu(subjects, opt, fake), cb::Error);

  EXPECT_EQ(cb::eval::mmlu_select(subjects, {"subject_2", "subject_0"}).size(), 2u);
  EXPECT_THROW(cb::eval::mmlu_select(subjects, {"nope"}), cb::Error);
}

// A subject short of --shots dev questions stops the run before any question is scored (it used
// to be found when the run reached it, after the subjects before it were scored).
TEST(MmluTest, ShortDevRefusedBeforeScoring) {
  class CountingScorer : public FakeScorer {
   public:
    std::vector<cb::eval::LoglikResult> score(const std::string& prefix, const std::string& rest,
                                              const std::vector<std::string>& conts) override {
      ++calls;
      return FakeScorer::score(prefix, rest, conts);
    }
    int calls = 0;
  };
  const std::array<std::string, 4> c = {"w", "x", "y", "z"};
  std::vector<MmluSubject> subjects(2);
  subjects[0].name = "anatomy";
  subjects[0].dev = {question("D", c, 0), question("D", c, 0)};
  subjects[0].test = {question("A?", c, 0)};
  subjects[1].name = "zz";
  subjects[1].dev_path = "late/dev/zz_dev.csv";
  subjects[1].dev = {question("D", c, 0)};
  subjects[1].test = {question("A?", c, 0)};
  CountingScorer scorer;
  cb::eval::MmluOptions opt;
  opt.shots = 2;
  try {
    cb::eval::run_mmlu(subjects, opt, scorer);
    FAIL() << "no error";
  } catch (const cb::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--shots: 2 few-shot examples requested but subject zz has 1 dev question "
              "(late/dev/zz_dev.csv); pass a smaller --shots, or add dev questions");
  }
  EXPECT_EQ(scorer.calls, 0);
  EXPECT_NO_THROW(cb::eval::mmlu_check_shots(subjects, 1));
  EXPECT_THROW(cb::eval::mmlu_check_shots(subjects, 2), cb::Error);
}

TEST(MmluTest, MalformedCsvNamesFileAndLine) {
  const std::string dir = cb::test::tmp_dir() + "/mmlu_bad";
  ::mkdir(dir.c_str(), 0755);
  ::mkdir((dir + "/test").c_str(), 0755);
  const std::string path = cb::test::write_tmp("mmlu_bad/test/algebra_test.csv",
                                               "What?,1,2,3,4,A\nWhy?,1,2,3,4,B\nBroken row,1,2\n");
  try {
    cb::datasets::load_mmlu_dir(dir, /*with_dev=*/false);
    FAIL() << "no error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":3"), std::string::npos) << e.what();
  }
}

TEST(MmluTest, Stories260KEndToEnd) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  CB_REQUIRE_DATA(test_file, "data/mmlu/test/abstract_algebra_test.csv");
  auto src = cb::model::ModelSource::open(path);
  auto m = cb::model::Model::load(*src);
  auto tok = cb::tokenizer::tokenizer_from_gguf(*src->gguf());
  // SentencePiece: the leading space of " A" belongs to the continuation's first token.
  const auto p = cb::eval::encode_pair(*tok, "Answer:", " A", true);
  EXPECT_EQ(p.context, tok->encode("Answer:", true));
  const auto whole = tok->encode("Answer: A", true);
  EXPECT_EQ(std::vector<int32_t>(whole.begin() + static_cast<std::ptrdiff_t>(p.context.size()),
                                 whole.end()),
            p.continuation);

  const auto subjects =
      cb::eval::mmlu_select(cb::datasets::load_mmlu_dir(cb::test::data_path("data/mmlu")),
                            {"abstract_algebra", "anatomy"});
  cb::eval::LoglikScorer scorer(*m, *tok, {});
  cb::eval::MmluOptions opt;
  opt.limit = 10;
  const auto r = cb::eval::run_mmlu(subjects, opt, scorer);
  ASSERT_EQ(r.subjects.size(), 2u);
  EXPECT_EQ(r.n, 20);
  EXPECT_EQ(r.subjects[0].n + r.subjects[1].n, r.n);
  EXPECT_GE(r.micro, 0.0);
  EXPECT_LE(r.micro, 1.0);
  EXPECT_EQ(r.stats.requests, 80);
}

}  // namespace
