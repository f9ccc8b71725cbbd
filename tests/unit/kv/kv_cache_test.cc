#include "lib/kv/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "lib/core/error.h"

namespace {

using cb::kv::KvCache;
using cb::kv::KvConfig;
using cb::kv::KvStats;
using cb::kv::SeqId;

KvConfig small_config(int block_size, int num_blocks) {
  KvConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 3;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  return c;
}

// Runs `fn`, expecting cb::Error whose message contains every string in `needles`.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected cb::Error containing '" << needles.front() << "'";
  } catch (const cb::Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
}

// Distinct, exactly representable value for float `i` of a slot written with `tag`.
float pattern(int64_t tag, int layer, int kv, int64_t i) {
  return static_cast<float>((((tag * 4 + layer * 2 + kv) * 64) + i) % (int64_t{1} << 24));
}

// Writes `tag`'s pattern into slot `pos` of `seq`, all layers, K and V.
void write_slot(KvCache& c, SeqId seq, int64_t pos, int64_t tag) {
  for (int l = 0; l < c.config().n_layers; ++l) {
    float* k = c.k_slot(l, seq, pos);
    float* v = c.v_slot(l, seq, pos);
    for (int64_t i = 0; i < c.slot_floats(); ++i) {
      k[i] = pattern(tag, l, 0, i);
      v[i] = pattern(tag, l, 1, i);
    }
  }
}

// Reads slot `pos` of `seq` the way paged attention does (block table + pool) and checks it.
bool slot_holds(const KvCache& c, SeqId seq, int64_t pos, int64_t tag) {
  const int64_t bs = c.config().block_size;
  const int64_t sf = c.slot_floats();
  const int32_t b = c.block_table(seq)[static_cast<size_t>(pos / bs)];
  const int64_t off = (b * bs + pos % bs) * sf;
  for (int l = 0; l < c.config().n_layers; ++l) {
    for (int64_t i = 0; i < sf; ++i) {
      if (c.k_pool(l)[off + i] != pattern(tag, l, 0, i)) return false;
      if (c.v_pool(l)[off + i] != pattern(tag, l, 1, i)) return false;
    }
  }
  return true;
}

// ---- configuration ---------------------------------------------------------------------

TEST(KvCacheConfigTest, RejectsNonPositiveFieldsByName) {
  const char* fields[] = {"n_layers", "n_kv_heads", "head_dim", "block_size", "num_blocks"};
  for (int f = 0; f < 5; ++f) {
    for (int bad : {0, -3}) {
      KvConfig c = small_config(16, 4);
      int* field[] = {&c.n_layers, &c.n_kv_heads, &c.head_dim, &c.block_size, &c.num_blocks};
      *field[f] = bad;
      expect_error([&] { KvCache cache(c); },
                   {std::string("KvConfig.") + fields[f], std::to_string(bad)});
    }
  }
}

TEST(KvCacheConfigTest, RejectsOverflowAndHugePools) {
  KvConfig c;
  c.n_layers = c.n_kv_heads = c.head_dim = c.block_size = c.num_blocks = INT_MAX;
  expect_error([&] { KvCache cache(c); }, {"KvConfig", "overflow"});

  // LLaMA-2-70B-like: 80 layers x 8 kv heads x 128 x 16 tokens x 2 x 4 B = 10 MiB per block.
  KvConfig big;
  big.n_layers = 80;
  big.n_kv_heads = 8;
  big.head_dim = 128;
  big.block_size = 16;
  big.num_blocks = INT_MAX;  // 20 PiB: more than any machine's memory
  expect_error([&] { KvCache cache(big); }, {"KV cache", "more than this machine's"});

  // A cache of block tables only allocates no host pool, so the host limit does not apply
  // (the GPU's allocator judges the device pool); overflow is still refused.
  big.host_pools = false;
  big.num_blocks = 6554;  // 64 GiB of device pool
  KvCache tables_only(big);
  EXPECT_EQ(tables_only.stats().num_blocks, 6554);
  c.host_pools = false;
  expect_error([&] { KvCache cache(c); }, {"KvConfig", "overflow"});
}

TEST(KvCacheConfigTest, FreshStatsAndPoolLayout) {
  KvCache c(small_config(4, 5));
  const KvStats st = c.stats();
  EXPECT_EQ(st.num_blocks, 5);
  EXPECT_EQ(st.free_blocks, 5);
  EXPECT_EQ(st.sequences, 0);
  EXPECT_EQ(st.tokens, 0);
  EXPECT_EQ(st.shared_blocks, 0);
  EXPECT_EQ(st.bytes_per_block, 2u * 2 * 4 * 6 * sizeof(float));
  EXPECT_EQ(c.slot_floats(), 6);
  // Layer pools are contiguous [num_blocks, block_size, n_kv_heads, head_dim] arrays.
  EXPECT_EQ(c.k_pool(1) - c.k_pool(0), 5 * 4 * 6);
  EXPECT_EQ(c.v_pool(1) - c.v_pool(0), 5 * 4 * 6);
  const KvCache& cc = c;
  EXPECT_EQ(cc.k_pool(1), c.k_pool(1));
  EXPECT_EQ(cc.v_pool(0), c.v_pool(0));
  expect_error([&] { c.k_pool(2); }, {"layer 2"});
  expect_error([&] { cc.v_pool(-1); }, {"layer -1"});
}

// ---- sequences and errors --------------------------------------------------------------

TEST(KvCacheTest, AddAndDuplicate) {
  KvCache c(small_config(4, 4));
  EXPECT_FALSE(c.has_sequence(7));
  c.add_sequence(7);
  EXPECT_TRUE(c.has_sequence(7));
  EXPECT_EQ(c.length(7), 0);
  EXPECT_EQ(c.capacity(7), 0);
  EXPECT_TRUE(c.block_table(7).empty());
  expect_error([&] { c.add_sequence(7); }, {"sequence 7", "already exists"});
  EXPECT_EQ(c.stats().sequences, 1);
}

TEST(KvCacheTest, UnknownSequenceIsNamed) {
  KvCache c(small_config(4, 4));
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 2));
  const std::vector<std::string> id = {"sequence 4242"};
  expect_error([&] { c.reserve(4242, 1); }, id);
  expect_error([&] { c.length(4242); }, id);
  expect_error([&] { c.capacity(4242); }, id);
  expect_error([&] { c.set_length(4242, 0); }, id);
  expect_error([&] { c.truncate(4242, 0); }, id);
  expect_error([&] { c.free_sequence(4242); }, id);
  expect_error([&] { c.fork(4242, 5, 0); }, id);
  expect_error([&] { c.block_table(4242); }, id);
  expect_error([&] { c.block_shared(4242, 0); }, id);
  expect_error([&] { c.k_slot(0, 4242, 0); }, id);
  expect_error([&] { c.v_slot(0, 4242, 0); }, id);
  EXPECT_FALSE(c.has_sequence(5));
  EXPECT_EQ(c.stats().free_blocks, 3);
}

TEST(KvCacheTest, ReserveAllocatesInOrderAndIsAllOrNothing) {
  KvCache c(small_config(4, 5));
  c.add_sequence(1);
  c.add_sequence(2);
  ASSERT_TRUE(c.reserve(1, 9));  // 3 blocks
  EXPECT_EQ(c.block_table(1), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(c.capacity(1), 12);
  EXPECT_EQ(c.length(1), 0);  // reserve does not change the length
  ASSERT_TRUE(c.reserve(1, 12));
  ASSERT_TRUE(c.reserve(1, 3));  // never shrinks
  EXPECT_EQ(c.block_table(1).size(), 3u);
  EXPECT_FALSE(c.reserve(2, 9));  // needs 3, 2 free
  EXPECT_TRUE(c.block_table(2).empty());
  EXPECT_EQ(c.stats().free_blocks, 2);
  EXPECT_FALSE(c.reserve(1, 21));  // needs 3 more
  EXPECT_EQ(c.block_table(1).size(), 3u);
  ASSERT_TRUE(c.reserve(2, 8));
  EXPECT_EQ(c.block_table(2), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(c.stats().free_blocks, 0);
  EXPECT_TRUE(c.reserve(2, 0));
  EXPECT_FALSE(c.reserve(2, INT64_MAX));
  expect_error([&] { c.reserve(2, -1); }, {"sequence 2", "negative"});
}

TEST(KvCacheTest, SetLengthWithinCapacity) {
  KvCache c(small_config(4, 4));
  c.add_sequence(3);
  expect_error([&] { c.set_length(3, 1); }, {"sequence 3", "capacity 0"});
  ASSERT_TRUE(c.reserve(3, 5));
  c.set_length(3, 8);
  EXPECT_EQ(c.length(3), 8);
  c.set_length(3, 2);
  EXPECT_EQ(c.length(3), 2);
  EXPECT_EQ(c.stats().tokens, 2);
  expect_error([&] { c.set_length(3, 9); }, {"sequence 3", "capacity 8"});
  expect_error([&] { c.set_length(3, -1); }, {"sequence 3"});
  EXPECT_EQ(c.length(3), 2);
}

TEST(KvCacheTest, TruncateReleasesTailBlocksLifo) {
  KvCache c(small_config(4, 6));
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 16));
  c.set_length(1, 14);
  c.truncate(1, 5);  // keeps 2 blocks
  EXPECT_EQ(c.length(1), 5);
  EXPECT_EQ(c.block_table(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(c.stats().free_blocks, 4);
  expect_error([&] { c.truncate(1, 6); }, {"sequence 1", "length 5"});
  expect_error([&] { c.truncate(1, -1); }, {"sequence 1"});
  // The released blocks come back first, in ascending order (LIFO free list).
  c.add_sequence(2);
  ASSERT_TRUE(c.reserve(2, 8));
  EXPECT_EQ(c.block_table(2), (std::vector<int32_t>{2, 3}));
  c.truncate(1, 0);
  EXPECT_TRUE(c.block_table(1).empty());
  EXPECT_EQ(c.stats().free_blocks, 4);
  // truncate(length) releases an over-reservation.
  ASSERT_TRUE(c.reserve(2, 20));
  c.set_length(2, 6);
  c.truncate(2, 6);
  EXPECT_EQ(c.block_table(2).size(), 2u);
}

TEST(KvCacheTest, FreeSequenceReleasesBlocks) {
  KvCache c(small_config(4, 4));
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 13));
  c.set_length(1, 13);
  c.free_sequence(1);
  EXPECT_FALSE(c.has_sequence(1));
  const KvStats st = c.stats();
  EXPECT_EQ(st.free_blocks, 4);
  EXPECT_EQ(st.sequences, 0);
  EXPECT_EQ(st.tokens, 0);
  c.add_sequence(1);  // the id may be reused
  ASSERT_TRUE(c.reserve(1, 16));
  EXPECT_EQ(c.block_table(1), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(KvCacheTest, SlotAddressingMatchesPoolLayout) {
  KvCache c(small_config(4, 6));
  c.add_sequence(1);
  c.add_sequence(2);
  ASSERT_TRUE(c.reserve(1, 4));
  ASSERT_TRUE(c.reserve(2, 4));
  ASSERT_TRUE(c.reserve(1, 8));  // seq 1: blocks {0, 2}
  ASSERT_EQ(c.block_table(1), (std::vector<int32_t>{0, 2}));
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(c.k_slot(l, 1, 6), c.k_pool(l) + (2 * 4 + 2) * 6);
    EXPECT_EQ(c.v_slot(l, 1, 1), c.v_pool(l) + 1 * 6);
  }
  for (int64_t p = 0; p < 8; ++p) write_slot(c, 1, p, 100 + p);
  for (int64_t p = 0; p < 8; ++p) EXPECT_TRUE(slot_holds(c, 1, p, 100 + p)) << p;
  expect_error([&] { c.k_slot(0, 1, 8); }, {"slot 8", "sequence 1", "capacity 8"});
  expect_error([&] { c.v_slot(0, 1, -1); }, {"slot -1"});
  expect_error([&] { c.k_slot(2, 1, 0); }, {"layer 2"});
  expect_error([&] { c.block_shared(1, 8); }, {"slot 8"});
}

// Block tables without host pools (the GPU holds the blocks): bookkeeping works, host KV
// access is a clear error, and block copies are recorded for the blocks' owner.
TEST(KvCacheTest, WithoutHostPoolsBlockCopiesAreRecordedForTheOwner) {
  KvConfig cfg = small_config(4, 8);
  cfg.host_pools = false;
  KvCache c(cfg);
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 10));
  c.set_length(1, 10);
  EXPECT_EQ(c.block_table(1).size(), 3u);
  const std::vector<std::string> why = {"block tables only"};
  expect_error([&] { c.k_pool(0); }, why);
  expect_error([&] { c.v_slot(0, 1, 3); }, why);
  EXPECT_TRUE(c.fork(1, 2, 8));  // block-aligned: shares blocks, copies nothing
  EXPECT_TRUE(c.take_block_copies().empty());
  // A fork's partial block and a copy-on-write are recorded for the blocks' owner, in order.
  ASSERT_TRUE(c.fork(1, 3, 9));
  const int32_t tail_src = c.block_table(1)[2], tail_dst = c.block_table(3)[2];
  EXPECT_NE(tail_src, tail_dst);
  c.truncate(2, 6);  // slot 6 is in block 1, shared with sequences 1 and 3
  const int32_t shared = c.block_table(2)[1];
  ASSERT_TRUE(c.reserve(2, 8));  // writing slot 6 copies the block's valid slots 4 and 5
  const int32_t own = c.block_table(2)[1];
  EXPECT_NE(own, shared);
  EXPECT_FALSE(c.block_shared(2, 6));
  const std::vector<cb::kv::BlockCopy> copies = c.take_block_copies();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].from, tail_src);
  EXPECT_EQ(copies[0].to, tail_dst);
  EXPECT_EQ(copies[0].n, 1);
  EXPECT_EQ(copies[1].from, shared);
  EXPECT_EQ(copies[1].to, own);
  EXPECT_EQ(copies[1].n, 2);
  EXPECT_TRUE(c.take_block_copies().empty());  // taken once
}

// A copy keeps the tables and KV but gets its own id (the GPU binds device blocks to one id,
// which a copy of the tables cannot share); so does assignment.
TEST(KvCacheTest, ACopyIsANewObject) {
  KvCache a(small_config(4, 8));
  a.add_sequence(1);
  ASSERT_TRUE(a.reserve(1, 6));
  a.set_length(1, 6);
  KvCache b(a);
  EXPECT_NE(b.id(), a.id());
  EXPECT_EQ(b.block_table(1), a.block_table(1));
  EXPECT_EQ(b.length(1), 6);
  KvCache c(small_config(4, 8));
  const uint64_t before = c.id();
  c = a;
  EXPECT_NE(c.id(), before);
  EXPECT_NE(c.id(), a.id());
  EXPECT_EQ(c.length(1), 6);
}

// ---- fork and copy-on-write ------------------------------------------------------------

TEST(KvCacheTest, ForkSharesFullBlocksAndCopiesPartialBlock) {
  KvCache c(small_config(4, 8));
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 12));
  for (int64_t p = 0; p < 12; ++p) write_slot(c, 1, p, p + 1);
  c.set_length(1, 12);

  ASSERT_TRUE(c.fork(1, 2, 10));  // blocks 0, 1 shared; slots 8, 9 copied
  EXPECT_EQ(c.length(2), 10);
  const auto& t1 = c.block_table(1);
  const auto& t2 = c.block_table(2);
  ASSERT_EQ(t2.size(), 3u);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], t1[1]);
  EXPECT_NE(t2[2], t1[2]);
  for (int64_t p = 0; p < 10; ++p) EXPECT_TRUE(slot_holds(c, 2, p, p + 1)) << p;
  KvStats st = c.stats();
  EXPECT_EQ(st.shared_blocks, 2);
  EXPECT_EQ(st.free_blocks, 4);
  EXPECT_EQ(st.sequences, 2);
  EXPECT_EQ(st.tokens, 22);

  EXPECT_TRUE(c.fork(1, 3, 8));  // block-aligned: nothing copied
  EXPECT_EQ(c.block_table(3).size(), 2u);
  EXPECT_EQ(c.stats().free_blocks, 4);
  EXPECT_TRUE(c.fork(1, 4, 0));
  EXPECT_TRUE(c.block_table(4).empty());

  expect_error([&] { c.fork(1, 2, 4); }, {"sequence 2", "already exists"});
  expect_error([&] { c.fork(1, 1, 4); }, {"sequence 1", "already exists"});
  expect_error([&] { c.fork(1, 9, 13); }, {"sequence 1", "length 12"});
  expect_error([&] { c.fork(1, 9, -1); }, {"sequence 1"});
  EXPECT_FALSE(c.has_sequence(9));

  // Freeing is refcount-aware: shared blocks survive until their last user is freed.
  c.free_sequence(1);
  EXPECT_EQ(c.stats().free_blocks, 5);  // only seq 1's private third block
  for (int64_t p = 0; p < 10; ++p) EXPECT_TRUE(slot_holds(c, 2, p, p + 1)) << p;
  c.free_sequence(3);
  EXPECT_EQ(c.stats().shared_blocks, 0);
  c.free_sequence(2);
  c.free_sequence(4);
  EXPECT_EQ(c.stats().free_blocks, 8);
}

TEST(KvCacheTest, ForkFailsWithoutFreeBlockAndChangesNothing) {
  KvCache c(small_config(4, 2));
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 8));
  c.set_length(1, 6);
  EXPECT_FALSE(c.fork(1, 2, 6));
  EXPECT_FALSE(c.has_sequence(2));
  KvStats st = c.stats();
  EXPECT_EQ(st.shared_blocks, 0);
  EXPECT_EQ(st.free_blocks, 0);
  EXPECT_TRUE(c.fork(1, 2, 4));  // block-aligned fork needs no free block
  EXPECT_EQ(c.stats().shared_blocks, 1);
}

TEST(KvCacheTest, SharedBlocksAreReadOnlyUntilReserveCopiesThem) {
  KvCache c(small_config(4, 8));
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 8));
  for (int64_t p = 0; p < 8; ++p) write_slot(c, 1, p, p + 1);
  c.set_length(1, 8);
  ASSERT_TRUE(c.fork(1, 2, 8));
  for (SeqId s : {1, 2}) {
    for (int64_t p = 0; p < 8; ++p) EXPECT_TRUE(c.block_shared(s, p));
  }
  expect_error([&] { c.k_slot(0, 2, 5); }, {"slot 5", "sequence 2", "shared", "reserve"});
  expect_error([&] { c.v_slot(1, 1, 0); }, {"slot 0", "sequence 1", "shared"});

  // Appending to the fork writes fresh blocks.
  ASSERT_TRUE(c.reserve(2, 9));
  EXPECT_FALSE(c.block_shared(2, 8));
  write_slot(c, 2, 8, 99);
  c.set_length(2, 9);

  // Truncating into a shared block and rewriting: reserve un-shares that block only.
  c.truncate(2, 6);
  EXPECT_TRUE(c.block_shared(2, 6));
  const int32_t shared = c.block_table(2)[1];
  const int free_before = c.stats().free_blocks;
  ASSERT_TRUE(c.reserve(2, 7));
  EXPECT_NE(c.block_table(2)[1], shared);
  EXPECT_EQ(c.block_table(2)[0], c.block_table(1)[0]);
  EXPECT_EQ(c.stats().free_blocks, free_before - 1);
  EXPECT_EQ(c.stats().shared_blocks, 1);
  EXPECT_FALSE(c.block_shared(1, 6));  // seq 1 now owns the original alone
  write_slot(c, 2, 6, 500);
  c.set_length(2, 7);
  for (int64_t p = 0; p < 8; ++p) EXPECT_TRUE(slot_holds(c, 1, p, p + 1)) << p;
  for (int64_t p = 0; p < 6; ++p) EXPECT_TRUE(slot_holds(c, 2, p, p + 1)) << p;
  EXPECT_TRUE(slot_holds(c, 2, 6, 500));
}

TEST(KvCacheTest, CopyOnWriteReserveIsAllOrNothing) {
  KvCache c(small_config(4, 3));
  c.add_sequence(1);
  ASSERT_TRUE(c.reserve(1, 8));
  c.set_length(1, 8);
  ASSERT_TRUE(c.fork(1, 2, 8));
  c.set_length(2, 2);             // both of seq 2's blocks overlap [2, 8) and are shared
  EXPECT_FALSE(c.reserve(2, 8));  // needs 2 copies, 1 free
  EXPECT_EQ(c.block_table(2), c.block_table(1));
  EXPECT_EQ(c.stats().free_blocks, 1);
  ASSERT_TRUE(c.reserve(2, 4));  // only the first block overlaps [2, 4)
  EXPECT_FALSE(c.block_shared(2, 3));
  EXPECT_TRUE(c.block_shared(2, 4));
  EXPECT_EQ(c.stats().free_blocks, 0);
}

// ---- randomized check against a model --------------------------------------------------

// The model: per sequence, its length, its blocks as model ids (with model refcounts, to
// predict sharing and free counts) and the tag last written to each slot (-1: unspecified).
struct ModelSeq {
  std::vector<int64_t> blocks;
  int64_t length = 0;
  std::vector<int64_t> tags;
};

class RandomizedKvTest : public ::testing::TestWithParam<std::tuple<int, uint32_t>> {
 protected:
  void SetUp() override {
    bs_ = std::get<0>(GetParam());
    rng_.seed(std::get<1>(GetParam()));
    num_blocks_ = bs_ == 1 ? 48 : bs_ == 16 ? 24 : 12;
    cache_ = std::make_unique<KvCache>(small_config(bs_, num_blocks_));
  }

  int64_t rnd(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  int64_t model_free() const { return num_blocks_ - static_cast<int64_t>(ref_.size()); }
  int64_t new_block() {
    ref_[next_block_] = 1;
    return next_block_++;
  }
  void drop_block(int64_t id) {
    if (--ref_[id] == 0) ref_.erase(id);
  }
  SeqId pick_seq() {
    auto it = model_.begin();
    std::advance(it, rnd(0, static_cast<int64_t>(model_.size()) - 1));
    return it->first;
  }
  // Forgets tags at or past the length (contents there are unspecified).
  static void clear_past_length(ModelSeq& m) {
    for (size_t p = static_cast<size_t>(m.length); p < m.tags.size(); ++p) m.tags[p] = -1;
  }

  void op_add() {
    const SeqId id = next_seq_++;
    cache_->add_sequence(id);
    model_[id] = ModelSeq{};
  }

  void op_reserve(SeqId id, int64_t n) {
    ModelSeq& m = model_[id];
    const int64_t have = static_cast<int64_t>(m.blocks.size());
    const int64_t want = (n + bs_ - 1) / bs_;
    int64_t need = std::max<int64_t>(0, want - have);
    for (int64_t i = m.length / bs_; i < std::min(want, have); ++i) need += ref_[m.blocks[i]] > 1;
    const bool expect_ok = need <= model_free();
    ASSERT_EQ(cache_->reserve(id, n), expect_ok) << "reserve(" << id << ", " << n << ")";
    last_reserve_ok_ = expect_ok;
    failed_reserves_ += expect_ok ? 0 : 1;
    if (!expect_ok) return;
    for (int64_t i = m.length / bs_; i < std::min(want, have); ++i) {
      if (ref_[m.blocks[i]] <= 1) continue;
      drop_block(m.blocks[i]);
      m.blocks[i] = new_block();
      ++cow_copies_;
      for (int64_t p = std::max(i * bs_, m.length); p < (i + 1) * bs_; ++p) m.tags[p] = -1;
    }
    while (static_cast<int64_t>(m.blocks.size()) < want) m.blocks.push_back(new_block());
    m.tags.resize(m.blocks.size() * bs_, -1);
  }

  void op_write(SeqId id, int64_t from, int64_t to) {
    ModelSeq& m = model_[id];
    for (int64_t p = from; p < to; ++p) {
      if (ref_[m.blocks[p / bs_]] > 1) {
        ASSERT_TRUE(cache_->block_shared(id, p));
        ASSERT_THROW(cache_->k_slot(0, id, p), cb::Error);
        ASSERT_THROW(cache_->v_slot(1, id, p), cb::Error);
        ++refused_writes_;
      } else {
        ASSERT_FALSE(cache_->block_shared(id, p));
        write_slot(*cache_, id, p, next_tag_);
        m.tags[p] = next_tag_++;
      }
    }
  }

  void op_append(SeqId id) {
    const int64_t len = model_[id].length;
    const int64_t n = rnd(1, std::min(2 * bs_ + 2, 40));
    ASSERT_NO_FATAL_FAILURE(op_reserve(id, len + n));
    if (!last_reserve_ok_) return;  // pool full
    for (int64_t p = len; p < len + n; ++p) ASSERT_FALSE(cache_->block_shared(id, p));
    ASSERT_NO_FATAL_FAILURE(op_write(id, len, len + n));
    cache_->set_length(id, len + n);
    model_[id].length = len + n;
  }

  void op_set_length(SeqId id) {
    ModelSeq& m = model_[id];
    const int64_t cap = static_cast<int64_t>(m.tags.size());
    if (rnd(0, 9) == 0) {
      ASSERT_THROW(cache_->set_length(id, cap + 1), cb::Error);
      return;
    }
    const int64_t n = rnd(0, cap);
    cache_->set_length(id, n);
    m.length = n;
  }

  void op_truncate(SeqId id) {
    ModelSeq& m = model_[id];
    if (rnd(0, 9) == 0) {
      ASSERT_THROW(cache_->truncate(id, m.length + 1), cb::Error);
      return;
    }
    const int64_t n = rnd(0, m.length);
    cache_->truncate(id, n);
    const size_t keep = static_cast<size_t>((n + bs_ - 1) / bs_);
    while (m.blocks.size() > keep) {
      drop_block(m.blocks.back());
      m.blocks.pop_back();
    }
    m.tags.resize(keep * bs_);
    m.length = n;
    clear_past_length(m);
  }

  void op_fork(SeqId src) {
    const ModelSeq& s = model_[src];
    int64_t len = rnd(0, s.length);
    if (rnd(0, 1) == 0) len -= len % bs_;  // block-aligned: shares every block
    const SeqId dst = next_seq_++;
    const bool expect_ok = len % bs_ == 0 || model_free() > 0;
    ASSERT_EQ(cache_->fork(src, dst, len), expect_ok);
    failed_forks_ += expect_ok ? 0 : 1;
    ASSERT_EQ(cache_->has_sequence(dst), expect_ok);
    if (!expect_ok) return;
    ModelSeq d;
    d.length = len;
    for (int64_t i = 0; i < len / bs_; ++i) {
      ++ref_[s.blocks[i]];
      d.blocks.push_back(s.blocks[i]);
    }
    if (len % bs_ != 0) {
      d.blocks.push_back(new_block());
      ++partial_forks_;
    }
    d.tags.assign(d.blocks.size() * bs_, -1);
    std::copy(s.tags.begin(), s.tags.begin() + len, d.tags.begin());
    model_[dst] = std::move(d);
  }

  void op_free(SeqId id) {
    for (auto it = model_[id].blocks.rbegin(); it != model_[id].blocks.rend(); ++it) {
      drop_block(*it);
    }
    model_.erase(id);
    cache_->free_sequence(id);
  }

  void op_errors() {
    const SeqId ghost = next_seq_ + 1000;
    ASSERT_THROW(cache_->reserve(ghost, 1), cb::Error);
    ASSERT_THROW(cache_->k_slot(0, ghost, 0), cb::Error);
    ASSERT_THROW(cache_->free_sequence(ghost), cb::Error);
    if (!model_.empty()) {
      const SeqId id = pick_seq();
      ASSERT_THROW(cache_->add_sequence(id), cb::Error);
      ASSERT_THROW(cache_->fork(ghost, id, 0), cb::Error);
      ASSERT_THROW(cache_->k_slot(0, id, cache_->capacity(id)), cb::Error);
    }
  }

  // Checks the cache against the model: lengths, block-table shapes, a one-to-one map
  // between model blocks and cache blocks (same sharing), refcounts, stats and contents.
  void verify() {
    std::map<int64_t, int32_t> to_cache;
    std::map<int32_t, int64_t> to_model;
    std::map<int32_t, int> uses;
    int64_t tokens = 0;
    for (const auto& [id, m] : model_) {
      ASSERT_TRUE(cache_->has_sequence(id));
      ASSERT_EQ(cache_->length(id), m.length) << id;
      const auto& bt = cache_->block_table(id);
      ASSERT_EQ(bt.size(), m.blocks.size()) << id;
      ASSERT_EQ(cache_->capacity(id), static_cast<int64_t>(m.tags.size()));
      tokens += m.length;
      for (size_t i = 0; i < bt.size(); ++i) {
        ASSERT_GE(bt[i], 0);
        ASSERT_LT(bt[i], num_blocks_);
        auto [a, fresh_a] = to_cache.emplace(m.blocks[i], bt[i]);
        auto [b, fresh_b] = to_model.emplace(bt[i], m.blocks[i]);
        ASSERT_EQ(a->second, bt[i]) << "model block split across cache blocks";
        ASSERT_EQ(b->second, m.blocks[i]) << "cache block " << bt[i] << " wrongly shared";
        ++uses[bt[i]];
        ASSERT_EQ(cache_->block_shared(id, static_cast<int64_t>(i) * bs_),
                  ref_.at(m.blocks[i]) > 1);
      }
      for (size_t p = 0; p < m.tags.size(); ++p) {
        if (m.tags[p] < 0) continue;
        ASSERT_TRUE(slot_holds(*cache_, id, static_cast<int64_t>(p), m.tags[p]))
            << "seq " << id << " slot " << p;
      }
    }
    int64_t shared = 0;
    for (const auto& [b, n] : uses) {
      ASSERT_EQ(n, ref_.at(to_model.at(b)));
      shared += n > 1;
    }
    const KvStats st = cache_->stats();
    ASSERT_EQ(st.num_blocks, num_blocks_);
    ASSERT_EQ(st.free_blocks + static_cast<int64_t>(uses.size()), num_blocks_);
    ASSERT_EQ(st.free_blocks, model_free());
    ASSERT_EQ(st.sequences, static_cast<int>(model_.size()));
    ASSERT_EQ(st.tokens, tokens);
    ASSERT_EQ(st.shared_blocks, shared);
  }

  int bs_ = 1;
  int num_blocks_ = 0;
  std::mt19937 rng_;
  std::unique_ptr<KvCache> cache_;
  std::map<SeqId, ModelSeq> model_;
  std::map<int64_t, int> ref_;  // model block id -> refcount
  int64_t next_block_ = 0;
  int64_t next_tag_ = 1;
  SeqId next_seq_ = 10;
  int failed_reserves_ = 0;
  bool last_reserve_ok_ = false;
  int cow_copies_ = 0, refused_writes_ = 0, partial_forks_ = 0, failed_forks_ = 0;
};

TEST_P(RandomizedKvTest, MatchesModel) {
  constexpr int kOps = 4000;
  for (int step = 0; step < kOps; ++step) {
    const int64_t r = rnd(0, 99);
    if (model_.empty() || (r < 8 && model_.size() < 8)) {
      op_add();
    } else {
      const SeqId id = pick_seq();
      const ModelSeq& m = model_[id];
      const int64_t cap = static_cast<int64_t>(m.tags.size());
      if (r < 40) {
        ASSERT_NO_FATAL_FAILURE(op_append(id));
      } else if (r < 48) {
        ASSERT_NO_FATAL_FAILURE(op_reserve(id, rnd(0, cap + 3 * bs_)));
      } else if (r < 58) {
        const int64_t from = rnd(0, cap);
        ASSERT_NO_FATAL_FAILURE(op_write(id, from, rnd(from, cap)));
      } else if (r < 64) {
        ASSERT_NO_FATAL_FAILURE(op_set_length(id));
      } else if (r < 74) {
        ASSERT_NO_FATAL_FAILURE(op_truncate(id));
      } else if (r < 86) {
        if (model_.size() < 10) {
          ASSERT_NO_FATAL_FAILURE(op_fork(id));
        }
      } else if (r < 97) {
        ASSERT_NO_FATAL_FAILURE(op_free(id));
      } else {
        ASSERT_NO_FATAL_FAILURE(op_errors());
      }
    }
    ASSERT_NO_FATAL_FAILURE(verify()) << "after step " << step;
  }
  EXPECT_GE(failed_reserves_, 5) << "the pool never filled up; the test is too gentle";
  EXPECT_GT(next_tag_, 1000);
  // The interesting paths all ran.
  EXPECT_GE(cow_copies_, 5);
  EXPECT_GE(refused_writes_, 5);
  EXPECT_GE(partial_forks_ + failed_forks_, bs_ == 1 ? 0 : 5);

  // Free everything: no block may leak, and the whole pool is allocatable again, once each.
  while (!model_.empty()) ASSERT_NO_FATAL_FAILURE(op_free(model_.begin()->first));
  ASSERT_NO_FATAL_FAILURE(verify());
  EXPECT_TRUE(ref_.empty());
  cache_->add_sequence(1);
  ASSERT_TRUE(cache_->reserve(1, static_cast<int64_t>(num_blocks_) * bs_));
  std::set<int32_t> ids(cache_->block_table(1).begin(), cache_->block_table(1).end());
  EXPECT_EQ(static_cast<int>(ids.size()), num_blocks_);
  EXPECT_EQ(cache_->stats().free_blocks, 0);
  EXPECT_FALSE(cache_->reserve(1, static_cast<int64_t>(num_blocks_) * bs_ + 1));
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, RandomizedKvTest,
                         ::testing::Combine(::testing::Values(1, 16, 64),
                                            ::testing::Values(1u, 7u, 20240601u)),
                         [](const ::testing::TestParamInfo<RandomizedKvTest::ParamType>& p) {
                           return "bs" + std::to_string(std::get<0>(p.param)) + "_seed" +
                                  std::to_string(std::get<1>(p.param));
                         });

}  // namespace
