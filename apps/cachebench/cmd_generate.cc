// cachebench generate --model MODEL --prompt T [-n N] [--temperature 0 --top-k --top-p --min-p
// --repeat-penalty --seed S] [--out F.json]
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/cachebench/model_args.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "lib/core/atomic_file.h"
#include "lib/core/error.h"

namespace cb::app {
namespace {

struct GenerateArgs {
  ModelArgs m;
  std::string prompt;
  int n = 64;
  model::SamplerConfig sampling;
  bool ignore_eos = false;
  bool no_bos = false;
  std::string out;
};

nlohmann::json sampling_json(const model::SamplerConfig& c) {
  return {{"temperature", c.temperature},
          {"top_k", c.top_k},
          {"top_p", c.top_p},
          {"min_p", c.min_p},
          {"repeat_penalty", c.repeat_penalty},
          {"repeat_last_n", c.repeat_last_n},
          {"seed", c.seed}};
}

}  // namespace

void register_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt (greedy by default)");
  add_model_options(sub, &a->m, /*cuda=*/true);
  sub->add_option("--prompt,-p", a->prompt, "the prompt text")->required();
  sub->add_option("-n,--n-tokens", a->n, "tokens to generate")
      ->capture_default_str()
      ->check(in_range(1, 1 << 20));
  add_sampling_options(sub, &a->sampling);
  sub->add_flag("--ignore-eos", a->ignore_eos, "keep generating after the end-of-sequence token");
  sub->add_flag("--no-bos", a->no_bos, "do not prepend BOS to the prompt");
  sub->add_option("--out", a->out,
                  "write the text (the prompt's included), the generated ids and timings as JSON "
                  "(prefill_tok_s, decode_tok_s) for gate")
      ->check(output_file());
  set_action(sub, [a, sub] {
    refuse_idle_sampling_options(*sub, a->sampling);
    resolve_backend(&a->m);
    LoadedModel lm = load_model(a->m, true);
    const auto& cfg = lm.config();
    std::vector<int32_t> prompt =
        lm.tok->encode(a->prompt, !a->no_bos && lm.tok->add_bos_default());
    if (prompt.empty())
      throw make_error("--prompt", "the prompt produced no tokens", "pass a non-empty prompt");
    const int64_t total = static_cast<int64_t>(prompt.size()) + a->n;
    if (total > cfg.max_context) {
      throw make_usage_error(
          "generate",
          "prompt (" + std::to_string(prompt.size()) + " tokens) + -n " + std::to_string(a->n) +
              " exceeds the context window of " + std::to_string(cfg.max_context),
          static_cast<int64_t>(prompt.size()) >= cfg.max_context
              ? "shorten the prompt: it alone fills the window"
              : "generate at most " +
                    std::to_string(cfg.max_context - static_cast<int64_t>(prompt.size())) +
                    " tokens (-n)");
    }
    kv::KvCache cache(lm.runner().kv_config(static_cast<int>((total + 15) / 16)));
    cache.add_sequence(0);
    cache.reserve(0, total);
    model::Sampler sampler(a->sampling);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> logits = lm.runner().forward({{0, prompt, false}}, cache);
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<int32_t> all = prompt;
    std::string shown;
    stream_text(lm.tok->decode(prompt), &shown);
    // Ids past the tokenizer's vocabulary (an embedding padded beyond it) have no text.
    const int vocab = std::min(cfg.vocab_size, static_cast<int>(lm.tok->vocab_size()));
    // Tokens sampled (an EOS that stops the run included), and decode steps: the forward
    // calls after the prefill, one for each sampled token but the last.
    int generated = 0, steps = 0;
    bool eos = false;
    for (int i = 0; i < a->n; ++i) {
      const int32_t next = sampler.sample(logits.data(), vocab, all.data(), all.size());
      ++generated;
      if (next == lm.tok->eos_id() && !a->ignore_eos) {
        eos = true;
        break;
      }
      all.push_back(next);
      stream_text(lm.tok->decode(all), &shown);
      if (i + 1 < a->n) {
        logits = lm.runner().forward({{0, {next}, false}}, cache);
        ++steps;
      }
    }
    const std::string text = lm.tok->decode(all);
    stream_text(text, &shown, /*last=*/true);
    const auto t2 = std::chrono::steady_clock::now();
    std::fputs("\n", stdout);
    std::fflush(stdout);
    const double pre = std::chrono::duration<double>(t1 - t0).count();
    const double dec = std::chrono::duration<double>(t2 - t1).count();
    const double pre_rate = static_cast<double>(prompt.size()) / pre;
    const double dec_rate = steps > 0 && dec > 0 ? steps / dec : 0.0;
    std::fprintf(stderr,
                 "prefill: %zu tokens in %.3f s (%.1f tokens/s); decode: %d tokens generated, %d "
                 "steps in %.3f s (%.1f tokens/s); backend %s\n",
                 prompt.size(), pre, pre_rate, generated, steps, dec, dec_rate,
                 backend_label(a->m).c_str());
    if (!a->out.empty()) {
      const std::vector<int32_t> ids(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                     all.end());
      nlohmann::json j = {{"task", "generate"},
                          {"model", a->m.model},
                          {"prompt", a->prompt},
                          {"prompt_tokens", prompt.size()},
                          {"prompt_ids", prompt},
                          {"add_bos", !a->no_bos && lm.tok->add_bos_default()},
                          {"n_tokens", a->n},
                          {"sampling", sampling_json(a->sampling)},
                          {"ignore_eos", a->ignore_eos},
                          {"generated_tokens", generated},
                          {"stopped_at_eos", eos},
                          {"tokens", ids},
                          {"text", text},
                          {"prefill_s", pre},
                          {"prefill_tok_s", pre_rate},
                          {"decode_steps", steps},
                          {"decode_s", dec},
                          {"decode_tok_s", dec_rate},
                          {"backend", backend_label(a->m)},
                          {"mode", "real"},
                          {"git", git_revision()}};
      if (seeded_weights(a->m)) j["weights_seed"] = a->m.seed;
      write_file_atomically(a->out,
                            j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                            "the result");
    }
    return 0;
  });
}

}  // namespace cb::app
