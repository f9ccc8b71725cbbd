// Sim vs real (docs/sim.md): the same trace replayed on the CPU backend and in sim mode
// with a profile calibrated on this machine a moment before gives the same per-turn
// hit/miss sequence and TTFT within 15% (mean and p90).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "datasets/trace_synth.h"
#include "eval/calibrate.h"
#include "eval/sim_replay.h"
#include "lib/core/sysinfo.h"
#include "lib/metrics/stats.h"
#include "lib/model/model_source.h"
#include "lib/sim/profile.h"
#include "tests/support/test_data.h"
#include "tests/unit/sim/calibrate_retry.h"

namespace cb::eval {
namespace {

// Sim replays here check every indexed eviction decision against the advisor's ranking of all
// candidates (eval/sim_replay.cc reads it).
[[maybe_unused]] const int kVerifySimEnv = setenv("CACHEBENCH_SIM_VERIFY", "1", 1);

// The validation trace: 16 synthetic conversations (74 turns).
datasets::Trace validation_trace() {
  datasets::SynthOptions so;
  so.sessions = 16;
  so.seed = 3;
  return datasets::synth_trace(so);
}

// Closed-loop arrivals (each next turn right after its answer), LRU over `dram_bytes`.
ReplayOptions closed_loop_lru(uint64_t dram_bytes) {
  ReplayOptions o;
  o.engine.sched.rate = 0;
  o.store.dram_bytes = dram_bytes;
  o.store.policy = "lru";
  return o;
}

using Tiers = std::map<std::pair<uint64_t, int>, std::string>;

// Each turn's tier ("dram", "miss", ...) by (session, turn).
Tiers tiers_by_turn(const ReplayRun& r) {
  Tiers t;
  for (const auto& rec : r.result.records) t[{rec.session, rec.turn}] = rec.tier;
  return t;
}

TEST(SimValidation, CalibratedSimMatchesTheCpuBackend) {
#ifdef CB_SANITIZED
  GTEST_SKIP() << "timing agreement is checked in the optimized build (sanitizers distort it)";
#endif
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = model::ModelSource::open(path);
  auto m = model::Model::load(*src);
  CalibrateOptions co;
  co.ssd_dir = "";
  co.reps = 3;
  const datasets::Trace trace = validation_trace();
  const ReplayOptions o = closed_loop_lru(256ull << 20);  // every entry fits: no eviction
  const auto real_sessions = trace_sessions(trace, m->config().vocab_size, 0, 48);
  // This machine is a virtual one on shared hosts: its hypervisor at times gives other guests
  // half of its CPU time or more ("steal": a replay took 14 s of wall clock for 7 s of CPU),
  // and its speed drifts from one minute to the next. Each round brackets the real replay
  // between two calibrations and compares it with the mean of the two sims. Each part computes
  // on this thread without waiting for anything else (with OPENBLAS_NUM_THREADS=1, as
  // `make test` runs it: checked below), so a round counts for timing only when this thread had
  // a CPU for at least 90% of each part's wall clock. A busy host also slows work in ways the
  // thread's CPU time does not show (shared caches, memory bandwidth), and only ever slows it:
  // as a calibration takes medians of interleaved passes, a round replays real twice and takes
  // the faster of the two that had the CPU. The median ratio over up to five such rounds must
  // lie within 15%. Every replay's tiers are checked.
  constexpr double kOnCpu = 0.90;
  constexpr int kRounds = 5, kMinRounds = 3, kMaxTries = 8;
  std::vector<double> mean_ratio, p90_ratio;
  std::string rounds;
  int tries = 0;
  const auto counted = [&] { return static_cast<int>(mean_ratio.size()); };
  // Up to kMaxTries rounds for kRounds counted ones, stopping once kMinRounds are out of reach.
  for (; tries < kMaxTries && counted() < kRounds && counted() + (kMaxTries - tries) >= kMinRounds;
       ++tries) {
    double on_cpu[4];  // this thread's CPU time over the wall clock, per part
    const auto timed = [&on_cpu](int part, const auto& fn) {
      const double cpu0 = thread_cpu_seconds();
      const auto wall0 = std::chrono::steady_clock::now();
      auto r = fn();
      const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall0;
      on_cpu[part] = (thread_cpu_seconds() - cpu0) / std::max(wall.count(), 1e-9);
      return r;
    };
    SimOptions before, after;
    before.profile = timed(0, [&] { return test_util::calibrate_retried(*m, co).profile; });
    const ReplayRun real_a =
        timed(1, [&] { return run_replay(*m, real_sessions, engine::Mode::CA, o); });
    const ReplayRun real_b =
        timed(3, [&] { return run_replay(*m, real_sessions, engine::Mode::CA, o); });
    after.profile = timed(2, [&] { return test_util::calibrate_retried(*m, co).profile; });
    const auto mean_ttft = [](const ReplayRun& r) {
      return r.summary["ttft_ms"]["mean"].get<double>();
    };
    // The faster of the two real replays that had the CPU (the first when neither had).
    const bool b_counts = on_cpu[3] >= kOnCpu;
    const bool take_b = b_counts && (on_cpu[1] < kOnCpu || mean_ttft(real_b) < mean_ttft(real_a));
    const ReplayRun& real = take_b ? real_b : real_a;
    if (take_b) on_cpu[1] = on_cpu[3];
    EXPECT_EQ(tiers_by_turn(real_a), tiers_by_turn(real_b));  // the same turns hit, run to run
    const ReplayRun sa =
        run_sim_replay(m->config(), sim_sessions(trace, 48), engine::Mode::CA, o, before);
    const ReplayRun s =
        run_sim_replay(m->config(), sim_sessions(trace, 48), engine::Mode::CA, o, after);
    EXPECT_EQ(s.summary["execution"], "sim");
    const Tiers tiers = tiers_by_turn(real);
    ASSERT_EQ(s.result.records.size(), real.result.records.size());
    int hits = 0;
    for (const auto& r : s.result.records) {
      EXPECT_EQ(r.tier, tiers.at({r.session, r.turn}))
          << "session " << r.session << " turn " << r.turn;
      hits += r.tier == "dram";
    }
    EXPECT_GT(hits, 0);
    for (size_t i = 0; i < sa.result.records.size(); ++i) {
      EXPECT_EQ(sa.result.records[i].tier, s.result.records[i].tier);
    }
    const auto ttft = [](const ReplayRun& r, const char* k) {
      return r.summary["ttft_ms"][k].get<double>();
    };
    const auto sim_ttft = [&](const char* k) { return 0.5 * (ttft(sa, k) + ttft(s, k)); };
    const bool quiet = std::min({on_cpu[0], on_cpu[1], on_cpu[2]}) >= kOnCpu;
    if (quiet) {
      mean_ratio.push_back(sim_ttft("mean") / ttft(real, "mean"));
      p90_ratio.push_back(sim_ttft("p90") / ttft(real, "p90"));
    }
    char cpu_pct[64];
    std::snprintf(cpu_pct, sizeof cpu_pct, "on a CPU %.0f%% / %.0f%% / %.0f%%", 100 * on_cpu[0],
                  100 * on_cpu[1], 100 * on_cpu[2]);
    rounds += std::string(" [") + (quiet ? "" : "not counted: ") + cpu_pct + ", real " +
              std::to_string(ttft(real, "mean")) + " / " + std::to_string(ttft(real, "p90")) +
              " ms (the " + (take_b ? "second" : "first") + " of two, means " +
              std::to_string(mean_ttft(real_a)) + " and " + std::to_string(mean_ttft(real_b)) +
              " ms; " + std::to_string(static_cast<int>(100 * on_cpu[3])) +
              "% on a CPU in the second), sim before " + std::to_string(ttft(sa, "mean")) + " / " +
              std::to_string(ttft(sa, "p90")) + " ms, after " + std::to_string(ttft(s, "mean")) +
              " / " + std::to_string(ttft(s, "p90")) + " ms]";
  }
  std::printf("sim/real TTFT rounds (mean / p90):%s\n", rounds.c_str());
  // With BLAS threads beside it this thread's CPU share says nothing of theirs.
  const char* blas = std::getenv("OPENBLAS_NUM_THREADS");
  if (blas == nullptr || std::string(blas) != "1") {
    GTEST_SKIP() << "TTFT agreement not judged: run with OPENBLAS_NUM_THREADS=1 (as `make test` "
                    "does), so that the shares of the CPU above are the computing's own; the "
                    "hit/miss sequences were checked in every round";
  }
  if (counted() < kMinRounds) {
    GTEST_SKIP() << "TTFT agreement not judged: this thread had a CPU for less than "
                 << 100 * kOnCpu << "% of the wall clock in " << tries - counted() << " of "
                 << tries << " rounds (the hypervisor gave it to other guests, or other"
                 << " processes ran); the hit/miss sequences were checked in every round."
                 << " Rounds (calibration / real / calibration):" << rounds;
  }
  EXPECT_NEAR(metrics::median(mean_ratio), 1.0, 0.15)
      << "TTFT mean (sim / real), rounds:" << rounds;
  EXPECT_NEAR(metrics::median(p90_ratio), 1.0, 0.15) << "TTFT p90 (sim / real), rounds:" << rounds;
}

// Under heavy eviction (LRU, 1 MiB of DRAM in 16 KiB chunks: about a third of the turns hit),
// closed-loop arrivals: the store's decisions depend only on the order of its operations, so
// real and sim agree on every turn's tier whatever the timing, and so do repeated real runs.
// (It holds because a save that must evict lets the saves in flight land first: without that,
// three runs had 14 to 25 mismatched turns.)
struct Agreement {
  uint64_t hbm_bytes = 0, dram_bytes = 0;
  uint64_t sessions = 16, seed = 3;  // the validation trace
  int64_t max_output_tokens = 48;
  int64_t truncate_align = -1;  // auto: whole chunks
};
void expect_real_and_sim_agree(const Agreement& a);

TEST(SimValidation, UnderEvictionPressureRealAndSimAgreeOnEveryTurn) {
  Agreement a;
  a.dram_bytes = 1ull << 20;
  expect_real_and_sim_agree(a);
}

// The same with an HBM tier over DRAM, saves demoting HBM's victims themselves. With demotion
// ahead of need (replay's default with --hbm) real runs differ among themselves: lib/store makes
// a background demotion's room in DRAM when its write pool gets to it, so which DRAM entries go
// depends on the lookups made meanwhile, where SimStore decides when it plans (docs/sim.md).
TEST(SimValidation, WithHbmOverDramRealAndSimAgreeOnEveryTurn) {
  Agreement a;
  a.hbm_bytes = a.dram_bytes = 512ull << 10;
  expect_real_and_sim_agree(a);
}

// HBM over a DRAM that is full when HBM's victims come down, with exact truncation: a victim's
// demotion makes its room in DRAM once the saves in flight to DRAM have landed, in both stores.
// Until 2026-12-07 it did not wait for them: the sim, whose saves land later on its clock, differed
// on 13 of these 90 turns (and failed 13 saves, not 10), while real runs agreed with each other
// only because the write pool had landed those saves.
TEST(SimValidation, WithHbmOverAFullDramRealAndSimAgreeOnEveryTurn) {
  Agreement a;
  a.hbm_bytes = a.dram_bytes = 1ull << 20;
  a.sessions = 20;
  a.seed = 7;
  a.max_output_tokens = 8;
  a.truncate_align = 1;
  expect_real_and_sim_agree(a);
}

void expect_real_and_sim_agree(const Agreement& a) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = model::ModelSource::open(path);
  auto m = model::Model::load(*src);
  datasets::SynthOptions so;
  so.sessions = a.sessions;
  so.seed = a.seed;
  const datasets::Trace trace = datasets::synth_trace(so);
  ReplayOptions o = closed_loop_lru(a.dram_bytes);
  o.store.hbm_bytes = a.hbm_bytes;
  o.store.demote_ahead_bytes = 0;
  o.engine.ctx = 512;
  o.engine.truncate_align = a.truncate_align;
  o.store.chunk_bytes = 16ull << 10;
  SimOptions so_sim;
  so_sim.profile = sim::builtin_profile("a100-80gb");  // its timing is irrelevant here,
  so_sim.profile.hbm_bytes = 0;             // but the KV pool is the engine's, as in real mode,
  so_sim.profile.kv_bytes_per_element = 4;  // and entries are fp32, as the CPU backend saves
  const auto real_sessions = trace_sessions(trace, m->config().vocab_size, 0, a.max_output_tokens);
  const ReplayRun real_run = run_replay(*m, real_sessions, engine::Mode::CA, o);
  const ReplayRun sim_run = run_sim_replay(m->config(), sim_sessions(trace, a.max_output_tokens),
                                           engine::Mode::CA, o, so_sim);
  const ReplayRun real_run2 = run_replay(*m, real_sessions, engine::Mode::CA, o);
  const Tiers real1 = tiers_by_turn(real_run);
  const Tiers real2 = tiers_by_turn(real_run2);
  const Tiers sim = tiers_by_turn(sim_run);
  ASSERT_EQ(real1.size(), sim.size());
  int hits = 0, misses = 0;
  for (const auto& [key, tier] : real1) {
    EXPECT_EQ(sim.at(key), tier) << "sim, session " << key.first << " turn " << key.second;
    EXPECT_EQ(real2.at(key), tier) << "real, session " << key.first << " turn " << key.second;
    hits += tier != "miss";
    misses += tier == "miss";
  }
  EXPECT_GT(hits, 0);
  EXPECT_GT(misses, 0) << "the store is small enough to evict";
  // Saves that find no room (the entries of the jobs waiting pinned): the same ones.
  EXPECT_GT(real_run.result.save_failures, 0);
  EXPECT_EQ(sim_run.result.save_failures, real_run.result.save_failures);
  EXPECT_EQ(real_run2.result.save_failures, real_run.result.save_failures);
  // Both append the same turns' saves (128 tokens per chunk): the bytes each turn wrote agree.
  std::map<std::pair<uint64_t, int>, uint64_t> sim_saved;
  for (const auto& rec : sim_run.result.records)
    sim_saved[{rec.session, rec.turn}] = rec.bytes_saved;
  int appended = 0;
  for (const auto& rec : real_run.result.records) {
    EXPECT_EQ(sim_saved.at({rec.session, rec.turn}), rec.bytes_saved)
        << "session " << rec.session << " turn " << rec.turn;
    const int64_t context = rec.history_tokens + rec.new_tokens + rec.output_tokens - 1;
    appended += rec.bytes_saved < static_cast<uint64_t>(context) * 2 * 128 * 5;
  }
  EXPECT_GT(appended, 0) << "no turn's save appended to its entry";
}

}  // namespace
}  // namespace cb::eval
