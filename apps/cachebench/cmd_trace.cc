// cachebench trace synth --out F [--sessions N] [--seed S] [knobs]
// cachebench trace stats TRACE [--tokenizer FILE | --model MODEL] [--limit N] [--out F.json]
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/cachebench/format.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "datasets/length_trace.h"
#include "datasets/trace.h"
#include "datasets/trace_synth.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/tokenizer/load.h"

namespace cb::app {
namespace {

/// The ShareGPT figures the CachedAttention paper reports (§2), which synth aims at.
constexpr double kTargetMultiTurn = 0.73;
constexpr double kTargetMeanTurns = 5.75;
constexpr double kTargetLong = 0.30;

struct SynthArgs {
  datasets::SynthOptions o;
  std::string out;
  int64_t long_threshold = 4096;
};

struct StatsArgs {
  std::string trace;
  std::string tokenizer;
  std::string model;
  int64_t limit = 0;
  bool no_join_split = false;
  int64_t max_message_chars = datasets::TraceLoadOptions{}.max_message_chars;
  int64_t long_threshold = 4096;
  std::string out;
};

std::string pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * f);
  return buf;
}

/// The statistics next to the published targets, as a markdown table on stdout.
void print_stats(const std::string& label, const datasets::Trace& t, const datasets::TraceStats& s,
                 int64_t threshold) {
  std::printf("trace %s: %s, %s, %s\n", label.c_str(), t.kind.c_str(),
              count_of(s.sessions, "session").c_str(), count_of(s.turns, "turn").c_str());
  if (t.skipped_conversations > 0 || t.skipped_messages > 0) {
    std::printf("skipped %s and %s while reading\n",
                count_of(t.skipped_conversations, "conversation").c_str(),
                count_of(t.skipped_messages, "message").c_str());
  }
  if (t.joined_pieces > 0) {
    std::printf("joined %s into their conversations\n",
                count_of(t.joined_pieces, "split piece").c_str());
  }
  const bool at_4k = threshold == 4096;
  std::printf("\n| statistic | this trace | ShareGPT (CachedAttention §2) |\n|---|---|---|\n");
  std::printf("| multi-turn conversations | %s | %s |\n", pct(s.multi_turn_fraction).c_str(),
              pct(kTargetMultiTurn).c_str());
  std::printf("| turns per conversation (mean) | %.2f | %.2f |\n", s.mean_turns, kTargetMeanTurns);
  std::printf("| conversations over %lld tokens | %s | %s |\n", static_cast<long long>(threshold),
              pct(s.long_fraction).c_str(), at_4k ? pct(kTargetLong).c_str() : "-");
  std::printf("| input tokens per turn (mean) | %.1f | - |\n", s.mean_input_tokens);
  std::printf("| output tokens per turn (mean) | %.1f | - |\n", s.mean_output_tokens);
}

nlohmann::json stats_json(const datasets::Trace& t, const datasets::TraceStats& s,
                          int64_t threshold) {
  return {{"trace", t.path},
          {"git", git_revision()},
          {"kind", t.kind},
          {"sessions", s.sessions},
          {"turns", s.turns},
          {"multi_turn_fraction", s.multi_turn_fraction},
          {"mean_turns", s.mean_turns},
          {"long_threshold", threshold},
          {"long_fraction", s.long_fraction},
          {"mean_input_tokens", s.mean_input_tokens},
          {"mean_output_tokens", s.mean_output_tokens},
          {"skipped_conversations", t.skipped_conversations},
          {"skipped_messages", t.skipped_messages},
          {"joined_pieces", t.joined_pieces},
          {"targets",
           {{"source", "CachedAttention (ATC'24) section 2, ShareGPT"},
            {"multi_turn_fraction", kTargetMultiTurn},
            {"mean_turns", kTargetMeanTurns},
            {"long_fraction_over_4096", kTargetLong}}}};
}

int run_synth(const SynthArgs& a) {
  const datasets::Trace t = datasets::synth_trace(a.o);
  datasets::write_length_trace(t, a.out, datasets::synth_options_json(a.o));
  std::fprintf(stderr, "trace synth: wrote %s (%s, %s, seed %llu)\n", a.out.c_str(),
               count_of(static_cast<long long>(t.sessions.size()), "session").c_str(),
               count_of(t.turns(), "turn").c_str(), static_cast<unsigned long long>(a.o.seed));
  print_stats(a.out, t, datasets::trace_stats(t, a.long_threshold), a.long_threshold);
  return 0;
}

int run_stats(const StatsArgs& a, CLI::App& sub) {
  datasets::TokenizeFn tokenize;
  const std::string src = !a.tokenizer.empty() ? a.tokenizer : a.model;
  if (!src.empty()) {
    // Loaded at the first text to tokenize: a length trace has none.
    auto tok = std::make_shared<std::unique_ptr<tokenizer::Tokenizer>>();
    tokenize = [tok, src](const std::string& text) {
      if (!*tok) *tok = tokenizer::load_tokenizer(src);
      return (*tok)->encode(text, false);
    };
  }
  datasets::TraceLoadOptions lo;
  lo.limit = a.limit;
  lo.max_message_chars = a.max_message_chars;
  lo.join_split = !a.no_join_split;
  const datasets::Trace t = datasets::load_trace(a.trace, tokenize, lo);
  refuse_text_options_on_lengths(sub, t.kind);
  if (t.kind == "lengths" && !src.empty()) {  // --model
    throw make_error(a.tokenizer.empty() ? "--model" : "--tokenizer",
                     "has no effect on a length trace, whose token counts are given",
                     "drop it (it tokenizes a ShareGPT file's text)");
  }
  for (const std::string& note : t.notes)
    std::fprintf(stderr, "trace stats: %s\n", printable(note).c_str());
  const datasets::TraceStats s = datasets::trace_stats(t, a.long_threshold);
  print_stats(a.trace, t, s, a.long_threshold);
  if (!a.out.empty()) write_json(a.out, stats_json(t, s, a.long_threshold));
  return 0;
}

}  // namespace

void register_trace(CLI::App& app) {
  CLI::App* trace = app.add_subcommand(
      "trace", "Replay traces: synthesize ShareGPT-shaped length traces, or summarize any trace");
  trace->require_subcommand(1);

  auto s = std::make_shared<SynthArgs>();
  CLI::App* synth = trace->add_subcommand(
      "synth",
      "Write a synthetic length trace shaped like ShareGPT (73% multi-turn, 5.75 turns on "
      "average, 30% over 4K tokens) and print its statistics");
  synth->add_option("--out,-o", s->out, "the trace file to write (JSON)")
      ->check(output_file())
      ->required();
  synth->add_option("--sessions,-n", s->o.sessions, "conversations to generate")
      ->capture_default_str()
      ->check(in_range(1, 10000000));
  synth->add_option("--seed", s->o.seed, "random seed (same seed, same trace)")
      ->capture_default_str();
  synth
      ->add_option("--single-turn-fraction", s->o.single_turn_fraction,
                   "fraction of conversations with one turn")
      ->capture_default_str()
      ->check(detail::number("in [0, 1)", "in [0, 1)", [](double v) { return v >= 0 && v < 1; }));
  synth->add_option("--mean-turns", s->o.mean_turns, "mean turns per conversation")
      ->capture_default_str();
  synth->add_option("--max-turns", s->o.max_turns, "cap on turns per conversation")
      ->capture_default_str()
      ->check(in_range(2, 100000));
  synth
      ->add_option("--input-median", s->o.input_median,
                   "median tokens of a user message (log-normal)")
      ->capture_default_str()
      ->check(above(0));
  synth->add_option("--input-sigma", s->o.input_sigma, "log-normal sigma of user messages")
      ->capture_default_str()
      ->check(in_range(0, 10));
  synth->add_option("--input-max", s->o.input_max, "cap on tokens of a user message")
      ->capture_default_str()
      ->check(in_range(1, static_cast<double>(datasets::kMaxTraceTokens)));
  synth->add_option("--output-median", s->o.output_median, "median tokens of an answer")
      ->capture_default_str()
      ->check(above(0));
  synth->add_option("--output-sigma", s->o.output_sigma, "log-normal sigma of answers")
      ->capture_default_str()
      ->check(in_range(0, 10));
  synth->add_option("--output-max", s->o.output_max, "cap on tokens of an answer")
      ->capture_default_str()
      ->check(in_range(1, static_cast<double>(datasets::kMaxTraceTokens)));
  synth
      ->add_option("--session-sigma", s->o.session_sigma,
                   "log-normal sigma of a per-conversation length scale")
      ->capture_default_str()
      ->check(in_range(0, 10));
  synth
      ->add_option("--long-threshold", s->long_threshold,
                   "a conversation is long above this many tokens in total (statistics only)")
      ->capture_default_str()
      ->check(above(0));
  set_action(synth, [s] { return run_synth(*s); });

  auto a = std::make_shared<StatsArgs>();
  CLI::App* stats = trace->add_subcommand(
      "stats", "Statistics of a trace (ShareGPT JSON or length trace) next to ShareGPT's");
  stats->add_option("TRACE", a->trace, "a ShareGPT JSON file or a `trace synth` file")->required();
  auto* tok_opt =
      stats->add_option("--tokenizer", a->tokenizer,
                        "tokenizer for ShareGPT text (tokenizer.model, tokenizer.json or .gguf)");
  stats
      ->add_option("--model,-m", a->model,
                   "take the tokenizer from this model (.gguf or Hugging Face directory)")
      ->excludes(tok_opt);
  stats->add_option("--limit", a->limit, "read only the first N sessions (0: all)")
      ->capture_default_str()
      ->check(at_least(0));
  stats->add_flag(
      "--no-join-split", a->no_join_split,
      "read a ShareGPT file's split pieces (ID_0, ID_8, ...) as separate conversations");
  stats
      ->add_option("--max-message-chars", a->max_message_chars,
                   "skip ShareGPT conversations with a longer message")
      ->capture_default_str()
      ->check(above(0));
  stats
      ->add_option("--long-threshold", a->long_threshold,
                   "a conversation is long above this many tokens in total")
      ->capture_default_str()
      ->check(above(0));
  stats->add_option("--out", a->out, "also write the statistics as JSON to this file")
      ->check(output_file());
  set_action(stats, [a, stats] { return run_stats(*a, *stats); });
}

}  // namespace cb::app
