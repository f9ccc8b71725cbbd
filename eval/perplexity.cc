#include "eval/perplexity.h"

#include <chrono>
#include <cmath>

#include "lib/core/error.h"

namespace cb::eval {

double token_nll(const float* logits, int64_t vocab, int32_t target) {
  double mx = logits[0];
  for (int64_t i = 1; i < vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return std::log(sum) + mx - static_cast<double>(logits[target]);
}

PerplexityResult perplexity_llamacpp(const model::Model& m, const std::vector<int32_t>& tokens,
                                     const PerplexityOptions& opt,
                                     const std::function<void(int, int, double)>& progress) {
  const int n_ctx = opt.n_ctx;
  if (n_ctx < 4) throw make_error("--ctx", "must be at least 4, got " + std::to_string(n_ctx));
  if (n_ctx > m.config().max_context) {
    throw make_error("--ctx",
                     std::to_string(n_ctx) + " exceeds the model's context window of " +
                         std::to_string(m.config().max_context),
                     "pass a smaller --ctx");
  }
  int chunks = static_cast<int>(tokens.size() / static_cast<size_t>(n_ctx));
  if (chunks == 0) {
    throw make_error("perplexity",
                     "the text has " + std::to_string(tokens.size()) +
                         " tokens, fewer than one chunk of --ctx " + std::to_string(n_ctx),
                     "use a longer file or a smaller --ctx");
  }
  if (opt.max_chunks > 0 && opt.max_chunks < chunks) chunks = opt.max_chunks;

  const auto t0 = std::chrono::steady_clock::now();
  const int64_t vocab = m.config().vocab_size;
  const int first = n_ctx / 2;
  const int blocks = (n_ctx + opt.block_size - 1) / opt.block_size;
  kv::KvCache cache(m.kv_config(blocks, opt.block_size));
  double nll = 0.0, nll2 = 0.0;
  int64_t count = 0;
  PerplexityResult r;
  for (int c = 0; c < chunks; ++c) {
    const size_t start = static_cast<size_t>(c) * static_cast<size_t>(n_ctx);
    model::SeqInput in;
    in.seq = c;
    in.all_logits = true;
    in.tokens.assign(
        tokens.begin() + static_cast<std::ptrdiff_t>(start),
        tokens.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(n_ctx)));
    if (opt.bos_id >= 0) in.tokens[0] = opt.bos_id;
    cache.add_sequence(in.seq);
    if (!cache.reserve(in.seq, n_ctx)) throw Error("internal: perplexity KV cache too small");
    const std::vector<float> logits = m.forward({in}, cache);
    cache.free_sequence(in.seq);
    for (int j = first; j < n_ctx - 1; ++j) {
      const double v = token_nll(logits.data() + static_cast<int64_t>(j) * vocab, vocab,
                                 tokens[start + static_cast<size_t>(j) + 1]);
      nll += v;
      nll2 += v * v;
      ++count;
    }
    r.chunk_ppl.push_back(std::exp(nll / static_cast<double>(count)));
    if (progress) progress(c + 1, chunks, r.chunk_ppl.back());
  }
  r.n_ctx = n_ctx;
  r.chunks = chunks;
  r.scored_tokens = count;
  r.mean_nll = nll / static_cast<double>(count);
  r.ppl = std::exp(r.mean_nll);
  double var = nll2 / static_cast<double>(count) - r.mean_nll * r.mean_nll;
  r.ppl_stderr =
      (var > 0 && count > 1) ? r.ppl * std::sqrt(var / static_cast<double>(count - 1)) : 0.0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace cb::eval
