#include "eval/perplexity.h"

#include <chrono>
#include <cmath>

#include "lib/core/error.h"

namespace cb::eval {
namespace {

using Clock = std::chrono::steady_clock;

void check_ctx(const model::Model& m, int n_ctx) {
  if (n_ctx < 4) throw make_error("--ctx", "must be at least 4, got " + std::to_string(n_ctx));
  if (n_ctx > m.config().max_context) {
    throw make_error("--ctx",
                     std::to_string(n_ctx) + " exceeds the model's context window of " +
                         std::to_string(m.config().max_context),
                     "pass a smaller --ctx");
  }
}

/// Sums of the scored NLLs, for the mean and llama.cpp's standard error.
struct NllSum {
  double nll = 0.0;
  double nll2 = 0.0;
  int64_t count = 0;
  void add(double v) {
    nll += v;
    nll2 += v * v;
    ++count;
  }
  double mean() const { return nll / static_cast<double>(count); }
  /// llama.cpp's PPL standard error around `ppl`.
  double ppl_stderr(double ppl) const {
    const double mu = mean();
    const double var = nll2 / static_cast<double>(count) - mu * mu;
    return (var > 0 && count > 1) ? ppl * std::sqrt(var / static_cast<double>(count - 1)) : 0.0;
  }
};

/// Runs `input` as a fresh sequence and returns the logits of every position.
std::vector<float> forward_all(const model::Model& m, kv::KvCache& cache, kv::SeqId seq,
                               std::vector<int32_t> input) {
  model::SeqInput in;
  in.seq = seq;
  in.all_logits = true;
  in.tokens = std::move(input);
  cache.add_sequence(seq);
  if (!cache.reserve(seq, static_cast<int64_t>(in.tokens.size()))) {
    throw Error("internal: perplexity KV cache too small");
  }
  std::vector<float> logits = m.forward({in}, cache);
  cache.free_sequence(seq);
  return logits;
}

// Full windows of n_ctx tokens in the stream, capped by --chunks; an error when there is none.
int full_windows(size_t n_tokens, int n_ctx, int max_chunks, const char* unit) {
  int n = static_cast<int>(n_tokens / static_cast<size_t>(n_ctx));
  if (n == 0) {
    throw make_error("perplexity",
                     "the text has " + std::to_string(n_tokens) + " tokens, fewer than one " +
                         unit + " of --ctx " + std::to_string(n_ctx),
                     "use a longer file or a smaller --ctx");
  }
  return max_chunks > 0 && max_chunks < n ? max_chunks : n;
}

kv::KvCache make_cache(const model::Model& m, int n_ctx, int block_size) {
  return kv::KvCache(m.kv_config((n_ctx + block_size - 1) / block_size, block_size));
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Python's str.isspace / re's \s for one code point.
bool is_py_space(uint32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Decodes the UTF-8 code point at text[i] and advances i; an invalid byte decodes as
/// itself (never whitespace above 0x7F) and advances by one.
uint32_t next_code_point(std::string_view text, size_t& i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + static_cast<size_t>(len) > text.size()) {
    ++i;
    return b0 < 0x80 ? b0 : 0xFFFD;
  }
  uint32_t c = len == 1 ? b0 : b0 & (0x7Fu >> len);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
    if ((b >> 6) != 0x2) {
      ++i;
      return 0xFFFD;
    }
    c = (c << 6) | (b & 0x3Fu);
  }
  i += static_cast<size_t>(len);
  return c;
}

}  // namespace

double token_nll(const float* logits, int64_t vocab, int32_t target) {
  double mx = logits[0];
  for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return std::log(sum) + mx - static_cast<double>(logits[target]);
}

PerplexityResult perplexity_llamacpp(const model::Model& m, const std::vector<int32_t>& tokens,
                                     const PerplexityOptions& opt,
                                     const PerplexityProgress& progress) {
  const int n_ctx = opt.n_ctx;
  check_ctx(m, n_ctx);
  const int chunks = full_windows(tokens.size(), n_ctx, opt.max_chunks, "chunk");

  const auto t0 = Clock::now();
  const int64_t vocab = m.config().vocab_size;
  const int first = n_ctx / 2;
  kv::KvCache cache = make_cache(m, n_ctx, opt.block_size);
  NllSum s;
  PerplexityResult r;
  for (int c = 0; c < chunks; ++c) {
    const size_t start = static_cast<size_t>(c) * static_cast<size_t>(n_ctx);
    std::vector<int32_t> in(
        tokens.begin() + static_cast<std::ptrdiff_t>(start),
        tokens.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(n_ctx)));
    if (opt.bos_id >= 0) in[0] = opt.bos_id;
    const std::vector<float> logits = forward_all(m, cache, c, std::move(in));
    for (int j = first; j < n_ctx - 1; ++j) {
      s.add(token_nll(logits.data() + static_cast<int64_t>(j) * vocab, vocab,
                      tokens[start + static_cast<size_t>(j) + 1]));
    }
    r.chunk_ppl.push_back(std::exp(s.mean()));
    if (progress) progress(c + 1, chunks, r.chunk_ppl.back());
  }
  r.convention = "llama.cpp";
  r.n_ctx = n_ctx;
  r.chunks = chunks;
  r.scored_tokens = s.count;
  r.total_nll = s.nll;
  r.mean_nll = s.mean();
  r.ppl = std::exp(r.mean_nll);
  r.ppl_stderr = s.ppl_stderr(r.ppl);
  r.tokens_processed = static_cast<int64_t>(chunks) * n_ctx;
  r.seconds = seconds_since(t0);
  return r;
}

// lm-eval (lm_eval/utils.py, models/huggingface.py), with context_len = 1, L = max_length:
//   pred_len = L - context_len + 1 = L
//   first window: ([prefix] + toks[:first - 1], toks[:first]), first = min(L, n)
//   then, while predicted < n: wpl = min(n - predicted, L), end = predicted + wpl,
//     (toks[end - L - 1 : end - 1], toks[end - wpl : end])
//   make_disjoint_window(a, b) = (a[:len(a) - (len(b) - 1)], b)
//   _loglikelihood_tokens: inp = (context + continuation)[-(L + 1):][:-1], and the last
//     len(continuation) logits score the continuation.
// So the first call reads [prefix] + toks[:first - 1] and scores toks[:first]; a later call
// reads toks[end - L - 1 : end - 1] (L tokens) and scores its last wpl positions' successors
// toks[end - wpl : end]. A full later window thus conditions its first prediction on one
// token only; the last, partial window reads the L tokens before the document's end.
std::vector<RollingWindow> lmeval_rolling_windows(int64_t n_tokens, int max_length) {
  std::vector<RollingWindow> w;
  if (n_tokens <= 0 || max_length < 1) return w;
  const int64_t len = max_length;
  const int64_t first = std::min(len, n_tokens);
  w.push_back({-1, static_cast<int>(first), 0, static_cast<int>(first)});
  int64_t predicted = first;
  while (predicted < n_tokens) {
    const int64_t wpl = std::min(n_tokens - predicted, len);
    const int64_t end = predicted + wpl;
    w.push_back({end - len - 1, static_cast<int>(len), end - wpl, static_cast<int>(wpl)});
    predicted += wpl;
  }
  return w;
}

int64_t lmeval_count_words(std::string_view text) {
  int64_t words = 1;
  bool in_space = false;
  for (size_t i = 0; i < text.size();) {
    const bool space = is_py_space(next_code_point(text, i));
    if (space && !in_space) ++words;
    in_space = space;
  }
  return words;
}

PerplexityResult perplexity_lmeval(const model::Model& m, const std::vector<int32_t>& tokens,
                                   const PerplexityOptions& opt,
                                   const PerplexityProgress& progress) {
  const int len = opt.n_ctx;
  check_ctx(m, len);
  if (opt.bos_id < 0) {
    throw make_error("perplexity", "the lm-eval convention needs a prefix token (BOS or EOS)",
                     "use a tokenizer that defines BOS or EOS");
  }
  if (tokens.empty()) {
    throw make_error("perplexity", "the text has no tokens", "use a non-empty file");
  }
  const auto t0 = Clock::now();
  const int64_t vocab = m.config().vocab_size;
  const std::vector<RollingWindow> windows =
      lmeval_rolling_windows(static_cast<int64_t>(tokens.size()), len);
  kv::KvCache cache = make_cache(m, len, opt.block_size);
  NllSum s;
  PerplexityResult r;
  const int n_windows = static_cast<int>(windows.size());
  for (int k = 0; k < n_windows; ++k) {
    const RollingWindow& w = windows[static_cast<size_t>(k)];
    std::vector<int32_t> in;
    in.reserve(static_cast<size_t>(w.input_len));
    for (int64_t p = w.input_begin; p < w.input_begin + w.input_len; ++p) {
      in.push_back(p < 0 ? opt.bos_id : tokens[static_cast<size_t>(p)]);
    }
    const std::vector<float> logits = forward_all(m, cache, k, std::move(in));
    const int row0 = w.input_len - w.pred_len;
    for (int j = 0; j < w.pred_len; ++j) {
      s.add(token_nll(logits.data() + static_cast<int64_t>(row0 + j) * vocab, vocab,
                      tokens[static_cast<size_t>(w.pred_begin + j)]));
    }
    r.tokens_processed += w.input_len;
    r.chunk_ppl.push_back(std::exp(s.mean()));
    if (progress) progress(k + 1, n_windows, r.chunk_ppl.back());
  }
  r.convention = "lm-eval";
  r.n_ctx = len;
  r.chunks = n_windows;
  r.scored_tokens = s.count;
  r.total_nll = s.nll;
  r.mean_nll = s.mean();
  r.ppl = std::exp(r.mean_nll);
  r.ppl_stderr = s.ppl_stderr(r.ppl);
  r.words = opt.text_words;
  r.bytes = opt.text_bytes;
  // lm-eval: weighted_perplexity = exp(-sum(ll) / sum(words)); bits_per_byte =
  // -sum(ll) / sum(bytes) / ln 2; byte_perplexity = exp(-sum(ll) / sum(bytes)).
  if (r.words > 0) r.word_ppl = std::exp(s.nll / static_cast<double>(r.words));
  if (r.bytes > 0) {
    r.byte_ppl = std::exp(s.nll / static_cast<double>(r.bytes));
    r.bits_per_byte = s.nll / static_cast<double>(r.bytes) / std::log(2.0);
  }
  r.seconds = seconds_since(t0);
  return r;
}

// GPTQ (datautils.py + llama.py llama_eval), seqlen = n_ctx:
//   nsamples = testenc.numel() // seqlen
//   for i: logits of testenc[:, i*seqlen:(i+1)*seqlen]; shift_logits = logits[:, :-1];
//     shift_labels = window[:, 1:]; loss = CrossEntropyLoss (mean over seqlen - 1 tokens)
//     nlls.append(loss * seqlen)
//   ppl = exp(sum(nlls) / (nsamples * seqlen))
// i.e. exp of the mean over windows of each window's mean NLL.
PerplexityResult perplexity_gptq(const model::Model& m, const std::vector<int32_t>& tokens,
                                 const PerplexityOptions& opt, const PerplexityProgress& progress) {
  const int seqlen = opt.n_ctx;
  check_ctx(m, seqlen);
  const int nsamples = full_windows(tokens.size(), seqlen, opt.max_chunks, "window");
  const auto t0 = Clock::now();
  const int64_t vocab = m.config().vocab_size;
  kv::KvCache cache = make_cache(m, seqlen, opt.block_size);
  NllSum s;
  double nlls = 0.0;  // sum over windows of loss * seqlen
  PerplexityResult r;
  for (int i = 0; i < nsamples; ++i) {
    const size_t start = static_cast<size_t>(i) * static_cast<size_t>(seqlen);
    std::vector<int32_t> in(
        tokens.begin() + static_cast<std::ptrdiff_t>(start),
        tokens.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(seqlen)));
    const std::vector<float> logits = forward_all(m, cache, i, std::move(in));
    double window = 0.0;
    for (int j = 0; j < seqlen - 1; ++j) {
      const double v = token_nll(logits.data() + static_cast<int64_t>(j) * vocab, vocab,
                                 tokens[start + static_cast<size_t>(j) + 1]);
      window += v;
      s.add(v);
    }
    const double loss = window / static_cast<double>(seqlen - 1);
    nlls += loss * static_cast<double>(seqlen);
    r.chunk_ppl.push_back(std::exp(nlls / (static_cast<double>(i + 1) * seqlen)));
    if (progress) progress(i + 1, nsamples, r.chunk_ppl.back());
  }
  r.convention = "gptq";
  r.n_ctx = seqlen;
  r.chunks = nsamples;
  r.scored_tokens = s.count;
  r.total_nll = s.nll;
  r.mean_nll = nlls / (static_cast<double>(nsamples) * seqlen);
  r.ppl = std::exp(r.mean_nll);
  r.ppl_stderr = s.ppl_stderr(std::exp(s.mean()));
  r.tokens_processed = static_cast<int64_t>(nsamples) * seqlen;
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace cb::eval
