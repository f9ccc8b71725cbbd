// Ablation studies: the real-mode DRAM tier sized to a study's sessions (ablation_dram_bytes);
// sim mode's tiers from the profile.
// The studies themselves run in tests/cli/ablate_test.sh (every CA turn of the real
// recompute-vs-ca study a hit, which a tier too small for its entries would fail).
#include "eval/ablate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "datasets/trace_synth.h"
#include "eval/replay.h"
#include "lib/model/presets.h"
#include "lib/sim/profile.h"

namespace cb::eval {
namespace {

using Turns = std::vector<std::pair<int64_t, int64_t>>;  // (message tokens, answer tokens)

std::vector<engine::SessionInput> sessions_of(const std::vector<Turns>& sessions) {
  std::vector<engine::SessionInput> out;
  for (const Turns& turns : sessions) {
    engine::SessionInput s;
    s.id = out.size();
    for (const auto& [in, answer] : turns) {
      engine::TurnInput t;
      t.ids.assign(static_cast<size_t>(in), 5);
      t.output_tokens = answer;
      s.turns.push_back(t);
    }
    out.push_back(s);
  }
  return out;
}

constexpr uint64_t kMiB = 1ull << 20;

TEST(AblationDram, HoldsEveryEntryOfA7bStudyInWholeChunks) {
  // recompute-vs-ca's sessions at 900/100 for 16 sessions, LLaMA-7B's fp32 entries: 32
  // layers, rows of 4096 floats (16 KiB, 64 rows a 1 MiB chunk), 1001 tokens a session.
  const auto s = sessions_of(std::vector<Turns>(16, {{900, 1}, {99, 1}}));
  const uint64_t row = 4096 * 4, tokens = 1001;
  const uint64_t need = ablation_dram_bytes(s, 4096, 32, row, kMiB);
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
  const auto one = sessions_of({{{500, 1}, {499, 1}}});
  const auto two = sessions_of({{{500, 1}, {499, 1}}, {{500, 1}, {499, 1}}});
  const auto longer = sessions_of({{{1500, 1}, {499, 1}}});
  const uint64_t base = ablation_dram_bytes(one, 0, 32, 16384, kMiB);
  EXPECT_GT(ablation_dram_bytes(two, 0, 32, 16384, kMiB), base);
  EXPECT_GT(ablation_dram_bytes(longer, 0, 32, 16384, kMiB), base);
  EXPECT_GT(ablation_dram_bytes(one, 0, 40, 16384, kMiB), base);
  EXPECT_GT(ablation_dram_bytes(one, 0, 32, 32768, kMiB), base);
  // Native fp16 entries (half the row bytes) need less.
  EXPECT_LT(ablation_dram_bytes(one, 0, 32, 8192, kMiB), base);
}

TEST(AblationDram, EntriesAreCappedByTheWindow) {
  const auto s = sessions_of({{{4000, 1}, {4000, 2000}}});
  const auto within = sessions_of({{{1023, 1}}});
  EXPECT_EQ(ablation_dram_bytes(s, 1024, 4, 4096, kMiB),
            ablation_dram_bytes(within, 0, 4, 4096, kMiB));
}

// The sessions as the replay runs them: a trace's empty answers and messages count one token
// each (trace_sessions' clamps), and --max-output-tokens caps the answers.
TEST(AblationDram, CountsTheTokensTheReplayRuns) {
  datasets::Trace t;
  t.kind = "lengths";
  datasets::TraceSession ts;
  for (int k = 0; k < 300; ++k) {
    datasets::TraceTurn turn;
    turn.input_tokens = 0;
    turn.output_tokens = k % 2 == 0 ? 0 : 5000;
    ts.turns.push_back(turn);
  }
  t.sessions.push_back(ts);
  // 300 one-token messages; 150 one-token answers and 150 capped at 16.
  Turns turns(150, {1, 1});
  turns.insert(turns.end(), 150, {1, 16});
  EXPECT_EQ(ablation_dram_bytes(trace_sessions(t, 512, 1, 16), 0, 2, 4096, kMiB),
            ablation_dram_bytes(sessions_of({turns}), 0, 2, 4096, kMiB));
}

TEST(AblationDram, AnEmptyTraceStillGetsATier) {
  EXPECT_GE(ablation_dram_bytes({}, 0, 4, 4096, kMiB), 8 * kMiB);
}

}  // namespace
}  // namespace cb::eval

namespace cb::eval {
namespace {

AblateRow row_with_ttft(double ttft_ms) {
  AblateRow row;
  row.values = {{"hit", 0.5}, {"ttft_mean_ms", ttft_ms}};
  return row;
}

TEST(AblationSaturation, NotedOnlyWhenAMeanTtftExceedsAMinute) {
  AblateResult r;
  r.rows = {row_with_ttft(120.0), row_with_ttft(59999.0)};
  EXPECT_EQ(saturation_note(r), "");
  r.rows.push_back(row_with_ttft(2100210.1));
  r.rows.push_back(row_with_ttft(90000.0));
  AblateRow no_ttft;
  no_ttft.values = {{"hit", 1.0}};  // a study's row without the metric is not counted
  r.rows.push_back(no_ttft);
  const std::string note = saturation_note(r);
  EXPECT_NE(note.find("2 of 4 runs saturated"), std::string::npos) << note;
  EXPECT_NE(note.find("up to 2100 s"), std::string::npos) << note;
  EXPECT_NE(note.find("--gpus"), std::string::npos) << note;
  EXPECT_NE(note.find("--think-time"), std::string::npos) << note;
}

TEST(AblationSteal, NotedOnlyWhenAPointsRepetitionLostOverFivePercent) {
  AblateResult r;
  AblateRow quiet, edge, sim;
  quiet.values = {{"hit", 1.0}, {"cpu_steal_max", 0.01}};
  edge.values = {{"hit", 1.0}, {"cpu_steal_max", 0.05}};  // 5% is not over 5%
  sim.values = {{"hit", 1.0}};                            // no share recorded: not counted
  r.rows = {quiet, edge, sim};
  EXPECT_EQ(steal_note(r), "");
  AblateRow stolen = quiet, worse = quiet;
  stolen.values["cpu_steal_max"] = 0.2;
  worse.values["cpu_steal_max"] = 0.46;
  r.rows.push_back(stolen);
  r.rows.push_back(worse);
  const std::string note = steal_note(r);
  EXPECT_NE(note.find("2 of 4 points"), std::string::npos) << note;
  EXPECT_NE(note.find("up to 46%"), std::string::npos) << note;
  EXPECT_NE(note.find("cpu_steal_max"), std::string::npos) << note;
}

// A truncation study in sim mode on llama-13b: the profile's capacities, recorded.
AblateResult truncation_on(const sim::HardwareProfile& p, const datasets::Trace& t) {
  AblateOptions a;
  a.study = "truncation";
  a.config = model::preset_config("llama-13b");
  a.profile = p;
  a.trace = &t;
  return run_ablation(a);
}

// The profile's ssd_bytes sizes the SSD of the studies that do not set their own (it was read,
// validated and then ignored for a hard-coded 10 TB), and both tiers are in the config; a
// profile that gives neither (calibrate writes 0) gets the paper's 128 GB and 10 TB, noted.
TEST(AblationProfile, TheProfilesTiersSizeTheStudiesAndAreRecorded) {
  datasets::SynthOptions so;
  so.sessions = 40;
  so.seed = 1;
  const datasets::Trace t = datasets::synth_trace(so);
  const sim::HardwareProfile a100 = sim::builtin_profile("a100-80gb");
  const AblateResult paper = truncation_on(a100, t);
  EXPECT_EQ(paper.config["dram_bytes"], 128000000000ull);
  EXPECT_EQ(paper.config["ssd_bytes"], 10000000000000ull);
  EXPECT_EQ(paper.config["profile"], "a100-80gb");
  EXPECT_TRUE(ablation_profile_notes(a100, "truncation").empty());
  sim::HardwareProfile small = a100;  // room for about one conversation's entry
  small.loaded_from = "small.json";
  small.dram_bytes = 1e9;
  small.ssd_bytes = 1e9;
  const AblateResult r = truncation_on(small, t);
  EXPECT_EQ(r.config["ssd_bytes"], 1000000000ull);
  EXPECT_EQ(r.config["dram_bytes"], 1000000000ull);
  // The name it gives itself (the file is beside config, in the CLI's JSON).
  EXPECT_EQ(r.config["profile"], "a100-80gb");
  EXPECT_FALSE(r.config.contains("profile_name"));
  EXPECT_LT(r.rows[0].values["hit"].get<double>(), paper.rows[0].values["hit"].get<double>());
  sim::HardwareProfile calibrated = a100;
  calibrated.loaded_from = "cal.json";
  calibrated.dram_bytes = 0;
  calibrated.ssd_bytes = 0;
  const AblateResult c = truncation_on(calibrated, t);
  EXPECT_EQ(c.config["dram_bytes"], 128000000000ull);
  EXPECT_EQ(c.config["ssd_bytes"], 10000000000000ull);
  EXPECT_EQ(c.rows[0].values["hit"], paper.rows[0].values["hit"]);
  const std::vector<std::string> notes = ablation_profile_notes(calibrated, "truncation");
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("gives no DRAM size (dram_bytes 0"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("the paper's 128GB of DRAM"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("the paper's 10TB of SSD"), std::string::npos) << notes[1];
  for (const std::string& n : notes) {
    EXPECT_NE(std::find(c.notes.begin(), c.notes.end(), n), c.notes.end()) << n;
  }
  // eviction's SSD grid is its own: only the DRAM note.
  EXPECT_EQ(ablation_profile_notes(calibrated, "eviction").size(), 1u);
}

}  // namespace
}  // namespace cb::eval
