// cachebench perplexity --model MODEL --file F [--convention llama.cpp|lm-eval|gptq] [--ctx N]
//                       [--chunks K] [--max-tokens N] [--out FILE.json]
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string_view>

#include "apps/cachebench/format.h"
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
  std::string convention = "llama.cpp";
  bool ctx_given = false;  ///< --ctx was passed (else the convention's default)
};

// One markdown table row per run (every convention), then a line saying what the convention is.
void print_ppl_table(const PerplexityArgs& a, const eval::PerplexityResult& r,
                     const std::string& sha256, size_t tokens, const std::string& description) {
  const bool lmeval = r.convention == "lm-eval";
  std::printf("model %s, %s file %s (sha256 %.16s..., %zu tokens)\n\n", a.m.model.c_str(),
              a.dataset.c_str(), a.file.c_str(), sha256.c_str(), tokens);
  std::printf("| convention | n_ctx | windows | tokens scored | PPL | +/- |%s time (s) |\n",
              lmeval ? " word PPL | byte PPL | bits/byte |" : "");
  std::printf("|---|---|---|---|---|---|%s---|\n", lmeval ? "---|---|---|" : "");
  std::printf("| %s | %d | %d | %lld | %.4f | %.5f |", r.convention.c_str(), r.n_ctx, r.chunks,
              static_cast<long long>(r.scored_tokens), r.ppl, r.ppl_stderr);
  if (lmeval) std::printf(" %.4f | %.4f | %.4f |", r.word_ppl, r.byte_ppl, r.bits_per_byte);
  std::printf(" %.2f |\n\n%s\n", r.seconds, description.c_str());
}

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
    write_json(a.out, j);
  }
  return 0;
}

/// --method full with --convention lm-eval or gptq (eval/perplexity.h describes both).
int run_convention(const PerplexityArgs& a, const LoadedModel& lm, const datasets::Corpus& corpus,
                   std::vector<int32_t> tokens) {
  const bool lmeval = a.convention == "lm-eval";
  const int window = lm.model->config().max_context;
  eval::PerplexityOptions opt;
  opt.n_ctx = a.ctx_given ? a.ctx : lmeval ? window : 2048;
  opt.max_chunks = a.chunks;
  if (!a.ctx_given && opt.n_ctx > window) {
    throw make_error("--ctx",
                     "the gptq convention's default seqlen of 2048 exceeds the model's context "
                     "window of " +
                         std::to_string(window),
                     "pass --ctx " + std::to_string(window) + " or less");
  }
  if (lmeval && a.chunks > 0) {
    throw make_error("--chunks", "does not apply to the lm-eval convention (every token is scored)",
                     "use --max-tokens to shorten the stream");
  }
  const size_t all_tokens = tokens.size();
  const bool truncated = a.max_tokens > 0 && tokens.size() > static_cast<size_t>(a.max_tokens);
  if (truncated) tokens.resize(static_cast<size_t>(a.max_tokens));
  std::string decoded;
  std::string_view text = corpus.text;
  if (lmeval) {
    // lm-eval's prefix_token_id: BOS when the tokenizer has one, else EOS.
    opt.bos_id = lm.tok->bos_id() >= 0 ? lm.tok->bos_id() : lm.tok->eos_id();
    if (truncated) {
      decoded = lm.tok->decode(tokens);
      text = decoded;
    }
    opt.text_words = eval::lmeval_count_words(text);
    opt.text_bytes = static_cast<int64_t>(text.size());
  }
  std::fprintf(stderr, "perplexity: %zu tokens, n_ctx %d, convention %s\n", tokens.size(),
               opt.n_ctx, a.convention.c_str());
  const auto progress = [](int c, int n, double ppl) {
    std::fprintf(stderr, "\r  window %d/%d  running PPL %.4f", c, n, ppl);
    if (c == n) std::fputc('\n', stderr);
  };
  const eval::PerplexityResult r = lmeval
                                       ? eval::perplexity_lmeval(*lm.model, tokens, opt, progress)
                                       : eval::perplexity_gptq(*lm.model, tokens, opt, progress);
  std::string description =
      lmeval ? "lm-eval: loglikelihood_rolling, max_length " + std::to_string(r.n_ctx) +
                   ", prefix token " + std::to_string(opt.bos_id) +
                   ", every token scored once; words " + std::to_string(r.words) +
                   (truncated ? " (of the kept tokens' decoded text)" : "") + ", bytes " +
                   std::to_string(r.bytes)
             : "gptq: non-overlapping seqlen " + std::to_string(r.n_ctx) +
                   " windows, no BOS inserted, each window's first token unscored";
  if (truncated)
    description += "; first " + std::to_string(tokens.size()) + " of " +
                   std::to_string(all_tokens) + " tokens kept by --max-tokens";
  print_ppl_table(a, r, corpus.sha256, tokens.size(), description);
  if (!a.out.empty()) {
    nlohmann::json j = {{"convention", r.convention},
                        {"model", a.m.model},
                        {"file", a.file},
                        {"dataset", a.dataset},
                        {"file_sha256", corpus.sha256},
                        {"n_ctx", r.n_ctx},
                        {"chunks", r.chunks},
                        {"tokens", all_tokens},
                        {"tokens_used", tokens.size()},
                        {"max_tokens", a.max_tokens},
                        {"scored_tokens", r.scored_tokens},
                        {"tokens_processed", r.tokens_processed},
                        {"total_nll", r.total_nll},
                        {"mean_nll", r.mean_nll},
                        {"ppl", r.ppl},
                        {"ppl_stderr", r.ppl_stderr},
                        {"seconds", r.seconds},
                        {"backend", a.m.backend},
                        {"mode", "real"}};
    if (lmeval) {
      j["prefix_token"] = opt.bos_id;
      j["words"] = r.words;
      j["bytes"] = r.bytes;
      j["word_perplexity"] = r.word_ppl;
      j["byte_perplexity"] = r.byte_ppl;
      j["bits_per_byte"] = r.bits_per_byte;
    }
    write_json(a.out, j);
  }
  return 0;
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  CLI::App* sub = app.add_subcommand("perplexity",
                                     "Perplexity of a model on a text file, in the llama.cpp, "
                                     "lm-eval or gptq convention");
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
  CLI::Option* ctx_opt =
      sub->add_option("--ctx,-c", a->ctx,
                      "context size of each chunk (tokens); lm-eval: max_length (default: the "
                      "model's context window); gptq: seqlen (default 2048)")
          ->capture_default_str()
          ->check(CLI::Range(4, 1 << 20));
  sub->add_option("--chunks", a->chunks,
                  "evaluate at most this many chunks (llama.cpp) or windows (gptq) (0: all)")
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
                  "overflow study, lm-eval and gptq: keep only the first N tokens of the stream "
                  "(0: all); lm-eval then counts words and bytes on the text the kept tokens "
                  "decode to")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--convention", a->convention,
                  "with --method full: llama.cpp (n_ctx chunks, second half scored) | lm-eval "
                  "(lm-evaluation-harness rolling windows; word/byte perplexity, bits per byte) "
                  "| gptq (non-overlapping seqlen windows)")
      ->check(CLI::IsMember({"llama.cpp", "lm-eval", "gptq"}))
      ->capture_default_str();
  set_action(sub, [a, ctx_opt] {
    a->ctx_given = ctx_opt->count() > 0;
    if (a->method != "full" && a->convention != "llama.cpp") {
      throw make_error("--convention", "applies to --method full only",
                       "drop --convention or use --method full");
    }
    LoadedModel lm = load_model(a->m, true);
    const datasets::Corpus corpus = datasets::load_corpus(a->dataset, a->file);
    // lm-eval encodes documents without special tokens; its prefix token stands before them.
    const bool add_bos = a->convention != "lm-eval" && lm.tok->add_bos_default();
    const std::vector<int32_t> tokens = lm.tok->encode(corpus.text, add_bos);
    std::fprintf(stderr, "dataset %s: %s (sha256 %.16s...)\n", a->dataset.c_str(),
                 corpus.convention.c_str(), corpus.sha256.c_str());
    if (a->method != "full") return run_overflow_study(*a, lm, tokens, corpus.sha256);
    if (a->convention != "llama.cpp") return run_convention(*a, lm, corpus, tokens);
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
    print_ppl_table(*a, r, corpus.sha256, tokens.size(),
                    "llama.cpp: n_ctx chunks, BOS first, second half of each chunk scored");
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
      write_json(a->out, j);
    }
    return 0;
  });
}

}  // namespace cb::app
