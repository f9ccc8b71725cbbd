// The GPU forward pass (lib/cuda_model) against lib/model's CPU forward on the same weights:
// the tiny presets of every family and the real stories260K, prefill with all logits then
// batched decode of two sequences, in fp32, fp16 and bf16 storage; the on_new_kv hook's
// pre-RoPE K and V and restore_kv (CachedAttention's reload) against the CPU's. The fused QKV row
// order is checked on the host.
#include "lib/cuda_model/cuda_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/preset_fill.h"
#include "lib/core/error.h"
#include "lib/device/host_buffer.h"
#include "lib/model/model_source.h"
#include "lib/model/presets.h"
#include "lib/model/tensor_specs.h"
#include "tests/support/hf_checkpoint.h"
#include "tests/support/random_tokens.h"
#include "tests/support/test_data.h"
#include "tests/unit/cuda/cuda_model_test_util.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::configure;
using cb::cuda_test::kStorages;
using cb::cuda_test::rel_err;
using cb::cuda_test::storage_name;
using cb::cuda_test::tolerance;
using cb::cuda_test::Variant;
using cb::cuda_test::variant_name;
using cb::kv::KvCache;
using cb::model::CudaModel;
using cb::model::Model;
using cb::model::ModelConfig;
using cb::model::ModelSource;
using cb::model::SeqInput;

TEST(CudaModelHost, FusedQkvRowsFollowTheCheckpointLayout) {
  ModelConfig c;
  c.arch = cb::model::Arch::Falcon;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  c.head_dim = 4;
  c.qkv_layout = cb::model::QkvLayout::Grouped;
  const std::vector<int64_t> rows = cb::model::fused_qkv_source_rows(c);
  const int64_t qd = 32, kvd = 8, per = 4, hd = 4;
  ASSERT_EQ(rows.size(), static_cast<size_t>(qd + 2 * kvd));
  EXPECT_EQ(std::set<int64_t>(rows.begin(), rows.end()).size(), rows.size());  // a permutation
  // HF new_decoder_architecture: group g holds its 4 query heads, then K, then V.
  for (int64_t head = 0; head < 8; ++head) {
    const int64_t g = head / per, j = head % per;
    for (int64_t e = 0; e < hd; ++e) {
      EXPECT_EQ(rows[static_cast<size_t>(head * hd + e)], g * (per + 2) * hd + j * hd + e);
    }
  }
  for (int64_t g = 0; g < 2; ++g) {
    EXPECT_EQ(rows[static_cast<size_t>(qd + g * hd)], g * (per + 2) * hd + per * hd);
    EXPECT_EQ(rows[static_cast<size_t>(qd + kvd + g * hd)], g * (per + 2) * hd + (per + 1) * hd);
  }
  c.qkv_layout = cb::model::QkvLayout::Contiguous;
  const std::vector<int64_t> same = cb::model::fused_qkv_source_rows(c);
  for (size_t r = 0; r < same.size(); ++r) EXPECT_EQ(same[r], static_cast<int64_t>(r));
}

void run_family(const std::string& arg, kc::Storage st, double tol,
                Variant variant = Variant::kDefault) {
  auto src = ModelSource::open(arg);
  auto weights = cb::model::Weights::load(*src, 3);
  const ModelConfig cfg = src->config();
  Model cpu(cfg, cb::model::Weights::load(*src, 3));
  const int64_t V = cfg.vocab_size;
  CudaModel gpu(cfg, *weights, {st, 0});
  configure(gpu, variant);
  KvCache cc(cpu.kv_config(16, 16)), gc(gpu.kv_config(16, 16));
  for (KvCache* c : {&cc, &gc}) {
    c->add_sequence(1);
    c->add_sequence(2);
    ASSERT_TRUE(c->reserve(1, 90));
    ASSERT_TRUE(c->reserve(2, 40));
  }
  const std::string what =
      arg + " storage " + std::to_string(static_cast<int>(st)) + variant_name(variant);
  // Prefill: 70 tokens (past tiny-mistral's 32-token window) and 25, all logits.
  std::vector<SeqInput> pre = {{1, cb::test::random_tokens(70, static_cast<int>(V), 1), true},
                               {2, cb::test::random_tokens(25, static_cast<int>(V), 2), true}};
  const std::vector<float> want = cpu.forward(pre, cc);
  const std::vector<float> got = gpu.forward(pre, gc);
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_LT(rel_err(got, want), tol) << what << " prefill";
  // Batched decode: 8 steps of both sequences, one token each.
  for (int step = 0; step < 8; ++step) {
    std::vector<SeqInput> dec = {{1, {static_cast<int32_t>((step * 7 + 3) % V)}, false},
                                 {2, {static_cast<int32_t>((step * 11 + 5) % V)}, false}};
    const std::vector<float> w = cpu.forward(dec, cc);
    const std::vector<float> g = gpu.forward(dec, gc);
    EXPECT_LT(rel_err(g, w), tol) << what << " decode step " << step;
  }
  EXPECT_EQ(gc.length(1), cc.length(1));
  EXPECT_EQ(gc.length(2), cc.length(2));
}

// Without a GPU, making the model is a one-line error that says what to do.
TEST(CudaModelHost, NoGpuIsAClearError) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) GTEST_SKIP() << "a GPU is present";
  (void)cudaGetLastError();
  auto src = ModelSource::open("preset:tiny-llama");
  auto weights = cb::model::Weights::load(*src, 3);
  try {
    CudaModel gpu(src->config(), *weights);
    ADD_FAILURE() << "no error without a GPU";
  } catch (const cb::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--backend cuda: no CUDA GPU"), std::string::npos) << m;
    EXPECT_NE(m.find("run with --backend cpu"), std::string::npos) << m;
  }
}

TEST(CudaModel, TinyPresetsMatchTheCpuForward) {
  SKIP_WITHOUT_GPU();
  for (const char* m : {"preset:tiny-llama", "preset:tiny-mistral", "preset:tiny-falcon-7b",
                        "preset:tiny-falcon-40b"}) {
    for (kc::Storage st : kStorages) {
      run_family(m, st, tolerance(st));
      run_family(m, st, tolerance(st), Variant::kSeparate);
    }
  }
}

TEST(CudaModel, Stories260KMatchesTheCpuForward) {
  SKIP_WITHOUT_GPU();
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  for (kc::Storage st : kStorages) {
    run_family(path, st, tolerance(st));
    run_family(path, st, tolerance(st), Variant::kSeparate);
  }
}

// Decode with RMSNorm folded into the QKV and gate/up GEMVs and SwiGLU into the latter
// (kernels/cuda norm_gemv), in fp16 and bf16: the same logits as the CPU's, step by step.
TEST(CudaModel, FusedDecodeMatchesTheCpuForward) {
  SKIP_WITHOUT_GPU();
  for (kc::Storage st : {kc::Storage::F16, kc::Storage::BF16}) {
    for (const char* m : {"preset:tiny-llama", "preset:tiny-mistral"}) {
      run_family(m, st, tolerance(st), Variant::kNormFusion);
    }
    if (const std::string path = cb::test::data_path("models/stories260K/stories260K.gguf");
        cb::test::file_exists(path)) {  // with the shared data
      run_family(path, st, tolerance(st), Variant::kNormFusion);
    }
  }
}

// Gate and up as one launch (the GEMV with its SwiGLU in decode; one GEMM over the fused matrix
// and a SwiGLU over its halves in prefill and in fp32) and RoPE with the append, alone and with
// the decode attention kernel and PDL-launched GEMVs: every tiny family (Falcon has no gate: RoPE
// with the append only) in every storage, and stories260K, step by step against the CPU.
TEST(CudaModel, LaunchFusionsMatchTheCpuForward) {
  SKIP_WITHOUT_GPU();
  const std::string path = cb::test::data_path("models/stories260K/stories260K.gguf");
  for (Variant v : {Variant::kLaunchFusions, Variant::kAllOptIns, Variant::kEverything}) {
    for (kc::Storage st : kStorages) {
      for (const char* m : {"preset:tiny-llama", "preset:tiny-mistral", "preset:tiny-falcon-7b",
                            "preset:tiny-falcon-40b"}) {
        run_family(m, st, tolerance(st), v);
      }
      if (cb::test::file_exists(path)) run_family(path, st, tolerance(st), v);  // shared data
    }
  }
}

// The device's preset generator writes lib/model preset_fill's values bit for bit (fp32),
// also through a row map; a model generated on the device computes the same logits as one
// uploaded from the host's preset weights.
TEST(CudaModel, PresetsGeneratedOnTheDeviceAreTheHostValues) {
  SKIP_WITHOUT_GPU();
  auto src = ModelSource::open("preset:tiny-falcon-40b");
  const ModelConfig cfg = src->config();
  for (const cb::model::TensorSpec& t : cb::model::expected_tensors(cfg)) {
    std::vector<float> want(static_cast<size_t>(t.numel()));
    cb::model::preset_fill(cfg, t, 7, 0, t.numel(), want.data());
    const cb::model::PresetFill f = cb::model::preset_fill_params(cfg, t, 7);
    const int64_t rows = t.shape.size() == 1 ? 1 : t.shape.front();
    std::vector<int32_t> reversed(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      reversed[static_cast<size_t>(r)] = static_cast<int32_t>(rows - 1 - r);
    cb::cuda_test::DeviceArray<float> out(want.size());
    cb::cuda_test::DeviceArray<int32_t> map(reversed);
    for (bool mapped : {false, true}) {
      out.poison();
      kc::PresetFillParams p;
      p.out = out.get();
      p.rows = rows;
      p.cols = t.numel() / rows;
      p.row_map = mapped ? map.get() : nullptr;
      p.constant = f.constant;
      p.value = f.value;
      p.key = f.key;
      p.scale = f.scale;
      ASSERT_EQ(kc::launch_preset_fill(p, nullptr), cudaSuccess);
      const std::vector<float> got = out.download();
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t src_row = mapped ? rows - 1 - r : r;
        for (int64_t c = 0; c < p.cols; ++c) {
          ASSERT_EQ(got[static_cast<size_t>(r * p.cols + c)],
                    want[static_cast<size_t>(src_row * p.cols + c)])
              << t.name << " row " << r << (mapped ? " (mapped)" : "");
        }
      }
    }
  }
  // tiny-falcon-7b: a QKV row map of 384 bytes, not whole 256-byte granules.
  for (const char* m : {"preset:tiny-llama", "preset:tiny-falcon-40b", "preset:tiny-falcon-7b"}) {
    auto s = ModelSource::open(m);
    auto weights = cb::model::Weights::load(*s, 5);
    CudaModel uploaded(s->config(), *weights, {kc::Storage::F32, 0});
    CudaModel generated(s->config(), cb::model::PresetWeights{5}, {kc::Storage::F32, 0});
    const auto kvc = uploaded.kv_config(4, 16);
    KvCache a(kvc), b(kvc);
    for (KvCache* c : {&a, &b}) {
      c->add_sequence(0);
      ASSERT_TRUE(c->reserve(0, 20));
    }
    const std::vector<SeqInput> in = {
        {0, cb::test::random_tokens(20, s->config().vocab_size, 4), true}};
    EXPECT_EQ(uploaded.forward(in, a), generated.forward(in, b)) << m;
  }
}

// Which caches the GPU model takes: only block-table caches (a host-pool cache would go stale),
// one at a time (a new cache must be empty; going back to an older one with history fails).
TEST(CudaModel, CacheRules) {
  SKIP_WITHOUT_GPU();
  auto src = ModelSource::open("preset:tiny-llama");
  CudaModel gpu(src->config(), cb::model::PresetWeights{1}, {kc::Storage::F32, 0});
  const int V = src->config().vocab_size;
  cb::kv::KvConfig host = gpu.kv_config(4, 16);
  EXPECT_FALSE(host.host_pools);
  host.host_pools = true;
  KvCache with_pools(host), a(gpu.kv_config(4, 16)), b(gpu.kv_config(6, 16));
  for (KvCache* c : {&with_pools, &a, &b}) {
    c->add_sequence(0);
    ASSERT_TRUE(c->reserve(0, 30));
  }
  const std::vector<SeqInput> in = {{0, cb::test::random_tokens(10, V, 2), false}};
  EXPECT_THROW(gpu.forward(in, with_pools), cb::Error);
  const std::vector<float> first = gpu.forward(in, a);
  EXPECT_EQ(gpu.forward(in, b), first);  // a fresh cache: same tokens, same logits
  try {
    gpu.forward({{0, {1}, false}}, a);  // a's history is no longer on the device
    ADD_FAILURE() << "no error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds history"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.length(0), 10);  // unchanged by the refused call
}

// Decoding up to stories260K's whole 2048-token window: the last steps split the keys over
// several blocks (flash-decoding), and the logits still match the CPU's.
TEST(CudaModel, LongContextDecodeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = ModelSource::open(path);
  const ModelConfig cfg = src->config();
  auto weights = cb::model::Weights::load(*src, 0);
  Model cpu(cfg, cb::model::Weights::load(*src, 0));
  CudaModel gpu(cfg, *weights, {kc::Storage::F32, 0});
  const int64_t n = cfg.max_context;
  KvCache cc(cpu.kv_config(static_cast<int>(n / 16 + 1), 16)),
      gc(gpu.kv_config(static_cast<int>(n / 16 + 1), 16));
  for (KvCache* c : {&cc, &gc}) {
    c->add_sequence(3);
    ASSERT_TRUE(c->reserve(3, n));
  }
  const std::vector<SeqInput> pre = {{3, cb::test::random_tokens(n - 8, cfg.vocab_size, 6), false}};
  EXPECT_LT(rel_err(gpu.forward(pre, gc), cpu.forward(pre, cc)), 1e-4);
  for (int step = 0; step < 8; ++step) {
    const std::vector<SeqInput> dec = {{3, {static_cast<int32_t>(1 + step)}, false}};
    EXPECT_LT(rel_err(gpu.forward(dec, gc), cpu.forward(dec, cc)), 1e-4) << "step " << step;
  }
}

using KvByLayer = std::map<int, std::map<uint64_t, std::vector<float>>>;  // layer -> seq -> rows

cb::model::LayerHooks recorder(KvByLayer* k, KvByLayer* v, int64_t kvd) {
  cb::model::LayerHooks h;
  h.on_new_kv = [k, v, kvd](int layer, uint64_t seq, int64_t, int64_t n, const float* kp,
                            const float* vp) {
    auto& ks = (*k)[layer][seq];
    auto& vs = (*v)[layer][seq];
    ks.insert(ks.end(), kp, kp + n * kvd);
    vs.insert(vs.end(), vp, vp + n * kvd);
  };
  return h;
}

// The hook hands every sequence's new K before RoPE and V to the caller, as the CPU forward
// does: two sequences in one call (the GPU captures all layers and hands them over at the end).
TEST(CudaModel, NewKvHookMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  auto src = ModelSource::open("preset:tiny-llama");
  const ModelConfig cfg = src->config();
  for (kc::Storage st : kStorages) {
    auto weights = cb::model::Weights::load(*src, 3);
    Model cpu(cfg, cb::model::Weights::load(*src, 3));
    CudaModel gpu(cfg, *weights, {st, 0});
    KvCache cc(cpu.kv_config(8, 16)), gc(gpu.kv_config(8, 16));
    KvByLayer ck, cv, gk, gv;
    for (KvCache* c : {&cc, &gc}) {
      for (cb::kv::SeqId s : {4, 5}) {
        c->add_sequence(s);
        ASSERT_TRUE(c->reserve(s, 30));
      }
    }
    const std::vector<SeqInput> in = {{4, cb::test::random_tokens(30, cfg.vocab_size, 9), false},
                                      {5, cb::test::random_tokens(11, cfg.vocab_size, 8), false}};
    cpu.forward(in, cc, recorder(&ck, &cv, cfg.kv_dim()));
    gpu.forward(in, gc, recorder(&gk, &gv, cfg.kv_dim()));
    ASSERT_EQ(gk.size(), static_cast<size_t>(cfg.n_layers));
    for (int l = 0; l < cfg.n_layers; ++l) {
      for (uint64_t s : {4, 5}) {
        ASSERT_EQ(gk[l][s].size(), ck[l][s].size());
        EXPECT_LT(rel_err(gk[l][s], ck[l][s]), tolerance(st)) << storage_name(st) << " K " << l;
        EXPECT_LT(rel_err(gv[l][s], cv[l][s]), tolerance(st)) << storage_name(st) << " V " << l;
      }
    }
  }
}

// CachedAttention's restore on the device: a history computed on the CPU, captured before RoPE,
// restored into the GPU's blocks (before any GPU forward, at RoPE offsets 0 and 7), then
// continued; the logits match the CPU continuing from the same restored history.
TEST(CudaModel, RestoredHistoryContinuesAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const char* m : {"preset:tiny-llama", "preset:tiny-falcon-40b"}) {
    auto src = ModelSource::open(m);
    const ModelConfig cfg = src->config();
    const int64_t kvd = cfg.kv_dim(), P = 37;
    Model cpu(cfg, cb::model::Weights::load(*src, 3));
    KvByLayer hk, hv;
    {
      KvCache first(cpu.kv_config(8, 16));
      first.add_sequence(1);
      ASSERT_TRUE(first.reserve(1, P));
      cpu.forward({{1, cb::test::random_tokens(P, cfg.vocab_size, 4), false}}, first,
                  recorder(&hk, &hv, kvd));
    }
    for (kc::Storage st : kStorages) {
      for (int64_t offset : {0, 7}) {
        auto weights = cb::model::Weights::load(*src, 3);
        CudaModel gpu(cfg, *weights, {st, 0});
        KvCache cc(cpu.kv_config(8, 16)), gc(gpu.kv_config(8, 16));
        gpu.bind_cache(gc);
        for (KvCache* c : {&cc, &gc}) {
          c->add_sequence(9);
          ASSERT_TRUE(c->reserve(9, P + 12));
          c->set_length(9, P);
        }
        for (int l = 0; l < cfg.n_layers; ++l) {
          cpu.restore_kv(cc, 9, l, 0, P, hk[l][1].data(), hv[l][1].data(), offset);
          gpu.restore_kv(gc, 9, l, 0, P, hk[l][1].data(), hv[l][1].data(), offset);
        }
        SeqInput next{9, cb::test::random_tokens(12, cfg.vocab_size, 5), true};
        next.rope_offset = offset;
        const std::string what =
            std::string(m) + " " + storage_name(st) + " offset " + std::to_string(offset);
        EXPECT_LT(rel_err(gpu.forward({next}, gc), cpu.forward({next}, cc)), tolerance(st)) << what;
      }
    }
  }
}

// Native KV (--kv-entries native): the hook hands over the storage type's own rows, which are
// exactly the fp32 hook's rows narrowed (those are widened from them), also when the device
// copies them straight into page-locked memory named by native_kv_target; and restoring them
// natively (from pageable or page-locked memory) leaves the blocks bit for bit as restoring the
// fp32 rows does.
TEST(CudaModel, NativeKvIsTheStorageTypesRowsAndRestoresAsFp32Does) {
  SKIP_WITHOUT_GPU();
  auto src = ModelSource::open("preset:tiny-llama");
  const ModelConfig cfg = src->config();
  const int64_t kvd = cfg.kv_dim(), P = 29;
  const std::vector<SeqInput> in = {{4, cb::test::random_tokens(P, cfg.vocab_size, 9), false}};
  for (kc::Storage st : kStorages) {
    auto weights = cb::model::Weights::load(*src, 3);
    CudaModel gpu(cfg, *weights, {st, 0});
    const size_t esz = kc::storage_bytes(st);
    ASSERT_EQ(cb::dtype_bytes(gpu.native_kv_type(), 1), esz);
    KvByLayer fk, fv;
    std::map<int, std::vector<uint8_t>> nk, nv;
    cb::model::LayerHooks native;
    native.on_new_kv_native = [&](int layer, uint64_t, int64_t, int64_t n, const void* k,
                                  const void* v) {
      const auto* kb = static_cast<const uint8_t*>(k);
      const auto* vb = static_cast<const uint8_t*>(v);
      nk[layer].assign(kb, kb + n * kvd * static_cast<int64_t>(esz));
      nv[layer].assign(vb, vb + n * kvd * static_cast<int64_t>(esz));
    };
    for (int pass = 0; pass < 2; ++pass) {
      KvCache c(gpu.kv_config(8, 16));
      c.add_sequence(4);
      ASSERT_TRUE(c.reserve(4, P));
      gpu.forward(in, c, pass == 0 ? recorder(&fk, &fv, kvd) : native);
    }
    const std::string what = storage_name(st);
    {  // P >= 16 rows: the device copies them straight into page-locked memory the hook names
      std::vector<cb::device::HostBuffer> tk, tv;
      for (int l = 0; l < cfg.n_layers; ++l) {
        tk.emplace_back(nk[l].size(), 64);
        tv.emplace_back(nv[l].size(), 64);
      }
      cb::model::LayerHooks direct;
      int in_place = 0;
      direct.native_kv_target = [&](int layer, uint64_t, int64_t pos0,
                                    int64_t n) -> std::pair<void*, void*> {
        EXPECT_EQ(pos0, 0);
        EXPECT_EQ(n, P);
        return {tk[static_cast<size_t>(layer)].data(), tv[static_cast<size_t>(layer)].data()};
      };
      direct.on_new_kv_native = [&](int layer, uint64_t, int64_t, int64_t, const void* k,
                                    const void* v) {
        in_place += k == tk[static_cast<size_t>(layer)].data() &&
                    v == tv[static_cast<size_t>(layer)].data();
      };
      KvCache c(gpu.kv_config(8, 16));
      c.add_sequence(4);
      ASSERT_TRUE(c.reserve(4, P));
      gpu.forward(in, c, direct);
      EXPECT_EQ(in_place, cfg.n_layers) << what;
      for (int l = 0; l < cfg.n_layers; ++l) {
        EXPECT_EQ(0, std::memcmp(tk[static_cast<size_t>(l)].data(), nk[l].data(), nk[l].size()))
            << what << " K " << l;
        EXPECT_EQ(0, std::memcmp(tv[static_cast<size_t>(l)].data(), nv[l].data(), nv[l].size()))
            << what << " V " << l;
      }
    }
    for (int l = 0; l < cfg.n_layers; ++l) {
      for (const auto& [wide, narrow] : {std::pair{&fk[l][4], &nk[l]}, {&fv[l][4], &nv[l]}}) {
        // wide holds fp32 values, narrow bytes: esz bytes per value.
        ASSERT_EQ(narrow->size(), wide->size() * esz) << what;
        std::vector<uint8_t> want(narrow->size());
        for (size_t i = 0; i < wide->size(); ++i) {
          const float x = (*wide)[i];
          const uint16_t h = st == kc::Storage::F16 ? cb::fp32_to_fp16(x) : cb::fp32_to_bf16(x);
          if (st == kc::Storage::F32) {
            std::memcpy(want.data() + 4 * i, &x, 4);
          } else {
            std::memcpy(want.data() + 2 * i, &h, 2);
          }
        }
        EXPECT_EQ(*narrow, want) << what << " layer " << l;
      }
    }
    // One bound cache at a time: each pass restores into its own and reads every layer back.
    // Pass 2 restores natively from page-locked memory, which the device copies directly.
    std::vector<std::vector<float>> back[3];
    for (int pass = 0; pass < 3; ++pass) {
      KvCache c(gpu.kv_config(8, 16));
      gpu.bind_cache(c);
      c.add_sequence(9);
      ASSERT_TRUE(c.reserve(9, P));
      c.set_length(9, P);
      for (int l = 0; l < cfg.n_layers; ++l) {
        if (pass == 0) {
          gpu.restore_kv(c, 9, l, 0, P, fk[l][4].data(), fv[l][4].data(), 5);
        } else if (pass == 1) {
          gpu.restore_kv_native(c, 9, l, 0, P, nk[l].data(), nv[l].data(), 5);
        } else {
          cb::device::HostBuffer pk(nk[l].size(), 64), pv(nv[l].size(), 64);
          ASSERT_EQ(pk.kind(), cb::device::HostMemoryKind::CudaPinned);
          std::memcpy(pk.data(), nk[l].data(), nk[l].size());
          std::memcpy(pv.data(), nv[l].data(), nv[l].size());
          gpu.restore_kv_native(c, 9, l, 0, P, pk.data(), pv.data(), 5);
        }
      }
      for (int l = 0; l < cfg.n_layers; ++l) {
        std::vector<float> k(static_cast<size_t>(P * kvd)), v(k.size());
        gpu.read_kv(c, 9, l, 0, P, k.data(), v.data());
        back[pass].push_back(std::move(k));
        back[pass].push_back(std::move(v));
      }
    }
    for (int pass = 1; pass < 3; ++pass) {
      ASSERT_EQ(back[0].size(), back[pass].size());
      for (size_t i = 0; i < back[0].size(); ++i) {
        EXPECT_EQ(0, std::memcmp(back[0][i].data(), back[pass][i].data(), back[0][i].size() * 4))
            << what << " pass " << pass << (i % 2 ? " V" : " K") << " layer " << i / 2;
      }
    }
  }
}

// Direct capture across the capture ring (stories260K: 5 layers, one more than its four
// slots) in a batch that mixes items the device copies straight into the caller's page-locked
// memory (a 29-row prefill) with items it stages (5 and 3 rows, before and after it): every
// item's rows equal those of a run without targets, and only the large item's rows were
// written in place, in every layer.
TEST(CudaModel, DirectCaptureMixesWithStagedItemsAcrossTheCaptureRing) {
  SKIP_WITHOUT_GPU();
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = ModelSource::open(path);
  const ModelConfig cfg = src->config();
  ASSERT_GT(cfg.n_layers, 4);
  const int64_t kvd = cfg.kv_dim();
  const std::vector<int64_t> lens = {5, 29, 3};
  std::vector<SeqInput> in;
  for (size_t i = 0; i < lens.size(); ++i) {
    in.push_back({static_cast<cb::kv::SeqId>(i + 1),
                  cb::test::random_tokens(lens[i], cfg.vocab_size, 20 + i), false});
  }
  using Rows = std::map<std::pair<int, uint64_t>, std::vector<uint8_t>>;  // (layer, seq)
  for (kc::Storage st : {kc::Storage::F16, kc::Storage::BF16}) {
    const std::string what = storage_name(st);
    auto weights = cb::model::Weights::load(*src);
    CudaModel gpu(cfg, *weights, {st, 0});
    const size_t esz = kc::storage_bytes(st);
    // targets[layer][seq - 1]: page-locked K and V rows for every item; the model uses them
    // only for the items it copies directly.
    std::vector<std::vector<std::pair<cb::device::HostBuffer, cb::device::HostBuffer>>> targets;
    for (int l = 0; l < cfg.n_layers; ++l) {
      targets.emplace_back();
      for (int64_t n : lens) {
        const auto bytes = static_cast<size_t>(n * kvd) * esz;
        targets.back().emplace_back(cb::device::HostBuffer(bytes, 64),
                                    cb::device::HostBuffer(bytes, 64));
      }
    }
    Rows k[2], v[2];
    std::set<std::pair<int, uint64_t>> in_place;
    for (int pass = 0; pass < 2; ++pass) {
      cb::model::LayerHooks hooks;
      hooks.on_new_kv_native = [&, pass](int layer, uint64_t seq, int64_t pos0, int64_t n,
                                         const void* kp, const void* vp) {
        EXPECT_EQ(pos0, 0);
        const auto bytes = static_cast<size_t>(n * kvd) * esz;
        const auto* kb = static_cast<const uint8_t*>(kp);
        const auto* vb = static_cast<const uint8_t*>(vp);
        k[pass][{layer, seq}].assign(kb, kb + bytes);
        v[pass][{layer, seq}].assign(vb, vb + bytes);
        auto& t = targets[static_cast<size_t>(layer)][seq - 1];
        if (kp == t.first.data() && vp == t.second.data()) in_place.insert({layer, seq});
      };
      if (pass == 1) {
        hooks.native_kv_target = [&](int layer, uint64_t seq, int64_t,
                                     int64_t) -> std::pair<void*, void*> {
          auto& t = targets[static_cast<size_t>(layer)][seq - 1];
          return {t.first.data(), t.second.data()};
        };
      }
      KvCache c(gpu.kv_config(16, 16));
      for (size_t i = 0; i < in.size(); ++i) {
        c.add_sequence(in[i].seq);
        ASSERT_TRUE(c.reserve(in[i].seq, lens[i]));
      }
      gpu.forward(in, c, hooks);
    }
    ASSERT_EQ(k[1].size(), k[0].size()) << what;
    EXPECT_EQ(k[0].size(), static_cast<size_t>(cfg.n_layers) * lens.size()) << what;
    for (const auto& [key, rows] : k[0]) {
      EXPECT_EQ(k[1][key], rows) << what << " K layer " << key.first << " seq " << key.second;
      EXPECT_EQ(v[1][key], v[0][key]) << what << " V layer " << key.first << " seq " << key.second;
    }
    std::set<std::pair<int, uint64_t>> want;
    for (int l = 0; l < cfg.n_layers; ++l) want.insert({l, 2});
    EXPECT_EQ(in_place, want) << what;
  }
}

// Files go to the device tensor by tensor (raw when the file's dtype is the storage type, else
// through fp32), without a host copy of the model: the device then holds exactly what uploading
// lib/model's fp32 Weights gives, so the logits are identical, for every file dtype and storage,
// for LLaMA (Q, K, V stacked) and Falcon-40B (grouped fused QKV, rows reordered).
TEST(CudaModel, DirectUploadEqualsUploadingHostWeights) {
  SKIP_WITHOUT_GPU();
  nlohmann::json llama = cb::test::tiny_llama_hf_config();
  llama["rope_theta"] = 10000.0;
  const nlohmann::json falcon40 = {{"architectures", {"RWForCausalLM"}},
                                   {"n_embed", 32},
                                   {"n_layer", 2},
                                   {"n_head", 4},
                                   {"n_head_kv", 2},
                                   {"vocab_size", 40},
                                   {"new_decoder_architecture", true},
                                   {"bias", false}};
  const std::vector<std::pair<std::string, nlohmann::json>> models = {{"llama", llama},
                                                                      {"falcon40", falcon40}};
  for (const auto& [arch, cfg_json] : models) {
    const cb::test::HfSpecs specs = arch == "llama"
                                        ? cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40)
                                        : cb::test::falcon_hf_tensors(true, 2, 32, 4, 2, 128, 40);
    for (const char* dtype : {"F32", "F16", "BF16"}) {
      const std::string dir = cb::test::write_checkpoint(
          "cuda_direct_" + arch + "_" + dtype, cfg_json, cb::test::random_filled(specs, dtype, 11));
      auto src = ModelSource::open(dir);
      const ModelConfig cfg = src->config();
      const auto weights = cb::model::Weights::load(*src, 0);
      for (kc::Storage st : kStorages) {
        CudaModel direct(*src, 0, {st, 0});
        CudaModel via_host(cfg, *weights, {st, 0});
        KvCache a(direct.kv_config(4, 16)), b(via_host.kv_config(4, 16));
        for (KvCache* c : {&a, &b}) {
          c->add_sequence(0);
          ASSERT_TRUE(c->reserve(0, 20));
        }
        const std::vector<SeqInput> in = {
            {0, cb::test::random_tokens(20, cfg.vocab_size, 3), true}};
        const std::vector<float> got = direct.forward(in, a);
        EXPECT_EQ(got, via_host.forward(in, b)) << arch << " " << dtype << " " << storage_name(st);
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
      }
    }
  }
}

// Forks and copy-on-write (what lm-eval scoring does: many continuations of one context): the
// cache records its block copies and the device applies them. Continuations after a fork with
// a partial block, a block-aligned fork, and a truncate-then-reserve copy-on-write give the
// CPU's logits.
TEST(CudaModel, ForksAndCopyOnWriteReachTheDevice) {
  SKIP_WITHOUT_GPU();
  auto src = ModelSource::open("preset:tiny-llama");
  const ModelConfig cfg = src->config();
  auto weights = cb::model::Weights::load(*src, 4);
  CudaModel gpu(cfg, *weights, {kc::Storage::F32, 0});
  Model cpu(cfg, std::move(weights));
  KvCache cc(cpu.kv_config(32, 16)), gc(gpu.kv_config(32, 16));
  const std::vector<int32_t> ctx = cb::test::random_tokens(37, cfg.vocab_size, 5);
  for (KvCache* c : {&cc, &gc}) {
    c->add_sequence(0);
    ASSERT_TRUE(c->reserve(0, 37));
  }
  EXPECT_LT(rel_err(gpu.forward({{0, ctx, false}}, gc), cpu.forward({{0, ctx, false}}, cc)), 1e-4);
  for (KvCache* c : {&cc, &gc}) {
    ASSERT_TRUE(c->fork(0, 1, 37));  // partial last block: copied
    ASSERT_TRUE(c->fork(0, 2, 32));  // block-aligned: shared
    c->truncate(2, 30);              // then writing slot 30 copies the shared block
    ASSERT_TRUE(c->reserve(1, 45));
    ASSERT_TRUE(c->reserve(2, 40));
    ASSERT_TRUE(c->reserve(0, 41));
  }
  const std::vector<SeqInput> next = {{1, cb::test::random_tokens(8, cfg.vocab_size, 6), true},
                                      {2, cb::test::random_tokens(10, cfg.vocab_size, 7), true},
                                      {0, cb::test::random_tokens(4, cfg.vocab_size, 8), true}};
  EXPECT_LT(rel_err(gpu.forward(next, gc), cpu.forward(next, cc)), 1e-4);
  EXPECT_TRUE(gc.take_block_copies().empty());  // applied by forward
}

// What NKVT needs of the device: read_kv (cached, rotated K and V of chosen slots, to the host)
// and restore_kv_raw (rows written as given) give what the CPU gives, and a sequence built from
// them continues with the CPU's logits.
TEST(CudaModel, ReadKvAndRawRestoreMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  auto src = ModelSource::open("preset:tiny-mistral");
  const ModelConfig cfg = src->config();
  const int64_t kvd = cfg.kv_dim();
  for (kc::Storage st : kStorages) {
    auto weights = cb::model::Weights::load(*src, 5);
    CudaModel gpu(cfg, *weights, {st, 0});
    Model cpu(cfg, std::move(weights));
    KvCache cc(cpu.kv_config(16, 16)), gc(gpu.kv_config(16, 16));
    for (KvCache* c : {&cc, &gc}) {
      c->add_sequence(0);
      ASSERT_TRUE(c->reserve(0, 37));
    }
    const std::vector<SeqInput> pre = {{0, cb::test::random_tokens(37, cfg.vocab_size, 9), false}};
    gpu.forward(pre, gc);
    cpu.forward(pre, cc);
    for (KvCache* c : {&cc, &gc}) {
      c->add_sequence(1);
      ASSERT_TRUE(c->reserve(1, 30));
      c->set_length(1, 25);
    }
    for (int l = 0; l < cfg.n_layers; ++l) {
      std::vector<float> ck(static_cast<size_t>(25 * kvd)), cv(ck.size()), gk(ck.size()),
          gv(ck.size());
      cpu.read_kv(cc, 0, l, 5, 25, ck.data(), cv.data());
      gpu.read_kv(gc, 0, l, 5, 25, gk.data(), gv.data());
      EXPECT_LT(rel_err(gk, ck), tolerance(st)) << storage_name(st) << " K layer " << l;
      EXPECT_LT(rel_err(gv, cv), tolerance(st)) << storage_name(st) << " V layer " << l;
      cpu.restore_kv_raw(cc, 1, l, 0, 25, ck.data(), cv.data());
      gpu.restore_kv_raw(gc, 1, l, 0, 25, ck.data(), cv.data());
    }
    const std::vector<SeqInput> next = {{1, cb::test::random_tokens(5, cfg.vocab_size, 10), true}};
    EXPECT_LT(rel_err(gpu.forward(next, gc), cpu.forward(next, cc)), tolerance(st))
        << storage_name(st);
    std::vector<float> k(static_cast<size_t>(kvd)), v(k.size());
    EXPECT_THROW(gpu.read_kv(gc, 0, 0, 40, 1, k.data(), v.data()), cb::Error);  // past length
  }
}

// Restore's refusals: a cache that is not bound to the device, unreserved slots, a bad layer.
TEST(CudaModel, RestoreRefusesWhatItCannotDo) {
  SKIP_WITHOUT_GPU();
  auto src = ModelSource::open("preset:tiny-llama");
  const ModelConfig cfg = src->config();
  CudaModel gpu(cfg, cb::model::PresetWeights{1}, {kc::Storage::F32, 0});
  KvCache bound(gpu.kv_config(4, 16)), other(gpu.kv_config(4, 16));
  gpu.bind_cache(bound);
  for (KvCache* c : {&bound, &other}) {
    c->add_sequence(0);
    ASSERT_TRUE(c->reserve(0, 20));
  }
  const std::vector<float> rows(static_cast<size_t>(40 * cfg.kv_dim()), 0.5f);
  EXPECT_THROW(gpu.restore_kv(other, 0, 0, 0, 10, rows.data(), rows.data()), cb::Error);
  EXPECT_THROW(gpu.restore_kv(bound, 0, 0, 20, 20, rows.data(), rows.data()), cb::Error);
  EXPECT_THROW(gpu.restore_kv(bound, 0, cfg.n_layers, 0, 10, rows.data(), rows.data()), cb::Error);
  EXPECT_NO_THROW(gpu.restore_kv(bound, 0, 0, 0, 20, rows.data(), rows.data()));
}

}  // namespace
