// exp over arrays of floats, eight lanes at a time: the softmax of the fast attention kernels
// (attention_fast.cc, attention_direct.cc), where libm's scalar expf was about a quarter of a
// small model's prefill. The oracle (attention.cc) keeps std::exp in double.
//
// Cephes' expf: x = k ln2 + r with k = round(x / ln2) and |r| <= ln2 / 2 (ln2 in two parts, the
// first exact in 9 bits so k * ln2_hi is exact), e^r by a degree-7 polynomial, times 2^k built
// in the exponent bits. Written with GCC/Clang vector extensions (no intrinsics, no branches per
// element), four floats a vector for the target's baseline (SSE2 on x86-64, NEON on arm64) and,
// on x86-64, eight for AVX2, picked at run time; both add the sums in the same eight lanes.
//
// Against exp computed in double: relative error under 1.5e-7 for x in [-87.33, 88.72] (the
// worst of 1.5 million values in exp_lanes_test.cc was 8.2e-8; a review's run over every float
// found 8.3e-8, and every result within 1 ulp of glibc's expf); 0 below -87.336548 (about
// ln(FLT_MIN): where expf gives a subnormal, under 1.2e-38); +inf above 88.72; NaN for NaN.
// Deterministic: an element's result depends on its value only, not on its position in the array or
// on n.
#pragma once

#include <cstdint>

namespace cb::kernels::cpu {

/// Which code runs: the x86-64 baseline (SSE2; also every other architecture) or AVX2 (256-bit
/// registers, no FMA). The two give identical bits; the default is the best the CPU has.
enum class ExpIsa { Baseline, Avx2 };
ExpIsa exp_best_isa();

/// x[i] = exp(x[i]) for i in [0, n).
void exp_lanes(float* x, int64_t n, ExpIsa isa = exp_best_isa());

/// x[i] = exp(x[i] - shift) for i in [0, n); returns the sum of the new x[i], added in
/// double in eight lanes (in a fixed order: the same input gives the same sum).
double exp_shifted_sum(float* x, int64_t n, float shift, ExpIsa isa = exp_best_isa());

/// The largest of x[0, n), NaNs skipped (as a std::max loop from -inf: -inf when n is 0 or
/// every element is NaN; of a +0 and a -0 it may return either).
float max_lanes(const float* x, int64_t n, ExpIsa isa = exp_best_isa());

/// exp_lanes of one value (the same result as in an array).
float exp_lane(float x, ExpIsa isa = exp_best_isa());

}  // namespace cb::kernels::cpu
