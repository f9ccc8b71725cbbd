// KV restore and capture (kernels/cuda kv_restore): the paged addressing and the rotation pairs
// are checked on the host against lib/kv's KvCache and kernels/cpu's RoPE conventions; restore
// and capture are checked on the GPU against a host reference built from KvCache slot pointers
// and kernels/cpu rope (skipped without a GPU). Pools are poisoned before each launch, so an
// unwritten element fails and a stray write into another slot is caught.
#include "kernels/cuda/kv_restore.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/kv_layout.h"
#include "lib/kv/kv_cache.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::DeviceArray;

/// A cache whose sequence 7 holds non-contiguous blocks: other sequences take blocks between.
cb::kv::KvCache scattered_cache(int heads, int head_dim, int block_size, int64_t len) {
  cb::kv::KvConfig c;
  c.n_layers = 2;
  c.n_kv_heads = heads;
  c.head_dim = head_dim;
  c.block_size = block_size;
  c.num_blocks = static_cast<int>(3 * (len + block_size) / block_size + 8);
  cb::kv::KvCache cache(c);
  cache.add_sequence(1);
  cache.add_sequence(7);
  cache.add_sequence(2);
  for (int64_t l = block_size; l <= len + block_size; l += block_size) {
    EXPECT_TRUE(cache.reserve(1, l / 2));
    EXPECT_TRUE(cache.reserve(7, std::min(l, len)));
    EXPECT_TRUE(cache.reserve(2, l / 3));
  }
  return cache;
}

TEST(CudaKvLayout, PagedOffsetsAreKvCacheSlots) {
  for (int bs : {1, 16, 32}) {
    const int heads = 4, head_dim = 8;
    const int64_t len = 75;
    cb::kv::KvCache cache = scattered_cache(heads, head_dim, bs, len);
    const auto& table = cache.block_table(7);
    const kc::PagedView view{table.data(), bs, heads * head_dim};
    for (int64_t s = 0; s < len; ++s) {
      for (int64_t j : {int64_t{0}, int64_t{5}, int64_t{heads * head_dim - 1}}) {
        EXPECT_EQ(kc::paged_offset(view, s, j), (cache.k_slot(1, 7, s) - cache.k_pool(1)) + j)
            << "block size " << bs << " slot " << s;
      }
    }
  }
}

TEST(CudaKvLayout, RopePairsCoverEveryElementOnceInTheCpuConvention) {
  for (int64_t head_dim : {64, 128, 80}) {
    for (int64_t rope_dims : {head_dim, head_dim / 2, int64_t{16}}) {
      for (bool interleaved : {true, false}) {
        std::vector<int> seen(static_cast<size_t>(head_dim), 0);
        for (int64_t i = 0; i < head_dim / 2; ++i) {
          const kc::PairElems e = kc::rope_pair(i, rope_dims, interleaved);
          ASSERT_LT(e.b, head_dim);
          ++seen[static_cast<size_t>(e.a)];
          ++seen[static_cast<size_t>(e.b)];
          EXPECT_EQ(e.rotate, i < rope_dims / 2);
          if (e.rotate) {  // kernels/cpu rope: pair i is (a*i, a*i + stride)
            EXPECT_EQ(e.a, interleaved ? 2 * i : i);
            EXPECT_EQ(e.b - e.a, interleaved ? 1 : rope_dims / 2);
          } else {
            EXPECT_GE(e.a, rope_dims);
          }
        }
        for (int x : seen) ASSERT_EQ(x, 1) << head_dim << " " << rope_dims;
      }
    }
  }
}

TEST(CudaKernels, KvRestoreAndCaptureMatchTheHostReference) {
  SKIP_WITHOUT_GPU();
  for (int bs : {1, 16, 32}) {
    for (bool interleaved : {true, false}) {
      for (int head_dim : {64, 128}) {
        const int heads = 4;
        const int64_t kvd = heads * head_dim, pos0 = 37, n = 41, rope_offset = 1000;
        const int rope_dims = interleaved ? head_dim : head_dim / 2;
        const std::string what = "block " + std::to_string(bs) +
                                 (interleaved ? " interleaved" : " half") + " head_dim " +
                                 std::to_string(head_dim);
        cb::kv::KvCache cache = scattered_cache(heads, head_dim, bs, pos0 + n);
        std::mt19937 rng(3);
        std::uniform_real_distribution<float> u(-2, 2);
        std::vector<float> k(static_cast<size_t>(n * kvd)), v(k.size());
        for (float& x : k) x = u(rng);
        for (float& x : v) x = u(rng);
        // Host reference: rotate to positions pos0 + rope_offset + t, write through k_slot.
        std::vector<float> kr = k;
        std::vector<int32_t> pos(static_cast<size_t>(n));
        for (int64_t t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = pos0 + rope_offset + t;
        cb::kernels::cpu::rope(
            kr.data(), pos.data(), n, heads, head_dim, rope_dims, 10000.0f,
            interleaved ? cb::kernels::cpu::Rope::Interleaved : cb::kernels::cpu::Rope::RotateHalf);
        for (int64_t t = 0; t < n; ++t) {
          std::memcpy(cache.k_slot(0, 7, pos0 + t), kr.data() + t * kvd, kvd * 4);
          std::memcpy(cache.v_slot(0, 7, pos0 + t), v.data() + t * kvd, kvd * 4);
        }
        const size_t pool = static_cast<size_t>(cache.config().num_blocks) * bs * kvd;
        const auto& table = cache.block_table(7);
        DeviceArray<float> dk(k.size()), dv(v.size()), dkp(pool), dvp(pool);
        DeviceArray<int32_t> dt(table.size());
        ASSERT_EQ(cudaMemcpy(dk.get(), k.data(), k.size() * 4, cudaMemcpyHostToDevice),
                  cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dv.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice),
                  cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dt.get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice),
                  cudaSuccess);
        ASSERT_EQ(cudaMemset(dkp.get(), 0xff, pool * 4), cudaSuccess);
        ASSERT_EQ(cudaMemset(dvp.get(), 0xff, pool * 4), cudaSuccess);
        kc::KvRestoreParams p;
        p.k_stage = dk.get();
        p.v_stage = dv.get();
        p.k_pool = dkp.get();
        p.v_pool = dvp.get();
        p.view = {dt.get(), bs, kvd};
        p.pos0 = pos0;
        p.n = n;
        p.heads = heads;
        p.head_dim = head_dim;
        p.rope_dims = rope_dims;
        p.rope_offset = rope_offset;
        p.style = interleaved ? kc::RopeStyle::Interleaved : kc::RopeStyle::RotateHalf;
        ASSERT_EQ(kc::launch_kv_restore(p, nullptr), cudaSuccess);
        std::vector<float> gk(pool), gv(pool);
        ASSERT_EQ(cudaMemcpy(gk.data(), dkp.get(), pool * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(gv.data(), dvp.get(), pool * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        std::vector<char> written(pool, 0);
        int bad = 0;
        for (int64_t t = 0; t < n; ++t) {
          const int64_t off = cache.k_slot(0, 7, pos0 + t) - cache.k_pool(0);
          for (int64_t j = 0; j < kvd; ++j) {
            const size_t o = static_cast<size_t>(off + j);
            written[o] = 1;
            const float want = cache.k_pool(0)[o];
            if (!(std::fabs(gk[o] - want) <= 2e-5f * (std::fabs(want) + 1e-2f)) && bad++ < 5) {
              ADD_FAILURE() << what << ": K of slot " << pos0 + t << " element " << j << " got "
                            << gk[o] << " want " << want;
            }
            if (gv[o] != cache.v_pool(0)[o] && bad++ < 5) {
              ADD_FAILURE() << what << ": V of slot " << pos0 + t << " element " << j;
            }
          }
        }
        for (size_t o = 0; o < pool; ++o) {
          if (!written[o] && (!std::isnan(gk[o]) || !std::isnan(gv[o])) && bad++ < 5) {
            ADD_FAILURE() << what << ": stray write at pool element " << o;
          }
        }

        // Capture: rows of a fused [n, 3 * kvd] buffer (K at column kvd, V at 2 * kvd).
        std::vector<float> fused(static_cast<size_t>(n * 3 * kvd));
        for (float& x : fused) x = u(rng);
        DeviceArray<float> df(fused.size()), dks(k.size()), dvs(v.size());
        ASSERT_EQ(cudaMemcpy(df.get(), fused.data(), fused.size() * 4, cudaMemcpyHostToDevice),
                  cudaSuccess);
        ASSERT_EQ(cudaMemset(dks.get(), 0xff, k.size() * 4), cudaSuccess);
        ASSERT_EQ(cudaMemset(dvs.get(), 0xff, v.size() * 4), cudaSuccess);
        kc::KvCaptureParams c;
        c.k_src = df.get() + kvd;
        c.v_src = df.get() + 2 * kvd;
        c.src_stride = 3 * kvd;
        c.k_stage = dks.get();
        c.v_stage = dvs.get();
        c.n = n;
        c.kv_dim = kvd;
        ASSERT_EQ(kc::launch_kv_capture(c, nullptr), cudaSuccess);
        std::vector<float> sk(k.size()), sv(v.size());
        ASSERT_EQ(cudaMemcpy(sk.data(), dks.get(), sk.size() * 4, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        ASSERT_EQ(cudaMemcpy(sv.data(), dvs.get(), sv.size() * 4, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t j = 0; j < kvd; ++j) {
            const size_t s = static_cast<size_t>(t * kvd + j);
            ASSERT_EQ(sk[s], fused[static_cast<size_t>(t * 3 * kvd + kvd + j)]) << what;
            ASSERT_EQ(sv[s], fused[static_cast<size_t>(t * 3 * kvd + 2 * kvd + j)]) << what;
          }
        }
      }
    }
  }
}

// Append: rows of a fused QKV output (K at column q_dim, V after it) into the paged blocks of
// a sequence at slots pos0.. (fp32: the kernel only moves elements, so the storage type does
// not change what it does); compared with lib/kv KvCache's slots,
// every other pool element left poisoned.
TEST(CudaKernels, KvAppendWritesExactlyTheSequenceSlots) {
  SKIP_WITHOUT_GPU();
  for (int bs : {1, 16, 32}) {
    for (int64_t n : {int64_t{1}, int64_t{45}}) {
      const int heads = 2, head_dim = 64;
      const int64_t kvd = heads * head_dim, q_dim = 4 * kvd, stride = q_dim + 2 * kvd;
      const int64_t pos0 = 19;
      const std::string what = "block " + std::to_string(bs) + " n " + std::to_string(n);
      cb::kv::KvCache cache = scattered_cache(heads, head_dim, bs, pos0 + n);
      std::mt19937 rng(static_cast<unsigned>(bs * 100 + n));
      std::uniform_real_distribution<float> u(-2, 2);
      std::vector<float> qkv(static_cast<size_t>(n * stride));
      for (float& x : qkv) x = u(rng);
      const size_t pool = static_cast<size_t>(cache.config().num_blocks) * bs * kvd;
      const auto& table = cache.block_table(7);
      DeviceArray<float> dsrc(qkv), dkp(pool), dvp(pool);
      DeviceArray<int32_t> dt(table);
      dkp.poison();
      dvp.poison();
      kc::KvAppendParams p;
      p.k_src = dsrc.get() + q_dim;
      p.v_src = dsrc.get() + q_dim + kvd;
      p.src_stride = stride;
      p.k_pool = dkp.get();
      p.v_pool = dvp.get();
      p.view = {dt.get(), bs, kvd};
      p.pos0 = pos0;
      p.n = n;
      ASSERT_EQ(kc::launch_kv_append(p, nullptr), cudaSuccess) << what;
      const std::vector<float> gk = dkp.download(), gv = dvp.download();
      std::vector<char> written(pool, 0);
      for (int64_t t = 0; t < n; ++t) {
        const int64_t off = cache.k_slot(0, 7, pos0 + t) - cache.k_pool(0);
        for (int64_t j = 0; j < kvd; ++j) {
          const size_t o = static_cast<size_t>(off + j);
          written[o] = 1;
          ASSERT_EQ(gk[o], qkv[static_cast<size_t>(t * stride + q_dim + j)]) << what;
          ASSERT_EQ(gv[o], qkv[static_cast<size_t>(t * stride + q_dim + kvd + j)]) << what;
        }
      }
      for (size_t o = 0; o < pool; ++o) {
        if (!written[o]) {
          ASSERT_TRUE(std::isnan(gk[o]) && std::isnan(gv[o])) << what << ": stray write at " << o;
        }
      }
    }
  }
}

// Batched append: rows of three sequences in one launch, each row to its own sequence's slot
// through row_seq / row_slot and a [sequences, stride] table; every other element stays poisoned.
TEST(CudaKernels, KvAppendBatchedWritesEachRowToItsSequenceSlot) {
  SKIP_WITHOUT_GPU();
  for (int bs : {1, 16}) {
    const int heads = 2, head_dim = 64;
    const int64_t kvd = heads * head_dim, stride_qkv = 3 * kvd;
    cb::kv::KvCache cache = scattered_cache(heads, head_dim, bs, 60);
    const std::vector<cb::kv::SeqId> seqs = {1, 7, 2};
    size_t stride = 0;
    for (auto q : seqs) stride = std::max(stride, cache.block_table(q).size());
    std::vector<int32_t> tables(seqs.size() * stride, 0);
    for (size_t i = 0; i < seqs.size(); ++i) {
      const auto& t = cache.block_table(seqs[i]);
      std::copy(t.begin(), t.end(), tables.begin() + static_cast<int64_t>(i * stride));
    }
    const std::vector<int32_t> row_seq = {0, 0, 0, 0, 0, 1, 1, 1, 2};
    const std::vector<int32_t> row_slot = {10, 11, 12, 13, 14, 40, 41, 42, 19};
    const int64_t n = static_cast<int64_t>(row_seq.size());
    std::mt19937 rng(static_cast<unsigned>(bs));
    std::uniform_real_distribution<float> u(-2, 2);
    std::vector<float> qkv(static_cast<size_t>(n * stride_qkv));
    for (float& x : qkv) x = u(rng);
    const size_t pool = static_cast<size_t>(cache.config().num_blocks) * bs * kvd;
    DeviceArray<float> dsrc(qkv), dkp(pool), dvp(pool);
    DeviceArray<int32_t> dt(tables), dseq(row_seq), dslot(row_slot);
    dkp.poison();
    dvp.poison();
    kc::KvAppendParams p;
    p.k_src = dsrc.get() + kvd;
    p.v_src = dsrc.get() + 2 * kvd;
    p.src_stride = stride_qkv;
    p.k_pool = dkp.get();
    p.v_pool = dvp.get();
    p.view = {dt.get(), bs, kvd};
    p.n = n;
    p.row_seq = dseq.get();
    p.row_slot = dslot.get();
    p.table_stride = static_cast<int64_t>(stride);
    ASSERT_EQ(kc::launch_kv_append(p, nullptr), cudaSuccess);
    const std::vector<float> gk = dkp.download(), gv = dvp.download();
    std::vector<char> written(pool, 0);
    for (int64_t t = 0; t < n; ++t) {
      const cb::kv::SeqId q = seqs[static_cast<size_t>(row_seq[static_cast<size_t>(t)])];
      const int64_t off = cache.k_slot(0, q, row_slot[static_cast<size_t>(t)]) - cache.k_pool(0);
      for (int64_t j = 0; j < kvd; ++j) {
        const size_t o = static_cast<size_t>(off + j);
        written[o] = 1;
        ASSERT_EQ(gk[o], qkv[static_cast<size_t>(t * stride_qkv + kvd + j)]) << "block " << bs;
        ASSERT_EQ(gv[o], qkv[static_cast<size_t>(t * stride_qkv + 2 * kvd + j)]) << "block " << bs;
      }
    }
    for (size_t o = 0; o < pool; ++o) {
      if (!written[o]) {
        ASSERT_TRUE(std::isnan(gk[o]) && std::isnan(gv[o])) << "stray write " << o;
      }
    }
  }
}

// RoPE and the batched append in one launch, on fused QKV rows of three sequences (LLaMA-style
// interleaved pairs, GQA 4:2; Falcon-style rotate-half over half of each head, MQA 8:1): Q
// rotated in place and K rotated into its sequence's slots as kernels/cpu rope rotates them, V
// copied, K and V left pre-RoPE in the rows; no other pool element written.
TEST(CudaKernels, RopeKvAppendRotatesQInPlaceAndKIntoTheBlocks) {
  SKIP_WITHOUT_GPU();
  using cb::cuda_test::DeviceTensor;
  using cb::cuda_test::round_to;
  for (kc::Storage st : {kc::Storage::F32, kc::Storage::F16, kc::Storage::BF16}) {
    for (const bool llama : {true, false}) {
      const int qh = llama ? 4 : 8, kvh = llama ? 2 : 1, hd = llama ? 128 : 64, bs = llama ? 16 : 1;
      const int64_t rope_dims = llama ? hd : hd / 2, kvd = kvh * hd;
      const int64_t stride = (qh + 2 * kvh) * hd;
      const auto style =
          llama ? cb::kernels::cpu::Rope::Interleaved : cb::kernels::cpu::Rope::RotateHalf;
      const std::string what =
          std::string(cb::cuda_test::storage_name(st)) + (llama ? " llama-style" : " falcon-style");
      cb::kv::KvCache cache = scattered_cache(kvh, hd, bs, 60);
      const std::vector<cb::kv::SeqId> seqs = {1, 7, 2};
      size_t tstride = 0;
      for (auto q : seqs) tstride = std::max(tstride, cache.block_table(q).size());
      std::vector<int32_t> tables(seqs.size() * tstride, 0);
      for (size_t i = 0; i < seqs.size(); ++i) {
        const auto& t = cache.block_table(seqs[i]);
        std::copy(t.begin(), t.end(), tables.begin() + static_cast<int64_t>(i * tstride));
      }
      const std::vector<int32_t> row_seq = {0, 0, 0, 0, 0, 1, 1, 1, 2, 2};
      const std::vector<int32_t> row_slot = {10, 11, 12, 13, 14, 40, 41, 42, 18, 19};
      const std::vector<int32_t> pos = {10, 11, 12, 13, 14, 4040, 4041, 4042, 7, 9};
      const int64_t n = static_cast<int64_t>(row_seq.size());
      std::mt19937 rng(static_cast<unsigned>(qh + hd));
      std::uniform_real_distribution<float> u(-2, 2);
      std::vector<float> qkv(static_cast<size_t>(n * stride));
      for (float& x : qkv) x = round_to(st, u(rng));
      const size_t pool = static_cast<size_t>(cache.config().num_blocks) * bs * kvd;
      DeviceTensor drows(st, qkv), dkp(st, pool), dvp(st, pool);
      DeviceArray<int32_t> dt(tables), dseq(row_seq), dslot(row_slot), dpos(pos);
      dkp.poison();
      dvp.poison();
      kc::RopeKvAppendParams p;
      p.qkv = drows.get();
      p.positions = dpos.get();
      p.n = n;
      p.q_heads = qh;
      p.kv_heads = kvh;
      p.head_dim = hd;
      p.rope_dims = rope_dims;
      p.token_stride = stride;
      p.style = llama ? kc::RopeStyle::Interleaved : kc::RopeStyle::RotateHalf;
      p.storage = st;
      p.k_pool = dkp.get();
      p.v_pool = dvp.get();
      p.view = {dt.get(), bs, kvd};
      p.row_seq = dseq.get();
      p.row_slot = dslot.get();
      p.table_stride = static_cast<int64_t>(tstride);
      ASSERT_EQ(kc::launch_rope_kv_append(p, nullptr), cudaSuccess) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const std::vector<float> rows = drows.download(), gk = dkp.download(), gv = dvp.download();
      const float tol = cb::cuda_test::rel_tol(st);
      std::vector<char> written(pool, 0);
      for (int64_t t = 0; t < n; ++t) {
        // Q and K of the row rotated on the host (kernels/cpu rope, angles in double).
        std::vector<float> q(qkv.begin() + t * stride, qkv.begin() + t * stride + qh * hd);
        std::vector<float> k(qkv.begin() + t * stride + qh * hd,
                             qkv.begin() + t * stride + qh * hd + kvd);
        cb::kernels::cpu::rope(q.data(), &pos[static_cast<size_t>(t)], 1, qh, hd, rope_dims,
                               10000.0f, style);
        cb::kernels::cpu::rope(k.data(), &pos[static_cast<size_t>(t)], 1, kvh, hd, rope_dims,
                               10000.0f, style);
        for (int64_t j = 0; j < qh * hd; ++j) {
          const float want = round_to(st, q[static_cast<size_t>(j)]);
          ASSERT_LE(std::fabs(rows[static_cast<size_t>(t * stride + j)] - want),
                    tol * (std::fabs(want) + 1e-2f))
              << what << " Q row " << t << " element " << j;
        }
        for (int64_t j = qh * hd; j < stride; ++j) {  // K and V stay pre-RoPE in the rows
          ASSERT_EQ(rows[static_cast<size_t>(t * stride + j)],
                    qkv[static_cast<size_t>(t * stride + j)])
              << what << " row " << t << " element " << j;
        }
        const cb::kv::SeqId q_id = seqs[static_cast<size_t>(row_seq[static_cast<size_t>(t)])];
        const int64_t off =
            cache.k_slot(0, q_id, row_slot[static_cast<size_t>(t)]) - cache.k_pool(0);
        for (int64_t j = 0; j < kvd; ++j) {
          const size_t o = static_cast<size_t>(off + j);
          written[o] = 1;
          const float want = round_to(st, k[static_cast<size_t>(j)]);
          ASSERT_LE(std::fabs(gk[o] - want), tol * (std::fabs(want) + 1e-2f))
              << what << " K row " << t << " element " << j;
          ASSERT_EQ(gv[o], qkv[static_cast<size_t>(t * stride + qh * hd + kvd + j)])
              << what << " V row " << t << " element " << j;
        }
      }
      for (size_t o = 0; o < pool; ++o) {
        if (!written[o]) {
          ASSERT_TRUE(std::isnan(gk[o]) && std::isnan(gv[o])) << what << " stray write " << o;
        }
      }
    }
  }
}

TEST(CudaKernels, KvRestoreRejectsBadShapesBeforeLaunch) {
  kc::KvRestoreParams p;
  EXPECT_EQ(kc::launch_kv_restore(p, nullptr), cudaSuccess);  // n == 0
  p.n = 1;
  EXPECT_EQ(kc::launch_kv_restore(p, nullptr), cudaErrorInvalidValue);  // null pointers
  kc::KvCaptureParams c;
  c.n = 2;
  c.kv_dim = 8;
  c.src_stride = 4;  // shorter than a row
  EXPECT_EQ(kc::launch_kv_capture(c, nullptr), cudaErrorInvalidValue);
  kc::KvAppendParams a;
  EXPECT_EQ(kc::launch_kv_append(a, nullptr), cudaSuccess);  // n == 0
  a.n = 1;
  EXPECT_EQ(kc::launch_kv_append(a, nullptr), cudaErrorInvalidValue);  // null pointers
  int32_t dummy[4] = {};
  float buf[8] = {};
  a.k_src = a.v_src = buf;
  a.k_pool = a.v_pool = buf;
  a.src_stride = 2;
  a.view = {dummy, 1, 2};
  a.row_seq = dummy;  // batched without row_slot
  EXPECT_EQ(kc::launch_kv_append(a, nullptr), cudaErrorInvalidValue);
  a.row_slot = dummy;  // batched without a table stride
  EXPECT_EQ(kc::launch_kv_append(a, nullptr), cudaErrorInvalidValue);
  kc::RopeKvAppendParams r;
  EXPECT_EQ(kc::launch_rope_kv_append(r, nullptr), cudaSuccess);  // n == 0
  r.n = 1;
  EXPECT_EQ(kc::launch_rope_kv_append(r, nullptr), cudaErrorInvalidValue);  // null pointers
  r.qkv = buf;
  r.positions = dummy;
  r.k_pool = r.v_pool = buf;
  r.view = {dummy, 1, 4};
  r.row_seq = r.row_slot = dummy;
  r.table_stride = 1;
  r.q_heads = 2;
  r.kv_heads = 1;
  r.head_dim = 4;
  r.rope_dims = 4;
  r.token_stride = 15;  // under (q_heads + 2 * kv_heads) * head_dim: rows overlap
  EXPECT_EQ(kc::launch_rope_kv_append(r, nullptr), cudaErrorInvalidValue);
  r.token_stride = 16;
  r.view.kv_dim = 8;  // not kv_heads * head_dim
  EXPECT_EQ(kc::launch_rope_kv_append(r, nullptr), cudaErrorInvalidValue);
  kc::KvGatherParams g;
  EXPECT_EQ(kc::launch_kv_gather(g, nullptr), cudaSuccess);  // n == 0
  g.n = 1;
  EXPECT_EQ(kc::launch_kv_gather(g, nullptr), cudaErrorInvalidValue);  // null pointers
}

}  // namespace
