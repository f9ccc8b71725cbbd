// The serving engine on the real stories260K model: CachedAttention serves the same tokens
// as recompute while reusing every history; overflow handling of CA, OF and RE; identical
// hit/miss sequences run to run. (The wall-clock overlap relations of preloading and saving
// are in overlap_test.cc, run alone.)
#include "lib/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "lib/engine/kv_buffer.h"
#include "lib/engine/policy_advisor.h"
#include "lib/model/model.h"
#include "lib/model/model_source.h"
#include "lib/model/weights.h"
#include "lib/store/attention_store.h"
#include "lib/store/entry.h"
#include "lib/store/faulty_io.h"
#include "tests/support/test_data.h"
#include "tests/unit/engine/engine_test_util.h"

namespace cb::engine {
namespace {

using namespace test_util;  // NOLINT(google-build-using-namespace): the suite's helpers

RunResult serve_any(const model::ForwardModel& m, store::AttentionStore* st, const EngineConfig& c,
                    const std::vector<SessionInput>& in) {
  Engine e(m, st, c);
  return e.run(in, {}, {});
}

// Entries carry the weights that computed them in their fingerprint: the same checkpoint loaded
// again tags its entries alike, other weights of the same name and shape (here: the same tensors
// under another weights id) tag them differently, and the store serves an entry only to a
// lookup with its fingerprint (a mismatch is a miss: AttentionStore's own tests).
TEST(Engine, EntriesAreTaggedWithTheWeightsThatComputedThem) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = model::ModelSource::open(path), src_again = model::ModelSource::open(path);
  auto first = model::Model::load(*src);
  auto again = model::Model::load(*src_again);  // (a model keeps views into its source's file)
  model::ModelConfig other_cfg = first->config();
  other_cfg.weights_id += "-fine-tuned";
  model::Model other(other_cfg, model::Weights::load(*src));
  ASSERT_FALSE(first->config().weights_id.empty());
  const auto description = [&](const model::Model& m) {
    auto st = dram_store();
    serve(m, st.get(), config(Mode::CA), sessions(1, 1, 20, 4));
    store::EntryMeta meta;
    EXPECT_TRUE(st->entry_meta(100, &meta));
    return meta.fingerprint.description;
  };
  const std::string d = description(*first);
  EXPECT_NE(d.find(first->config().weights_id), std::string::npos) << d;
  EXPECT_EQ(description(*again), d);
  EXPECT_NE(description(other), d);
}

TEST(Engine, CachedAttentionServesTheSameTokensAsRecompute) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const auto in = sessions(3, 3, 40, 12);
  Tokens ca_tokens, re_tokens;
  auto st = dram_store();
  const RunResult ca = serve(*m, st.get(), config(Mode::CA), in, &ca_tokens);
  const RunResult re = serve(*m, nullptr, config(Mode::RE), in, &re_tokens);
  EXPECT_EQ(ca_tokens, re_tokens);  // reusing the stored pre-RoPE KV changes nothing served
  ASSERT_EQ(ca.records.size(), 9u);
  for (const auto& r : ca.records) {
    if (r.turn == 0) {
      EXPECT_EQ(r.tier, "none");
      continue;
    }
    EXPECT_EQ(r.tier, "dram") << "session " << r.session << " turn " << r.turn;
    EXPECT_EQ(r.reused_tokens, r.history_tokens);
    EXPECT_EQ(r.recomputed_tokens, 0);
    EXPECT_GT(r.bytes_loaded, 0u);
  }
  for (const auto& r : re.records) {
    EXPECT_EQ(r.reused_tokens, 0);
    EXPECT_EQ(r.recomputed_tokens, r.history_tokens);
    EXPECT_EQ(r.tier, r.turn == 0 ? "none" : "miss");
  }
  EXPECT_EQ(ca.load_failures + ca.save_failures, 0);
}

// Small chunks (32 tokens): every returning turn's save appends to its session's entry and
// writes only the tokens from the entry's last partial chunk on. What is served is unchanged,
// and what the turns report as saved is what the store wrote.
TEST(Engine, ReturningTurnsAppendToTheirEntries) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const auto in = sessions(3, 3, 40, 12);
  store::StoreConfig c;
  c.dram_bytes = 64 << 20;
  c.chunk_bytes = 4096;  // 32 tokens of stories260K's 128-byte K rows
  c.io_threads = 2;
  store::AttentionStore st(c);
  Tokens ca_tokens, re_tokens;
  const RunResult ca = serve(*m, &st, config(Mode::CA), in, &ca_tokens);
  serve(*m, nullptr, config(Mode::RE), in, &re_tokens);
  EXPECT_EQ(ca_tokens, re_tokens);
  EXPECT_EQ(ca.load_failures + ca.save_failures, 0);
  st.wait_idle();
  EXPECT_EQ(st.stats().get(store::Counter::AppendSaves), 6u);  // turns 1 and 2 of 3 sessions
  uint64_t saved = 0;
  for (const auto& r : ca.records) {
    saved += r.bytes_saved;
    const uint64_t whole =
        static_cast<uint64_t>(r.history_tokens + r.new_tokens + r.output_tokens - 1) * 2 * 128 * 5;
    if (r.turn == 0) {
      EXPECT_EQ(r.bytes_saved, whole);
    } else {
      EXPECT_LT(r.bytes_saved, whole) << "session " << r.session << " turn " << r.turn;
    }
  }
  EXPECT_EQ(st.stats().get(store::TierKind::Dram, store::TierCounter::BytesWritten), saved);
  // --full-saves: every turn writes its whole history again, and serves the same tokens.
  store::AttentionStore full(c);
  EngineConfig fc = config(Mode::CA);
  fc.append_saves = false;
  Tokens full_tokens;
  const RunResult f = serve(*m, &full, fc, in, &full_tokens);
  EXPECT_EQ(full_tokens, re_tokens);
  full.wait_idle();
  EXPECT_EQ(full.stats().get(store::Counter::AppendSaves), 0u);
  for (const auto& r : f.records) {
    EXPECT_EQ(
        r.bytes_saved,
        static_cast<uint64_t>(r.history_tokens + r.new_tokens + r.output_tokens - 1) * 2 * 128 * 5);
  }
}

// Every turn replaces its session's entry (appends to it or saves it anew); the entry keeps
// the time its first turn's save entered the store (FIFO's order), while its last access
// moves on.
TEST(Engine, ASessionsEntryKeepsItsFirstSaveTimeAcrossTurns) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  store::StoreConfig c;
  c.dram_bytes = 64 << 20;
  c.chunk_bytes = 64 << 10;
  c.io_threads = 2;
  auto ticks = std::make_shared<std::atomic<int64_t>>(0);
  c.clock = [ticks] { return static_cast<double>(++*ticks); };  // every reading differs
  store::AttentionStore st(c);
  std::map<uint64_t, double> first_save;
  EngineConfig ec = config(Mode::CA);
  ec.async_save = false;  // each turn's save has committed when the next turn is prepared
  Engine e(*m, &st, ec);
  const RunResult r = e.run(sessions(3, 3, 40, 12), {}, [&](uint64_t s, int32_t) {
    if (!first_save.count(s) && !std::isnan(st.inserted_at(s))) first_save[s] = st.inserted_at(s);
  });
  EXPECT_EQ(r.load_failures + r.save_failures, 0);
  ASSERT_EQ(first_save.size(), 3u);
  for (const auto& [s, t] : first_save) {
    store::EntryMeta meta;
    ASSERT_TRUE(st.entry_meta(s, &meta)) << s;
    EXPECT_EQ(meta.created, t) << "session " << s;
    EXPECT_GT(meta.last_access, meta.created) << "session " << s;  // two re-saves since
  }
}

/// A backend whose native KV type is fp16, as the GPU's: the CPU model underneath, its new KV
/// rounded to fp16 when handed over natively, widened again when restored natively. As the GPU
/// does, it writes the rows of items of 2 rows or more where native_kv_target says (decode
/// rows are handed over from its own memory). It remembers every row it handed over, so a
/// restore can be checked row by row.
class HalfKvModel : public model::ForwardModel {
 public:
  explicit HalfKvModel(const model::Model& m) : m_(m) {}
  const model::ModelConfig& config() const override { return m_.config(); }
  DType native_kv_type() const override { return DType::F16; }
  std::string kv_precision() const override { return "f16"; }
  using ForwardModel::forward;
  std::vector<float> forward(const std::vector<model::SeqInput>& batch, kv::KvCache& cache,
                             const model::LayerHooks& hooks) const override {
    model::LayerHooks h;
    h.wait_ready = hooks.wait_ready;
    h.on_new_kv = hooks.on_new_kv;
    if (hooks.on_new_kv_native) {
      h.on_new_kv = [&](int layer, kv::SeqId seq, int64_t pos0, int64_t n, const float* k,
                        const float* v) {
        const std::vector<uint16_t> hk = narrow(k, n), hv = narrow(v, n);
        for (int64_t t = 0; t < n; ++t) {
          for (const auto* rows : {&hk, &hv}) {
            in_layer.insert({layer, row(rows->data(), t)});
            at_position.insert({layer, pos0 + t, row(rows->data(), t)});
          }
        }
        std::pair<void*, void*> to{nullptr, nullptr};
        if (n >= 2 && hooks.native_kv_target) to = hooks.native_kv_target(layer, seq, pos0, n);
        if (to.first == nullptr) {
          ++staged_items;
          hooks.on_new_kv_native(layer, seq, pos0, n, hk.data(), hv.data());
          return;
        }
        ++direct_items;
        std::memcpy(to.first, hk.data(), hk.size() * 2);
        std::memcpy(to.second, hv.data(), hv.size() * 2);
        hooks.on_new_kv_native(layer, seq, pos0, n, to.first, to.second);
      };
    }
    return m_.forward(batch, cache, h);
  }
  void restore_kv_native(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                         const void* k, const void* v, int64_t rope_offset) const override {
    std::vector<float> fk, fv;
    for (const auto& [from, to] : {std::pair{k, &fk}, {v, &fv}}) {
      const auto* h = static_cast<const uint16_t*>(from);
      for (int64_t t = 0; t < n; ++t) {
        ++restored_rows;
        unknown_rows += !in_layer.count({layer, row(h, t)});
        moved_rows += !at_position.count({layer, pos0 + t, row(h, t)});
      }
      for (int64_t i = 0; i < n * dim(); ++i) to->push_back(fp16_to_fp32(h[i]));
    }
    m_.restore_kv(cache, seq, layer, pos0, n, fk.data(), fv.data(), rope_offset);
  }
  void restore_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                  const float* k, const float* v, int64_t rope_offset) const override {
    m_.restore_kv(cache, seq, layer, pos0, n, k, v, rope_offset);
  }
  void restore_kv_raw(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n,
                      const float* k, const float* v) const override {
    m_.restore_kv_raw(cache, seq, layer, pos0, n, k, v);
  }
  void read_kv(kv::KvCache& cache, kv::SeqId seq, int layer, int64_t pos0, int64_t n, float* k,
               float* v) const override {
    m_.read_kv(cache, seq, layer, pos0, n, k, v);
  }
  /// Rows handed over, by layer, and by layer and position.
  mutable std::set<std::pair<int, std::vector<uint16_t>>> in_layer;
  mutable std::set<std::tuple<int, int64_t, std::vector<uint16_t>>> at_position;
  /// Rows restored: in all, not handed over in their layer, not at their position.
  mutable int64_t restored_rows = 0, unknown_rows = 0, moved_rows = 0;
  mutable int64_t direct_items = 0, staged_items = 0;

 private:
  int64_t dim() const { return m_.config().kv_dim(); }
  std::vector<uint16_t> narrow(const float* x, int64_t n) const {
    std::vector<uint16_t> h(static_cast<size_t>(n * dim()));
    for (size_t i = 0; i < h.size(); ++i) h[i] = fp32_to_fp16(x[i]);
    return h;
  }
  std::vector<uint16_t> row(const uint16_t* h, int64_t t) const {
    return {h + t * dim(), h + (t + 1) * dim()};
  }
  const model::Model& m_;
};

// --kv-entries native: entries hold the backend's KV type (here fp16, 64-byte rows for
// stories260K's 32-wide K and V), so every load and save moves half the bytes of fp32 entries,
// the hit sequence is the same, and every row restored is a row the backend handed over in
// that layer: at that position, or after overflows truncated the entries, moved forward.
TEST(Engine, NativeEntriesHoldTheBackendsKvTypeAndRestoreTheRowsItHandedOver) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  ASSERT_EQ(m->config().kv_dim(), 32);
  for (const int64_t ctx : {512, 100}) {
    const auto in = ctx == 512 ? sessions(3, 3, 40, 12) : sessions(2, 5, 30, 10);
    HalfKvModel half(*m);
    EngineConfig c = config(Mode::CA, ctx);
    c.append_saves = false;  // each save is the whole history: its size is exact
    auto f32_store = dram_store();
    const RunResult f32 = serve_any(half, f32_store.get(), c, in);
    EXPECT_EQ(half.restored_rows, 0);  // fp32 entries go through restore_kv
    c.native_kv_entries = true;
    auto native_store = dram_store();
    const RunResult nat = serve_any(half, native_store.get(), c, in);
    ASSERT_EQ(nat.records.size(), f32.records.size());
    int64_t truncated = 0, reused = 0;
    for (size_t i = 0; i < nat.records.size(); ++i) {
      const auto& a = nat.records[i];
      const auto& b = f32.records[i];
      EXPECT_EQ(a.tier, b.tier) << "record " << i;
      EXPECT_EQ(a.reused_tokens, b.reused_tokens) << "record " << i;
      EXPECT_EQ(a.bytes_loaded * 2, b.bytes_loaded) << "record " << i;
      EXPECT_EQ(a.bytes_loaded, static_cast<uint64_t>(a.reused_tokens) * 2 * 64 * 5);
      EXPECT_EQ(a.bytes_saved * 2, b.bytes_saved) << "record " << i;
      EXPECT_EQ(a.bytes_saved,
                static_cast<uint64_t>(a.history_tokens + a.new_tokens + a.output_tokens - 1) * 2 *
                    64 * 5);
      truncated += a.truncated_tokens;
      reused += a.reused_tokens;
    }
    EXPECT_EQ(nat.load_failures + nat.save_failures, 0);
    EXPECT_EQ(half.restored_rows, 2 * 5 * reused);  // K and V rows of every layer
    EXPECT_GT(reused, 0);
    EXPECT_EQ(half.unknown_rows, 0);
    if (ctx == 512) {
      EXPECT_EQ(truncated, 0);
      EXPECT_EQ(half.moved_rows, 0);
    } else {
      EXPECT_GT(truncated, 0);
      EXPECT_GT(half.moved_rows, 0);  // the positions are checked: truncation moves rows
    }
    EXPECT_GT(half.direct_items, 0);  // prefill chunks written in place
    EXPECT_GT(half.staged_items, 0);  // decode rows copied by the engine
  }
}

// The engine's write buffers: page-locked for a device backend (device::HostBuffer, plain if
// locking is refused), plain for the CPU; zeroed, used within their allocation, and empty once
// moved from (a moved save's buffers are not reused twice).
TEST(KvBuffer, HoldsItsBytesWithinItsAllocationAndMovesEmptyBehind) {
  for (const bool pinned : {true, false}) {
    KvBuffer b(1000, pinned);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(b.size(), 1000u);
    EXPECT_EQ(b.capacity(), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % alignof(std::max_align_t), 0u);
    EXPECT_TRUE(std::all_of(b.data(), b.data() + 1000, [](uint8_t x) { return x == 0; }));
    if (!pinned) {
      EXPECT_FALSE(b.pinned());
    }
    uint8_t* const p = b.data();
    b.resize(500);
    EXPECT_EQ(b.data(), p);
    EXPECT_EQ(b.size(), 500u);
    EXPECT_THROW(b.resize(1001), cb::Error);
    KvBuffer moved = std::move(b);
    EXPECT_EQ(moved.data(), p);
    EXPECT_EQ(moved.size(), 500u);
    EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    EXPECT_EQ(b.capacity(), 0u);
  }
}

// Buffer sizes come in four classes per doubling: never smaller than asked, at most a quarter
// larger (past 16 KiB), whole pages, and growing with what is asked.
TEST(KvBuffer, SizeClassesRoundUpByAtMostAQuarter) {
  size_t prev = 0;
  std::set<size_t> classes;
  for (size_t n = 1; n <= (size_t{1} << 22); n += 1 + n / 97) {
    const size_t c = KvBuffer::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_EQ(c % 4096, 0u) << n;
    if (n >= 16384) {
      EXPECT_LE(c, n + n / 4) << n;
    }
    EXPECT_GE(c, prev) << n;
    EXPECT_EQ(KvBuffer::size_class(c), c) << n;  // a class is its own class
    prev = c;
    if (n >= (size_t{1} << 20) && n < (size_t{1} << 21)) classes.insert(c);
  }
  EXPECT_EQ(classes.size(), 4u);  // 1 MiB up to 2 MiB: 1.25, 1.5, 1.75 and 2 MiB
  EXPECT_EQ(KvBuffer::size_class(size_t{1} << 30), size_t{1} << 30);
  EXPECT_EQ(KvBuffer::size_class((size_t{1} << 30) + 1), (size_t{5} << 28));
}

// A conversation's buffers grow every turn; a turn's spare buffers serve the next turns while
// they fit, so a long conversation allocates per size class, not per turn (a page-locked
// allocation on the GPU costs page pinning and a device synchronization).
TEST(Engine, WriteBuffersAreAllocatedPerSizeClassNotPerTurn) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  auto in = sessions(1, 16, 8, 4);
  in[0].turns[0].ids.resize(200, 7);  // a long first message: later turns grow it by ~6%
  auto st = dram_store();
  const EngineConfig c = config(Mode::CA);
  const RunResult r = serve(*m, st.get(), c, in);
  ASSERT_EQ(r.records.size(), 16u);
  const size_t row = entry_row_bytes(*m, c);
  std::set<size_t> classes;
  for (const auto& t : r.records) {
    const int64_t cap = t.history_tokens + t.new_tokens + t.output_tokens;
    classes.insert(KvBuffer::size_class(static_cast<size_t>(m->config().n_layers * cap) * row));
  }
  EXPECT_GE(r.buffer_allocations, 2);  // K and V of the first turn
  // K and V per class for the turn running and for the one before it, whose save may still be
  // in flight when the next turn takes its buffers; per turn, every turn would take two.
  EXPECT_LE(r.buffer_allocations, 4 * static_cast<int64_t>(classes.size()));
  EXPECT_LT(classes.size(), 16u / 2);
  EXPECT_LT(r.buffer_allocations, 2 * 16);
  EXPECT_EQ(r.load_failures + r.save_failures, 0);
}

// EngineConfig::write_buffer_jobs: buffers for every job that can be under way, made before the
// run's clock starts and sized for its longest conversation, serve second turns that need a
// larger size class than their first; without them the second turns allocate theirs after they
// arrive (on a GPU, page-locked: seconds for a 7B model's).
TEST(Engine, WriteBuffersMadeAheadServeEveryTurn) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  for (int jobs : {0, 8}) {
    auto in = sessions(4, 2, 8, 4);
    for (auto& s : in) s.turns[1].ids.resize(150, 7);  // a larger buffer than the first turn's
    auto st = dram_store();
    EngineConfig c = config(Mode::CA);
    c.write_buffer_jobs = jobs;  // 8 jobs: every turn of the run at once
    const RunResult r = serve(*m, st.get(), c, in);
    ASSERT_EQ(r.records.size(), 8u);
    if (jobs == 0) {
      EXPECT_GT(r.buffer_allocations, 0);
    } else {
      EXPECT_EQ(r.buffer_allocations, 0);
    }
    EXPECT_EQ(r.load_failures + r.save_failures, 0);
    const size_t row = entry_row_bytes(*m, c);
    // Sized for the longest conversation: 8 + 4 + 150 + 4 tokens.
    EXPECT_EQ(write_buffer_bytes(in, m->config().n_layers, row, 512),
              KvBuffer::size_class(static_cast<size_t>(m->config().n_layers) * 166 * row));
    EXPECT_EQ(write_buffer_bytes(in, m->config().n_layers, row, 100),
              KvBuffer::size_class(static_cast<size_t>(m->config().n_layers) * 100 * row));
  }
}

TEST(Engine, OverflowTruncatesTheStoredEntryInCaAndInvalidatesItInOf) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const auto in = sessions(2, 5, 30, 10);  // 40 tokens a turn in a window of 100
  auto st_ca = dram_store(), st_of = dram_store();
  const RunResult ca = serve(*m, st_ca.get(), config(Mode::CA, 100), in);
  const RunResult of = serve(*m, st_of.get(), config(Mode::OF, 100), in);
  const RunResult re = serve(*m, nullptr, config(Mode::RE, 100), in);
  int64_t truncated = 0, recomputed[3] = {0, 0, 0};
  for (const auto& r : ca.records) {
    truncated += r.truncated_tokens;
    recomputed[0] += r.recomputed_tokens;
    EXPECT_LE(r.history_tokens + r.new_tokens + r.output_tokens, 100);
    if (r.turn > 0) {
      EXPECT_EQ(r.tier, "dram") << "CA keeps serving truncated entries";
    }
  }
  EXPECT_GT(truncated, 0);
  int of_misses = 0;
  for (const auto& r : of.records) {
    recomputed[1] += r.recomputed_tokens;
    if (r.truncated_tokens > 0) {
      EXPECT_EQ(r.tier, "miss");
      ++of_misses;
    }
  }
  EXPECT_GT(of_misses, 0);
  for (const auto& r : re.records) recomputed[2] += r.recomputed_tokens;
  EXPECT_EQ(recomputed[0], 0);
  EXPECT_GT(recomputed[1], recomputed[0]);
  EXPECT_LT(recomputed[1], recomputed[2]);
}

TEST(OverflowDrop, AtLeastTheOverflowAndTheRatioRoundedUpToWholeChunksWhenHistoryIsLeft) {
  EXPECT_EQ(overflow_drop(100, 10, 0.5, 1), 50);
  EXPECT_EQ(overflow_drop(100, 60, 0.5, 1), 60);
  EXPECT_EQ(overflow_drop(100, 200, 0.5, 1), 100);
  EXPECT_EQ(overflow_drop(100, 10, 0.5, -1), 50);  // auto, unresolved: exact
  EXPECT_EQ(overflow_drop(100, 10, 0.5, 32), 64);
  EXPECT_EQ(overflow_drop(100, 90, 0.5, 32), 96);
  EXPECT_EQ(overflow_drop(100, 97, 0.5, 32), 97);  // 128 would leave nothing: exact
  EXPECT_EQ(overflow_drop(64, 10, 0.5, 32), 32);   // already whole chunks
  EXPECT_EQ(overflow_drop(100, 200, 0.5, 32), 100);
  EXPECT_EQ(overflow_drop(20, 5, 0.5, 512), 10);  // a chunk longer than the history: exact
}

TEST(Engine, AlignedTruncationCutsEntriesInPlaceAndEveryModeDropsTheSame) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const auto in = sessions(2, 6, 30, 10);  // 40 tokens a turn in a window of 100
  store::StoreConfig c;
  c.dram_bytes = 64 << 20;
  c.chunk_bytes = 4096;  // 32 tokens of stories260K's fp32 K rows (128 bytes)
  ASSERT_EQ(m->config().kv_dim() * sizeof(float), 128u);
  c.io_threads = 2;
  c.advisor = std::make_shared<PolicyAdvisor>("scheduler-aware", policy::Capacity{c.dram_bytes, 0});
  store::AttentionStore st(c);
  EngineConfig ec = config(Mode::CA, 100);
  ec.truncate_align = 32;  // the store's tokens per chunk
  const RunResult ca = serve(*m, &st, ec, in);
  ec.mode = Mode::RE;
  const RunResult re = serve(*m, nullptr, ec, in);
  std::map<std::pair<uint64_t, int>, int64_t> dropped;
  for (const auto& r : re.records) dropped[{r.session, r.turn}] = r.truncated_tokens;
  int64_t truncations = 0;
  for (const auto& r : ca.records) {
    EXPECT_EQ(r.truncated_tokens, (dropped[{r.session, r.turn}])) << "the modes see one context";
    if (r.truncated_tokens == 0) continue;
    ++truncations;
    EXPECT_EQ(r.truncated_tokens % 32, 0);
    if (r.turn > 0) {
      EXPECT_EQ(r.tier, "dram");
    }
  }
  EXPECT_GT(truncations, 0);
  EXPECT_EQ(st.stats().get(store::Counter::Truncations), static_cast<uint64_t>(truncations));
  EXPECT_EQ(st.stats().get(store::Counter::TruncationRewrites), 0u);
}

/// An SSD-only store in a fresh `dir`: every save and load goes through `faulty`.
store::StoreConfig faulty_ssd(const std::string& dir, std::shared_ptr<store::FaultyIo> faulty) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  store::StoreConfig c;
  c.ssd_bytes = 32 << 20;
  c.store_dir = dir;
  c.chunk_bytes = 64 << 10;
  c.direct_io = false;
  c.io_backend = std::move(faulty);
  return c;
}

TEST(Engine, AHistoryThatFailsVerificationIsRecomputedNeverServed) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const std::string dir = cb::test::tmp_dir() + "/engine_faulty_store";
  auto faulty = std::make_shared<store::FaultyIo>(store::make_pread_backend());
  store::AttentionStore st(faulty_ssd(dir, faulty));
  const auto in = sessions(2, 3, 30, 6);
  Tokens ca_tokens, re_tokens;
  EngineConfig ec = config(Mode::CA);
  ec.sched.max_batch = 1;
  faulty->flip_bits(1000000);  // every read comes back corrupted
  const RunResult ca = serve(*m, &st, ec, in, &ca_tokens);
  serve(*m, nullptr, config(Mode::RE), in, &re_tokens);
  EXPECT_EQ(ca_tokens, re_tokens);
  EXPECT_GT(ca.load_failures, 0);
  for (const auto& r : ca.records) {
    if (r.turn > 0) {
      EXPECT_EQ(r.tier, "miss");
      EXPECT_EQ(r.recomputed_tokens, r.history_tokens);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Engine, FailedAsynchronousSavesAreCounted) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const std::string dir = cb::test::tmp_dir() + "/engine_failing_saves";
  auto faulty = std::make_shared<store::FaultyIo>(store::make_pread_backend());
  {
    store::AttentionStore st(faulty_ssd(dir, faulty));
    faulty->fail_all_writes(EIO);
    EngineConfig ec = config(Mode::CA);
    ASSERT_TRUE(ec.async_save);
    const RunResult r = serve(*m, &st, ec, sessions(2, 3, 30, 6));
    ASSERT_EQ(r.records.size(), 6u);
    EXPECT_EQ(r.save_failures, 6);  // every turn's save is admitted, and its commit fails
    for (const auto& rec : r.records) {
      if (rec.turn > 0) {
        EXPECT_EQ(rec.tier, "miss");  // nothing was kept
      }
    }
  }
  std::filesystem::remove_all(dir);
}

// The skipped gap is time on the store's clock too: an entry whose TTL is shorter than the
// think time has expired when its session returns (as in sim mode), one whose TTL is longer
// has not.
TEST(Engine, AnIdleGapAgesTheStoresEntries) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  for (const double ttl : {0.5, 60.0}) {
    store::StoreConfig sc;
    sc.dram_bytes = 64 << 20;
    sc.chunk_bytes = 64 << 10;
    sc.io_threads = 2;
    sc.default_ttl = ttl;
    store::AttentionStore st(sc);
    EngineConfig c = config(Mode::CA);
    c.sched.think = sched::ThinkTime::parse("const:3");
    RunResult r = serve(*m, &st, c, sessions(1, 2, 40, 8, 3));
    ASSERT_EQ(r.records.size(), 2u);
    std::sort(r.records.begin(), r.records.end(),
              [](const auto& a, const auto& b) { return a.turn < b.turn; });
    EXPECT_GE(r.records[1].arrival_s, r.records[0].finish_s + 3.0 - 1e-9);  // still skipped
    EXPECT_EQ(r.records[1].tier, ttl < 3 ? "miss" : "dram") << "ttl " << ttl;
    EXPECT_EQ(st.stats().get(store::Counter::Expirations), ttl < 3 ? 1u : 0u) << "ttl " << ttl;
  }
}

// An engine serves many runs (chat runs one per turn): a run that ended in an exception (here
// the token callback's) leaves nothing that a later run takes for its own requests.
TEST(Engine, ARunAfterAFailedOneServesAsAFreshEngine) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  auto in = sessions(3, 2, 40, 8);
  Tokens fresh, again;
  auto st = dram_store();
  serve(*m, st.get(), config(Mode::CA), in, &fresh);
  auto st2 = dram_store();
  Engine e(*m, st2.get(), config(Mode::CA));
  int emitted = 0;
  auto other = sessions(3, 2, 40, 8, 7);
  for (auto& s : other) s.id += 1000;
  EXPECT_THROW(e.run(other, {},
                     [&](uint64_t, int32_t) {
                       if (++emitted == 12) throw std::runtime_error("stop");
                     }),
               std::runtime_error);
  const RunResult r = e.run(in, {}, [&](uint64_t s, int32_t t) { again[s].push_back(t); });
  EXPECT_EQ(again, fresh);
  EXPECT_EQ(r.records.size(), 6u);
}

TEST(Engine, SameTraceSameSeedSameHitMissSequence) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const auto in = sessions(4, 3, 50, 4);
  std::vector<std::string> seq[2];
  for (int run = 0; run < 2; ++run) {
    store::StoreConfig c;
    c.dram_bytes = 2 << 20;  // small: evictions happen
    c.chunk_bytes = 64 << 10;
    c.advisor = std::make_shared<PolicyAdvisor>("lru", policy::Capacity{c.dram_bytes, 0});
    store::AttentionStore st(c);
    EngineConfig ec = config(Mode::CA);
    ec.sched.max_batch = 2;
    RunResult r = serve(*m, &st, ec, in);
    std::sort(r.records.begin(), r.records.end(), [](const auto& a, const auto& b) {
      return a.session != b.session ? a.session < b.session : a.turn < b.turn;
    });
    for (const auto& rec : r.records) {
      seq[run].push_back(std::to_string(rec.session) + "/" + std::to_string(rec.turn) + ":" +
                         (rec.tier == "miss" || rec.tier == "none" ? rec.tier : "hit"));
    }
  }
  EXPECT_EQ(seq[0], seq[1]);
  EXPECT_NE(std::count_if(seq[0].begin(), seq[0].end(),
                          [](const std::string& x) { return x.find("miss") != std::string::npos; }),
            0)
      << "the store is small enough to evict";
}

// The batch fills in one step whatever the preload window: the requests it has room for are
// prepared, then admitted together (with one prepared at a time, eight requests took eight
// steps to admit, and RE's schedule depended on a store option). Eight single-turn requests of
// four output tokens: one step prefills all and emits their first tokens, three decode.
TEST(Engine, TheBatchFillsInOneStepWhateverThePreloadWindow) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const auto in = sessions(8, 1, 20, 4);
  for (Mode mode : {Mode::CA, Mode::RE}) {
    auto st = dram_store();
    EngineConfig ec = config(mode);
    ec.sched.max_batch = 8;
    ec.preload_jobs = 1;
    const RunResult r = serve(*m, mode == Mode::CA ? st.get() : nullptr, ec, in);
    EXPECT_EQ(r.steps, 4) << mode_name(mode);
    ASSERT_EQ(r.records.size(), 8u);
    for (const auto& rec : r.records) {
      EXPECT_EQ(rec.first_token_s, r.records.front().first_token_s) << "session " << rec.session;
    }
  }
}

// A vocabulary limit (chat's: the tokenizer's ids, when the embedding is padded past them)
// keeps every output token below it; without it the argmax goes past.
TEST(Engine, OutputTokensStayWithinTheVocabularyLimit) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const auto in = sessions(2, 2, 20, 8);
  for (int limit : {0, 40}) {
    Engine e(*m, nullptr, config(Mode::RE));
    e.set_vocab_limit(limit);
    int32_t top = -1;
    e.run(in, {}, [&](uint64_t, int32_t t) { top = std::max(top, t); });
    if (limit > 0) {
      EXPECT_LT(top, limit);
    } else {
      EXPECT_GE(top, 40) << "the test needs outputs past the limit without it";
    }
  }
}

// The requests the engine prepares load their entries themselves, from whichever tier holds
// them; the store prefetches only the look-ahead's other sessions. With one request prepared
// and DRAM for one entry, the prefetch window is the queue's head alone: every fetch would
// read the head's entry a second time beside its own load (the store used to be asked before
// the engine prepared the head, and scheduler-aware served fewer turns from DRAM than LRU).
TEST(Engine, PrefetchLeavesTheRequestsBeingPreparedToTheirOwnLoads) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto m = stories(path);
  const std::string dir = cb::test::tmp_dir() + "/engine_prefetch_head";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  store::StoreConfig c;
  c.dram_bytes = 96 << 10;  // an entry of 44 tokens: 10 rows (layer x K/V) of 2 chunks
  c.ssd_bytes = 8 << 20;
  c.store_dir = dir;
  c.chunk_bytes = 4096;
  c.io_threads = 2;
  c.advisor = std::make_shared<PolicyAdvisor>("scheduler-aware",
                                              policy::Capacity{c.dram_bytes, c.ssd_bytes});
  store::AttentionStore st(c);
  EngineConfig ec = config(Mode::CA);
  ec.sched.max_batch = 1;
  ec.preload_jobs = 1;
  const RunResult r = serve(*m, &st, ec, sessions(4, 3, 40, 4));
  int ssd_hits = 0;
  for (const auto& rec : r.records) ssd_hits += rec.tier == "ssd";
  EXPECT_GT(ssd_hits, 0);
  EXPECT_EQ(st.stats().get(store::Counter::Prefetches), 0u);
  EXPECT_EQ(st.stats().get(store::Counter::PrefetchFailures), 0u);
}

}  // namespace
}  // namespace cb::engine
