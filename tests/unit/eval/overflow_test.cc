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
