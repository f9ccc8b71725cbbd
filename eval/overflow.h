#pragma once
/// The context-overflow study of CachedAttention (paper Table 1): a token stream flows
/// through a window of n_ctx tokens; whenever the window is full the oldest
/// truncate_ratio * n_ctx tokens (after `sink` kept first tokens) are dropped, and the
/// methods differ in what they do with the kept tokens' KV:
///  - TT   (token truncation): recompute the kept tokens' KV at positions 0.. (prefill again);
///  - CA   (CachedAttention): keep the stored pre-RoPE K and V, re-embed positions from 0;
///  - NKVT (naive KV truncation): keep the post-RoPE keys as they are in slots 0.. (their old
///         rotations baked in) and continue with positions restarting after them.
/// Every prediction made after the first overflow is scored.
///
/// Batching: the methods see the same tokens and truncate at the same moments, so an
/// OverflowGroup advances them in lockstep over one paged KV cache and, per step, runs all
/// their new tokens through one Model::forward call (one sequence per method). TT's recompute
/// joins that call too: after a truncation TT's sequence restarts empty and its next input is
/// the kept tokens followed by the new ones (one causal prefill computes exactly what a
/// recompute then a prefill would; the kept tokens' logits are discarded). CA's and NKVT's
/// truncations copy stored KV into the new sequence (no GEMM), so they stay outside the call.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/model/model.h"

namespace cb::eval {

enum class OverflowMethod : uint8_t { TT, CA, NKVT };
const char* overflow_method_name(OverflowMethod m);

struct OverflowOptions {
  int n_ctx = 256;
  double truncate_ratio = 0.5;
  int sink = 0;            ///< first tokens of the window never dropped
  int64_t max_tokens = 0;  ///< 0: the whole stream
  int block_size = 16;
  /// true: one Model::forward per step for all methods of a group, TT's recompute merged into
  /// it (see the top of this header); false: one call per method and step plus one per TT
  /// recompute (the unbatched reference; the same numbers up to the rounding of the GEMMs).
  bool batched = true;
  bool keep_nll = false;  ///< fill OverflowResult::token_nll
};

/// Tokens each overflow drops from a full window: floor(truncate_ratio * n_ctx).
int64_t overflow_dropped_tokens(const OverflowOptions& opt);

struct OverflowResult {
  OverflowMethod method = OverflowMethod::TT;
  int64_t scored_tokens = 0;
  double mean_nll = 0.0;
  double ppl = 0.0;
  int64_t overflows = 0;
  int64_t tokens_recomputed = 0;  ///< prefill work spent on already-seen tokens
  int64_t tokens_processed = 0;   ///< all prefill work (new + recomputed)
  /// Time of this method: its truncations plus its share of each forward call (by rows when
  /// the call was shared with other methods).
  double seconds = 0.0;
  int64_t forward_calls = 0;      ///< Model::forward calls this method took part in
  std::vector<double> token_nll;  ///< with keep_nll: every scored prediction's NLL, in order
};

/// Several methods' windows over one token stream, in one paged KV cache, advanced in
/// lockstep: feed() appends the same tokens to every member, truncating all of them whenever
/// the window is full (they hold the same tokens at every moment). Copyable (the copy holds
/// its own KV cache).
class OverflowGroup {
 public:
  /// Throws cb::Error when the options are invalid for this model or `methods` is empty.
  OverflowGroup(const model::ForwardModel& m, const std::vector<OverflowMethod>& methods,
                const OverflowOptions& opt);

  /// Appends `tokens`; element i is member i's logits [tokens.size(), vocab] (row t predicts
  /// the token after tokens[t]). The window is truncated before it would exceed n_ctx.
  std::vector<std::vector<float>> feed(const std::vector<int32_t>& tokens);

  size_t size() const { return members_.size(); }
  OverflowMethod method(size_t i) const { return members_.at(i).method; }
  /// The window's tokens in slot order (the same for every member).
  const std::vector<int32_t>& window() const { return window_; }
  int64_t window_length() const { return static_cast<int64_t>(window_.size()); }
  int64_t overflows() const { return overflows_; }
  int64_t tokens_recomputed(size_t i) const { return members_.at(i).recomputed; }
  int64_t tokens_processed(size_t i) const { return members_.at(i).processed; }
  /// Seconds attributed to member i (see OverflowResult::seconds).
  double seconds(size_t i) const { return members_.at(i).seconds; }
  /// Model::forward calls made by the group.
  int64_t forward_calls() const { return forward_calls_; }
  /// Model::forward calls member i took part in.
  int64_t forward_calls(size_t i) const { return members_.at(i).calls; }

 private:
  struct Member {
    OverflowMethod method = OverflowMethod::TT;
    kv::SeqId seq = 0;
    bool pending = false;  ///< TT, batched: the window is not in the cache yet (empty sequence)
    std::vector<std::vector<float>> pre_k, pre_v;  ///< CA: pre-RoPE K/V per layer, slot order
    int64_t recomputed = 0, processed = 0, calls = 0;
    double seconds = 0.0;
  };
  void truncate();
  void truncate(Member& mb, const std::vector<int32_t>& kept);
  model::LayerHooks hooks();

  const model::ForwardModel* m_;
  OverflowOptions opt_;
  int64_t drop_ = 0;
  kv::KvCache cache_;
  kv::SeqId next_seq_ = 0;
  std::vector<int32_t> window_;
  std::vector<Member> members_;
  int64_t overflows_ = 0, forward_calls_ = 0;
};

/// A token stream flowing through a window of opt.n_ctx tokens under one method: feed()
/// appends tokens (prefilling them), truncating the window per the method whenever it is
/// full. Copyable (the copy holds its own KV cache): snapshot a long shared history once
/// and append different continuations to copies of it.
class OverflowStream {
 public:
  /// Throws cb::Error when the options are invalid for this model.
  OverflowStream(const model::ForwardModel& m, OverflowMethod method, const OverflowOptions& opt);

  /// Appends `tokens`; returns their logits [tokens.size(), vocab] (row t predicts the
  /// token after tokens[t]). The window is truncated before it would exceed n_ctx.
  std::vector<float> feed(const std::vector<int32_t>& tokens);

  OverflowMethod method() const { return g_.method(0); }
  int64_t window_length() const { return g_.window_length(); }
  const std::vector<int32_t>& window() const { return g_.window(); }
  int64_t overflows() const { return g_.overflows(); }
  int64_t tokens_recomputed() const { return g_.tokens_recomputed(0); }
  int64_t tokens_processed() const { return g_.tokens_processed(0); }

 private:
  OverflowGroup g_;
};

/// Progress of a run: (tokens of the stream done, total).
using OverflowProgress = std::function<void(int64_t, int64_t)>;

/// Runs one method over `tokens` (with opt.batched, TT's recompute joins the next prefill).
/// Throws cb::Error when the options are invalid or the stream never overflows.
OverflowResult run_overflow(const model::ForwardModel& m, const std::vector<int32_t>& tokens,
                            OverflowMethod method, const OverflowOptions& opt,
                            const OverflowProgress& progress = {});

/// Runs `methods` over the same `tokens` in one OverflowGroup (lockstep; with opt.batched one
/// Model::forward per step for all of them); one result per method, in order. Errors as
/// run_overflow.
std::vector<OverflowResult> run_overflow_group(const model::ForwardModel& m,
                                               const std::vector<int32_t>& tokens,
                                               const std::vector<OverflowMethod>& methods,
                                               const OverflowOptions& opt,
                                               const OverflowProgress& progress = {});

}  // namespace cb::eval
