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
};

struct OverflowResult {
  OverflowMethod method = OverflowMethod::TT;
  int64_t scored_tokens = 0;
  double mean_nll = 0.0;
  double ppl = 0.0;
  int64_t overflows = 0;
  int64_t tokens_recomputed = 0;  ///< prefill work spent on already-seen tokens
  int64_t tokens_processed = 0;   ///< all prefill work (new + recomputed)
  double seconds = 0.0;
};

/// A token stream flowing through a window of opt.n_ctx tokens under one method: feed()
/// appends tokens (prefilling them), truncating the window per the method whenever it is
/// full. Copyable (the copy holds its own KV cache): snapshot a long shared history once
/// and append different continuations to copies of it.
class OverflowStream {
 public:
  /// Throws cb::Error when the options are invalid for this model.
  OverflowStream(const model::Model& m, OverflowMethod method, const OverflowOptions& opt);

  /// Appends `tokens`; returns their logits [tokens.size(), vocab] (row t predicts the
  /// token after tokens[t]). The window is truncated before it would exceed n_ctx.
  std::vector<float> feed(const std::vector<int32_t>& tokens);

  OverflowMethod method() const { return method_; }
  int64_t window_length() const { return static_cast<int64_t>(window_.size()); }
  const std::vector<int32_t>& window() const { return window_; }
  int64_t overflows() const { return overflows_; }
  int64_t tokens_recomputed() const { return recomputed_; }
  int64_t tokens_processed() const { return processed_; }

 private:
  void truncate();

  const model::Model* m_;
  OverflowMethod method_;
  OverflowOptions opt_;
  int64_t drop_ = 0;
  kv::KvCache cache_;
  kv::SeqId seq_ = 0;
  std::vector<int32_t> window_;                    // token ids in slot order
  std::vector<std::vector<float>> pre_k_, pre_v_;  // CA: pre-RoPE K/V per layer, slot order
  int64_t overflows_ = 0, recomputed_ = 0, processed_ = 0;
};

/// Runs one method over `tokens`; `progress(done, total)` reports stream progress.
/// Throws cb::Error when the options are invalid or the stream never overflows.
OverflowResult run_overflow(const model::Model& m, const std::vector<int32_t>& tokens,
                            OverflowMethod method, const OverflowOptions& opt,
                            const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace cb::eval
