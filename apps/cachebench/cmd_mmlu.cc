// cachebench mmlu --model MODEL --data DIR [--shots 5] [--subjects a,b] [--limit N]
//                 [--method none|tt|ca|nkvt|all --history-file F --ctx N [--truncate-ratio R]]
//                 [--out FILE.json]

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "apps/cachebench/format.h"
#include "apps/cachebench/model_args.h"
#include "apps/cachebench/progress.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "datasets/corpus.h"
#include "datasets/mmlu.h"
#include "datasets/sha256.h"
#include "datasets/text_io.h"
#include "eval/loglik.h"
#include "eval/mmlu.h"
#include "lib/core/error.h"
#include "lib/core/format.h"

namespace cb::app {
namespace {

struct MmluArgs {
  ModelArgs m;
  std::string data;
  int shots = 5;
  std::vector<std::string> subjects;
  int limit = 0;
  std::string method = "none";
  std::string history_file;
  int ctx = 0;
  double truncate_ratio = 0.5;
  int sink = 0;
  std::string bos = "auto";
  std::string out;
};

int run_mmlu_cmd(const MmluArgs& a) {
  LoadedModel lm = load_model(a.m, true);
  const std::vector<datasets::MmluSubject> all = datasets::load_mmlu_dir(a.data, a.shots > 0);
  const std::vector<datasets::MmluSubject> subjects = eval::mmlu_select(all, a.subjects);
  // Before the overflow study feeds its history and before any subject is scored.
  eval::mmlu_check_shots(subjects, a.shots);
  eval::MmluOptions opt;
  opt.shots = a.shots;
  opt.limit = a.limit;
  const bool add_bos = a.bos == "auto" ? lm.tok->add_bos_default() : a.bos == "yes";

  std::vector<std::unique_ptr<eval::ContextScorer>> scorers;
  int64_t history_tokens = 0;
  if (a.method == "none") {
    eval::LoglikOptions lo;
    lo.add_bos = add_bos;
    lo.max_length = a.ctx;
    scorers.push_back(std::make_unique<eval::LoglikScorer>(lm.runner(), *lm.tok, lo));
  } else {
    if (a.history_file.empty() || a.ctx == 0) {
      throw make_error("--method " + a.method, "the overflow study needs --history-file and --ctx",
                       "pass --history-file F --ctx N");
    }
    const std::string history_text = datasets::read_file_bytes(a.history_file);
    datasets::require_utf8_text(history_text, a.history_file);
    if (history_text.empty()) {
      throw make_error(a.history_file, "is empty",
                       "pass a text longer than --ctx " + std::to_string(a.ctx) + " tokens");
    }
    const std::vector<int32_t> history = lm.tok->encode(history_text, true);
    history_tokens = static_cast<int64_t>(history.size());
    if (history_tokens <= a.ctx) {
      throw make_error(a.history_file,
                       "the history has " + count_of(history_tokens, "token") +
                           "; it must be longer than --ctx " + std::to_string(a.ctx) +
                           " to overflow the window",
                       "use a longer history or a smaller --ctx");
    }
    eval::OverflowScorerOptions so;
    so.stream.n_ctx = a.ctx;
    so.stream.truncate_ratio = a.truncate_ratio;
    so.stream.sink = a.sink;
    const std::pair<eval::OverflowMethod, const char*> methods[] = {
        {eval::OverflowMethod::TT, "tt"},
        {eval::OverflowMethod::CA, "ca"},
        {eval::OverflowMethod::NKVT, "nkvt"}};
    for (const auto& [meth, key] : methods) {
      if (a.method != "all" && a.method != key) continue;
      const std::string name = eval::overflow_method_name(meth);
      std::fprintf(stderr, "mmlu: feeding %lld history tokens through a %d-token window (%s)\n",
                   static_cast<long long>(history_tokens), a.ctx, name.c_str());
      scorers.push_back(
          std::make_unique<eval::OverflowScorer>(lm.runner(), *lm.tok, meth, history, so));
    }
  }

  std::vector<eval::MmluResult> rs;
  for (auto& sc : scorers) {
    Progress p("mmlu " + sc->name(), "questions");
    rs.push_back(eval::run_mmlu(subjects, opt, *sc, std::ref(p)));
    std::fprintf(stderr, "mmlu %s: %lld questions in %.2f s\n", sc->name().c_str(),
                 static_cast<long long>(rs.back().n), rs.back().seconds);
  }

  // Table: one accuracy column per scorer.
  std::printf("MMLU (lm-eval default prompt, %d-shot from dev, letters scored by log-likelihood)\n",
              a.shots);
  std::printf("model %s, data %s", a.m.model.c_str(), a.data.c_str());
  if (a.limit > 0) std::printf(", at most %d questions per subject", a.limit);
  if (a.method != "none") {
    std::printf("\noverflow: %lld history tokens, window %d, drop %.0f%% on overflow",
                static_cast<long long>(history_tokens), a.ctx, 100.0 * a.truncate_ratio);
  }
  std::printf("\n\n| subject | n |");
  for (const auto& r : rs) std::printf(" acc %s |", r.scorer.c_str());
  std::printf("\n|---|---|");
  for (size_t i = 0; i < rs.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (size_t s = 0; s < subjects.size(); ++s) {
    std::printf("| %s | %lld |", rs[0].subjects[s].name.c_str(),
                static_cast<long long>(rs[0].subjects[s].n));
    for (const auto& r : rs) std::printf(" %.4f |", r.subjects[s].accuracy());
    std::printf("\n");
  }
  std::printf("| **overall (micro)** | %lld |", static_cast<long long>(rs[0].n));
  for (const auto& r : rs) std::printf(" %.4f |", r.micro);
  std::printf("\n| **overall (macro, %zu subjects)** | |", subjects.size());
  for (const auto& r : rs) std::printf(" %.4f |", r.macro);
  std::printf("\n\n");
  for (const auto& r : rs) {
    std::printf(
        "%s: %lld/%lld correct, %lld prompts truncated%s, %lld tokens processed, %lld reused, "
        "%.2f s\n",
        r.scorer.c_str(), static_cast<long long>(r.correct), static_cast<long long>(r.n),
        static_cast<long long>(r.truncated),
        a.method == "none" ? " (left, to fit the window)" : " (overflowed the window)",
        static_cast<long long>(r.stats.tokens_processed),
        static_cast<long long>(r.stats.tokens_reused), r.seconds);
  }

  if (!a.out.empty()) {
    nlohmann::json files = nlohmann::json::object();
    for (const auto& s : subjects) {
      for (const std::string& p : {s.test_path, s.dev_path}) {
        if (!p.empty()) files[p] = datasets::sha256_file_hex(p);
      }
    }
    nlohmann::json j = {{"task", "mmlu"},        {"convention", "lm-eval"},
                        {"model", a.m.model},    {"data", a.data},
                        {"files_sha256", files}, {"shots", a.shots},
                        {"limit", a.limit},      {"add_bos", a.method == "none" ? add_bos : true},
                        {"method", a.method},    {"backend", backend_label(a.m)},
                        {"mode", "real"},        {"git", git_revision()}};
    if (a.method != "none") {
      j["history_file"] = a.history_file;
      j["history_sha256"] = datasets::sha256_file_hex(a.history_file);
      j["history_tokens"] = history_tokens;
      j["n_ctx"] = a.ctx;
      j["truncate_ratio"] = a.truncate_ratio;
      j["sink"] = a.sink;
    } else {
      j["n_ctx"] = a.ctx > 0 ? a.ctx : lm.config().max_context;
    }
    for (const auto& r : rs) {
      nlohmann::json per = nlohmann::json::array();
      for (const auto& s : r.subjects) {
        per.push_back({{"subject", s.name},
                       {"n", s.n},
                       {"correct", s.correct},
                       {"acc", s.accuracy()},
                       {"truncated", s.truncated}});
      }
      j["results"].push_back({{"method", r.scorer},
                              {"n", r.n},
                              {"correct", r.correct},
                              {"acc_micro", r.micro},
                              {"acc_macro", r.macro},
                              {"truncated", r.truncated},
                              {"tokens_processed", r.stats.tokens_processed},
                              {"tokens_reused", r.stats.tokens_reused},
                              {"overflows", r.stats.overflows},
                              {"seconds", r.seconds},
                              {"subjects", per}});
    }
    if (seeded_weights(a.m)) j["weights_seed"] = a.m.seed;  // gate compares it
    write_json(a.out, j);
  }
  return 0;
}

}  // namespace

void register_mmlu(CLI::App& app) {
  auto a = std::make_shared<MmluArgs>();
  CLI::App* sub = app.add_subcommand(
      "mmlu",
      "MMLU accuracy (lm-evaluation-harness conventions), optionally after an overflowed history");
  add_model_options(sub, &a->m, /*cuda=*/true);
  sub->add_option("--data", a->data, "MMLU directory with test/ and dev/ CSV files")
      ->required()
      ->check(existing_dir("test/ and dev/ (MMLU's CSV files)"));
  sub->add_option("--shots", a->shots, "few-shot examples from dev (first k in file order)")
      ->capture_default_str()
      ->check(in_range(0, 64));
  sub->add_option("--subjects", a->subjects, "only these subjects (comma separated)")
      ->delimiter(',');
  sub->add_option("--limit", a->limit, "at most N test questions per subject (0: all)")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--method", a->method,
                  "none: plain lm-eval; tt|ca|nkvt|all: a history overflows a --ctx window "
                  "under token truncation, CachedAttention or naive KV truncation first")
      ->check(CLI::IsMember({"none", "tt", "ca", "nkvt", "all"}))
      ->capture_default_str();
  CLI::Option* history_opt =
      sub->add_option("--history-file", a->history_file,
                      "overflow study: text fed (with BOS) before the questions");
  sub->add_option("--ctx,-c", a->ctx,
                  "overflow study: the window (tokens); none: lm-eval max_length (0: the "
                  "model's context window)")
      ->capture_default_str()
      ->check(in_range(0, 1 << 20));
  const OverflowOptions overflow = add_overflow_options(sub, &a->truncate_ratio, &a->sink);
  sub->add_option("--bos", a->bos,
                  "method none: prepend BOS to each context (auto: the tokenizer's default, "
                  "as lm-eval does since its PR #3347 (October 2025); no: its earlier "
                  "add_bos_token=False, behind most published MMLU numbers)")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  sub->add_option("--out", a->out, "also write the result as JSON to this file")
      ->check(output_file());
  set_action(sub, [a, sub, history_opt, overflow] {
    install_interrupt_handlers("no result was written");
    for (const std::string& s : a->subjects) {
      if (!s.empty() && s[0] == '-') {  // CLI11 2.1: "--subjects ,," takes the next argument
        throw make_error("--subjects", "got no subject name before '" + s + "'",
                         "list subjects separated by commas, e.g. --subjects anatomy,astronomy");
      }
    }
    if (a->method == "none") {
      refuse_outside_overflow_study({history_opt, overflow.truncate_ratio, overflow.sink});
    } else {
      refuse_given(
          *sub, {"--bos"},
          "applies to --method none only (the overflow study feeds BOS before the history)",
          "drop --bos, or use --method none");
    }
    resolve_backend(&a->m, a->method == "none");  // auto: the overflow study stays on the CPU
    if (a->method != "none" && a->m.backend == "cuda") {
      // Its scorers copy whole overflow streams (caches included) per question, which device
      // blocks bound to one cache cannot follow.
      throw make_error("--method " + a->method,
                       "mmlu's overflow study runs on the CPU backend only (it copies whole KV "
                       "caches per question)",
                       "use --backend cpu, or --method none on the GPU");
    }
    return run_mmlu_cmd(*a);
  });
}

}  // namespace cb::app
