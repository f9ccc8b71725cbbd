#pragma once
/// Perplexity in the llama.cpp convention: the token stream is cut into chunks of n_ctx
/// tokens, the first token of each chunk is replaced by BOS, and the second half of each
/// chunk is scored (tokens at positions n_ctx/2 + 1 .. n_ctx - 1 predicted from the logits
/// before them). PPL = exp(mean NLL), with the standard error llama.cpp prints.

#include <cstdint>
#include <functional>
#include <vector>

#include "lib/model/model.h"

namespace cb::eval {

struct PerplexityOptions {
  int n_ctx = 512;
  int max_chunks = 0;   ///< 0: all full chunks
  int32_t bos_id = -1;  ///< replaces each chunk's first token when >= 0
  int block_size = 16;  ///< KV cache block size
};

struct PerplexityResult {
  int n_ctx = 0;
  int chunks = 0;
  int64_t scored_tokens = 0;
  double mean_nll = 0.0;
  double ppl = 0.0;
  double ppl_stderr = 0.0;  ///< ppl * sqrt(var(nll) / (count - 1)), as llama.cpp reports
  double seconds = 0.0;
  std::vector<double> chunk_ppl;  ///< running PPL after each chunk
};

/// -log softmax(logits)[target], computed in double with max subtraction.
double token_nll(const float* logits, int64_t vocab, int32_t target);

/// Throws cb::Error when the stream holds less than one full chunk of n_ctx tokens.
/// `progress(chunk, chunks, running_ppl)` is called after each chunk.
PerplexityResult perplexity_llamacpp(const model::Model& m, const std::vector<int32_t>& tokens,
                                     const PerplexityOptions& opt,
                                     const std::function<void(int, int, double)>& progress = {});

}  // namespace cb::eval
