// The serving engine on the GPU backend: CachedAttention's turns (pre-RoPE KV saved from the
// device through the write stream, restored into device blocks through the read stream) serve
// the same tokens as recomputing, and as the same engine on the CPU, on stories260K in fp32,
// with layer-wise preloading and with whole-entry loads.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lib/cuda_model/cuda_model.h"
#include "lib/engine/engine.h"
#include "lib/engine/policy_advisor.h"
#include "lib/model/model_source.h"
#include "lib/store/attention_store.h"
#include "tests/support/test_data.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::engine::Engine;
using cb::engine::EngineConfig;
using cb::engine::Mode;
using cb::engine::RunResult;
using cb::engine::SessionInput;
using Tokens = std::map<uint64_t, std::vector<int32_t>>;

std::vector<SessionInput> sessions(int n, int turns, int in, int out) {
  std::mt19937_64 rng(7);
  std::vector<SessionInput> s(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    s[static_cast<size_t>(i)].id = static_cast<uint64_t>(200 + i);
    for (int t = 0; t < turns; ++t) {
      cb::engine::TurnInput ti;
      ti.output_tokens = out;
      for (int k = 0; k < in; ++k) ti.ids.push_back(3 + static_cast<int32_t>(rng() % 500));
      s[static_cast<size_t>(i)].turns.push_back(ti);
    }
  }
  return s;
}

std::unique_ptr<cb::store::AttentionStore> dram_store() {
  cb::store::StoreConfig c;
  c.dram_bytes = 64 << 20;
  c.chunk_bytes = 64 << 10;
  c.io_threads = 2;
  c.advisor = std::make_shared<cb::engine::PolicyAdvisor>("scheduler-aware",
                                                          cb::policy::Capacity{c.dram_bytes, 0});
  return std::make_unique<cb::store::AttentionStore>(c);
}

RunResult serve(const cb::model::ForwardModel& m, Mode mode, bool preload, Tokens* out,
                bool native_entries = false) {
  EngineConfig c;
  c.native_kv_entries = native_entries;
  c.mode = mode;
  c.ctx = 512;
  c.preload = preload;
  c.sched.rate = 0;
  c.sched.max_batch = 4;
  c.sched.max_batch_tokens = 256;
  auto st = mode == Mode::RE ? nullptr : dram_store();
  Engine e(m, st.get(), c);
  RunResult r =
      e.run(sessions(3, 3, 40, 12), {}, [out](uint64_t s, int32_t t) { (*out)[s].push_back(t); });
  e.drain_saves();
  return r;
}

TEST(CudaEngine, CachedAttentionOnTheGpuServesWhatRecomputeAndTheCpuServe) {
  SKIP_WITHOUT_GPU();
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = cb::model::ModelSource::open(path);
  const auto cpu = cb::model::Model::load(*src);
  auto weights = cb::model::Weights::load(*src, 0);
  cb::model::CudaModel gpu(src->config(), *weights, {kc::Storage::F32, 0});
  Tokens on_cpu, re;
  serve(*cpu, Mode::CA, true, &on_cpu);
  serve(gpu, Mode::RE, true, &re);
  for (bool preload : {true, false}) {
    Tokens ca;
    const RunResult r = serve(gpu, Mode::CA, preload, &ca);
    EXPECT_EQ(ca, re) << "preload " << preload;
    EXPECT_EQ(ca, on_cpu) << "preload " << preload;
    ASSERT_EQ(r.records.size(), 9u);
    for (const auto& rec : r.records) {
      if (rec.turn == 0) continue;
      EXPECT_EQ(rec.tier, "dram") << "session " << rec.session << " turn " << rec.turn;
      EXPECT_EQ(rec.reused_tokens, rec.history_tokens);
    }
    EXPECT_EQ(r.load_failures + r.save_failures, 0);
  }
}

// --kv-entries native on fp16 and bf16 storage: entries hold the device's own rows (half the
// bytes) and go back without conversion. fp32 entries of such KV are exact widenings of the
// same rows, so both serve exactly the same tokens, from the same tiers.
TEST(CudaEngine, NativeEntriesServeWhatFp32EntriesServeWithHalfTheBytes) {
  SKIP_WITHOUT_GPU();
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = cb::model::ModelSource::open(path);
  for (kc::Storage st : {kc::Storage::F16, kc::Storage::BF16}) {
    auto weights = cb::model::Weights::load(*src, 0);
    cb::model::CudaModel gpu(src->config(), *weights, {st, 0});
    for (bool preload : {true, false}) {
      Tokens wide, native;
      const RunResult w = serve(gpu, Mode::CA, preload, &wide);
      const RunResult n = serve(gpu, Mode::CA, preload, &native, /*native_entries=*/true);
      const std::string what =
          std::string(kc::storage_name(st)) + " preload " + std::to_string(preload);
      EXPECT_EQ(native, wide) << what;
      ASSERT_EQ(n.records.size(), w.records.size());
      for (size_t i = 0; i < n.records.size(); ++i) {
        EXPECT_EQ(n.records[i].tier, w.records[i].tier) << what;
        EXPECT_EQ(n.records[i].bytes_loaded * 2, w.records[i].bytes_loaded) << what;
        if (n.records[i].turn > 0) {
          EXPECT_EQ(n.records[i].tier, "dram") << what;
        }
      }
      EXPECT_EQ(n.load_failures + n.save_failures, 0) << what;
    }
  }
}

}  // namespace
