// The launch fusions' kernel sources run on the host (tests/unit/cuda/simt_emulator.h), without
// a GPU: the gate|up GEMV with its SwiGLU (gemv_kernel.cuh gemv_swiglu_kernel), the SwiGLU over
// the halves of a fused gate|up GEMM's rows (activation_kernel.cuh swiglu_rows_kernel) and RoPE
// with the KV append (kv_restore_kernel.cuh rope_kv_append_kernel), and the decode attention
// kernel with RoPE and the append folded in (attention_decode_kernel.cuh, kRope). Each must write
// exactly what the launches it replaces write, bit for bit (those kernels are checked against
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
#include "kernels/cuda/attention.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/kv_layout.h"
#include "kernels/cuda/kv_restore.h"
#include "kernels/cuda/storage.h"
#include "tests/unit/cuda/cuda_test_util.h"
// Last: the emulator defines CUDA's keywords and built-in variables as macros.
#include "tests/unit/cuda/simt_emulator.h"
//
#include "kernels/cuda/activation_kernel.cuh"
#include "kernels/cuda/attention_decode_kernel.cuh"
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

// Decode attention with RoPE and the append folded in (PagedAttentionParams::rope_pos), for one
// row per sequence over histories of 1, 40 and 300 keys (the new key the last), rotated to
// positions 5000 + 7 r that are not the slots: the output and both pools bit for bit what
// rope_kv_append_kernel followed by the plain decode kernel write, the QKV rows untouched. The
// pools' own slots start as NaN in both runs, so a key read from the pool instead of the row,
// or a missing write, shows; splits merged in the kernel (counters) or by the combine kernel.
// (Bit for bit here, with the host's math library and one compiler for both paths; the GPU
// test of the model path compares with kernels/cpu.)
template <typename T, int HD>
void check_decode_rope(int64_t nh, int64_t nkv, int64_t bs, int64_t window, int64_t splits,
                       bool merge, int64_t rope_dims, bool interleaved) {
  constexpr Storage st = storage_of<T>();
  const std::vector<int64_t> lens = {1, 40, 300};
  const int64_t rows = static_cast<int64_t>(lens.size()), kvd = nkv * HD;
  const int64_t stride = (nh + 2 * nkv) * HD + 8;  // padded rows, still 16-byte aligned
  const std::string what =
      std::string(cb::cuda_test::storage_name(st)) + " hd " + std::to_string(HD) + " heads " +
      std::to_string(nh) + "/" + std::to_string(nkv) + " block " + std::to_string(bs) + " window " +
      std::to_string(window) + " splits " + std::to_string(splits) + (merge ? " merged" : "") +
      " rope_dims " + std::to_string(rope_dims) + (interleaved ? " interleaved" : " half");
  const int64_t nb = (300 + bs - 1) / bs;  // blocks a sequence's table holds
  std::vector<int32_t> tables(static_cast<size_t>(rows * nb)), q_pos(lens.size()),
      q_seq(lens.size()), n_ctx(lens.size()), rope_pos(lens.size());
  for (int64_t r = 0; r < rows; ++r) {  // the sequences' blocks interleaved, in reverse
    for (int64_t b = 0; b < nb; ++b) {
      tables[static_cast<size_t>(r * nb + b)] = static_cast<int32_t>((nb - 1 - b) * rows + r);
    }
    q_seq[static_cast<size_t>(r)] = static_cast<int32_t>(r);
    n_ctx[static_cast<size_t>(r)] = static_cast<int32_t>(lens[static_cast<size_t>(r)]);
    q_pos[static_cast<size_t>(r)] = static_cast<int32_t>(lens[static_cast<size_t>(r)] - 1);
    rope_pos[static_cast<size_t>(r)] = static_cast<int32_t>(5000 + 7 * r);
  }
  const size_t pool = static_cast<size_t>(rows * nb * bs * kvd);
  std::vector<T> kp0 = to_storage<T>(uniform(pool, static_cast<uint32_t>(HD + nh + bs), -1, 1, st));
  std::vector<T> vp0 =
      to_storage<T>(uniform(pool, static_cast<uint32_t>(HD + nh + bs + 1), -1, 1, st));
  for (int64_t r = 0; r < rows; ++r) {  // the rows' own slots: not yet written
    const int64_t slot = q_pos[static_cast<size_t>(r)];
    const int64_t at = (tables[static_cast<size_t>(r * nb + slot / bs)] * bs + slot % bs) * kvd;
    std::fill_n(kp0.begin() + at, kvd, nan_value<T>());
    std::fill_n(vp0.begin() + at, kvd, nan_value<T>());
  }
  const std::vector<T> qkv0 = to_storage<T>(
      uniform(static_cast<size_t>(rows * stride), static_cast<uint32_t>(nkv + window), -2, 2, st));
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  namespace dd = kc::decode_detail;
  const auto attend = [&](auto kernel, const std::vector<T>& q, std::vector<T>& kp,
                          std::vector<T>& vp, const dd::DecodeRope<T>& rope) {
    std::vector<T> out(static_cast<size_t>(rows * nh * HD), nan_value<T>());
    std::vector<float> ws(static_cast<size_t>(std::max<int64_t>(
                              kc::attention_workspace_floats(rows, nh, HD, splits), 1)),
                          std::nanf(""));
    std::vector<int32_t> counters(static_cast<size_t>(rows * nh), 0);
    cb::simt::Emulator::get().launch(
        {static_cast<unsigned>(rows), static_cast<unsigned>(nh), static_cast<unsigned>(splits)},
        {dd::kThreads, 1, 1}, 0, [&] {
          kernel(q.data(), stride, out.data(), q_pos.data(), q_seq.data(), nh, nkv, kp.data(),
                 vp.data(), tables.data(), nb, n_ctx.data(), bs, window, scale, splits,
                 splits > 1 ? ws.data() : nullptr, merge ? counters.data() : nullptr, rope);
        });
    EXPECT_TRUE(std::all_of(counters.begin(), counters.end(), [](int32_t n) { return n == 0; }))
        << what;
    if (splits > 1 && !merge) {
      cb::simt::Emulator::get().launch(
          {static_cast<unsigned>(rows), static_cast<unsigned>(nh), 1}, {32, 1, 1}, 0, [&] {
            kc::attention_detail::combine_splits_kernel<T>(ws.data(), out.data(), nh, HD, splits);
          });
    }
    return out;
  };

  // The two launches the fusion replaces.
  std::vector<T> x2 = qkv0, kp2 = kp0, vp2 = vp0;
  const int64_t chunks =
      (rows + kc::detail::kRopeTokensPerThread - 1) / kc::detail::kRopeTokensPerThread;
  launch_elementwise(chunks * (nh * (rope_dims / 2) + nkv * (HD / 2)), [&] {
    kc::detail::rope_kv_append_kernel<T>(x2.data(), rope_pos.data(), rows, nh, nkv, HD, rope_dims,
                                         stride, 10000.0, interleaved, kp2.data(), vp2.data(),
                                         kc::PagedView{tables.data(), bs, kvd}, q_seq.data(),
                                         q_pos.data(), nb);
  });
  const std::vector<T> out2 =
      attend(dd::paged_attention_decode_kernel<T, HD, false>, x2, kp2, vp2, dd::DecodeRope<T>{});

  // The emulator runs blocks one after another, so a block reading its row's own slot from
  // the pool would find the writer block's values there: the launch writes into copies here
  // and reads pools whose own slots stay NaN.
  std::vector<T> x = qkv0, kp = kp0, vp = vp0, kw = kp0, vw = vp0;
  dd::DecodeRope<T> rope;
  rope.positions = rope_pos.data();
  rope.k_new = x.data() + nh * HD;
  rope.v_new = x.data() + (nh + nkv) * HD;
  rope.k_pool = kw.data();
  rope.v_pool = vw.data();
  rope.rope_dims = rope_dims;
  rope.theta = 10000.0;
  rope.interleaved = interleaved;
  const std::vector<T> out =
      attend(dd::paged_attention_decode_kernel<T, HD, true>, x, kp, vp, rope);
  EXPECT_TRUE(same_bits(out, out2)) << what << ": output";
  EXPECT_TRUE(std::none_of(out.begin(), out.end(), [](T v) { return std::isnan(as_float(v)); }))
      << what << ": NaN in the output";
  EXPECT_TRUE(same_bits(kw, kp2)) << what << ": K pool";
  EXPECT_TRUE(same_bits(vw, vp2)) << what << ": V pool";
  EXPECT_TRUE(same_bits(kp, kp0) && same_bits(vp, vp0)) << what << ": the pools read changed";
  EXPECT_TRUE(same_bits(x, qkv0)) << what << ": the QKV rows changed";
}

TEST(CudaFusedKernelsEmulated, DecodeAttentionWithRopeIsRopeAppendThenDecodeAttention) {
  for (bool interleaved : {true, false}) {
    check_decode_rope<float, 64>(4, 2, 16, 0, 1, false, 64, interleaved);
    check_decode_rope<__nv_bfloat16, 64>(4, 2, 1, 0, 1, false, 64, interleaved);
    for (bool merge : {false, true}) {  // several splits: merged in the kernel or not
      check_decode_rope<float, 128>(2, 1, 1, 37, 3, merge, 64, interleaved);  // partial
      check_decode_rope<__half, 128>(4, 4, 16, 0, 8, merge, 128, interleaved);
      check_decode_rope<__half, 64>(4, 1, 16, 37, 3, merge, 32, interleaved);  // MQA, partial
      check_decode_rope<__nv_bfloat16, 128>(4, 2, 16, 300, 8, merge, 128, interleaved);
    }
  }
  // Rotations ending inside a lane's elements (interleaved pairs only: rotate-half needs whole
  // lanes), and short rotate-half prefixes.
  check_decode_rope<__half, 64>(4, 2, 16, 0, 3, true, 20, true);
  check_decode_rope<float, 128>(2, 1, 1, 0, 1, false, 34, true);
  check_decode_rope<__nv_bfloat16, 128>(4, 2, 16, 0, 3, true, 16, false);
  check_decode_rope<float, 64>(4, 4, 16, 37, 1, false, 8, false);
}

// What attention_uses_decode_rope accepts: rotate-half pairs must lie in whole lanes' 16 bytes,
// rows and the new K and V 16-byte aligned, rope_dims even and within the head, theta > 0.
TEST(CudaFusedKernelsEmulated, DecodeRopeNeedsWholeLanesAndAlignedRows) {
  alignas(16) static uint16_t buf[64];
  kc::PagedAttentionParams p;
  p.decode_kernel = true;
  p.tile_rows = kc::kAttentionTileRows;
  p.rows = p.n_tiles = 2;
  p.n_heads = 8;
  p.n_kv_heads = 2;
  p.head_dim = 128;
  p.storage = Storage::F16;
  p.k_pool = p.v_pool = buf;
  p.q_stride = (8 + 4) * 128;
  p.rope_pos = reinterpret_cast<const int32_t*>(buf);
  p.k_new = buf;
  p.v_new = buf + 8;  // 16 bytes on
  p.rope_dims = 128;
  p.rope_style = kc::RopeStyle::RotateHalf;
  EXPECT_TRUE(kc::attention_uses_decode_rope(p));
  p.rope_dims = 24;  // 12-element halves: not whole 8-element lanes
  EXPECT_FALSE(kc::attention_uses_decode_rope(p));
  p.rope_style = kc::RopeStyle::Interleaved;  // pairs inside a lane
  EXPECT_TRUE(kc::attention_uses_decode_rope(p));
  p.rope_dims = 130;
  EXPECT_FALSE(kc::attention_uses_decode_rope(p));
  p.rope_dims = 0;
  EXPECT_FALSE(kc::attention_uses_decode_rope(p));
  p.rope_dims = 64;
  p.theta = 0.0f;  // launch_rope_kv_append refuses it too
  EXPECT_FALSE(kc::attention_uses_decode_rope(p));
  p.theta = 10000.0f;
  p.v_new = buf + 1;  // 2 bytes on
  EXPECT_FALSE(kc::attention_uses_decode_rope(p));
  p.v_new = buf + 8;
  p.q_stride = 8 * 128 + 4;  // rows 8 bytes apart from a 16-byte boundary
  EXPECT_FALSE(kc::attention_uses_decode_rope(p));
  p.q_stride = 0;
  p.n_tiles = 1;  // a two-row tile: not the decode kernel
  EXPECT_FALSE(kc::attention_uses_decode_rope(p));
  p.n_tiles = 2;
  EXPECT_TRUE(kc::attention_uses_decode_rope(p));
  p.rope_pos = nullptr;
  EXPECT_FALSE(kc::attention_uses_decode_rope(p));
}

}  // namespace
