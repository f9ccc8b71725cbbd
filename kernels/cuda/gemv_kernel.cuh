#pragma once
// The decode GEMV kernel (see gemv.h; launched by gemv.cu), in a header so that
// tests/unit/cuda/kernels_emulated_test.cc runs its source on the host (CB_SIMT_EMULATION
// swaps the inline PTX load for a plain one).
#include <cstring>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/gemv.h"

namespace cb::kernels::cuda {
namespace gemv_detail {

using detail::from_f;
using detail::to_f;

// 16 bytes of a weight row, read once: through the non-coherent path without allocating in
// L1, so x (read by every warp) stays there.
#ifdef CB_SIMT_EMULATION
inline uint4 load_stream(const uint4* p) {
  return *p;
}
inline void prefetch_l2(const void*) {}
inline void prefetch_l2_bulk(const void*, uint32_t) {}
inline void grid_dependency_wait() {}  // one grid at a time: nothing to wait for
#else
// Asks L2 for the line holding p (no register, no effect on results; how much of the 128-byte
// line it fills, one 32-byte sector or more, is L2's choice).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(__cvta_generic_to_global(p)));
}
// Asks L2 for `bytes` bytes from p (p 16-byte aligned, bytes a multiple of 16; no register, no
// effect on results): on sm_90 bulk prefetches (cp.async.bulk.prefetch.L2: the range itself,
// whatever L2's fetch granularity) of at most kBulkPrefetchMax bytes each, since ptxas 13.0
// encodes the size as a 16-bit count of 16-byte units; before sm_90 one prefetch.global.L2 per
// 32-byte sector. (kernels/cuda l2_prefetch.)
constexpr uint32_t kBulkPrefetchMax = 0xffff0;
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
  const char* c = static_cast<const char*>(p);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  for (uint64_t off = 0; off < bytes; off += kBulkPrefetchMax) {
    const uint64_t left = bytes - off;
    const uint32_t n = static_cast<uint32_t>(left < kBulkPrefetchMax ? left : kBulkPrefetchMax);
    asm volatile(
        "cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(__cvta_generic_to_global(c + off)),
        "r"(n));
  }
#else
  for (uint64_t off = 0; off < bytes; off += 32) prefetch_l2(c + off);
#endif
}
// Programmatic dependent launch (sm_90): returns once the grid this one was launched after has
// completed and its writes are visible; at once for a grid launched without the attribute.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}
#endif  // CB_SIMT_EMULATION

// With programmatic dependent launch (PDL true; the launcher sets the attribute), a GEMV may
// start while the kernel before it finishes: it asks L2 for the first vectors of its weight
// rows (which no kernel writes), then waits for that kernel before touching x or y.
template <bool PDL>
__device__ __forceinline__ void prefetch_then_wait(const uint4* w1, const uint4* w2, int lane,
                                                   int64_t nvec) {
  if constexpr (PDL) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (lane % 8 == 0 && lane + 32 * k < nvec) {  // one request per 128-byte line
        prefetch_l2(w1 + lane + 32 * k);
        if (w2 != nullptr) prefetch_l2(w2 + lane + 32 * k);
      }
    }
    grid_dependency_wait();
    detail::allow_dependent_launch();  // the next GEMV may start as this one's blocks run
  }
}

// acc[b] += w4 . x[b][v * 8 .. v * 8 + 8) for every row b of x (rows `in` apart). The 16-byte
// vectors are copied into arrays of T (memcpy, which nvcc turns into register moves: the
// same PTX instructions as reading them through a T pointer, which is undefined behaviour
// and which g++ -O2 indeed miscompiles in the host emulation).
template <typename T, int NB>
__device__ __forceinline__ void dot8(const uint4& w4, const T* __restrict__ x, int64_t in,
                                     int64_t v, float (&acc)[NB]) {
  T w[8];
  memcpy(static_cast<void*>(w), &w4, 16);
  float wf[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) wf[e] = to_f(w[e]);
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const uint4 x4 = __ldg(reinterpret_cast<const uint4*>(x + b * in) + v);
    T xv[8];
    memcpy(static_cast<void*>(xv), &x4, 16);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[b] = fmaf(wf[e], to_f(xv[e]), acc[b]);
  }
}

// ga[b] += g4 . x[b][v * 8 ..) and ua[b] += u4 . x[b][v * 8 ..): two weight rows against the
// same 16 bytes of x, read once.
template <typename T, int NB>
__device__ __forceinline__ void dot8_pair(const uint4& g4, const uint4& u4, const T* __restrict__ x,
                                          int64_t in, int64_t v, float (&ga)[NB], float (&ua)[NB]) {
  T g[8], u[8];
  memcpy(static_cast<void*>(g), &g4, 16);
  memcpy(static_cast<void*>(u), &u4, 16);
  float gf[8], uf[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    gf[e] = to_f(g[e]);
    uf[e] = to_f(u[e]);
  }
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const uint4 x4 = __ldg(reinterpret_cast<const uint4*>(x + b * in) + v);
    T xv[8];
    memcpy(static_cast<void*>(xv), &x4, 16);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float xf = to_f(xv[e]);
      ga[b] = fmaf(gf[e], xf, ga[b]);
      ua[b] = fmaf(uf[e], xf, ua[b]);
    }
  }
}

// The 0-3 vectors of a weight row a lane has left after the four-vector loops (v + 96 >= nvec),
// loaded together: one round trip to memory instead of one each. A down projection's rows of
// 11008 elements (1376 = 10 * 128 + 96 vectors) leave every lane three, which a loop of single
// loads fetched one after another while the whole grid waited. Slots past the row stay zero.
__device__ __forceinline__ void load_tail(const uint4* row, int64_t v, int64_t nvec,
                                          uint4 (&r)[3]) {
#pragma unroll
  for (int k = 0; k < 3; ++k) r[k] = v + 32 * k < nvec ? load_stream(row + v + 32 * k) : uint4{};
}

template <int NB>
__device__ __forceinline__ void warp_sum(float (&acc)[NB]) {
#pragma unroll
  for (int b = 0; b < NB; ++b) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], o);
  }
}

// grid gemv_blocks(out), kGemvWarps * 32 threads: warp w of block b computes output row
// b * kGemvWarps + w for all NB rows of x. DEEP: launch bounds of kGemvDeepBlocksPerSm blocks an
// SM (GemmWtParams::deep; 0 leaves them unset, as the default has always compiled).
template <typename T, int NB, bool PDL = false, bool DEEP = false>
__global__ void __launch_bounds__(kGemvWarps * 32, DEEP ? kGemvDeepBlocksPerSm : 0)
    gemv_wt_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t in,
                   int64_t out, bool accumulate) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (row >= out) return;
  const auto* wr = reinterpret_cast<const uint4*>(w + row * in);
  const int64_t nvec = in / 8;
  prefetch_then_wait<PDL>(wr, nullptr, lane, nvec);
  float acc[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) acc[b] = 0.0f;
  int64_t v = lane;
  for (; v + 96 < nvec; v += 128) {  // four vectors in flight per lane
    const uint4 a0 = load_stream(wr + v), a1 = load_stream(wr + v + 32),
                a2 = load_stream(wr + v + 64), a3 = load_stream(wr + v + 96);
    dot8<T, NB>(a0, x, in, v, acc);
    dot8<T, NB>(a1, x, in, v + 32, acc);
    dot8<T, NB>(a2, x, in, v + 64, acc);
    dot8<T, NB>(a3, x, in, v + 96, acc);
  }
  uint4 t[3];
  load_tail(wr, v, nvec, t);
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    if (v + 32 * k < nvec) dot8<T, NB>(t[k], x, in, v + 32 * k, acc);
  }
  warp_sum<NB>(acc);
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      T* yp = y + b * out + row;
      *yp = from_f<T>(accumulate ? acc[b] + to_f(*yp) : acc[b]);
    }
  }
}

// LLaMA's gate and up layers and their SwiGLU in one launch (gemv.h launch_gemv_swiglu):
// y[b][j] = silu(x[b] . wg[j]) * (x[b] . wu[j]), each product rounded to T first, as
// launch_swiglu reads them from the two GEMVs' outputs. Grid gemv_blocks(out), kGemvWarps * 32
// threads: warp w of block b computes output j = b * kGemvWarps + w, four vectors of each of
// its two weight rows in flight per lane.
template <typename T, int NB, bool PDL = false>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_swiglu_kernel(const T* __restrict__ x, const T* __restrict__ wg, const T* __restrict__ wu,
                       T* __restrict__ y, int64_t in, int64_t out) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (row >= out) return;
  const auto* gr = reinterpret_cast<const uint4*>(wg + row * in);
  const auto* ur = reinterpret_cast<const uint4*>(wu + row * in);
  const int64_t nvec = in / 8;
  prefetch_then_wait<PDL>(gr, ur, lane, nvec);
  float ga[NB], ua[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) ga[b] = ua[b] = 0.0f;
  int64_t v = lane;
  for (; v + 96 < nvec; v += 128) {
    uint4 g4[4], u4[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) g4[k] = load_stream(gr + v + 32 * k);
#pragma unroll
    for (int k = 0; k < 4; ++k) u4[k] = load_stream(ur + v + 32 * k);
#pragma unroll
    for (int k = 0; k < 4; ++k) dot8_pair<T, NB>(g4[k], u4[k], x, in, v + 32 * k, ga, ua);
  }
  uint4 tg[3], tu[3];
  load_tail(gr, v, nvec, tg);
  load_tail(ur, v, nvec, tu);
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    if (v + 32 * k < nvec) dot8_pair<T, NB>(tg[k], tu[k], x, in, v + 32 * k, ga, ua);
  }
  warp_sum<NB>(ga);
  warp_sum<NB>(ua);
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const float g = to_f(from_f<T>(ga[b])), u = to_f(from_f<T>(ua[b]));
      y[b * out + row] = from_f<T>(g / (1.0f + expf(-g)) * u);
    }
  }
}

}  // namespace gemv_detail
}  // namespace cb::kernels::cuda
