// cachebench gate --baseline B.json --current C.json [--max-regression METRIC=PCT ...]
//                 [--out report.json]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/cachebench/format.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/core/sysinfo.h"
#include "lib/metrics/gate.h"

namespace cb::app {
namespace {

struct GateArgs {
  std::string baseline;
  std::string current;
  std::vector<std::string> bounds;
  std::string out;
  bool allow_mismatch = false;
  bool no_defaults = false;
};

/// What makes two runs comparable, as the result files record it (absent in a bare summary):
/// a string or a number, as text; "" when absent or of another type.
std::string field(const nlohmann::json& doc, const char* a, const char* b = nullptr) {
  if (!doc.is_object() || !doc.contains(a)) return "";
  const nlohmann::json& v =
      b ? (doc[a].is_object() && doc[a].contains(b) ? doc[a][b] : nullptr) : doc[a];
  if (v.is_string()) return v.get<std::string>();
  return v.is_number() ? v.dump() : "";
}

/// MMLU's and PIQA's `files_sha256` (path -> sha256): the sorted checksums alone, so that the
/// same files under another data root compare; empty when absent.
std::vector<std::string> file_sums(const nlohmann::json& doc) {
  std::vector<std::string> sums;
  if (doc.is_object() && doc.contains("files_sha256") && doc["files_sha256"].is_object()) {
    for (const auto& kv : doc["files_sha256"].items()) {
      if (kv.value().is_string()) sums.push_back(kv.value().get<std::string>());
    }
  }
  std::sort(sums.begin(), sums.end());
  return sums;
}

/// A setting as text: a string as is, anything else as JSON ("" when absent).
std::string setting(const nlohmann::json& doc, const char* key) {
  if (!doc.is_object() || !doc.contains(key)) return "";
  const nlohmann::json& v = doc[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

/// The methods of an evaluation's `results` list, in order ("TT,CA,NKVT"); "" without one.
std::string result_methods(const nlohmann::json& doc) {
  std::string out;
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array()) return out;
  for (const nlohmann::json& r : doc["results"]) {
    out += (out.empty() ? "" : ",") + (r.is_object() ? setting(r, "method") : std::string("?"));
  }
  return out;
}

/// What a result file holds, by the fields each command writes: "replay", an evaluation's
/// task, "bench cpu"; "" when none of them.
std::string result_kind(const nlohmann::json& doc) {
  if (!doc.is_object()) return "";
  if (doc.contains("trace") && doc.contains("summary")) return "replay";
  if (doc.contains("task")) return setting(doc, "task");
  if (doc.contains("bench")) return "bench " + setting(doc, "bench");
  if (doc.contains("convention") && doc.contains("dataset")) return "perplexity";
  // perplexity --method's overflow study names its study and dataset, ablate its study alone.
  if (doc.contains("study")) {
    return (doc.contains("dataset") ? "perplexity " : "ablate ") + setting(doc, "study");
  }
  if (doc.contains("prompt") && doc.contains("sampling")) return "generate";
  return "";
}

/// A replay's settings (`config`, nested objects flattened to dotted keys) that differ between
/// two results, as "key x vs y", a setting one of them lacks (a result of an older build) as
/// "key absent vs y"; the store's directory and I/O threads (where and how fast, not what) are
/// not settings of the run's outcome.
void config_diffs(const nlohmann::json& b, const nlohmann::json& c, const std::string& prefix,
                  std::vector<std::string>* out) {
  if (!b.is_object() || !c.is_object()) return;
  const auto ignored = [&](const std::string& key) {
    return key == "store.store_dir" || key == "store.io_threads";
  };
  for (const auto& kv : b.items()) {
    const std::string key = prefix + kv.key();
    if (ignored(key)) continue;
    const nlohmann::json& x = kv.value();
    if (!c.contains(kv.key())) {
      out->push_back(key + " " + x.dump() + " vs absent");
      continue;
    }
    const nlohmann::json& y = c[kv.key()];
    if (x.is_object() && y.is_object()) {
      config_diffs(x, y, key + ".", out);
    } else if (x != y) {
      out->push_back(key + " " + x.dump() + " vs " + y.dump());
    }
  }
  for (const auto& kv : c.items()) {
    const std::string key = prefix + kv.key();
    if (!b.contains(kv.key()) && !ignored(key)) {
      out->push_back(key + " absent vs " + kv.value().dump());
    }
  }
}

/// The sections of a result that record its setup, which the comparisons below read field by
/// field, skipping a field either result lacks (a bare summary has none of them).
constexpr const char* kSetupSections[] = {"tool", "trace",     "config",  "model",
                                          "mode", "execution", "backend", "profile"};

/// The setup sections one of two results has and the other lacks, as "trace absent vs present":
/// a section one of them lacks (a result of an older build, or an edited one) hides every
/// setting in it from the comparisons, as a setting one of them lacks is a difference
/// (config_diffs).
std::vector<std::string> section_diffs(const nlohmann::json& b, const nlohmann::json& c) {
  std::vector<std::string> out;
  for (const char* s : kSetupSections) {
    const bool in_b = b.is_object() && b.contains(s), in_c = c.is_object() && c.contains(s);
    if (in_b != in_c)
      out.push_back(s + std::string(in_b ? " present vs absent" : " absent vs present"));
  }
  return out;
}

/// `bench store`'s setup: what it stored and moved (the entry's size and shape, the traffic),
/// how (chunk size, I/O mode and threads), and what its SSD reference, policy and journal
/// benchmarks ran, the journal's entries as journal_entries (no journal: absent); not its
/// measurements, nor --reps (more repetitions measure the same), nor the directory.
nlohmann::json bench_store_setup(const nlohmann::json& doc) {
  nlohmann::json s = nlohmann::json::object();
  // io_backend: what `--io auto` chose on the machine (io_uring, or pread where it has none).
  for (const char* k : {"entry_bytes", "n_layers", "token_bytes", "traffic_bytes", "chunk_bytes",
                        "io", "io_backend", "io_threads", "parallel_ref_depth",
                        "parallel_ref_threads", "policy_entries", "policy_queue"}) {
    if (doc.contains(k)) s[k] = doc[k];
  }
  const auto j = doc.find("journal");
  if (j != doc.end() && j->is_object() && j->contains("entries")) {
    s["journal_entries"] = (*j)["entries"];
  }
  return s;
}

/// Refuses to gate runs of different traces, models, modes or executions: their metrics
/// differ for reasons no bound is about.
void check_comparable(const nlohmann::json& b, const nlohmann::json& c, const GateArgs& a) {
  std::string diff;
  const auto cmp = [&](const char* name, const std::string& x, const std::string& y) {
    if (!x.empty() && !y.empty() && x != y) {
      diff += (diff.empty() ? "" : ", ") + std::string(name) + " " + x + " vs " + y;
    }
  };
  // Up to three of a list of differences, each after `name`, then how many more `what`.
  const auto add = [&](const char* name, const std::vector<std::string>& diffs,
                       const char* what = "settings") {
    for (size_t i = 0; i < diffs.size() && i < 3; ++i) {
      diff += (diff.empty() ? "" : ", ") + std::string(name) + diffs[i];
    }
    if (diffs.size() > 3) {
      diff += " and " + std::to_string(diffs.size() - 3) + " more " + what;
    }
  };
  const std::string kind = result_kind(b), current_kind = result_kind(c);
  cmp("result", kind, current_kind);
  add("section ", section_diffs(b, c), "sections");
  cmp("tool", field(b, "tool"), field(c, "tool"));
  cmp("trace", field(b, "trace", "sha256").substr(0, 12),
      field(c, "trace", "sha256").substr(0, 12));
  // The part of the trace replayed (--limit) and the replay's settings.
  cmp("trace sessions", field(b, "trace", "sessions"), field(c, "trace", "sessions"));
  cmp("trace turns", field(b, "trace", "turns"), field(c, "trace", "turns"));
  // The tokens replayed: a ShareGPT file tokenized by another tokenizer.
  cmp("trace input tokens", field(b, "trace", "input_tokens"), field(c, "trace", "input_tokens"));
  cmp("trace output tokens", field(b, "trace", "output_tokens"),
      field(c, "trace", "output_tokens"));
  if (b.is_object() && c.is_object() && b.contains("config") && c.contains("config")) {
    std::vector<std::string> cfg;
    config_diffs(b["config"], c["config"], "", &cfg);
    add("config ", cfg);
  }
  // bench store's settings, a setting one of the two lacks counted as for `config`.
  if (kind == "bench store" && current_kind == kind) {
    std::vector<std::string> settings;
    config_diffs(bench_store_setup(b), bench_store_setup(c), "", &settings);
    add("", settings);
  }
  cmp("model", field(b, "model", "name"), field(c, "model", "name"));
  cmp("model shape", field(b, "model", "shape"), field(c, "model", "shape"));
  cmp("mode", field(b, "mode"), field(c, "mode"));
  cmp("execution", field(b, "execution"), field(c, "execution"));
  // Sim mode's hardware profile (a calibrated one may keep a built-in name with other figures):
  // its figures, not the words about them (`sources`, `description`), which a build may reword.
  const auto figures = [](const nlohmann::json& doc) {
    nlohmann::json p = doc["profile"];
    if (p.is_object()) {
      p.erase("sources");
      p.erase("description");
    }
    return p;
  };
  if (b.is_object() && c.is_object() && b.contains("profile") && c.contains("profile") &&
      figures(b) != figures(c)) {
    const std::string bn = field(b, "profile", "name"), cn = field(c, "profile", "name");
    diff += (diff.empty() ? "" : ", ") + std::string("profile ") + bn +
            (bn == cn ? " vs another " + cn : " vs " + cn);
  }
  // Evaluations and benchmarks: the model as given, what ran, on which data, at which window.
  // The model file's name: the same checkpoint under another data root compares.
  const auto file_name = [](const std::string& m) {
    return std::filesystem::path(m).filename().string();
  };
  cmp("model", file_name(field(b, "model")), file_name(field(c, "model")));
  cmp("file", field(b, "file_sha256").substr(0, 12), field(c, "file_sha256").substr(0, 12));
  const std::vector<std::string> bs = file_sums(b), cs = file_sums(c);
  if (!bs.empty() && !cs.empty() && bs != cs) {
    diff += (diff.empty() ? "" : ", ") + std::string("data files (") + std::to_string(bs.size()) +
            " vs " + std::to_string(cs.size()) + ", checksums differ)";
  }
  // What ran: the overflow study's and MMLU's methods (a metric like results.0.ppl is the first
  // one's) and truncation, generate's prompt and sampling.
  cmp("methods", result_methods(b), result_methods(c));
  for (const char* k :
       {"bench",         "task",          "study",          "backend", "weights",     "layers",
        "prompt_tokens", "decode_tokens", "convention",     "dataset", "n_ctx",       "shots",
        "limit",         "method",        "truncate_ratio", "sink",    "max_tokens",  "n_tokens",
        "sampling",      "ignore_eos",    "add_bos",        "chunks",  "weights_seed"}) {
    // One a result of the same kind lacks is a difference too (an older build's, or a
    // setting given to one run only), as for `config`.
    const std::string x = setting(b, k), y = setting(c, k);
    if (x != y && kind == current_kind) {
      diff += (diff.empty() ? "" : ", ") + std::string(k) + " " + (x.empty() ? "absent" : x) +
              " vs " + (y.empty() ? "absent" : y);
    }
  }
  // Long values, said to differ rather than printed: generate's prompt and its tokens (another
  // tokenizer's), forward's input tokens, the history of MMLU's overflow methods.
  const auto differs = [&](const char* key, const char* what) {
    const std::string x = setting(b, key), y = setting(c, key);
    if (!x.empty() && !y.empty() && x != y) diff += (diff.empty() ? "" : ", ") + std::string(what);
  };
  differs("prompt", "prompt differs");
  differs("prompt_ids", "prompt's tokens differ");
  if (kind == "forward") differs("tokens", "input tokens differ");
  differs("history_sha256", "history file differs");
  if (diff.empty()) return;
  if (a.allow_mismatch) {
    std::printf("gate: note: the runs differ (%s); compared anyway (--allow-mismatch)\n\n",
                diff.c_str());
    return;
  }
  throw make_error(a.current, "is not a run of the baseline's setup (" + diff + ")",
                   "gate runs of the same setup: trace, model, mode, execution, and for an "
                   "evaluation or benchmark its task, data and window; a section or setting "
                   "only one of them records: write the baseline again with this build (or "
                   "pass --allow-mismatch)");
}

/// Prints a note when `sum` records a notable share of the machine's CPU time stolen.
void note_steal(const nlohmann::json& sum, const std::string& run, const char* field) {
  const auto it = sum.find("cpu_steal");
  if (it != sum.end() && it->is_number() && it->get<double>() > kNotableSteal) {
    std::printf(
        "\ngate: note: the hypervisor gave other guests %.0f%% of the machine's CPU time during "
        "the %s (%s): its timings measured them too\n",
        100 * it->get<double>(), run.c_str(), field);
  }
}

int run_gate_cmd(const GateArgs& a) {
  std::vector<metrics::Bound> given;
  for (const std::string& s : a.bounds) given.push_back(metrics::parse_bound(s));
  const nlohmann::json base_doc = load_json_document(a.baseline),
                       cur_doc = load_json_document(a.current);
  const nlohmann::json base = metrics::select_summary(base_doc, a.baseline);
  const nlohmann::json cur = metrics::select_summary(cur_doc, a.current);
  const std::vector<metrics::Bound> bounds = metrics::gate_bounds(given, a.no_defaults, base);
  check_comparable(base_doc, cur_doc, a);
  const metrics::GateReport r = metrics::run_gate(base, cur, bounds, a.baseline, a.current);

  // Given bounds each appear once (replacing a default of the same metric); the rest are
  // defaults, none of them when the baseline has none of their metrics and bounds were given.
  const size_t defaults = bounds.size() - given.size();
  const std::string which = defaults == 0   ? "the given bounds"
                            : given.empty() ? "the default, exact-match bounds"
                                            : "the default, exact-match bounds and " +
                                                  std::to_string(given.size()) + " given";
  std::printf("gate: current %s against baseline %s (%s)\n\n", a.current.c_str(),
              a.baseline.c_str(), which.c_str());
  std::fputs(metrics::gate_markdown(r).c_str(), stdout);
  if (!a.out.empty()) {
    nlohmann::json j = metrics::gate_json(r);
    j["baseline"] = a.baseline;
    j["current"] = a.current;
    j["baseline_git"] = field(base_doc, "git");
    j["current_git"] = field(cur_doc, "git");
    j["git"] = git_revision();
    write_json(a.out, j);
  }
  // A run on a virtual machine whose host ran other guests on its CPUs: its times are not the
  // machine's own, and a timing "regression" may be only that (replay records cpu_steal). A
  // replay --compare result holds its comparison run too (under "baseline"), whose times its
  // "comparison" ratios divide by.
  for (const auto& [name, sum] : {std::pair{"baseline", &base}, std::pair{"current", &cur}}) {
    note_steal(*sum, name + std::string(" run"), "cpu_steal");  // select_summary: an object
    const auto nested = sum->find("baseline");
    if (nested != sum->end() && nested->is_object()) {
      note_steal(*nested, name + std::string(" run's --compare baseline"), "baseline.cpu_steal");
    }
  }
  // bench cpu records the BLAS and the kernel set it ran (kernels/cpu/blas_core.h): times
  // measured with other kernels differ for that reason alone.
  const std::string base_blas = field(base_doc, "blas"), cur_blas = field(cur_doc, "blas");
  if (base_blas != cur_blas) {
    std::printf(
        "\ngate: note: the runs' BLAS differ (baseline: %s; current: %s): their timings "
        "measured other kernels\n",
        base_blas.empty() ? "not recorded" : base_blas.c_str(),
        cur_blas.empty() ? "not recorded" : cur_blas.c_str());
  }
  const std::string checks = count_of(static_cast<long long>(r.checks.size()), "check");
  if (r.regressions > 0) {
    std::printf("\ngate: %s in %s\n", count_of(r.regressions, "regression").c_str(),
                checks.c_str());
    return 1;
  }
  std::printf("\ngate: no regression in %s\n", checks.c_str());
  return 0;
}

}  // namespace

void register_gate(CLI::App& app) {
  auto a = std::make_shared<GateArgs>();
  CLI::App* sub = app.add_subcommand(
      "gate",
      "compare a summary against a baseline; exit 1 when a metric regressed beyond its bound, 2 "
      "when the summaries cannot be compared");
  sub->add_option("--baseline", a->baseline, "baseline summary JSON (bare, or under \"summary\")")
      ->required();
  sub->add_option("--current", a->current, "current summary JSON (bare, or under \"summary\")")
      ->required();
  sub->add_option("--max-regression", a->bounds,
                  "METRIC=PCT[:higher|lower|exact]: dotted metric (e.g. ttft_ms.mean) may get PCT "
                  "percent worse, in the direction named or read off its name (the report's "
                  "'better' column); repeatable, each metric once. Added to the default bounds "
                  "(replacing a "
                  "default's own; defaults the baseline lacks left out): hit_rate.overall, "
                  "hit_rate.dram, hit_rate.ssd, "
                  "reused_tokens, recomputed_tokens, bytes_loaded, bytes_saved, completed at 0");
  sub->add_flag("--no-default-bounds", a->no_defaults,
                "check only the --max-regression bounds (e.g. timing runs whose hits may vary)");
  sub->add_option("--out", a->out, "also write the gate report as JSON to this file")
      ->check(output_file());
  sub->add_flag("--allow-mismatch", a->allow_mismatch,
                "compare runs of different setups (traces, models, modes, executions, tasks, data "
                "or windows; refused by default)");
  // Exit 1 means a regression and nothing else: a gate that cannot compare (a missing or
  // malformed summary, runs of different setups) exits 2, so CI can tell the two apart.
  set_action(
      sub, [a] { return run_gate_cmd(*a); }, /*error_exit=*/2);
}

}  // namespace cb::app
