// Sim vs real (docs/sim.md): the same trace replayed on the CPU backend and in sim mode
// with a profile calibrated on this machine a moment before gives the same per-turn
// hit/miss sequence and TTFT within 15% (mean and p90).
#include <gtest/gtest.h>

#include <map>

#include "datasets/trace_synth.h"
#include "eval/calibrate.h"
#include "eval/sim_replay.h"
#include "lib/model/model_source.h"
#include "tests/support/test_data.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CB_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CB_SANITIZED 1
#endif
#endif

namespace cb::eval {
namespace {

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
  const Calibration cal = calibrate_cpu(*m, co);
  datasets::SynthOptions so;
  so.sessions = 16;
  so.seed = 3;
  const datasets::Trace trace = datasets::synth_trace(so);
  ReplayOptions o;
  o.engine.sched.rate = 0;
  o.store.dram_bytes = 1ull << 30;
  o.store.policy = "lru";
  const auto real_sessions = trace_sessions(trace, m->config().vocab_size, 0, 48);
  const ReplayRun real = run_replay(*m, real_sessions, engine::Mode::CA, o);
  SimOptions sim;
  sim.profile = cal.profile;
  const ReplayRun s =
      run_sim_replay(m->config(), sim_sessions(trace, 48), engine::Mode::CA, o, sim);
  EXPECT_EQ(s.summary["execution"], "sim");
  std::map<std::pair<uint64_t, int>, std::string> tiers;
  for (const auto& r : real.result.records) tiers[{r.session, r.turn}] = r.tier;
  ASSERT_EQ(s.result.records.size(), real.result.records.size());
  int hits = 0;
  for (const auto& r : s.result.records) {
    EXPECT_EQ(r.tier, tiers.at({r.session, r.turn}))
        << "session " << r.session << " turn " << r.turn;
    hits += r.tier == "dram";
  }
  EXPECT_GT(hits, 0);
  for (const char* k : {"mean", "p90"}) {
    const double a = real.summary["ttft_ms"][k].get<double>();
    const double b = s.summary["ttft_ms"][k].get<double>();
    EXPECT_NEAR(b / a, 1.0, 0.15) << "TTFT " << k << ": real " << a << " ms, sim " << b << " ms";
  }
}

}  // namespace
}  // namespace cb::eval
