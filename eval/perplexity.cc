#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "datasets/corpus.h"
#include "lib/core/error.h"
#include "lib/core/format.h"

namespace cb::eval {
namespace {

using Clock = std::chrono::steady_clock;

void check_ctx(const model::ForwardModel& m, int n_ctx) {
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

/// Runs `n` windows through the model, opt.batch of them per Model::forward call, each as a
/// fresh sequence of one paged KV cache sized for opt.batch windows of up to max_len tokens,
/// with the logits of every position. Window k's tokens are input(k); consume(k, logits
/// [input(k).size(), vocab]) is called in window order. Returns the forward calls made.
int64_t run_windows(const model::ForwardModel& m, int n, int max_len, const PerplexityOptions& opt,
                    const std::function<std::vector<int32_t>(int)>& input,
                    const std::function<void(int, const float*)>& consume) {
  const int batch = std::min(opt.batch, std::max(n, 1));
  if (opt.block_size < 1) throw make_error("block_size", "must be positive");
  const int64_t blocks =
      (static_cast<int64_t>(max_len) + opt.block_size - 1) / opt.block_size * batch;
  kv::KvCache cache(m.kv_config(blocks, opt.block_size));
  const int64_t vocab = m.config().vocab_size;
  int64_t calls = 0;
  std::vector<model::SeqInput> in;
  for (int k0 = 0; k0 < n; k0 += batch) {
    const int k1 = std::min(n, k0 + batch);
    in.clear();
    for (int k = k0; k < k1; ++k) {
      model::SeqInput s;
      s.seq = k;
      s.all_logits = true;
      s.tokens = input(k);
      cache.add_sequence(k);
      if (!cache.reserve(k, static_cast<int64_t>(s.tokens.size()))) {
        throw Error("internal: perplexity KV cache too small");
      }
      in.push_back(std::move(s));
    }
    const std::vector<float> logits = m.forward(in, cache);
    ++calls;
    int64_t row = 0;
    for (int k = k0; k < k1; ++k) {
      consume(k, logits.data() + row * vocab);
      row += static_cast<int64_t>(in[static_cast<size_t>(k - k0)].tokens.size());
      cache.free_sequence(k);
    }
  }
  return calls;
}

void check_batch(const PerplexityOptions& opt) {
  if (opt.batch < 1) {
    throw make_error("--batch", "must be at least 1, got " + std::to_string(opt.batch));
  }
  if (opt.block_size < 1) throw make_error("block_size", "must be positive");
}

// Full windows of n_ctx tokens in the stream, capped by --chunks; an error when there is none.
int full_windows(size_t n_tokens, int n_ctx, int max_chunks, const char* unit) {
  int n = static_cast<int>(n_tokens / static_cast<size_t>(n_ctx));
  if (n == 0) {
    // Named by --ctx, as the llama.cpp convention's two-window refusal is: a usage error.
    throw make_error("--ctx",
                     std::to_string(n_ctx) + " tokens make one " + unit + ", and the text has " +
                         count_of(static_cast<long long>(n_tokens), "token"),
                     n_tokens >= 4
                         ? "use --ctx " + std::to_string(n_tokens) + " or less, or a longer file"
                         : std::string("use a longer file: even the smallest --ctx, 4, "
                                       "needs 4 tokens"));
  }
  return max_chunks > 0 && max_chunks < n ? max_chunks : n;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

double token_nll(const float* logits, int64_t vocab, int32_t target) {
  double mx = logits[0];
  for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double nll = std::log(sum) + mx - static_cast<double>(logits[target]);
  if (!std::isfinite(nll)) {
    throw make_error("model",
                     "its logits are not finite (NaN or infinity), so no score can be taken",
                     "the weights hold NaN or infinite values, or the activations overflowed; "
                     "check the model file, or run it on the other --backend");
  }
  return nll;
}

PerplexityResult perplexity_llamacpp(const model::ForwardModel& m,
                                     const std::vector<int32_t>& tokens,
                                     const PerplexityOptions& opt,
                                     const PerplexityProgress& progress) {
  const int n_ctx = opt.n_ctx;
  check_ctx(m, n_ctx);
  check_batch(opt);
  // llama.cpp's perplexity refuses a text of fewer than 2 * n_ctx tokens: its numbers are
  // never of a single chunk.
  if (tokens.size() < 2 * static_cast<size_t>(n_ctx)) {
    throw make_error("--ctx",
                     "the llama.cpp convention needs at least 2 x " + std::to_string(n_ctx) +
                         " tokens, as llama.cpp's perplexity does; the text has " +
                         std::to_string(tokens.size()),
                     tokens.size() >= 8 ? "use --ctx " + std::to_string(tokens.size() / 2) +
                                              " or less, or a longer file"
                                        : std::string("use a longer file: even the smallest "
                                                      "--ctx, 4, needs 8 tokens"));
  }
  const int chunks = full_windows(tokens.size(), n_ctx, opt.max_chunks, "chunk");

  const auto t0 = Clock::now();
  const int64_t vocab = m.config().vocab_size;
  const int first = n_ctx / 2;
  NllSum s;
  PerplexityResult r;
  const auto start_of = [n_ctx](int c) {
    return static_cast<size_t>(c) * static_cast<size_t>(n_ctx);
  };
  r.forward_calls = run_windows(
      m, chunks, n_ctx, opt,
      [&](int c) {
        const auto b = tokens.begin() + static_cast<std::ptrdiff_t>(start_of(c));
        std::vector<int32_t> in(b, b + n_ctx);
        if (opt.bos_id >= 0) in[0] = opt.bos_id;
        return in;
      },
      [&](int c, const float* logits) {
        for (int j = first; j < n_ctx - 1; ++j) {
          const double v = token_nll(logits + static_cast<int64_t>(j) * vocab, vocab,
                                     tokens[start_of(c) + static_cast<size_t>(j) + 1]);
          s.add(v);
          if (opt.keep_nll) r.token_nll.push_back(v);
        }
        r.chunk_ppl.push_back(std::exp(s.mean()));
        if (progress) progress(c + 1, chunks, r.chunk_ppl.back());
      });
  r.convention = "llama.cpp";
  r.n_ctx = n_ctx;
  r.chunks = chunks;
  r.batch = opt.batch;
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
    const bool space = datasets::py_isspace(datasets::next_code_point(text, i));
    if (space && !in_space) ++words;
    in_space = space;
  }
  return words;
}

PerplexityResult perplexity_lmeval(const model::ForwardModel& m, const std::vector<int32_t>& tokens,
                                   const PerplexityOptions& opt,
                                   const PerplexityProgress& progress) {
  return perplexity_lmeval_documents(m, {{tokens, opt.text_words, opt.text_bytes}}, opt, progress);
}

PerplexityResult perplexity_lmeval_documents(const model::ForwardModel& m,
                                             const std::vector<LmEvalDocument>& docs,
                                             const PerplexityOptions& opt,
                                             const PerplexityProgress& progress) {
  const int len = opt.n_ctx;
  check_ctx(m, len);
  check_batch(opt);
  if (opt.bos_id < 0) {
    throw make_error("perplexity", "the lm-eval convention needs a prefix token (BOS or EOS)",
                     "use a tokenizer that defines BOS or EOS");
  }
  // Every document's rolling windows, in document order; windows never cross documents.
  struct DocWindow {
    size_t doc;
    RollingWindow w;
  };
  std::vector<DocWindow> windows;
  PerplexityResult r;
  for (size_t d = 0; d < docs.size(); ++d) {
    for (const RollingWindow& w :
         lmeval_rolling_windows(static_cast<int64_t>(docs[d].tokens.size()), len)) {
      windows.push_back({d, w});
    }
    r.words += docs[d].words;
    r.bytes += docs[d].bytes;
  }
  if (windows.empty()) {
    throw make_error("perplexity", "the text has no tokens", "use a non-empty file");
  }
  const auto t0 = Clock::now();
  const int64_t vocab = m.config().vocab_size;
  NllSum s;
  r.document_nll.assign(docs.size(), 0.0);
  const int n_windows = static_cast<int>(windows.size());
  r.forward_calls = run_windows(
      m, n_windows, len, opt,
      [&](int k) {
        const DocWindow& dw = windows[static_cast<size_t>(k)];
        const std::vector<int32_t>& toks = docs[dw.doc].tokens;
        std::vector<int32_t> in;
        in.reserve(static_cast<size_t>(dw.w.input_len));
        for (int64_t p = dw.w.input_begin; p < dw.w.input_begin + dw.w.input_len; ++p) {
          in.push_back(p < 0 ? opt.bos_id : toks[static_cast<size_t>(p)]);
        }
        return in;
      },
      [&](int k, const float* logits) {
        const DocWindow& dw = windows[static_cast<size_t>(k)];
        const std::vector<int32_t>& toks = docs[dw.doc].tokens;
        const int row0 = dw.w.input_len - dw.w.pred_len;
        for (int j = 0; j < dw.w.pred_len; ++j) {
          const double v = token_nll(logits + static_cast<int64_t>(row0 + j) * vocab, vocab,
                                     toks[static_cast<size_t>(dw.w.pred_begin + j)]);
          s.add(v);
          r.document_nll[dw.doc] += v;
          if (opt.keep_nll) r.token_nll.push_back(v);
        }
        r.tokens_processed += dw.w.input_len;
        r.chunk_ppl.push_back(std::exp(s.mean()));
        if (progress) progress(k + 1, n_windows, r.chunk_ppl.back());
      });
  r.convention = "lm-eval";
  r.n_ctx = len;
  r.chunks = n_windows;
  r.documents = static_cast<int>(docs.size());
  r.batch = opt.batch;
  r.scored_tokens = s.count;
  r.total_nll = s.nll;
  r.mean_nll = s.mean();
  r.ppl = std::exp(r.mean_nll);
  r.ppl_stderr = s.ppl_stderr(r.ppl);
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
PerplexityResult perplexity_gptq(const model::ForwardModel& m, const std::vector<int32_t>& tokens,
                                 const PerplexityOptions& opt, const PerplexityProgress& progress) {
  const int seqlen = opt.n_ctx;
  check_ctx(m, seqlen);
  check_batch(opt);
  const int nsamples = full_windows(tokens.size(), seqlen, opt.max_chunks, "window");
  const auto t0 = Clock::now();
  const int64_t vocab = m.config().vocab_size;
  NllSum s;
  double nlls = 0.0;  // sum over windows of loss * seqlen
  PerplexityResult r;
  const auto start_of = [seqlen](int i) {
    return static_cast<size_t>(i) * static_cast<size_t>(seqlen);
  };
  r.forward_calls = run_windows(
      m, nsamples, seqlen, opt,
      [&](int i) {
        const auto b = tokens.begin() + static_cast<std::ptrdiff_t>(start_of(i));
        return std::vector<int32_t>(b, b + seqlen);
      },
      [&](int i, const float* logits) {
        double window = 0.0;
        for (int j = 0; j < seqlen - 1; ++j) {
          const double v = token_nll(logits + static_cast<int64_t>(j) * vocab, vocab,
                                     tokens[start_of(i) + static_cast<size_t>(j) + 1]);
          window += v;
          s.add(v);
          if (opt.keep_nll) r.token_nll.push_back(v);
        }
        const double loss = window / static_cast<double>(seqlen - 1);
        nlls += loss * static_cast<double>(seqlen);
        r.chunk_ppl.push_back(std::exp(nlls / (static_cast<double>(i + 1) * seqlen)));
        if (progress) progress(i + 1, nsamples, r.chunk_ppl.back());
      });
  r.convention = "gptq";
  r.n_ctx = seqlen;
  r.chunks = nsamples;
  r.batch = opt.batch;
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
