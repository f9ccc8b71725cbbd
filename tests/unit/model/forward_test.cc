// Properties of the forward pass that must hold for every architecture, independent of
// any reference implementation (the numpy oracle is checked in tests/reference).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "lib/core/error.h"
#include "lib/model/model.h"
#include "lib/model/model_source.h"
#include "lib/model/tensor_specs.h"
#include "lib/tokenizer/load.h"
#include "tests/support/hf_checkpoint.h"
#include "tests/support/random_tokens.h"
#include "tests/support/test_data.h"

namespace {

using cb::kv::KvCache;
using cb::model::Model;
using cb::model::ModelSource;
using cb::model::SeqInput;

std::unique_ptr<Model> load(const std::string& arg) {
  return Model::load(*ModelSource::open(arg), 3);
}

using cb::test::random_tokens;

// Max |a - b| over max |b| (scale-aware relative error of a row set).
double rel_err(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / std::max(den, 1e-30);
}

std::vector<float> prefill(const Model& m, const std::vector<int32_t>& toks, int block_size) {
  KvCache cache(m.kv_config(static_cast<int>(toks.size()) / block_size + 2, block_size));
  cache.add_sequence(1);
  EXPECT_TRUE(cache.reserve(1, static_cast<int64_t>(toks.size())));
  return m.forward({{1, toks, true}}, cache);
}

const char* kModels[] = {"preset:tiny-llama", "preset:tiny-mistral", "preset:tiny-falcon-7b",
                         "preset:tiny-falcon-40b"};

class ForwardTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ForwardTest, DecodeTokenByTokenMatchesOnePrefill) {
  auto m = load(GetParam());
  const int V = m->config().vocab_size;
  const auto toks = random_tokens(70, V, 1);  // longer than tiny-mistral's window of 32
  const auto full = prefill(*m, toks, 16);
  KvCache cache(m->kv_config(8, 16));
  cache.add_sequence(5);
  ASSERT_TRUE(cache.reserve(5, 70));
  for (size_t t = 0; t < toks.size(); ++t) {
    const auto row = m->forward({{5, {toks[t]}, false}}, cache);
    ASSERT_LT(rel_err(row.data(), full.data() + t * V, static_cast<size_t>(V)), 1e-5)
        << "position " << t;
  }
  EXPECT_EQ(cache.length(5), 70);
}

TEST_P(ForwardTest, BlockSizesAndChunkedPrefillAgree) {
  auto m = load(GetParam());
  const int V = m->config().vocab_size;
  const auto toks = random_tokens(77, V, 2);
  const auto ref = prefill(*m, toks, 16);
  for (int bs : {1, 64}) {
    const auto got = prefill(*m, toks, bs);
    EXPECT_LT(rel_err(got.data(), ref.data(), ref.size()), 1e-5) << "block size " << bs;
  }
  // Prefill in chunks of 7 tokens (chunked prefill) gives the same logits.
  KvCache cache(m->kv_config(8, 16));
  cache.add_sequence(0);
  ASSERT_TRUE(cache.reserve(0, 77));
  for (size_t s = 0; s < toks.size(); s += 7) {
    const size_t e = std::min(toks.size(), s + 7);
    const auto got = m->forward({{0,
                                  std::vector<int32_t>(toks.begin() + static_cast<long>(s),
                                                       toks.begin() + static_cast<long>(e)),
                                  true}},
                                cache);
    EXPECT_LT(rel_err(got.data(), ref.data() + s * V, (e - s) * V), 1e-5) << "chunk at " << s;
  }
}

TEST_P(ForwardTest, MixedBatchMatchesSequencesAlone) {
  auto m = load(GetParam());
  const int V = m->config().vocab_size;
  const auto a = random_tokens(40, V, 3), b = random_tokens(9, V, 4), c = random_tokens(23, V, 5);
  // Alone.
  const auto ra = prefill(*m, a, 16), rb = prefill(*m, b, 16);
  std::vector<int32_t> c_plus = c;
  c_plus.push_back(7);
  const auto rc = prefill(*m, c_plus, 16);
  // Batched: c is already in the cache (decode step), a and b are prefill chunks.
  KvCache cache(m->kv_config(16, 16));
  for (int s : {10, 11, 12}) cache.add_sequence(s);
  ASSERT_TRUE(cache.reserve(10, 40) && cache.reserve(11, 9) && cache.reserve(12, 24));
  m->forward({{12, c, false}}, cache);
  const auto out = m->forward({{10, a, true}, {12, {7}, false}, {11, b, false}}, cache);
  ASSERT_EQ(out.size(), static_cast<size_t>((40 + 1 + 1) * V));
  EXPECT_LT(rel_err(out.data(), ra.data(), 40u * V), 1e-5);
  EXPECT_LT(rel_err(out.data() + 40 * V, rc.data() + 23 * V, V), 1e-5);
  EXPECT_LT(rel_err(out.data() + 41 * V, rb.data() + 8 * V, V), 1e-5);
}

// Pre-RoPE K/V captured from a run and restored with every position shifted by k give the same
// next-token logits: RoPE encodes relative positions only. This is what lets CachedAttention
// truncate a stored history and re-embed positions on load.
TEST_P(ForwardTest, RestoredPreRopeKvIsShiftInvariant) {
  auto m = load(GetParam());
  const auto& cfg = m->config();
  const int V = cfg.vocab_size;
  const int64_t kvd = cfg.kv_dim();
  const auto hist = random_tokens(45, V, 6);
  std::map<int, std::pair<std::vector<float>, std::vector<float>>> saved;  // layer -> (K, V)
  cb::model::LayerHooks hooks;
  hooks.on_new_kv = [&](int layer, cb::kv::SeqId, int64_t pos0, int64_t n, const float* k,
                        const float* v) {
    EXPECT_EQ(pos0, 0);
    saved[layer] = {std::vector<float>(k, k + n * kvd), std::vector<float>(v, v + n * kvd)};
  };
  KvCache cache(m->kv_config(8, 16));
  cache.add_sequence(0);
  ASSERT_TRUE(cache.reserve(0, 46));
  m->forward({{0, hist, false}}, cache, hooks);
  ASSERT_EQ(saved.size(), static_cast<size_t>(cfg.n_layers));
  const auto want = m->forward({{0, {42}, false}}, cache);
  for (int64_t shift : {0, 1, 37, 1000}) {
    KvCache c2(m->kv_config(8, 16));
    c2.add_sequence(1);
    ASSERT_TRUE(c2.reserve(1, 46));
    for (int l = 0; l < cfg.n_layers; ++l)
      m->restore_kv(c2, 1, l, 0, 45, saved[l].first.data(), saved[l].second.data(), shift);
    c2.set_length(1, 45);
    SeqInput next{1, {42}, false};
    next.rope_offset = shift;
    const auto got = m->forward({next}, c2);
    EXPECT_LT(rel_err(got.data(), want.data(), V), shift == 0 ? 1e-6 : 2e-4) << "shift " << shift;
  }
}

// NKVT baseline: keys saved after RoPE and written back raw reproduce the run only when they
// land at the positions they were rotated for; shifted, they carry stale positions.
TEST_P(ForwardTest, RawRestoreOfPostRopeKeysMatchesOnlyAtOriginalPositions) {
  auto m = load(GetParam());
  const auto& cfg = m->config();
  const int V = cfg.vocab_size;
  const int64_t kvd = cfg.kv_dim();
  const auto hist = random_tokens(30, V, 11);
  std::map<int, std::pair<std::vector<float>, std::vector<float>>> saved;
  cb::model::LayerHooks hooks;
  hooks.on_new_kv = [&](int layer, cb::kv::SeqId, int64_t, int64_t n, const float* k,
                        const float* v) {
    saved[layer] = {std::vector<float>(k, k + n * kvd), std::vector<float>(v, v + n * kvd)};
  };
  KvCache cache(m->kv_config(4, 16));
  cache.add_sequence(0);
  ASSERT_TRUE(cache.reserve(0, 31));
  m->forward({{0, hist, false}}, cache, hooks);
  const auto want = m->forward({{0, {42}, false}}, cache);
  for (auto& [l, kv] : saved)
    m->rotate_keys(kv.first.data(), 0, 30);  // post-RoPE keys, positions 0..29
  auto run = [&](int64_t shift) {
    KvCache c2(m->kv_config(4, 16));
    c2.add_sequence(1);
    EXPECT_TRUE(c2.reserve(1, 31));
    for (int l = 0; l < cfg.n_layers; ++l)
      m->restore_kv_raw(c2, 1, l, 0, 30, saved[l].first.data(), saved[l].second.data());
    c2.set_length(1, 30);
    SeqInput next{1, {42}, false};
    next.rope_offset = shift;  // the new token's position no longer matches the stored rotations
    return m->forward({next}, c2);
  };
  EXPECT_LT(rel_err(run(0).data(), want.data(), V), 1e-6);
  EXPECT_GT(rel_err(run(500).data(), want.data(), V), 1e-3);
}

TEST_P(ForwardTest, HooksRunPerLayerInOrderBeforeAttention) {
  auto m = load(GetParam());
  KvCache cache(m->kv_config(4, 16));
  cache.add_sequence(0);
  cache.add_sequence(1);
  ASSERT_TRUE(cache.reserve(0, 10) && cache.reserve(1, 3));
  std::vector<std::string> events;
  cb::model::LayerHooks hooks;
  hooks.wait_ready = [&](int l) { events.push_back("wait" + std::to_string(l)); };
  hooks.on_new_kv = [&](int l, cb::kv::SeqId s, int64_t, int64_t n, const float*, const float*) {
    events.push_back("kv" + std::to_string(l) + ":" + std::to_string(s) + "x" + std::to_string(n));
  };
  m->forward({{0, random_tokens(10, 100, 7), false}, {1, random_tokens(3, 100, 8), false}}, cache,
             hooks);
  std::vector<std::string> want;
  for (int l = 0; l < m->config().n_layers; ++l) {
    want.push_back("kv" + std::to_string(l) + ":0x10");
    want.push_back("kv" + std::to_string(l) + ":1x3");
    want.push_back("wait" + std::to_string(l));
  }
  EXPECT_EQ(events, want);
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, ForwardTest, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string n = std::string(p.param).substr(12);
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(ForwardTest, SlidingWindowOnlyMattersBeyondTheWindow) {
  auto src = ModelSource::open("preset:tiny-mistral");
  auto cfg = src->config();
  Model windowed(cfg, cb::model::Weights::load(*src, 3));
  cfg.sliding_window = 0;
  Model full(cfg, cb::model::Weights::load(*src, 3));
  const int V = cfg.vocab_size, W = src->config().sliding_window;
  const auto toks = random_tokens(W + 10, V, 9);
  const auto a = prefill(windowed, toks, 16), b = prefill(full, toks, 16);
  for (int t = 0; t < W + 10; ++t) {
    const double e = rel_err(a.data() + t * V, b.data() + t * V, V);
    if (t < W) {
      EXPECT_LT(e, 1e-6) << t;
    } else {
      EXPECT_GT(e, 1e-4) << t;
    }
  }
}

// --cpu-weights bf16: decode (the bf16 GEMV, one row) and prefill (widened blocks and sgemm)
// compute the same function, and it stays near the fp32 model's (the numpy reference with the
// same rounded weights is the oracle: tests/reference, reference.logits_bf16.*).
TEST_P(ForwardTest, Bf16WeightsDecodeMatchesPrefillAndStaysNearF32) {
  auto src = ModelSource::open(GetParam());
  auto m = Model::load(*src, 3, cb::model::WeightStorage::BF16);
  auto f = Model::load(*src, 3);
  ASSERT_EQ(m->weight_storage(), cb::model::WeightStorage::BF16);
  const int V = m->config().vocab_size;
  const auto toks = random_tokens(40, V, 2);
  const auto full = prefill(*m, toks, 16);
  const auto ref = prefill(*f, toks, 16);
  KvCache cache(m->kv_config(4, 16));
  cache.add_sequence(5);
  ASSERT_TRUE(cache.reserve(5, 40));
  double worst_vs_f32 = 0;
  for (size_t t = 0; t < toks.size(); ++t) {
    const auto row = m->forward({{5, {toks[t]}, false}}, cache);
    ASSERT_LT(rel_err(row.data(), full.data() + t * V, static_cast<size_t>(V)), 1e-5)
        << "position " << t;
    worst_vs_f32 =
        std::max(worst_vs_f32, rel_err(row.data(), ref.data() + t * V, static_cast<size_t>(V)));
  }
  // bf16 keeps 8 significant bits (relative rounding error up to 2^-9 per weight).
  EXPECT_GT(worst_vs_f32, 0.0);
  EXPECT_LT(worst_vs_f32, 5e-2);
}

// Every matrix of a bf16 load is the fp32 load's value rounded to nearest even (lib/core's
// fp32_to_bf16, tested against its definition in dtype_test); norms stay fp32, unchanged.
TEST(ForwardTest, Bf16WeightsAreTheRoundedF32Weights) {
  for (const char* name : kModels) {
    auto src = ModelSource::open(name);
    auto b = cb::model::Weights::load(*src, 3, cb::model::WeightStorage::BF16);
    auto f = cb::model::Weights::load(*src, 3);
    int matrices = 0;
    for (const auto& spec : cb::model::expected_tensors(src->config())) {
      const auto n = static_cast<size_t>(spec.numel());
      if (spec.role == cb::model::TensorRole::NormWeight ||
          spec.role == cb::model::TensorRole::NormBias) {
        const float* x = b->get(spec.name);
        const float* y = f->get(spec.name);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], y[i]) << spec.name;
        continue;
      }
      const cb::model::WeightMatrix mb = b->matrix(spec.name);
      ASSERT_NE(mb.bf16, nullptr) << spec.name;
      ASSERT_EQ(mb.f32, nullptr) << spec.name;
      EXPECT_THROW(b->get(spec.name), cb::Error) << spec.name;  // not fp32: matrix() only
      const float* y = f->get(spec.name);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(mb.bf16[i], cb::fp32_to_bf16(y[i])) << spec.name;
      ++matrices;
    }
    EXPECT_GT(matrices, 3) << name;
    // Half the bytes for the matrices.
    EXPECT_LT(b->owned_bytes(), f->owned_bytes() * 0.55) << name;
  }
}

// A checkpoint already in bf16 is used where it lies (pointers into the file's mapping, no copy
// of a matrix); what the load owns is what weights_host_bytes counted. Also for fp32 and f16
// files converted to bf16, and bf16 files widened to fp32.
TEST(ForwardTest, Bf16FilesAreUsedInPlaceAndHostBytesMatchTheLoad) {
  const nlohmann::json cfg = cb::test::tiny_llama_hf_config();
  const auto specs = cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40);
  for (const char* dtype : {"BF16", "F16", "F32"}) {
    auto src = ModelSource::open(cb::test::write_checkpoint(
        std::string("bf16_in_place_") + dtype, cfg, cb::test::random_filled(specs, dtype, 9)));
    for (auto storage : {cb::model::WeightStorage::BF16, cb::model::WeightStorage::F32}) {
      auto w = cb::model::Weights::load(*src, 0, storage);
      EXPECT_EQ(w->owned_bytes(), cb::model::weights_host_bytes(*src, src->config(), storage))
          << dtype << " as " << cb::model::weight_storage_name(storage);
      const cb::model::WeightMatrix q = w->matrix("blk.1.attn_q.weight");
      const cb::formats::TensorRef* t = src->tensor("blk.1.attn_q.weight");
      const bool in_place =
          std::string(dtype) == (storage == cb::model::WeightStorage::BF16 ? "BF16" : "F32");
      const void* p = q.bf16 != nullptr ? static_cast<const void*>(q.bf16) : q.f32;
      EXPECT_EQ(p == t->data, in_place)
          << dtype << " as " << cb::model::weight_storage_name(storage);
      if (std::string(dtype) == "BF16" && storage == cb::model::WeightStorage::BF16) {
        // Only the norms are owned: 2 per layer and the final one, 32 fp32 each.
        EXPECT_EQ(w->owned_bytes(), 5u * 32u * 4u);
      }
    }
  }
}

TEST(ForwardTest, WeightsHostBytesCountTwoBytesPerBf16Weight) {
  auto src = ModelSource::open("preset:llama-2-7b");
  const auto& c = src->config();
  const uint64_t f32 = cb::model::weights_host_bytes(*src, c, cb::model::WeightStorage::F32);
  const uint64_t bf16 = cb::model::weights_host_bytes(*src, c, cb::model::WeightStorage::BF16);
  EXPECT_EQ(f32, 4 * cb::model::parameter_count(c));
  // Only the norms (2 per layer and the final one, of `hidden` each) stay fp32.
  const uint64_t norms =
      static_cast<uint64_t>(2 * c.n_layers + 1) * static_cast<uint64_t>(c.hidden);
  EXPECT_EQ(bf16, 2 * (cb::model::parameter_count(c) - norms) + 4 * norms);
}

TEST(ForwardTest, RejectsUnreservedCapacityAndBadTokens) {
  auto m = load("preset:tiny-llama");
  KvCache cache(m->kv_config(2, 16));
  cache.add_sequence(0);
  ASSERT_TRUE(cache.reserve(0, 4));
  EXPECT_THROW(m->forward({{0, random_tokens(20, 100, 1), false}}, cache), cb::Error);
  EXPECT_THROW(m->forward({{0, {600}, false}}, cache), cb::Error);
  EXPECT_THROW(m->forward({{0, {-1}, false}}, cache), cb::Error);
  // One sequence twice in a batch: both items would append at its current length.
  try {
    m->forward({{0, {1}, false}, {0, {2}, false}}, cache);
    ADD_FAILURE() << "a batch naming one sequence twice ran";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 0 appears twice"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.length(0), 0);
}

// The real trained model: greedy generation from BOS reproduces the known story opening.
TEST(ForwardTest, Stories260KGreedyGeneration) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = ModelSource::open(path);
  auto m = Model::load(*src);
  auto tok = cb::tokenizer::tokenizer_from_gguf(*src->gguf());
  KvCache cache(m->kv_config(8, 16));
  cache.add_sequence(0);
  ASSERT_TRUE(cache.reserve(0, 100));
  std::vector<int32_t> out = {tok->bos_id()};
  auto logits = m->forward({{0, out, false}}, cache);
  for (int i = 0; i < 60; ++i) {
    int32_t best = 0;
    for (int j = 1; j < m->config().vocab_size; ++j)
      if (logits[static_cast<size_t>(j)] > logits[static_cast<size_t>(best)]) best = j;
    out.push_back(best);
    logits = m->forward({{0, {best}, false}}, cache);
  }
  const std::string text = tok->decode(out);
  EXPECT_EQ(text.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << text;
}

}  // namespace
