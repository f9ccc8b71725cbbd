// Ablation studies: each a grid of replays (real, on either backend, or sim) summarized per point.
#include "eval/ablate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

#include "eval/replay.h"
#include "eval/sim_replay.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/core/sysinfo.h"
#include "lib/engine/engine.h"
#include "lib/metrics/stats.h"
#include "lib/store/size_parse.h"

namespace cb::eval {
namespace {

// The numbers a study may report, from a replay summary (metrics::summarize).
nlohmann::json values_of(const nlohmann::json& s) {
  const double gpu = s["gpu_time_s"].get<double>();
  return {{"turns", s["completed"].get<double>()},
          {"ttft_mean_ms", s["ttft_ms"]["mean"].get<double>()},
          {"ttft_p90_ms", s["ttft_ms"]["p90"].get<double>()},
          {"gpu_time_s", gpu},
          {"gpu_time_ms", 1e3 * gpu},
          {"duration_s", s["duration_s"].get<double>()},
          {"prefill_throughput", s["prefill_throughput"].get<double>()},
          {"request_throughput", s["request_throughput"].get<double>()},
          {"hit", s["hit_rate"]["overall"].get<double>()},
          {"hit_hbm", s["hit_rate"]["hbm"].get<double>()},
          {"hit_dram", s["hit_rate"]["dram"].get<double>()},
          {"hit_ssd", s["hit_rate"]["ssd"].get<double>()},
          {"preload_stall_ms", 1e3 * s["preload_stall_s"]["total"].get<double>()},
          {"save_stall_ms", 1e3 * s["save_stall_s"].get<double>()},
          {"cost_usd", s["cost_usd"]["total"].get<double>()}};
}

// A length trace of `sessions` conversations with the given (input, output) turns.
datasets::Trace micro_trace(int sessions, const std::vector<std::pair<int64_t, int64_t>>& turns) {
  datasets::Trace t;
  t.kind = "lengths";
  for (int i = 0; i < sessions; ++i) {
    datasets::TraceSession s;
    s.id = static_cast<uint64_t>(i);
    for (const auto& [in, out] : turns) {
      datasets::TraceTurn tt;
      tt.input_tokens = in;
      tt.output_tokens = out;
      s.turns.push_back(tt);
    }
    t.sessions.push_back(std::move(s));
  }
  return t;
}

/// The arrival-rate study's sessions per second (Figure 25), whatever --rate says.
constexpr std::array<double, 4> kArrivalRates = {0.5, 1.0, 1.5, 2.0};

int64_t window(const AblateOptions& a) {
  return a.ctx > 0 ? a.ctx : a.config.max_context;
}

/// "llama-13b has a 2048-token window", or "--ctx 512 gives a 512-token window".
std::string window_said(const AblateOptions& a) {
  return (a.ctx > 0 ? "--ctx " + std::to_string(a.ctx) + " gives" : a.config.name + " has") +
         " a " + std::to_string(window(a)) + "-token window";
}

// The refusal of a study that needs a window of `need` tokens when window(a) is shorter: a
// larger --ctx where the model's window allows it, else another model.
UsageError window_refusal(const AblateOptions& a, const std::string& study, int64_t need) {
  const std::string n = std::to_string(need);
  return make_usage_error(
      "ablate", window_said(a) + "; " + study + " needs a window of " + n + " tokens",
      need > a.config.max_context
          ? "use a model whose window is " + n + " tokens or more (" + a.config.name + "'s is " +
                std::to_string(a.config.max_context) + ")"
          : "use --ctx " + n + " or more (at most " + std::to_string(a.config.max_context) +
                "; 0: the model's window)");
}

class Runner {
 public:
  explicit Runner(const AblateOptions& a) : a_(a) {}

  ReplayOptions base() const {
    ReplayOptions o;
    o.seed = a_.seed;
    o.max_output_tokens = a_.max_output_tokens;
    o.engine.ctx = a_.ctx;
    o.engine.read_buffer_layers = -1;
    o.engine.native_kv_entries = a_.native_kv_entries;
    o.engine.sched.seed = a_.seed;
    o.engine.sched.max_batch = a_.max_batch;
    // At least a token a sequence per step (the scheduler refuses fewer); ablate has no option
    // for it, and the default 2048 serves every --max-batch up to 2048.
    o.engine.sched.max_batch_tokens =
        std::max<int64_t>(o.engine.sched.max_batch_tokens, a_.max_batch);
    o.engine.sched.rate = a_.rate;
    o.engine.sched.think = a_.think;
    o.store.policy = "sched";
    // The paper's mechanisms only: the demotion budget (not in the paper) would make the hit
    // rates of the eviction and capacity studies measure the SSD's write queue too.
    o.store.drop_slow_demotions = false;
    // Real mode: the study sizes the tier to its trace (fit_dram).
    o.store.dram_bytes = a_.sim ? ablation_sim_dram_bytes(a_.profile) : (256ull << 20);
    return o;
  }

  // Real mode: a DRAM tier that keeps the entry of every session of `t`, so the study
  // measures loading and saving rather than eviction (a full tier would also make saves wait
  // for the ones in flight before it: async-save's asynchronous saves would turn synchronous).
  // The tier, and the engine's write buffers for every job that can be under way at once
  // (EngineConfig::write_buffer_jobs: a second turn needs larger ones than its first), are
  // allocated, zeroed and locked up front for every run, before its clock starts: a need beyond
  // three quarters of the memory free with the model loaded is refused with what to change.
  // Sim mode keeps the profile's DRAM.
  void fit_dram(const datasets::Trace& t, ReplayOptions* o) const {
    if (a_.sim) return;
    const auto sessions = trace_sessions(t, a_.config.vocab_size, o->seed, o->max_output_tokens);
    const size_t row = engine::entry_row_bytes(*a_.model, o->engine);
    const uint64_t tier =
        ablation_dram_bytes(sessions, window(a_), a_.config.n_layers, row, o->store.chunk_bytes);
    // A job holds its buffers from prepare() until its save commits: the running batch, the
    // waiting jobs prepared ahead of admission and the saves still landing (at most a batch)
    // at once. Where that many do not fit, the running and prepared ones (the rest are made
    // as needed).
    const uint64_t per_job =
        2 * engine::write_buffer_bytes(sessions, a_.config.n_layers, row, window(a_));
    // What is free now, with the model loaded (its weights are in host memory on the CPU).
    const uint64_t avail = available_memory_bytes();
    const int least = o->engine.sched.max_batch + o->engine.preload_jobs;
    int jobs = least + o->engine.sched.max_batch;
    if (avail > 0 && per_job > 0 && avail / 4 * 3 > tier) {
      const uint64_t fit = (avail / 4 * 3 - tier) / per_job;
      jobs = static_cast<int>(std::max<uint64_t>(least, std::min<uint64_t>(jobs, fit)));
    }
    o->engine.write_buffer_jobs = jobs;
    const uint64_t buffers = static_cast<uint64_t>(jobs) * per_job;
    const uint64_t need = tier + buffers;
    if (avail > 0 && need > avail / 4 * 3) {
      throw make_error(
          "ablate",
          a_.study + " with " + a_.config.name + " keeps " + std::to_string(t.sessions.size()) +
              " sessions' KV entries in a DRAM tier of " + store::format_size(tier) + " and " +
              store::format_size(buffers) + " of write buffers (entries of " +
              (o->engine.native_kv_entries ? "the backend's KV type" : "fp32") +
              "), more than three quarters of the " + store::format_size(avail) +
              " of memory this machine has free with the model loaded",
          "lower --batch (or --sessions), use --kv-entries native on the GPU (half the bytes), "
          "or run it with --mode sim");
    }
    o->store.dram_bytes = tier;
  }

  // A micro study's batch: all requests at once, `batch` per step, `prepared` prepared ahead;
  // `warmup` first turns only fill the store (5 s of think time lets their saves commit).
  ReplayOptions micro(int batch, int64_t tokens_per_seq, int prepared, int warmup) const {
    ReplayOptions o = base();
    o.engine.sched.rate = 0;
    o.engine.sched.think = sched::ThinkTime::parse("const:5");
    o.engine.sched.max_batch = batch;
    o.engine.sched.max_batch_tokens = tokens_per_seq * batch;
    o.engine.preload_jobs = prepared;
    o.engine.warmup_turns = warmup;
    o.max_output_tokens = 0;  // the study's own answer lengths (--max-output-tokens: traces)
    return o;
  }

  // One point: the replay's values (real mode: each the median over the repetitions).
  nlohmann::json run(const datasets::Trace& trace, engine::Mode mode, const ReplayOptions& o,
                     const std::string& what, std::vector<metrics::TurnRecord>* records = nullptr) {
    std::vector<nlohmann::json> samples;
    double steal = -1;  // the largest cpu_steal of the repetitions (real mode, /proc/stat read)
    if (a_.sim) {
      SimOptions so;
      so.profile = a_.profile;
      const ReplayRun r = run_sim_replay(a_.config, sim_sessions(trace, o.max_output_tokens), mode,
                                         o, so, a_.progress);
      samples.push_back(values_of(r.summary));
      if (records) *records = r.result.records;
    } else {
      const auto sessions =
          trace_sessions(trace, a_.config.vocab_size, o.seed, o.max_output_tokens);
      for (int rep = 0; rep < std::max(a_.reps, 1); ++rep) {
        const ReplayRun r = run_replay(*a_.model, sessions, mode, o, a_.progress);
        samples.push_back(values_of(r.summary));
        steal = std::max(steal, r.summary.value("cpu_steal", -1.0));
        if (records && rep == 0) *records = r.result.records;
      }
    }
    nlohmann::json v;
    for (const auto& [k, x] : samples[0].items()) {
      std::vector<double> xs;
      for (const auto& s : samples) xs.push_back(s[k].get<double>());
      v[k] = metrics::median(xs);
    }
    // The most of the machine's CPU the hypervisor took during any repetition (steal_note).
    if (steal >= 0) v["cpu_steal_max"] = steal;
    if (a_.log) {
      char b[256];
      std::snprintf(b, sizeof b, "%s: %s, GPU time %.3f s, TTFT mean %.1f ms, hit %.3f",
                    a_.study.c_str(), what.c_str(), v["gpu_time_s"].get<double>(),
                    v["ttft_mean_ms"].get<double>(), v["hit"].get<double>());
      a_.log(b);
    }
    return v;
  }

  const AblateOptions& opts() const { return a_; }

 private:
  const AblateOptions& a_;
};

std::string fmt_bytes(double b) {
  char s[32];
  if (b >= 1e12) {
    std::snprintf(s, sizeof s, "%gTB", b / 1e12);
  } else {
    std::snprintf(s, sizeof s, "%gGB", b / 1e9);
  }
  return s;
}

// Figure 18: a batch of requests whose prompts are 1K tokens, split history/new.
void recompute_vs_ca(Runner& run, AblateResult* r) {
  const AblateOptions& a = run.opts();
  r->title = "Recomputation vs CachedAttention: 1K-token prompts split history/new";
  r->figure = "Figure 18";
  r->x_title = "history tokens (of 1000)";
  r->metrics = {{"gpu_time_ms", "batch prefill time (ms)", 1, true},
                {"ttft_mean_ms", "TTFT mean (ms)", 1, false},
                {"preload_stall_ms", "preload stall (ms)", 1, false}};
  if (window(a) < 1001) {
    throw window_refusal(a, "recompute-vs-ca (1K-token prompts)", 1001);
  }
  for (int64_t hist = 500; hist <= 900; hist += 100) {
    // Turn 1 leaves `hist` tokens of context (its answer's last token is fed with turn 2).
    const datasets::Trace t = micro_trace(a.batch, {{hist, 1}, {1000 - hist - 1, 1}});
    ReplayOptions o = run.micro(a.batch, 1000, a.batch, a.batch);
    run.fit_dram(t, &o);
    r->config["dram_bytes"] = o.store.dram_bytes;
    const std::string label = std::to_string(hist) + "/" + std::to_string(1000 - hist);
    struct V {
      const char* series;
      engine::Mode mode;
      bool preload;
    };
    for (const V& v :
         {V{"RE", engine::Mode::RE, true}, V{"CA (no preload)", engine::Mode::CA, false},
          V{"CA (preload)", engine::Mode::CA, true}}) {
      o.engine.preload = v.preload;
      r->rows.push_back({v.series, label, static_cast<double>(hist),
                         run.run(t, v.mode, o, std::string(v.series) + " history/new " + label)});
    }
  }
  r->config["prompt_tokens"] = 1000;
  r->config["batch"] = a.batch;
}

// Figure 19: 1K tokens of history, 100 new, read buffers of 0-15 layers.
void preload(Runner& run, AblateResult* r) {
  const AblateOptions& a = run.opts();
  r->title = "Layer-wise preloading and the read buffer: 1K history, 100 new tokens";
  r->figure = "Figure 19";
  r->x_title = "read buffer (layers)";
  r->categorical = true;
  r->metrics = {{"gpu_time_ms", "prefill time (ms)", 1, true},
                {"preload_stall_ms", "preload stall (ms)", 1, true},
                {"ttft_mean_ms", "TTFT mean (ms)", 1, false}};
  if (window(a) < 1101) {
    throw window_refusal(a, "preload (1K-token histories and 100 new tokens)", 1101);
  }
  // Twice the batch: the measured turns all arrive at once (long after the warm-up turns and
  // their saves; an idle gap costs nothing), so the second half waits while the first
  // computes, its read buffer filling behind the first half's loads. With a constant think
  // time they would come a warm-up prefill apart, and the second half would never wait.
  const datasets::Trace t = micro_trace(2 * a.batch, {{1000, 1}, {99, 1}});
  ReplayOptions o = run.micro(a.batch, 1000, 2 * a.batch, 2 * a.batch);
  o.engine.sched.think = sched::ThinkTime::parse("until:3600");
  run.fit_dram(t, &o);
  r->config["dram_bytes"] = o.store.dram_bytes;
  o.engine.preload = false;
  r->rows.push_back({"CA", "no preload", 0, run.run(t, engine::Mode::CA, o, "no preload")});
  o.engine.preload = true;
  double x = 1;
  for (int layers : {0, 5, 10, 15}) {
    const int eff = std::min(layers, a.config.n_layers);
    o.engine.read_buffer_layers = eff;
    std::string label = std::to_string(layers);
    if (eff != layers) label += " (= " + std::to_string(eff) + ", all)";
    r->rows.push_back(
        {"CA", label, x++, run.run(t, engine::Mode::CA, o, "read buffer " + label + " layers")});
    if (eff != layers) {
      r->notes.push_back(a.config.name + " has " + std::to_string(a.config.n_layers) +
                         " layers: a read buffer of " + std::to_string(layers) +
                         " layers holds all of them");
    }
  }
  r->notes.push_back(
      "the two halves' measured turns arrive together: the buffer fills while the second half "
      "waits, behind the first half's loads; equal rows mean the load link bounds both "
      "batches, so there is no compute to hide loading behind");
  r->config["history_tokens"] = 1000;
  r->config["new_tokens"] = 100;
  r->config["batch"] = a.batch;
  r->config["requests"] = 2 * a.batch;
}

// Figure 20: prompts of 1K-1.6K tokens, 20 decode steps, saving synchronous vs asynchronous.
void async_save(Runner& run, AblateResult* r) {
  const AblateOptions& a = run.opts();
  r->title = "Asynchronous saving: prompts of 1K-1.6K tokens, 20 decode steps";
  r->figure = "Figure 20";
  r->x_title = "prompt tokens";
  r->metrics = {{"duration_s", "execution time (s)", 3, true},
                {"save_stall_ms", "save stall (ms)", 1, false},
                {"gpu_time_s", "GPU time (s)", 3, false}};
  for (int64_t p = 1000; p <= 1600; p += 200) {
    if (p + 20 > window(a)) {
      r->notes.push_back("prompt " + std::to_string(p) + " skipped: " + window_said(a));
      continue;
    }
    // Four batches: a synchronous save holds up the batch after it.
    const datasets::Trace t = micro_trace(4 * a.batch, {{p, 20}});
    ReplayOptions o = run.micro(a.batch, p + 1, 4, 0);
    run.fit_dram(t, &o);
    r->config["dram_bytes"] = o.store.dram_bytes;
    for (bool async : {false, true}) {
      o.engine.async_save = async;
      const char* series = async ? "async save" : "sync save";
      r->rows.push_back(
          {series, std::to_string(p), static_cast<double>(p),
           run.run(t, engine::Mode::CA, o, std::string(series) + " prompt " + std::to_string(p))});
    }
  }
  if (r->rows.empty()) {
    throw window_refusal(a, "async-save (1K-token prompts and 20 decode steps)", 1020);
  }
  r->config["output_tokens"] = 20;
  r->config["batch"] = a.batch;
  r->config["requests"] = 4 * a.batch;
}

const datasets::Trace& need_trace(const AblateOptions& a) {
  if (a.trace == nullptr) throw make_error("ablate", a.study + " needs a trace");
  return *a.trace;
}

// Figure 21: scheduler-aware vs LRU vs FIFO (and Belady) at 128 GB DRAM, 2 TB and 10 TB SSD.
void eviction(Runner& run, AblateResult* r) {
  r->title = "Eviction: scheduler-aware vs LRU vs FIFO (and the Belady bound)";
  r->figure = "Figure 21";
  r->x_title = "policy";
  r->categorical = true;
  r->metrics = {{"hit", "hit rate", 3, true},
                {"hit_dram", "DRAM hits", 3, false},
                {"hit_ssd", "SSD hits", 3, false},
                {"gpu_time_s", "GPU time (s)", 0, true}};
  const datasets::Trace& t = need_trace(run.opts());
  double x = 0;
  for (const char* pol : {"sched", "lru", "fifo", "optimal"}) {
    for (double ssd : {2e12, 10e12}) {
      ReplayOptions o = run.base();
      o.store.policy = pol;
      o.store.ssd_bytes = static_cast<uint64_t>(ssd);
      const std::string series =
          fmt_bytes(static_cast<double>(o.store.dram_bytes)) + " + " + fmt_bytes(ssd);
      r->rows.push_back({series, policy_name(pol), x,
                         run.run(t, engine::Mode::CA, o, std::string(pol) + " " + series)});
    }
    ++x;
  }
}

// Figure 22: CachedAttention's truncation (KV kept, positions re-embedded) vs invalidating
// the stored KV on overflow (OF), with recomputation as reference.
void truncation(Runner& run, AblateResult* r) {
  const AblateOptions& a = run.opts();
  r->title = "Context overflow: CachedAttention truncation vs overflow invalidation (OF)";
  r->figure = "Figure 22";
  r->x_title = "mode";
  r->categorical = true;
  r->metrics = {{"hit", "hit rate", 3, true},
                {"gpu_time_s", "GPU time (s)", 2, true},
                {"ttft_mean_ms", "TTFT mean (ms)", 1, false}};
  const datasets::Trace& t = need_trace(a);
  ReplayOptions o = run.base();
  if (a.sim) o.store.ssd_bytes = ablation_sim_ssd_bytes(a.profile);
  run.fit_dram(t, &o);
  if (!a.sim) r->config["dram_bytes"] = o.store.dram_bytes;
  double x = 0;
  for (engine::Mode m : {engine::Mode::CA, engine::Mode::OF, engine::Mode::RE}) {
    const std::string name = m == engine::Mode::CA   ? "CA (truncate KV)"
                             : m == engine::Mode::OF ? "OF (invalidate)"
                                                     : "RE (recompute)";
    r->rows.push_back({"", name, x++, run.run(t, m, o, name)});
  }
}

// Figure 23: hit rate and throughput vs capacity as a share of CCpUT, one-hour TTL.
void capacity(Runner& run, AblateResult* r) {
  const AblateOptions& a = run.opts();
  r->title = "Store capacity as a share of CCpUT (one-hour TTL)";
  r->figure = "Figure 23";
  r->x_title = "capacity / CCpUT";
  r->metrics = {{"hit", "hit rate", 3, true},
                {"prefill_throughput", "prefill throughput (tok/s)", 0, true},
                {"gpu_time_s", "GPU time (s)", 0, false}};
  const datasets::Trace& t = need_trace(a);
  const double ttl = 3600;
  ReplayOptions o = run.base();
  o.store.ttl = ttl;
  const uint64_t dram = o.store.dram_bytes;
  o.store.dram_bytes = 1000000000000000ull;  // 1 PB: nothing is evicted but by the TTL
  std::vector<metrics::TurnRecord> recs;
  const nlohmann::json unbounded =
      run.run(t, engine::Mode::CA, o, "unbounded store (measures CCpUT)", &recs);
  const double row = a.config.kv_dim() * (a.sim ? a.profile.kv_bytes_per_element : 4.0);
  const auto per_chunk = static_cast<int64_t>(static_cast<double>(o.store.chunk_bytes) / row);
  const double cc = ccput_bytes(recs, ttl, a.config.n_layers, per_chunk, o.store.chunk_bytes);
  if (!(cc > 0)) throw make_error("ablate", "capacity: the trace stores nothing");
  r->config["ccput_bytes"] = cc;
  r->config["ttl_s"] = ttl;
  r->config["unbounded_hit_rate"] = unbounded["hit"];
  char hit[32];
  std::snprintf(hit, sizeof hit, "%.3f", unbounded["hit"].get<double>());
  r->notes.push_back("CCpUT = " + fmt_bytes(cc) +
                     ": the peak store bytes (whole chunks) of the conversations active within "
                     "the TTL, measured by an unbounded replay, which hit " +
                     hit + "; DRAM first, the rest on SSD");
  for (double f : {0.1, 0.2, 0.3, 0.5, 0.7, 1.0}) {
    const double c = f * cc;
    // Whole chunks (a tier of less than one holds nothing and is refused): 0 below one.
    const uint64_t chunk = o.store.chunk_bytes;
    const auto whole = [chunk](double b) { return static_cast<uint64_t>(b) / chunk * chunk; };
    o.store.dram_bytes = whole(std::min<double>(static_cast<double>(dram), c));
    o.store.ssd_bytes = whole(c - static_cast<double>(o.store.dram_bytes));
    char label[32];
    std::snprintf(label, sizeof label, "%.1f", f);
    r->rows.push_back(
        {"CA", label, f, run.run(t, engine::Mode::CA, o, std::string("capacity ") + label)});
  }
}

// Figure 24: where the store keeps KV: HBM only (10 GB), + DRAM, + SSD.
void medium(Runner& run, AblateResult* r) {
  const AblateOptions& a = run.opts();
  r->title = "Storage media: HBM only vs HBM + DRAM vs HBM + DRAM + SSD";
  r->figure = "Figure 24";
  r->x_title = "store";
  r->categorical = true;
  r->metrics = {{"hit", "hit rate", 3, true},
                {"ttft_mean_ms", "TTFT mean (ms)", 0, true},
                {"gpu_time_s", "GPU time (s)", 0, false},
                {"cost_usd", "cost (USD)", 2, false}};
  const datasets::Trace& t = need_trace(a);
  const ReplayOptions b = run.base();
  struct M {
    const char* label;
    uint64_t dram, ssd;
  };
  double x = 0;
  const uint64_t ssd = ablation_sim_ssd_bytes(a.profile);
  for (const M& m : {M{"HBM 10GB", 0, 0}, M{"HBM + DRAM", b.store.dram_bytes, 0},
                     M{"HBM + DRAM + SSD", b.store.dram_bytes, ssd}}) {
    ReplayOptions o = b;
    o.store.hbm_bytes = 10000000000ull;
    o.store.dram_bytes = m.dram;
    o.store.ssd_bytes = m.ssd;
    r->rows.push_back({"", m.label, x++, run.run(t, engine::Mode::CA, o, m.label)});
  }
  r->rows.push_back({"", "RE (no store)", x, run.run(t, engine::Mode::RE, b, "RE")});
}

// Figure 25: 0.5 to 2.0 new sessions per second, CA vs RE.
void arrival_rate(Runner& run, AblateResult* r) {
  const AblateOptions& a = run.opts();
  r->title = "Arrival rate: 0.5-2.0 sessions per second";
  r->figure = "Figure 25";
  r->x_title = "sessions per second";
  r->metrics = {{"hit", "hit rate", 3, true},
                {"ttft_mean_ms", "TTFT mean (ms)", 0, true},
                {"prefill_throughput", "prefill throughput (tok/s)", 0, true},
                {"gpu_time_s", "GPU time (s)", 0, true}};
  const datasets::Trace& t = need_trace(a);
  for (double rate : kArrivalRates) {
    ReplayOptions o = run.base();
    o.engine.sched.rate = rate;
    o.store.ssd_bytes = ablation_sim_ssd_bytes(a.profile);
    char label[16];
    std::snprintf(label, sizeof label, "%.1f", rate);
    for (engine::Mode m : {engine::Mode::CA, engine::Mode::RE}) {
      const std::string series = engine::mode_name(m);
      r->rows.push_back(
          {series == "ca" ? "CA" : "RE", label, rate, run.run(t, m, o, series + " rate " + label)});
    }
  }
}

}  // namespace

// The paper's host (CachedAttention, ATC'24, section 5.1), for a profile that gives no size.
constexpr uint64_t kPaperDramBytes = 128000000000ull;
constexpr uint64_t kPaperSsdBytes = 10000000000000ull;

uint64_t ablation_sim_dram_bytes(const sim::HardwareProfile& p) {
  return p.dram_bytes > 0 ? static_cast<uint64_t>(p.dram_bytes) : kPaperDramBytes;
}

uint64_t ablation_sim_ssd_bytes(const sim::HardwareProfile& p) {
  return p.ssd_bytes > 0 ? static_cast<uint64_t>(p.ssd_bytes) : kPaperSsdBytes;
}

bool ablation_uses_profile_ssd(const std::string& study) {
  return study == "truncation" || study == "medium" || study == "arrival-rate";
}

std::vector<std::string> ablation_profile_notes(const sim::HardwareProfile& p,
                                                const std::string& study) {
  // The same words for every study, so that a CLI running several says each once.
  std::vector<std::string> notes;
  const auto none = [&](const char* what, const char* field) {
    return "the profile " + p.label() + " gives no " + what + " size (" + field +
           " 0, as calibrate writes), so ";
  };
  if (!(p.dram_bytes > 0)) {
    notes.push_back(none("DRAM", "dram_bytes") + "the studies use the paper's " +
                    fmt_bytes(static_cast<double>(kPaperDramBytes)) + " of DRAM");
  }
  if (!(p.ssd_bytes > 0) && ablation_uses_profile_ssd(study)) {
    notes.push_back(none("SSD", "ssd_bytes") +
                    "truncation, medium and arrival-rate use the paper's " +
                    fmt_bytes(static_cast<double>(kPaperSsdBytes)) +
                    " of SSD (eviction and capacity size their own)");
  }
  return notes;
}

const std::vector<std::string>& ablation_studies() {
  static const std::vector<std::string> s = {"recompute-vs-ca", "preload",     "async-save",
                                             "eviction",        "truncation",  "capacity",
                                             "medium",          "arrival-rate"};
  return s;
}

bool ablation_needs_trace(const std::string& study) {
  return !(study == "recompute-vs-ca" || study == "preload" || study == "async-save");
}

bool ablation_runs_real(const std::string& study) {
  return study == "recompute-vs-ca" || study == "preload" || study == "async-save" ||
         study == "truncation";
}

void check_ablation_study(const std::string& study, bool sim) {
  const auto& all = ablation_studies();
  if (std::find(all.begin(), all.end(), study) == all.end()) {
    std::string names;
    for (const auto& s : all) names += (names.empty() ? "" : ", ") + s;
    throw make_usage_error("ablate", "unknown study '" + study + "'", "one of: " + names + ", all");
  }
  if (!sim && !ablation_runs_real(study)) {
    throw make_usage_error("ablate",
                           study +
                               " replays thousands of conversations against 128 GB of DRAM and "
                               "terabytes of SSD; it runs in sim mode only",
                           "use --mode sim");
  }
}

AblateResult run_ablation(const AblateOptions& a) {
  check_ablation_study(a.study, a.sim);
  if (!a.sim && a.model == nullptr) throw make_usage_error("ablate", "real mode needs a model");
  AblateResult r;
  r.study = a.study;
  Runner run(a);
  using Fn = void (*)(Runner&, AblateResult*);
  static const std::map<std::string, Fn> fns = {{"recompute-vs-ca", recompute_vs_ca},
                                                {"preload", preload},
                                                {"async-save", async_save},
                                                {"eviction", eviction},
                                                {"truncation", truncation},
                                                {"capacity", capacity},
                                                {"medium", medium},
                                                {"arrival-rate", arrival_rate}};
  fns.at(a.study)(run, &r);
  if (a.sim && ablation_needs_trace(a.study)) {
    const std::string note = saturation_note(r);
    if (!note.empty()) r.notes.push_back(note);
  }
  if (!a.sim) {
    const std::string note = steal_note(r);
    if (!note.empty()) r.notes.push_back(note);
  }
  r.config["execution"] = a.sim ? "sim" : "real";
  r.config["model"] = a.config.name;
  if (a.sim) {
    // The name the profile gives itself: gate compares `config` key by key, and the same
    // figures under another path are the same profile (the file is the JSON's profile_file).
    r.config["profile"] = a.profile.name;
    // The tiers the profile (or, where it gives none, the paper) sized; the micro studies
    // set dram_bytes themselves (the same value in sim mode).
    if (!r.config.contains("dram_bytes"))
      r.config["dram_bytes"] = ablation_sim_dram_bytes(a.profile);
    if (ablation_uses_profile_ssd(a.study))
      r.config["ssd_bytes"] = ablation_sim_ssd_bytes(a.profile);
    for (const std::string& n : ablation_profile_notes(a.profile, a.study)) r.notes.push_back(n);
  }
  if (!a.sim) r.config["repetitions"] = a.reps;
  r.config["window_tokens"] = window(a);
  if (a.trace != nullptr && ablation_needs_trace(a.study)) {
    r.config["trace"] = {{"path", a.trace->path},
                         {"sessions", a.trace->sessions.size()},
                         {"turns", a.trace->turns()}};
    // arrival-rate sweeps its own rates (its rows' x), whatever --rate says.
    if (a.study == "arrival-rate") {
      r.config["rate"] = kArrivalRates;
    } else {
      r.config["rate"] = a.rate;
    }
    r.config["think_time"] = a.think.describe();
    r.config["max_batch"] = a.max_batch;
  }
  return r;
}

std::string saturation_note(const AblateResult& r) {
  constexpr double kSaturatedMs = 60000;  // no interactive server keeps users a minute waiting
  int saturated = 0, measured = 0;
  double worst = 0;
  for (const AblateRow& row : r.rows) {
    if (!row.values.contains("ttft_mean_ms") || !row.values["ttft_mean_ms"].is_number()) continue;
    ++measured;
    const double t = row.values["ttft_mean_ms"].get<double>();
    if (t > kSaturatedMs) {
      ++saturated;
      worst = std::max(worst, t);
    }
  }
  if (saturated == 0) return "";
  char head[160];
  std::snprintf(head, sizeof head,
                "%d of %d runs saturated (mean TTFT over a minute, up to %.0f s)", saturated,
                measured, worst / 1e3);
  return std::string(head) +
         ": sessions arrived faster than the modelled GPUs served them, so the queue grew through "
         "the run and these numbers describe a server that is always behind (where, for one, "
         "FIFO can keep more histories than LRU: results/paper/README.md). For an unsaturated "
         "server: more GPUs (--gpus), larger batches (--max-batch), " +
         (r.study == "arrival-rate" ? std::string() : "a lower --rate ") +
         "or think times (--think-time)";
}

std::string steal_note(const AblateResult& r) {
  int stolen = 0, measured = 0;
  double worst = 0;
  for (const AblateRow& row : r.rows) {
    const auto it = row.values.find("cpu_steal_max");
    if (it == row.values.end() || !it->is_number()) continue;
    ++measured;
    if (it->get<double>() > kNotableSteal) {
      ++stolen;
      worst = std::max(worst, it->get<double>());
    }
  }
  if (stolen == 0) return "";
  char head[200];
  std::snprintf(head, sizeof head,
                "%d of %s had a repetition during which the hypervisor gave other guests "
                "more than %.0f%% of the machine's CPU time (up to %.0f%%; cpu_steal_max in the "
                "JSON rows)",
                stolen, count_of(measured, "point").c_str(), 100 * kNotableSteal, 100 * worst);
  return std::string(head) +
         ": their times measured those guests too (a median over --reps drops a disturbed "
         "repetition only while most were quiet); rerun when the machine is quiet";
}

uint64_t ablation_dram_bytes(const std::vector<engine::SessionInput>& sessions, int64_t window,
                             int n_layers, uint64_t row_bytes, uint64_t chunk_bytes) {
  const uint64_t per_chunk = std::max<uint64_t>(1, row_bytes == 0 ? 1 : chunk_bytes / row_bytes);
  // At least a chunk per layer's K and V: a tier for one short entry.
  uint64_t total = 2 * static_cast<uint64_t>(std::max(n_layers, 1)) * chunk_bytes;
  for (const engine::SessionInput& s : sessions) {
    int64_t tokens = 0;
    for (const engine::TurnInput& t : s.turns) {
      tokens += static_cast<int64_t>(t.ids.size()) + t.output_tokens;
    }
    if (window > 0) tokens = std::min(tokens, window);
    const uint64_t chunks = (static_cast<uint64_t>(tokens) + per_chunk - 1) / per_chunk + 1;
    total += 2 * static_cast<uint64_t>(n_layers) * chunks * chunk_bytes;
  }
  return total;
}

double ccput_bytes(const std::vector<metrics::TurnRecord>& records, double ttl, int n_layers,
                   int64_t tokens_per_chunk, uint64_t chunk_bytes) {
  const int64_t per_chunk = std::max<int64_t>(tokens_per_chunk, 1);
  const auto entry_bytes = [&](int64_t tokens) {
    return 2.0 * n_layers * static_cast<double>((tokens + per_chunk - 1) / per_chunk) *
           static_cast<double>(chunk_bytes);
  };
  // Per session, its turns in finish order; the entry after a turn lives until the next
  // turn's save replaces it, the last one until finish + ttl.
  std::map<uint64_t, std::vector<const metrics::TurnRecord*>> by_session;
  for (const auto& rec : records) by_session[rec.session].push_back(&rec);
  std::vector<std::pair<double, double>> events;  // (time, +/- bytes)
  for (auto& [sid, turns] : by_session) {
    std::sort(turns.begin(), turns.end(),
              [](const auto* x, const auto* y) { return x->finish_s < y->finish_s; });
    double prev = 0;
    for (size_t i = 0; i < turns.size(); ++i) {
      const auto* t = turns[i];
      const double bytes = entry_bytes(t->history_tokens + t->new_tokens + t->output_tokens - 1);
      events.push_back({t->finish_s, bytes - prev});
      prev = bytes;
      // Between turns the entry expires when the next turn comes later than the TTL.
      const double next = i + 1 < turns.size() ? turns[i + 1]->arrival_s : -1;
      if (next < 0 || next - t->finish_s > ttl) {
        events.push_back({t->finish_s + ttl, -prev});
        prev = 0;
      }
    }
  }
  std::sort(events.begin(), events.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first < y.first : x.second < y.second;
  });
  double cur = 0, peak = 0;
  for (const auto& [t, d] : events) {
    cur += d;
    peak = std::max(peak, cur);
  }
  return peak;
}

}  // namespace cb::eval
