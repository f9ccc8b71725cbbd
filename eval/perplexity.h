#pragma once
/// Perplexity under three named conventions (DESIGN.md section 4), so a number can be
/// compared with the tool that published it:
///  - llama.cpp: the stream is cut into chunks of n_ctx tokens, the first token of each chunk
///    is replaced by BOS, and the second half of each chunk is scored (tokens at positions
///    n_ctx/2 + 1 .. n_ctx - 1 predicted from the logits before them). PPL = exp(mean NLL),
///    with the standard error llama.cpp prints. Like llama.cpp, it refuses a text of fewer than
///    2 * n_ctx tokens.
///  - lm-eval: lm-evaluation-harness `loglikelihood_rolling` (see lmeval_rolling_windows);
///    every token of the document is scored exactly once; token, word and byte perplexity
///    and bits per byte as its wikitext task reports them.
///  - gptq: GPTQ's datautils/llama_eval: non-overlapping windows of n_ctx (seqlen) tokens,
///    no BOS inserted, all but each window's first token scored (see perplexity_gptq).
/// Windows are independent of each other in every convention, so `batch` of them go through
/// one Model::forward call (one sequence each in one paged KV cache sized for `batch`
/// windows): fewer, larger GEMMs, the same numbers up to the rounding of the batched GEMMs.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/model/model.h"

namespace cb::eval {

struct PerplexityOptions {
  int n_ctx = 512;         ///< llama.cpp: chunk size; lm-eval: max_length; gptq: seqlen
  int max_chunks = 0;      ///< llama.cpp and gptq: at most this many chunks/windows (0: all)
  int32_t bos_id = -1;     ///< llama.cpp: replaces each chunk's first token when >= 0;
                           ///< lm-eval: the prefix token (required); gptq: unused
  int block_size = 16;     ///< KV cache block size
  int64_t text_words = 0;  ///< lm-eval: lmeval_count_words of the document text
  int64_t text_bytes = 0;  ///< lm-eval: UTF-8 bytes of the document text
  int batch = 1;           ///< windows per Model::forward call (>= 1)
  bool keep_nll = false;   ///< fill PerplexityResult::token_nll
};

struct PerplexityResult {
  std::string convention;  ///< "llama.cpp", "lm-eval" or "gptq"
  int n_ctx = 0;
  int chunks = 0;  ///< chunks (llama.cpp), rolling windows (lm-eval), nsamples (gptq)
  int64_t scored_tokens = 0;
  double total_nll = 0.0;  ///< sum of the scored tokens' NLL (nats)
  double mean_nll = 0.0;   ///< log(ppl): per token, except gptq's mean of window means
  double ppl = 0.0;
  double ppl_stderr = 0.0;  ///< ppl * sqrt(var(nll) / (count - 1)), as llama.cpp reports
  double seconds = 0.0;
  int64_t tokens_processed = 0;      ///< tokens run through the model
  std::vector<double> chunk_ppl;     ///< running PPL after each chunk/window
  int64_t words = 0;                 ///< lm-eval: words of the document text
  int64_t bytes = 0;                 ///< lm-eval: UTF-8 bytes of the document text
  double word_ppl = 0.0;             ///< lm-eval: exp(total_nll / words)
  double byte_ppl = 0.0;             ///< lm-eval: exp(total_nll / bytes)
  double bits_per_byte = 0.0;        ///< lm-eval: total_nll / bytes / ln 2 = log2(byte_ppl)
  int documents = 0;                 ///< lm-eval: documents scored (1 for a single stream)
  std::vector<double> document_nll;  ///< lm-eval: total NLL of each document
  int batch = 1;                     ///< windows per Model::forward call
  int64_t forward_calls = 0;         ///< Model::forward calls made
  std::vector<double> token_nll;     ///< with keep_nll: every scored token's NLL, in order
};

/// Progress callback: (chunk or window done, total, running PPL).
using PerplexityProgress = std::function<void(int, int, double)>;

/// -log softmax(logits)[target], computed in double with max subtraction. Throws cb::Error
/// when the logits make it NaN or infinite (NaN weights, an overflow): a score from them
/// would be reported as a result.
double token_nll(const float* logits, int64_t vocab, int32_t target);

/// Throws cb::Error when the stream holds less than one full chunk of n_ctx tokens.
/// `progress(chunk, chunks, running_ppl)` is called after each chunk.
PerplexityResult perplexity_llamacpp(const model::ForwardModel& m,
                                     const std::vector<int32_t>& tokens,
                                     const PerplexityOptions& opt,
                                     const PerplexityProgress& progress = {});

/// One model call of lm-eval's rolling loglikelihood. Positions index the document's tokens;
/// position -1 is the prefix token. The model reads positions [input_begin, input_begin +
/// input_len) and the last pred_len logits score positions [pred_begin, pred_begin + pred_len).
struct RollingWindow {
  int64_t input_begin = 0;
  int input_len = 0;
  int64_t pred_begin = 0;
  int pred_len = 0;
};

/// lm-eval's `get_rolling_token_windows(tokens, prefix, max_length, context_len=1)` mapped
/// through `make_disjoint_window` and `_loglikelihood_tokens`' input construction, for a
/// document of n_tokens tokens (no BOS among them).
std::vector<RollingWindow> lmeval_rolling_windows(int64_t n_tokens, int max_length);

/// len(re.split(r"\s+", text)) with Python's Unicode whitespace: lm-eval's count_words
/// (a leading or trailing whitespace run adds an empty "word", as in Python).
int64_t lmeval_count_words(std::string_view text);

/// lm-eval convention over one document: `tokens` are the text's tokens without BOS;
/// opt.bos_id is the prefix token, opt.n_ctx the max_length; opt.text_words/text_bytes feed
/// word and byte perplexity (0: not reported). Throws cb::Error on an empty stream.
PerplexityResult perplexity_lmeval(const model::ForwardModel& m, const std::vector<int32_t>& tokens,
                                   const PerplexityOptions& opt,
                                   const PerplexityProgress& progress = {});

/// One document of lm-eval's loglikelihood_rolling: the tokens of its target text (for
/// `wikitext`, the detokenized page) without BOS, and the words and bytes its metrics divide
/// by (for `wikitext`, of the page before detokenization).
struct LmEvalDocument {
  std::vector<int32_t> tokens;
  int64_t words = 0;
  int64_t bytes = 0;
};

/// lm-eval convention over several documents, as its perplexity tasks aggregate them: each
/// document's rolling windows are scored on their own (no context crosses documents), and
/// word_perplexity = exp(sum NLL / sum words), byte_perplexity = exp(sum NLL / sum bytes),
/// bits_per_byte = sum NLL / sum bytes / ln 2 over all documents (weighted_perplexity and
/// bits_per_byte in lm_eval/api/metrics.py). Token perplexity is exp(sum NLL / tokens).
/// opt.text_words/text_bytes are ignored. A document without tokens scores nothing but its
/// words and bytes still count; throws cb::Error when no document has a token.
PerplexityResult perplexity_lmeval_documents(const model::ForwardModel& m,
                                             const std::vector<LmEvalDocument>& docs,
                                             const PerplexityOptions& opt,
                                             const PerplexityProgress& progress = {});

/// GPTQ convention: `tokens` as the tokenizer returns them for the whole text (one BOS at
/// the start if it adds one; none inserted per window). nsamples = tokens / n_ctx windows
/// (capped by max_chunks); window i scores tokens[i*n_ctx + 1 .. (i+1)*n_ctx - 1] from the
/// logits before them; PPL = exp(sum_i(mean_nll_i * n_ctx) / (nsamples * n_ctx)).
/// Throws cb::Error when the stream holds less than one window.
PerplexityResult perplexity_gptq(const model::ForwardModel& m, const std::vector<int32_t>& tokens,
                                 const PerplexityOptions& opt,
                                 const PerplexityProgress& progress = {});

}  // namespace cb::eval
