#include "lib/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "lib/core/error.h"

namespace cb::model {
namespace {

void check(bool ok, const char* prefix, const char* name, const std::string& rule, double got) {
  if (ok) return;
  char b[64];
  std::snprintf(b, sizeof b, "%g", got);
  throw make_error(std::string(prefix) + name, "must be " + rule + ", got " + b);
}

}  // namespace

void validate(const SamplerConfig& c, const char* prefix) {
  check(std::isfinite(c.temperature) && c.temperature >= 0, prefix, "temperature",
        "a finite number >= 0 (0 is greedy)", c.temperature);
  check(c.top_k >= 0, prefix, "top-k", ">= 0 (0 keeps every token)", static_cast<double>(c.top_k));
  check(c.top_p > 0 && c.top_p <= 1, prefix, "top-p", "in (0, 1] (1 keeps every token)", c.top_p);
  check(c.min_p >= 0 && c.min_p <= 1, prefix, "min-p", "in [0, 1] (0 keeps every token)", c.min_p);
  check(std::isfinite(c.repeat_penalty) && c.repeat_penalty > 0, prefix, "repeat-penalty",
        "a finite number > 0 (1 is off)", c.repeat_penalty);
  check(c.repeat_last_n >= -1, prefix, "repeat-last-n", ">= -1 (-1: every token, 0: none)",
        static_cast<double>(c.repeat_last_n));
}

Sampler::Sampler(const SamplerConfig& c) : c_(c), rng_(c.seed) {
  validate(c_);
}

double Sampler::uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(const float* logits, int64_t vocab, const int32_t* recent,
                        size_t n_recent) {
  if (vocab <= 0) throw make_error("sampler", "empty logits row (internal error)");
  const auto n = static_cast<size_t>(vocab);
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(logits[i])) {
      throw make_error("sampler", "logit of token " + std::to_string(i) + " is NaN",
                       "the model's forward pass produced NaN: the weights hold NaN or "
                       "infinite values, or the activations overflowed; check that the "
                       "model file is intact (its checksum against its source's), or run it on "
                       "the other --backend");
    }
  }
  const bool penalize = c_.penalizes() && n_recent > 0;
  // Greedy with nothing to penalize: the first maximum of the row as given, no copy.
  if (c_.greedy() && !penalize) {
    return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
  }
  logits_.assign(logits, logits + n);
  if (penalize) {
    const size_t from = c_.repeat_last_n > 0 && static_cast<size_t>(c_.repeat_last_n) < n_recent
                            ? n_recent - static_cast<size_t>(c_.repeat_last_n)
                            : 0;
    seen_.assign(n, 0);
    const auto pen = static_cast<float>(c_.repeat_penalty);
    for (size_t k = from; k < n_recent; ++k) {
      const int32_t t = recent[k];
      if (t < 0 || static_cast<size_t>(t) >= n || seen_[static_cast<size_t>(t)]) continue;
      seen_[static_cast<size_t>(t)] = 1;
      float& l = logits_[static_cast<size_t>(t)];
      l = l > 0 ? l / pen : l * pen;
    }
  }
  // The first maximum (ties to the lower id): greedy's pick after the penalty, and the logit
  // the probabilities below are relative to.
  const size_t best =
      static_cast<size_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
  const double top = logits_[best];
  // Greedy, and rows whose likeliest logit is infinite (+inf wins outright; all -inf is a tie).
  if (c_.greedy() || std::isinf(top)) return static_cast<int32_t>(best);

  // Candidates: every token in id order, or (after top-k, or for top-p) by likelihood, ties
  // going to the lower id.
  cand_.resize(n);
  for (size_t i = 0; i < n; ++i) cand_[i] = static_cast<int32_t>(i);
  const auto more_likely = [this](int32_t a, int32_t b) {
    const float la = logits_[static_cast<size_t>(a)], lb = logits_[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t m = n;
  if (c_.top_k > 0 && static_cast<size_t>(c_.top_k) < n) {
    m = static_cast<size_t>(c_.top_k);
    std::nth_element(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(m - 1), cand_.end(),
                     more_likely);
    cand_.resize(m);
  }
  // A fixed order to walk in the draw (nth_element's is the library's own), and the order
  // top-p needs: a sort of the whole vocabulary only when top-p has no top-k before it.
  if (m < n || c_.top_p < 1.0) std::sort(cand_.begin(), cand_.end(), more_likely);

  // Probabilities at the temperature, relative to the likeliest token's (which is 1).
  prob_.resize(m);
  double total = 0.0;
  for (size_t i = 0; i < m; ++i) {
    const double l = logits_[static_cast<size_t>(cand_[i])];
    prob_[i] = std::isinf(l) && l < 0 ? 0.0 : std::exp((l - top) / c_.temperature);
    total += prob_[i];
  }
  if (c_.top_p < 1.0) {
    // The smallest prefix whose probability reaches top_p (at least one token).
    double cum = 0.0;
    size_t keep = 0;
    while (keep < m) {
      cum += prob_[keep++];
      if (cum >= c_.top_p * total) break;
    }
    m = keep;
    total = cum;
  }
  if (c_.min_p > 0.0) {
    // prob_ is relative to the likeliest token, which survives every filter.
    total = 0.0;
    for (size_t i = 0; i < m; ++i) {
      if (prob_[i] < c_.min_p) prob_[i] = 0.0;
      total += prob_[i];
    }
  }
  double r = uniform() * total;
  size_t last = 0;
  for (size_t i = 0; i < m; ++i) {
    if (prob_[i] <= 0.0) continue;
    last = i;
    r -= prob_[i];
    if (r < 0.0) return cand_[i];
  }
  return cand_[last];  // rounding left r at or above 0: the last token with mass
}

}  // namespace cb::model
