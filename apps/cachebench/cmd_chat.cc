// cachebench chat --model MODEL: an interactive conversation with CachedAttention
// underneath; after each answer, TTFT, the tokens reused and the tier they came from.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "apps/cachebench/model_args.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "lib/core/error.h"
#include "lib/engine/engine.h"
#include "lib/engine/policy_advisor.h"
#include "lib/store/attention_store.h"
#include "lib/store/size_parse.h"

namespace cb::app {
namespace {

struct ChatArgs {
  ModelArgs m;
  int64_t max_tokens = 128;
  std::string dram = "256MiB";
  std::string mode = "ca";
  std::string kv_entries = "f32";
  int64_t ctx = 0;
  model::SamplerConfig sampling;
};

constexpr uint64_t kSession = 1;
constexpr size_t kMaxLineBytes = 1 << 20;
/// Bytes without a line end after which stdin is taken for something other than text.
constexpr size_t kMaxSkipBytes = 64u << 20;

/// One line of stdin into `line` (without its newline); false at the end of input. A line
/// longer than kMaxLineBytes is skipped with a note (chat reads one message per line, and
/// holds at most that much of one), the conversation going on; input that has no line end in
/// kMaxSkipBytes (a binary file, /dev/zero) is an error.
bool read_message(std::string& line) {
  line.clear();
  size_t skipped = 0;  // bytes of a line past kMaxLineBytes, dropped
  const auto skip_done = [&] {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "\n(a line of %zu bytes was skipped: chat takes messages of at most 1 MiB, one "
                 "per line)\n",
                 skipped);
    skipped = 0;
  };
  int c;
  while ((c = std::cin.get()) != EOF) {
    if (c == '\n') {
      if (skipped == 0) return true;
      skip_done();
    } else if (skipped == 0 && line.size() < kMaxLineBytes) {
      line.push_back(static_cast<char>(c));
    } else {
      if (skipped == 0) {  // the line is over the limit: drop what was read of it
        skipped = line.size();
        line.clear();
      }
      if (++skipped > kMaxSkipBytes) {
        throw make_error("stdin", "no line end in 64 MiB",
                         "chat reads one message per line of text; type or pipe text");
      }
    }
  }
  if (skipped > 0) skip_done();
  return !line.empty();
}

/// `s` without the spaces and tabs around it: "/quit " is the command /quit.
std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

/// What the engine changed to fit a turn of `sent` message tokens (and the previous answer's
/// last token before them unless `first`) and -n `max_tokens` into a `ctx`-token window, told
/// on stderr: a message or answer cut to fit, history dropped.
void report_fit(const metrics::TurnRecord& rec, int64_t sent, bool first, int64_t max_tokens,
                int64_t ctx) {
  const int64_t fed = sent + (first ? 0 : 1);
  const engine::TurnFit f = engine::fit_turn(fed, max_tokens, ctx);
  if (f.output_target < max_tokens) {
    std::fprintf(stderr,
                 "(the message and -n %lld tokens of answer exceed the %lld-token context "
                 "window: the answer is capped at %lld tokens)\n",
                 static_cast<long long>(max_tokens), static_cast<long long>(ctx),
                 static_cast<long long>(f.output_target));
  }
  if (rec.new_tokens < sent) {
    std::fprintf(stderr,
                 "(the message was longer than the context window allows and was cut from "
                 "%lld to its last %lld tokens)\n",
                 static_cast<long long>(sent), static_cast<long long>(rec.new_tokens));
  }
  if (rec.truncated_tokens > 0) {
    std::fprintf(stderr,
                 "(the conversation outgrew the %lld-token context window: its first %lld "
                 "tokens were dropped, %lld kept)\n",
                 static_cast<long long>(ctx), static_cast<long long>(rec.truncated_tokens),
                 static_cast<long long>(rec.history_tokens));
  }
}

void print_stats(const store::AttentionStore* st, const engine::Engine& e) {
  std::printf("context: %lld tokens\n", static_cast<long long>(e.context_tokens(kSession)));
  if (st == nullptr) {
    std::printf("store: none (mode re)\n");
    return;
  }
  const store::StatsSnapshot s = st->stats();
  std::printf("store: %llu saves, %llu loads, %llu misses; DRAM %llu of %llu bytes used\n",
              static_cast<unsigned long long>(s.get(store::Counter::Saves)),
              static_cast<unsigned long long>(s.get(store::Counter::Loads)),
              static_cast<unsigned long long>(s.get(store::Counter::Misses)),
              static_cast<unsigned long long>(s.used_bytes[1]),
              static_cast<unsigned long long>(s.capacity_bytes[1]));
}

int run_chat(const ChatArgs& a) {
  LoadedModel lm = load_model(a.m, true);
  const tokenizer::Tokenizer& tok = *lm.tok;
  const engine::Mode mode = engine::parse_mode(a.mode);
  if (mode == engine::Mode::OF) {
    throw make_error("--mode", "chat takes ca or re, not of", "use --mode ca or --mode re");
  }
  std::unique_ptr<store::AttentionStore> st;
  if (mode != engine::Mode::RE) {
    store::StoreConfig sc;
    sc.dram_bytes = store::parse_size(a.dram, "--dram");
    sc.chunk_bytes = 64 << 10;
    if (sc.dram_bytes < sc.chunk_bytes) {  // chat has no --chunk-size to lower instead
      throw make_error(
          "--dram",
          sc.dram_bytes == 0
              ? std::string("ca mode keeps the conversation's KV in DRAM: give it room")
              : store::format_size(sc.dram_bytes) + " is smaller than one chunk (" +
                    store::format_size(sc.chunk_bytes) + "), so it could hold nothing",
          "use e.g. --dram 256MiB, or --mode re");
    }
    sc.advisor = std::make_shared<engine::PolicyAdvisor>("scheduler-aware",
                                                         policy::Capacity{sc.dram_bytes, 0});
    st = std::make_unique<store::AttentionStore>(sc);
  }
  engine::EngineConfig ec;
  ec.mode = mode;
  ec.ctx = a.ctx;
  ec.sched.rate = 0;
  ec.sched.max_batch = 1;
  ec.native_kv_entries = engine::parse_kv_entries(a.kv_entries);
  const int64_t ctx = engine::checked_window(ec, lm.config().max_context);
  engine::Engine eng(lm.runner(), st.get(), ec);
  eng.set_stop_token(tok.eos_id());
  eng.set_vocab_limit(static_cast<int>(tok.vocab_size()));
  eng.set_sampling(a.sampling);
  std::fprintf(stderr, "cachebench chat: %s, mode %s. Type a message; /stats, /reset, /quit.\n",
               lm.config().name.c_str(), engine::mode_name(mode));
  std::string line;
  bool first_line = true;
  while (true) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!read_message(line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF input
    // A byte-order mark opening a file piped in (as the CSV and trace loaders drop it).
    if (first_line && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);
    first_line = false;
    const std::string cmd = trimmed(line);
    if (cmd == "/quit" || cmd == "/exit") break;
    if (cmd == "/stats") {
      print_stats(st.get(), eng);
      continue;
    }
    if (cmd == "/reset") {
      eng.reset_session(kSession);
      eng.set_sampling(a.sampling);  // sampling restarts from --seed, as in a new chat
      std::printf("(conversation reset)\n");
      continue;
    }
    if (line.empty()) continue;
    if (cmd[0] == '/' && cmd.find_first_of(" \t") == std::string::npos) {
      std::printf(
          "unknown command %s: /stats, /reset or /quit (a message cannot be one word "
          "starting with /)\n",
          cmd.c_str());
      continue;
    }
    const bool first = eng.context_tokens(kSession) == 0;
    engine::SessionInput in;
    in.id = kSession;
    engine::TurnInput t;
    t.ids = tok.encode(line, first && tok.add_bos_default());
    t.output_tokens = a.max_tokens;
    in.turns.push_back(t);
    std::vector<int32_t> answer;
    std::string shown;
    const engine::RunResult r = eng.run({in}, {}, [&](uint64_t, int32_t id) {
      if (id == tok.eos_id()) return;
      answer.push_back(id);
      stream_text(tok.decode(answer), &shown);
    });
    stream_text(tok.decode(answer), &shown, /*last=*/true);
    const metrics::TurnRecord& rec = r.records.at(0);
    std::printf(
        "\n[TTFT %.1f ms | reused %lld tokens (%s) | recomputed %lld | new %lld | "
        "%lld tokens out]\n",
        (rec.first_token_s - rec.arrival_s) * 1e3, static_cast<long long>(rec.reused_tokens),
        rec.tier.c_str(), static_cast<long long>(rec.recomputed_tokens),
        static_cast<long long>(rec.new_tokens), static_cast<long long>(rec.output_tokens));
    std::fflush(stdout);  // the notes below on lines of their own
    report_fit(rec, static_cast<int64_t>(in.turns[0].ids.size()), first, a.max_tokens, ctx);
  }
  return 0;
}

}  // namespace

void register_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub =
      app.add_subcommand("chat", "Interactive multi-turn chat with CachedAttention underneath");
  add_model_options(sub, &a->m, /*cuda=*/true);
  sub->add_option("-n,--max-tokens", a->max_tokens,
                  "tokens per answer at most (stops at EOS; -n as for generate)")
      ->capture_default_str()
      ->check(in_range(1, 1 << 20));
  sub->add_option("--dram", a->dram, "store DRAM budget")
      ->capture_default_str()
      ->check(size_value());
  sub->add_option("--mode", a->mode, "ca (reuse KV across turns) or re (recompute)")
      ->capture_default_str()
      ->check(CLI::IsMember({"ca", "re"}));
  sub->add_option("--kv-entries", a->kv_entries,
                  "element type of stored KV entries: f32, or native (the backend's KV type)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "native"}));
  sub->add_option("--ctx", a->ctx, "context window (0: the model's)")
      ->capture_default_str()
      ->check(at_least(0));
  add_sampling_options(sub, &a->sampling);
  set_action(sub, [a, sub] {
    refuse_idle_sampling_options(*sub, a->sampling);
    if (a->mode == "re") {  // as replay --mode re refuses its store options
      refuse_given(*sub, {"--dram", "--kv-entries"}, "has no effect with --mode re (no store)",
                   "drop it, or use --mode ca");
    }
    resolve_backend(&a->m);
    return run_chat(*a);
  });
}

}  // namespace cb::app
