// cachebench replay TRACE --model M [--mode ca|re|of] [--compare MODE] [--out F.json] ...
// (also `cachebench serve-replay`): multi-turn conversations through the serving engine.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "apps/cachebench/format.h"
#include "apps/cachebench/model_args.h"
#include "apps/cachebench/progress.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "datasets/sha256.h"
#include "datasets/trace.h"
#include "eval/replay.h"
#include "eval/sim_replay.h"
#include "lib/core/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/core/sysinfo.h"
#include "lib/metrics/records_csv.h"
#include "lib/metrics/summary.h"
#include "lib/store/size_parse.h"

namespace cb::app {
namespace {

struct ReplayArgs {
  ModelArgs m;
  std::string trace;
  std::string mode = "ca";
  std::string compare;
  std::string policy = "sched";
  std::string hbm = "0", dram = "auto", ssd = "0", store_dir, chunk = "1MiB", clean_ahead = "auto",
              demote_ahead = "auto";
  bool sim = false;
  std::string profile = "a100-80gb";
  std::string read_buffer = "auto", truncate_align = "auto", kv_entries = "f32";
  std::vector<std::string> slow_read, slow_write;
  bool no_preload = false, sync_save = false, full_saves = false, quiet = false;
  int64_t limit = 0;
  bool no_join_split = false, no_save_admission = false, no_drop_slow_demotions = false;
  std::string out, csv;
  eval::ReplayOptions o;
};

/// TIER=GBPS specs; `present` says which tiers this run has (hbm, dram, ssd).
void parse_slow(const std::vector<std::string>& specs, double* gbps, const char* opt,
                const bool present[3]) {
  constexpr double kMin = 1e-5;  // 10 KB/s: slower only makes a run that never ends
  bool seen[3] = {false, false, false};
  for (const std::string& s : specs) {
    const size_t eq = s.find('=');
    const std::string tier = s.substr(0, eq);
    const int t = tier == "hbm" ? 0 : tier == "dram" ? 1 : tier == "ssd" ? 2 : -1;
    char* end = nullptr;
    const double v = eq == std::string::npos ? -1 : std::strtod(s.c_str() + eq + 1, &end);
    if (t < 0 || eq == std::string::npos || end == s.c_str() + eq + 1 || *end != '\0') {
      throw make_error(opt, "cannot parse '" + s + "'", "use TIER=GBPS, e.g. ssd=0.5");
    }
    if (!(v >= kMin) || !std::isfinite(v)) {
      throw make_error(opt, "'" + s + "': the rate must be a finite number of GB/s >= 1e-05",
                       "use e.g. ssd=0.5");
    }
    if (!present[t]) {
      throw make_error(opt, "'" + s + "': this run has no " + tier + " tier",
                       "give it a budget (--" + tier + " SIZE) or drop this option");
    }
    if (seen[t]) {
      throw make_error(opt, "gives the " + tier + " tier twice; which rate is meant is unclear",
                       "give each tier once");
    }
    seen[t] = true;
    gbps[t] = v;
  }
}

std::string fmt(double v, int prec = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

void print_table(const std::vector<eval::ReplayRun>& runs) {
  std::printf("| metric |");
  for (auto& r : runs) std::printf(" %s |", engine::mode_name(r.mode));
  std::printf("\n|---|");
  for (size_t i = 0; i < runs.size(); ++i) std::printf("---:|");
  std::printf("\n");
  const auto row = [&](const char* name, auto get) {
    std::printf("| %s |", name);
    for (auto& r : runs) std::printf(" %s |", get(r.summary).c_str());
    std::printf("\n");
  };
  row("turns", [](const nlohmann::json& s) { return std::to_string(s["completed"].get<long>()); });
  row("TTFT mean (ms)", [](auto& s) { return fmt(s["ttft_ms"]["mean"].template get<double>()); });
  row("TTFT p90 (ms)", [](auto& s) { return fmt(s["ttft_ms"]["p90"].template get<double>()); });
  row("TPOT mean (ms)", [](auto& s) { return fmt(s["tpot_ms"]["mean"].template get<double>()); });
  row("prefill throughput (tok/s)",
      [](auto& s) { return fmt(s["prefill_throughput"].template get<double>(), 0); });
  row("GPU time (s)", [](auto& s) { return fmt(s["gpu_time_s"].template get<double>(), 3); });
  // No turn with a history: nothing could hit (the JSON's rates are 0, turns_with_history 0).
  row("hit rate", [](auto& s) {
    return s["turns_with_history"].template get<long>() == 0
               ? std::string("n/a (no turn had a history)")
               : fmt(s["hit_rate"]["overall"].template get<double>(), 3);
  });
  row("reused / recomputed tokens", [](auto& s) {
    return std::to_string(s["reused_tokens"].template get<long>()) + " / " +
           std::to_string(s["recomputed_tokens"].template get<long>());
  });
  row("preload stall (s)",
      [](auto& s) { return fmt(s["preload_stall_s"]["total"].template get<double>(), 3); });
  row("cost (USD)", [](auto& s) { return fmt(s["cost_usd"]["total"].template get<double>(), 6); });
}

int run_replay_cmd(ReplayArgs& a, CLI::App& sub) {
  eval::ReplayOptions& o = a.o;
  struct stat csv_st {};
  if (!a.compare.empty() && !a.csv.empty() &&
      (names_stdout(a.csv) || (::stat(a.csv.c_str(), &csv_st) == 0 &&
                               (S_ISCHR(csv_st.st_mode) || S_ISFIFO(csv_st.st_mode))))) {
    throw make_error("--csv",
                     "with --compare it writes one file per mode, " + a.csv + ".MODE.csv, and " +
                         a.csv + " is a stream",
                     "name a file (F gives F." + a.mode + ".csv and F." + a.compare +
                         ".csv), or drop --compare");
  }
  o.store.hbm_bytes = store::parse_size(a.hbm, "--hbm");
  sim::HardwareProfile prof;
  if (a.sim) prof = sim::load_profile(a.profile);
  // An explicit --gpus wins over the profile's "gpus" (1 included), and the config records
  // what ran: tensor parallel over the GPUs charged.
  if (a.sim && was_given(sub, "--gpus")) {
    prof.gpus = o.gpus;
    prof.sources["gpus"] = "--gpus " + std::to_string(o.gpus);
  }
  if (a.sim) o.gpus = prof.gpus;
  o.store.dram_bytes = a.dram != "auto"               ? store::parse_size(a.dram, "--dram")
                       : a.sim && prof.dram_bytes > 0 ? static_cast<uint64_t>(prof.dram_bytes)
                                                      : (1ull << 30);
  o.store.ssd_bytes = store::parse_size(a.ssd, "--ssd");
  o.store.chunk_bytes = store::parse_size(a.chunk, "--chunk-size");
  o.store.clean_ahead_bytes =
      a.clean_ahead == "auto"
          ? -1
          : static_cast<int64_t>(store::parse_size(a.clean_ahead, "--clean-ahead"));
  if (o.store.clean_ahead_bytes > 0 && o.store.ssd_bytes == 0) {
    throw make_error("--clean-ahead",
                     "writes SSD copies of DRAM entries, and this run has no SSD tier",
                     "give --ssd SIZE (with --store-dir in real mode), or drop --clean-ahead");
  }
  o.store.demote_ahead_bytes =
      a.demote_ahead == "auto"
          ? -1
          : static_cast<int64_t>(store::parse_size(a.demote_ahead, "--demote-ahead"));
  if (o.store.demote_ahead_bytes > 0 && (o.store.hbm_bytes == 0 || o.store.dram_bytes == 0)) {
    throw make_error("--demote-ahead",
                     "demotes HBM entries to DRAM, and this run has no HBM tier "
                     "over a DRAM tier",
                     "give --hbm SIZE and --dram SIZE, or drop --demote-ahead");
  }
  if (o.store.demote_ahead_bytes > 0 &&
      static_cast<uint64_t>(o.store.demote_ahead_bytes) >= o.store.hbm_bytes) {
    throw make_error("--demote-ahead",
                     "would keep the whole HBM tier (--hbm " + a.hbm +
                         ") empty, demoting every "
                         "entry saved there",
                     "give less than --hbm (auto: a quarter of it)");
  }
  o.store.save_admission = !a.no_save_admission;
  o.store.drop_slow_demotions = !a.no_drop_slow_demotions;
  o.store.store_dir = a.store_dir;
  o.store.policy = a.policy;
  eval::policy_name(a.policy);  // validates
  if (o.store.keep && (a.sim || o.store.ssd_bytes == 0)) {
    throw make_error("--keep-store",
                     "needs a real SSD tier (--ssd SIZE --store-dir DIR, not --sim)");
  }
  if (!a.store_dir.empty() && (a.sim || o.store.ssd_bytes == 0)) {
    throw make_error("--store-dir",
                     a.sim ? "sim mode's store moves no bytes, so it has no directory"
                           : "holds the SSD tier's files, and this run has no SSD tier",
                     a.sim ? "drop --store-dir" : "give --ssd SIZE too, or drop --store-dir");
  }
  if (o.store.ssd_bytes > 0 && a.store_dir.empty() && !a.sim) {
    throw make_error("--ssd", "an SSD budget needs --store-dir DIR (where the files go)");
  }
  const bool present[3] = {o.store.hbm_bytes > 0, o.store.dram_bytes > 0, o.store.ssd_bytes > 0};
  parse_slow(a.slow_read, o.store.read_gbps, "--slow-read", present);
  parse_slow(a.slow_write, o.store.write_gbps, "--slow-write", present);
  if (a.read_buffer == "auto") {
    o.engine.read_buffer_layers = -1;
  } else {
    char* end = nullptr;
    const long v = std::strtol(a.read_buffer.c_str(), &end, 10);
    if (end == a.read_buffer.c_str() || *end != '\0' || v < 0) {
      throw make_error("--read-buffer-layers",
                       "expected a layer count or 'auto', got '" + a.read_buffer + "'");
    }
    o.engine.read_buffer_layers = static_cast<int>(v);
  }
  if (a.truncate_align == "auto") {
    o.engine.truncate_align = -1;
  } else {
    char* end = nullptr;
    const long long v = std::strtoll(a.truncate_align.c_str(), &end, 10);
    if (end == a.truncate_align.c_str() || *end != '\0' || v < 1) {
      throw make_error("--truncate-align",
                       "expected a token count >= 1 or 'auto', got '" + a.truncate_align + "'",
                       "use 1 for exact truncation");
    }
    o.engine.truncate_align = v;
  }
  o.engine.preload = !a.no_preload;
  o.engine.async_save = !a.sync_save;
  o.engine.append_saves = !a.full_saves;
  o.engine.native_kv_entries = engine::parse_kv_entries(a.kv_entries);
  std::vector<engine::Mode> modes = {engine::parse_mode(a.mode)};
  if (!a.compare.empty()) {
    const engine::Mode c = engine::parse_mode(a.compare);
    if (c == modes[0]) {
      throw make_error("--compare",
                       std::string("is the run's own mode (") + engine::mode_name(c) +
                           "); the baseline must be another",
                       c == engine::Mode::RE ? "use --compare ca (or of)"
                                             : "use --compare re (the usual baseline)");
    }
    modes.insert(modes.begin(), c);  // the baseline first
  }
  // A mode that stores KV needs a tier with room; lib/store refuses a store without one, and
  // sim mode's store does as it does.
  const bool stores =
      std::any_of(modes.begin(), modes.end(), [](engine::Mode m) { return m != engine::Mode::RE; });
  if (stores && o.store.hbm_bytes == 0 && o.store.dram_bytes == 0 && o.store.ssd_bytes == 0) {
    throw make_error("--dram", "is 0 and no other tier has a budget: the store could keep nothing",
                     a.sim ? "give --dram SIZE and/or --ssd SIZE"
                           : "give --dram SIZE and/or --ssd SIZE with --store-dir DIR");
  }
  if (a.sim && o.engine.native_kv_entries) {
    throw make_error("--kv-entries", "sim mode sizes entries by its profile's kv_bytes_per_element",
                     "drop --kv-entries (calibrate --kv-entries native makes such a profile)");
  }
  if (a.sim && a.m.backend != "cpu") {
    throw make_error("--backend", "sim mode runs no model (its cost model stands in for one)",
                     "drop --backend, or drop --sim to replay on the GPU");
  }
  LoadedModel lm = load_model(a.m, false, !a.sim);
  const model::ModelConfig& mc = lm.source->config();
  if (stores) {
    // An entry, of one token even, takes a chunk for each layer's K and V: when no tier has
    // that much, every save is refused, and the run would only say so at its end. (A tier too
    // small beside one that is not only passes its saves to it.)
    const uint64_t least = 2ull * static_cast<uint64_t>(mc.n_layers) * o.store.chunk_bytes;
    std::pair<const char*, uint64_t> largest{"--dram", o.store.dram_bytes};
    if (o.store.hbm_bytes > largest.second) largest = {"--hbm", o.store.hbm_bytes};
    if (o.store.ssd_bytes > largest.second) largest = {"--ssd", o.store.ssd_bytes};
    const std::string holds_none = ", the largest tier, holds no entry of " + mc.name +
                                   ": even one token's takes " + store::format_size(least) + " (" +
                                   std::to_string(mc.n_layers) + " layers x K,V in chunks of " +
                                   store::format_size(o.store.chunk_bytes) + ")";
    // --dram auto took the profile's dram_bytes: the file is at fault (exit 1), not an option
    // the user never gave.
    if (largest.second < least && largest.first == std::string("--dram") && a.dram == "auto" &&
        a.sim && prof.dram_bytes > 0) {
      throw make_error(prof.loaded_from + " (--profile)",
                       "its dram_bytes " + format_g(prof.dram_bytes) + " (" +
                           store::format_size(largest.second) + "), the DRAM tier of --dram auto" +
                           holds_none,
                       "give the profile a dram_bytes of at least " + std::to_string(least) +
                           ", or pass --dram SIZE (at least " + store::format_size(least) +
                           "), or a smaller --chunk-size");
    }
    if (largest.second < least) {
      throw make_error(
          largest.first, store::format_size(largest.second) + holds_none,
          "give at least " + store::format_size(least) + ", or a smaller --chunk-size");
    }
  }

  datasets::TraceLoadOptions lo;
  lo.limit = a.limit;
  lo.join_split = !a.no_join_split;
  const datasets::Trace trace = datasets::load_trace(a.trace, trace_tokenizer(lm, &lo), lo);
  refuse_text_options_on_lengths(sub, trace.kind);
  if (trace.skipped_conversations > 0 || trace.skipped_messages > 0) {
    std::fprintf(stderr, "cachebench: %s: skipped %s and %s\n", a.trace.c_str(),
                 count_of(trace.skipped_conversations, "conversation").c_str(),
                 count_of(trace.skipped_messages, "message").c_str());
    for (const std::string& n : trace.notes) std::fprintf(stderr, "  %s\n", printable(n).c_str());
  }
  if (trace.joined_pieces > 0) {
    std::fprintf(stderr, "cachebench: %s: joined %s into their conversations\n", a.trace.c_str(),
                 count_of(trace.joined_pieces, "split piece").c_str());
  }
  const auto sessions =
      a.sim ? eval::sim_sessions(trace, o.max_output_tokens)
            : eval::trace_sessions(trace, mc.vocab_size, o.seed, o.max_output_tokens);
  // The file first: a profile's "name" is what the file says of itself (a file of A100
  // figures may be named "h100-80gb").
  const std::string where = a.sim ? "sim, profile " + prof.label() : backend_label(a.m);
  if (!a.quiet) {
    std::fprintf(stderr, "cachebench: replaying %s, %s of %s on %s (%s)\n",
                 count_of(static_cast<long long>(sessions.size()), "session").c_str(),
                 count_of(trace.turns(), "turn").c_str(), a.trace.c_str(), mc.name.c_str(),
                 where.c_str());
  }
  eval::SimOptions so;
  so.profile = prof;
  std::vector<eval::ReplayRun> runs;
  for (engine::Mode m : modes) {
    Progress p(std::string("replay ") + engine::mode_name(m), "turns");
    engine::ProgressFn fn;
    fn = [&p, quiet = a.quiet](int64_t d, int64_t t) {
      if (quiet) {
        check_interrupted();
      } else {
        p(d, t);
      }
    };
    runs.push_back(a.sim ? eval::run_sim_replay(mc, sessions, m, o, so, fn)
                         : eval::run_replay(lm.runner(), sessions, m, o, fn));
  }
  if (a.sim && a.dram == "auto" && !(prof.dram_bytes > 0)) {
    std::fprintf(stderr,
                 "replay: note: the profile %s gives no DRAM size (a calibrated profile), so "
                 "--dram auto was 1 GiB; give --dram SIZE for another\n",
                 a.profile.c_str());
  }
  std::printf("## replay %s: %s, %s, %s (%s)\n\n", a.trace.c_str(), mc.name.c_str(),
              count_of(static_cast<long long>(sessions.size()), "session").c_str(),
              count_of(trace.turns(), "turn").c_str(), where.c_str());
  print_table(runs);
  for (const auto& r : runs) {
    if (r.summary.contains("store_dir_kept")) {
      std::printf("\n%s's store kept in %s (cachebench store stat|verify|clear --store-dir ...)\n",
                  engine::mode_name(r.mode),
                  r.summary["store_dir_kept"].get<std::string>().c_str());
    }
  }
  nlohmann::json cmp;
  if (runs.size() == 2) {
    cmp = metrics::compare_summaries(runs[0].summary, runs[1].summary);
    const auto v = [&](const char* k, int prec, const char* unit) {  // "n/a" without the unit
      return cmp[k].is_null() ? std::string("n/a") : fmt(cmp[k].get<double>(), prec) + unit;
    };
    std::printf(
        "\n%s vs %s: TTFT reduction %s, prefill throughput %s, GPU time %s/%s %s, "
        "cost saving %s\n",
        engine::mode_name(runs[1].mode), engine::mode_name(runs[0].mode),
        v("ttft_reduction_pct", 1, "%").c_str(), v("prefill_throughput_x", 2, "x").c_str(),
        engine::mode_name(runs[0].mode), engine::mode_name(runs[1].mode),
        v("gpu_time_x", 2, "x").c_str(), v("cost_saving_pct", 1, "%").c_str());
  }
  for (const auto& r : runs) {
    // Quiet, only the tiers that ran other than asked (memory not page-locked, no O_DIRECT).
    for (const std::string& l : a.quiet ? r.store_warnings : r.store_lines) {
      std::fprintf(stderr, "  store: %s\n", l.c_str());
    }
    // A virtual machine whose host ran other guests on its CPUs: the times are not its own.
    const double steal = r.summary.value("cpu_steal", 0.0);
    if (steal > kNotableSteal) {
      std::fprintf(stderr,
                   "cachebench: %s: note: the hypervisor gave other guests %.0f%% of this "
                   "machine's CPU time during the run (cpu_steal): TTFT, throughput and GPU time "
                   "measured them too; rerun when the host is quieter to time this machine\n",
                   engine::mode_name(r.mode), 100 * steal);
    }
    if (r.summary.contains("store_accounting")) {  // a store bug: the run's numbers are suspect
      const auto& acc = r.summary["store_accounting"];
      std::fprintf(stderr,
                   "cachebench: %s: the store's slot accounting is off at the end of the run "
                   "(%llu errors); please report it with this output:\n%s",
                   engine::mode_name(r.mode), acc["errors"].get<unsigned long long>(),
                   acc["audit"].get<std::string>().c_str());
    }
    // A store too small for the entries, or failing, shows in the table only as hits missing.
    if (r.result.save_failures > 0) {
      std::fprintf(stderr,
                   "cachebench: %s: %s refused or failed (save_failures): no room for "
                   "the entry in the store's tiers (is --dram/--ssd smaller than one "
                   "conversation's KV?) or an I/O error; those histories are recomputed\n",
                   engine::mode_name(r.mode), count_of(r.result.save_failures, "save").c_str());
    }
    // The store's first I/O error names the file and the reason (a full disk is otherwise
    // only hits missing and a count): said on its own line, with what to do.
    const nlohmann::json* store = r.summary.contains("store") ? &r.summary["store"] : nullptr;
    if (store != nullptr && store->contains("first_io_error")) {
      const std::string first = (*store)["first_io_error"].get<std::string>();
      const unsigned long long n = store->value("io_errors", 0ull);
      const auto says = [&](int err) {
        return first.find(std::strerror(err)) != std::string::npos;
      };
      const char* fix = says(ENOSPC) || says(EDQUOT)
                            ? "free space on the store's file system or lower --ssd"
                        : says(EFBIG) ? "raise the file-size limit (ulimit -f) or lower --ssd"
                                      : "check the disk under --store-dir";
      std::fprintf(stderr,
                   "cachebench: %s: STORE I/O ERROR: %s in the store "
                   "(io_errors), so its results lack the hits those saves and loads would "
                   "have given; the first: %s; %s\n",
                   engine::mode_name(r.mode),
                   count_of(static_cast<long long>(n), "I/O error").c_str(), first.c_str(), fix);
    }
    if (r.result.load_failures > 0) {
      std::fprintf(stderr,
                   "cachebench: %s: %s failed (a chunk's read or checksum, or the "
                   "failed save it was reading), recomputed instead (load_failures)\n",
                   engine::mode_name(r.mode), count_of(r.result.load_failures, "load").c_str());
    }
    if (r.result.clipped_turns > 0) {  // else only the JSON's clipped_turns would say it
      std::fprintf(stderr,
                   "cachebench: %s: %s had a message longer than the %lld-token "
                   "window, cut to fit (clipped_turns)\n",
                   engine::mode_name(r.mode), count_of(r.result.clipped_turns, "turn").c_str(),
                   static_cast<long long>(engine::checked_window(o.engine, mc.max_context)));
    }
  }
  if (!a.csv.empty()) {
    std::vector<std::string> names(trace.sessions.size());
    for (const datasets::TraceSession& s : trace.sessions) {
      if (s.id < names.size()) names[s.id] = s.name;
    }
    for (const auto& r : runs) {
      const std::string p =
          runs.size() == 1 ? a.csv : a.csv + "." + engine::mode_name(r.mode) + ".csv";
      metrics::write_turn_csv(p, r.result.records, names);
      if (!a.quiet)
        std::fprintf(stderr, "replay: per-turn records of %s in %s\n", engine::mode_name(r.mode),
                     p.c_str());
    }
  }
  if (!a.out.empty()) {
    nlohmann::json j;
    j["tool"] = "cachebench replay";
    j["git"] = git_revision();
    j["execution"] = a.sim ? "sim" : "real";
    j["backend"] = a.sim ? "sim" : backend_label(a.m);
    if (a.sim) {
      j["profile"] = prof.to_json();
      // Beside the profile (whose "name" is the file's own): gate compares "profile" whole, and
      // the same figures under another path are the same profile.
      j["profile_file"] = prof.loaded_from;
    }
    // "shape": what gate compares beside the name (two checkpoints both named "llama" differ).
    j["model"] = {
        {"name", mc.name},
        {"source", a.m.model},
        {"shape", std::string(model::arch_name(mc.arch)) + " " + std::to_string(mc.n_layers) + "x" +
                      std::to_string(mc.hidden) + " heads " + std::to_string(mc.n_heads) + "/" +
                      std::to_string(mc.n_kv_heads) + " ffn " + std::to_string(mc.ffn_hidden) +
                      " vocab " + std::to_string(mc.vocab_size)}};
    j["trace"] = {{"path", a.trace},
                  {"kind", trace.kind},
                  {"sha256", datasets::sha256_file_hex(a.trace)},
                  {"sessions", sessions.size()},
                  {"turns", trace.turns()},
                  {"skipped_conversations", trace.skipped_conversations},
                  {"joined_pieces", trace.joined_pieces}};
    // The tokens replayed: what gate compares beside the file's checksum, since a ShareGPT
    // file tokenized by another tokenizer is another trace.
    int64_t in_tokens = 0, out_tokens = 0;
    for (const datasets::TraceSession& s : trace.sessions) {
      for (const datasets::TraceTurn& t : s.turns) {
        in_tokens += t.input_tokens;
        out_tokens += t.output_tokens;
      }
    }
    j["trace"]["input_tokens"] = in_tokens;
    j["trace"]["output_tokens"] = out_tokens;
    j["config"] = eval::replay_config_json(o);
    j["mode"] = engine::mode_name(runs.back().mode);
    j["summary"] = runs.back().summary;
    if (runs.size() == 2) {
      j["baseline_mode"] = engine::mode_name(runs[0].mode);
      j["baseline"] = runs[0].summary;
      j["comparison"] = cmp;
    }
    write_json(a.out, j);
  }
  // A store --keep-store could not keep: the results above stand, and the command fails.
  std::string keep_errors;
  for (const auto& r : runs) {
    if (r.keep_error.empty()) continue;
    keep_errors += (keep_errors.empty() ? "" : "; and ") + r.keep_error;
  }
  if (!keep_errors.empty()) throw Error(keep_errors);
  return 0;
}

void add(CLI::App& app, const char* name, const char* help) {
  auto a = std::make_shared<ReplayArgs>();
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("trace", a->trace, "ShareGPT JSON or a cachebench length trace")->required();
  add_model_options(sub, &a->m, /*cuda=*/true);
  engine::EngineConfig& e = a->o.engine;
  sub->add_option("--mode", a->mode, "ca (CachedAttention), re (recompute), of (overflow)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ca", "re", "of"}));
  sub->add_option("--compare", a->compare, "also run this baseline mode and print the ratios")
      ->check(CLI::IsMember({"ca", "re", "of"}));
  sub->add_option("--policy", a->policy, "store eviction: sched, lru, fifo, optimal")
      ->capture_default_str();
  sub->add_option("--hbm", a->hbm, "store HBM tier budget")
      ->capture_default_str()
      ->check(size_value());
  sub->add_option("--dram", a->dram, "store DRAM tier budget (auto: 1GiB; in sim, the profile's)")
      ->capture_default_str()
      ->check(size_value("auto"));
  CLI::Option* sim =
      sub->add_flag("--sim", a->sim,
                    "sim mode: a calibrated cost model and a sizes-only store on a virtual clock");
  sub->add_option("--profile", a->profile,
                  "sim hardware profile: a100-80gb, h100-80gb, h200 or a calibrate JSON")
      ->capture_default_str()
      ->needs(sim);
  sub->add_option("--ttl", a->o.store.ttl, "store entries expire after S seconds unused (0: never)")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--ssd", a->ssd, "store SSD tier budget (needs --store-dir)")
      ->capture_default_str()
      ->check(size_value());
  sub->add_option("--store-dir", a->store_dir,
                  "directory under which each run makes its SSD tier's directory (removed after "
                  "the run unless --keep-store)")
      ->check(writable_dir());
  sub->add_flag("--keep-store", a->o.store.keep,
                "keep each run's SSD store as STORE_DIR/cachebench-store-MODE-PID (its SSD "
                "entries; `cachebench store stat|verify` read it)");
  sub->add_option("--chunk-size", a->chunk, "store chunk size")
      ->capture_default_str()
      ->check(size_value());
  sub->add_option("--clean-ahead", a->clean_ahead,
                  "write SSD copies of the DRAM entries the policy would evict first, for this "
                  "many bytes, in the background, so their eviction writes little (0: off; "
                  "auto: a sixteenth of --dram when there is an SSD tier)")
      ->capture_default_str()
      ->check(size_value("auto"));
  sub->add_option("--demote-ahead", a->demote_ahead,
                  "keep this many bytes of the HBM tier free by demoting the entries the policy "
                  "would evict first to DRAM in the background, so a save into HBM finds room "
                  "without waiting for a demotion (0: off; auto: a quarter of --hbm when there is "
                  "a DRAM tier)")
      ->capture_default_str()
      ->check(size_value("auto"));
  sub->add_flag("--no-save-admission", a->no_save_admission,
                "a save that must make room in DRAM always evicts others, even when the policy "
                "would evict the saving conversation first (default: that save goes to the SSD "
                "instead, taking the chunks the entry's SSD copy holds)");
  sub->add_flag("--no-drop-slow-demotions", a->no_drop_slow_demotions,
                "a save that must make room in DRAM always demotes its victims to the SSD, "
                "however long the SSD's write queue makes it wait (default: a victim whose "
                "demotion would take longer than recomputing it is dropped instead)");
  sub->add_option("--io-threads", a->o.store.io_threads, "store I/O threads")
      ->capture_default_str()
      ->check(in_range(1, 256));
  sub->add_option("--slow-read", a->slow_read, "emulate a slower tier: TIER=GBPS (repeatable)");
  sub->add_option("--slow-write", a->slow_write, "emulate slower writes: TIER=GBPS");
  sub->add_option("--ctx", e.ctx, "context window in tokens (0: the model's)")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--truncate-ratio", e.truncate_ratio, "history share dropped on overflow")
      ->capture_default_str()
      ->check(in_left_open_range(0, 1));
  sub->add_option("--truncate-align", a->truncate_align,
                  "round the tokens dropped on overflow up to a multiple of this, when some "
                  "history is left, in every mode (1: exact; auto: the store's tokens per chunk, "
                  "so a stored entry is cut in place and keeps its SSD copy)")
      ->capture_default_str()
      ->check(count_or("auto", 1, 1000000000));
  CLI::Option* read_buffer =
      sub->add_option("--read-buffer-layers", a->read_buffer,
                      "layers preloaded before a job starts (a number, or auto)")
          ->capture_default_str()
          ->check(count_or("auto", 0, 1000000));
  sub->add_flag("--no-preload", a->no_preload, "load the whole entry before computing")
      ->excludes(read_buffer);
  sub->add_option(
         "--preload-jobs", e.preload_jobs,
         "waiting requests prepared and preloading ahead of admission (and beyond them those a "
         "step can admit now, within --max-batch and the KV pool)")
      ->capture_default_str()
      ->check(above(0));
  sub->add_flag("--sync-save", a->sync_save, "wait for each save before the next step");
  sub->add_flag("--full-saves", a->full_saves,
                "re-save each turn's whole history instead of appending its new tokens to the "
                "session's entry (the append ablation)");
  sub->add_option("--kv-entries", a->kv_entries,
                  "element type of stored KV entries: f32, or native (the backend's KV type: "
                  "fp16/bf16 with --backend cuda, half the bytes and no conversion; fp32 on the "
                  "CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "native"}));
  sub->add_option("--max-batch", e.sched.max_batch, "sequences per step")
      ->capture_default_str()
      ->check(in_range(1, 1 << 20));
  sub->add_option("--max-batch-tokens", e.sched.max_batch_tokens, "tokens per step")
      ->capture_default_str()
      ->check(in_range(1, 1 << 30));
  sub->add_option("--kv-blocks", e.num_blocks, "paged KV pool (0: max-batch full windows)")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--block-size", e.block_size, "tokens per KV block")
      ->capture_default_str()
      ->check(in_range(1, 1024));
  sub->add_option("--lookahead", e.sched.lookahead,
                  "sessions in the look-ahead window handed to the store (queue, then known "
                  "next turns)")
      ->capture_default_str()
      ->check(above(0));
  sub->add_option("--rate", e.sched.rate, "new sessions per second (0: all at once)")
      ->capture_default_str()
      ->check(at_least(0));
  auto think = std::make_shared<std::string>("0");
  sub->add_option("--think-time", *think,
                  "0, const:S, exp:MEAN, uniform:LO:HI, or until:T (every next turn at T s, or "
                  "right after its answer when later: a burst)")
      ->capture_default_str();
  sub->add_option("--seed", a->o.seed, "arrivals, think times and random token ids")
      ->capture_default_str();
  sub->add_option("--limit", a->limit, "replay only the first N sessions (0: all)")
      ->check(at_least(0));
  sub->add_flag("--no-join-split", a->no_join_split,
                "read a ShareGPT file's split pieces (ID_0, ID_8, ...) as separate conversations");
  sub->add_option("--max-output-tokens", a->o.max_output_tokens,
                  "cap every answer at N tokens (0: as in the trace)")
      ->check(at_least(0));
  sub->add_option("--warmup-turns", e.warmup_turns, "first N turns warm the store, unmeasured")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--price-gpu", a->o.prices.gpu_usd_per_hour, "USD per GPU hour")
      ->capture_default_str()
      ->check(in_range(0, 1e6));
  sub->add_option("--price-dram", a->o.prices.dram_usd_per_gb_hour, "USD per GB-hour of DRAM")
      ->capture_default_str()
      ->check(in_range(0, 1e6));
  sub->add_option("--price-ssd", a->o.prices.ssd_usd_per_gb_hour, "USD per GB-hour of SSD")
      ->capture_default_str()
      ->check(in_range(0, 1e6));
  sub->add_option("--gpus", a->o.gpus, "accelerators charged (sim: also tensor parallel over them)")
      ->capture_default_str()
      ->check(in_range(1, sim::kMaxGpus));
  sub->add_option("--out", a->out, "write the summary JSON here")->check(output_file());
  sub->add_option("--csv", a->csv,
                  "write per-turn records here (CSV); with --compare, one file per mode: "
                  "F.MODE.csv")
      ->check(output_file());
  // The files --csv writes, for the checks of every output against the inputs and the others.
  set_output_names(sub, "--csv", [a](const std::string& f) -> std::vector<std::string> {
    if (a->compare.empty()) return {f};
    if (a->compare == a->mode) return {f + "." + a->mode + ".csv"};  // refused by the run
    return {f + "." + a->mode + ".csv", f + "." + a->compare + ".csv"};
  });
  sub->add_flag("--quiet", a->quiet,
                "no progress, opening line or store description on stderr (but a tier that runs "
                "other than asked, and notes and warnings)");
  set_action(sub, [a, think, sub] {
    if (a->store_dir.empty() && was_given(*sub, "--store-dir")) {
      throw make_error("--store-dir", "is empty",
                       "name the directory under which the SSD tier's files go");
    }
    if (a->sim) {
      refuse_given(*sub,
                   {"--io-threads", "--gpu-storage", "--gpu", "--cpu-weights", "--weights-seed"},
                   "has no effect in sim mode (it moves no bytes and runs no model)",
                   "drop it, or drop --sim");
    }
    // Not --chunk-size nor --kv-entries: with --truncate-align auto they set where RE cuts an
    // overflowing history too (the store's tokens per chunk), so that RE can match a CA run.
    if (a->mode == "re" && (a->compare.empty() || a->compare == "re")) {
      // Every store option (the engine's read buffer and saving included): RE keeps no store.
      const std::vector<const char*> store_options = {
          "--policy",
          "--hbm",
          "--dram",
          "--ttl",
          "--ssd",
          "--store-dir",
          "--keep-store",
          "--clean-ahead",
          "--demote-ahead",
          "--no-save-admission",
          "--no-drop-slow-demotions",
          "--io-threads",
          "--slow-read",
          "--slow-write",
          "--read-buffer-layers",
          "--no-preload",
          "--preload-jobs",
          "--sync-save",
          "--full-saves",
          "--lookahead",
      };
      refuse_given(*sub, store_options, "has no effect with --mode re (recompute keeps no store)",
                   "drop it, or add --compare ca to run CachedAttention beside it");
    }
    if (a->full_saves) {
      refuse_given(*sub, {"--no-save-admission"},
                   "has no effect with --full-saves (save-time admission decides append saves)",
                   "drop one of them");
    }
    install_interrupt_handlers(a->sim || a->ssd == "0"
                                   ? "no result was written"
                                   : "no result was written; its scratch store directories were "
                                     "removed, but for a store kept with --keep-store or one "
                                     "holding other files (its path is printed above)");
    a->o.engine.sched.think = sched::ThinkTime::parse(*think);
    a->o.engine.sched.seed = a->o.seed;
    resolve_backend(&a->m, !a->sim);
    return run_replay_cmd(*a, *sub);
  });
}

}  // namespace

void register_replay(CLI::App& app) {
  add(app, "replay",
      "Replay multi-turn conversations through the serving engine (CA vs baselines)");
  add(app, "serve-replay", "Same as replay");
}

}  // namespace cb::app
