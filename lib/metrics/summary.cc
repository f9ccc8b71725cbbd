#include "lib/metrics/summary.h"

#include <string>

#include "lib/core/error.h"
#include "lib/metrics/json_path.h"
#include "lib/metrics/stats.h"

namespace cb::metrics {
namespace {

using nlohmann::json;

/// a / b, or 0 when b is 0 (empty runs summarize to zeros, never to inf or NaN).
double ratio(double a, double b) {
  return b != 0.0 ? a / b : 0.0;
}

/// {mean, median, p90, p99} of seconds, in milliseconds.
json latency_ms(std::vector<double> seconds) {
  for (double& s : seconds) s *= 1000.0;
  const Distribution d = distribution(std::move(seconds));
  return {{"mean", d.mean}, {"median", d.median}, {"p90", d.p90}, {"p99", d.p99}};
}

double as_double(uint64_t v) {
  return static_cast<double>(v);
}
double as_double(int64_t v) {
  return static_cast<double>(v);
}

/// Capacity of the named tier when it is present, else 0.
uint64_t present_capacity(const RunTotals& totals, const std::string& name) {
  uint64_t c = 0;
  for (const TierTotals& t : totals.tiers)
    if (t.name == name && t.present) c += t.capacity_bytes;
  return c;
}

/// The number at `path` (dotted) of `summary`, or a cb::Error naming `which` and the path.
double number_at(const json& summary, const std::string& which, const std::string& path) {
  const json* node = json_at(summary, path);
  if (node == nullptr)
    throw make_error("compare_summaries", "the " + which + " summary has no '" + path + "'",
                     "pass two objects written by summarize()");
  if (!node->is_number())
    throw make_error("compare_summaries",
                     "'" + path + "' of the " + which + " summary is not a number",
                     "pass two objects written by summarize()");
  return node->get<double>();
}

/// a / b, or null when b is 0.
json ratio_or_null(double a, double b) {
  return b != 0.0 ? json(a / b) : json(nullptr);
}

}  // namespace

json summarize(const std::vector<TurnRecord>& records, const RunTotals& totals,
               const Prices& prices) {
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t completed = 0, input_tokens = 0, output_tokens = 0, ready_tokens = 0;
  int64_t with_history = 0, hits_hbm = 0, hits_dram = 0, hits_ssd = 0;
  int64_t reused = 0, recomputed = 0, truncated = 0;
  uint64_t bytes_loaded = 0, bytes_saved = 0;
  double preload_stall = 0, save_stall = 0, load = 0;

  for (const TurnRecord& r : records) {
    if (r.warmup) continue;
    ++completed;
    input_tokens += r.new_tokens;
    output_tokens += r.output_tokens;
    ready_tokens += r.history_tokens + r.new_tokens;
    ttft.push_back(r.first_token_s - r.arrival_s);
    e2el.push_back(r.finish_s - r.arrival_s);
    if (r.output_tokens > 1)
      tpot.push_back((r.finish_s - r.first_token_s) / static_cast<double>(r.output_tokens - 1));
    for (size_t i = 1; i < r.token_times_s.size(); ++i)
      itl.push_back(r.token_times_s[i] - r.token_times_s[i - 1]);

    if (r.tier == "hbm") {
      ++hits_hbm;
    } else if (r.tier == "dram") {
      ++hits_dram;
    } else if (r.tier == "ssd") {
      ++hits_ssd;
    } else if (r.tier != "miss" && r.tier != "none") {
      throw make_error("metrics::summarize",
                       "turn " + std::to_string(r.turn) + " of session " +
                           std::to_string(r.session) + " has unknown tier '" + r.tier + "'",
                       "a turn's tier is one of none, miss, hbm, dram, ssd");
    }
    if (r.tier != "none") ++with_history;
    reused += r.reused_tokens;
    recomputed += r.recomputed_tokens;
    truncated += r.truncated_tokens;
    bytes_loaded += r.bytes_loaded;
    bytes_saved += r.bytes_saved;
    preload_stall += r.preload_stall_s;
    save_stall += r.save_stall_s;
    load += r.load_s;
  }

  const double duration = totals.duration_s;
  const double hist = as_double(with_history);
  json j;
  j["completed"] = completed;
  j["total_input_tokens"] = input_tokens;
  j["total_output_tokens"] = output_tokens;
  j["duration_s"] = duration;
  j["request_throughput"] = ratio(as_double(completed), duration);
  j["input_throughput"] = ratio(as_double(input_tokens), duration);
  j["output_throughput"] = ratio(as_double(output_tokens), duration);
  j["prefill_throughput"] = ratio(as_double(ready_tokens), totals.prefill_time_s);
  j["gpu_time_s"] = totals.gpu_time_s;
  j["gpus"] = totals.gpus;
  j["ttft_ms"] = latency_ms(std::move(ttft));
  j["tpot_ms"] = latency_ms(std::move(tpot));
  j["itl_ms"] = latency_ms(std::move(itl));
  j["e2el_ms"] = latency_ms(std::move(e2el));

  j["turns_with_history"] = with_history;
  j["hit_rate"] = {{"overall", ratio(as_double(hits_hbm + hits_dram + hits_ssd), hist)},
                   {"hbm", ratio(as_double(hits_hbm), hist)},
                   {"dram", ratio(as_double(hits_dram), hist)},
                   {"ssd", ratio(as_double(hits_ssd), hist)}};
  j["reused_tokens"] = reused;
  j["recomputed_tokens"] = recomputed;
  j["truncated_tokens"] = truncated;
  j["bytes_loaded"] = bytes_loaded;
  j["bytes_saved"] = bytes_saved;
  j["preload_stall_s"] = {{"total", preload_stall},
                          {"mean_ms", ratio(preload_stall * 1000.0, as_double(completed))}};
  j["save_stall_s"] = save_stall;
  j["load_s"] = load;

  json tiers = json::object();
  for (const TierTotals& t : totals.tiers) {
    tiers[t.name] = {{"present", t.present},
                     {"capacity_bytes", t.capacity_bytes},
                     {"hits", t.hits},
                     {"bytes_read", t.bytes_read},
                     {"bytes_written", t.bytes_written},
                     {"read_gbps", ratio(as_double(t.bytes_read) / 1e9, t.read_s)},
                     {"write_gbps", ratio(as_double(t.bytes_written) / 1e9, t.write_s)}};
  }
  j["tiers"] = tiers;

  const double hours = duration / 3600.0;
  const double gpu_usd =
      static_cast<double>(totals.gpus) * totals.gpu_time_s / 3600.0 * prices.gpu_usd_per_hour;
  const double dram_usd =
      as_double(present_capacity(totals, "dram")) / 1e9 * hours * prices.dram_usd_per_gb_hour;
  const double ssd_usd =
      as_double(present_capacity(totals, "ssd")) / 1e9 * hours * prices.ssd_usd_per_gb_hour;
  j["cost_usd"] = {{"gpu", gpu_usd},
                   {"dram", dram_usd},
                   {"ssd", ssd_usd},
                   {"total", gpu_usd + dram_usd + ssd_usd}};
  j["prices"] = {{"gpu_usd_per_hour", prices.gpu_usd_per_hour},
                 {"dram_usd_per_gb_hour", prices.dram_usd_per_gb_hour},
                 {"ssd_usd_per_gb_hour", prices.ssd_usd_per_gb_hour}};
  return j;
}

json compare_summaries(const json& base, const json& current) {
  const double ttft_b = number_at(base, "base", "ttft_ms.mean");
  const double ttft_c = number_at(current, "current", "ttft_ms.mean");
  const double pt_b = number_at(base, "base", "prefill_throughput");
  const double pt_c = number_at(current, "current", "prefill_throughput");
  const double gpu_b = number_at(base, "base", "gpu_time_s");
  const double gpu_c = number_at(current, "current", "gpu_time_s");
  const double cost_b = number_at(base, "base", "cost_usd.total");
  const double cost_c = number_at(current, "current", "cost_usd.total");
  const double hit_b = number_at(base, "base", "hit_rate.overall");
  const double hit_c = number_at(current, "current", "hit_rate.overall");
  json j;
  j["ttft_reduction_pct"] = ttft_b != 0.0 ? json((1.0 - ttft_c / ttft_b) * 100.0) : json(nullptr);
  j["prefill_throughput_x"] = ratio_or_null(pt_c, pt_b);
  j["gpu_time_x"] = ratio_or_null(gpu_b, gpu_c);
  j["cost_saving_pct"] = cost_b != 0.0 ? json((1.0 - cost_c / cost_b) * 100.0) : json(nullptr);
  j["hit_rate"] = {{"base", hit_b}, {"current", hit_c}};
  return j;
}

}  // namespace cb::metrics
