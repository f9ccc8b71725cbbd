#include "eval/piqa.h"

#include <gtest/gtest.h>

#include "datasets/piqa.h"
#include "lib/core/error.h"
#include "lib/model/model_source.h"
#include "lib/tokenizer/load.h"
#include "tests/support/test_data.h"

namespace {

using cb::datasets::PiqaExample;

/// Log-likelihood = -(bytes of the continuation): favours the shorter solution for acc,
/// and ties (-1 per byte) for acc_norm, which then picks sol1.
class LengthScorer : public cb::eval::ContextScorer {
 public:
  std::vector<std::string> contexts, continuations;
  std::vector<cb::eval::LoglikResult> score(const std::string& prefix, const std::string& rest,
                                            const std::vector<std::string>& conts) override {
    contexts.push_back(prefix + rest);
    std::vector<cb::eval::LoglikResult> r(conts.size());
    for (size_t i = 0; i < conts.size(); ++i) {
      continuations.push_back(conts[i]);
      r[i].logprob = -static_cast<double>(conts[i].size() - 1);
    }
    return r;
  }
  cb::eval::ScorerStats stats() const override { return {}; }
  std::string name() const override { return "length"; }
};

TEST(PiqaTest, ContextAndContinuationsFollowLmEval) {
  const PiqaExample ex{"How do I open a jar?", "Twist the lid.", "Eat the lid.", 0};
  EXPECT_EQ(cb::eval::piqa_context(ex), "Question: How do I open a jar?\nAnswer:");
  LengthScorer s;
  cb::eval::run_piqa({ex}, 0, s);
  ASSERT_EQ(s.contexts.size(), 1u);
  EXPECT_EQ(s.contexts[0], "Question: How do I open a jar?\nAnswer:");
  EXPECT_EQ(s.continuations, (std::vector<std::string>{" Twist the lid.", " Eat the lid."}));
}

TEST(PiqaTest, AccAndAccNorm) {
  // sol2 shorter in both: acc picks sol2; acc_norm ties (-1 per character) and keeps sol1.
  const std::vector<PiqaExample> ex = {{"g", "long solution", "short", 1},
                                       {"g", "long solution", "short", 0},
                                       {"g", "aaaa", "bb", 1}};
  LengthScorer s;
  const auto r = cb::eval::run_piqa(ex, 0, s);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.correct, 2);
  EXPECT_EQ(r.correct_norm, 1);
  EXPECT_DOUBLE_EQ(r.acc, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(r.acc_norm, 1.0 / 3.0);
  EXPECT_EQ(cb::eval::run_piqa(ex, 2, s).n, 2);
  EXPECT_EQ(cb::eval::utf8_length("caf\xC3\xA9"), 4);
}

TEST(PiqaTest, Stories260KLimit20) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  CB_REQUIRE_DATA(jsonl, "data/piqa/valid.jsonl");
  auto src = cb::model::ModelSource::open(path);
  auto m = cb::model::Model::load(*src);
  auto tok = cb::tokenizer::tokenizer_from_gguf(*src->gguf());
  const auto examples = cb::datasets::load_piqa_dir(cb::test::data_path("data/piqa"));
  cb::eval::LoglikScorer scorer(*m, *tok, {});
  const auto r = cb::eval::run_piqa(examples, 20, scorer);
  EXPECT_EQ(r.n, 20);
  EXPECT_GE(r.acc, 0.0);
  EXPECT_LE(r.acc, 1.0);
  EXPECT_GE(r.acc_norm, 0.0);
  EXPECT_LE(r.acc_norm, 1.0);
  EXPECT_EQ(r.stats.requests, 40);
}

}  // namespace
