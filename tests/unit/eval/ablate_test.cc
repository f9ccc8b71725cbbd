// Ablation studies: the real-mode DRAM tier sized to a study's trace (ablation_dram_bytes). The
// studies themselves run in tests/cli/ablate_test.sh (every CA turn of the real
// recompute-vs-ca study a hit, which a tier too small for its entries would fail).
#include "eval/ablate.h"

#include <gtest/gtest.h>

namespace cb::eval {
namespace {

datasets::Trace trace_of(const std::vector<std::vector<std::pair<int64_t, int64_t>>>& sessions) {
  datasets::Trace t;
  t.kind = "lengths";
  for (const auto& turns : sessions) {
    datasets::TraceSession s;
    s.id = t.sessions.size();
    for (const auto& [in, out] : turns) {
      datasets::TraceTurn tt;
      tt.input_tokens = in;
      tt.output_tokens = out;
      s.turns.push_back(tt);
    }
    t.sessions.push_back(s);
  }
  return t;
}

constexpr uint64_t kMiB = 1ull << 20;
constexpr size_t kAll = static_cast<size_t>(-1);

TEST(AblationDram, HoldsEveryEntryOfA7bStudyInWholeChunks) {
  // recompute-vs-ca's trace at 900/100 for 16 sessions, LLaMA-7B's fp32 entries: 32 layers,
  // rows of 4096 floats (16 KiB, 64 rows a 1 MiB chunk), 1001 tokens a session.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> s(16, {{900, 1}, {99, 1}});
  const uint64_t row = 4096 * 4, tokens = 1001;
  const uint64_t need = ablation_dram_bytes(trace_of(s), kAll, 4096, 0, 32, row, kMiB);
  // Every session's K and V rows of every layer, rounded up to whole chunks per layer's K and
  // per layer's V, with room for one more chunk each (an append save's new tail).
  const uint64_t per_stream = (tokens * row + kMiB - 1) / kMiB + 1;
  EXPECT_GE(need, 16 * 2 * 32 * per_stream * kMiB);
  EXPECT_GE(need, 16 * tokens * 2 * 32 * row);
  // The fixed 256 MiB tier it replaces held none of them (1 GiB a session).
  EXPECT_GT(2 * 32 * tokens * row, 256 * kMiB);
  // Not much more than that: at most two chunks a stream beyond the rows themselves.
  EXPECT_LE(need, 16 * 2 * 32 * (tokens * row / kMiB + 2) * kMiB + 2 * 32 * kMiB);
}

TEST(AblationDram, GrowsWithSessionsTokensLayersAndRowBytes) {
  const auto t1 = trace_of({{{500, 1}, {499, 1}}});
  const auto t2 = trace_of({{{500, 1}, {499, 1}}, {{500, 1}, {499, 1}}});
  const auto longer = trace_of({{{1500, 1}, {499, 1}}});
  const uint64_t base = ablation_dram_bytes(t1, kAll, 0, 0, 32, 16384, kMiB);
  EXPECT_GT(ablation_dram_bytes(t2, kAll, 0, 0, 32, 16384, kMiB), base);
  EXPECT_GT(ablation_dram_bytes(longer, kAll, 0, 0, 32, 16384, kMiB), base);
  EXPECT_GT(ablation_dram_bytes(t1, kAll, 0, 0, 40, 16384, kMiB), base);
  EXPECT_GT(ablation_dram_bytes(t1, kAll, 0, 0, 32, 32768, kMiB), base);
  // Native fp16 entries (half the row bytes) need less.
  EXPECT_LT(ablation_dram_bytes(t1, kAll, 0, 0, 32, 8192, kMiB), base);
}

TEST(AblationDram, ResidentKeepsTheLargestSessionsOnly) {
  const auto t = trace_of({{{100, 1}}, {{3000, 1}}, {{200, 1}}});
  const auto largest = trace_of({{{3000, 1}}});
  EXPECT_EQ(ablation_dram_bytes(t, 1, 0, 0, 8, 4096, kMiB),
            ablation_dram_bytes(largest, kAll, 0, 0, 8, 4096, kMiB));
  EXPECT_LT(ablation_dram_bytes(t, 2, 0, 0, 8, 4096, kMiB),
            ablation_dram_bytes(t, 3, 0, 0, 8, 4096, kMiB));
  EXPECT_EQ(ablation_dram_bytes(t, 3, 0, 0, 8, 4096, kMiB),
            ablation_dram_bytes(t, kAll, 0, 0, 8, 4096, kMiB));
}

TEST(AblationDram, EntriesAreCappedByTheWindowAndTheAnswerCap) {
  const auto t = trace_of({{{4000, 1}, {4000, 2000}}});
  const auto within = trace_of({{{1024, 0}}});
  EXPECT_EQ(ablation_dram_bytes(t, kAll, 1024, 0, 4, 4096, kMiB),
            ablation_dram_bytes(within, kAll, 0, 0, 4, 4096, kMiB));
  const auto capped = trace_of({{{4000, 1}, {4000, 16}}});
  EXPECT_EQ(ablation_dram_bytes(t, kAll, 0, 16, 4, 4096, kMiB),
            ablation_dram_bytes(capped, kAll, 0, 0, 4, 4096, kMiB));
}

TEST(AblationDram, AnEmptyTraceStillGetsATier) {
  const datasets::Trace none;
  EXPECT_GE(ablation_dram_bytes(none, kAll, 0, 0, 4, 4096, kMiB), 8 * kMiB);
}

}  // namespace
}  // namespace cb::eval
