// Replay driver: trace -> engine sessions -> fresh store per mode -> summary.
#include "eval/replay.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "lib/core/error.h"
#include "lib/engine/policy_advisor.h"
#include "lib/metrics/summary.h"
#include "lib/store/attention_store.h"

namespace cb::eval {

std::string policy_name(const std::string& cli_name) {
  if (cli_name == "sched" || cli_name == "scheduler-aware") return "scheduler-aware";
  if (cli_name == "lru" || cli_name == "fifo") return cli_name;
  if (cli_name == "optimal" || cli_name == "belady") return "belady";
  throw make_error("--policy", "unknown policy '" + cli_name + "'",
                   "use sched (scheduler-aware), lru, fifo or optimal (Belady bound)");
}

std::vector<engine::SessionInput> trace_sessions(const datasets::Trace& trace, int vocab,
                                                 uint64_t seed, int64_t max_output_tokens) {
  if (vocab <= 3) throw make_error("replay", "the model's vocabulary is too small");
  std::vector<engine::SessionInput> out;
  for (const datasets::TraceSession& s : trace.sessions) {
    engine::SessionInput in;
    in.id = s.id;
    for (size_t t = 0; t < s.turns.size(); ++t) {
      const datasets::TraceTurn& tt = s.turns[t];
      engine::TurnInput ti;
      ti.output_tokens = std::max<int64_t>(tt.output_tokens, 1);
      if (max_output_tokens > 0) ti.output_tokens = std::min(ti.output_tokens, max_output_tokens);
      if (!tt.input_ids.empty()) {
        ti.ids = tt.input_ids;
        for (int32_t& id : ti.ids) {
          if (id < 0 || id >= vocab) {
            throw make_error(trace.path,
                             "token id " + std::to_string(id) +
                                 " is outside the model's vocabulary of " + std::to_string(vocab),
                             "tokenize the trace with this model's tokenizer");
          }
        }
      } else {
        std::mt19937_64 rng(seed ^ (s.id * 0x9e3779b97f4a7c15ull) ^ (t + 1));
        ti.ids.resize(static_cast<size_t>(std::max<int64_t>(tt.input_tokens, 1)));
        for (int32_t& id : ti.ids) id = 3 + static_cast<int32_t>(rng() % (vocab - 3));
      }
      in.turns.push_back(std::move(ti));
    }
    out.push_back(std::move(in));
  }
  return out;
}

uint64_t clean_ahead_bytes(const ReplayStoreOptions& o) {
  if (o.clean_ahead_bytes >= 0) return static_cast<uint64_t>(o.clean_ahead_bytes);
  return o.ssd_bytes > 0 && o.dram_bytes > 0 ? o.dram_bytes / 16 : 0;
}

int64_t truncate_align(const ReplayOptions& o, uint64_t token_bytes) {
  if (o.engine.truncate_align >= 0) return o.engine.truncate_align;
  return token_bytes == 0 ? 1 : static_cast<int64_t>(o.store.chunk_bytes / token_bytes);
}

nlohmann::json replay_config_json(const ReplayOptions& o) {
  const engine::EngineConfig& e = o.engine;
  nlohmann::json j;
  j["ctx_tokens"] = e.ctx;
  j["truncate_ratio"] = e.truncate_ratio;
  j["truncate_align"] =
      e.truncate_align < 0 ? nlohmann::json("auto") : nlohmann::json(e.truncate_align);
  j["read_buffer_layers"] =
      e.read_buffer_layers < 0 ? nlohmann::json("auto") : nlohmann::json(e.read_buffer_layers);
  j["preload"] = e.preload;
  j["preload_jobs"] = e.preload_jobs;
  j["async_save"] = e.async_save;
  j["append_saves"] = e.append_saves;
  j["native_kv_entries"] = e.native_kv_entries;
  j["block_size"] = e.block_size;
  j["kv_blocks"] = e.num_blocks;
  j["warmup_turns"] = e.warmup_turns;
  j["max_batch"] = e.sched.max_batch;
  j["max_batch_tokens"] = e.sched.max_batch_tokens;
  j["rate_sessions_per_s"] = e.sched.rate;
  j["think_time"] = e.sched.think.describe();
  j["lookahead_sessions"] = e.sched.lookahead;
  j["seed"] = o.seed;
  j["max_output_tokens"] = o.max_output_tokens;
  j["store"] = {
      {"hbm_bytes", o.store.hbm_bytes},
      {"dram_bytes", o.store.dram_bytes},
      {"ssd_bytes", o.store.ssd_bytes},
      {"store_dir", o.store.store_dir},
      {"policy", policy_name(o.store.policy)},
      {"chunk_bytes", o.store.chunk_bytes},
      {"io_threads", o.store.io_threads},
      {"clean_ahead_bytes", clean_ahead_bytes(o.store)},
      {"save_admission", o.store.save_admission},
      {"drop_slow_demotions", o.store.drop_slow_demotions},
      {"read_gbps", {o.store.read_gbps[0], o.store.read_gbps[1], o.store.read_gbps[2]}},
      {"write_gbps", {o.store.write_gbps[0], o.store.write_gbps[1], o.store.write_gbps[2]}}};
  j["prices"] = {{"gpu_usd_per_hour", o.prices.gpu_usd_per_hour},
                 {"dram_usd_per_gb_hour", o.prices.dram_usd_per_gb_hour},
                 {"ssd_usd_per_gb_hour", o.prices.ssd_usd_per_gb_hour}};
  j["gpus"] = o.gpus;
  return j;
}

namespace {

// Scratch directories that runs killed outright (SIGKILL, a crash) left under `parent`:
// cachebench-replay-MODE-PID whose process is gone. Removed, with a note.
void sweep_stale(const std::string& parent) {
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = d.path().filename().string();
    if (name.rfind("cachebench-replay-", 0) != 0 || !d.is_directory(ec)) continue;
    const size_t dash = name.find_last_of('-');
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + dash + 1, &end, 10);
    if (pid <= 0 || *end != '\0' || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) {
      continue;  // a live process's (or not ours to judge)
    }
    std::filesystem::remove_all(d.path(), ec);
    std::fprintf(stderr, "cachebench: removed %s, left by an earlier run that did not finish\n",
                 d.path().c_str());
  }
}

// A fresh SSD directory per run under the user's --store-dir, removed afterwards (or, kept,
// renamed to cachebench-store-MODE-PID once the run has ended, also when it was interrupted
// or failed after its store opened: its journal recovers what was committed).
struct ScratchDir {
  std::string path, kept;
  bool done = false;    ///< the run ended normally (and its store is closed)
  bool opened = false;  ///< a store was made in it (only such a directory is kept)
  explicit ScratchDir(const std::string& parent, engine::Mode mode, bool keep) {
    if (parent.empty()) return;
    std::error_code ec;
    if (!std::filesystem::is_directory(parent, ec)) {
      throw make_error("--store-dir", parent + " is not a directory",
                       "create it (on the SSD to measure) or pass another");
    }
    sweep_stale(parent);
    path =
        parent + "/cachebench-replay-" + engine::mode_name(mode) + "-" + std::to_string(::getpid());
    std::filesystem::remove_all(path, ec);
    std::filesystem::create_directories(path, ec);
    if (ec) throw make_error("--store-dir", "cannot create " + path + ": " + ec.message());
    if (keep) {
      kept = parent + "/cachebench-store-" + engine::mode_name(mode) + "-" +
             std::to_string(::getpid());
      std::filesystem::remove_all(kept, ec);
    }
  }
  ~ScratchDir() {
    if (path.empty()) return;
    std::error_code ec;
    if (!kept.empty() && opened) {
      std::filesystem::rename(path, kept, ec);
      if (!ec) {
        if (!done) {
          std::fprintf(stderr,
                       "cachebench: the run did not finish; its store is kept as %s (--keep-store; "
                       "`cachebench store verify --store-dir %s` checks what it holds)\n",
                       kept.c_str(), kept.c_str());
        }
        return;
      }
      std::fprintf(stderr, "cachebench: could not keep the store as %s (%s); removed\n",
                   kept.c_str(), ec.message().c_str());
    }
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

ReplayRun run_replay(const model::ForwardModel& model,
                     const std::vector<engine::SessionInput>& sessions, engine::Mode mode,
                     const ReplayOptions& opts, const engine::ProgressFn& progress) {
  ReplayRun run;
  run.mode = mode;
  ScratchDir dir(mode == engine::Mode::RE ? std::string() : opts.store.store_dir, mode,
                 opts.store.keep);
  std::unique_ptr<store::AttentionStore> st;
  if (mode != engine::Mode::RE) {
    store::StoreConfig sc;
    sc.hbm_bytes = opts.store.hbm_bytes;
    sc.dram_bytes = opts.store.dram_bytes;
    sc.ssd_bytes = dir.path.empty() ? 0 : opts.store.ssd_bytes;
    sc.store_dir = dir.path;
    sc.chunk_bytes = opts.store.chunk_bytes;
    sc.io_threads = opts.store.io_threads;
    sc.default_ttl = opts.store.ttl;
    sc.clean_ahead_bytes = clean_ahead_bytes(opts.store);  // the store ignores it without an SSD
    sc.save_admission = opts.store.save_admission;
    sc.drop_slow_demotions = opts.store.drop_slow_demotions;
    for (int t = 0; t < 3; ++t) {
      sc.read_gbps[t] = opts.store.read_gbps[t];
      sc.write_gbps[t] = opts.store.write_gbps[t];
    }
    policy::Capacity cap;
    cap.dram = sc.dram_bytes;
    cap.ssd = sc.ssd_bytes;
    sc.advisor = std::make_shared<engine::PolicyAdvisor>(policy_name(opts.store.policy), cap);
    st = std::make_unique<store::AttentionStore>(sc);
    dir.opened = true;
    run.store_lines = st->describe();
  }
  engine::EngineConfig ec = opts.engine;
  ec.mode = mode;
  // The store's tokens per chunk, of the engine's entries (fp32 or the model's native type).
  ec.truncate_align = truncate_align(opts, engine::entry_row_bytes(model, ec));
  engine::Engine eng(model, st.get(), ec);
  run.result = eng.run(sessions, progress);
  run.result.totals.gpus = opts.gpus;
  run.summary = metrics::summarize(run.result.records, run.result.totals, opts.prices);
  run.summary["mode"] = engine::mode_name(mode);
  run.summary["clipped_turns"] = run.result.clipped_turns;
  run.summary["load_failures"] = run.result.load_failures;
  run.summary["save_failures"] = run.result.save_failures;
  run.summary["steps"] = run.result.steps;
  run.summary["truncate_align_tokens"] = ec.truncate_align;
  if (st) {
    eng.drain_saves();
    st->wait_idle();
    run.summary["store"] = nlohmann::json::parse(st->stats().to_json());
    // The store's own books at the end of the run: every slot of every tier held by exactly
    // one entry, nothing pinned (audit_slots), no double free or stray unpin. A finding is a
    // store bug that may have cost the run capacity: said, not hidden.
    const std::string audit = st->audit_slots();
    const uint64_t errors = st->accounting_errors();
    run.summary["store_accounting_ok"] = audit.empty() && errors == 0;
    if (!audit.empty() || errors > 0) {
      run.summary["store_accounting"] = {{"errors", errors}, {"audit", audit}};
    }
    if (!dir.kept.empty()) run.summary["store_dir_kept"] = dir.kept;
    st.reset();  // closed before its directory is renamed
    dir.done = true;
  }
  return run;
}

}  // namespace cb::eval
