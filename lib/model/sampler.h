#pragma once
/// Picking the next token from a row of logits: greedy, or sampled with temperature, top-k,
/// top-p (nucleus) and min-p, after an optional repetition penalty. The steps run in Hugging
/// Face's order (and vLLM's before its V1 engine, which applies min-p before top-k/top-p):
/// penalty, temperature, top-k, top-p, min-p, then one draw from what is left, renormalized.
/// Top-k keeps exactly k tokens, ties at the k-th going to the lower token id (Hugging Face and
/// vLLM keep every token tied with the k-th). Given the same logits, a seed gives the same
/// token on every platform: the candidates are walked in a fixed order and the uniform variate
/// is built from the generator's bits, not by a library distribution.

#include <cstdint>
#include <random>
#include <vector>

namespace cb::model {

struct SamplerConfig {
  double temperature = 0.0;     ///< 0: greedy (the argmax after the penalty)
  int64_t top_k = 0;            ///< keep the k most likely tokens; 0: all
  double top_p = 1.0;           ///< keep the smallest set whose probability reaches p; 1: all
  double min_p = 0.0;           ///< keep tokens at least min_p times the likeliest's probability
  double repeat_penalty = 1.0;  ///< CTRL's penalty: a recent token's logit l becomes
                                ///< l / penalty if l > 0, else l * penalty; 1: off
  int64_t repeat_last_n = 64;   ///< how many recent tokens the penalty looks at; 0: none (the
                                ///< penalty is off), -1: all given (llama.cpp's values)
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0; }
  bool penalizes() const { return repeat_penalty != 1.0 && repeat_last_n != 0; }
};

/// Throws cb::Error naming the option (as `prefix` + "temperature", ...) when a field is out
/// of its range: temperature >= 0 and finite, top_k >= 0, top_p in (0, 1], min_p in [0, 1],
/// repeat_penalty > 0 and finite, repeat_last_n >= -1.
void validate(const SamplerConfig& c, const char* prefix = "--");

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& c);

  /// The next token from `logits[0..vocab)`. `recent` are the sequence's tokens so far, oldest
  /// first (only the last repeat_last_n are penalized, each once however often it occurs).
  /// A NaN logit is an error.
  int32_t sample(const float* logits, int64_t vocab, const int32_t* recent = nullptr,
                 size_t n_recent = 0);

  const SamplerConfig& config() const { return c_; }

 private:
  double uniform();  ///< in [0, 1), 53 random bits

  SamplerConfig c_;
  std::mt19937_64 rng_;
  std::vector<float> logits_;
  std::vector<int32_t> cand_;
  std::vector<double> prob_;
  std::vector<uint8_t> seen_;
};

}  // namespace cb::model
