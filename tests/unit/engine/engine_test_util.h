#pragma once
// Helpers for the engine tests: the stories260K model, random sessions, a DRAM store (its tier
// slowed on purpose where asked), and a run that collects the served tokens.

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lib/engine/engine.h"
#include "lib/engine/policy_advisor.h"
#include "lib/model/model.h"
#include "lib/model/model_source.h"
#include "lib/store/attention_store.h"

namespace cb::engine::test_util {

/// The model keeps views into its source's mapped file: the source lives as long as the test.
inline std::unique_ptr<model::Model> stories(const std::string& path) {
  static std::unique_ptr<model::ModelSource> src;
  src = model::ModelSource::open(path);
  return model::Model::load(*src);
}

/// `n` sessions of `turns` turns with random messages of `in` tokens and answers of `out`.
inline std::vector<SessionInput> sessions(int n, int turns, int in, int out, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<SessionInput> s(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    s[i].id = static_cast<uint64_t>(100 + i);
    for (int t = 0; t < turns; ++t) {
      TurnInput ti;
      ti.output_tokens = out;
      for (int k = 0; k < in; ++k) ti.ids.push_back(3 + static_cast<int32_t>(rng() % 500));
      s[i].turns.push_back(ti);
    }
  }
  return s;
}

inline std::unique_ptr<store::AttentionStore> dram_store(double read_gbps = 0,
                                                         double write_gbps = 0) {
  store::StoreConfig c;
  c.dram_bytes = 64 << 20;
  c.chunk_bytes = 64 << 10;
  c.io_threads = 2;
  c.read_gbps[1] = read_gbps;
  c.write_gbps[1] = write_gbps;
  c.advisor = std::make_shared<PolicyAdvisor>("scheduler-aware", policy::Capacity{c.dram_bytes, 0});
  return std::make_unique<store::AttentionStore>(c);
}

inline EngineConfig config(Mode mode, int64_t ctx = 512) {
  EngineConfig c;
  c.mode = mode;
  c.ctx = ctx;
  c.sched.rate = 0;  // every session at t = 0
  c.sched.max_batch = 4;
  c.sched.max_batch_tokens = 256;
  return c;
}

using Tokens = std::map<uint64_t, std::vector<int32_t>>;

inline RunResult serve(const model::Model& m, store::AttentionStore* st, const EngineConfig& c,
                       const std::vector<SessionInput>& in, Tokens* out = nullptr) {
  Engine e(m, st, c);
  return e.run(in, {}, [&](uint64_t s, int32_t t) {
    if (out) (*out)[s].push_back(t);
  });
}

}  // namespace cb::engine::test_util
