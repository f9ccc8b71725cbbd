// cachebench perplexity --model MODEL --file F [--convention llama.cpp|lm-eval|gptq] [--ctx N]
//                       [--chunks K] [--max-tokens N] [--batch B] [--out FILE.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string_view>

#include "apps/cachebench/format.h"
#include "apps/cachebench/model_args.h"
#include "apps/cachebench/progress.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "datasets/corpus.h"
#include "eval/overflow.h"
#include "eval/perplexity.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/tokenizer/tokenizer.h"

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
  /// Windows per Model::forward call (conventions); > 1: the overflow study's methods in
  /// lockstep. Default 4: on stories260K 4 and 8 tie, within 2% of 1, and 16 is slower
  /// (docs/perf.md); 4 keeps the logits buffer (batch * n_ctx * vocab floats) moderate.
  int batch = 4;
  /// lm-eval convention: "auto", BOS before each document when the tokenizer adds one (lm-eval's
  /// tok_encode default since its PR #3347), or "no" (its earlier add_bos_token=False).
  std::string bos = "auto";
};

/// Whether the text (each document, in the lm-eval convention) is tokenized with BOS first: the
/// tokenizer's default, which lm-eval's --bos no turns off (BOS then scored after the prefix).
bool adds_bos(const PerplexityArgs& a, const LoadedModel& lm) {
  return lm.tok->add_bos_default() && (a.convention != "lm-eval" || a.bos == "auto");
}

/// lm-eval scores WikiText per article with its detokenizer (its `wikitext` task); the other
/// corpora stay one stream (lm-eval has no task on the Mikolov PTB, GPTQ-style C4 or plain
/// text files: its paloma_ptb / paloma_c4_en tasks read allenai/paloma's own documents).
bool lmeval_documents(const PerplexityArgs& a) {
  return a.convention == "lm-eval" && (a.dataset == "wikitext2" || a.dataset == "wikitext2-raw");
}

/// GPTQ's datautils build their own text from WikiText-2 (the dataset's rows joined with
/// "\n\n") and C4 (c4-new: the first 1,100 rows, load_corpus's max_rows); PTB's and C4's
/// joins are load_corpus's own (datasets/corpus.h).
constexpr int64_t kGptqC4Rows = 1100;
constexpr int kGptqC4Windows = 256;
void use_gptq_text(datasets::Corpus* c) {
  if (c->kind == datasets::CorpusKind::kWikiText2 ||
      c->kind == datasets::CorpusKind::kWikiText2Raw) {
    c->text = datasets::gptq_wikitext_text(c->text, &c->documents);
    c->convention =
        "the dataset's rows (one a line, whitespace-only lines empty) joined with "
        "\"\\n\\n\" (GPTQ's get_wikitext2)";
  }
}

std::string batch_note(int batch, int64_t calls) {
  return "; up to " + count_of(batch, "window") + " per forward call (" + count_of(calls, "call") +
         ")";
}

// One markdown table row per run (every convention), then a line saying what the convention is.
void print_ppl_table(const PerplexityArgs& a, const eval::PerplexityResult& r,
                     const std::string& sha256, size_t tokens, const std::string& description) {
  const bool lmeval = r.convention == "lm-eval";
  std::printf("model %s, %s file %s (sha256 %.16s..., %zu tokens)\n", a.m.model.c_str(),
              a.dataset.c_str(), a.file.c_str(), sha256.c_str(), tokens);
  if (lmeval) std::printf("documents: %d\n", r.documents);
  std::printf("\n| convention |%s n_ctx | windows | tokens scored | PPL | +/- |%s time (s) |\n",
              lmeval ? " documents |" : "", lmeval ? " word PPL | byte PPL | bits/byte |" : "");
  std::printf("|---|%s---|---|---|---|---|%s---|\n", lmeval ? "---|" : "",
              lmeval ? "---|---|---|" : "");
  std::printf("| %s |", r.convention.c_str());
  if (lmeval) std::printf(" %d |", r.documents);
  std::printf(" %d | %d | %lld | %.4f | %.5f |", r.n_ctx, r.chunks,
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
  opt.batched = a.batch > 1;
  const auto progress = [](const std::string& name) {
    return [name](int64_t done, int64_t total) {
      check_interrupted();
      if (done == total || done % 4096 < 256) {
        std::fprintf(stderr, "\r  %-4s %5.1f%% of %lld tokens", name.c_str(), 100.0 * done / total,
                     static_cast<long long>(total));
        progress_line_printed(done == total);
      }
    };
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<eval::OverflowResult> rs;
  if (opt.batched) {
    // All methods in lockstep: one Model::forward per step for all of them.
    std::string names;
    for (auto method : methods)
      names += (names.empty() ? "" : "+") + std::string(eval::overflow_method_name(method));
    rs = eval::run_overflow_group(lm.runner(), tokens, methods, opt, progress(names));
  } else {
    for (auto method : methods) {
      rs.push_back(eval::run_overflow(lm.runner(), tokens, method, opt,
                                      progress(eval::overflow_method_name(method))));
    }
  }
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The stream the methods ran over: the first --max-tokens of the file's tokens.
  const size_t used = opt.max_tokens > 0 && tokens.size() > static_cast<size_t>(opt.max_tokens)
                          ? static_cast<size_t>(opt.max_tokens)
                          : tokens.size();
  const int64_t dropped = eval::overflow_dropped_tokens(opt);
  std::printf(
      "overflow study: window %d tokens, %lld of them dropped on overflow (--truncate-ratio %g), "
      "%d sink tokens\n",
      a.ctx, static_cast<long long>(dropped), a.truncate_ratio, a.sink);
  std::printf("model %s, file %s, ", a.m.model.c_str(), a.file.c_str());
  if (used < tokens.size()) {
    std::printf("first %zu of its %zu tokens (--max-tokens)\n\n", used, tokens.size());
  } else {
    std::printf("%zu tokens\n\n", tokens.size());
  }
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
  int64_t calls = 0;
  for (const auto& r : rs) calls += r.forward_calls;
  if (opt.batched && rs.size() > 1) calls = rs.front().forward_calls;  // shared calls
  // Only TT recomputes: CA and NKVT alone make one call per step, batched or not.
  const bool tt =
      std::find(methods.begin(), methods.end(), eval::OverflowMethod::TT) != methods.end();
  std::string how;
  if (opt.batched && rs.size() > 1) {
    how = std::string("methods in lockstep (--batch > 1): one forward call per step for all") +
          (tt ? ", TT's recompute in the same call" : "") +
          "; time per method = its truncations + its rows' share of each call";
  } else if (!opt.batched) {
    how = std::string("unbatched (--batch 1): one forward call per ") +
          (rs.size() > 1 ? "method and step" : "step") + (tt ? ", one per TT recompute" : "");
  } else if (tt) {
    how = "TT's recompute joins the next prefill's forward call (--batch > 1)";
  } else {
    how = std::string("one forward call per step (") + eval::overflow_method_name(methods[0]) +
          " recomputes nothing)";
  }
  std::printf("\n%s; %lld Model::forward calls; %.2f s in all\n", how.c_str(),
              static_cast<long long>(calls), total_s);
  if (!a.out.empty()) {
    nlohmann::json j = {{"study", "overflow"},
                        {"model", a.m.model},
                        {"file", a.file},
                        {"dataset", a.dataset},
                        {"file_sha256", sha256},
                        {"n_ctx", a.ctx},
                        {"truncate_ratio", a.truncate_ratio},
                        {"dropped_tokens", dropped},
                        {"sink", a.sink},
                        {"tokens", tokens.size()},
                        {"tokens_used", used},
                        {"max_tokens", a.max_tokens},
                        {"batch", a.batch},
                        {"lockstep", opt.batched},
                        {"forward_calls", calls},
                        {"seconds", total_s},
                        {"backend", backend_label(a.m)},
                        {"mode", "real"},
                        {"git", git_revision()}};
    for (const auto& r : rs) {
      j["results"].push_back({{"method", eval::overflow_method_name(r.method)},
                              {"ppl", r.ppl},
                              {"mean_nll", r.mean_nll},
                              {"scored_tokens", r.scored_tokens},
                              {"overflows", r.overflows},
                              {"tokens_recomputed", r.tokens_recomputed},
                              {"tokens_processed", r.tokens_processed},
                              {"forward_calls", r.forward_calls},
                              {"seconds", r.seconds}});
    }
    if (seeded_weights(a.m)) j["weights_seed"] = a.m.seed;  // gate compares it
    write_json(a.out, j);
  }
  return 0;
}

/// lm-eval's wikitext task: one document per article, its detokenized text tokenized (with BOS
/// first as adds_bos says). --max-tokens keeps the first whole articles whose tokens fit in it;
/// `all_tokens` counts every article's.
std::vector<eval::LmEvalDocument> wikitext_documents(const PerplexityArgs& a, const LoadedModel& lm,
                                                     const datasets::Corpus& corpus,
                                                     size_t* articles, size_t* all_tokens) {
  const std::vector<std::string> pages = datasets::wikitext_articles(corpus.text);
  *articles = pages.size();
  *all_tokens = 0;
  std::vector<eval::LmEvalDocument> docs;
  int64_t kept = 0;
  bool full = false;  // --max-tokens reached: the rest are only counted
  for (const std::string& page : pages) {
    std::vector<int32_t> ids = lm.tok->encode(datasets::wikitext_detokenize(page), adds_bos(a, lm));
    const auto n = static_cast<int64_t>(ids.size());
    *all_tokens += ids.size();
    if (full) continue;
    if (a.max_tokens > 0 && kept + n > a.max_tokens) {
      if (docs.empty()) {
        throw make_error("--max-tokens",
                         std::to_string(a.max_tokens) + " keeps no whole article: the first has " +
                             count_of(n, "token"),
                         "pass --max-tokens " + std::to_string(n) + " or more, or 0 for all");
      }
      full = true;
      continue;
    }
    eval::LmEvalDocument d;
    d.tokens = std::move(ids);
    // lm-eval's process_results counts words and bytes of doc["page"], the article *before*
    // detokenization ("IMPORTANT: wikitext counts number of words in *original doc before
    // detokenization*", lm_eval/tasks/wikitext/preprocess_wikitext.py):
    // len(re.split(r"\s+", doc["page"])) and len(doc["page"].encode("utf-8")).
    d.words = eval::lmeval_count_words(page);
    d.bytes = static_cast<int64_t>(page.size());
    kept += n;
    docs.push_back(std::move(d));
  }
  return docs;
}

/// --method full with --convention lm-eval or gptq (eval/perplexity.h describes both).
int run_convention(const PerplexityArgs& a, const LoadedModel& lm, const datasets::Corpus& corpus,
                   std::vector<int32_t> tokens) {
  const bool lmeval = a.convention == "lm-eval";
  const bool documents = lmeval_documents(a);
  const int window = lm.config().max_context;
  eval::PerplexityOptions opt;
  opt.n_ctx = a.ctx_given ? a.ctx : lmeval ? window : 2048;
  opt.max_chunks = a.chunks;
  opt.batch = a.batch;
  if (!a.ctx_given && opt.n_ctx > window) {
    throw make_error("--ctx",
                     "the gptq convention's default seqlen of 2048 exceeds the model's context "
                     "window of " +
                         std::to_string(window),
                     "pass --ctx " + std::to_string(window) + " or less");
  }
  std::vector<eval::LmEvalDocument> docs;
  size_t articles = 0;
  size_t all_tokens = tokens.size();
  bool truncated = false;
  if (documents) {
    docs = wikitext_documents(a, lm, corpus, &articles, &all_tokens);
    truncated = docs.size() < articles;
    tokens.clear();
    for (const auto& d : docs) tokens.insert(tokens.end(), d.tokens.begin(), d.tokens.end());
  } else {
    truncated = a.max_tokens > 0 && tokens.size() > static_cast<size_t>(a.max_tokens);
    if (truncated) tokens.resize(static_cast<size_t>(a.max_tokens));
  }
  if (lmeval) {
    // lm-eval's prefix_token_id: BOS when the tokenizer has one, else EOS.
    opt.bos_id = lm.tok->bos_id() >= 0 ? lm.tok->bos_id() : lm.tok->eos_id();
    if (!documents) {
      // One document: the whole text, or the text the kept tokens decode to.
      const std::string text = truncated ? lm.tok->decode(tokens) : corpus.text;
      docs.push_back({tokens, eval::lmeval_count_words(text), static_cast<int64_t>(text.size())});
    }
  }
  std::fprintf(stderr, "perplexity: %zu tokens, n_ctx %d, convention %s%s\n", tokens.size(),
               opt.n_ctx, a.convention.c_str(),
               documents ? (", " + std::to_string(docs.size()) + " documents").c_str() : "");
  const auto progress = [](int c, int n, double ppl) {
    check_interrupted();
    std::fprintf(stderr, "\r  window %d/%d  running PPL %.4f", c, n, ppl);
    progress_line_printed(c == n);
  };
  const eval::PerplexityResult r =
      lmeval ? eval::perplexity_lmeval_documents(lm.runner(), docs, opt, progress)
             : eval::perplexity_gptq(lm.runner(), tokens, opt, progress);
  std::string description;
  if (documents) {
    description = "lm-eval wikitext: " + count_of(r.documents, "document") +
                  " (the file's articles, as EleutherAI/wikitext_document_level), "
                  "wikitext_detokenizer applied, loglikelihood_rolling per document, max_length " +
                  std::to_string(r.n_ctx) + ", prefix token " + std::to_string(opt.bos_id) +
                  (adds_bos(a, lm) ? ", BOS first in each document" : ", no BOS (--bos no)") +
                  "; words " + std::to_string(r.words) + " and bytes " + std::to_string(r.bytes) +
                  " of the articles before detokenization";
    if (truncated)
      description += "; first " + std::to_string(docs.size()) + " of " + std::to_string(articles) +
                     " articles kept by --max-tokens";
  } else if (lmeval) {
    description = "lm-eval: loglikelihood_rolling over the text as one document, max_length " +
                  std::to_string(r.n_ctx) + ", prefix token " + std::to_string(opt.bos_id) +
                  (adds_bos(a, lm) ? ", BOS first" : ", no BOS (--bos no)") +
                  ", every token scored once; words " + std::to_string(r.words) +
                  (truncated ? " (of the kept tokens' decoded text)" : "") + ", bytes " +
                  std::to_string(r.bytes);
  } else {
    description = "gptq: non-overlapping seqlen " + std::to_string(r.n_ctx) +
                  " windows, no BOS inserted, each window's first token unscored";
  }
  if (truncated && !documents)
    description += "; first " + std::to_string(tokens.size()) + " of " +
                   std::to_string(all_tokens) + " tokens kept by --max-tokens";
  description += batch_note(r.batch, r.forward_calls);
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
                        {"batch", r.batch},
                        {"forward_calls", r.forward_calls},
                        {"seconds", r.seconds},
                        {"add_bos", adds_bos(a, lm)},
                        {"backend", backend_label(a.m)},
                        {"mode", "real"},
                        {"git", git_revision()}};
    if (lmeval) {
      j["prefix_token"] = opt.bos_id;
      j["documents"] = r.documents;
      j["words"] = r.words;
      j["bytes"] = r.bytes;
      j["word_perplexity"] = r.word_ppl;
      j["byte_perplexity"] = r.byte_ppl;
      j["bits_per_byte"] = r.bits_per_byte;
    }
    if (documents) {
      j["document_split"] = "wikitext_document_level";
      j["detokenizer"] = "wikitext_detokenizer";
      j["articles_in_file"] = articles;
      j["document_nll"] = r.document_nll;
      nlohmann::json counts = nlohmann::json::array();
      for (const auto& d : docs) counts.push_back({d.tokens.size(), d.words, d.bytes});
      j["document_tokens_words_bytes"] = counts;
    }
    if (seeded_weights(a.m)) j["weights_seed"] = a.m.seed;  // gate compares it
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
  add_model_options(sub, &a->m, /*cuda=*/true);
  sub->add_option("--file,-f", a->file,
                  "the dataset file (e.g. wiki.test.raw, ptb.test.txt, c4 .jsonl[.gz])")
      ->required();
  sub->add_option("--dataset", a->dataset,
                  "how to read --file: wikitext2-raw | wikitext2 (tokens version) | ptb (lines "
                  "joined with spaces, as GPTQ's ptb-new; text reads the file as is, as "
                  "llama-perplexity -f does) | c4 (JSON lines, plain or gzipped) | text. With "
                  "--convention lm-eval, "
                  "wikitext2 and wikitext2-raw are scored per article with lm-eval's "
                  "wikitext_detokenizer, as its wikitext task")
      ->check(CLI::IsMember({"wikitext2", "wikitext2-raw", "ptb", "c4", "text"}))
      ->capture_default_str();
  CLI::Option* ctx_opt =
      sub->add_option("--ctx,-c", a->ctx,
                      "context size of each chunk (tokens); lm-eval: max_length (default: the "
                      "model's context window); gptq: seqlen (default 2048)")
          ->capture_default_str()
          ->check(in_range(4, 1 << 20));
  CLI::Option* chunks_opt =
      sub->add_option("--chunks", a->chunks,
                      "evaluate at most this many chunks (llama.cpp) or windows (gptq) (0: all; "
                      "gptq on c4: 256 unless given, as GPTQ's c4-new)")
          ->capture_default_str()
          ->check(at_least(0));
  sub->add_option("--out", a->out, "also write the result as JSON to this file")
      ->check(output_file());
  sub->add_option(
         "--method", a->method,
         "full: standard perplexity; tt|ca|nkvt|all: the context-overflow study (token truncation, "
         "CachedAttention, naive KV truncation)")
      ->check(CLI::IsMember({"full", "tt", "ca", "nkvt", "all"}))
      ->capture_default_str();
  const OverflowOptions overflow = add_overflow_options(sub, &a->truncate_ratio, &a->sink);
  CLI::Option* max_tokens_opt =
      sub->add_option(
             "--max-tokens", a->max_tokens,
             "overflow study, lm-eval and gptq: keep only the first N tokens of the stream "
             "(0: all); lm-eval then counts words and bytes on the text the kept tokens "
             "decode to, except on wikitext, where it keeps the first whole articles that "
             "fit in N tokens")
          ->capture_default_str()
          ->check(at_least(0));
  sub->add_option("--batch", a->batch,
                  "windows per model forward call (llama.cpp, lm-eval, gptq; the logits of "
                  "batch * ctx tokens are held at once); overflow study: > 1 "
                  "runs TT, CA and NKVT in lockstep, one forward call per step for all (TT's "
                  "recompute included), 1 runs each method on its own, one call per step and "
                  "per recompute. Same numbers either way, up to float rounding")
      ->capture_default_str()
      ->check(in_range(1, 1024));
  sub->add_option("--convention", a->convention,
                  "with --method full: llama.cpp (n_ctx chunks, second half scored) | lm-eval "
                  "(lm-evaluation-harness rolling windows; word/byte perplexity, bits per byte) "
                  "| gptq (non-overlapping seqlen windows)")
      ->check(CLI::IsMember({"llama.cpp", "lm-eval", "gptq"}))
      ->capture_default_str();
  sub->add_option("--bos", a->bos,
                  "--convention lm-eval: BOS before each document (auto: when the tokenizer adds "
                  "one, as lm-eval does since its PR #3347 (October 2025); no: its earlier "
                  "add_bos_token=False)")
      ->check(CLI::IsMember({"auto", "no"}))
      ->capture_default_str();
  set_action(sub, [a, sub, ctx_opt, chunks_opt, overflow, max_tokens_opt] {
    install_interrupt_handlers("no result was written");
    a->ctx_given = ctx_opt->count() > 0;
    // Given, not only off its default: --convention llama.cpp with an overflow --method was
    // accepted and ignored.
    if (a->method != "full") {
      refuse_given(*sub, {"--convention"}, "applies to --method full only",
                   "drop --convention or use --method full");
    }
    if (a->method == "full" && a->convention == "lm-eval") {
      refuse_given(*sub, {"--chunks"},
                   "does not apply to the lm-eval convention (every token is scored)",
                   "use --max-tokens to shorten the stream");
    }
    if (a->method == "full")
      refuse_outside_overflow_study({overflow.truncate_ratio, overflow.sink});
    // One method that recomputes nothing makes one forward call per step either way.
    if (a->method == "ca" || a->method == "nkvt") {
      refuse_given(*sub, {"--batch"},
                   "has no effect with --method " + a->method +
                       " alone (it runs methods in lockstep and TT's recompute in the next call)",
                   "drop --batch, or use --method all or tt");
    }
    if (a->method != "full" || a->convention != "lm-eval") {
      refuse_given(*sub, {"--bos"},
                   "applies to --convention lm-eval only (the others put BOS where their "
                   "reference implementations do: llama.cpp's in each chunk, gptq's at the "
                   "stream's start, the overflow study's before the history)",
                   "drop --bos, or use --convention lm-eval");
    }
    if (a->method != "full") {
      refuse_given(*sub, {"--chunks"},
                   "does not apply to the overflow study (it scores one stream, not chunks)",
                   "drop --chunks (--max-tokens shortens the stream), or use --method full");
    }
    if (a->method == "full" && a->convention == "llama.cpp" && max_tokens_opt->count() > 0) {
      throw make_error(
          "--max-tokens",
          "does not apply to the llama.cpp convention (it scores whole n_ctx chunks; "
          "--chunks limits them)",
          "drop --max-tokens, or use --convention lm-eval|gptq or an overflow --method");
    }
    resolve_backend(&a->m);
    LoadedModel lm = load_model(a->m, true);
    const bool gptq = a->method == "full" && a->convention == "gptq";
    datasets::Corpus corpus =
        datasets::load_corpus(a->dataset, a->file, gptq ? kGptqC4Rows : int64_t{0});
    if (gptq) {
      use_gptq_text(&corpus);
      // c4-new keeps 256 seqlen windows (valenc[:, :256 * seqlen]).
      if (corpus.kind == datasets::CorpusKind::kC4 && chunks_opt->count() == 0)
        a->chunks = kGptqC4Windows;
    }
    // llama.cpp's -f drops one trailing newline from the file's text before tokenizing it.
    if (a->convention == "llama.cpp" && !corpus.text.empty() && corpus.text.back() == '\n') {
      corpus.text.pop_back();
      corpus.convention += ", its last newline dropped (llama.cpp's -f)";
    }
    // lm-eval's prefix token stands before each document, which begins with BOS as its
    // tokenizer's default has it since PR #3347 (--bos no: without, as before).
    const bool add_bos = adds_bos(*a, lm);
    // lm-eval's wikitext documents are tokenized one by one (run_convention).
    const std::vector<int32_t> tokens =
        lmeval_documents(*a) ? std::vector<int32_t>() : lm.tok->encode(corpus.text, add_bos);
    std::fprintf(stderr, "dataset %s: %s (sha256 %.16s...)\n", a->dataset.c_str(),
                 corpus.convention.c_str(), corpus.sha256.c_str());
    if (!corpus.mismatch.empty()) {
      std::fprintf(stderr, "cachebench: warning: --dataset %s with %s: %s\n", a->dataset.c_str(),
                   a->file.c_str(), corpus.mismatch.c_str());
    }
    if (a->method != "full") return run_overflow_study(*a, lm, tokens, corpus.sha256);
    if (a->convention != "llama.cpp") return run_convention(*a, lm, corpus, tokens);
    eval::PerplexityOptions opt;
    opt.n_ctx = a->ctx;
    opt.max_chunks = a->chunks;
    opt.bos_id = lm.tok->add_bos_default() ? lm.tok->bos_id() : -1;
    opt.batch = a->batch;
    std::fprintf(stderr, "perplexity: %zu tokens, %d-token chunks, convention llama.cpp\n",
                 tokens.size(), a->ctx);
    const eval::PerplexityResult r =
        eval::perplexity_llamacpp(lm.runner(), tokens, opt, [](int c, int n, double ppl) {
          check_interrupted();
          std::fprintf(stderr, "\r  chunk %d/%d  running PPL %.4f", c, n, ppl);
          progress_line_printed(c == n);
        });
    print_ppl_table(*a, r, corpus.sha256, tokens.size(),
                    std::string("llama.cpp: n_ctx chunks, ") +
                        (opt.bos_id >= 0 ? "BOS first" : "no BOS (the tokenizer adds none)") +
                        ", second half of each chunk scored" +
                        batch_note(r.batch, r.forward_calls));
    if (!a->out.empty()) {
      nlohmann::json j = {{"convention", "llama.cpp"},
                          {"model", a->m.model},
                          {"file", a->file},
                          {"dataset", a->dataset},
                          {"file_sha256", corpus.sha256},
                          {"tokens", tokens.size()},
                          {"n_ctx", r.n_ctx},
                          {"bos_token", opt.bos_id},
                          {"chunks", r.chunks},
                          {"scored_tokens", r.scored_tokens},
                          {"mean_nll", r.mean_nll},
                          {"ppl", r.ppl},
                          {"ppl_stderr", r.ppl_stderr},
                          {"batch", r.batch},
                          {"forward_calls", r.forward_calls},
                          {"seconds", r.seconds},
                          {"backend", backend_label(a->m)},
                          {"mode", "real"},
                          {"git", git_revision()}};
      if (seeded_weights(a->m)) j["weights_seed"] = a->m.seed;  // gate compares it
      write_json(a->out, j);
    }
    return 0;
  });
}

}  // namespace cb::app
