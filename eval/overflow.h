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

/// Runs one method over `tokens`; `progress(done, total)` reports stream progress.
/// Throws cb::Error when the options are invalid or the stream never overflows.
OverflowResult run_overflow(const model::Model& m, const std::vector<int32_t>& tokens,
                            OverflowMethod method, const OverflowOptions& opt,
                            const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace cb::eval
