// The CPU backend's attention kernels, paged_attention_sgemm and paged_attention_direct (fp32)
// and their dispatcher paged_attention_fast, against paged_attention (the double-accumulating
// oracle) over the sweeps ops_test.cc runs for the oracle: head_dim 8/64/128, GQA 1/4/8 and MQA,
// shuffled block tables, windows, unsorted queries far into the context, queries past n_ctx,
// no queries. Outputs start as NaN and every pool slot the kernel must not read is NaN, so a
// forgotten row or a stray read (even one multiplied by a zero probability) fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/ops.h"

namespace cb::kernels::cpu {
namespace {

constexpr double kTol = 1e-5;
/// Outputs are convex combinations of V rows in [-1, 1]; an element's error is relative to
/// max(|element|, kFloor), the fp32 resolution of sums of that range.
constexpr double kFloor = 1e-2;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Largest relative error seen over the run per kind of case, printed at exit for the record.
std::map<std::string, double>& max_errors() {
  static std::map<std::string, double> m;
  return m;
}

class FastErrorReport : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [name, err] : max_errors()) {
      std::printf("[ max error ] %-26s %.3g\n", name.c_str(), err);
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kFastReport =
    ::testing::AddGlobalTestEnvironment(new FastErrorReport);

struct FastCase {
  int64_t head_dim, n_heads, n_kv_heads, block_size, n_ctx, window;
  std::vector<int32_t> q_pos;
  float qk_scale = 1.0f;  // multiplies q and k, to push scores far from 0
  double tol = kTol;
  bool poison_unseen = false;  // NaN slots and bogus block numbers where no query looks
};

std::string describe(const FastCase& c) {
  return "hd " + std::to_string(c.head_dim) + " heads " + std::to_string(c.n_heads) + "/" +
         std::to_string(c.n_kv_heads) + " bs " + std::to_string(c.block_size) + " ctx " +
         std::to_string(c.n_ctx) + " win " + std::to_string(c.window) + " n_q " +
         std::to_string(c.q_pos.size());
}

/// Whether a query at `qp` may attend to key position j (the definition in ops.h).
bool allowed(const FastCase& c, int64_t qp, int64_t j) {
  return j < c.n_ctx && j <= qp && (c.window <= 0 || j > qp - c.window);
}

/// Runs the reference, both fast kernels and their dispatcher on one shuffled, NaN-padded
/// pool; checks each against the reference and the dispatcher's output against the kernel it
/// should have picked, bit for bit; returns the dispatcher's output.
std::vector<float> check_fast(const FastCase& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const int64_t hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads, bs = c.block_size;
  const int64_t n_q = static_cast<int64_t>(c.q_pos.size());
  const int64_t row = nkv * hd;
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> q(static_cast<size_t>(n_q * nh * hd));
  for (auto& x : q) x = dist(rng) * c.qk_scale;

  // Physical blocks in shuffled order plus spare ones; every slot not holding a key is NaN.
  const int64_t used = (c.n_ctx + bs - 1) / bs, num_blocks = used + 3;
  std::vector<int32_t> phys(static_cast<size_t>(num_blocks));
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  std::vector<int32_t> table(phys.begin(), phys.begin() + used);
  std::vector<float> k_pool(static_cast<size_t>(num_blocks * bs * row), kNaN), v_pool = k_pool;
  std::vector<char> seen(static_cast<size_t>(c.n_ctx), 0);
  for (int64_t s = 0; s < c.n_ctx; ++s) {
    for (int32_t qp : c.q_pos) seen[static_cast<size_t>(s)] |= allowed(c, qp, s) ? 1 : 0;
    if (c.poison_unseen && !seen[static_cast<size_t>(s)]) continue;
    const int64_t dst = (table[static_cast<size_t>(s / bs)] * bs + s % bs) * row;
    for (int64_t i = 0; i < row; ++i) {
      k_pool[static_cast<size_t>(dst + i)] = dist(rng) * c.qk_scale;
      v_pool[static_cast<size_t>(dst + i)] = dist(rng);
    }
  }
  if (c.poison_unseen) {
    // A block no query looks into may already be freed: its table entry points nowhere.
    for (int64_t b = 0; b < used; ++b) {
      bool any = false;
      for (int64_t s = b * bs; s < std::min(c.n_ctx, (b + 1) * bs); ++s)
        any = any || seen[static_cast<size_t>(s)];
      if (!any) table[static_cast<size_t>(b)] = std::numeric_limits<int32_t>::max();
    }
  }

  PagedAttention p;
  p.q = q.data();
  p.q_pos = c.q_pos.data();
  p.n_q = n_q;
  p.n_heads = nh;
  p.n_kv_heads = nkv;
  p.head_dim = hd;
  p.k_pool = k_pool.data();
  p.v_pool = v_pool.data();
  p.block_table = table.data();
  p.block_size = bs;
  p.n_ctx = c.n_ctx;
  p.window = c.window;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));

  std::vector<float> ref(q.size(), kNaN);
  p.out = ref.data();
  paged_attention(p);
  // Each path on its own (the dispatcher's choice depends on n_q alone), then the dispatcher.
  std::vector<float> out, by_sgemm, by_direct;
  for (const auto& [name, kernel] :
       {std::pair{"sgemm", &paged_attention_sgemm}, std::pair{"direct", &paged_attention_direct},
        std::pair{"fast", &paged_attention_fast}}) {
    SCOPED_TRACE(name);
    out.assign(q.size(), kNaN);
    p.out = out.data();
    kernel(p);
    double worst = -1;
    size_t worst_i = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double r = ref[i];
      double err = std::abs(static_cast<double>(out[i]) - r) / std::max(std::abs(r), kFloor);
      if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
      if (r == 0.0 && out[i] != 0.0f) err = std::numeric_limits<double>::infinity();  // zeros
      if (err > worst) {
        worst = err;
        worst_i = i;
      }
    }
    if (!out.empty()) {
      const std::string kind = std::string("paged_attention_") + name;
      double& rec = max_errors()[c.tol == kTol ? kind : kind + " x40"];
      rec = std::max(rec, worst);
      EXPECT_LE(worst, c.tol) << "element " << worst_i << " got " << out[worst_i] << " want "
                              << ref[worst_i];
    }
    if (std::string(name) == "sgemm") by_sgemm = out;
    if (std::string(name) == "direct") by_direct = out;
  }
  // The direct kernel split over threads: one part, whole KV heads' groups (2 parts), uneven
  // groups or query heads apart from their group (3), every query head alone: the same bits as
  // paged_attention_direct (which may itself split, by OPENBLAS_NUM_THREADS). Decode-sized
  // calls only: the engine sends no others to this kernel.
  const std::vector<int64_t> splits = n_q <= kDirectAttentionMaxQueries
                                          ? std::vector<int64_t>{1, 2, 3, nh}
                                          : std::vector<int64_t>{};
  for (int64_t parts : splits) {
    std::vector<float> split(q.size(), kNaN);
    p.out = split.data();
    paged_attention_direct_split(p, parts);
    EXPECT_EQ(0, std::memcmp(split.data(), by_direct.data(), split.size() * sizeof(float)))
        << "paged_attention_direct in " << parts << " parts";
  }
  const std::vector<float>& picked = attention_prefers_direct(p) ? by_direct : by_sgemm;
  if (!out.empty()) {
    EXPECT_EQ(0, std::memcmp(out.data(), picked.data(), out.size() * sizeof(float)))
        << "paged_attention_fast did not run the kernel attention_prefers_direct names";
  }
  return out;
}

TEST(PagedAttentionFastTest, ShapeSweep) {
  std::mt19937 rng(21);
  const int64_t head_splits[][2] = {{4, 4}, {8, 2}, {16, 2}, {8, 1}};  // GQA 1, 4, 8 and MQA
  for (int64_t hd : {8, 64, 128}) {
    for (const auto& hs : head_splits) {
      for (int64_t bs : {1, 5, 16, 32, 64}) {
        for (int64_t window : {0, 19}) {
          // A prefill chunk at the end of an odd-length context, and a lone decode query.
          std::vector<int32_t> chunk;
          for (int32_t t = 126; t < 133; ++t) chunk.push_back(t);
          check_fast({hd, hs[0], hs[1], bs, 133, window, chunk}, rng);
          check_fast({hd, hs[0], hs[1], bs, 37, window, {36}}, rng);
        }
      }
    }
  }
}

TEST(PagedAttentionFastTest, FullPrefillFromPositionZero) {
  std::mt19937 rng(22);
  std::vector<int32_t> all(71);
  std::iota(all.begin(), all.end(), 0);
  for (int64_t window : {0, 1, 8}) check_fast({64, 8, 2, 16, 71, window, all}, rng);
}

TEST(PagedAttentionFastTest, LongPrefillSpansSeveralQueryTiles) {
  std::mt19937 rng(23);
  // 600 queries, shuffled: several query tiles for every group size, each tile's key range
  // narrower than the whole context.
  std::vector<int32_t> all(600);
  std::iota(all.begin(), all.end(), 100);
  std::shuffle(all.begin(), all.end(), rng);
  for (int64_t window : {0, 64}) {
    check_fast({64, 4, 4, 16, 700, window, all}, rng);
    check_fast({32, 8, 1, 64, 700, window, all}, rng);
  }
}

TEST(PagedAttentionFastTest, QueriesFarIntoALongContext) {
  std::mt19937 rng(24);
  // Unsorted positions, late ones and early ones, in one call.
  const std::vector<int32_t> pos = {4098, 4000, 2500, 4097, 3, 0, 1024};
  for (int64_t bs : {16, 64}) {
    for (int64_t window : {0, 1024, 4096, 1}) check_fast({64, 8, 2, bs, 4099, window, pos}, rng);
  }
  check_fast({128, 4, 1, 32, 33001, 0, {33000, 32768}}, rng);
  check_fast({128, 4, 1, 32, 33001, 4096, {33000, 32768}}, rng);
}

TEST(PagedAttentionFastTest, ReadsOnlyKeysSomeQuerySees) {
  std::mt19937 rng(25);
  // Slots outside every query's window are NaN and blocks holding only such slots have bogus
  // table entries (as after a sliding-window eviction): both kernels must skip them.
  const std::vector<int32_t> pos = {4098, 30, 2500, 4090, 2600};
  for (int64_t bs : {1, 16, 64}) {
    for (int64_t window : {1, 8, 100}) {
      FastCase c{64, 8, 2, bs, 4099, window, pos};
      c.poison_unseen = true;
      check_fast(c, rng);
    }
  }
}

TEST(PagedAttentionFastTest, DecodeReadsOnlyItsWindow) {
  std::mt19937 rng(29);
  // Mistral's decode: one query whose sliding window left the start of the context behind,
  // those slots NaN and their blocks' table entries bogus (as after a window eviction).
  for (int64_t bs : {1, 16}) {
    FastCase c{128, 32, 8, bs, 1500, 256, {1499}};
    c.poison_unseen = true;
    check_fast(c, rng);
    FastCase two{64, 8, 2, bs, 1500, 100, {1499, 1400}};
    two.poison_unseen = true;
    check_fast(two, rng);
  }
}

TEST(PagedAttentionFastTest, LargeScoresNeedMaxSubtraction) {
  std::mt19937 rng(26);
  // q, k scaled by 40: scores reach the thousands, where exp() overflows. Rounding such a
  // score to fp32 alone moves it by up to 3e-5 (half an ulp at 1000), which shifts the
  // weights of near-tied keys by as much: the tolerance scales with that ulp.
  FastCase c{64, 4, 2, 16, 50, 0, {49, 20, 0}, 40.f};
  c.tol = 1e-4;
  const auto out = check_fast(c, rng);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
}

TEST(PagedAttentionFastTest, QueriesPastContextNeverReadPastNCtx) {
  std::mt19937 rng(27);
  const auto out = check_fast({16, 2, 1, 16, 21, 3, {21, 24, 25, -1}}, rng);
  for (size_t i = 2 * 2 * 16; i < out.size(); ++i) EXPECT_EQ(out[i], 0.f) << i;
  check_fast({16, 2, 1, 16, 21, 0, {21, 40}}, rng);
  const auto empty = check_fast({16, 2, 1, 16, 0, 0, {0, 5}}, rng);  // empty context: zeros
  for (float x : empty) EXPECT_EQ(x, 0.f);
}

TEST(PagedAttentionFastTest, InvalidHeadSplitZeroFills) {
  std::vector<float> q(2 * 6 * 8, 1.f), out(q.size(), kNaN);
  const std::vector<int32_t> pos = {0, 1};
  PagedAttention p;
  p.q = q.data();
  p.out = out.data();
  p.q_pos = pos.data();
  p.n_q = 2;
  p.n_heads = 6;
  p.n_kv_heads = 4;  // does not divide n_heads
  p.head_dim = 8;
  p.n_ctx = 2;
  for (auto kernel : {&paged_attention_sgemm, &paged_attention_direct, &paged_attention_fast}) {
    std::fill(out.begin(), out.end(), kNaN);
    kernel(p);
    for (float x : out) EXPECT_EQ(x, 0.f);
  }
}

TEST(PagedAttentionFastTest, NoQueriesIsANoOp) {
  PagedAttention p;  // every pointer null
  p.n_heads = 4;
  p.n_kv_heads = 2;
  p.head_dim = 64;
  p.n_ctx = 10;
  paged_attention_sgemm(p);
  paged_attention_direct(p);
  paged_attention_fast(p);
  SUCCEED();
}

TEST(PagedAttentionFastTest, DecodeGoesDirectPrefillThroughSgemm) {
  PagedAttention p;
  for (int64_t n = 1; n <= kDirectAttentionMaxQueries; ++n) {
    p.n_q = n;
    EXPECT_TRUE(attention_prefers_direct(p)) << n;
  }
  p.n_q = kDirectAttentionMaxQueries + 1;
  EXPECT_FALSE(attention_prefers_direct(p));
}

// The direct kernel takes a run's keys four at a time and one at a time at its end (a block's
// run of 16 keys: four groups; of 5: one group and one key; of 1: one key): each key's products
// must be the same either way, so the same K/V in blocks of 1, 5 and 16 give the same bits.
TEST(PagedAttentionFastTest, DirectGivesTheSameBitsForAnyBlockSize) {
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t hd : {8, 12, 64, 128}) {
    const int64_t nh = 8, nkv = 2, ctx = 203, kvd = nkv * hd;
    std::vector<float> keys(static_cast<size_t>(ctx * kvd)), values(keys.size());
    std::vector<float> q(static_cast<size_t>(2 * nh * hd));
    for (auto* v : {&keys, &values, &q})
      for (float& x : *v) x = d(rng);
    const std::vector<int32_t> pos = {static_cast<int32_t>(ctx - 1), 150};
    std::vector<float> first;
    for (int64_t bs : {1, 5, 16}) {
      // Blocks in reverse order in the pool, so runs end at every block's end.
      const int64_t nb = (ctx + bs - 1) / bs;
      std::vector<int32_t> table(static_cast<size_t>(nb));
      std::vector<float> k_pool(static_cast<size_t>(nb * bs * kvd)), v_pool(k_pool.size());
      for (int64_t b = 0; b < nb; ++b)
        table[static_cast<size_t>(b)] = static_cast<int32_t>(nb - 1 - b);
      for (int64_t t = 0; t < ctx; ++t) {
        const int64_t slot = table[static_cast<size_t>(t / bs)] * bs + t % bs;
        std::copy_n(keys.begin() + t * kvd, kvd, k_pool.begin() + slot * kvd);
        std::copy_n(values.begin() + t * kvd, kvd, v_pool.begin() + slot * kvd);
      }
      PagedAttention p;
      std::vector<float> out(q.size(), kNaN);
      p.q = q.data();
      p.out = out.data();
      p.q_pos = pos.data();
      p.n_q = 2;
      p.n_heads = nh;
      p.n_kv_heads = nkv;
      p.head_dim = hd;
      p.k_pool = k_pool.data();
      p.v_pool = v_pool.data();
      p.block_table = table.data();
      p.block_size = bs;
      p.n_ctx = ctx;
      p.scale = 0.125f;
      paged_attention_direct_split(p, 1);
      if (first.empty()) {
        first = out;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), out.data(), out.size() * sizeof(float)))
            << "head dim " << hd << ", blocks of " << bs << " against blocks of 1";
      }
    }
  }
}

TEST(PagedAttentionFastTest, DirectSplitsLargeCallsOverThreads) {
  // The expected part counts below are worked out from a thread's share of 2^19.
  static_assert(kDirectAttentionWorkPerThread == int64_t{1} << 19, "recount the parts below");
  std::vector<int32_t> table(64);
  std::vector<int32_t> pos = {1023, 1022, 1021, 1020};
  PagedAttention p;
  p.n_heads = 32;
  p.n_kv_heads = 8;
  p.head_dim = 128;
  p.block_table = table.data();
  p.block_size = 16;
  p.n_ctx = 1024;
  p.q_pos = pos.data();
  p.n_q = 1;  // 1,024 keys x 32 heads x 128: 8 threads' worth of work
  EXPECT_EQ(1, direct_attention_parts(p, 1));
  EXPECT_EQ(2, direct_attention_parts(p, 2));
  EXPECT_EQ(8, direct_attention_parts(p, 16));
  p.n_heads = p.n_kv_heads = 4;  // at most a part per query head
  p.head_dim = 2048;
  EXPECT_EQ(4, direct_attention_parts(p, 16));
  p.n_heads = 32;
  p.n_kv_heads = 8;
  p.head_dim = 128;
  p.window = 128;  // the keys a query sees count, not the context: 128 x 32 x 128 is one part
  EXPECT_EQ(1, direct_attention_parts(p, 16));
  p.window = 256;
  EXPECT_EQ(2, direct_attention_parts(p, 16));
  p.n_q = 4;  // every query's keys count
  EXPECT_EQ(8, direct_attention_parts(p, 16));
  p.window = 0;
  p.n_kv_heads = 5;  // 32 heads over 5 KV heads: an invalid shape is one part
  EXPECT_EQ(1, direct_attention_parts(p, 16));
  p.n_kv_heads = 8;
  p.n_q = 0;
  EXPECT_EQ(1, direct_attention_parts(p, 16));
}

TEST(PagedAttentionFastTest, DecodeBatchesOverLongContexts) {
  std::mt19937 rng(28);
  // The decode shapes the direct path exists for: 1-4 queries at the end of a long context,
  // LLaMA-2-7B's and Mistral's heads (128 x 32/32, 32/8) and stories260K's (8 x 8/4), and
  // head dims the direct kernel runs with a run-time length.
  for (int64_t window : {0, 1024, 300}) {
    check_fast({128, 32, 32, 16, 1500, window, {1499}}, rng);
    check_fast({128, 32, 8, 16, 1500, window, {1496, 1497, 1498, 1499}}, rng);
    check_fast({8, 8, 4, 16, 2048, window, {2047, 2046}}, rng);
    check_fast({16, 8, 2, 16, 900, window, {899}}, rng);
    check_fast({32, 8, 4, 16, 900, window, {897, 898, 899}}, rng);
    // Head dims without a compiled kernel: whole groups of eight plus a tail, and none.
    check_fast({80, 8, 8, 16, 900, window, {898, 899}}, rng);
    check_fast({12, 4, 2, 5, 900, window, {899}}, rng);
    check_fast({6, 4, 1, 16, 900, window, {899, 500}}, rng);
  }
}

}  // namespace
}  // namespace cb::kernels::cpu
