#pragma once
/// Seeded random token ids for engine and evaluation tests.

#include <cstdint>
#include <random>
#include <vector>

namespace cb::test {

/// `n` ids uniform in [0, vocab), deterministic for a given seed.
inline std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

}  // namespace cb::test
