// CudaModel's kernel paths at the real 7B shapes and the paths that change no arithmetic: the
// tensor-core prefill attention in a whole model, the decode attention kernel (and its finer
// splits), the launch fusions with the exact defaults and with PDL chains, against the CPU
// forward; and the L2 prefetch and the deep GEMVs, bit for bit against the defaults. GPU only:
// each skips with a reason without one.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/attention.h"
#include "lib/cuda_model/cuda_model.h"
#include "lib/model/model_source.h"
#include "tests/support/random_tokens.h"
#include "tests/support/test_data.h"
#include "tests/unit/cuda/cuda_model_test_util.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::configure;
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

// The tensor-core attention kernels (wmma, then the FlashAttention-2-style one) inside a whole
// model: one layer of mistral-7b (head_dim 128, GQA 4,
// bf16) and of falcon-7b (head_dim 64, MQA, f16), a batch of two prefills large enough for the
// 64-row tiles, then a second chunk over a paged prefix; logits against the CPU forward.
TEST(CudaModel, TensorCoreAttentionInAWholeModelMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [name, st] :
       {std::pair<const char*, kc::Storage>{"preset:mistral-7b", kc::Storage::BF16},
        {"preset:falcon-7b", kc::Storage::F16}}) {
    auto src = ModelSource::open(name);
    ModelConfig cfg = src->config();
    cfg.n_layers = 1;
    auto weights = cb::model::Weights::load(*src, cfg, 2);
    CudaModel gpu(cfg, *weights, {st, 0});
    Model cpu(cfg, std::move(weights));
    ASSERT_TRUE(kc::attention_uses_mma(st, cfg.head_dim, 140, 2));
    for (bool fa2 : {false, true}) {  // the wmma kernel, then the FlashAttention-2-style one
      const std::string what = std::string(name) + (fa2 ? " fa2" : " wmma");
      cb::model::CudaKernelPaths paths;
      paths.prefill_fa2 = fa2;
      gpu.set_kernel_paths(paths);
      KvCache cc(cpu.kv_config(16, 16)), gc(gpu.kv_config(16, 16));
      for (KvCache* c : {&cc, &gc}) {
        c->add_sequence(0);
        c->add_sequence(1);
        ASSERT_TRUE(c->reserve(0, 164));
        ASSERT_TRUE(c->reserve(1, 40));
      }
      const std::vector<SeqInput> pre = {{0, cb::test::random_tokens(100, cfg.vocab_size, 1), true},
                                         {1, cb::test::random_tokens(40, cfg.vocab_size, 2), true}};
      EXPECT_LT(rel_err(gpu.forward(pre, gc), cpu.forward(pre, cc)), tolerance(st)) << what;
      const std::vector<SeqInput> more = {
          {0, cb::test::random_tokens(64, cfg.vocab_size, 3), true}};
      EXPECT_LT(rel_err(gpu.forward(more, gc), cpu.forward(more, cc)), tolerance(st)) << what;
    }
  }
}

// Two layers of a 7B preset (the real shapes) with `variant`'s paths: two sequences prefilled
// (300 and 9 tokens), then batched decode steps whose keys split over blocks, logits against
// the CPU forward.
void check_two_layers(const char* name, kc::Storage st, Variant variant) {
  auto src = ModelSource::open(name);
  ModelConfig cfg = src->config();
  cfg.n_layers = 2;
  auto weights = cb::model::Weights::load(*src, cfg, 2);
  CudaModel gpu(cfg, *weights, {st, 0});
  Model cpu(cfg, std::move(weights));
  configure(gpu, variant);
  const std::string what = std::string(name) + " " + storage_name(st) + variant_name(variant);
  KvCache cc(cpu.kv_config(24, 16)), gc(gpu.kv_config(24, 16));  // 384 slots
  for (KvCache* c : {&cc, &gc}) {
    c->add_sequence(0);
    c->add_sequence(1);
    ASSERT_TRUE(c->reserve(0, 310));
    ASSERT_TRUE(c->reserve(1, 20));
  }
  // 300 tokens of history: the decode steps split their keys (and merge them in the kernel).
  const std::vector<SeqInput> pre = {{0, cb::test::random_tokens(300, cfg.vocab_size, 1), false},
                                     {1, cb::test::random_tokens(9, cfg.vocab_size, 2), false}};
  EXPECT_LT(rel_err(gpu.forward(pre, gc), cpu.forward(pre, cc)), tolerance(st)) << what;
  for (int step = 0; step < 6; ++step) {
    const std::vector<SeqInput> dec = {
        {0, {static_cast<int32_t>((step * 7 + 3) % cfg.vocab_size)}, false},
        {1, {static_cast<int32_t>((step * 11 + 5) % cfg.vocab_size)}, false}};
    EXPECT_LT(rel_err(gpu.forward(dec, gc), cpu.forward(dec, cc)), tolerance(st))
        << what << " step " << step;
  }
}

const std::pair<const char*, kc::Storage> kSevenB[] = {{"preset:llama-2-7b", kc::Storage::F32},
                                                       {"preset:llama-2-7b", kc::Storage::F16},
                                                       {"preset:mistral-7b", kc::Storage::BF16},
                                                       {"preset:falcon-7b", kc::Storage::F16}};

// The decode attention kernel alone (the other fused paths off) inside a whole model, the split
// counters reused from one layer's launch to the next: llama-2-7b (head_dim 128, fp32 and f16),
// mistral-7b (GQA 4, bf16) and falcon-7b (head_dim 64, MQA, f16, rotate-half RoPE); and the
// defaults with the finer splits (decode_more_splits) or with RoPE and the append folded into
// the decode kernel (decode_rope_fusion), alone and with PDL-launched GEMVs after it.
TEST(CudaModel, DecodeAttentionKernelInAWholeModelMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [name, st] : kSevenB) {
    check_two_layers(name, st, Variant::kDecodeKernel);
    check_two_layers(name, st, Variant::kMoreSplits);  // 9 splits of the 300-token history
    check_two_layers(name, st, Variant::kRopeInAttention);
    check_two_layers(name, st, Variant::kRopeInAttentionPdl);
  }
}

// The launch fusions at 7B shapes (gate|up of 2 x 11,008 rows; the GEMV with its SwiGLU at
// batch 2, a GEMM over the fused matrix in prefill), the defaults, and the defaults with PDL:
// the longest chains of PDL-launched GEMVs (the norm+gate+up GEMV, the down GEMV, the next
// layer's norm+QKV GEMV) pass x from one to the next.
TEST(CudaModel, LaunchFusionsAtSevenBShapesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [name, st] : kSevenB) {
    check_two_layers(name, st, Variant::kLaunchFusions);
    check_two_layers(name, st, Variant::kDefault);
    check_two_layers(name, st, Variant::kEverything);  // bench gpu's `pdl`: PDL chains
  }
}

// CudaKernelPaths::decode_l2_prefetch only asks L2 for weights, and decode_gemv_deep only
// changes the GEMVs' launch bounds (the same operations in the same order): decode's logits are
// the defaults' bit for bit, at batch 2 and 1, alone, with PDL-launched GEMVs (which change no
// arithmetic either), and without RMSNorm in the GEMVs against that alone, in every family's
// decode path: a tiny LLaMA and Mistral (the output projection fetched), a tiny Falcon (its
// MLP up projection, which its parallel block runs first), stories260K, and two layers of
// llama-2-7b (a prefix of each row: its output projection is larger than half the L2).
void check_same_bits(const std::string& arg, kc::Storage st, int layers,
                     bool cb::model::CudaKernelPaths::*option) {
  auto src = ModelSource::open(arg);
  ModelConfig cfg = src->config();
  if (layers > 0) cfg.n_layers = layers;
  auto weights = cb::model::Weights::load(*src, cfg, 2);
  const int V = static_cast<int>(cfg.vocab_size);
  const std::vector<SeqInput> pre = {{0, cb::test::random_tokens(20, V, 1), false},
                                     {1, cb::test::random_tokens(9, V, 2), false}};
  std::vector<std::vector<SeqInput>> steps;
  for (int step = 0; step < 4; ++step) {
    steps.push_back({{0, {(step * 7 + 3) % V}, false}});
    if (step < 2) steps.back().push_back({1, {(step * 11 + 5) % V}, false});  // batch 2, then 1
  }
  const auto run = [&](const cb::model::CudaKernelPaths& paths) {
    CudaModel m(cfg, *weights, {st, 0});
    const cb::model::CudaKernelPaths set = m.set_kernel_paths(paths);
    EXPECT_EQ(set.*option, paths.*option);
    KvCache c(m.kv_config(8, 16));
    c.add_sequence(0);
    c.add_sequence(1);
    EXPECT_TRUE(c.reserve(0, 40));
    EXPECT_TRUE(c.reserve(1, 40));
    std::vector<std::vector<float>> logits = {m.forward(pre, c)};
    for (const auto& dec : steps) logits.push_back(m.forward(dec, c));
    return logits;
  };
  for (bool fused : {true, false}) {
    cb::model::CudaKernelPaths base;
    base.decode_fusion = fused;
    const std::vector<std::vector<float>> want = run(base);
    for (bool pdl : {false, true}) {
      if (!fused && pdl) continue;
      cb::model::CudaKernelPaths paths = base;
      paths.*option = true;
      paths.decode_pdl = pdl;
      const std::vector<std::vector<float>> got = run(paths);
      const std::string what =
          arg + " " + storage_name(st) + (fused ? "" : " unfused norm") + (pdl ? " pdl" : "");
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i], want[i]) << what << " call " << i;
      }
    }
  }
}

void check_same_bits_everywhere(bool cb::model::CudaKernelPaths::*option) {
  for (kc::Storage st : {kc::Storage::F16, kc::Storage::BF16}) {
    for (const char* m : {"preset:tiny-llama", "preset:tiny-mistral", "preset:tiny-falcon-7b"}) {
      check_same_bits(m, st, 0, option);
    }
    if (const std::string path = cb::test::data_path("models/stories260K/stories260K.gguf");
        cb::test::file_exists(path)) {  // with the shared data
      check_same_bits(path, st, 0, option);
    }
  }
  check_same_bits("preset:llama-2-7b", kc::Storage::F16, 2, option);
}

TEST(CudaModel, L2PrefetchChangesNoDecodeLogit) {
  SKIP_WITHOUT_GPU();
  check_same_bits_everywhere(&cb::model::CudaKernelPaths::decode_l2_prefetch);
}

TEST(CudaModel, DeepGemvsChangeNoDecodeLogit) {
  SKIP_WITHOUT_GPU();
  check_same_bits_everywhere(&cb::model::CudaKernelPaths::decode_gemv_deep);
}

}  // namespace
