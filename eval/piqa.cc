#include "eval/piqa.h"

#include <algorithm>
#include <chrono>

#include "lib/core/error.h"

namespace cb::eval {

std::string piqa_context(const datasets::PiqaExample& ex) {
  return "Question: " + ex.goal + "\nAnswer:";
}

int64_t utf8_length(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;  // every byte but continuation bytes starts a code point
  }
  return n;
}

PiqaResult run_piqa(const std::vector<datasets::PiqaExample>& examples, int64_t limit,
                    ContextScorer& scorer, const std::function<void(int64_t, int64_t)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t total = limit > 0 ? std::min<int64_t>(limit, static_cast<int64_t>(examples.size()))
                                  : static_cast<int64_t>(examples.size());
  if (total == 0) throw make_error("piqa", "no examples to evaluate");
  PiqaResult r;
  r.scorer = scorer.name();
  for (int64_t i = 0; i < total; ++i) {
    const auto& ex = examples[static_cast<size_t>(i)];
    const std::vector<LoglikResult> s =
        scorer.score("", piqa_context(ex), {" " + ex.sol1, " " + ex.sol2});
    const int pick = s[1].logprob > s[0].logprob ? 1 : 0;
    // lm-eval: lls / len(choice); an empty choice would divide by zero there, here by 1.
    const double l0 = static_cast<double>(std::max<int64_t>(1, utf8_length(ex.sol1)));
    const double l1 = static_cast<double>(std::max<int64_t>(1, utf8_length(ex.sol2)));
    const int pick_norm = s[1].logprob / l1 > s[0].logprob / l0 ? 1 : 0;
    ++r.n;
    if (pick == ex.label) ++r.correct;
    if (pick_norm == ex.label) ++r.correct_norm;
    if (s[0].truncated || s[1].truncated) ++r.truncated;
    if (progress) progress(i + 1, total);
  }
  r.acc = static_cast<double>(r.correct) / static_cast<double>(r.n);
  r.acc_norm = static_cast<double>(r.correct_norm) / static_cast<double>(r.n);
  r.stats = scorer.stats();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace cb::eval
