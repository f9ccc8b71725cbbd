// The launch fusions' kernel sources run on the host (tests/unit/cuda/simt_emulator.h), without
// a GPU: the gate|up GEMV with its SwiGLU (gemv_kernel.cuh gemv_swiglu_kernel), the SwiGLU over
// the halves of a fused gate|up GEMM's rows (activation_kernel.cuh swiglu_rows_kernel) and RoPE
// with the KV append (kv_restore_kernel.cuh rope_kv_append_kernel). Each must write exactly
// what the launches it replaces write, bit for bit (those kernels are checked against
// kernels/cpu in kernels_emulated_test.cc and on the GPU), and each is also compared with
// kernels/cpu directly. The math library is the host's: the GPU parity tests remain the check of
// the device's arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/kv_layout.h"
#include "kernels/cuda/kv_restore.h"
#include "kernels/cuda/storage.h"
#include "tests/unit/cuda/cuda_test_util.h"
// Last: the emulator defines CUDA's keywords and built-in variables as macros.
#include "tests/unit/cuda/simt_emulator.h"
//
#include "kernels/cuda/activation_kernel.cuh"
#include "kernels/cuda/gemv_kernel.cuh"
#include "kernels/cuda/kv_restore_kernel.cuh"
#include "kernels/cuda/rope_kernel.cuh"
#include "tests/unit/cuda/emulated_values.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::expect_close;
using cb::cuda_test::rel_tol;
using cb::cuda_test::round_to;
using cb::emulated::aligned16;
using cb::emulated::Aligned16;
using cb::emulated::as_float;
using cb::emulated::as_floats;
using cb::emulated::launch_elementwise;
using cb::emulated::nan_value;
using cb::emulated::storage_of;
using cb::emulated::to_storage;
using cb::emulated::uniform;
using kc::Storage;

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// SwiGLU over rows of a fused gate|up output [rows, 2 * cols] into [rows, cols], with the
// launcher's grid and with fewer y blocks than rows (the loop over rows): the flat kernel's
// values on the halves copied out, and kernels/cpu swiglu's.
template <typename T>
void check_swiglu_rows(int64_t rows, int64_t cols) {
  constexpr Storage st = storage_of<T>();
  const std::string what = std::string(cb::cuda_test::storage_name(st)) + " " +
                           std::to_string(rows) + "x" + std::to_string(cols);
  const std::vector<float> gu = uniform(static_cast<size_t>(rows * 2 * cols), 9, -6, 6, st);
  std::vector<float> g(static_cast<size_t>(rows * cols)), u(g.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      g[static_cast<size_t>(r * cols + c)] = gu[static_cast<size_t>(r * 2 * cols + c)];
      u[static_cast<size_t>(r * cols + c)] = gu[static_cast<size_t>(r * 2 * cols + cols + c)];
    }
  }
  const std::vector<T> dgu = to_storage<T>(gu), dg = to_storage<T>(g), du = to_storage<T>(u);
  std::vector<T> flat(g.size(), nan_value<T>());
  const int64_t n = rows * cols;
  launch_elementwise(n,
                     [&] { kc::detail::swiglu_kernel<T>(dg.data(), du.data(), flat.data(), n); });
  std::vector<float> want(g.size());
  cb::kernels::cpu::swiglu(g.data(), u.data(), want.data(), n);
  for (float& v : want) v = round_to(st, v);
  expect_close(as_floats(flat), want, rel_tol(st), 1e-3f, "flat swiglu " + what);
  // Element by element, and (fp16/bf16, whole vectors) in 16-byte vectors.
  const auto run = [&](auto vec, unsigned gy) {
    constexpr int kVec = decltype(vec)::value;
    const int64_t groups = cols / kVec;
    const unsigned gx = static_cast<unsigned>(std::min<int64_t>((groups + 255) / 256, 1024));
    const Aligned16<T> in = aligned16<T>(gu);
    std::vector<uint4> words(static_cast<size_t>(rows * cols) * sizeof(T) / 16 + 1);
    T* out = reinterpret_cast<T*>(words.data());
    std::fill(out, out + rows * cols, nan_value<T>());
    cb::simt::Emulator::get().launch({gx, gy, 1}, {256, 1, 1}, 0, [&] {
      kc::detail::swiglu_rows_kernel<T, kVec>(in.get(), in.get() + cols, out, rows, cols, 2 * cols);
    });
    return std::vector<T>(out, out + rows * cols);
  };
  for (unsigned gy : {static_cast<unsigned>(rows), 2u}) {
    EXPECT_TRUE(same_bits(run(std::integral_constant<int, 1>{}, gy), flat))
        << what << " grid.y " << gy;
    if constexpr (!std::is_same<T, float>::value) {
      if (cols % 8 == 0) {
        EXPECT_TRUE(same_bits(run(std::integral_constant<int, 8>{}, gy), flat))
            << what << " in vectors, grid.y " << gy;
      }
    }
  }
}

TEST(CudaFusedKernelsEmulated, SwigluRowsOfAFusedGateUpOutputAreTheFlatKernelsValues) {
  for (int64_t cols : {1, 255, 296, 2056}) {  // within a block, a block and a bit, vectors
    check_swiglu_rows<float>(5, cols);
    check_swiglu_rows<__half>(3, cols);
    check_swiglu_rows<__nv_bfloat16>(4, cols);
  }
}

// The gate|up GEMV with its SwiGLU for NB rows: bit for bit the two plain GEMVs and the flat
// SwiGLU it replaces, and within rounding of kernels/cpu (matmul_wt, each product rounded,
// swiglu).
template <typename T, int NB>
void check_gemv_swiglu(int64_t in, int64_t out) {
  constexpr Storage st = storage_of<T>();
  const std::string what = std::to_string(NB) + "x" + std::to_string(in) + "x" +
                           std::to_string(out) + " " + cb::cuda_test::storage_name(st);
  const uint32_t seed = static_cast<uint32_t>(in * 7 + out + NB);
  const std::vector<float> x = uniform(static_cast<size_t>(NB * in), seed, -1, 1, st);
  // gate's rows, then up's: the fused matrix the model holds.
  const std::vector<float> w =
      uniform(static_cast<size_t>(2 * out * in), seed + 1, -0.25f, 0.25f, st);
  const Aligned16<T> dx = aligned16<T>(x), dw = aligned16<T>(w);
  const T* wg = dw.get();
  const T* wu = dw.get() + out * in;
  const size_t ny = static_cast<size_t>(NB * out);
  std::vector<T> yg(ny, nan_value<T>()), yu(ny, nan_value<T>()), two(ny, nan_value<T>());
  const cb::simt::Dim3 grid{kc::gemv_blocks(out), 1, 1}, block{kc::kGemvWarps * 32, 1, 1};
  auto& emu = cb::simt::Emulator::get();
  emu.launch(grid, block, 0, [&] {
    kc::gemv_detail::gemv_wt_kernel<T, NB>(dx.get(), wg, yg.data(), in, out, false);
  });
  emu.launch(grid, block, 0, [&] {
    kc::gemv_detail::gemv_wt_kernel<T, NB>(dx.get(), wu, yu.data(), in, out, false);
  });
  const int64_t n = NB * out;
  launch_elementwise(n, [&] { kc::detail::swiglu_kernel<T>(yg.data(), yu.data(), two.data(), n); });
  std::vector<T> y(ny, nan_value<T>());
  emu.launch(grid, block, 0, [&] {
    kc::gemv_detail::gemv_swiglu_kernel<T, NB>(dx.get(), wg, wu, y.data(), in, out);
  });
  EXPECT_TRUE(same_bits(y, two)) << what << ": not the unfused launches' values";
  std::vector<T> y_pdl(ny, nan_value<T>());  // its PDL form (prefetch and wait no-ops here)
  emu.launch(grid, block, 0, [&] {
    kc::gemv_detail::gemv_swiglu_kernel<T, NB, true>(dx.get(), wg, wu, y_pdl.data(), in, out);
  });
  EXPECT_TRUE(same_bits(y_pdl, y)) << what << ": PDL form";

  std::vector<float> a(ny), b(ny), want(ny);
  cb::kernels::cpu::matmul_wt(x.data(), w.data(), a.data(), NB, in, out);
  cb::kernels::cpu::matmul_wt(x.data(), w.data() + out * in, b.data(), NB, in, out);
  for (float& v : a) v = round_to(st, v);
  for (float& v : b) v = round_to(st, v);
  cb::kernels::cpu::swiglu(a.data(), b.data(), want.data(), n);
  // As the GEMV test: errors scale with a row's typical magnitude; a product rounded the other
  // way by a different summation order moves the result by about one rounding of it.
  const float tol = st == Storage::F16 ? 4e-3f : 3e-2f;
  const float mag = 0.25f * std::sqrt(static_cast<float>(in)) + 0.1f;
  for (size_t i = 0; i < ny; ++i) {
    ASSERT_LE(std::fabs(as_float(y[i]) - want[i]), tol * (std::fabs(want[i]) + mag))
        << what << " at " << i << ": got " << as_float(y[i]) << " want " << want[i];
  }
}

// Rows shorter than a warp's 32 vectors (136), with a remainder after the 4-way unroll (1032,
// 4104), output counts not a multiple of the 8 warps a block, 1-4 rows of x.
TEST(CudaFusedKernelsEmulated, GemvSwigluIsTheTwoGemvsAndSwigluItReplaces) {
  check_gemv_swiglu<__half, 1>(4104, 37);
  check_gemv_swiglu<__half, 1>(1792, 9);         // three vectors left for every lane
  check_gemv_swiglu<__nv_bfloat16, 2>(1576, 6);  // three or two
  check_gemv_swiglu<__nv_bfloat16, 2>(136, 9);
  check_gemv_swiglu<__half, 3>(1032, 20);
  check_gemv_swiglu<__nv_bfloat16, 4>(520, 16);
  check_gemv_swiglu<__half, 4>(8, 5);
}

// RoPE and the KV append in one launch, on fused QKV rows (q_heads of Q, then K's and V's
// heads, rows `pad` elements longer than that) of two sequences (row r: sequence r % 2, slot
// 30 + r / 2, rotated to position 1000 + 3 r): Q and the pools bit for bit what launch_rope on
// Q and K followed by launch_kv_append write, K and V left pre-RoPE in the rows, and Q against
// kernels/cpu rope. Pools start as NaN, so a stray or missing write shows.
template <typename T>
void check_rope_kv_append(int64_t n, int64_t qh, int64_t kvh, int64_t hd, int64_t rope_dims,
                          bool interleaved, int64_t bs) {
  constexpr Storage st = storage_of<T>();
  const int64_t pad = 8, stride = (qh + 2 * kvh) * hd + pad, kvd = kvh * hd;
  const std::string what = std::string(cb::cuda_test::storage_name(st)) + " n " +
                           std::to_string(n) + " heads " + std::to_string(qh) + "/" +
                           std::to_string(kvh) + " head_dim " + std::to_string(hd) + " rope_dims " +
                           std::to_string(rope_dims) + (interleaved ? " interleaved" : " half") +
                           " block " + std::to_string(bs);
  const int64_t slot0 = 30, nb = (slot0 + n / 2 + 1 + bs - 1) / bs, pool_blocks = 2 * nb + 1;
  std::vector<int32_t> tables(static_cast<size_t>(2 * nb));
  for (int64_t b = 0; b < nb; ++b) {  // the two sequences' blocks interleaved, in reverse
    tables[static_cast<size_t>(b)] = static_cast<int32_t>(2 * (nb - 1 - b) + 1);
    tables[static_cast<size_t>(nb + b)] = static_cast<int32_t>(2 * b);
  }
  std::vector<int32_t> seq(static_cast<size_t>(n)), slot(seq.size()), pos(seq.size());
  for (int64_t r = 0; r < n; ++r) {
    seq[static_cast<size_t>(r)] = static_cast<int32_t>(r % 2);
    slot[static_cast<size_t>(r)] = static_cast<int32_t>(slot0 + r / 2);
    pos[static_cast<size_t>(r)] = static_cast<int32_t>(1000 + 3 * r);
  }
  const kc::PagedView view{tables.data(), bs, kvd};
  const size_t pool = static_cast<size_t>(pool_blocks * bs * kvd);
  const std::vector<float> rows =
      uniform(static_cast<size_t>(n * stride), static_cast<uint32_t>(n + qh * 3 + hd), -2, 2, st);

  // The two launches the fusion replaces.
  std::vector<T> x2 = to_storage<T>(rows);
  std::vector<T> kp2(pool, nan_value<T>()), vp2(pool, nan_value<T>());
  const int64_t chunks =
      (n + kc::detail::kRopeTokensPerThread - 1) / kc::detail::kRopeTokensPerThread;
  launch_elementwise(chunks * (qh + kvh) * (rope_dims / 2), [&] {
    kc::detail::rope_kernel<T>(x2.data(), pos.data(), n, qh + kvh, hd, rope_dims / 2, rope_dims,
                               stride, 10000.0, interleaved);
  });
  launch_elementwise(n * kvd, [&] {
    kc::detail::kv_append_kernel<T>(x2.data() + qh * hd, x2.data() + (qh + kvh) * hd, stride,
                                    kp2.data(), vp2.data(), view, 0, n, seq.data(), slot.data(),
                                    nb);
  });

  std::vector<T> x = to_storage<T>(rows);
  const std::vector<T> before = x;
  std::vector<T> kp(pool, nan_value<T>()), vp(pool, nan_value<T>());
  launch_elementwise(chunks * (qh * (rope_dims / 2) + kvh * (hd / 2)), [&] {
    kc::detail::rope_kv_append_kernel<T>(x.data(), pos.data(), n, qh, kvh, hd, rope_dims, stride,
                                         10000.0, interleaved, kp.data(), vp.data(), view,
                                         seq.data(), slot.data(), nb);
  });
  EXPECT_TRUE(same_bits(kp, kp2)) << what << ": K pool";
  EXPECT_TRUE(same_bits(vp, vp2)) << what << ": V pool";
  std::vector<float> q_want(static_cast<size_t>(n * qh * hd));
  for (int64_t r = 0; r < n; ++r) {
    const size_t o = static_cast<size_t>(r * stride);
    // Q as the separate RoPE leaves it; K, V and the padding as they were (pre-RoPE).
    ASSERT_EQ(std::memcmp(&x[o], &x2[o], static_cast<size_t>(qh * hd) * sizeof(T)), 0)
        << what << ": Q of row " << r;
    ASSERT_EQ(
        std::memcmp(&x[o + static_cast<size_t>(qh * hd)], &before[o + static_cast<size_t>(qh * hd)],
                    static_cast<size_t>(stride - qh * hd) * sizeof(T)),
        0)
        << what << ": K, V or padding of row " << r << " changed";
    std::copy(rows.begin() + static_cast<std::ptrdiff_t>(o),
              rows.begin() + static_cast<std::ptrdiff_t>(o + static_cast<size_t>(qh * hd)),
              q_want.begin() + static_cast<std::ptrdiff_t>(r * qh * hd));
  }
  cb::kernels::cpu::rope(
      q_want.data(), pos.data(), n, qh, hd, rope_dims, 10000.0f,
      interleaved ? cb::kernels::cpu::Rope::Interleaved : cb::kernels::cpu::Rope::RotateHalf);
  std::vector<float> q_got(q_want.size());
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < qh * hd; ++j) {
      q_got[static_cast<size_t>(r * qh * hd + j)] =
          as_float(x[static_cast<size_t>(r * stride + j)]);
    }
  }
  for (float& v : q_want) v = round_to(st, v);
  expect_close(q_got, q_want, rel_tol(st), 1e-2f, what + " Q against kernels/cpu");
}

TEST(CudaFusedKernelsEmulated, RopeKvAppendWritesWhatRopeThenAppendWrite) {
  for (bool interleaved : {true, false}) {
    for (int64_t hd : {64, 128}) {
      for (int64_t rope_dims : {hd, hd / 2}) {  // full and partial rotation
        check_rope_kv_append<float>(13, 4, 4, hd, rope_dims, interleaved, 16);
        check_rope_kv_append<__half>(13, 8, 2, hd, rope_dims, interleaved, 1);
        check_rope_kv_append<__nv_bfloat16>(3, 8, 1, hd, rope_dims, interleaved, 16);  // MQA
      }
    }
  }
}

}  // namespace
