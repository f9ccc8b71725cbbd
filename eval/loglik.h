#pragma once
/// Log-likelihood of continuations given a context, as lm-evaluation-harness computes it
/// for `loglikelihood` requests (multiple-choice tasks such as MMLU and PIQA):
///  - tokenization (`_encode_pair`): trailing spaces of the context move to the
///    continuation; whole = encode(context + continuation), context_enc = encode(context),
///    continuation_enc = whole[len(context_enc):]. Encoding the pair whole matters for
///    SentencePiece, where a leading space is part of the next token ("▁A").
///  - scoring (`_loglikelihood_tokens`): the model reads
///    (context_enc + continuation_enc)[-(max_length + 1):][:-1] (left truncation when too long)
///    and the last len(continuation_enc) logit rows score the continuation: the sum of
///    log-softmax values, and whether every continuation token is the argmax (is_greedy).
/// Two scorers share the ContextScorer interface: LoglikScorer (the plain lm-eval setup,
/// reusing the KV of the longest token prefix shared with the previous context) and
/// OverflowScorer (the CachedAttention overflow study: a long history overflows a window
/// under TT/CA/NKVT first, then the prompt is appended to a copy of that stream).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eval/overflow.h"
#include "lib/kv/kv_cache.h"
#include "lib/model/model.h"
#include "lib/tokenizer/tokenizer.h"

namespace cb::eval {

/// One continuation's score.
struct LoglikResult {
  double logprob = 0.0;    ///< sum of log P(token) over the continuation tokens (nats, <= 0)
  bool is_greedy = false;  ///< every continuation token is the argmax of its logits row
  int n_tokens = 0;        ///< continuation tokens
  bool truncated = false;  ///< the input was cut from the left to fit the window
};

/// Context and continuation tokens as lm-eval's `_encode_pair` produces them.
struct EncodedPair {
  std::vector<int32_t> context;
  std::vector<int32_t> continuation;
};

/// lm-eval's `_encode_pair` (see the file comment); `add_bos` prepends BOS to both encodings
/// (so the split stays aligned). Throws cb::Error when the continuation encodes to no token.
EncodedPair encode_pair(const tokenizer::Tokenizer& tok, const std::string& context,
                        const std::string& continuation, bool add_bos);

/// Sum of log-softmax values of `targets` over consecutive logits rows [targets.size(), vocab],
/// and whether each target is its row's argmax (ties: the lowest id wins, as torch.argmax).
LoglikResult score_rows(const float* logits, int64_t vocab, const std::vector<int32_t>& targets);

/// Work counters of a scorer, for reports.
struct ScorerStats {
  int64_t requests = 0;          ///< continuations scored
  int64_t truncated = 0;         ///< continuations whose input was cut from the left
  int64_t tokens_processed = 0;  ///< tokens run through the model
  int64_t tokens_reused = 0;     ///< context tokens whose KV was reused instead of recomputed
  int64_t overflows = 0;         ///< OverflowScorer: window truncations after the history
};

/// Scores the continuations of `prefix + rest`. `prefix` is a hint only: consecutive calls
/// that share it (e.g. MMLU's description and few-shot examples) may reuse its work.
class ContextScorer {
 public:
  virtual ~ContextScorer() = default;
  /// One result per continuation, in order.
  virtual std::vector<LoglikResult> score(const std::string& prefix, const std::string& rest,
                                          const std::vector<std::string>& continuations) = 0;
  /// Counters accumulated since construction.
  virtual ScorerStats stats() const = 0;
  /// Short name for tables ("lm-eval", "TT", "CA", "NKVT").
  virtual std::string name() const = 0;
};

/// Options of the plain scorer.
struct LoglikOptions {
  bool add_bos = true;  ///< prepend BOS to every context (lm-eval HF: add_bos_token)
  int max_length = 0;   ///< model input window (0: the model's context window)
  int block_size = 16;  ///< KV cache block size
};

/// lm-eval's loglikelihood with KV reuse: the previous context stays cached and a new
/// context forks the longest common token prefix; continuations of one context are
/// scored in one batched forward call over forks of the context's sequence.
class LoglikScorer : public ContextScorer {
 public:
  /// Throws cb::Error when max_length exceeds the model's window or is below 2.
  /// `m` runs on either backend (forward, kv_config and the cache's forks are all it needs).
  LoglikScorer(const model::ForwardModel& m, const tokenizer::Tokenizer& tok,
               const LoglikOptions& opt);

  std::vector<LoglikResult> score(const std::string& prefix, const std::string& rest,
                                  const std::vector<std::string>& continuations) override;
  ScorerStats stats() const override { return stats_; }
  std::string name() const override { return "lm-eval"; }

  /// Scores token-level requests sharing one context (tokens as encode_pair gives them).
  /// Throws cb::Error for an empty context or continuation, or a continuation longer than
  /// max_length.
  std::vector<LoglikResult> score_tokens(const std::vector<int32_t>& context,
                                         const std::vector<std::vector<int32_t>>& continuations);

  /// The input window (tokens).
  int max_length() const { return max_length_; }

 private:
  /// Makes the cached sequence hold exactly `ctx`, reusing the longest shared prefix.
  void set_context(const std::vector<int32_t>& ctx);
  /// Scores continuations (all fitting the window) of the cached context in one batch.
  void score_group(const std::vector<const std::vector<int32_t>*>& conts,
                   std::vector<LoglikResult*>& out);
  void ensure_pool(int64_t blocks);

  const model::ForwardModel* m_;
  const tokenizer::Tokenizer* tok_;
  LoglikOptions opt_;
  int max_length_ = 0;
  std::unique_ptr<kv::KvCache> cache_;
  kv::SeqId ctx_seq_ = 0, next_seq_ = 1;
  bool has_ctx_ = false;
  std::vector<int32_t> ctx_tokens_;  // tokens in ctx_seq_
  std::vector<float> ctx_last_;      // logits of the last context token
  ScorerStats stats_;
};

/// Options of the overflow scorer: the stream's window and truncation (see overflow.h).
struct OverflowScorerOptions {
  OverflowOptions stream;  ///< n_ctx, truncate_ratio, sink, block_size
  int64_t feed_chunk = 0;  ///< history tokens per feed() call (0: n_ctx), bounds logits memory
};

/// The CachedAttention study for multiple-choice tasks: `history` (already tokenized, BOS
/// first) streams through the window under `method` once; every score() call appends
/// prefix + rest (encoded without BOS, as encode_pair with add_bos false) to a copy of the
/// post-history stream, then each multi-token continuation to a further copy. A prompt
/// longer than the window overflows it too. The post-prefix stream is cached and reused
/// while the prefix text repeats and its tokens prefix those of prefix + rest.
class OverflowScorer : public ContextScorer {
 public:
  /// Feeds the history; throws cb::Error for invalid options or an empty history.
  OverflowScorer(const model::ForwardModel& m, const tokenizer::Tokenizer& tok,
                 OverflowMethod method, const std::vector<int32_t>& history,
                 const OverflowScorerOptions& opt);

  std::vector<LoglikResult> score(const std::string& prefix, const std::string& rest,
                                  const std::vector<std::string>& continuations) override;
  ScorerStats stats() const override;
  std::string name() const override { return overflow_method_name(method_); }

  /// The stream right after the history (window length, overflows so far).
  const OverflowStream& history_stream() const { return history_; }

 private:
  const model::ForwardModel* m_;
  const tokenizer::Tokenizer* tok_;
  OverflowMethod method_;
  OverflowStream history_;
  std::string prefix_text_;
  std::vector<int32_t> prefix_tokens_;
  std::unique_ptr<OverflowStream> prefix_stream_;  // history_ + prefix_tokens_
  ScorerStats stats_;
};

}  // namespace cb::eval
