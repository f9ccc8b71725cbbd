#pragma once
// The SwiGLU, GELU and residual-add kernels (see activation.h; launched by activation.cu), in
// a header so that tests/unit/cuda/kernels_emulated_test.cc runs their source on the host.
#include <cstring>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/device_math.cuh"

namespace cb::kernels::cuda {
namespace detail {

#define CB_GRID_STRIDE(i, n)                                                             \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void swiglu_kernel(const T* gate, const T* up, T* out, int64_t n) {
  allow_dependent_launch();
  CB_GRID_STRIDE(i, n) {
    const float g = to_f(gate[i]);
    out[i] = from_f<T>(g / (1.0f + expf(-g)) * to_f(up[i]));
  }
}

// Rows of SwigluParams::cols elements: row r of gate and up at r * in_stride (the halves of a
// fused gate|up GEMM's rows), out contiguous. Rows over the grid's y dimension, columns over x
// in groups of VEC elements (8: one 16-byte load of gate and of up a thread, where cols and
// in_stride are multiples of 8 and the pointers 16-byte aligned; else 1).
template <typename T, int VEC>
__global__ void swiglu_rows_kernel(const T* gate, const T* up, T* out, int64_t rows, int64_t cols,
                                   int64_t in_stride) {
  allow_dependent_launch();
  const int64_t groups = cols / VEC;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < groups;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      if constexpr (VEC == 1) {
        const float g = to_f(gate[r * in_stride + c]);
        out[r * cols + c] = from_f<T>(g / (1.0f + expf(-g)) * to_f(up[r * in_stride + c]));
      } else {
        static_assert(VEC * sizeof(T) == 16, "one 16-byte vector a thread");
        const uint4 g4 = *reinterpret_cast<const uint4*>(gate + r * in_stride + c * VEC);
        const uint4 u4 = *reinterpret_cast<const uint4*>(up + r * in_stride + c * VEC);
        T g[VEC], u[VEC], o[VEC];
        memcpy(static_cast<void*>(g), &g4, 16);
        memcpy(static_cast<void*>(u), &u4, 16);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float gf = to_f(g[e]);
          o[e] = from_f<T>(gf / (1.0f + expf(-gf)) * to_f(u[e]));
        }
        uint4 o4;
        memcpy(&o4, static_cast<const void*>(o), 16);
        *reinterpret_cast<uint4*>(out + r * cols + c * VEC) = o4;
      }
    }
  }
}

template <typename T>
__global__ void gelu_kernel(T* x, int64_t n) {
  CB_GRID_STRIDE(i, n) {
    const float v = to_f(x[i]);
    x[i] = from_f<T>(0.5f * v * erfcf(-v * 0.70710678118654752440f));
  }
}

template <typename T>
__global__ void add_kernel(T* y, const T* x, int64_t n) {
  CB_GRID_STRIDE(i, n) {
    y[i] = from_f<T>(to_f(y[i]) + to_f(x[i]));
  }
}

#undef CB_GRID_STRIDE

}  // namespace detail
}  // namespace cb::kernels::cuda
