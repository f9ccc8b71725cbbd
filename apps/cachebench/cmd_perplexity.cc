// cachebench perplexity --model MODEL --file F [--ctx N] [--chunks K] [--out FILE.json]
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "apps/cachebench/model_args.h"
#include "apps/cachebench/subcommands.h"
#include "datasets/corpus.h"
#include "eval/overflow.h"
#include "eval/perplexity.h"
#include "lib/core/error.h"

namespace cb::app {
namespace {

struct PerplexityArgs {
  ModelArgs m;
  std::string file;
  std::string dataset = "text";
  int ctx = 512;
  int chunks = 0;
  std::string out;
  std::string method = "full";
  double truncate_ratio = 0.5;
  int sink = 0;
  int64_t max_tokens = 0;
};

int run_overflow_study(const PerplexityArgs& a, const LoadedModel& lm,
                       const std::vector<int32_t>& tokens, const std::string& sha256) {
  std::vector<eval::OverflowMethod> methods;
  if (a.method == "tt" || a.method == "all") methods.push_back(eval::OverflowMethod::TT);
  if (a.method == "ca" || a.method == "all") methods.push_back(eval::OverflowMethod::CA);
  if (a.method == "nkvt" || a.method == "all") methods.push_back(eval::OverflowMethod::NKVT);
  eval::OverflowOptions opt;
  opt.n_ctx = a.ctx;
  opt.truncate_ratio = a.truncate_ratio;
  opt.sink = a.sink;
  opt.max_tokens = a.max_tokens;
  std::vector<eval::OverflowResult> rs;
  for (auto method : methods) {
    const char* name = eval::overflow_method_name(method);
    rs.push_back(
        eval::run_overflow(*lm.model, tokens, method, opt, [name](int64_t done, int64_t total) {
          if (done == total || done % 4096 < 256) {
            std::fprintf(stderr, "\r  %-4s %5.1f%% of %lld tokens", name, 100.0 * done / total,
                         static_cast<long long>(total));
            if (done == total) std::fputc('\n', stderr);
          }
        }));
  }
  std::printf("overflow study: window %d tokens, drop %.0f%% of it on overflow, %d sink tokens\n",
              a.ctx, 100.0 * a.truncate_ratio, a.sink);
  std::printf("model %s, file %s\n\n", a.m.model.c_str(), a.file.c_str());
  std::printf(
      "| method | PPL | scored tokens | overflows | tokens recomputed | tokens processed | time "
      "(s) |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& r : rs) {
    std::printf("| %s | %.4f | %lld | %lld | %lld | %lld | %.2f |\n",
                eval::overflow_method_name(r.method), r.ppl,
                static_cast<long long>(r.scored_tokens), static_cast<long long>(r.overflows),
                static_cast<long long>(r.tokens_recomputed),
                static_cast<long long>(r.tokens_processed), r.seconds);
  }
  if (!a.out.empty()) {
    nlohmann::json j = {{"study", "overflow"},
                        {"model", a.m.model},
                        {"file", a.file},
                        {"dataset", a.dataset},
                        {"file_sha256", sha256},
                        {"n_ctx", a.ctx},
                        {"truncate_ratio", a.truncate_ratio},
                        {"sink", a.sink},
                        {"tokens", tokens.size()},
                        {"backend", a.m.backend},
                        {"mode", "real"}};
    for (const auto& r : rs) {
      j["results"].push_back({{"method", eval::overflow_method_name(r.method)},
                              {"ppl", r.ppl},
                              {"mean_nll", r.mean_nll},
                              {"scored_tokens", r.scored_tokens},
                              {"overflows", r.overflows},
                              {"tokens_recomputed", r.tokens_recomputed},
                              {"tokens_processed", r.tokens_processed},
                              {"seconds", r.seconds}});
    }
    std::ofstream out(a.out);
    out << j.dump(2) << "\n";
    if (!out) throw make_error(a.out, "cannot write the JSON result", "check the path");
  }
  return 0;
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  CLI::App* sub = app.add_subcommand("perplexity",
                                     "Perplexity of a model on a text file (llama.cpp convention: "
                                     "n_ctx chunks, second half scored)");
  add_model_options(sub, &a->m);
  sub->add_option("--file,-f", a->file,
                  "the dataset file (e.g. wiki.test.raw, ptb.test.txt, c4 .jsonl[.gz])")
      ->required();
  sub->add_option("--dataset", a->dataset,
                  "how to read --file: wikitext2-raw | wikitext2 (tokens version) | ptb (lines "
                  "joined) | c4 (JSON "
                  "lines, plain or gzipped) | text")
      ->check(CLI::IsMember({"wikitext2", "wikitext2-raw", "ptb", "c4", "text"}))
      ->capture_default_str();
  sub->add_option("--ctx,-c", a->ctx, "context size of each chunk (tokens)")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 20));
  sub->add_option("--chunks", a->chunks, "evaluate at most this many chunks (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--out", a->out, "also write the result as JSON to this file");
  sub->add_option(
         "--method", a->method,
         "full: standard perplexity; tt|ca|nkvt|all: the context-overflow study (token truncation, "
         "CachedAttention, naive KV truncation)")
      ->check(CLI::IsMember({"full", "tt", "ca", "nkvt", "all"}))
      ->capture_default_str();
  sub->add_option("--truncate-ratio", a->truncate_ratio,
                  "overflow study: fraction of the window dropped on overflow")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--sink", a->sink,
                  "overflow study: first tokens of the window that are never dropped")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-tokens", a->max_tokens,
                  "overflow study: stream at most this many tokens (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  set_action(sub, [a] {
    LoadedModel lm = load_model(a->m, true);
    const datasets::Corpus corpus = datasets::load_corpus(a->dataset, a->file);
    const std::vector<int32_t> tokens = lm.tok->encode(corpus.text, lm.tok->add_bos_default());
    std::fprintf(stderr, "dataset %s: %s (sha256 %.16s...)\n", a->dataset.c_str(),
                 corpus.convention.c_str(), corpus.sha256.c_str());
    if (a->method != "full") return run_overflow_study(*a, lm, tokens, corpus.sha256);
    eval::PerplexityOptions opt;
    opt.n_ctx = a->ctx;
    opt.max_chunks = a->chunks;
    opt.bos_id = lm.tok->add_bos_default() ? lm.tok->bos_id() : -1;
    std::fprintf(stderr, "perplexity: %zu tokens, %d-token chunks, convention llama.cpp\n",
                 tokens.size(), a->ctx);
    const eval::PerplexityResult r =
        eval::perplexity_llamacpp(*lm.model, tokens, opt, [](int c, int n, double ppl) {
          std::fprintf(stderr, "\r  chunk %d/%d  running PPL %.4f", c, n, ppl);
          if (c == n) std::fputc('\n', stderr);
        });
    std::printf("convention     llama.cpp (n_ctx chunks, BOS first, second half scored)\n");
    std::printf("model          %s\n", a->m.model.c_str());
    std::printf("file           %s (%zu tokens)\n", a->file.c_str(), tokens.size());
    std::printf("chunks         %d x %d tokens, %lld tokens scored\n", r.chunks, r.n_ctx,
                static_cast<long long>(r.scored_tokens));
    std::printf("PPL            %.4f +/- %.5f\n", r.ppl, r.ppl_stderr);
    std::printf("time           %.2f s (%.0f tokens/s)\n", r.seconds,
                r.chunks * static_cast<double>(r.n_ctx) / r.seconds);
    if (!a->out.empty()) {
      nlohmann::json j = {{"convention", "llama.cpp"},
                          {"model", a->m.model},
                          {"file", a->file},
                          {"n_ctx", r.n_ctx},
                          {"chunks", r.chunks},
                          {"scored_tokens", r.scored_tokens},
                          {"mean_nll", r.mean_nll},
                          {"ppl", r.ppl},
                          {"ppl_stderr", r.ppl_stderr},
                          {"seconds", r.seconds},
                          {"backend", a->m.backend},
                          {"mode", "real"}};
      std::ofstream out(a->out);
      out << j.dump(2) << "\n";
      if (!out) throw make_error(a->out, "cannot write the JSON result", "check the path");
    }
    return 0;
  });
}

}  // namespace cb::app
