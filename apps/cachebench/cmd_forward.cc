// cachebench forward --model MODEL (--text T | --tokens 1,2,3) [--dump-logits FILE.json]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "apps/cachebench/model_args.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "lib/core/atomic_file.h"
#include "lib/core/error.h"

namespace cb::app {
namespace {

struct ForwardArgs {
  ModelArgs m;
  std::string text;
  std::string tokens;
  bool no_bos = false;
  std::string dump;
  int block_size = 16;
};

}  // namespace

void register_forward(CLI::App& app) {
  auto a = std::make_shared<ForwardArgs>();
  CLI::App* sub = app.add_subcommand(
      "forward", "Run one prefill and report (or dump) the logits of every position");
  add_model_options(sub, &a->m, /*cuda=*/true);
  auto* text =
      sub->add_option("--text", a->text, "input text (tokenized with the model's tokenizer)");
  auto* toks =
      sub->add_option("--tokens", a->tokens, "input token ids, separated by commas or spaces");
  text->excludes(toks);
  sub->add_flag("--no-bos", a->no_bos, "with --text: do not prepend BOS")->needs(text);
  sub->add_option("--dump-logits", a->dump,
                  "write {\"tokens\": [...], \"logits\": [[...], ...]} to this JSON file")
      ->check(output_file());
  sub->add_option("--block-size", a->block_size, "KV cache block size (tokens)")
      ->capture_default_str()
      ->check(in_range(1, 1024));
  set_action(sub, [a, text, toks] {
    // An empty --text is the BOS token alone, as generate's empty prompt; an empty --tokens
    // is an error of its own (parse_token_ids).
    const bool has_text = text->count() > 0;
    if (!has_text && toks->count() == 0)
      throw make_usage_error("forward", "no input", "pass --text or --tokens");
    resolve_backend(&a->m);
    LoadedModel lm = load_model(a->m, has_text);
    const auto& cfg = lm.config();
    std::vector<int32_t> ids =
        !has_text ? parse_token_ids(a->tokens, cfg.vocab_size, "--tokens")
                  : lm.tok->encode(a->text, !a->no_bos && lm.tok->add_bos_default());
    if (ids.empty()) throw make_error("--text", "the text produced no tokens");
    if (static_cast<int>(ids.size()) > cfg.max_context) {
      throw make_error(has_text ? "--text" : "--tokens",
                       std::to_string(ids.size()) +
                           " tokens exceed the model's context window of " +
                           std::to_string(cfg.max_context),
                       "give at most " + std::to_string(cfg.max_context) + " tokens");
    }
    const int64_t n = static_cast<int64_t>(ids.size());
    kv::KvCache cache(lm.runner().kv_config(
        static_cast<int>((n + a->block_size - 1) / a->block_size), a->block_size));
    cache.add_sequence(0);
    cache.reserve(0, n);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<float> logits = lm.runner().forward({{0, ids, true}}, cache);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int64_t V = cfg.vocab_size;
    // Non-finite logits are an error, never a result (nothing is written).
    const auto bad =
        std::find_if(logits.begin(), logits.end(), [](float x) { return !std::isfinite(x); });
    if (bad != logits.end()) {
      const auto i = static_cast<int64_t>(bad - logits.begin());
      throw make_error(
          "forward",
          "the logit of token " + std::to_string(i % V) + " at position " + std::to_string(i / V) +
              " is not finite (" + std::to_string(*bad) + "), so no result is written",
          "the weights hold NaN or infinite values, or the activations overflowed; "
          "check that the model file is intact (its checksum against its source's), or run "
          "it on the other --backend");
    }
    if (!a->dump.empty()) {
      nlohmann::json j;
      j["task"] = "forward";
      j["model"] = a->m.model;
      if (seeded_weights(a->m)) j["weights_seed"] = a->m.seed;
      j["tokens"] = ids;
      j["backend"] = backend_label(a->m);
      j["mode"] = "real";
      j["git"] = git_revision();
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t t = 0; t < n; ++t)
        rows.push_back(std::vector<float>(logits.begin() + t * V, logits.begin() + (t + 1) * V));
      j["logits"] = std::move(rows);
      write_file_atomically(a->dump, j.dump() + "\n", "the logits");
    }
    // Top-5 next tokens after the last position.
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    const float* last = logits.data() + (n - 1) * V;
    std::partial_sort(order.begin(), order.begin() + std::min<int64_t>(5, V), order.end(),
                      [last](int32_t x, int32_t y) { return last[x] > last[y]; });
    std::printf("tokens      %lld\n", static_cast<long long>(n));
    std::printf("time        %.3f s (%.1f tokens/s, backend %s)\n", secs,
                static_cast<double>(n) / secs, backend_label(a->m).c_str());
    std::printf("next token  (top 5 after the last position)\n");
    for (int r = 0; r < std::min<int64_t>(5, V); ++r) {
      const int32_t id = order[static_cast<size_t>(r)];
      // An embedding padded past the tokenizer's vocabulary has ids with no piece.
      const bool has_piece = lm.tok && static_cast<size_t>(id) < lm.tok->vocab_size();
      std::printf("  %6d  %10.4f  %s\n", id, static_cast<double>(last[id]),
                  has_piece ? lm.tok->piece(id).c_str()
                  : lm.tok  ? "(past the tokenizer's vocabulary)"
                            : "");
    }
    if (!a->dump.empty())
      std::printf("logits      %s (%lld x %lld)\n", a->dump.c_str(), static_cast<long long>(n),
                  static_cast<long long>(V));
    return 0;
  });
}

}  // namespace cb::app
