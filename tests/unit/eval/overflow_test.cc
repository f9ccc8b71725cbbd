#include "eval/overflow.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "lib/core/error.h"
#include "lib/model/model_source.h"
#include "lib/tokenizer/load.h"
#include "tests/support/random_tokens.h"
#include "tests/support/test_data.h"

namespace {

using cb::eval::OverflowMethod;

using cb::test::random_tokens;

std::unique_ptr<cb::model::Model> tiny(int layers) {
  auto src = cb::model::ModelSource::open("preset:tiny-llama");
  auto cfg = src->config();
  cfg.n_layers = layers;
  return std::make_unique<cb::model::Model>(cfg, cb::model::Weights::load(*src, cfg, 5));
}

// With one layer, a token's K and V depend on that token alone, so CachedAttention's stored
// pre-RoPE KV re-embedded at new positions is exactly what token truncation recomputes.
TEST(OverflowTest, OneLayerCaEqualsTokenTruncation) {
  auto m = tiny(1);
  const auto toks = random_tokens(300, m->config().vocab_size, 1);
  cb::eval::OverflowOptions opt;
  opt.n_ctx = 64;
  opt.truncate_ratio = 0.25;
  const auto tt = cb::eval::run_overflow(*m, toks, OverflowMethod::TT, opt);
  const auto ca = cb::eval::run_overflow(*m, toks, OverflowMethod::CA, opt);
  const auto nk = cb::eval::run_overflow(*m, toks, OverflowMethod::NKVT, opt);
  EXPECT_NEAR(ca.mean_nll, tt.mean_nll, 1e-5 * tt.mean_nll);
  EXPECT_GT(std::fabs(nk.mean_nll - tt.mean_nll), 1e-4);  // stale rotations change the result
  EXPECT_EQ(tt.scored_tokens, ca.scored_tokens);
  EXPECT_EQ(tt.overflows, ca.overflows);
  // 64-token window, 16 dropped per overflow: 48 kept tokens recomputed by TT each time.
  EXPECT_EQ(tt.tokens_recomputed, tt.overflows * 48);
  EXPECT_EQ(ca.tokens_recomputed, 0);
  EXPECT_EQ(ca.tokens_processed, 300);
  // First overflow after 64 tokens, then one every 16 new tokens.
  EXPECT_EQ(tt.overflows, (300 - 64 - 1) / 16 + 1);
}

TEST(OverflowTest, SinkTokensAreKept) {
  auto m = tiny(1);
  const auto toks = random_tokens(200, m->config().vocab_size, 2);
  cb::eval::OverflowOptions opt;
  opt.n_ctx = 32;
  opt.truncate_ratio = 0.5;
  opt.sink = 4;
  const auto tt = cb::eval::run_overflow(*m, toks, OverflowMethod::TT, opt);
  const auto ca = cb::eval::run_overflow(*m, toks, OverflowMethod::CA, opt);
  EXPECT_NEAR(ca.mean_nll, tt.mean_nll, 1e-5 * tt.mean_nll);
  EXPECT_EQ(tt.tokens_recomputed, tt.overflows * 16);
}

TEST(OverflowTest, RejectsBadOptions) {
  auto m = tiny(1);
  const auto toks = random_tokens(100, m->config().vocab_size, 3);
  cb::eval::OverflowOptions opt;
  opt.n_ctx = 200;  // stream shorter than the window: never overflows
  EXPECT_THROW(cb::eval::run_overflow(*m, toks, OverflowMethod::CA, opt), cb::Error);
  opt.n_ctx = 32;
  opt.truncate_ratio = 1.0;
  EXPECT_THROW(cb::eval::run_overflow(*m, toks, OverflowMethod::CA, opt), cb::Error);
  opt.truncate_ratio = 0.5;
  opt.sink = 30;
  EXPECT_THROW(cb::eval::run_overflow(*m, toks, OverflowMethod::CA, opt), cb::Error);
  opt.sink = 0;
  opt.n_ctx = 100000;  // beyond the model's window
  EXPECT_THROW(cb::eval::run_overflow(*m, toks, OverflowMethod::CA, opt), cb::Error);
}

// The paper's claim on a real trained model: CA matches TT, NKVT collapses.
TEST(OverflowTest, Stories260KOnTinyStories) {
  CB_REQUIRE_DATA(model_path, "models/stories260K/stories260K.gguf");
  CB_REQUIRE_DATA(text_path, "data/tinystories/tinystories_val_part1.txt");
  auto src = cb::model::ModelSource::open(model_path);
  auto m = cb::model::Model::load(*src);
  auto tok = cb::tokenizer::tokenizer_from_gguf(*src->gguf());
  std::ifstream in(text_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto toks = tok->encode(text, true);
  cb::eval::OverflowOptions opt;
  opt.n_ctx = 256;
  opt.truncate_ratio = 0.5;
  opt.max_tokens = 6000;
  const auto tt = cb::eval::run_overflow(*m, toks, OverflowMethod::TT, opt);
  const auto ca = cb::eval::run_overflow(*m, toks, OverflowMethod::CA, opt);
  const auto nk = cb::eval::run_overflow(*m, toks, OverflowMethod::NKVT, opt);
  EXPECT_LT(std::fabs(ca.ppl - tt.ppl) / tt.ppl, 0.02) << "CA " << ca.ppl << " TT " << tt.ppl;
  EXPECT_GT(nk.ppl, 10.0 * tt.ppl) << "NKVT " << nk.ppl << " TT " << tt.ppl;
  EXPECT_LT(tt.ppl, 10.0);  // sanity: the model predicts TinyStories well
}

}  // namespace

namespace {

// A copied stream is independent: both continue identically, and feeding one leaves the other.
TEST(OverflowStreamTest, CopiesAreIndependentSnapshots) {
  auto m = tiny(2);
  const int V = m->config().vocab_size;
  cb::eval::OverflowOptions opt;
  opt.n_ctx = 48;
  opt.truncate_ratio = 0.5;
  for (auto method : {OverflowMethod::TT, OverflowMethod::CA, OverflowMethod::NKVT}) {
    cb::eval::OverflowStream s(*m, method, opt);
    s.feed(random_tokens(100, V, 4));  // 48 tokens fill the window, then 24 per truncation: 3
    EXPECT_EQ(s.overflows(), 3);
    cb::eval::OverflowStream copy = s;
    const auto q = random_tokens(30, V, 5);
    const auto a = copy.feed(q);
    const auto b = s.feed(q);
    EXPECT_EQ(a, b);
    EXPECT_EQ(copy.window(), s.window());
    copy.feed(random_tokens(10, V, 6));
    EXPECT_NE(copy.window_length(), s.window_length());
  }
}

}  // namespace

namespace {

using cb::eval::OverflowResult;

const std::vector<OverflowMethod> kAll = {OverflowMethod::TT, OverflowMethod::CA,
                                          OverflowMethod::NKVT};

// Batched (lockstep, TT's recompute merged) must give the unbatched numbers up to the
// rounding of the batched GEMMs, with the same work accounted.
void expect_same(const OverflowResult& a, const OverflowResult& b) {
  const char* name = cb::eval::overflow_method_name(a.method);
  EXPECT_EQ(a.method, b.method);
  EXPECT_LE(std::fabs(a.ppl - b.ppl) / a.ppl, 1e-6) << name << ": " << a.ppl << " vs " << b.ppl;
  EXPECT_EQ(a.scored_tokens, b.scored_tokens) << name;
  EXPECT_EQ(a.overflows, b.overflows) << name;
  EXPECT_EQ(a.tokens_recomputed, b.tokens_recomputed) << name;
  EXPECT_EQ(a.tokens_processed, b.tokens_processed) << name;
  ASSERT_EQ(a.token_nll.size(), b.token_nll.size()) << name;
  ASSERT_EQ(static_cast<int64_t>(a.token_nll.size()), a.scored_tokens) << name;
  for (size_t i = 0; i < a.token_nll.size(); ++i) {
    ASSERT_NEAR(a.token_nll[i], b.token_nll[i], 1e-4 * (1.0 + std::fabs(a.token_nll[i])))
        << name << " token " << i;
  }
}

// The unbatched reference: each method on its own, one forward call per step and per TT
// recompute (the study as it ran before batching).
std::vector<OverflowResult> unbatched(const cb::model::Model& m, const std::vector<int32_t>& toks,
                                      cb::eval::OverflowOptions opt) {
  opt.batched = false;
  opt.keep_nll = true;
  std::vector<OverflowResult> rs;
  for (auto method : kAll) rs.push_back(cb::eval::run_overflow(m, toks, method, opt));
  return rs;
}

TEST(OverflowBatchTest, LockstepEqualsUnbatchedOnAPreset) {
  auto m = tiny(2);
  const auto toks = random_tokens(300, m->config().vocab_size, 7);
  cb::eval::OverflowOptions opt;
  opt.n_ctx = 64;
  opt.truncate_ratio = 0.25;
  opt.sink = 2;
  const auto ref = unbatched(*m, toks, opt);
  opt.keep_nll = true;
  const auto rs = cb::eval::run_overflow_group(*m, toks, kAll, opt);
  ASSERT_EQ(rs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) expect_same(ref[i], rs[i]);
  // Unbatched: one call per refill per method, plus TT's recomputes. Lockstep: one per refill.
  const int64_t refills = 1 + ref[0].overflows;
  EXPECT_EQ(ref[0].forward_calls, refills + ref[0].overflows);
  EXPECT_EQ(ref[1].forward_calls, refills);
  EXPECT_EQ(ref[2].forward_calls, refills);
  for (const auto& r : rs) EXPECT_EQ(r.forward_calls, refills);
  // One method alone, batched: TT's recompute joins its next prefill.
  const auto tt = cb::eval::run_overflow(*m, toks, OverflowMethod::TT, opt);
  expect_same(ref[0], tt);
  EXPECT_EQ(tt.forward_calls, refills);
}

// OverflowStream (used by the MMLU scorer) gives the unbatched logits when TT's recompute is
// merged into the next prefill, and so does a copy taken with a full window (the recompute
// happens in the copy's next feed).
TEST(OverflowBatchTest, StreamWithPendingRecomputeMatchesUnbatched) {
  auto m = tiny(2);
  const int V = m->config().vocab_size;
  cb::eval::OverflowOptions opt;
  opt.n_ctx = 48;
  opt.truncate_ratio = 0.5;
  cb::eval::OverflowStream merged(*m, OverflowMethod::TT, opt);
  opt.batched = false;
  cb::eval::OverflowStream separate(*m, OverflowMethod::TT, opt);
  const auto h = random_tokens(72, V, 8);  // fills the window, overflows once, refills it
  merged.feed(h);
  separate.feed(h);
  const auto q = random_tokens(5, V, 9);  // overflows again: TT recomputes first
  const cb::eval::OverflowStream copy = merged;
  const auto a = merged.feed(q);
  const auto b = separate.feed(q);
  const auto c = cb::eval::OverflowStream(copy).feed(q);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], 1e-4 * (1.0 + std::fabs(b[i]))) << i;
    ASSERT_EQ(a[i], c[i]) << i;
  }
  EXPECT_EQ(merged.tokens_recomputed(), separate.tokens_recomputed());
  EXPECT_EQ(merged.tokens_processed(), separate.tokens_processed());
  EXPECT_EQ(merged.window(), separate.window());
}

// The study on the real model: TT, CA and NKVT in lockstep against each run on its own.
TEST(OverflowBatchTest, Stories260KLockstepEqualsUnbatched) {
  CB_REQUIRE_DATA(model_path, "models/stories260K/stories260K.gguf");
  CB_REQUIRE_DATA(text_path, "data/tinystories/tinystories_val_part1.txt");
  auto src = cb::model::ModelSource::open(model_path);
  auto m = cb::model::Model::load(*src);
  auto tok = cb::tokenizer::tokenizer_from_gguf(*src->gguf());
  const std::string text = cb::test::read_file(text_path);
  const auto toks = tok->encode(text.substr(0, 20000), true);
  cb::eval::OverflowOptions opt;
  opt.n_ctx = 256;
  opt.truncate_ratio = 0.5;
  opt.max_tokens = 3000;
  const auto ref = unbatched(*m, toks, opt);
  opt.keep_nll = true;
  const auto rs = cb::eval::run_overflow_group(*m, toks, kAll, opt);
  ASSERT_EQ(rs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) expect_same(ref[i], rs[i]);
  EXPECT_GT(ref[0].overflows, 15);
  EXPECT_LT(rs[0].forward_calls, ref[0].forward_calls + ref[1].forward_calls);
}

}  // namespace
