#include "eval/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/model/model_source.h"
#include "lib/tokenizer/load.h"
#include "tests/support/random_tokens.h"
#include "tests/support/test_data.h"

namespace {

using cb::eval::PerplexityOptions;

using cb::test::random_tokens;

std::unique_ptr<cb::model::Model> tiny() {
  auto src = cb::model::ModelSource::open("preset:tiny-llama");
  return cb::model::Model::load(*src, 7);
}

// NLL of `target` after `context`, from one fresh forward pass over the context alone.
double nll_after(const cb::model::Model& m, const std::vector<int32_t>& context, int32_t target) {
  cb::kv::KvCache cache(m.kv_config(static_cast<int>(context.size()) / 16 + 1, 16));
  cb::model::SeqInput in;
  in.seq = 0;
  in.tokens = context;
  cache.add_sequence(0);
  EXPECT_TRUE(cache.reserve(0, static_cast<int64_t>(context.size())));
  const std::vector<float> logits = m.forward({in}, cache);  // last row only
  return cb::eval::token_nll(logits.data(), m.config().vocab_size, target);
}

TEST(PerplexityTest, RollingWindowsScoreEveryTokenOnce) {
  for (int len : {1, 2, 4, 16}) {
    for (int64_t n : {1, 2, 3, 5, 15, 16, 17, 31, 32, 33, 64, 70}) {
      const auto ws = cb::eval::lmeval_rolling_windows(n, len);
      std::vector<int> hits(static_cast<size_t>(n), 0);
      for (const auto& w : ws) {
        EXPECT_GE(w.input_begin, -1);
        EXPECT_LE(w.input_len, len);
        EXPECT_LE(w.input_begin + w.input_len, n);
        EXPECT_GE(w.pred_len, 1);
        // The last pred_len inputs are exactly the predicted tokens' predecessors.
        EXPECT_EQ(w.input_begin + w.input_len - w.pred_len, w.pred_begin - 1);
        for (int j = 0; j < w.pred_len; ++j) ++hits[static_cast<size_t>(w.pred_begin + j)];
      }
      for (int h : hits) EXPECT_EQ(h, 1) << "n " << n << " len " << len;
      EXPECT_EQ(static_cast<int64_t>(ws.size()), (n + len - 1) / len);
      EXPECT_EQ(ws.front().input_begin, -1);  // the prefix token opens the first window
    }
  }
  EXPECT_TRUE(cb::eval::lmeval_rolling_windows(0, 8).empty());
}

TEST(PerplexityTest, RollingWindowsMatchLmEvalOnAnExample) {
  // lm-eval, tokens 0..9, prefix P, max_seq_len 4, context_len 1, after make_disjoint_window:
  //   ([P], [0,1,2,3]) ([3], [4,5,6,7]) ([5,6,7], [8,9]); model inputs are
  //   (context + continuation)[-5:][:-1]: [P,0,1,2] [3,4,5,6] [5,6,7,8].
  const auto ws = cb::eval::lmeval_rolling_windows(10, 4);
  ASSERT_EQ(ws.size(), 3u);
  EXPECT_EQ(ws[0].input_begin, -1);
  EXPECT_EQ(ws[0].pred_begin, 0);
  EXPECT_EQ(ws[0].pred_len, 4);
  EXPECT_EQ(ws[1].input_begin, 3);
  EXPECT_EQ(ws[1].input_len, 4);
  EXPECT_EQ(ws[1].pred_begin, 4);
  EXPECT_EQ(ws[2].input_begin, 5);
  EXPECT_EQ(ws[2].input_len, 4);
  EXPECT_EQ(ws[2].pred_begin, 8);
  EXPECT_EQ(ws[2].pred_len, 2);
}

TEST(PerplexityTest, LmEvalShortStreamIsFullContextScoring) {
  auto m = tiny();
  const int32_t prefix = 1;
  const auto toks = random_tokens(13, m->config().vocab_size, 11);
  PerplexityOptions opt;
  opt.n_ctx = 32;
  opt.bos_id = prefix;
  const auto r = cb::eval::perplexity_lmeval(*m, toks, opt);
  EXPECT_EQ(r.scored_tokens, 13);
  EXPECT_EQ(r.chunks, 1);
  EXPECT_EQ(r.convention, "lm-eval");
  // Every token conditioned on the prefix and all tokens before it.
  double total = 0.0;
  std::vector<int32_t> ctx = {prefix};
  for (int32_t t : toks) {
    total += nll_after(*m, ctx, t);
    ctx.push_back(t);
  }
  EXPECT_NEAR(r.total_nll, total, 1e-6 * total);
  EXPECT_NEAR(r.ppl, std::exp(total / 13.0), 1e-6 * r.ppl);
}

TEST(PerplexityTest, LmEvalRollingMatchesPerTokenBruteForce) {
  auto m = tiny();
  const int32_t prefix = 1;
  const int len = 16;
  for (int n : {48, 70}) {
    const auto toks = random_tokens(n, m->config().vocab_size, 12 + static_cast<uint32_t>(n));
    PerplexityOptions opt;
    opt.n_ctx = len;
    opt.bos_id = prefix;
    const auto r = cb::eval::perplexity_lmeval(*m, toks, opt);
    EXPECT_EQ(r.scored_tokens, n);
    // Token i belongs to the prediction block i / len. Block 0 sees the prefix and every
    // token before i; a later full block sees from the token just before the block; the last
    // partial block sees the len tokens before the stream's end (its input is the last window
    // of len tokens).
    double total = 0.0, sliding = 0.0;
    const int full_blocks = n / len;
    for (int i = 0; i < n; ++i) {
      const int block = i / len;
      std::vector<int32_t> ctx;
      int begin = 0;
      if (block == 0) {
        ctx.push_back(prefix);
      } else {
        begin = block < full_blocks ? block * len - 1 : n - len - 1;
      }
      ctx.insert(ctx.end(), toks.begin() + begin, toks.begin() + i);
      total += nll_after(*m, ctx, toks[static_cast<size_t>(i)]);
      // A sliding window would give every token the len tokens before it instead.
      std::vector<int32_t> full = {prefix};
      full.insert(full.end(), toks.begin(), toks.begin() + i);
      if (full.size() > static_cast<size_t>(len)) full.erase(full.begin(), full.end() - len);
      sliding += nll_after(*m, full, toks[static_cast<size_t>(i)]);
    }
    EXPECT_NEAR(r.total_nll, total, 1e-6 * total) << "n " << n;
    EXPECT_GT(std::fabs(r.total_nll - sliding), 1e-4) << "lm-eval is not a sliding window";
  }
}

TEST(PerplexityTest, LmEvalWordAndBytePerplexity) {
  auto m = tiny();
  const auto toks = random_tokens(40, m->config().vocab_size, 13);
  PerplexityOptions opt;
  opt.n_ctx = 16;
  opt.bos_id = 1;
  opt.text_words = 25;
  opt.text_bytes = 130;
  const auto r = cb::eval::perplexity_lmeval(*m, toks, opt);
  EXPECT_EQ(r.words, 25);
  EXPECT_EQ(r.bytes, 130);
  EXPECT_NEAR(r.word_ppl, std::exp(r.total_nll / 25.0), 1e-9 * r.word_ppl);
  EXPECT_NEAR(r.byte_ppl, std::exp(r.total_nll / 130.0), 1e-9 * r.byte_ppl);
  EXPECT_NEAR(r.bits_per_byte, std::log2(r.byte_ppl), 1e-9);
  EXPECT_NEAR(r.mean_nll * static_cast<double>(r.scored_tokens), r.total_nll, 1e-9 * r.total_nll);
}

TEST(PerplexityTest, LmEvalRejectsBadInput) {
  auto m = tiny();
  PerplexityOptions opt;
  opt.n_ctx = 16;
  opt.bos_id = -1;
  EXPECT_THROW(cb::eval::perplexity_lmeval(*m, {3, 4, 5}, opt), cb::Error);
  opt.bos_id = 1;
  EXPECT_THROW(cb::eval::perplexity_lmeval(*m, {}, opt), cb::Error);
  opt.n_ctx = 100000;  // beyond the model's window
  EXPECT_THROW(cb::eval::perplexity_lmeval(*m, {3, 4, 5}, opt), cb::Error);
}

// NaN weights give NaN logits: the score is an error naming the cause, never a "PPL nan"
// result (which JSON writes as null) with exit 0.
TEST(PerplexityTest, NonFiniteLogitsAreAnError) {
  const std::vector<float> ok{1.0f, 2.0f, 3.0f};
  EXPECT_NEAR(cb::eval::token_nll(ok.data(), 3, 2),
              std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, 1e-12);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::vector<float>& bad :
       {std::vector<float>{1.0f, nan, 3.0f}, std::vector<float>{1.0f, inf, 3.0f},
        std::vector<float>{-inf, -inf, -inf}}) {
    try {
      cb::eval::token_nll(bad.data(), 3, 0);
      ADD_FAILURE() << "scored non-finite logits";
    } catch (const cb::Error& e) {
      EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
    }
  }
}

TEST(PerplexityTest, CountWordsFollowsPythonReSplit) {
  using cb::eval::lmeval_count_words;
  EXPECT_EQ(lmeval_count_words(""), 1);
  EXPECT_EQ(lmeval_count_words("a b"), 2);
  EXPECT_EQ(lmeval_count_words(" a  b\n"), 4);  // ['', 'a', 'b', '']
  EXPECT_EQ(lmeval_count_words("\n"), 2);
  EXPECT_EQ(lmeval_count_words("a\xc2\xa0"
                               "b"),
            2);  // U+00A0
  EXPECT_EQ(lmeval_count_words("a\xe2\x80\x83"
                               "b"),
            2);  // U+2003
  EXPECT_EQ(lmeval_count_words("a\xe2\x80\x8b"
                               "b"),
            1);  // U+200B is not whitespace
  EXPECT_EQ(lmeval_count_words("a\x1c"
                               "b"),
            2);
  EXPECT_EQ(lmeval_count_words("a\xc2\x85"
                               "b"),
            2);                                                   // U+0085
  EXPECT_EQ(lmeval_count_words("caf\xc3\xa9 au\tlait \xff"), 4);  // invalid byte: a word
}

TEST(PerplexityTest, GptqScoresAllButEachWindowsFirstToken) {
  auto m = tiny();
  const int len = 16;
  const auto toks = random_tokens(100, m->config().vocab_size, 14);
  PerplexityOptions opt;
  opt.n_ctx = len;
  const auto r = cb::eval::perplexity_gptq(*m, toks, opt);
  EXPECT_EQ(r.convention, "gptq");
  EXPECT_EQ(r.chunks, 100 / len);
  EXPECT_EQ(r.scored_tokens, (100 / len) * (len - 1));
  // GPTQ: exp(sum_i(loss_i * seqlen) / (nsamples * seqlen)), loss_i the window's mean NLL.
  double nlls = 0.0;
  for (int i = 0; i < 100 / len; ++i) {
    double window = 0.0;
    for (int j = 1; j < len; ++j) {
      const std::vector<int32_t> ctx(toks.begin() + i * len, toks.begin() + i * len + j);
      window += nll_after(*m, ctx, toks[static_cast<size_t>(i * len + j)]);
    }
    nlls += window / (len - 1) * len;
  }
  const double ppl = std::exp(nlls / ((100 / len) * len));
  EXPECT_NEAR(r.ppl, ppl, 1e-6 * ppl);

  opt.max_chunks = 2;
  const auto r2 = cb::eval::perplexity_gptq(*m, toks, opt);
  EXPECT_EQ(r2.chunks, 2);
  EXPECT_EQ(r2.scored_tokens, 2 * (len - 1));
  EXPECT_NEAR(r2.ppl, r.chunk_ppl[1], 1e-9 * r2.ppl);
}

TEST(PerplexityTest, GptqNeedsOneFullWindow) {
  auto m = tiny();
  PerplexityOptions opt;
  opt.n_ctx = 16;
  const auto toks = random_tokens(15, m->config().vocab_size, 15);
  EXPECT_THROW(cb::eval::perplexity_gptq(*m, toks, opt), cb::Error);
  const auto more = random_tokens(16, m->config().vocab_size, 15);
  EXPECT_EQ(cb::eval::perplexity_gptq(*m, more, opt).scored_tokens, 15);
}

TEST(PerplexityTest, LlamaCppScoresSecondHalf) {
  auto m = tiny();
  const auto toks = random_tokens(64, m->config().vocab_size, 16);
  PerplexityOptions opt;
  opt.n_ctx = 32;
  opt.bos_id = 1;
  const auto r = cb::eval::perplexity_llamacpp(*m, toks, opt);
  EXPECT_EQ(r.convention, "llama.cpp");
  EXPECT_EQ(r.chunks, 2);
  EXPECT_EQ(r.scored_tokens, 2 * (32 - 16 - 1));
  // Fewer than 2 * n_ctx tokens: refused, as llama.cpp's perplexity refuses them.
  const auto short_text = random_tokens(63, m->config().vocab_size, 16);
  try {
    cb::eval::perplexity_llamacpp(*m, short_text, opt);
    ADD_FAILURE() << "a text of one chunk was scored";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least 2 x 32 tokens"), std::string::npos)
        << e.what();
  }
}

}  // namespace

namespace {

using cb::eval::PerplexityResult;

// Batched windows must give the unbatched numbers up to the rounding of the batched GEMMs.
void expect_same(const PerplexityResult& a, const PerplexityResult& b, const std::string& what) {
  EXPECT_LE(std::fabs(a.ppl - b.ppl) / a.ppl, 1e-6) << what << ": " << a.ppl << " vs " << b.ppl;
  EXPECT_EQ(a.scored_tokens, b.scored_tokens) << what;
  EXPECT_EQ(a.chunks, b.chunks) << what;
  ASSERT_EQ(a.token_nll.size(), b.token_nll.size()) << what;
  ASSERT_EQ(static_cast<int64_t>(a.token_nll.size()), a.scored_tokens) << what;
  for (size_t i = 0; i < a.token_nll.size(); ++i) {
    ASSERT_NEAR(a.token_nll[i], b.token_nll[i], 1e-5 * (1.0 + std::fabs(a.token_nll[i])))
        << what << " token " << i;
  }
  ASSERT_EQ(a.chunk_ppl.size(), b.chunk_ppl.size()) << what;
  EXPECT_LE(std::fabs(a.word_ppl - b.word_ppl), 1e-6 * a.word_ppl) << what;
}

int64_t calls_for(int windows, int batch) {
  return (windows + batch - 1) / batch;
}

// All three conventions on a preset: batch 1 (one window per forward call) against batches
// that divide the windows evenly, unevenly, and exceed them.
TEST(PerplexityBatchTest, BatchedEqualsUnbatchedOnAPreset) {
  auto m = tiny();
  const auto toks = random_tokens(230, m->config().vocab_size, 21);
  PerplexityOptions opt;
  opt.n_ctx = 32;
  opt.bos_id = 1;
  opt.keep_nll = true;
  opt.text_words = 40;
  opt.batch = 1;
  const auto l1 = cb::eval::perplexity_llamacpp(*m, toks, opt);
  const auto e1 = cb::eval::perplexity_lmeval(*m, toks, opt);
  const auto g1 = cb::eval::perplexity_gptq(*m, toks, opt);
  EXPECT_EQ(l1.forward_calls, l1.chunks);
  EXPECT_EQ(e1.forward_calls, e1.chunks);
  for (int batch : {2, 3, 7, 16}) {
    opt.batch = batch;
    const std::string b = " batch " + std::to_string(batch);
    const auto l = cb::eval::perplexity_llamacpp(*m, toks, opt);
    const auto e = cb::eval::perplexity_lmeval(*m, toks, opt);
    const auto g = cb::eval::perplexity_gptq(*m, toks, opt);
    expect_same(l1, l, "llama.cpp" + b);
    expect_same(e1, e, "lm-eval" + b);
    expect_same(g1, g, "gptq" + b);
    EXPECT_EQ(l.forward_calls, calls_for(l.chunks, batch));
    EXPECT_EQ(e.forward_calls, calls_for(e.chunks, batch));
    EXPECT_EQ(g.forward_calls, calls_for(g.chunks, batch));
    EXPECT_EQ(l.batch, batch);
  }
  opt.batch = 0;
  EXPECT_THROW(cb::eval::perplexity_gptq(*m, toks, opt), cb::Error);
}

// lm-eval over documents: each document's windows on their own (no context crosses
// documents), NLL, words and bytes summed over documents.
TEST(PerplexityBatchTest, LmEvalDocumentsSumOverDocuments) {
  auto m = tiny();
  const int V = m->config().vocab_size;
  std::vector<cb::eval::LmEvalDocument> docs = {
      {random_tokens(40, V, 31), 9, 50}, {{}, 1, 0}, {random_tokens(7, V, 32), 3, 20}};
  PerplexityOptions opt;
  opt.n_ctx = 16;
  opt.bos_id = 1;
  opt.keep_nll = true;
  double total = 0.0;
  int windows = 0;
  for (const auto& d : docs) {
    if (d.tokens.empty()) continue;
    const auto r = cb::eval::perplexity_lmeval(*m, d.tokens, opt);
    total += r.total_nll;
    windows += r.chunks;
  }
  for (int batch : {1, 2, 8}) {
    opt.batch = batch;
    const auto r = cb::eval::perplexity_lmeval_documents(*m, docs, opt);
    EXPECT_EQ(r.documents, 3);
    EXPECT_EQ(r.chunks, windows);
    EXPECT_EQ(r.scored_tokens, 47);
    EXPECT_NEAR(r.total_nll, total, 1e-6 * total);
    EXPECT_EQ(r.words, 13);
    EXPECT_EQ(r.bytes, 70);
    EXPECT_NEAR(r.word_ppl, std::exp(r.total_nll / 13.0), 1e-9 * r.word_ppl);
    EXPECT_NEAR(r.bits_per_byte, r.total_nll / 70.0 / std::log(2.0), 1e-12);
    ASSERT_EQ(r.document_nll.size(), 3u);
    EXPECT_EQ(r.document_nll[1], 0.0);
    EXPECT_NEAR(r.document_nll[0] + r.document_nll[2], r.total_nll, 1e-9 * total);
    EXPECT_EQ(r.forward_calls, calls_for(windows, batch));
  }
  EXPECT_THROW(cb::eval::perplexity_lmeval_documents(*m, {{{}, 1, 0}}, opt), cb::Error);
}

// The same on the real stories260K model and TinyStories text, for the three conventions.
TEST(PerplexityBatchTest, Stories260KBatchedEqualsUnbatched) {
  CB_REQUIRE_DATA(model_path, "models/stories260K/stories260K.gguf");
  CB_REQUIRE_DATA(text_path, "data/tinystories/tinystories_val_part1.txt");
  auto src = cb::model::ModelSource::open(model_path);
  auto m = cb::model::Model::load(*src);
  auto tok = cb::tokenizer::tokenizer_from_gguf(*src->gguf());
  const std::string text = cb::test::read_file(text_path);
  const auto with_bos = tok->encode(text.substr(0, 12000), true);
  const auto no_bos = tok->encode(text.substr(0, 12000), false);
  PerplexityOptions opt;
  opt.n_ctx = 256;
  opt.max_chunks = 10;
  opt.bos_id = tok->bos_id();
  opt.keep_nll = true;
  std::vector<cb::eval::LmEvalDocument> docs = {
      {std::vector<int32_t>(no_bos.begin(), no_bos.begin() + 1500), 1200, 5000},
      {std::vector<int32_t>(no_bos.begin() + 1500, no_bos.begin() + 1700), 160, 700}};
  opt.batch = 1;
  const auto l1 = cb::eval::perplexity_llamacpp(*m, with_bos, opt);
  const auto g1 = cb::eval::perplexity_gptq(*m, with_bos, opt);
  const auto e1 = cb::eval::perplexity_lmeval_documents(*m, docs, opt);
  EXPECT_EQ(l1.chunks, 10);
  EXPECT_LT(l1.ppl, 10.0);  // sanity: the model predicts TinyStories well
  for (int batch : {4, 8}) {
    opt.batch = batch;
    const std::string b = " batch " + std::to_string(batch);
    expect_same(l1, cb::eval::perplexity_llamacpp(*m, with_bos, opt), "llama.cpp" + b);
    expect_same(g1, cb::eval::perplexity_gptq(*m, with_bos, opt), "gptq" + b);
    expect_same(e1, cb::eval::perplexity_lmeval_documents(*m, docs, opt), "lm-eval" + b);
  }
}

}  // namespace
