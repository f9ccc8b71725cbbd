// cachebench piqa --model MODEL --data DIR [--split valid] [--limit N] [--out FILE.json]
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/cachebench/format.h"
#include "apps/cachebench/model_args.h"
#include "apps/cachebench/progress.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "datasets/piqa.h"
#include "datasets/sha256.h"
#include "eval/loglik.h"
#include "eval/piqa.h"
#include "lib/core/error.h"

namespace cb::app {
namespace {

struct PiqaArgs {
  ModelArgs m;
  std::string data;
  std::string split = "valid";
  int64_t limit = 0;
  int ctx = 0;
  std::string bos = "auto";
  std::string out;
};

int run_piqa_cmd(const PiqaArgs& a) {
  LoadedModel lm = load_model(a.m, true);
  const std::string jsonl = a.data + "/" + a.split + ".jsonl";
  const std::string labels = a.data + "/" + a.split + "-labels.lst";
  const std::vector<datasets::PiqaExample> examples = datasets::load_piqa(jsonl, labels);
  eval::LoglikOptions lo;
  lo.add_bos = a.bos == "auto" ? lm.tok->add_bos_default() : a.bos == "yes";
  lo.max_length = a.ctx;
  eval::LoglikScorer scorer(lm.runner(), *lm.tok, lo);
  Progress p("piqa", "questions");
  const eval::PiqaResult r = eval::run_piqa(examples, a.limit, scorer, std::ref(p));

  std::printf(
      "PIQA (lm-eval: \"Question: {goal}\\nAnswer:\", solutions scored by "
      "log-likelihood)\n");
  std::printf("model %s, data %s (%s split, %zu examples)\n\n", a.m.model.c_str(), a.data.c_str(),
              a.split.c_str(), examples.size());
  std::printf("| n | acc | acc_norm | truncated | time (s) |\n|---|---|---|---|---|\n");
  std::printf("| %lld | %.4f | %.4f | %lld | %.2f |\n", static_cast<long long>(r.n), r.acc,
              r.acc_norm, static_cast<long long>(r.truncated), r.seconds);
  std::printf("\n%lld tokens processed, %lld context tokens reused\n",
              static_cast<long long>(r.stats.tokens_processed),
              static_cast<long long>(r.stats.tokens_reused));
  if (!a.out.empty()) {
    nlohmann::json j = {
        {"task", "piqa"},
        {"convention", "lm-eval"},
        {"model", a.m.model},
        {"data", a.data},
        {"split", a.split},
        {"files_sha256",
         {{jsonl, datasets::sha256_file_hex(jsonl)}, {labels, datasets::sha256_file_hex(labels)}}},
        {"shots", 0},
        {"limit", a.limit},
        {"add_bos", lo.add_bos},
        {"n_ctx", scorer.max_length()},
        {"n", r.n},
        {"correct", r.correct},
        {"correct_norm", r.correct_norm},
        {"acc", r.acc},
        {"acc_norm", r.acc_norm},
        {"truncated", r.truncated},
        {"tokens_processed", r.stats.tokens_processed},
        {"tokens_reused", r.stats.tokens_reused},
        {"seconds", r.seconds},
        {"backend", backend_label(a.m)},
        {"mode", "real"},
        {"git", git_revision()}};
    if (seeded_weights(a.m)) j["weights_seed"] = a.m.seed;  // gate compares it
    write_json(a.out, j);
  }
  return 0;
}

}  // namespace

void register_piqa(CLI::App& app) {
  auto a = std::make_shared<PiqaArgs>();
  CLI::App* sub = app.add_subcommand(
      "piqa", "PIQA accuracy (lm-evaluation-harness conventions: acc and acc_norm)");
  add_model_options(sub, &a->m, /*cuda=*/true);
  sub->add_option("--data", a->data, "PIQA directory with <split>.jsonl and <split>-labels.lst")
      ->required()
      ->check(existing_dir("<split>.jsonl and <split>-labels.lst (PIQA's files)"));
  sub->add_option("--split", a->split, "which split's files to read")->capture_default_str();
  sub->add_option("--limit", a->limit, "evaluate only the first N examples (0: all)")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--ctx,-c", a->ctx, "lm-eval max_length (0: the model's context window)")
      ->capture_default_str()
      ->check(in_range(0, 1 << 20));
  sub->add_option("--bos", a->bos,
                  "prepend BOS to each context (auto: the tokenizer's default; lm-eval's "
                  "add_bos_token)")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  sub->add_option("--out", a->out, "also write the result as JSON to this file")
      ->check(output_file());
  set_action(sub, [a] {
    install_interrupt_handlers("no result was written");
    resolve_backend(&a->m);
    return run_piqa_cmd(*a);
  });
}

}  // namespace cb::app
