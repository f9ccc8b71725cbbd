// cachebench ablate STUDY|all [--mode sim|real] [--model M] [--profile P] [--out DIR] ...:
// the CachedAttention paper's ablation studies as tables, JSON and gnuplot plots.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/cachebench/format.h"
#include "apps/cachebench/model_args.h"
#include "apps/cachebench/progress.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "datasets/trace_synth.h"
#include "eval/ablate.h"
#include "lib/core/error.h"
#include "lib/engine/engine.h"

namespace cb::app {
namespace {

struct AblateArgs {
  std::string study;
  std::string mode = "sim";
  ModelArgs m;
  std::string profile = "a100-80gb";
  int gpus = 0;
  std::string trace, out;
  int64_t sessions = 0;
  bool no_join_split = false;
  std::string think = "0", kv_entries = "f32";
  bool no_plot = false, quiet = false;
  eval::AblateOptions o;
};

// Runs `gnuplot SCRIPT` in `dir`; a cb::Error saying what to do when it cannot.
void run_gnuplot(const std::string& dir, const std::string& script, const std::string& svg) {
  const pid_t pid = ::fork();
  if (pid < 0) throw make_error("gnuplot", "cannot start it (fork failed)");
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    ::execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  const int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (rc == 127) {
    throw make_error("gnuplot", "not found on PATH",
                     "run `make setup` (installs gnuplot-nox) or pass --no-plot");
  }
  if (rc != 0 || !std::filesystem::exists(dir + "/" + svg) ||
      std::filesystem::file_size(dir + "/" + svg) == 0) {
    throw make_error(dir + "/" + script, "gnuplot failed (exit " + std::to_string(rc) + ")",
                     "the script and its data file are kept next to it");
  }
}

int run_ablate(AblateArgs& a, CLI::App& sub) {
  eval::AblateOptions& o = a.o;
  o.sim = a.mode == "sim";
  o.think = sched::ThinkTime::parse(a.think);
  o.native_kv_entries = engine::parse_kv_entries(a.kv_entries);
  if (o.sim && was_given(sub, "--kv-entries")) {
    throw make_error("--kv-entries", "sim mode sizes entries by its profile's kv_bytes_per_element",
                     "drop --kv-entries, or use --mode real");
  }
  std::vector<std::string> studies;
  if (a.study == "all") {
    for (const auto& s : eval::ablation_studies()) {
      if (o.sim || eval::ablation_runs_real(s)) studies.push_back(s);
    }
  } else {
    eval::check_ablation_study(a.study, o.sim);
    studies.push_back(a.study);
  }
  // Options of studies this run does not have, or of a mode it does not run, would be ignored.
  bool need_trace = false, micro = false;
  for (const auto& s : studies) {
    need_trace = need_trace || eval::ablation_needs_trace(s);
    micro = micro || !eval::ablation_needs_trace(s);
  }
  if (!need_trace) {
    refuse_given(sub,
                 {"--trace", "--tokenizer", "--sessions", "--no-join-split", "--rate",
                  "--think-time", "--max-batch", "--max-output-tokens"},
                 "applies to the trace studies (eviction, truncation, capacity, medium, "
                 "arrival-rate), not to " +
                     a.study,
                 "drop it, or run a trace study");
  }
  if (a.study == "arrival-rate") {
    refuse_given(sub, {"--rate"}, "arrival-rate sweeps the rate itself (0.5-2.0 sessions/s)",
                 "drop it");
  }
  if (!was_given(sub, "--trace")) {
    refuse_given(sub, {"--tokenizer", "--no-join-split"}, "applies to a ShareGPT --trace only",
                 "drop it, or give --trace FILE.json");
  }
  if (!micro) {
    refuse_given(
        sub, {"--batch"},
        "applies to the micro studies (recompute-vs-ca, preload, async-save), not to " + a.study,
        "drop it, or run a micro study");
  }
  if (o.sim) {
    refuse_given(sub, {"--reps"}, "sim mode is deterministic: one run a point",
                 "drop it, or use --mode real");
  } else {
    refuse_given(sub, {"--profile", "--gpus"},
                 "models hardware in sim mode; real mode runs on this machine",
                 "drop it, or use --mode sim");
  }
  if (!a.out.empty()) {
    std::vector<std::string> outputs;
    for (const auto& s : studies) {
      for (const char* ext : {".json", ".svg", ".gp", ".dat"}) {
        if (a.no_plot && std::string(ext) != ".json") continue;
        outputs.push_back(a.out + "/" + s + ext);
      }
    }
    check_derived_outputs(sub, "--out", outputs);
    // The directory is made, and shown writable, before any study runs; only its last
    // component is made (a typo would otherwise make a tree anywhere), as replay's --out
    // wants its directory to exist.
    std::error_code ec;
    std::filesystem::path dir(a.out);
    if (!dir.has_filename()) dir = dir.parent_path();  // "out/" is "out"
    const std::filesystem::path parent = dir.parent_path();
    struct stat st {};
    if (::stat(a.out.c_str(), &st) != 0) {
      const std::string above = parent.empty() ? "." : parent.string();
      if (::stat(above.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw make_error("--out", "the directory above " + a.out + " does not exist",
                         "create it first");
      }
      if ((st.st_mode & 0222) == 0) {
        throw make_error("--out", "the directory above " + a.out + kReadOnly, "write elsewhere");
      }
      std::filesystem::create_directory(dir, ec);
    }
    if (::stat(a.out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw make_error("--out", a.out + " is not a directory and cannot be made one",
                       "name a directory for the JSON and plots");
    }
    if ((st.st_mode & 0222) == 0) {
      throw make_error("--out", a.out + kReadOnly,
                       "name a writable directory for the JSON and plots");
    }
    const std::string probe = a.out + "/.cachebench-probe." + std::to_string(::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw make_error("--out", a.out + ": cannot write in it (" + std::strerror(errno) + ")",
                       "name a writable directory for the JSON and plots");
    }
    ::close(fd);
    ::unlink(probe.c_str());
    for (const std::string& f : outputs) check_derived_output("--out", f);  // a read-only one
  } else if (sub.get_option("--out")->count() > 0) {
    throw make_error("--out", "an empty path", "name a directory, or leave --out out");
  }
  if (a.m.model.empty()) {
    if (!o.sim) {
      throw make_error("--model", "real mode runs a model: pass --model (e.g. stories260K.gguf)");
    }
    a.m.model = "preset:llama-13b";
  }
  if (o.sim) {
    refuse_given(sub, {"--backend", "--cpu-weights", "--gpu-storage", "--gpu"},
                 "sim mode runs no model (its cost model stands in for one)",
                 "drop it, or use --mode real");
  }
  resolve_backend(&a.m, !o.sim);
  LoadedModel lm = load_model(a.m, false, !o.sim);
  if (!o.sim) o.model = &lm.runner();
  o.config = lm.source->config();
  if (o.sim) {
    o.profile = sim::load_profile(a.profile);
    if (a.gpus > 0) {
      o.profile.gpus = a.gpus;
      o.profile.sources["gpus"] = "--gpus " + std::to_string(a.gpus);
    }
    // A size the profile lacks (a calibrated one) taken from the paper, said once before the
    // studies run, as replay says its --dram auto (also with --quiet: the results depend on it).
    std::vector<std::string> said;
    for (const auto& s : studies) {
      for (const std::string& n : eval::ablation_profile_notes(o.profile, s)) {
        if (std::find(said.begin(), said.end(), n) != said.end()) continue;
        said.push_back(n);
        std::fprintf(stderr, "ablate: note: %s\n", n.c_str());
      }
    }
  }
  // Trace studies: the given trace, or a synthetic one with ShareGPT's statistics.
  datasets::Trace trace;
  if (need_trace) {
    if (!a.trace.empty()) {
      datasets::TraceLoadOptions lo;
      lo.limit = a.sessions;
      lo.join_split = !a.no_join_split;
      trace = datasets::load_trace(a.trace, trace_tokenizer(lm, &lo), lo);
      refuse_text_options_on_lengths(sub, trace.kind);
    } else {
      datasets::SynthOptions so;
      so.sessions = a.sessions > 0 ? a.sessions : o.sim ? 9000 : 24;
      so.seed = o.seed;
      trace = datasets::synth_trace(so);
      trace.path = "synthetic: trace synth --sessions " + std::to_string(so.sessions) + " --seed " +
                   std::to_string(so.seed);
    }
    o.trace = &trace;
  }
  install_interrupt_handlers("the study under way wrote nothing (those before it wrote theirs)");
  o.log = [quiet = a.quiet](const std::string& s) {
    check_interrupted();
    if (!quiet) std::fprintf(stderr, "ablate: %s\n", s.c_str());
  };
  o.progress = [](int64_t, int64_t) { check_interrupted(); };  // Ctrl-C stops a long point too
  for (const auto& s : studies) {
    o.study = s;
    const eval::AblateResult r = eval::run_ablation(o);
    std::printf("%s\n", eval::ablation_table(r).c_str());
    if (a.out.empty()) continue;
    nlohmann::json j = eval::ablation_json(r);
    j["tool"] = "cachebench ablate";
    j["git"] = git_revision();
    j["model_source"] = a.m.model;
    j["backend"] = o.sim ? "sim" : backend_label(a.m);
    if (!o.sim) j["native_kv_entries"] = o.native_kv_entries;
    if (o.sim) {
      j["profile"] = o.profile.to_json();
      j["profile_file"] = o.profile.loaded_from;  // as replay's: outside what gate compares
    }
    const std::string base = a.out + "/" + s;
    write_json(base + ".json", j);
    std::string wrote = base + ".json";
    if (!a.no_plot) {
      const std::string gp = eval::write_ablation_plot(r, a.out);
      run_gnuplot(a.out, s + ".gp", s + ".svg");
      wrote += ", " + base + ".svg (" + gp + ")";
    }
    std::fprintf(stderr, "ablate: wrote %s\n", wrote.c_str());
  }
  return 0;
}

}  // namespace

void register_ablate(CLI::App& app) {
  auto a = std::make_shared<AblateArgs>();
  std::string names;
  for (const auto& s : eval::ablation_studies()) names += (names.empty() ? "" : ", ") + s;
  CLI::App* sub = app.add_subcommand(
      "ablate", "The CachedAttention paper's ablation studies (Figures 18-25), real or sim");
  sub->add_option("study", a->study, "one of: " + names + ", or all")->required();
  sub->add_option("--mode", a->mode,
                  "sim (cost model, any scale) or real (the model on --backend: recompute-vs-ca, "
                  "preload, async-save, truncation)")
      ->capture_default_str()
      ->check(CLI::IsMember({"sim", "real"}));
  sub->add_option("--model,-m", a->m.model,
                  "model (.gguf, checkpoint dir, preset:NAME); sim default preset:llama-13b");
  add_backend_options(sub, &a->m);
  add_cpu_weights_option(sub, &a->m);
  sub->add_option("--profile", a->profile, "sim: a100-80gb, h100-80gb, h200 or a profile file")
      ->capture_default_str();
  sub->add_option("--gpus", a->gpus, "sim: tensor-parallel GPUs (0: the profile's)")
      ->check(in_range(0, sim::kMaxGpus));
  sub->add_option("--trace", a->trace,
                  "trace for the trace studies (default: a synthetic ShareGPT-like trace)");
  sub->add_option("--tokenizer", a->m.tokenizer,
                  "tokenizer for a ShareGPT --trace (tokenizer.model, tokenizer.json or .gguf; "
                  "default: the model's vocabulary)");
  sub->add_option("--sessions", a->sessions,
                  "conversations of the synthetic trace, or the first N of --trace (default: "
                  "9000 in sim, 24 in real mode)")
      ->check(in_range(1, 1e8));
  sub->add_flag("--no-join-split", a->no_join_split,
                "read a ShareGPT file's split pieces (ID_0, ID_8, ...) as separate conversations");
  sub->add_option("--seed", a->o.seed, "trace synthesis, arrivals, token ids")
      ->capture_default_str();
  sub->add_option("--batch", a->o.batch, "micro studies: requests per batch")
      ->capture_default_str()
      ->check(in_range(1, 4096));  // a batch's requests are 1K-1.6K tokens each
  sub->add_option("--reps", a->o.reps, "real mode: repetitions per point (median)")
      ->capture_default_str()
      ->check(above(0));
  sub->add_option("--max-batch", a->o.max_batch, "trace studies: sequences per step")
      ->capture_default_str()
      ->check(above(0));
  sub->add_option("--rate", a->o.rate, "trace studies: new sessions per second")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option(
         "--think-time", a->think,
         "trace studies: 0, const:S, exp:MEAN, uniform:LO:HI, until:T (every next turn at T s)")
      ->capture_default_str();
  sub->add_option("--ctx", a->o.ctx, "context window in tokens (0: the model's)")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--max-output-tokens", a->o.max_output_tokens,
                  "trace studies: cap every answer (0: none)")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--out,-o", a->out, "directory for STUDY.json, STUDY.svg and the plot script");
  sub->add_option("--kv-entries", a->kv_entries,
                  "real mode: element type of stored KV entries, f32 or native (the backend's own "
                  "KV type: fp16/bf16 with --backend cuda)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "native"}));
  sub->add_flag("--no-plot", a->no_plot, "write JSON only (no gnuplot)");
  sub->add_flag("--quiet", a->quiet, "no progress lines on stderr");
  set_action(sub, [a, sub] { return run_ablate(*a, *sub); });
}

}  // namespace cb::app
