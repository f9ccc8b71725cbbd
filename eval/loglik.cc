#include "eval/loglik.h"

#include <algorithm>
#include <cmath>

#include "eval/perplexity.h"
#include "lib/core/error.h"

namespace cb::eval {
namespace {

/// Python's str.isspace for ASCII (what rstrip() removes from ASCII text).
bool is_ascii_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

int64_t blocks_for(int64_t tokens, int block_size) {
  return (tokens + block_size - 1) / block_size;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

EncodedPair encode_pair(const tokenizer::Tokenizer& tok, const std::string& context,
                        const std::string& continuation, bool add_bos) {
  // lm-eval: n_spaces = len(context) - len(context.rstrip()); the spaces join the continuation.
  size_t keep = context.size();
  while (keep > 0 && is_ascii_space(context[keep - 1])) --keep;
  const std::string ctx = context.substr(0, keep);
  const std::string cont = context.substr(keep) + continuation;
  const std::vector<int32_t> whole = tok.encode(ctx + cont, add_bos);
  EncodedPair p;
  p.context = tok.encode(ctx, add_bos);
  if (whole.size() > p.context.size()) {
    p.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(p.context.size()),
                          whole.end());
  }
  if (p.continuation.empty()) {
    throw make_error("loglikelihood", "the continuation \"" + continuation + "\" of a context of " +
                                          std::to_string(p.context.size()) +
                                          " tokens encodes to no token");
  }
  return p;
}

LoglikResult score_rows(const float* logits, int64_t vocab, const std::vector<int32_t>& targets) {
  LoglikResult r;
  r.is_greedy = true;
  r.n_tokens = static_cast<int>(targets.size());
  for (size_t j = 0; j < targets.size(); ++j) {
    const float* row = logits + static_cast<int64_t>(j) * vocab;
    r.logprob -= token_nll(row, vocab, targets[j]);
    const int64_t best = std::max_element(row, row + vocab) - row;
    if (best != targets[j]) r.is_greedy = false;
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// LoglikScorer

LoglikScorer::LoglikScorer(const model::ForwardModel& m, const tokenizer::Tokenizer& tok,
                           const LoglikOptions& opt)
    : m_(&m), tok_(&tok), opt_(opt) {
  const int window = m.config().max_context;
  max_length_ = opt.max_length > 0 ? opt.max_length : window;
  if (max_length_ < 2 || max_length_ > window) {
    throw make_error("--ctx", std::to_string(max_length_) + " must be in 2.." +
                                  std::to_string(window) + " (the model's context window)");
  }
  if (opt.block_size < 1) throw make_error("block_size", "must be positive");
  if (opt.add_bos && tok.bos_id() < 0) {
    throw make_error("loglikelihood", "BOS requested but the tokenizer has none");
  }
}

void LoglikScorer::ensure_pool(int64_t blocks) {
  if (cache_ && cache_->config().num_blocks >= blocks) return;
  const int64_t have = cache_ ? cache_->config().num_blocks : 0;
  cache_ =
      std::make_unique<kv::KvCache>(m_->kv_config(std::max(blocks, have * 3 / 2), opt_.block_size));
  has_ctx_ = false;
  ctx_tokens_.clear();
}

void LoglikScorer::set_context(const std::vector<int32_t>& ctx) {
  if (has_ctx_ && ctx == ctx_tokens_) {
    stats_.tokens_reused += static_cast<int64_t>(ctx.size());
    return;
  }
  const size_t lcp = has_ctx_ ? common_prefix(ctx, ctx_tokens_) : 0;
  const size_t reuse = std::min(lcp, ctx.size() - 1);  // the last token runs for its logits
  const kv::SeqId seq = next_seq_++;
  if (reuse > 0) {
    if (!cache_->fork(ctx_seq_, seq, static_cast<int64_t>(reuse))) {
      throw Error("internal: loglikelihood KV pool too small");
    }
  } else {
    cache_->add_sequence(seq);
  }
  if (has_ctx_) cache_->free_sequence(ctx_seq_);
  ctx_seq_ = seq;
  has_ctx_ = false;
  if (!cache_->reserve(seq, static_cast<int64_t>(ctx.size()))) {
    throw Error("internal: loglikelihood KV pool too small");
  }
  model::SeqInput in;
  in.seq = seq;
  in.tokens.assign(ctx.begin() + static_cast<std::ptrdiff_t>(reuse), ctx.end());
  ctx_last_ = m_->forward({in}, *cache_);
  ctx_tokens_ = ctx;
  has_ctx_ = true;
  stats_.tokens_processed += static_cast<int64_t>(ctx.size() - reuse);
  stats_.tokens_reused += static_cast<int64_t>(reuse);
}

void LoglikScorer::score_group(const std::vector<const std::vector<int32_t>*>& conts,
                               std::vector<LoglikResult*>& out) {
  const int64_t V = m_->config().vocab_size;
  const int64_t n_ctx = static_cast<int64_t>(ctx_tokens_.size());
  std::vector<model::SeqInput> batch;
  std::vector<kv::SeqId> forks;
  for (const auto* c : conts) {
    if (c->size() < 2) continue;
    const kv::SeqId s = next_seq_++;
    if (!cache_->fork(ctx_seq_, s, n_ctx) ||
        !cache_->reserve(s, n_ctx + static_cast<int64_t>(c->size()) - 1)) {
      throw Error("internal: loglikelihood KV pool too small");
    }
    forks.push_back(s);
    model::SeqInput in;
    in.seq = s;
    in.all_logits = true;
    in.tokens.assign(c->begin(), c->end() - 1);
    stats_.tokens_processed += static_cast<int64_t>(in.tokens.size());
    batch.push_back(std::move(in));
  }
  std::vector<float> logits;
  if (!batch.empty()) logits = m_->forward(batch, *cache_);
  for (kv::SeqId s : forks) cache_->free_sequence(s);
  int64_t row = 0;  // next row of `logits`
  std::vector<float> rows;
  for (size_t i = 0; i < conts.size(); ++i) {
    const std::vector<int32_t>& c = *conts[i];
    rows.assign(ctx_last_.begin(), ctx_last_.end());
    const int64_t extra = static_cast<int64_t>(c.size()) - 1;
    rows.insert(rows.end(), logits.begin() + row * V, logits.begin() + (row + extra) * V);
    row += extra;
    const bool truncated = out[i]->truncated;
    *out[i] = score_rows(rows.data(), V, c);
    out[i]->truncated = truncated;
  }
}

std::vector<LoglikResult> LoglikScorer::score_tokens(
    const std::vector<int32_t>& context, const std::vector<std::vector<int32_t>>& continuations) {
  if (context.empty()) throw make_error("loglikelihood", "empty context");
  const int64_t L = max_length_;
  int64_t pool = 2 * (blocks_for(L, opt_.block_size) + 1);
  for (const auto& c : continuations) {
    if (c.empty()) throw make_error("loglikelihood", "empty continuation");
    if (static_cast<int64_t>(c.size()) > L) {
      throw make_error("--ctx",
                       "a continuation of " + std::to_string(c.size()) +
                           " tokens exceeds the window of " + std::to_string(L) + " tokens",
                       "pass --ctx " + std::to_string(c.size()) +
                           " or more (at most the model's context window)");
    }
    pool += blocks_for(static_cast<int64_t>(c.size()), opt_.block_size) + 2;
  }
  ensure_pool(pool);

  // Each continuation's effective context: lm-eval's (context + continuation)[-(L + 1):][:-1]
  // minus the continuation's first len - 1 tokens. Equal contexts are scored as one group.
  std::vector<LoglikResult> results(continuations.size());
  std::vector<std::vector<int32_t>> contexts;
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < continuations.size(); ++i) {
    const auto& c = continuations[i];
    std::vector<int32_t> eff = context;
    const int64_t total = static_cast<int64_t>(context.size() + c.size()) - 1;
    if (total > L) {
      const int64_t cut = total - L;  // tokens dropped from the left of the input
      eff.erase(eff.begin(), eff.begin() + cut);
      results[i].truncated = true;
      ++stats_.truncated;
    }
    size_t g = 0;
    while (g < contexts.size() && contexts[g] != eff) ++g;
    if (g == contexts.size()) {
      contexts.push_back(std::move(eff));
      members.emplace_back();
    }
    members[g].push_back(i);
  }
  for (size_t g = 0; g < contexts.size(); ++g) {
    set_context(contexts[g]);
    std::vector<const std::vector<int32_t>*> conts;
    std::vector<LoglikResult*> out;
    for (size_t i : members[g]) {
      conts.push_back(&continuations[i]);
      out.push_back(&results[i]);
    }
    score_group(conts, out);
  }
  stats_.requests += static_cast<int64_t>(continuations.size());
  return results;
}

std::vector<LoglikResult> LoglikScorer::score(const std::string& prefix, const std::string& rest,
                                              const std::vector<std::string>& continuations) {
  const std::string context = prefix + rest;
  std::vector<int32_t> ctx;
  std::vector<std::vector<int32_t>> conts;
  for (const auto& c : continuations) {
    EncodedPair p = encode_pair(*tok_, context, c, opt_.add_bos);
    ctx = std::move(p.context);  // identical for every continuation
    conts.push_back(std::move(p.continuation));
  }
  if (ctx.empty()) {
    // lm-eval: an empty context is replaced by the prefix token (BOS, else EOS).
    const int32_t pre = tok_->bos_id() >= 0 ? tok_->bos_id() : tok_->eos_id();
    if (pre < 0) throw make_error("loglikelihood", "empty context and no BOS/EOS token");
    ctx.push_back(pre);
  }
  return score_tokens(ctx, conts);
}

// ---------------------------------------------------------------------------------------------
// OverflowScorer

OverflowScorer::OverflowScorer(const model::ForwardModel& m, const tokenizer::Tokenizer& tok,
                               OverflowMethod method, const std::vector<int32_t>& history,
                               const OverflowScorerOptions& opt)
    : m_(&m), tok_(&tok), method_(method), history_(m, method, opt.stream) {
  if (history.empty()) {
    throw make_error("mmlu", "the history file gave no tokens (--history-file)",
                     "pass a file with text");
  }
  const size_t chunk = static_cast<size_t>(opt.feed_chunk > 0 ? opt.feed_chunk : opt.stream.n_ctx);
  for (size_t pos = 0; pos < history.size(); pos += chunk) {
    const size_t end = std::min(history.size(), pos + chunk);
    history_.feed(std::vector<int32_t>(history.begin() + static_cast<std::ptrdiff_t>(pos),
                                       history.begin() + static_cast<std::ptrdiff_t>(end)));
  }
}

ScorerStats OverflowScorer::stats() const {
  return stats_;
}

std::vector<LoglikResult> OverflowScorer::score(const std::string& prefix, const std::string& rest,
                                                const std::vector<std::string>& continuations) {
  const int64_t V = m_->config().vocab_size;
  const std::string context = prefix + rest;
  std::vector<int32_t> ctx;
  std::vector<std::vector<int32_t>> conts;
  for (const auto& c : continuations) {
    EncodedPair p = encode_pair(*tok_, context, c, false);
    ctx = std::move(p.context);
    conts.push_back(std::move(p.continuation));
  }
  if (ctx.empty()) throw make_error("loglikelihood", "empty context after the history");

  // The prompt stream: history (+ cached prefix) + the rest of the context tokens.
  const OverflowStream* base = &history_;
  size_t start = 0;
  if (!prefix.empty()) {
    if (prefix != prefix_text_) {
      prefix_text_ = prefix;
      prefix_tokens_ = tok_->encode(prefix, false);
      prefix_stream_.reset();
    }
    const bool usable = !prefix_tokens_.empty() && prefix_tokens_.size() < ctx.size() &&
                        std::equal(prefix_tokens_.begin(), prefix_tokens_.end(), ctx.begin());
    if (usable) {
      if (!prefix_stream_) {
        prefix_stream_ = std::make_unique<OverflowStream>(history_);
        prefix_stream_->feed(prefix_tokens_);
        stats_.tokens_processed += prefix_stream_->tokens_processed() - history_.tokens_processed();
        stats_.overflows += prefix_stream_->overflows() - history_.overflows();
      } else {
        stats_.tokens_reused += static_cast<int64_t>(prefix_tokens_.size());
      }
      base = prefix_stream_.get();
      start = prefix_tokens_.size();
    }
  }
  OverflowStream q(*base);
  const std::vector<float> lg =
      q.feed(std::vector<int32_t>(ctx.begin() + static_cast<std::ptrdiff_t>(start), ctx.end()));
  const std::vector<float> last(lg.end() - V, lg.end());
  stats_.tokens_processed += q.tokens_processed() - base->tokens_processed();
  const int64_t prompt_overflows = q.overflows() - history_.overflows();
  stats_.overflows += q.overflows() - base->overflows();

  std::vector<LoglikResult> results;
  std::vector<float> rows;
  for (const auto& c : conts) {
    rows = last;
    int64_t overflows = prompt_overflows;
    if (c.size() > 1) {
      OverflowStream s(q);
      const std::vector<float> more = s.feed(std::vector<int32_t>(c.begin(), c.end() - 1));
      rows.insert(rows.end(), more.begin(), more.end());
      stats_.tokens_processed += s.tokens_processed() - q.tokens_processed();
      overflows += s.overflows() - q.overflows();
    }
    LoglikResult r = score_rows(rows.data(), V, c);
    r.truncated = overflows > 0;
    if (r.truncated) ++stats_.truncated;
    stats_.overflows += overflows - prompt_overflows;
    results.push_back(r);
  }
  stats_.requests += static_cast<int64_t>(conts.size());
  return results;
}

}  // namespace cb::eval
