// Kernels' own sources run on the host by tests/unit/cuda/simt_emulator.h and compared with
// kernels/cpu, without a GPU: RoPE (kernels/cuda/rope_kernel.cuh), the KV restore, capture,
// append and gather kernels (kv_restore_kernel.cuh), the CUDA-core paged attention kernel
// with its split combiner (attention_kernel.cuh), the tensor-core attention kernels, wmma
// (attention_mma_kernel.cuh) and FlashAttention-2-style (attention_fa2_kernel.cuh), the decode
// GEMV (gemv_kernel.cuh) and its fusion with RMSNorm and SwiGLU (norm_gemv_kernel.cuh), RMSNorm
// and LayerNorm (norm_kernel.cuh), SwiGLU, GELU and the residual add (activation_kernel.cuh),
// the embedding gather (embedding_kernel.cuh) and the preset generator (preset_fill_kernel.cuh,
// bit for bit against lib/model), in the storage types each takes, launched with the
// launchers' own geometry. This checks their indexing (chunks, partial tiles, strided rows,
// paged blocks, splits), what they write and what they leave alone. The math library is the
// host's, so the GPU parity tests, which run where a GPU is present, remain the check of the
// device's arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/kv_layout.h"
#include "kernels/cuda/kv_restore.h"
#include "kernels/cuda/norm_gemv.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/storage.h"
#include "lib/model/model_source.h"
#include "lib/model/presets.h"
#include "lib/model/tensor_specs.h"
#include "tests/unit/cuda/cuda_test_util.h"
// Last: the emulator defines CUDA's keywords and built-in variables as macros. (The kernels'
// `#pragma unroll` is nvcc's: CMakeLists.txt lets the host compiler ignore it here.)
#include "tests/unit/cuda/simt_emulator.h"
//
#include "kernels/cuda/activation_kernel.cuh"
#include "kernels/cuda/attention_decode_kernel.cuh"
#include "kernels/cuda/attention_fa2_kernel.cuh"
#include "kernels/cuda/attention_kernel.cuh"
#include "kernels/cuda/attention_mma_kernel.cuh"
#include "kernels/cuda/embedding_kernel.cuh"
#include "kernels/cuda/gemv_kernel.cuh"
#include "kernels/cuda/kv_restore_kernel.cuh"
#include "kernels/cuda/norm_gemv_kernel.cuh"
#include "kernels/cuda/norm_kernel.cuh"
#include "kernels/cuda/preset_fill_kernel.cuh"
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
void check_rope(int64_t n, int64_t heads, int64_t head_dim, int64_t rope_dims, int64_t stride,
                bool interleaved) {
  constexpr Storage st = storage_of<T>();
  const std::string what = std::string(cb::cuda_test::storage_name(st)) +
                           (interleaved ? " interleaved" : " half") + " n " + std::to_string(n) +
                           " heads " + std::to_string(heads) + " head_dim " +
                           std::to_string(head_dim) + " rope_dims " + std::to_string(rope_dims) +
                           " stride " + std::to_string(stride);
  std::mt19937 rng(static_cast<uint32_t>(n * 131 + heads * 7 + head_dim + rope_dims));
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (auto& p : pos) p = static_cast<int32_t>(rng() % 1000000);  // restored, far apart
  pos[0] = 0;
  std::vector<float> x(static_cast<size_t>(n * stride));
  for (float& v : x) v = round_to(st, u(rng));
  // Reference: kernels/cpu rope on each row's heads; the rest of the row stays as it was.
  std::vector<float> want = x;
  for (int64_t t = 0; t < n; ++t) {
    cb::kernels::cpu::rope(
        want.data() + t * stride, pos.data() + t, 1, heads, head_dim, rope_dims, 10000.0f,
        interleaved ? cb::kernels::cpu::Rope::Interleaved : cb::kernels::cpu::Rope::RotateHalf);
  }
  std::vector<T> dx = to_storage<T>(x);
  const int64_t half = rope_dims / 2;
  const int64_t chunks =
      (n + kc::detail::kRopeTokensPerThread - 1) / kc::detail::kRopeTokensPerThread;
  launch_elementwise(chunks * heads * half, [&] {
    kc::detail::rope_kernel<T>(dx.data(), pos.data(), n, heads, head_dim, half, rope_dims, stride,
                               10000.0, interleaved);
  });
  for (float& v : want) v = round_to(st, v);
  expect_close(as_floats(dx), want, rel_tol(st), 1e-2f, what);
}

TEST(CudaKernelsEmulated, RopeSourceMatchesTheCpuReference) {
  for (bool interleaved : {true, false}) {
    for (int64_t head_dim : {64, 128}) {
      for (int64_t rope_dims : {head_dim, head_dim / 2}) {  // full and partial (Falcon/NeoX)
        // 13 tokens: a whole chunk of 8 and a partial one; Q and K heads of a fused row
        // (12 of the row's 16 heads) rotated in place, as the model calls it.
        check_rope<float>(13, 8, head_dim, rope_dims, 8 * head_dim, interleaved);
        check_rope<__half>(13, 8, head_dim, rope_dims, 8 * head_dim, interleaved);
        check_rope<__nv_bfloat16>(13, 8, head_dim, rope_dims, 8 * head_dim, interleaved);
        check_rope<float>(20, 12, head_dim, rope_dims, 16 * head_dim, interleaved);
        check_rope<__half>(3, 12, head_dim, rope_dims, 16 * head_dim, interleaved);
      }
    }
  }
}

// Restore of n pre-RoPE rows into a sequence's scattered blocks at slots pos0.., rotated to
// positions pos0 + rope_offset + t; then capture of strided rows, append of rows (one sequence,
// and a batch through per-row sequence and slot arrays) and gather back, each against a host
// reference. Pools start as NaN: an unwritten slot and a stray write both show.
template <typename T>
void check_kv(int64_t bs, bool interleaved, int64_t head_dim) {
  constexpr Storage st = storage_of<T>();
  const int64_t heads = 4, kvd = heads * head_dim, pos0 = 37, n = 41, rope_offset = 1000;
  const int64_t rope_dims = interleaved ? head_dim : head_dim / 2;
  const std::string what = std::string(cb::cuda_test::storage_name(st)) + " block " +
                           std::to_string(bs) + (interleaved ? " interleaved" : " half") +
                           " head_dim " + std::to_string(head_dim);
  // The sequence's blocks: every third block of the pool, in reverse order.
  const int64_t nb = (pos0 + n + bs - 1) / bs, pool_blocks = 3 * nb + 2;
  std::vector<int32_t> table(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b)
    table[static_cast<size_t>(b)] = static_cast<int32_t>(3 * (nb - 1 - b) + 1);
  const kc::PagedView view{table.data(), bs, kvd};
  const size_t pool = static_cast<size_t>(pool_blocks * bs * kvd);
  std::mt19937 rng(static_cast<uint32_t>(bs * 10 + head_dim + (interleaved ? 1 : 0)));
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> k(static_cast<size_t>(n * kvd)), v(k.size());
  for (float& x : k) x = round_to(st, u(rng));
  for (float& x : v) x = round_to(st, u(rng));
  std::vector<float> kr = k;
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    pos[static_cast<size_t>(t)] = static_cast<int32_t>(pos0 + rope_offset + t);
  cb::kernels::cpu::rope(
      kr.data(), pos.data(), n, heads, head_dim, rope_dims, 10000.0f,
      interleaved ? cb::kernels::cpu::Rope::Interleaved : cb::kernels::cpu::Rope::RotateHalf);

  std::vector<T> ks = to_storage<T>(k), vs = to_storage<T>(v);
  std::vector<T> kp(pool, nan_value<T>()), vp(pool, nan_value<T>());
  const int64_t chunks =
      (n + kc::detail::kRopeTokensPerThread - 1) / kc::detail::kRopeTokensPerThread;
  launch_elementwise(chunks * heads * (head_dim / 2), [&] {
    kc::detail::kv_restore_kernel<T>(ks.data(), vs.data(), kp.data(), vp.data(), view, pos0, n,
                                     heads, head_dim, rope_dims, rope_offset, 10000.0, interleaved);
  });
  std::vector<char> written(pool, 0);
  int bad = 0;
  for (int64_t t = 0; t < n && bad < 5; ++t) {
    for (int64_t j = 0; j < kvd; ++j) {
      const size_t o = static_cast<size_t>(kc::paged_offset(view, pos0 + t, j));
      written[o] = 1;
      const float want = round_to(st, kr[static_cast<size_t>(t * kvd + j)]);
      const float got = as_float(kp[o]);
      if (!(std::fabs(got - want) <= rel_tol(st) * (std::fabs(want) + 1e-2f)) && bad++ < 5) {
        ADD_FAILURE() << what << ": K of slot " << pos0 + t << " element " << j << " got " << got
                      << " want " << want;
      }
      if (as_float(vp[o]) != v[static_cast<size_t>(t * kvd + j)] && bad++ < 5) {
        ADD_FAILURE() << what << ": V of slot " << pos0 + t << " element " << j;
      }
    }
  }
  for (size_t o = 0; o < pool && bad < 5; ++o) {
    if (!written[o] && (!std::isnan(as_float(kp[o])) || !std::isnan(as_float(vp[o])))) {
      ++bad;
      ADD_FAILURE() << what << ": stray write at pool element " << o;
    }
  }

  // Gather the restored slots back: exactly what the pools hold.
  std::vector<T> gk(k.size(), nan_value<T>()), gv(v.size(), nan_value<T>());
  launch_elementwise(n * kvd, [&] {
    kc::detail::kv_gather_kernel<T>(kp.data(), vp.data(), view, pos0, n, gk.data(), gv.data());
  });
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < kvd; ++j) {
      const size_t o = static_cast<size_t>(kc::paged_offset(view, pos0 + t, j));
      const size_t r = static_cast<size_t>(t * kvd + j);
      ASSERT_EQ(as_float(gk[r]), as_float(kp[o])) << what << " gather K";
      ASSERT_EQ(as_float(gv[r]), as_float(vp[o])) << what << " gather V";
    }
  }

  // Capture of K and V columns out of fused [n, 3 * kvd] rows.
  std::vector<float> fused(static_cast<size_t>(n * 3 * kvd));
  for (float& x : fused) x = round_to(st, u(rng));
  std::vector<T> df = to_storage<T>(fused), ck(k.size(), nan_value<T>()),
                 cv(v.size(), nan_value<T>());
  launch_elementwise(n * kvd, [&] {
    kc::detail::kv_capture_kernel<T>(df.data() + kvd, df.data() + 2 * kvd, 3 * kvd, ck.data(),
                                     cv.data(), n, kvd);
  });
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < kvd; ++j) {
      const size_t s = static_cast<size_t>(t * kvd + j);
      ASSERT_EQ(as_float(ck[s]), fused[static_cast<size_t>(t * 3 * kvd + kvd + j)]) << what;
      ASSERT_EQ(as_float(cv[s]), fused[static_cast<size_t>(t * 3 * kvd + 2 * kvd + j)]) << what;
    }
  }

  // Batched append: row r of the fused rows into sequence row_seq[r] at slot row_slot[r]; two
  // sequences with their own tables (the second one's blocks: the pool's first blocks).
  std::vector<int32_t> tables(static_cast<size_t>(2 * nb), 0);
  std::copy(table.begin(), table.end(), tables.begin());
  for (int64_t b = 0; b < nb; ++b)
    tables[static_cast<size_t>(nb + b)] = static_cast<int32_t>(3 * b);
  std::vector<int32_t> row_seq(static_cast<size_t>(n)), row_slot(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    row_seq[static_cast<size_t>(r)] = static_cast<int32_t>(r % 2);
    row_slot[static_cast<size_t>(r)] = static_cast<int32_t>(pos0 + r / 2);
  }
  std::vector<T> ak(pool, nan_value<T>()), av(pool, nan_value<T>());
  const kc::PagedView batch_view{tables.data(), bs, kvd};
  launch_elementwise(n * kvd, [&] {
    kc::detail::kv_append_kernel<T>(df.data() + kvd, df.data() + 2 * kvd, 3 * kvd, ak.data(),
                                    av.data(), batch_view, 0, n, row_seq.data(), row_slot.data(),
                                    nb);
  });
  for (int64_t r = 0; r < n; ++r) {
    const kc::PagedView sv{tables.data() + (r % 2) * nb, bs, kvd};
    for (int64_t j = 0; j < kvd; ++j) {
      const size_t o = static_cast<size_t>(kc::paged_offset(sv, pos0 + r / 2, j));
      ASSERT_EQ(as_float(ak[o]), fused[static_cast<size_t>(r * 3 * kvd + kvd + j)]) << what;
      ASSERT_EQ(as_float(av[o]), fused[static_cast<size_t>(r * 3 * kvd + 2 * kvd + j)]) << what;
    }
  }
}

TEST(CudaKernelsEmulated, KvRestoreCaptureAppendGatherSourcesMatchTheHostReference) {
  for (int64_t bs : {1, 16, 32}) {
    for (bool interleaved : {true, false}) {
      for (int64_t head_dim : {64, 128}) {
        check_kv<float>(bs, interleaved, head_dim);
        check_kv<__half>(bs, interleaved, head_dim);
        check_kv<__nv_bfloat16>(bs, interleaved, head_dim);
      }
    }
  }
}

// Attention inputs in fp32 (rounded to the storage type) and kernels/cpu's output for
// sequences {n_ctx, n_new} in one launch: each sequence's blocks a random subset of one shared
// pool, q's rows inside fused QKV rows (q_stride apart), as the model has them.
struct AttentionCase {
  Storage st = Storage::F32;
  int64_t head_dim = 0, nh = 0, nkv = 0, bs = 0, window = 0, stride = 1, rows = 0, q_stride = 0;
  float scale = 1.0f;
  std::string what;
  std::vector<float> q_rows, k, v, want;
  std::vector<int32_t> q_pos, q_seq, flat, n_ctx;
};

AttentionCase make_attention_case(Storage st, int64_t head_dim, int64_t nh, int64_t nkv, int64_t bs,
                                  int64_t window,
                                  const std::vector<std::pair<int64_t, int64_t>>& seqs,
                                  uint32_t seed, const std::string& what) {
  AttentionCase c;
  c.st = st;
  c.head_dim = head_dim;
  c.nh = nh;
  c.nkv = nkv;
  c.bs = bs;
  c.window = window;
  c.what = what + " " + cb::cuda_test::storage_name(st) + " hd " + std::to_string(head_dim) +
           " heads " + std::to_string(nh) + "/" + std::to_string(nkv) + " block " +
           std::to_string(bs) + " window " + std::to_string(window);
  std::mt19937 rng(seed);
  int64_t blocks = 0;
  for (const auto& s : seqs) blocks += (s.first + bs - 1) / bs;
  std::vector<int32_t> perm(static_cast<size_t>(blocks + 2));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  int64_t used = 0;
  std::vector<std::vector<int32_t>> tables;
  for (const auto& s : seqs) {
    const int64_t nb = (s.first + bs - 1) / bs;
    tables.emplace_back(perm.begin() + used, perm.begin() + used + nb);
    used += nb;
    c.stride = std::max(c.stride, nb);
  }
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  c.k.resize(perm.size() * static_cast<size_t>(bs * nkv * head_dim));
  c.v.resize(c.k.size());
  for (float& x : c.k) x = round_to(st, u(rng));
  for (float& x : c.v) x = round_to(st, u(rng));
  c.flat.assign(seqs.size() * static_cast<size_t>(c.stride), 0);
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int64_t t = 0; t < seqs[s].second; ++t) {
      c.q_pos.push_back(static_cast<int32_t>(seqs[s].first - seqs[s].second + t));
      c.q_seq.push_back(static_cast<int32_t>(s));
    }
    std::copy(tables[s].begin(), tables[s].end(),
              c.flat.begin() + static_cast<int64_t>(s) * c.stride);
    c.n_ctx.push_back(static_cast<int32_t>(seqs[s].first));
  }
  c.rows = static_cast<int64_t>(c.q_pos.size());
  c.q_stride = (nh + 2 * nkv) * head_dim;
  c.q_rows.resize(static_cast<size_t>(c.rows * c.q_stride));
  std::vector<float> q(static_cast<size_t>(c.rows * nh * head_dim));
  for (float& x : c.q_rows) x = round_to(st, u(rng));
  for (int64_t r = 0; r < c.rows; ++r) {
    std::copy(c.q_rows.begin() + r * c.q_stride, c.q_rows.begin() + r * c.q_stride + nh * head_dim,
              q.begin() + r * nh * head_dim);
  }
  c.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  c.want.resize(q.size());
  int64_t row = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    cb::kernels::cpu::PagedAttention a;
    a.q = q.data() + row * nh * head_dim;
    a.out = c.want.data() + row * nh * head_dim;
    a.q_pos = c.q_pos.data() + row;
    a.n_q = seqs[s].second;
    a.n_heads = nh;
    a.n_kv_heads = nkv;
    a.head_dim = head_dim;
    a.k_pool = c.k.data();
    a.v_pool = c.v.data();
    a.block_table = tables[s].data();
    a.block_size = bs;
    a.n_ctx = seqs[s].first;
    a.window = window;
    a.scale = c.scale;
    cb::kernels::cpu::paged_attention(a);
    row += seqs[s].second;
  }
  return c;
}

// Each output row within rel_tol of its row's largest reference value; NaN (never written)
// fails. Reports the first 5 misses.
template <typename T>
void expect_attention_output(const AttentionCase& c, const std::vector<T>& out) {
  const float tol = rel_tol(c.st);
  const int64_t hd = c.head_dim;
  int bad = 0;
  for (int64_t r = 0; r < c.rows && bad < 5; ++r) {
    for (int64_t h = 0; h < c.nh; ++h) {
      const float* w = c.want.data() + (r * c.nh + h) * hd;
      float mag = 0;
      for (int64_t d = 0; d < hd; ++d) mag = std::max(mag, std::fabs(w[d]));
      for (int64_t d = 0; d < hd; ++d) {
        const float g = as_float(out[static_cast<size_t>((r * c.nh + h) * hd + d)]);
        if (!(std::fabs(g - w[d]) <= tol * (mag + 1e-3f)) && bad++ < 5) {
          ADD_FAILURE() << c.what << ": row " << r << " (pos " << c.q_pos[static_cast<size_t>(r)]
                        << ") head " << h << " dim " << d << ": got " << g << " want " << w[d];
        }
      }
    }
  }
}

// The CUDA-core attention kernel (tiles of 16 rows, keys in 32-slot tiles, splits combined by
// a second kernel), against kernels/cpu.
template <typename T, int HD>
void check_attention(int64_t head_dim, int64_t nh, int64_t nkv, int64_t bs, int64_t window,
                     int64_t splits, const std::vector<std::pair<int64_t, int64_t>>& seqs) {
  const AttentionCase c = make_attention_case(
      storage_of<T>(), head_dim, nh, nkv, bs, window, seqs,
      static_cast<uint32_t>(head_dim * 7 + nh + bs * 3 + window + splits * 11),
      std::string(HD == 0 ? "run-time head size" : "") + " splits " + std::to_string(splits));
  std::vector<T> dq = to_storage<T>(c.q_rows), dk = to_storage<T>(c.k), dv = to_storage<T>(c.v);
  std::vector<T> dout(c.want.size(), nan_value<T>());
  const std::vector<int32_t> tiles = kc::plan_attention_tiles(c.q_seq, kc::kAttentionTileRows);
  const int64_t n_tiles = static_cast<int64_t>(tiles.size() / 2);
  std::vector<float> ws(static_cast<size_t>(std::max<int64_t>(
                            kc::attention_workspace_floats(c.rows, nh, head_dim, splits), 1)),
                        std::nanf(""));
  namespace ad = kc::attention_detail;
  cb::simt::Emulator::get().launch(
      {static_cast<unsigned>(n_tiles), static_cast<unsigned>(nh), static_cast<unsigned>(splits)},
      {ad::kThreads, 1, 1}, 0, [&] {
        ad::paged_attention_kernel<T, HD>(dq.data(), c.q_stride, dout.data(), c.q_pos.data(),
                                          c.q_seq.data(), nh, nkv, static_cast<int>(head_dim),
                                          dk.data(), dv.data(), c.flat.data(), c.stride,
                                          c.n_ctx.data(), bs, window, c.scale, tiles.data(), splits,
                                          splits > 1 ? ws.data() : nullptr);
      });
  if (splits > 1) {
    cb::simt::Emulator::get().launch(
        {static_cast<unsigned>(c.rows), static_cast<unsigned>(nh), 1}, {32, 1, 1}, 0,
        [&] { ad::combine_splits_kernel<T>(ws.data(), dout.data(), nh, head_dim, splits); });
  }
  expect_attention_output(c, dout);
}

// Prefill after a paged prefix beside a fresh sequence (16-row tiles, partial ones), and decode
// rows over histories of 1 to 300 keys with the keys split over 1, 3 or 5 blocks; GQA and MQA,
// windows, block sizes 1 and 16, head sizes 64, 128 and 80 (the run-time head size).
TEST(CudaKernelsEmulated, CudaCoreAttentionSourceMatchesTheCpuReference) {
  const std::vector<std::pair<int64_t, int64_t>> prefill = {{75, 21}, {9, 9}};
  const std::vector<std::pair<int64_t, int64_t>> decode = {{1, 1}, {33, 1}, {300, 1}, {129, 1}};
  check_attention<float, 64>(64, 4, 2, 16, 0, 1, prefill);
  check_attention<__half, 128>(128, 2, 1, 1, 37, 1, prefill);
  check_attention<__nv_bfloat16, 64>(64, 4, 4, 16, 37, 1, prefill);
  check_attention<float, 0>(80, 2, 1, 16, 0, 1, prefill);
  check_attention<float, 64>(64, 4, 2, 16, 0, 3, decode);
  check_attention<__half, 128>(128, 2, 2, 1, 0, 5, decode);
  check_attention<__nv_bfloat16, 64>(64, 4, 1, 16, 37, 3, decode);
  check_attention<__half, 0>(80, 2, 1, 16, 37, 5, decode);
}

// The decode kernel (attention_decode_kernel.cuh: a block per row, head and split; groups of
// lanes on keys, 16 bytes a lane), with the split combiner, against kernels/cpu.
template <typename T, int HD>
void check_decode_attention(int64_t nh, int64_t nkv, int64_t bs, int64_t window, int64_t splits,
                            bool merge, const std::vector<std::pair<int64_t, int64_t>>& seqs) {
  const AttentionCase c = make_attention_case(
      storage_of<T>(), HD, nh, nkv, bs, window, seqs,
      static_cast<uint32_t>(HD * 5 + nh + bs * 7 + window + splits * 13),
      "decode kernel splits " + std::to_string(splits) + (merge ? " merged in the kernel" : ""));
  std::vector<T> dq = to_storage<T>(c.q_rows), dk = to_storage<T>(c.k), dv = to_storage<T>(c.v);
  std::vector<T> dout(c.want.size(), nan_value<T>());
  std::vector<float> ws(static_cast<size_t>(std::max<int64_t>(
                            kc::attention_workspace_floats(c.rows, nh, HD, splits), 1)),
                        std::nanf(""));
  // With counters the last split block of each row and head merges the splits (and leaves
  // its counter at zero); without, the combine kernel does.
  std::vector<int32_t> counters(static_cast<size_t>(c.rows * nh), 0);
  namespace dd = kc::decode_detail;
  cb::simt::Emulator::get().launch(
      {static_cast<unsigned>(c.rows), static_cast<unsigned>(nh), static_cast<unsigned>(splits)},
      {dd::kThreads, 1, 1}, 0, [&] {
        dd::paged_attention_decode_kernel<T, HD>(
            dq.data(), c.q_stride, dout.data(), c.q_pos.data(), c.q_seq.data(), nh, nkv, dk.data(),
            dv.data(), c.flat.data(), c.stride, c.n_ctx.data(), bs, window, c.scale, splits,
            splits > 1 ? ws.data() : nullptr, merge ? counters.data() : nullptr,
            dd::DecodeRope<T>{});
      });
  EXPECT_TRUE(std::all_of(counters.begin(), counters.end(), [](int32_t n) { return n == 0; }))
      << c.what;
  if (splits > 1 && !merge) {
    cb::simt::Emulator::get().launch(
        {static_cast<unsigned>(c.rows), static_cast<unsigned>(nh), 1}, {32, 1, 1}, 0, [&] {
          kc::attention_detail::combine_splits_kernel<T>(ws.data(), dout.data(), nh, HD, splits);
        });
  }
  expect_attention_output(c, dout);
}

// Decode rows over histories of 1 to 300 keys (shorter than a block's step of keys, a step and
// a partial one, several), one launch for all, keys split over 1, 3 or 8 blocks (some splits
// empty for the 1-key history), merged by the combine kernel or in the kernel; GQA and MQA,
// windows, block sizes 1 and 16; fp32, fp16, bf16 at head sizes 64 and 128 (1, 2 and 4 keys
// per warp read at once).
TEST(CudaKernelsEmulated, DecodeAttentionSourceMatchesTheCpuReference) {
  const std::vector<std::pair<int64_t, int64_t>> decode = {{1, 1}, {33, 1}, {300, 1}, {129, 1}};
  for (bool merge : {false, true}) {
    check_decode_attention<float, 64>(4, 2, 16, 0, 1, merge, decode);
    check_decode_attention<float, 128>(2, 1, 1, 37, 3, merge, decode);
    check_decode_attention<__half, 128>(2, 2, 1, 0, 8, merge, decode);
    check_decode_attention<__half, 64>(4, 1, 16, 37, 3, merge, decode);
    check_decode_attention<__nv_bfloat16, 64>(4, 4, 16, 0, 1, merge, decode);
    check_decode_attention<__nv_bfloat16, 128>(4, 2, 16, 300, 8, merge, decode);
  }
}

// A tensor-core kernel on 64-row tiles against kernels/cpu: the wmma one
// (attention_mma_kernel.cuh: keys in 32-slot tiles, wmma emulated with the whole tile in every
// lane) or, with FA2, the FlashAttention-2-style one (attention_fa2_kernel.cuh: keys in two
// 64-slot cp.async buffers, mma.sync and ldmatrix.trans emulated from the PTX fragment layouts).
template <typename T, int HD, bool FA2>
void check_tensor_core(int64_t nh, int64_t nkv, int64_t bs, int64_t window,
                       const std::vector<std::pair<int64_t, int64_t>>& seqs, uint32_t seed) {
  const AttentionCase c = make_attention_case(storage_of<T>(), HD, nh, nkv, bs, window, seqs, seed,
                                              FA2 ? "fa2" : "wmma");
  std::vector<T> dq = to_storage<T>(c.q_rows), dk = to_storage<T>(c.k), dv = to_storage<T>(c.v);
  std::vector<T> dout(c.want.size(), nan_value<T>());
  const std::vector<int32_t> tiles = kc::plan_attention_tiles(c.q_seq, kc::kAttentionMmaTileRows);
  namespace fd = kc::fa2_detail;
  namespace md = kc::mma_detail;
  const auto kernel =
      FA2 ? fd::paged_attention_fa2_kernel<T, HD> : md::paged_attention_mma_kernel<T, HD>;
  cb::simt::Emulator::get().launch(
      {static_cast<unsigned>(tiles.size() / 2), static_cast<unsigned>(nh), 1},
      {static_cast<unsigned>(FA2 ? fd::kFa2Threads : md::kMmaThreads), 1, 1},
      FA2 ? fd::Fa2Smem<HD>::bytes : md::MmaSmem<HD>::bytes, [&] {
        kernel(dq.data(), c.q_stride, dout.data(), c.q_pos.data(), c.q_seq.data(), nh, nkv,
               dk.data(), dv.data(), c.flat.data(), c.stride, c.n_ctx.data(), bs, window, c.scale,
               tiles.data());
      });
  expect_attention_output(c, dout);
}

// Prefill after a paged prefix (two 64-row tiles, the second partial) beside a fresh sequence
// shorter than a tile, in one launch; GQA and MQA, head sizes 64 and 128, block sizes 1 and 16,
// with and without a sliding window, fp16 and bf16. Seeds seed0 .. seed0 + 4.
template <bool FA2>
void check_tensor_core_cases(uint32_t seed0) {
  const std::vector<std::pair<int64_t, int64_t>> seqs = {{150, 80}, {20, 20}};
  check_tensor_core<__half, 64, FA2>(4, 2, 16, 0, seqs, seed0);
  check_tensor_core<__half, 64, FA2>(2, 1, 1, 37, seqs, seed0 + 1);
  check_tensor_core<__nv_bfloat16, 64, FA2>(2, 2, 16, 0, seqs, seed0 + 2);
  check_tensor_core<__half, 128, FA2>(2, 1, 16, 0, seqs, seed0 + 3);
  check_tensor_core<__nv_bfloat16, 128, FA2>(2, 2, 1, 37, seqs, seed0 + 4);
}

TEST(CudaKernelsEmulated, WmmaAttentionSourceMatchesTheCpuReference) {
  check_tensor_core_cases<false>(11);
}

// The same cases (keys in several 64-slot tiles here).
TEST(CudaKernelsEmulated, Fa2AttentionSourceMatchesTheCpuReference) {
  check_tensor_core_cases<true>(1);
}

// The decode GEMV for NB rows of x: y = x . w^T (or y += x . w^T) against matmul_wt.
template <typename T, int NB>
void check_gemv(int64_t in, int64_t out, bool accumulate) {
  constexpr Storage st = storage_of<T>();
  const std::string what = std::to_string(NB) + "x" + std::to_string(in) + "x" +
                           std::to_string(out) + " " + cb::cuda_test::storage_name(st) +
                           (accumulate ? " +=" : "");
  std::mt19937 rng(static_cast<uint32_t>(in * 3 + out + NB));
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(static_cast<size_t>(NB * in)), w(static_cast<size_t>(out * in));
  std::vector<float> y0(static_cast<size_t>(NB * out)), want(y0.size());
  for (float& v : x) v = round_to(st, u(rng));
  for (float& v : w) v = round_to(st, u(rng));
  for (float& v : y0) v = round_to(st, u(rng));
  cb::kernels::cpu::matmul_wt(x.data(), w.data(), want.data(), NB, in, out);
  if (accumulate) {
    for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
  }
  const Aligned16<T> xb = aligned16<T>(x), wb = aligned16<T>(w);
  std::vector<T> y = accumulate ? to_storage<T>(y0) : std::vector<T>(y0.size(), nan_value<T>());
  cb::simt::Emulator::get().launch(
      {kc::gemv_blocks(out), 1, 1}, {kc::kGemvWarps * 32, 1, 1}, 0, [&] {
        kc::gemv_detail::gemv_wt_kernel<T, NB>(xb.get(), wb.get(), y.data(), in, out, accumulate);
      });
  // The programmatic-dependent-launch form (its L2 prefetch and wait are no-ops here): the same.
  std::vector<T> y_pdl = accumulate ? to_storage<T>(y0) : std::vector<T>(y0.size(), nan_value<T>());
  cb::simt::Emulator::get().launch({kc::gemv_blocks(out), 1, 1}, {kc::kGemvWarps * 32, 1, 1}, 0,
                                   [&] {
                                     kc::gemv_detail::gemv_wt_kernel<T, NB, true>(
                                         xb.get(), wb.get(), y_pdl.data(), in, out, accumulate);
                                   });
  ASSERT_EQ(std::memcmp(y.data(), y_pdl.data(), y.size() * sizeof(T)), 0) << what << " PDL";
  // Errors scale with the row's typical magnitude (sqrt(in) for unit inputs), as in the GPU test.
  const float mag = std::sqrt(static_cast<float>(in)) + 1.0f;
  const float tol = st == Storage::F16 ? 2e-3f : 1.6e-2f;
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_LE(std::fabs(as_float(y[i]) - want[i]), tol * mag) << what << " at " << i;
  }
}

// Rows shorter than a warp's 32 vectors (136), with a remainder after the 4-way unroll (1032,
// 4104: one vector for lane 0; 1576: three vectors for lanes 0-4, two for the others; 1792:
// three for every lane, as llama-2-7b's down projection of 11008), output counts not a
// multiple of the 8 warps a block, 1-4 rows of x.
TEST(CudaKernelsEmulated, GemvSourceMatchesMatmulWt) {
  check_gemv<__half, 1>(4104, 37, false);
  check_gemv<__half, 1>(1576, 11, true);
  check_gemv<__nv_bfloat16, 2>(1792, 9, false);
  check_gemv<__half, 2>(136, 9, true);
  check_gemv<__nv_bfloat16, 3>(1032, 20, false);
  check_gemv<__nv_bfloat16, 4>(8, 5, true);
  check_gemv<__half, 4>(520, 16, false);
}

// The fused RMSNorm + GEMV (+ SwiGLU) kernel for NB rows, against kernels/cpu computed as the
// kernel computes it: h = x * g (not rounded), each product h . w^T scaled by 1 / rms(x) and
// rounded, then SwiGLU (with GLU); the GPU test's reference.
template <typename T, int NB, bool GLU>
void check_norm_gemv(int64_t in, int64_t out) {
  constexpr Storage st = storage_of<T>();
  const std::string what = std::to_string(NB) + "x" + std::to_string(in) + "x" +
                           std::to_string(out) + " " + cb::cuda_test::storage_name(st) +
                           (GLU ? " norm+swiglu" : " norm");
  std::mt19937 rng(static_cast<uint32_t>(in * 5 + out + NB + (GLU ? 100 : 0)));
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(static_cast<size_t>(NB * in)), g(static_cast<size_t>(in));
  std::vector<float> w(static_cast<size_t>(out * in)), w2(w.size());
  for (float& v : x) v = round_to(st, 3.0f * u(rng));
  for (float& v : g) v = round_to(st, 1.0f + 0.5f * u(rng));
  for (float& v : w) v = round_to(st, u(rng) / 16);
  for (float& v : w2) v = round_to(st, u(rng) / 16);
  std::vector<float> a(static_cast<size_t>(NB * out)), b(a.size());
  const std::vector<float> h = cb::cuda_test::norm_gemv_input(x, g, NB, in);
  const std::vector<float> inv = cb::cuda_test::rms_scales(x, NB, in, 1e-5f);
  cb::kernels::cpu::matmul_wt(h.data(), w.data(), a.data(), NB, in, out);
  cb::cuda_test::scale_rows(&a, inv, out, st);
  std::vector<float> want = a;
  if (GLU) {
    cb::kernels::cpu::matmul_wt(h.data(), w2.data(), b.data(), NB, in, out);
    cb::cuda_test::scale_rows(&b, inv, out, st);
    cb::kernels::cpu::swiglu(a.data(), b.data(), want.data(), NB * out);
  }
  const Aligned16<T> dx = aligned16<T>(x), dg = aligned16<T>(g), dw = aligned16<T>(w),
                     dw2 = aligned16<T>(w2);
  std::vector<T> y(want.size(), nan_value<T>());
  const kc::norm_gemv_detail::NormGemvArgs<T> args{
      dx.get(), dg.get(), 1e-5f, dw.get(), GLU ? dw2.get() : nullptr, y.data(), in, out};
  cb::simt::Emulator::get().launch(
      {kc::gemv_blocks(out), 1, 1}, {kc::kGemvWarps * 32, 1, 1}, 0,
      [&] { kc::norm_gemv_detail::norm_gemv_kernel<T, NB, GLU>(args); });
  std::vector<T> y_pdl(want.size(), nan_value<T>());  // its PDL form writes the same
  kc::norm_gemv_detail::NormGemvArgs<T> args_pdl = args;
  args_pdl.y = y_pdl.data();
  cb::simt::Emulator::get().launch(
      {kc::gemv_blocks(out), 1, 1}, {kc::kGemvWarps * 32, 1, 1}, 0,
      [&] { kc::norm_gemv_detail::norm_gemv_kernel<T, NB, GLU, true>(args_pdl); });
  ASSERT_EQ(std::memcmp(y.data(), y_pdl.data(), y.size() * sizeof(T)), 0) << what << " PDL";
  // As the GPU test: one rounding of the result, and the rare product rounded the other way.
  const float tol = st == Storage::F16 ? 4e-3f : 3e-2f;
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_LE(std::fabs(as_float(y[i]) - want[i]), tol * (std::fabs(want[i]) + 0.1f))
        << what << " at " << i << ": got " << as_float(y[i]) << " want " << want[i];
  }
}

// Rows shorter than a warp's 32 vectors (136), with a remainder after the 4-way unroll (1032,
// 520: two vectors for every lane, three for lane 0; 1576 and 1792: two or three), output
// counts not a multiple
// of the 8 warps a block, 1-4 rows of x.
TEST(CudaKernelsEmulated, NormGemvSourceMatchesTheCpuReference) {
  check_norm_gemv<__half, 1, false>(1032, 13);
  check_norm_gemv<__half, 1, false>(1576, 9);
  check_norm_gemv<__nv_bfloat16, 2, true>(1792, 10);
  check_norm_gemv<__nv_bfloat16, 2, false>(136, 8);
  check_norm_gemv<__half, 3, true>(520, 17);
  check_norm_gemv<__nv_bfloat16, 1, true>(1032, 7);
  check_norm_gemv<__half, 4, true>(264, 9);
}

template <typename T>
void check_norms(int64_t rows, int64_t dim) {
  constexpr Storage st = storage_of<T>();
  const std::string what = std::string(cb::cuda_test::storage_name(st)) + " " +
                           std::to_string(rows) + "x" + std::to_string(dim);
  const size_t n = static_cast<size_t>(rows * dim);
  const std::vector<float> x = uniform(n, 1, -2, 2, st),
                           w = uniform(static_cast<size_t>(dim), 2, -2, 2, st),
                           b = uniform(static_cast<size_t>(dim), 3, -2, 2, st);
  std::vector<float> want(n);
  const std::vector<T> dx = to_storage<T>(x), dw = to_storage<T>(w), db = to_storage<T>(b);
  std::vector<T> y(n, nan_value<T>());
  const kc::LaunchDims d = kc::row_dims(rows, dim);
  cb::simt::Emulator::get().launch({d.grid, 1, 1}, {d.block, 1, 1}, 0, [&] {
    kc::detail::rmsnorm_kernel<T>(dx.data(), dw.data(), y.data(), dim, 1e-5f);
  });
  cb::kernels::cpu::rmsnorm(x.data(), w.data(), want.data(), rows, dim, 1e-5f);
  for (float& v : want) v = round_to(st, v);
  expect_close(as_floats(y), want, rel_tol(st), 1e-3f, "rmsnorm " + what);
  if (dim == 1) return;  // LayerNorm of one element is b: covered by the CPU tests
  y.assign(n, nan_value<T>());
  cb::simt::Emulator::get().launch({d.grid, 1, 1}, {d.block, 1, 1}, 0, [&] {
    kc::detail::layernorm_kernel<T>(dx.data(), dw.data(), db.data(), y.data(), dim, 1e-5f);
  });
  cb::kernels::cpu::layernorm(x.data(), w.data(), b.data(), want.data(), rows, dim, 1e-5f);
  for (float& v : want) v = round_to(st, v);
  expect_close(as_floats(y), want, rel_tol(st), 1e-1f, "layernorm " + what);
}

template <typename T>
void check_activations(int64_t n) {
  constexpr Storage st = storage_of<T>();
  const std::string what = std::string(cb::cuda_test::storage_name(st)) + " n " + std::to_string(n);
  const std::vector<float> g = uniform(static_cast<size_t>(n), 5, -6, 6, st),
                           u = uniform(static_cast<size_t>(n), 6, -2, 2, st);
  const std::vector<T> dg = to_storage<T>(g), du = to_storage<T>(u);
  std::vector<T> out(static_cast<size_t>(n), nan_value<T>());
  std::vector<float> want(static_cast<size_t>(n));
  launch_elementwise(n, [&] { kc::detail::swiglu_kernel<T>(dg.data(), du.data(), out.data(), n); });
  cb::kernels::cpu::swiglu(g.data(), u.data(), want.data(), n);
  for (float& v : want) v = round_to(st, v);
  expect_close(as_floats(out), want, rel_tol(st), 1e-3f, "swiglu " + what);
  out = dg;
  launch_elementwise(n, [&] { kc::detail::gelu_kernel<T>(out.data(), n); });
  want = g;
  cb::kernels::cpu::gelu(want.data(), n);
  for (float& v : want) v = round_to(st, v);
  expect_close(as_floats(out), want, rel_tol(st), 1e-3f, "gelu " + what);
  out = dg;
  launch_elementwise(n, [&] { kc::detail::add_kernel<T>(out.data(), du.data(), n); });
  want = g;
  cb::kernels::cpu::add_inplace(want.data(), u.data(), n);
  for (float& v : want) v = round_to(st, v);
  expect_close(as_floats(out), want, rel_tol(st), 1e-3f, "add " + what);
}

// Norms with rows of 1 to 5,120 elements (one block a row, reductions across warps) and the
// elementwise activations over lengths around a block's 256 threads, in every storage type.
TEST(CudaKernelsEmulated, NormAndActivationSourcesMatchTheCpuReference) {
  for (int64_t dim : {1, 255, 5120}) {
    check_norms<float>(3, dim);
    check_norms<__half>(2, dim);
    check_norms<__nv_bfloat16>(2, dim);
  }
  for (int64_t n : {1, 255, 257, 4097}) {
    check_activations<float>(n);
    check_activations<__half>(n);
    check_activations<__nv_bfloat16>(n);
  }
}

// Rows gathered by id; an id outside the table gives a zero row and raises the flag.
TEST(CudaKernelsEmulated, EmbeddingSourceGathersRowsAndFlagsBadIds) {
  const int64_t rows = 7, dim = 40;
  const std::vector<float> table = uniform(static_cast<size_t>(rows * dim), 8, -1, 1, Storage::F16);
  const std::vector<__half> dt = to_storage<__half>(table);
  for (const std::vector<int32_t>& ids : {std::vector<int32_t>{6, 0, 3, 3}, {2, 7, -1, 1}}) {
    const int64_t n = static_cast<int64_t>(ids.size());
    std::vector<__half> out(static_cast<size_t>(n * dim), nan_value<__half>());
    std::vector<float> want(out.size(), 0.0f);
    bool bad_want = false;
    for (int64_t t = 0; t < n; ++t) {
      const int32_t id = ids[static_cast<size_t>(t)];
      if (id < 0 || id >= rows) {
        bad_want = true;
        continue;
      }
      std::copy(table.begin() + id * dim, table.begin() + (id + 1) * dim, want.begin() + t * dim);
    }
    int32_t bad = 0;
    launch_elementwise(n * dim, [&] {
      kc::detail::embedding_kernel<__half>(dt.data(), ids.data(), out.data(), n, rows, dim, &bad);
    });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(as_float(out[i]), want[i]) << i;
    EXPECT_EQ(bad, bad_want ? 1 : 0);
  }
}

// Every tensor of two tiny presets, plain and through a reversed row map: bit for bit what
// lib/model preset_fill writes on the host (fp32 storage).
TEST(CudaKernelsEmulated, PresetFillSourceWritesTheHostValues) {
  for (const char* name : {"preset:tiny-llama", "preset:tiny-falcon-40b"}) {
    const cb::model::ModelConfig cfg = cb::model::ModelSource::open(name)->config();
    for (const cb::model::TensorSpec& t : cb::model::expected_tensors(cfg)) {
      std::vector<float> want(static_cast<size_t>(t.numel()));
      cb::model::preset_fill(cfg, t, 7, 0, t.numel(), want.data());
      const cb::model::PresetFill f = cb::model::preset_fill_params(cfg, t, 7);
      const int64_t rows = t.shape.size() == 1 ? 1 : t.shape.front(), cols = t.numel() / rows;
      std::vector<int32_t> reversed(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r)
        reversed[static_cast<size_t>(r)] = static_cast<int32_t>(rows - 1 - r);
      for (bool mapped : {false, true}) {
        std::vector<float> got(want.size(), std::nanf(""));
        launch_elementwise(rows * cols, [&] {
          kc::detail::preset_fill_kernel<float>(got.data(), rows, cols,
                                                mapped ? reversed.data() : nullptr, f.constant,
                                                f.value, f.key, f.scale);
        });
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t src = mapped ? rows - 1 - r : r;
          for (int64_t c = 0; c < cols; ++c) {
            ASSERT_EQ(got[static_cast<size_t>(r * cols + c)],
                      want[static_cast<size_t>(src * cols + c)])
                << name << " " << t.name << " row " << r << (mapped ? " (mapped)" : "");
          }
        }
      }
    }
  }
}

}  // namespace
