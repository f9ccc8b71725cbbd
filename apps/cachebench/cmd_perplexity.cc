// cachebench perplexity --model MODEL --file F [--ctx N] [--chunks K] [--out FILE.json]
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "apps/cachebench/model_args.h"
#include "apps/cachebench/subcommands.h"
#include "eval/perplexity.h"
#include "lib/core/error.h"

namespace cb::app {
namespace {

struct PerplexityArgs {
  ModelArgs m;
  std::string file;
  int ctx = 512;
  int chunks = 0;
  std::string out;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw make_error(path, "cannot open the text file", "check the path given to --file");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  CLI::App* sub = app.add_subcommand("perplexity",
                                     "Perplexity of a model on a text file (llama.cpp convention: "
                                     "n_ctx chunks, second half scored)");
  add_model_options(sub, &a->m);
  sub->add_option("--file,-f", a->file, "plain UTF-8 text file")->required();
  sub->add_option("--ctx,-c", a->ctx, "context size of each chunk (tokens)")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 20));
  sub->add_option("--chunks", a->chunks, "evaluate at most this many chunks (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--out", a->out, "also write the result as JSON to this file");
  set_action(sub, [a] {
    LoadedModel lm = load_model(a->m, true);
    const std::string text = read_text(a->file);
    const std::vector<int32_t> tokens = lm.tok->encode(text, lm.tok->add_bos_default());
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
