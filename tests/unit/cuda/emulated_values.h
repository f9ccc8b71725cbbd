#pragma once
// Values for the kernels' sources run on the host (tests/unit/cuda/simt_emulator.h, which must
// be included first): floats as a kernel's storage type and back, 16-byte aligned buffers for
// its vector loads, NaN poison, and the launchers' element-wise grid. Shared by the emulated
// kernel suites.
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/cuda/storage.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace cb::emulated {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::round_to;
using kc::Storage;

// Values as the kernel's storage type T (a vector of T, initialized from floats) and back.
template <typename T>
std::vector<T> to_storage(const std::vector<float>& v) {
  std::vector<T> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same<T, float>::value) {
      r[i] = v[i];
    } else if constexpr (std::is_same<T, __half>::value) {
      r[i] = __float2half_rn(v[i]);
    } else {
      r[i] = __float2bfloat16_rn(v[i]);
    }
  }
  return r;
}
// Values as the storage type T in 16-byte aligned memory, as the kernels' vector loads need.
template <typename T>
struct Aligned16 {
  std::vector<uint4> words;
  const T* get() const { return reinterpret_cast<const T*>(words.data()); }
};
template <typename T>
Aligned16<T> aligned16(const std::vector<float>& v) {
  const std::vector<T> t = to_storage<T>(v);
  Aligned16<T> r{std::vector<uint4>(t.size() * sizeof(T) / 16 + 1)};
  std::memcpy(static_cast<void*>(r.words.data()), t.data(), t.size() * sizeof(T));
  return r;
}
template <typename T>
float as_float(T v) {
  if constexpr (std::is_same<T, float>::value) {
    return v;
  } else if constexpr (std::is_same<T, __half>::value) {
    return __half2float(v);
  } else {
    return __bfloat162float(v);
  }
}
// The kernel's outputs as floats.
template <typename T>
std::vector<float> as_floats(const std::vector<T>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = as_float(v[i]);
  return r;
}

template <typename T>
T nan_value() {
  return to_storage<T>({std::nanf("")})[0];
}
template <typename T>
constexpr Storage storage_of() {
  return std::is_same<T, float>::value    ? Storage::F32
         : std::is_same<T, __half>::value ? Storage::F16
                                          : Storage::BF16;
}
// Runs body() as the grid of elementwise_dims(items), as the launchers do.
inline void launch_elementwise(int64_t items, const std::function<void()>& body) {
  const kc::LaunchDims d = kc::elementwise_dims(static_cast<size_t>(items));
  cb::simt::Emulator::get().launch({d.grid, 1, 1}, {d.block, 1, 1}, 0, body);
}

// n values uniform in [lo, hi), rounded to `st`.
inline std::vector<float> uniform(size_t n, uint32_t seed, float lo, float hi, Storage st) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(st, u(rng));
  return v;
}

}  // namespace cb::emulated
