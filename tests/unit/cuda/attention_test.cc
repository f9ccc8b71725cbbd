// Paged attention (kernels/cuda attention): the host planning is tested here on any machine;
// the kernels are compared on the GPU with kernels/cpu paged_attention (double accumulation)
// over a sweep of head sizes, GQA ratios and MQA, block sizes, storage types, sliding windows,
// prefill with a long paged prefix and batched decode with and without splitting the keys.
// Outputs are poisoned (NaN) before each launch so an unwritten element fails.
#include "kernels/cuda/attention.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "lib/core/dtype.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::DeviceArray;
using cb::cuda_test::DeviceTensor;
using cb::cuda_test::round_to;
using cb::cuda_test::storage_name;

TEST(CudaAttentionPlan, TilesStayInsideOneSequenceAndTheRowCap) {
  std::vector<int32_t> seq(20, 0);
  seq.push_back(1);
  seq.push_back(2);
  seq.push_back(2);
  EXPECT_EQ(kc::plan_attention_tiles(seq), (std::vector<int32_t>{0, 16, 16, 4, 20, 1, 21, 2}));
  EXPECT_EQ(kc::plan_attention_tiles(seq, 3).size(), 2u * (7 + 1 + 1));
  EXPECT_TRUE(kc::plan_attention_tiles({}).empty());
  // Every row is covered exactly once, in order.
  std::mt19937 rng(1);
  std::vector<int32_t> many;
  for (int32_t s = 0; s < 50; ++s) many.insert(many.end(), 1 + rng() % 40, s);
  const std::vector<int32_t> t = kc::plan_attention_tiles(many);
  int32_t next = 0;
  for (size_t i = 0; i < t.size(); i += 2) {
    EXPECT_EQ(t[i], next);
    EXPECT_GE(t[i + 1], 1);
    EXPECT_LE(t[i + 1], kc::kAttentionTileRows);
    for (int32_t r = t[i]; r < t[i] + t[i + 1]; ++r) EXPECT_EQ(many[r], many[t[i]]);
    next = t[i] + t[i + 1];
  }
  EXPECT_EQ(next, static_cast<int32_t>(many.size()));
}

TEST(CudaAttentionPlan, SplitsOnlyWhenTheGridIsSmallAndTheKeysMany) {
  EXPECT_EQ(kc::plan_attention_splits(200, 32, 4096, 132), 1);  // prefill fills the device
  EXPECT_EQ(kc::plan_attention_splits(1, 32, 100, 132), 1);     // few keys
  EXPECT_EQ(kc::plan_attention_splits(1, 32, 512, 132), 8);     // decode: 64 keys per split
  EXPECT_EQ(kc::plan_attention_splits(8, 32, 4096, 132), 2);    // 256 blocks < 264
  EXPECT_EQ(kc::plan_attention_splits(1, 8, 100000, 132), 32);  // capped
  EXPECT_EQ(kc::plan_attention_splits(1, 8, 1024, 132), 16);    // 64 keys per split at least
  EXPECT_EQ(kc::plan_attention_splits(0, 8, 2048, 132), 1);
  // Fewer keys a split and more blocks per SM (CudaKernelPaths::decode_more_splits).
  EXPECT_EQ(kc::plan_attention_splits(1, 32, 512, 132, 32), 9);      // ceil(264 / 32): the fill
  EXPECT_EQ(kc::plan_attention_splits(1, 32, 512, 132, 32, 4), 16);  // 512 / 32: the keys
  EXPECT_EQ(kc::plan_attention_splits(1, 32, 512, 132, 128), 4);     // 512 / 128
  EXPECT_EQ(kc::plan_attention_splits(1, 32, 60, 132, 32), 1);       // under two splits' worth
  EXPECT_EQ(kc::plan_attention_splits(1, 32, 512, 132, 0, 0), 5);    // 1 key, 1 block per SM
  EXPECT_EQ(kc::plan_attention_splits(16, 32, 512, 132, 32, 4), 2);  // batch 16: 512 blocks
  EXPECT_EQ(kc::attention_workspace_floats(5, 8, 128, 1), 0);
  EXPECT_EQ(kc::attention_workspace_floats(5, 8, 128, 4), 5 * 8 * 4 * 130);
}

TEST(CudaAttentionPlan, DecodeKernelRunsOnlyForSingleRowTilesOfCompiledHeadSizes) {
  alignas(16) static int32_t pool[8];
  kc::PagedAttentionParams p;
  p.rows = p.n_tiles = 3;
  p.head_dim = 128;
  p.k_pool = p.v_pool = pool;
  EXPECT_FALSE(kc::attention_uses_decode_kernel(p));  // not asked for
  p.decode_kernel = true;
  EXPECT_TRUE(kc::attention_uses_decode_kernel(p));
  p.head_dim = 64;
  EXPECT_TRUE(kc::attention_uses_decode_kernel(p));
  p.head_dim = 80;  // no compiled size
  EXPECT_FALSE(kc::attention_uses_decode_kernel(p));
  p.head_dim = 64;
  p.n_tiles = 2;  // a tile of two rows (prefill)
  EXPECT_FALSE(kc::attention_uses_decode_kernel(p));
  p.n_tiles = 3;
  p.tile_rows = kc::kAttentionMmaTileRows;  // the tensor-core path
  EXPECT_FALSE(kc::attention_uses_decode_kernel(p));
  p.tile_rows = kc::kAttentionTileRows;
  p.v_pool = reinterpret_cast<const char*>(pool) + 2;  // not 16-byte aligned
  EXPECT_FALSE(kc::attention_uses_decode_kernel(p));
}

TEST(CudaAttentionPlan, LaunchRejectsBadParametersBeforeTouchingTheGpu) {
  kc::PagedAttentionParams p;
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaSuccess);  // rows == 0
  p.rows = 1;
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);  // null pointers
  int32_t dummy = 0;
  p.q = p.k_pool = p.v_pool = &dummy;
  p.out = &dummy;
  p.q_pos = p.q_seq = p.block_tables = p.n_ctx = p.tiles = &dummy;
  p.n_tiles = 1;
  p.n_heads = 8;
  p.n_kv_heads = 3;  // does not divide
  p.head_dim = 64;
  p.table_stride = 1;
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);
  p.n_kv_heads = 2;
  p.head_dim = kc::kAttentionMaxHeadDim + 1;
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);
  p.head_dim = 64;
  p.splits = 4;  // no workspace
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);
  p.splits = 1;
  p.tile_rows = 32;  // neither kernel's tile
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);
  p.tile_rows = kc::kAttentionMmaTileRows;  // the tensor-core kernel: not for fp32
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);
  p.storage = kc::Storage::F16;
  p.head_dim = 64;
  p.q_stride = 8 * 64 - 8;  // rows of q overlap
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);
  p.q_stride = 8 * 64 + 4;  // the tensor-core kernel loads q as 16-byte vectors
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);
  p.head_dim = 96;  // nor for head sizes other than 64 and 128
  p.q_stride = 0;
  EXPECT_EQ(kc::launch_paged_attention(p, nullptr), cudaErrorInvalidValue);
}

TEST(CudaAttentionPlan, TensorCoresForPrefillSizedHalfPrecisionWork) {
  using kc::Storage;
  EXPECT_TRUE(kc::attention_uses_mma(Storage::F16, 128, 2048, 1));
  EXPECT_TRUE(kc::attention_uses_mma(Storage::BF16, 64, 64, 4));
  EXPECT_FALSE(kc::attention_uses_mma(Storage::F32, 128, 2048, 1));  // no fp32 fragments
  EXPECT_FALSE(kc::attention_uses_mma(Storage::F16, 96, 2048, 1));   // head size
  EXPECT_FALSE(kc::attention_uses_mma(Storage::F16, 128, 63, 1));    // less than one tile
  EXPECT_FALSE(kc::attention_uses_mma(Storage::F16, 128, 64, 64));   // decode batch
  EXPECT_FALSE(kc::attention_uses_mma(Storage::F16, 128, 100, 0));
}

struct Seq {
  int64_t n_ctx;  // keys 0..n_ctx-1 (the new rows' included)
  int64_t n_new;  // query rows: positions n_ctx - n_new .. n_ctx - 1
  std::vector<int32_t> table;
};

struct Case {
  int64_t head_dim, n_heads, n_kv_heads, block_size, window;
  kc::Storage storage;
  std::vector<Seq> seqs;
  int64_t splits;
  std::string what;
  int64_t tile_rows = kc::kAttentionTileRows;  // kAttentionMmaTileRows: the tensor-core kernel
  int64_t q_pad = 0;  // > 0: q's rows q_pad elements apart beyond their heads (q_stride), as the
                      // model's fused QKV rows are, with random values in between
  bool fa2 = false;   // with kAttentionMmaTileRows: the FlashAttention-2-style kernel
  bool decode_kernel = false;    // single-row tiles: the decode kernel (attention_decode_kernel)
  bool merge_in_kernel = false;  // with it and splits > 1: counters, no combine kernel
};

// 45 new tokens after a 300-token paged prefix beside a fresh 17-token sequence, in one
// launch, with q's rows q_pad elements apart beyond their heads.
Case short_prefill(int64_t hd, int64_t nh, int64_t nkv, int64_t bs, int64_t window, kc::Storage st,
                   std::string what, int64_t tile_rows, int64_t q_pad) {
  return {hd,        nh,   nkv, bs, window, st, {{345, 45, {}}, {17, 17, {}}}, 1, std::move(what),
          tile_rows, q_pad};
}

void run_case(Case c, std::mt19937& rng) {
  const int64_t hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads, bs = c.block_size;
  // Scattered blocks: every sequence's blocks are a random subset of one shared pool.
  int64_t blocks = 0;
  for (Seq& s : c.seqs) blocks += (s.n_ctx + bs - 1) / bs;
  std::vector<int32_t> perm(static_cast<size_t>(blocks + 3));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  int64_t stride = 1, used = 0;
  for (Seq& s : c.seqs) {
    const int64_t nb = (s.n_ctx + bs - 1) / bs;
    s.table.assign(perm.begin() + used, perm.begin() + used + nb);
    used += nb;
    stride = std::max(stride, nb);
  }
  const int64_t num_blocks = static_cast<int64_t>(perm.size());
  const int64_t slot_elems = nkv * hd;
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> k(static_cast<size_t>(num_blocks * bs * slot_elems));
  std::vector<float> v(k.size());
  for (float& x : k) x = round_to(c.storage, u(rng));
  for (float& x : v) x = round_to(c.storage, u(rng));

  std::vector<int32_t> q_pos, q_seq, tables(c.seqs.size() * static_cast<size_t>(stride), 0), n_ctx;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const Seq& sq = c.seqs[s];
    for (int64_t t = 0; t < sq.n_new; ++t) {
      q_pos.push_back(static_cast<int32_t>(sq.n_ctx - sq.n_new + t));
      q_seq.push_back(static_cast<int32_t>(s));
    }
    std::copy(sq.table.begin(), sq.table.end(), tables.begin() + s * stride);
    n_ctx.push_back(static_cast<int32_t>(sq.n_ctx));
  }
  const int64_t rows = static_cast<int64_t>(q_pos.size());
  std::vector<float> q(static_cast<size_t>(rows * nh * hd));
  for (float& x : q) x = round_to(c.storage, u(rng));

  // Reference: kernels/cpu per sequence.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> want(q.size());
  int64_t row = 0;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    cb::kernels::cpu::PagedAttention a;
    a.q = q.data() + row * nh * hd;
    a.out = want.data() + row * nh * hd;
    a.q_pos = q_pos.data() + row;
    a.n_q = c.seqs[s].n_new;
    a.n_heads = nh;
    a.n_kv_heads = nkv;
    a.head_dim = hd;
    a.k_pool = k.data();
    a.v_pool = v.data();
    a.block_table = c.seqs[s].table.data();
    a.block_size = bs;
    a.n_ctx = c.seqs[s].n_ctx;
    a.window = c.window;
    a.scale = scale;
    cb::kernels::cpu::paged_attention(a);
    row += c.seqs[s].n_new;
  }

  const std::vector<int32_t> tiles = kc::plan_attention_tiles(q_seq, c.tile_rows);
  DeviceArray<int32_t> d_pos(q_pos), d_seq(q_seq), d_tables(tables), d_ctx(n_ctx), d_tiles(tiles);
  const int64_t q_stride = nh * hd + c.q_pad;
  std::vector<float> q_rows(static_cast<size_t>(rows * q_stride));
  for (float& x : q_rows) x = round_to(c.storage, u(rng));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(q.begin() + r * nh * hd, q.begin() + (r + 1) * nh * hd,
              q_rows.begin() + r * q_stride);
  }
  DeviceTensor dq(c.storage, q_rows), dk(c.storage, k), dv(c.storage, v), dout(c.storage, q.size());
  dout.poison();
  const int64_t ws = kc::attention_workspace_floats(rows, nh, hd, c.splits);
  DeviceArray<float> dws(static_cast<size_t>(std::max<int64_t>(ws, 1)));
  dws.poison();

  kc::PagedAttentionParams p;
  p.q = dq.get();
  p.q_stride = c.q_pad > 0 ? q_stride : 0;
  p.out = dout.get();
  p.q_pos = d_pos.get();
  p.q_seq = d_seq.get();
  p.rows = rows;
  p.n_heads = nh;
  p.n_kv_heads = nkv;
  p.head_dim = hd;
  p.k_pool = dk.get();
  p.v_pool = dv.get();
  p.block_tables = d_tables.get();
  p.table_stride = stride;
  p.n_ctx = d_ctx.get();
  p.block_size = bs;
  p.window = c.window;
  p.scale = scale;
  p.storage = c.storage;
  p.tiles = d_tiles.get();
  p.n_tiles = static_cast<int64_t>(tiles.size() / 2);
  p.splits = c.splits;
  p.workspace = c.splits > 1 ? dws.get() : nullptr;
  p.tile_rows = c.tile_rows;
  p.fa2 = c.fa2;
  p.decode_kernel = c.decode_kernel;
  DeviceArray<int32_t> counters(std::vector<int32_t>(static_cast<size_t>(rows * nh), 0));
  if (c.merge_in_kernel) p.counters = counters.get();
  ASSERT_EQ(kc::attention_uses_decode_kernel(p), c.decode_kernel) << c.what;
  ASSERT_EQ(kc::launch_paged_attention(p, nullptr), cudaSuccess) << c.what;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.what;
  for (int32_t n : counters.download()) ASSERT_EQ(n, 0) << c.what << ": a counter left non-zero";

  const std::vector<float> got = dout.download();
  const float tol = c.storage == kc::Storage::F32   ? 2e-5f
                    : c.storage == kc::Storage::F16 ? 2e-3f
                                                    : 1.6e-2f;
  int bad = 0;
  for (int64_t r = 0; r < rows && bad < 5; ++r) {
    for (int64_t h = 0; h < nh; ++h) {
      const float* w = want.data() + (r * nh + h) * hd;
      const float* g = got.data() + (r * nh + h) * hd;
      float mag = 0;
      for (int64_t d = 0; d < hd; ++d) mag = std::max(mag, std::fabs(w[d]));
      for (int64_t d = 0; d < hd; ++d) {
        if (!(std::fabs(g[d] - w[d]) <= tol * (mag + 1e-3f)) && bad++ < 5) {
          ADD_FAILURE() << c.what << ": row " << r << " (pos " << q_pos[static_cast<size_t>(r)]
                        << ") head " << h << " dim " << d << ": got " << g[d] << " want " << w[d];
        }
      }
    }
  }
}

// Every head size, GQA ratio, block size, storage type and window of the CUDA-core sweeps:
// fn(hd, nh, nkv, bs, st, window, a description of them).
template <typename Fn>
void for_each_shape(Fn fn) {
  const std::vector<std::pair<int64_t, int64_t>> heads = {{8, 8}, {8, 2}, {16, 2}, {8, 1}};
  for (int64_t hd : {64, 128}) {
    for (const auto& [nh, nkv] : heads) {
      for (int64_t bs : {1, 16, 32}) {
        for (kc::Storage st : {kc::Storage::F32, kc::Storage::F16, kc::Storage::BF16}) {
          for (int64_t window : {0, 37}) {
            fn(hd, nh, nkv, bs, st, window,
               "hd " + std::to_string(hd) + " heads " + std::to_string(nh) + "/" +
                   std::to_string(nkv) + " block " + std::to_string(bs) + " " + storage_name(st) +
                   " window " + std::to_string(window));
          }
        }
      }
    }
  }
}

// Decode: one row per sequence, histories up to 3,000 tokens, keys over `splits` blocks; q at a
// stride with 4 splits.
Case decode_case(int64_t hd, int64_t nh, int64_t nkv, int64_t bs, kc::Storage st, int64_t window,
                 int64_t splits, const std::string& base) {
  return {hd,
          nh,
          nkv,
          bs,
          window,
          st,
          {{1, 1, {}}, {33, 1, {}}, {700, 1, {}}, {3000, 1, {}}, {129, 1, {}}},
          splits,
          base + " decode splits " + std::to_string(splits),
          kc::kAttentionTileRows,
          splits == 4 ? 2 * nkv * hd : 0};
}

TEST(CudaKernels, PagedAttentionMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for_each_shape([&](int64_t hd, int64_t nh, int64_t nkv, int64_t bs, kc::Storage st,
                     int64_t window, const std::string& base) {
    // Prefill: 45 new tokens after a 300-token paged prefix, and a fresh 17-token sequence, in
    // one launch.
    run_case(short_prefill(hd, nh, nkv, bs, window, st, base + " prefill, strided q",
                           kc::kAttentionTileRows, 2 * (nh + nkv) * hd),
             rng);
    for (int64_t splits : {1, 4, 7}) {
      run_case(decode_case(hd, nh, nkv, bs, st, window, splits, base), rng);
    }
  });
}

// The decode kernel (PagedAttentionParams::decode_kernel, CudaModel's default) over the decode
// cases of the sweep above: one row per sequence, histories of 1 to 3,000 tokens, keys split or
// not, q at a stride; every head size, GQA ratio, block size, storage type and window.
TEST(CudaKernels, PagedAttentionDecodeKernelMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  for_each_shape([&](int64_t hd, int64_t nh, int64_t nkv, int64_t bs, kc::Storage st,
                     int64_t window, const std::string& base) {
    for (int64_t splits : {1, 4, 7}) {
      Case dec = decode_case(hd, nh, nkv, bs, st, window, splits, base + " decode kernel");
      dec.decode_kernel = true;
      run_case(dec, rng);
      if (splits > 1) {  // the splits merged by the kernel's last block, not a combine
        dec.merge_in_kernel = true;
        dec.what += " merged in the kernel";
        run_case(dec, rng);
      }
    }
  });
}

// The tensor-core kernels, wmma and FlashAttention-2-style (fp16/bf16, head_dim 64 and 128),
// over the same sweep of heads, block sizes and windows: prefill of 200 tokens after a
// 1,000-token paged prefix beside a fresh 130-token sequence (full and partial 64-row tiles),
// and 45 rows after 300 beside 17 fresh.
TEST(CudaKernels, PagedAttentionOnTensorCoresMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  const std::vector<std::pair<int64_t, int64_t>> heads = {{8, 8}, {8, 2}, {16, 2}, {8, 1}};
  for (bool fa2 : {false, true}) {
    for (int64_t hd : {64, 128}) {
      for (const auto& [nh, nkv] : heads) {
        for (int64_t bs : {1, 16, 32}) {
          for (kc::Storage st : {kc::Storage::F16, kc::Storage::BF16}) {
            for (int64_t window : {0, 37}) {
              const std::string base = std::string(fa2 ? "fa2" : "mma") + " hd " +
                                       std::to_string(hd) + " heads " + std::to_string(nh) + "/" +
                                       std::to_string(nkv) + " block " + std::to_string(bs) + " " +
                                       storage_name(st) + " window " + std::to_string(window);
              Case big{hd,
                       nh,
                       nkv,
                       bs,
                       window,
                       st,
                       {{1200, 200, {}}, {130, 130, {}}},
                       1,
                       base + " long prefix",
                       kc::kAttentionMmaTileRows,
                       0,
                       fa2};
              run_case(big, rng);
              Case strided = short_prefill(hd, nh, nkv, bs, window, st, base + " short, strided q",
                                           kc::kAttentionMmaTileRows, 2 * nkv * hd);
              strided.fa2 = fa2;
              run_case(strided, rng);
            }
          }
        }
      }
    }
  }
}

// A row with no allowed key (position beyond the window of every key: impossible here, so a
// negative position) gets zeros, as kernels/cpu defines.
TEST(CudaKernels, PagedAttentionRowWithoutKeysIsZero) {
  SKIP_WITHOUT_GPU();
  const int64_t hd = 64, nh = 2;
  std::vector<float> q(static_cast<size_t>(nh * hd), 1.0f), k(16 * hd * nh, 0.5f),
      v(k.size(), 2.0f);
  DeviceArray<float> dq(q), dk(k), dv(v), dout(q.size());
  dout.poison();
  DeviceArray<int32_t> pos(std::vector<int32_t>{-1}), seq(std::vector<int32_t>{0}),
      table(std::vector<int32_t>{0}), ctx(std::vector<int32_t>{16}),
      tiles(std::vector<int32_t>{0, 1});
  kc::PagedAttentionParams p;
  p.q = dq.get();
  p.out = dout.get();
  p.q_pos = pos.get();
  p.q_seq = seq.get();
  p.rows = 1;
  p.n_heads = nh;
  p.n_kv_heads = nh;
  p.head_dim = hd;
  p.k_pool = dk.get();
  p.v_pool = dv.get();
  p.block_tables = table.get();
  p.table_stride = 1;
  p.n_ctx = ctx.get();
  p.block_size = 16;
  p.tiles = tiles.get();
  p.n_tiles = 1;
  ASSERT_EQ(kc::launch_paged_attention(p, nullptr), cudaSuccess);
  for (float x : dout.download()) ASSERT_EQ(x, 0.0f);
}

}  // namespace
