#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/metrics/gate.h"
#include "lib/metrics/json_path.h"
#include "lib/metrics/records_csv.h"
#include "lib/metrics/stats.h"
#include "lib/metrics/summary.h"
#include "tests/support/test_data.h"

namespace {

using cb::metrics::Bound;
using cb::metrics::Direction;
using cb::metrics::RunTotals;
using cb::metrics::TierTotals;
using cb::metrics::TurnRecord;
using cb::metrics::Verdict;
using nlohmann::json;

/// The message of the cb::Error `f` throws ("" when it throws nothing).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const cb::Error& e) {
    return e.what();
  }
  return "";
}

// ---- stats ----------------------------------------------------------------------

TEST(StatsTest, PercentilesFollowNumpyLinearInterpolation) {
  // numpy.percentile([1..10], q): 50 -> 5.5, 90 -> 9.1, 99 -> 9.91, 0 -> 1, 100 -> 10.
  const std::vector<double> x = {7, 3, 10, 1, 9, 2, 5, 8, 4, 6};
  EXPECT_DOUBLE_EQ(cb::metrics::percentile(x, 50), 5.5);
  EXPECT_DOUBLE_EQ(cb::metrics::percentile(x, 90), 9.1);
  EXPECT_DOUBLE_EQ(cb::metrics::percentile(x, 99), 9.91);
  EXPECT_DOUBLE_EQ(cb::metrics::percentile(x, 0), 1);
  EXPECT_DOUBLE_EQ(cb::metrics::percentile(x, 100), 10);
  // numpy.percentile([1, 2, 3, 4], 25) = 1.75 (h = 0.75).
  EXPECT_DOUBLE_EQ(cb::metrics::percentile({4, 1, 3, 2}, 25), 1.75);
  EXPECT_DOUBLE_EQ(cb::metrics::percentile({42}, 99), 42);
  EXPECT_DOUBLE_EQ(cb::metrics::median({1, 2, 3, 4}), 2.5);
  EXPECT_DOUBLE_EQ(cb::metrics::median({5, 1, 3}), 3);
  EXPECT_DOUBLE_EQ(cb::metrics::mean({1, 2, 3, 6}), 3);
}

TEST(StatsTest, MatchesNumpyBitForBit) {
  // repr(float(numpy.percentile(x, q))) with numpy 2.4.
  const std::vector<double> x = {0.1, 0.7, 0.3, 1.9, 2.2, 1e-3, 0.45};
  EXPECT_EQ(cb::metrics::percentile(x, 33), 0.296);
  EXPECT_EQ(cb::metrics::percentile(x, 50), 0.45);
  EXPECT_EQ(cb::metrics::percentile(x, 66.6), 0.6989999999999998);
  EXPECT_EQ(cb::metrics::percentile(x, 90), 2.02);
  EXPECT_EQ(cb::metrics::percentile(x, 99), 2.182);
  EXPECT_EQ(cb::metrics::percentile(x, 12.5), 0.07525000000000001);
  // numpy.percentile([1500.0, 400.00000000000006], 50) == 950.0 exactly.
  EXPECT_EQ(cb::metrics::median({1500.0, (1.4 - 1.0) * 1000}), 950.0);
}

TEST(StatsTest, EmptySamplesAreZeroAndBadQIsAnError) {
  EXPECT_EQ(cb::metrics::percentile({}, 50), 0);
  EXPECT_EQ(cb::metrics::mean({}), 0);
  EXPECT_EQ(cb::metrics::median({}), 0);
  const cb::metrics::Distribution d = cb::metrics::distribution({});
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.mean, 0);
  EXPECT_EQ(d.p99, 0);
  EXPECT_NE(error_of([] {
              cb::metrics::percentile({1, 2}, 101);
            }).find("outside [0, 100]"),
            std::string::npos);
  EXPECT_NE(error_of([] { cb::metrics::percentile({1, 2}, -1); }), "");
  EXPECT_NE(error_of([] { cb::metrics::percentile({1, 2}, std::nan("")); }), "");
}

TEST(StatsTest, DistributionHasEveryStatistic) {
  const cb::metrics::Distribution d = cb::metrics::distribution({10, 40, 20, 30});
  EXPECT_EQ(d.count, 4u);
  EXPECT_DOUBLE_EQ(d.mean, 25);
  EXPECT_DOUBLE_EQ(d.median, 25);
  EXPECT_DOUBLE_EQ(d.p90, 37);    // h = 2.7: 30 + 0.7 * 10
  EXPECT_DOUBLE_EQ(d.p99, 39.7);  // h = 2.97
  EXPECT_DOUBLE_EQ(d.min, 10);
  EXPECT_DOUBLE_EQ(d.max, 40);
}

// ---- summary --------------------------------------------------------------------

TurnRecord rec(uint64_t session, int turn, double arrival, double first, double finish,
               int64_t history, int64_t fresh, int64_t out, const std::string& tier,
               std::vector<double> token_times) {
  TurnRecord r;
  r.session = session;
  r.turn = turn;
  r.arrival_s = arrival;
  r.start_s = arrival;
  r.first_token_s = first;
  r.finish_s = finish;
  r.history_tokens = history;
  r.new_tokens = fresh;
  r.output_tokens = out;
  r.tier = tier;
  r.token_times_s = std::move(token_times);
  return r;
}

/// Four measured turns (no history, a DRAM hit, a miss, an SSD hit) and one warmup turn
/// whose every value would change the summary if it were counted.
std::vector<TurnRecord> sample_records() {
  std::vector<TurnRecord> v;
  TurnRecord w = rec(9, 0, 0.0, 50.0, 90.0, 5000, 5000, 50, "hbm", {50.0, 90.0});
  w.warmup = true;
  w.reused_tokens = 5000;
  w.bytes_loaded = 1 << 30;
  w.preload_stall_s = 9;
  v.push_back(w);
  TurnRecord a = rec(1, 0, 0.0, 0.5, 1.5, 0, 100, 3, "none", {0.5, 1.0, 1.5});
  a.bytes_saved = 1000;
  a.save_stall_s = 0.01;
  v.push_back(a);
  TurnRecord b = rec(2, 1, 1.0, 1.2, 1.2, 200, 50, 1, "dram", {1.2});
  b.reused_tokens = 200;
  b.bytes_loaded = 4000;
  b.bytes_saved = 500;
  b.load_s = 0.05;
  b.preload_stall_s = 0.02;
  v.push_back(b);
  TurnRecord c = rec(3, 2, 2.0, 2.8, 4.0, 300, 20, 4, "miss", {2.8, 3.0, 3.5, 4.0});
  c.recomputed_tokens = 300;
  c.truncated_tokens = 10;
  c.bytes_saved = 800;
  v.push_back(c);
  TurnRecord d = rec(4, 1, 3.0, 3.1, 3.3, 100, 10, 2, "ssd", {3.1, 3.3});
  d.reused_tokens = 100;
  d.bytes_loaded = 2000;
  d.load_s = 0.1;
  d.preload_stall_s = 0.03;
  v.push_back(d);
  return v;
}

RunTotals sample_totals() {
  RunTotals t;
  t.duration_s = 4.0;
  t.gpu_time_s = 1800;
  t.prefill_time_s = 0.5;
  t.gpus = 4;
  TierTotals hbm{"hbm", true, 1000000000ull, 0, 0, 0, 0, 0};
  TierTotals dram{"dram", true, 128000000000ull, 1, 4000000000ull, 0, 2.0, 0};
  TierTotals ssd{"ssd", true, 10000000000000ull, 1, 2000, 1000000000ull, 0, 0.5};
  t.tiers = {hbm, dram, ssd};
  return t;
}

TEST(SummaryTest, EveryFieldMatchesAnIndependentComputation) {
  const cb::metrics::Prices prices;
  const json s = cb::metrics::summarize(sample_records(), sample_totals(), prices);
  EXPECT_EQ(s["completed"], 4);
  EXPECT_EQ(s["total_input_tokens"], 180);
  EXPECT_EQ(s["total_output_tokens"], 10);
  EXPECT_DOUBLE_EQ(s["duration_s"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(s["request_throughput"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(s["input_throughput"].get<double>(), 45.0);
  EXPECT_DOUBLE_EQ(s["output_throughput"].get<double>(), 2.5);
  // (0+100) + (200+50) + (300+20) + (100+10) = 780 tokens over 0.5 s of prefill.
  EXPECT_DOUBLE_EQ(s["prefill_throughput"].get<double>(), 1560.0);
  EXPECT_DOUBLE_EQ(s["gpu_time_s"].get<double>(), 1800.0);

  // TTFT 500, 200, 800, 100 ms: sorted 100 200 500 800.
  const double eps = 1e-9;
  EXPECT_NEAR(s["ttft_ms"]["mean"].get<double>(), 400.0, eps);
  EXPECT_NEAR(s["ttft_ms"]["median"].get<double>(), 350.0, eps);
  EXPECT_NEAR(s["ttft_ms"]["p90"].get<double>(), 500 + 0.7 * 300, eps);
  EXPECT_NEAR(s["ttft_ms"]["p99"].get<double>(), 500 + 0.97 * 300, eps);
  // TPOT: 1000/2 = 500, 1200/3 = 400, 200/1 = 200 (the 1-token turn is left out).
  EXPECT_NEAR(s["tpot_ms"]["mean"].get<double>(), 1100.0 / 3, eps);
  EXPECT_NEAR(s["tpot_ms"]["median"].get<double>(), 400.0, eps);
  // ITL: 500 500 | 200 500 500 | 200.
  EXPECT_NEAR(s["itl_ms"]["mean"].get<double>(), 400.0, eps);
  EXPECT_NEAR(s["itl_ms"]["median"].get<double>(), 500.0, eps);
  EXPECT_NEAR(s["itl_ms"]["p90"].get<double>(), 500.0, eps);
  // E2EL: 1500 200 2000 300.
  EXPECT_NEAR(s["e2el_ms"]["mean"].get<double>(), 1000.0, eps);
  EXPECT_NEAR(s["e2el_ms"]["median"].get<double>(), 900.0, eps);

  EXPECT_EQ(s["turns_with_history"], 3);
  EXPECT_DOUBLE_EQ(s["hit_rate"]["overall"].get<double>(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(s["hit_rate"]["hbm"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s["hit_rate"]["dram"].get<double>(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(s["hit_rate"]["ssd"].get<double>(), 1.0 / 3);
  EXPECT_EQ(s["reused_tokens"], 300);
  EXPECT_EQ(s["recomputed_tokens"], 300);
  EXPECT_EQ(s["truncated_tokens"], 10);
  EXPECT_EQ(s["bytes_loaded"], 6000);
  EXPECT_EQ(s["bytes_saved"], 2300);
  EXPECT_NEAR(s["preload_stall_s"]["total"].get<double>(), 0.05, eps);
  EXPECT_NEAR(s["preload_stall_s"]["mean_ms"].get<double>(), 12.5, eps);
  EXPECT_NEAR(s["save_stall_s"].get<double>(), 0.01, eps);
  EXPECT_NEAR(s["load_s"].get<double>(), 0.15, eps);

  EXPECT_EQ(s["tiers"]["dram"]["capacity_bytes"], 128000000000ull);
  EXPECT_EQ(s["tiers"]["dram"]["bytes_read"], 4000000000ull);
  EXPECT_DOUBLE_EQ(s["tiers"]["dram"]["read_gbps"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["tiers"]["dram"]["write_gbps"].get<double>(), 0.0);  // no write time
  EXPECT_DOUBLE_EQ(s["tiers"]["ssd"]["write_gbps"].get<double>(), 2.0);
  EXPECT_EQ(s["tiers"]["ssd"]["hits"], 1);
  EXPECT_EQ(s["tiers"]["hbm"]["present"], true);

  // Cost: 4 GPUs x 0.5 h x 5 $/h; 128 GB and 10,000 GB provisioned for 4 s.
  const double gpu = 4 * 1800.0 / 3600 * 5.0;
  const double dram = 128.0 * (4.0 / 3600) * 0.0088;
  const double ssd = 10000.0 * (4.0 / 3600) * 0.000082;
  EXPECT_NEAR(s["cost_usd"]["gpu"].get<double>(), 10.0, 1e-12);
  EXPECT_NEAR(s["cost_usd"]["gpu"].get<double>(), gpu, 1e-12);
  EXPECT_NEAR(s["cost_usd"]["dram"].get<double>(), dram, 1e-15);
  EXPECT_NEAR(s["cost_usd"]["ssd"].get<double>(), ssd, 1e-15);
  EXPECT_NEAR(s["cost_usd"]["total"].get<double>(), gpu + dram + ssd, 1e-12);
  EXPECT_DOUBLE_EQ(s["prices"]["gpu_usd_per_hour"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(s["prices"]["dram_usd_per_gb_hour"].get<double>(), 0.0088);
  EXPECT_DOUBLE_EQ(s["prices"]["ssd_usd_per_gb_hour"].get<double>(), 0.000082);
}

TEST(SummaryTest, AbsentTiersCostNothingAndPricesAreEchoed) {
  RunTotals t = sample_totals();
  t.tiers[1].present = false;  // DRAM not configured
  cb::metrics::Prices p;
  p.gpu_usd_per_hour = 2.0;
  p.ssd_usd_per_gb_hour = 0.001;
  const json s = cb::metrics::summarize(sample_records(), t, p);
  EXPECT_EQ(s["cost_usd"]["dram"].get<double>(), 0.0);
  EXPECT_NEAR(s["cost_usd"]["gpu"].get<double>(), 4 * 0.5 * 2.0, 1e-12);
  EXPECT_NEAR(s["cost_usd"]["ssd"].get<double>(), 10000.0 * 4.0 / 3600 * 0.001, 1e-15);
  EXPECT_DOUBLE_EQ(s["prices"]["gpu_usd_per_hour"].get<double>(), 2.0);
}

/// Every leaf of `j` is a number or a boolean (no null, no NaN).
void expect_numeric_leaves(const json& j, const std::string& path = "") {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      expect_numeric_leaves(*it, path + "." + it.key());
    return;
  }
  EXPECT_TRUE(j.is_number() || j.is_boolean()) << path << " = " << j.dump();
  if (j.is_number_float()) {
    EXPECT_TRUE(std::isfinite(j.get<double>())) << path;
  }
}

TEST(SummaryTest, EmptyAndWarmupOnlyInputsGiveZerosNotDivisionsByZero) {
  const json e = cb::metrics::summarize({}, RunTotals{}, cb::metrics::Prices{});
  expect_numeric_leaves(e);
  EXPECT_EQ(e["completed"], 0);
  EXPECT_EQ(e["ttft_ms"]["mean"].get<double>(), 0.0);
  EXPECT_EQ(e["request_throughput"].get<double>(), 0.0);
  EXPECT_EQ(e["hit_rate"]["overall"].get<double>(), 0.0);
  EXPECT_EQ(e["preload_stall_s"]["mean_ms"].get<double>(), 0.0);
  EXPECT_EQ(e["cost_usd"]["total"].get<double>(), 0.0);

  std::vector<TurnRecord> warm = sample_records();
  for (TurnRecord& r : warm) r.warmup = true;
  const json w = cb::metrics::summarize(warm, sample_totals(), cb::metrics::Prices{});
  expect_numeric_leaves(w);
  EXPECT_EQ(w["completed"], 0);
  EXPECT_EQ(w["reused_tokens"], 0);
  EXPECT_EQ(w["ttft_ms"]["p99"].get<double>(), 0.0);
  EXPECT_EQ(w["turns_with_history"], 0);
}

TEST(SummaryTest, UnknownTierIsAnErrorNamingTheTurn) {
  std::vector<TurnRecord> v = {rec(7, 3, 0, 1, 2, 10, 1, 1, "l3", {1})};
  const std::string m = error_of([&] { cb::metrics::summarize(v, RunTotals{}, {}); });
  EXPECT_NE(m.find("turn 3 of session 7"), std::string::npos) << m;
  EXPECT_NE(m.find("'l3'"), std::string::npos) << m;
}

TEST(SummaryTest, CompareGivesThePapersRatios) {
  const json base = {{"ttft_ms", {{"mean", 200.0}}},
                     {"prefill_throughput", 1000.0},
                     {"gpu_time_s", 300.0},
                     {"cost_usd", {{"total", 10.0}}},
                     {"hit_rate", {{"overall", 0.0}}}};
  const json cur = {{"ttft_ms", {{"mean", 30.0}}},
                    {"prefill_throughput", 6000.0},
                    {"gpu_time_s", 75.0},
                    {"cost_usd", {{"total", 3.0}}},
                    {"hit_rate", {{"overall", 0.9}}}};
  const json c = cb::metrics::compare_summaries(base, cur);
  EXPECT_DOUBLE_EQ(c["ttft_reduction_pct"].get<double>(), 85.0);
  EXPECT_DOUBLE_EQ(c["prefill_throughput_x"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(c["gpu_time_x"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(c["cost_saving_pct"].get<double>(), 70.0);
  EXPECT_DOUBLE_EQ(c["hit_rate"]["base"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(c["hit_rate"]["current"].get<double>(), 0.9);

  const json empty = cb::metrics::summarize({}, RunTotals{}, {});
  const json z = cb::metrics::compare_summaries(empty, empty);
  EXPECT_TRUE(z["ttft_reduction_pct"].is_null());
  EXPECT_TRUE(z["prefill_throughput_x"].is_null());
  EXPECT_TRUE(z["gpu_time_x"].is_null());
  EXPECT_TRUE(z["cost_saving_pct"].is_null());

  json broken = cur;
  broken.erase("gpu_time_s");
  const std::string m = error_of([&] { cb::metrics::compare_summaries(base, broken); });
  EXPECT_NE(m.find("current"), std::string::npos) << m;
  EXPECT_NE(m.find("gpu_time_s"), std::string::npos) << m;
}

// ---- CSV ------------------------------------------------------------------------

// The run lasts until the engine is done with its last measured turn: a synchronous save after
// the last token holds it (done_s), a warm-up turn does not count.
TEST(SummaryTest, DurationRunsToTheLastTurnDone) {
  std::vector<TurnRecord> v = {rec(1, 0, 1.0, 1.5, 2.0, 0, 10, 2, "none", {1.5, 2.0}),
                               rec(2, 0, 1.5, 2.5, 3.0, 0, 10, 2, "none", {2.5, 3.0})};
  EXPECT_EQ(cb::metrics::measured_duration(v), 2.0);
  v[0].done_s = 2.5;  // before the other's last token: no change
  EXPECT_EQ(cb::metrics::measured_duration(v), 2.0);
  v[1].done_s = 3.75;  // its synchronous save
  EXPECT_EQ(cb::metrics::measured_duration(v), 2.75);
  v.push_back(rec(3, 0, 0.0, 9.0, 9.5, 0, 10, 2, "none", {9.0, 9.5}));
  v.back().warmup = true;
  EXPECT_EQ(cb::metrics::measured_duration(v), 2.75);
}

TEST(RecordsCsvTest, HeaderAndRows) {
  std::vector<TurnRecord> v = sample_records();
  v[1].save_stall_s = 0.5;
  const std::string path = cb::test::tmp_dir() + "/metrics_turns.csv";
  cb::metrics::write_turn_csv(path, v);
  // Written whole through a temporary (path.tmp.PID), which is gone.
  for (const auto& e : std::filesystem::directory_iterator(cb::test::tmp_dir())) {
    EXPECT_NE(e.path().filename().string().rfind("metrics_turns.csv.tmp", 0), 0u) << e.path();
  }
  const std::string text = cb::test::read_file(path);
  const std::string header =
      "session,turn,warmup,arrival_s,start_s,first_token_s,finish_s,ttft_ms,history_tokens,"
      "new_tokens,output_tokens,reused_tokens,recomputed_tokens,truncated_tokens,tier,"
      "bytes_loaded,bytes_saved,load_ms,preload_stall_ms,save_stall_ms,done_s,conversation\n";
  ASSERT_EQ(text.substr(0, header.size()), header);
  // One line per record (warmup included) after the header.
  size_t lines = 0;
  for (char ch : text) lines += ch == '\n';
  EXPECT_EQ(lines, 1 + v.size());
  EXPECT_NE(text.find("\n1,0,0,0,0,0.5,1.5,500,0,100,3,0,0,0,none,0,1000,0,0,500,1.5,\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n9,0,1,"), std::string::npos);  // the warmup turn, flagged
  // Milliseconds from seconds; shortest round-trip decimals.
  TurnRecord r = rec(12, 3, 0.25, 0.75, 2.0, 64, 8, 2, "dram", {0.75, 2.0});
  r.start_s = 0.5;
  r.reused_tokens = 64;
  r.bytes_loaded = 4096;
  r.load_s = 0.125;
  r.preload_stall_s = 0.0625;
  r.save_stall_s = 0.25;
  r.done_s = 2.25;  // its synchronous save held the engine after the last token
  EXPECT_EQ(cb::metrics::turn_csv_row(r),
            "12,3,0,0.25,0.5,0.75,2,500,64,8,2,64,0,0,dram,4096,0,125,62.5,250,2.25,");
  EXPECT_EQ(cb::metrics::turn_csv_row(r, "conv,7"),
            "12,3,0,0.25,0.5,0.75,2,500,64,8,2,64,0,0,dram,4096,0,125,62.5,250,2.25,\"conv,7\"");
  // Each record's conversation by its session index; none past the names given.
  cb::metrics::write_turn_csv(path, v, {"first", "second", "third"});
  std::istringstream rows(cb::test::read_file(path));
  std::string line;
  std::getline(rows, line);  // the header
  int named = 0;
  while (std::getline(rows, line)) {
    const std::string session = line.substr(0, line.find(','));
    const std::string last = line.substr(line.rfind(',') + 1);
    const std::string want = session == "1" ? "second" : session == "2" ? "third" : "";
    EXPECT_EQ(last, want) << line;
    named += !want.empty();
  }
  EXPECT_EQ(named, 2);
  TurnRecord odd = v[1];
  odd.tier = "a,\"b\"";
  EXPECT_NE(cb::metrics::turn_csv_row(odd).find(",\"a,\"\"b\"\"\","), std::string::npos);
}

TEST(RecordsCsvTest, UnwritablePathIsAnErrorNamingIt) {
  const std::string path = cb::test::tmp_dir() + "/no_such_dir/turns.csv";
  const std::string m = error_of([&] { cb::metrics::write_turn_csv(path, sample_records()); });
  EXPECT_NE(m.find(path), std::string::npos) << m;
}

// ---- gate -----------------------------------------------------------------------

TEST(GateTest, DirectionsByName) {
  using cb::metrics::direction_of;
  // Names as the result writers spell them: replay summaries, bench cpu/store/gpu, perplexity,
  // mmlu and piqa.
  for (const char* m :
       {"hit_rate.overall", "hit_rate.dram", "prefill_throughput", "output_throughput",
        "gpu_time_x", "ttft_reduction_pct", "cost_saving_pct", "tiers.ssd.read_gbps", "completed",
        "reused_tokens", "prefill_tok_s", "decode_tok_s", "sgemm_gflops", "prefill_to_sgemm",
        "decode_weight_gbs", "linear_f32_vs_bf16.decode_speedup", "dram_load_to_memcpy",
        "ssd_read_to_ceiling", "policy.decisions_per_s", "ceilings.gemm_ceiling_tflops",
        "decode.restore_ratio_to_h2d", "prefill.llama_2_7b_tok_s", "acc", "acc_norm", "acc_micro",
        "acc_macro", "tokens_reused",
        // ablate's rows: hit rates named hit, hit_dram, ...; any other rate
        "rows.1.values.hit", "rows.0.values.hit_dram", "rows.2.values.hit_ssd", "hits",
        "admission_rate"})
    EXPECT_EQ(direction_of(m), Direction::HigherIsBetter) << m;
  for (const char* m : {"ttft_ms.mean",
                        "tpot_ms.p99",
                        "itl_ms.median",
                        "e2el_ms.p90",
                        "gpu_time_s",
                        "cost_usd.total",
                        "recomputed_tokens",
                        "duration_s",
                        "load_s",
                        "preload_stall_s.mean_ms",
                        "save_stall_s",
                        "prefill_s",
                        "gemm_only_s",
                        "decode_ms_per_token",
                        "ms_per_decision",
                        "seconds",
                        "decode.seconds_per_step",
                        "ppl",
                        "ppl_stderr",
                        "mean_nll",
                        "word_perplexity",
                        "byte_perplexity",
                        "bits_per_byte",
                        "logits_max_diff_over_max",
                        "store.tiers.ssd.read_ns",
                        "miss_rate",
                        "error_rate",
                        "misses",
                        "save_failures"})
    EXPECT_EQ(direction_of(m), Direction::LowerIsBetter) << m;
  for (const char* m : {"bytes_loaded", "bytes_saved", "truncated_tokens", "total_input_tokens",
                        "tiers.dram.bytes_read", "gemm_share", "tokens_per_entry", "scored_tokens",
                        "n", "correct", "total", "tokens"})
    EXPECT_EQ(direction_of(m), Direction::Exact) << m;
}

TEST(GateTest, ParseBound) {
  Bound b = cb::metrics::parse_bound("ttft_ms.mean=5");
  EXPECT_EQ(b.metric, "ttft_ms.mean");
  EXPECT_DOUBLE_EQ(b.max_regression_pct, 5.0);
  b = cb::metrics::parse_bound("hit_rate.overall=2.5%");
  EXPECT_EQ(b.metric, "hit_rate.overall");
  EXPECT_DOUBLE_EQ(b.max_regression_pct, 2.5);
  EXPECT_DOUBLE_EQ(cb::metrics::parse_bound("bytes_saved=0").max_regression_pct, 0.0);
  // The direction is read off the name unless the bound names it.
  EXPECT_EQ(b.direction, Direction::HigherIsBetter);
  EXPECT_FALSE(b.direction_given);
  b = cb::metrics::parse_bound("my_score=3%:higher");
  EXPECT_EQ(b.metric, "my_score");
  EXPECT_DOUBLE_EQ(b.max_regression_pct, 3.0);
  EXPECT_EQ(b.direction, Direction::HigherIsBetter);
  EXPECT_TRUE(b.direction_given);
  EXPECT_EQ(cb::metrics::parse_bound("ttft_ms.mean=1:exact").direction, Direction::Exact);
  EXPECT_EQ(cb::metrics::parse_bound("bytes_saved=1:lower").direction, Direction::LowerIsBetter);
  for (const char* bad : {"ttft_ms.mean", "=5",
                          "ttft=",        "ttft=abc",
                          "ttft=-1",      "ttft=1=2",
                          "a..b=1",       ".a=1",
                          "a.=1",         "ttft=inf",
                          "ttft=5x",      "ttft=%",
                          "ttft=5:",      "ttft=5:up",
                          "ttft=:lower",  "ttft=5:lower:higher",
                          "ttft=0x10",    "ttft=infinity",
                          "ttft=nan",     "ttft= 5"}) {
    const std::string m = error_of([&] { cb::metrics::parse_bound(bad); });
    EXPECT_NE(m.find(std::string("--max-regression ") + bad), std::string::npos)
        << bad << ": " << m;
  }
}

TEST(GateTest, GivenBoundsAddToTheDefaultsAndReplaceTheirOwnMetric) {
  using cb::metrics::gate_bounds;
  using cb::metrics::parse_bound;
  const size_t n_defaults = cb::metrics::default_bounds().size();
  json full;  // a summary with every default metric
  for (const Bound& d : cb::metrics::default_bounds()) {
    json* at = &full;
    size_t from = 0;
    for (size_t dot; (dot = d.metric.find('.', from)) != std::string::npos; from = dot + 1) {
      at = &(*at)[d.metric.substr(from, dot - from)];
    }
    (*at)[d.metric.substr(from)] = 1;
  }
  EXPECT_EQ(gate_bounds({}, false, full).size(), n_defaults);
  const std::vector<Bound> b =
      gate_bounds({parse_bound("ttft_ms.mean=5"), parse_bound("hit_rate.ssd=2")}, false, full);
  ASSERT_EQ(b.size(), n_defaults + 1);
  EXPECT_EQ(b.back().metric, "ttft_ms.mean");
  int ssd = 0;
  for (const Bound& x : b) {
    if (x.metric == "hit_rate.ssd") {
      ++ssd;
      EXPECT_EQ(x.max_regression_pct, 2.0);
    } else if (x.metric != "ttft_ms.mean") {
      EXPECT_EQ(x.max_regression_pct, 0.0) << x.metric;
    }
  }
  EXPECT_EQ(ssd, 1);
  const std::vector<Bound> only = gate_bounds({parse_bound("ttft_ms.mean=5")}, true, full);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].metric, "ttft_ms.mean");
  EXPECT_NE(error_of([&] { gate_bounds({}, true, full); }).find("--no-default-bounds"),
            std::string::npos);
  const std::string twice = error_of([&] {
    gate_bounds({parse_bound("ttft_ms.mean=5"), parse_bound("ttft_ms.mean=9")}, false, full);
  });
  EXPECT_NE(twice.find("ttft_ms.mean"), std::string::npos) << twice;
  EXPECT_NE(twice.find("twice"), std::string::npos) << twice;
  // A given bound on a summary without the default metrics (a perplexity result): the defaults
  // it lacks are left out; with no bound given they all apply (and then fail as missing).
  const json ppl = {{"ppl", 4.2}, {"hit_rate", {{"overall", 0.5}}}};
  const std::vector<Bound> p = gate_bounds({parse_bound("ppl=1")}, false, ppl);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].metric, "hit_rate.overall");
  EXPECT_EQ(p[1].metric, "ppl");
  EXPECT_EQ(gate_bounds({}, false, ppl).size(), n_defaults);
  // A summary with none of them (an evaluation's) and no bound given: nothing to check, said as
  // such, not as the first default metric missing.
  const std::string none = error_of([&] { gate_bounds({}, false, json{{"ppl", 4.2}}); });
  EXPECT_NE(none.find("none of the default bounds' metrics"), std::string::npos) << none;
  EXPECT_NE(none.find("--max-regression METRIC=PCT"), std::string::npos) << none;
  // ... naming the numbers the baseline holds, which a bound could name (a generate result's).
  const json gen = {{"task", "generate"},
                    {"chunk_bytes", 4096},  // a setting: not the example
                    {"prefill_tok_s", 900.5},
                    {"sampling", {{"temperature", 0}, {"greedy", true}}},
                    {"results", json::array({json{{"ppl", 3.9}}})},
                    {"ids", json::array({1, 2, 3})}};
  const std::string named = error_of([&] { gate_bounds({}, false, gen); });
  EXPECT_NE(
      named.find("its numbers: chunk_bytes, prefill_tok_s, results.0.ppl, sampling.temperature)"),
      std::string::npos)
      << named;
  EXPECT_NE(named.find("e.g. --max-regression prefill_tok_s=5"), std::string::npos) << named;
  const std::string no_numbers = error_of([&] {
    gate_bounds({}, false, json{{"task", "generate"}});
  });
  EXPECT_NE(no_numbers.find("the baseline holds none"), std::string::npos) << no_numbers;
}

TEST(GateTest, DefaultBoundsAreTheDeterministicFieldsAtZero) {
  const std::vector<Bound> d = cb::metrics::default_bounds();
  std::vector<std::string> names;
  for (const Bound& b : d) {
    names.push_back(b.metric);
    EXPECT_EQ(b.max_regression_pct, 0.0);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"hit_rate.overall", "hit_rate.dram", "hit_rate.ssd",
                                             "reused_tokens", "recomputed_tokens", "bytes_loaded",
                                             "bytes_saved", "completed"}));
}

const json kBase = {{"hit_rate", {{"overall", 0.5}, {"ssd", 0.0}}},
                    {"ttft_ms", {{"mean", 100.0}}},
                    {"bytes_saved", 1000},
                    {"label", "x"}};

cb::metrics::GateCheck one(const json& cur, const std::string& bound) {
  const auto r =
      cb::metrics::run_gate(kBase, cur, {cb::metrics::parse_bound(bound)}, "B.json", "C.json");
  EXPECT_EQ(r.checks.size(), 1u);
  EXPECT_EQ(r.regressions, r.checks[0].verdict == Verdict::Regression ? 1 : 0);
  return r.checks[0];
}

TEST(GateTest, VerdictsFollowTheMetricsDirection) {
  json cur = kBase;
  cur["hit_rate"]["overall"] = 0.6;
  auto c = one(cur, "hit_rate.overall=0");
  EXPECT_EQ(c.verdict, Verdict::Improved);
  EXPECT_NEAR(c.change_pct, 20.0, 1e-9);
  cur["hit_rate"]["overall"] = 0.49;
  EXPECT_EQ(one(cur, "hit_rate.overall=0").verdict, Verdict::Regression);
  EXPECT_EQ(one(cur, "hit_rate.overall=2").verdict, Verdict::Ok);  // -2% within 2%

  cur = kBase;
  cur["ttft_ms"]["mean"] = 104.0;
  EXPECT_EQ(one(cur, "ttft_ms.mean=5").verdict, Verdict::Ok);
  cur["ttft_ms"]["mean"] = 106.0;
  c = one(cur, "ttft_ms.mean=5");
  EXPECT_EQ(c.verdict, Verdict::Regression);
  EXPECT_NEAR(c.change_pct, 6.0, 1e-9);
  cur["ttft_ms"]["mean"] = 50.0;
  EXPECT_EQ(one(cur, "ttft_ms.mean=0").verdict, Verdict::Improved);

  // Exact: any change either way beyond the bound.
  cur = kBase;
  cur["bytes_saved"] = 1001;
  EXPECT_EQ(one(cur, "bytes_saved=0").verdict, Verdict::Regression);
  cur["bytes_saved"] = 999;
  EXPECT_EQ(one(cur, "bytes_saved=0").verdict, Verdict::Regression);
  EXPECT_EQ(one(cur, "bytes_saved=0.2").verdict, Verdict::Ok);
  EXPECT_EQ(one(kBase, "bytes_saved=0").verdict, Verdict::Ok);

  // A direction given in the bound overrides the name's.
  cur = kBase;
  cur["bytes_saved"] = 2000;
  EXPECT_EQ(one(cur, "bytes_saved=0:higher").verdict, Verdict::Improved);
  EXPECT_EQ(one(cur, "bytes_saved=0:lower").verdict, Verdict::Regression);
  cur["ttft_ms"]["mean"] = 50.0;
  EXPECT_EQ(one(cur, "ttft_ms.mean=0:exact").verdict, Verdict::Regression);

  // From a zero baseline: an infinite change, in its direction.
  cur = kBase;
  cur["hit_rate"]["ssd"] = 0.1;
  c = one(cur, "hit_rate.ssd=0");
  EXPECT_EQ(c.verdict, Verdict::Improved);
  EXPECT_TRUE(std::isinf(c.change_pct));
  EXPECT_TRUE(cb::metrics::gate_json({{c}, 0})["checks"][0]["change_pct"].is_null());
}

// The slack for rounding scales with the bound: an exact bound fails on a one-byte change of a
// value near 5e11 (a change of 2e-10 %, which an absolute slack of 1e-9 points let pass), and
// a 5% bound is not failed by a change that computes as 5% plus rounding.
TEST(GateTest, ExactBoundsFailOnAnyChangeOfALargeValue) {
  const json base = {{"bytes_saved", 476899737600.0}, {"ttft_ms", 100.0}};
  json cur = base;
  cur["bytes_saved"] = 476899737601.0;
  auto r = cb::metrics::run_gate(base, cur, {cb::metrics::parse_bound("bytes_saved=0")}, "a", "b");
  EXPECT_EQ(r.regressions, 1);
  cur = base;
  cur["ttft_ms"] = 105.00000000000001;  // (cur - base) / base * 100 rounds above 5
  r = cb::metrics::run_gate(base, cur, {cb::metrics::parse_bound("ttft_ms=5")}, "a", "b");
  EXPECT_EQ(r.regressions, 0) << r.checks[0].change_pct;
  cur["ttft_ms"] = 105.001;
  r = cb::metrics::run_gate(base, cur, {cb::metrics::parse_bound("ttft_ms=5")}, "a", "b");
  EXPECT_EQ(r.regressions, 1);
}

TEST(GateTest, MissingOrNonNumericMetricNamesFileAndMetric) {
  json cur = kBase;
  cur.erase("bytes_saved");
  std::string m = error_of([&] {
    cb::metrics::run_gate(kBase, cur, {cb::metrics::parse_bound("bytes_saved=0")}, "B.json",
                          "C.json");
  });
  EXPECT_NE(m.find("C.json"), std::string::npos) << m;
  EXPECT_NE(m.find("bytes_saved"), std::string::npos) << m;
  m = error_of([&] {
    cb::metrics::run_gate(kBase, kBase, {cb::metrics::parse_bound("ttft_ms.p99=0")}, "B.json",
                          "C.json");
  });
  EXPECT_NE(m.find("B.json"), std::string::npos) << m;
  EXPECT_NE(m.find("ttft_ms.p99"), std::string::npos) << m;
  m = error_of([&] {
    cb::metrics::run_gate(kBase, kBase, {cb::metrics::parse_bound("ttft_ms=0")}, "B.json",
                          "C.json");
  });
  EXPECT_NE(m.find("not a number"), std::string::npos) << m;
  m = error_of([&] {
    cb::metrics::run_gate(kBase, kBase, {cb::metrics::parse_bound("label=0")}, "B.json", "C.json");
  });
  EXPECT_NE(m.find("label"), std::string::npos) << m;
}

TEST(GateTest, SummaryIsBareOrUnderSummaryAndBadFilesAreNamed) {
  const json wrapped =
      cb::metrics::parse_summary(R"({"config": {}, "summary": {"completed": 3}})", "R.json");
  EXPECT_EQ(wrapped, json({{"completed", 3}}));
  const json bare = cb::metrics::parse_summary(R"({"completed": 3})", "S.json");
  EXPECT_EQ(bare, json({{"completed", 3}}));
  // A replay --compare result: its ratios and its baseline's summary are metrics too
  // (comparison.gpu_time_x); a summary's own key of that name wins.
  const json cmp = cb::metrics::parse_summary(
      R"({"summary": {"completed": 3}, "comparison": {"gpu_time_x": 2.5},
          "baseline": {"completed": 4}, "config": {"x": 1}})",
      "C.json");
  EXPECT_EQ(cmp, json({{"completed", 3},
                       {"comparison", {{"gpu_time_x", 2.5}}},
                       {"baseline", {{"completed", 4}}}}));
  EXPECT_EQ(cb::metrics::direction_of("comparison.gpu_time_x"), Direction::HigherIsBetter);
  EXPECT_EQ(
      cb::metrics::parse_summary(R"({"summary": {"baseline": 1}, "baseline": {"a": 2}})", "D.json"),
      json({{"baseline", 1}}));
  std::string m = error_of([] { cb::metrics::parse_summary("{\"completed\": ", "bad.json"); });
  EXPECT_NE(m.find("bad.json"), std::string::npos) << m;
  EXPECT_NE(m.find("not valid JSON"), std::string::npos) << m;
  m = error_of([] { cb::metrics::parse_summary("[1, 2]", "list.json"); });
  EXPECT_NE(m.find("list.json"), std::string::npos) << m;
  EXPECT_NE(m.find("not an object"), std::string::npos) << m;
  EXPECT_NE(error_of([] { cb::metrics::parse_summary("", "empty.json"); }).find("empty.json"),
            std::string::npos);
  // Nested 100,000 deep where a metric belongs: refused before parsing, not rendered into a
  // message one recursion per level.
  m = error_of([] {
    cb::metrics::parse_summary(
        "{\"ttft\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "deep.json");
  });
  EXPECT_NE(m.find("deep.json: nests JSON more than 64 levels deep"), std::string::npos) << m;
}

TEST(GateTest, ASummaryPassesAgainstItselfAfterAJsonRoundTrip) {
  const json s = cb::metrics::summarize(sample_records(), sample_totals(), {});
  const json back = cb::metrics::parse_summary(s.dump(2), "s.json");
  const auto r = cb::metrics::run_gate(s, back, cb::metrics::default_bounds(), "a", "b");
  EXPECT_EQ(r.regressions, 0);
  EXPECT_EQ(r.checks.size(), 8u);
  const json j = cb::metrics::gate_json(r);
  EXPECT_EQ(j["passed"], true);
  const std::string md = cb::metrics::gate_markdown(r);
  EXPECT_EQ(
      md.rfind("| metric | baseline | current | change % | bound % | better | verdict |\n", 0), 0u);
  EXPECT_NE(md.find("| hit_rate.overall | 0.666667 | 0.666667 | +0.00 | 0.00 | higher | OK |"),
            std::string::npos)
      << md;
}

// An exact bound that fails by one byte shows why: whole numbers are printed exactly and a
// tiny change in significant digits (they printed as 7.01312e+06 twice and +0.00).
TEST(GateTest, TheTableShowsAOneByteRegression) {
  const json base = {{"bytes_loaded", 7013120}}, cur = {{"bytes_loaded", 7013121}};
  const auto r =
      cb::metrics::run_gate(base, cur, {cb::metrics::parse_bound("bytes_loaded=0")}, "a", "b");
  ASSERT_EQ(r.regressions, 1);
  const std::string md = cb::metrics::gate_markdown(r);
  EXPECT_NE(md.find("| bytes_loaded | 7013120 | 7013121 | +1.43e-05 |"), std::string::npos) << md;
}

// Integers beyond 2^53 are compared as the integers the files hold: as doubles, 2^53 and
// 2^53 + 1 are the same number, and an exact bound passed a one-byte change.
TEST(GateTest, ExactBoundsCompareIntegersBeyondADoublesPrecision) {
  const auto gate = [](const std::string& base, const std::string& cur, const std::string& bound) {
    return cb::metrics::run_gate(cb::metrics::parse_summary(base, "a"),
                                 cb::metrics::parse_summary(cur, "b"),
                                 {cb::metrics::parse_bound(bound)}, "a", "b");
  };
  const std::string lo = R"({"bytes_loaded": 9007199254740992})",
                    hi = R"({"bytes_loaded": 9007199254740993})";
  auto r = gate(lo, hi, "bytes_loaded=0");
  ASSERT_EQ(r.regressions, 1);
  EXPECT_GT(r.checks[0].change_pct, 0.0);
  EXPECT_EQ(gate(hi, lo, "bytes_loaded=0").regressions, 1);
  EXPECT_LT(gate(hi, lo, "bytes_loaded=0").checks[0].change_pct, 0.0);
  EXPECT_EQ(gate(lo, lo, "bytes_loaded=0").regressions, 0);
  EXPECT_EQ(gate(lo, lo, "bytes_loaded=0").checks[0].change_pct, 0.0);
  // Directions read the change's sign.
  EXPECT_EQ(gate(lo, hi, "bytes_loaded=0:higher").checks[0].verdict, Verdict::Improved);
  EXPECT_EQ(gate(hi, lo, "bytes_loaded=0:higher").checks[0].verdict, Verdict::Regression);
  // The table and the JSON report tell the two apart: each value with all its digits.
  const std::string md = cb::metrics::gate_markdown(r);
  EXPECT_NE(md.find("| bytes_loaded | 9007199254740992 | 9007199254740993 |"), std::string::npos)
      << md;
  const json j = cb::metrics::gate_json(r);
  EXPECT_EQ(j["checks"][0]["baseline"], json::parse("9007199254740992"));
  EXPECT_EQ(j["checks"][0]["current"], json::parse("9007199254740993"));
  EXPECT_NE(j["checks"][0]["baseline"], j["checks"][0]["current"]);

  // Negative integers (int64), either side of zero, and the two types' extremes, whose
  // difference passes 2^64.
  const std::string neg_lo = R"({"x": -9007199254740993})", neg_hi = R"({"x": -9007199254740992})";
  EXPECT_EQ(gate(neg_lo, neg_hi, "x=0:higher").checks[0].verdict, Verdict::Improved);
  EXPECT_EQ(gate(neg_hi, neg_lo, "x=0:higher").checks[0].verdict, Verdict::Regression);
  const std::string min = R"({"x": -9223372036854775808})", max = R"({"x": 18446744073709551615})";
  EXPECT_EQ(gate(min, max, "x=0:higher").checks[0].verdict, Verdict::Improved);
  EXPECT_EQ(gate(max, min, "x=0:higher").checks[0].verdict, Verdict::Regression);
  EXPECT_EQ(gate(min, min, "x=0").regressions, 0);
  EXPECT_EQ(gate(max, max, "x=0").regressions, 0);
}

TEST(JsonPathTest, DottedLookup) {
  const json j = {{"a", {{"b", 1}}}, {"c", 2}};
  ASSERT_NE(cb::metrics::json_at(j, "a.b"), nullptr);
  EXPECT_EQ(*cb::metrics::json_at(j, "a.b"), 1);
  EXPECT_EQ(cb::metrics::json_at(j, "a.x"), nullptr);
  EXPECT_EQ(cb::metrics::json_at(j, "c.d"), nullptr);
  EXPECT_EQ(cb::metrics::json_at(j, "a..b"), nullptr);
  EXPECT_EQ(cb::metrics::json_at(j, ""), nullptr);
}

TEST(JsonPathTest, ListsByIndex) {
  // An evaluation's per-method results are a list: "results.1.ppl" is the second one's.
  const json j = {{"results", json::array({{{"ppl", 3.9}}, {{"ppl", 4.1}}})}};
  ASSERT_NE(cb::metrics::json_at(j, "results.1.ppl"), nullptr);
  EXPECT_EQ(*cb::metrics::json_at(j, "results.1.ppl"), 4.1);
  EXPECT_EQ(*cb::metrics::json_at(j, "results.0.ppl"), 3.9);
  EXPECT_EQ(cb::metrics::json_at(j, "results.2.ppl"), nullptr);
  EXPECT_EQ(cb::metrics::json_at(j, "results.-1.ppl"), nullptr);
  EXPECT_EQ(cb::metrics::json_at(j, "results.x"), nullptr);
  EXPECT_EQ(cb::metrics::json_at(j, "results.99999999999999999999"), nullptr);
}

}  // namespace
