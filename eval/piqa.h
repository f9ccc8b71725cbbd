#pragma once
/// PIQA as lm-evaluation-harness's "piqa" task runs it (zero-shot):
///   context        "Question: {goal}\nAnswer:"
///   continuations  " {sol1}", " {sol2}" (target_delimiter " ")
///   acc            argmax of the summed log-likelihoods (first on ties)
///   acc_norm       argmax of log-likelihood / len(choice), the choice's length in characters
///                  (Unicode code points, Python's len) without the delimiter, as lm-eval's
///                  multiple_choice process_results computes it.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "datasets/piqa.h"
#include "eval/loglik.h"

namespace cb::eval {

/// "Question: {goal}\nAnswer:".
std::string piqa_context(const datasets::PiqaExample& ex);

/// Code points of UTF-8 `s` (Python's len; an invalid byte counts as one).
int64_t utf8_length(const std::string& s);

/// Result of a run.
struct PiqaResult {
  std::string scorer;
  int64_t n = 0;
  int64_t correct = 0;       ///< acc
  int64_t correct_norm = 0;  ///< acc_norm
  int64_t truncated = 0;     ///< items whose input was cut to fit the window
  double acc = 0.0;
  double acc_norm = 0.0;
  double seconds = 0.0;
  ScorerStats stats;
};

/// Evaluates the first `limit` examples (0: all); `progress(done, total)` after each.
PiqaResult run_piqa(const std::vector<datasets::PiqaExample>& examples, int64_t limit,
                    ContextScorer& scorer,
                    const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace cb::eval
