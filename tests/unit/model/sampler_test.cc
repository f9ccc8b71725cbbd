#include "lib/model/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "lib/core/error.h"

// The expected distributions below come from the definitions (softmax of logit / T, the
// nucleus and min-p rules written out by hand for these probabilities), not from the sampler.
namespace {

using cb::model::Sampler;
using cb::model::SamplerConfig;

constexpr int kDraws = 20000;

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int draws = kDraws) {
  std::vector<int> h(logits.size(), 0);
  for (int i = 0; i < draws; ++i)
    ++h.at(static_cast<size_t>(s.sample(logits.data(), static_cast<int64_t>(logits.size()))));
  return h;
}

// Pearson's chi-square of counts `h` against probabilities `want` (tokens with probability 0
// must never be drawn). 40 is above the 1e-6 upper quantile for up to 4 degrees of freedom
// (33.4), so a correct sampler fails with probability below 1e-6 at any seed.
void expect_distribution(const std::vector<int>& h, const std::vector<double>& want) {
  ASSERT_EQ(h.size(), want.size());
  double total = 0, chi2 = 0;
  for (int c : h) total += c;
  for (size_t i = 0; i < h.size(); ++i) {
    if (want[i] == 0.0) {
      EXPECT_EQ(h[i], 0) << "token " << i << " must never be drawn";
      continue;
    }
    const double e = total * want[i];
    chi2 += (h[i] - e) * (h[i] - e) / e;
  }
  EXPECT_LT(chi2, 40.0) << "counts do not follow the expected distribution";
}

std::vector<double> normalized(std::vector<double> w) {
  double s = 0;
  for (double x : w) s += x;
  for (double& x : w) x /= s;
  return w;
}

SamplerConfig at(double temperature) {
  SamplerConfig c;
  c.temperature = temperature;
  c.seed = 7;
  return c;
}

TEST(Sampler, GreedyTakesTheArgmaxAndTiesGoToTheLowerId) {
  Sampler s(at(0));
  const std::vector<float> l = {0.5f, 3.0f, -2.0f, 3.0f};
  EXPECT_EQ(s.sample(l.data(), 4), 1);
  const std::vector<float> flat(5, 1.0f);
  EXPECT_EQ(s.sample(flat.data(), 5), 0);
}

TEST(Sampler, TemperatureOneDrawsTheSoftmax) {
  const std::vector<double> p = {0.1, 0.5, 0.15, 0.25};
  Sampler s(at(1.0));
  expect_distribution(histogram(s, log_probs(p)), p);
}

TEST(Sampler, TemperatureSharpensOrFlattens) {
  const std::vector<double> p = {0.1, 0.5, 0.15, 0.25};
  for (double t : {0.5, 2.0}) {
    std::vector<double> want;
    for (double x : p) want.push_back(std::pow(x, 1.0 / t));  // softmax(log p / T)
    Sampler s(at(t));
    expect_distribution(histogram(s, log_probs(p)), normalized(want));
  }
}

TEST(Sampler, TopKKeepsTheKLikeliest) {
  const std::vector<double> p = {0.1, 0.5, 0.15, 0.25};
  SamplerConfig c = at(1.0);
  c.top_k = 2;
  Sampler s(c);
  expect_distribution(histogram(s, log_probs(p)), {0, 0.5 / 0.75, 0, 0.25 / 0.75});
  c.top_k = 1;  // greedy at any temperature
  c.temperature = 50;
  Sampler one(c);
  expect_distribution(histogram(one, log_probs(p), 2000), {0, 1, 0, 0});
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<double> p = {0.1, 0.5, 0.15, 0.25};
  SamplerConfig c = at(1.0);
  c.top_p = 0.7;  // 0.5 < 0.7 <= 0.5 + 0.25
  Sampler two(c);
  expect_distribution(histogram(two, log_probs(p)), {0, 0.5 / 0.75, 0, 0.25 / 0.75});
  c.top_p = 0.8;  // 0.75 < 0.8 <= 0.9
  Sampler three(c);
  expect_distribution(histogram(three, log_probs(p)), {0, 0.5 / 0.9, 0.15 / 0.9, 0.25 / 0.9});
  c.top_p = 0.4;  // the likeliest alone reaches it
  Sampler one(c);
  expect_distribution(histogram(one, log_probs(p), 2000), {0, 1, 0, 0});
}

TEST(Sampler, TemperatureAppliesBeforeTopP) {
  // At T = 100 the four tokens are nearly equally likely, so top-p 0.7 keeps three of them
  // (at T = 1 it would keep two). This is vLLM's and Hugging Face's order.
  const std::vector<double> p = {0.1, 0.5, 0.15, 0.25};
  SamplerConfig c = at(100.0);
  c.top_p = 0.7;
  Sampler s(c);
  std::vector<double> want;
  for (double x : p) want.push_back(std::pow(x, 0.01));
  want[0] = 0;  // the least likely token is cut
  expect_distribution(histogram(s, log_probs(p)), normalized(want));
}

TEST(Sampler, MinPKeepsTokensNearTheLikeliest) {
  const std::vector<double> p = {0.1, 0.5, 0.15, 0.25};
  SamplerConfig c = at(1.0);
  c.min_p = 0.4;  // keep p >= 0.2
  Sampler s(c);
  expect_distribution(histogram(s, log_probs(p)), {0, 0.5 / 0.75, 0, 0.25 / 0.75});
  c.min_p = 0.25;  // keep p >= 0.125
  Sampler t(c);
  expect_distribution(histogram(t, log_probs(p)), {0, 0.5 / 0.9, 0.15 / 0.9, 0.25 / 0.9});
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogitsOnce) {
  SamplerConfig c = at(0);
  c.repeat_penalty = 1.5;
  Sampler s(c);
  const std::vector<float> pos = {2.0f, 1.9f, -1.0f};
  const std::vector<int32_t> zero = {0};
  EXPECT_EQ(s.sample(pos.data(), 3, zero.data(), zero.size()), 1);  // 2 / 1.5 < 1.9
  EXPECT_EQ(s.sample(pos.data(), 3), 0);                            // nothing recent
  const std::vector<float> neg = {-1.0f, -1.2f};
  EXPECT_EQ(s.sample(neg.data(), 2, zero.data(), zero.size()), 1);  // -1 * 1.5 < -1.2
  // Penalized once however often it occurs: 2 / 1.5 > 1 (2 / 1.5^3 would not be).
  const std::vector<float> gap = {2.0f, 1.0f};
  const std::vector<int32_t> thrice = {0, 0, 0};
  EXPECT_EQ(s.sample(gap.data(), 2, thrice.data(), thrice.size()), 0);
}

TEST(Sampler, RepeatPenaltyLooksOnlyAtTheLastN) {
  SamplerConfig c = at(0);
  c.repeat_penalty = 1.5;
  c.repeat_last_n = 1;
  Sampler s(c);
  const std::vector<float> l = {2.0f, 1.9f};
  const std::vector<int32_t> old_then_new = {0, 1};  // only token 1 is penalized
  EXPECT_EQ(s.sample(l.data(), 2, old_then_new.data(), old_then_new.size()), 0);
  // A window that ignored last_n would penalize token 0 here too and pick token 1.
  const std::vector<float> three = {2.0f, 1.9f, -5.0f};
  const std::vector<int32_t> zero_then_two = {0, 2};
  EXPECT_EQ(s.sample(three.data(), 3, zero_then_two.data(), zero_then_two.size()), 0);
  c.repeat_last_n = 0;  // llama.cpp's 0: the penalty is off
  Sampler off(c);
  const std::vector<int32_t> zero = {0};
  EXPECT_EQ(off.sample(three.data(), 3, zero.data(), zero.size()), 0);
  c.repeat_last_n = -1;  // all: both penalized, 2/1.5 > 1.9/1.5
  Sampler all(c);
  const std::vector<int32_t> just_zero_long_ago = {0, 1, 1, 1};
  EXPECT_EQ(all.sample(l.data(), 2, just_zero_long_ago.data(), just_zero_long_ago.size()), 0);
  const std::vector<float> close = {2.0f, 1.5f};
  const std::vector<int32_t> only_zero = {0, 0};
  EXPECT_EQ(all.sample(close.data(), 2, only_zero.data(), only_zero.size()), 1);
}

TEST(Sampler, ASeedGivesTheSameDraws) {
  const std::vector<float> flat(16, 0.0f);
  auto draws = [&](uint64_t seed) {
    SamplerConfig c = at(1.0);
    c.seed = seed;
    Sampler s(c);
    std::vector<int32_t> v;
    for (int i = 0; i < 64; ++i) v.push_back(s.sample(flat.data(), 16));
    return v;
  };
  EXPECT_EQ(draws(1), draws(1));
  EXPECT_NE(draws(1), draws(2));
}

TEST(Sampler, InfiniteAndNanLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  Sampler s(at(1.0));
  const std::vector<float> masked = {-inf, 0.0f, -inf, 0.0f};
  expect_distribution(histogram(s, masked, 4000), {0, 0.5, 0, 0.5});
  const std::vector<float> winner = {0.0f, inf, 3.0f};
  EXPECT_EQ(s.sample(winner.data(), 3), 1);
  const std::vector<float> none = {-inf, -inf};
  EXPECT_EQ(s.sample(none.data(), 2), 0);
  const std::vector<float> bad = {0.0f, std::nanf(""), 1.0f};
  try {
    s.sample(bad.data(), 3);
    FAIL() << "a NaN logit must be an error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 1 is NaN"), std::string::npos) << e.what();
  }
}

TEST(Sampler, OutOfRangeSettingsNameTheOption) {
  auto message = [](SamplerConfig c) -> std::string {
    try {
      cb::model::validate(c);
    } catch (const cb::Error& e) {
      return e.what();
    }
    return "";
  };
  SamplerConfig c;
  EXPECT_EQ(message(c), "");
  c.top_p = 0;
  EXPECT_NE(message(c).find("--top-p"), std::string::npos);
  c = SamplerConfig();
  c.min_p = 1.5;
  EXPECT_NE(message(c).find("--min-p"), std::string::npos);
  c = SamplerConfig();
  c.temperature = std::numeric_limits<double>::infinity();
  EXPECT_NE(message(c).find("--temperature"), std::string::npos);
  c = SamplerConfig();
  c.repeat_penalty = 0;
  EXPECT_NE(message(c).find("--repeat-penalty"), std::string::npos);
  c = SamplerConfig();
  c.top_k = -1;
  EXPECT_NE(message(c).find("--top-k"), std::string::npos);
  c = SamplerConfig();
  c.repeat_last_n = -2;
  EXPECT_NE(message(c).find("--repeat-last-n"), std::string::npos);
  c.top_k = -1;
  EXPECT_THROW(Sampler{c}, cb::Error);
}

}  // namespace
