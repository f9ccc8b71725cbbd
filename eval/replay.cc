// Replay driver: trace -> engine sessions -> fresh store per mode -> summary.
#include "eval/replay.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "lib/core/error.h"
#include "lib/core/sysinfo.h"
#include "lib/engine/policy_advisor.h"
#include "lib/metrics/summary.h"
#include "lib/store/attention_store.h"
#include "lib/store/store_dir.h"

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

uint64_t demote_ahead_bytes(const ReplayStoreOptions& o) {
  if (o.demote_ahead_bytes >= 0) return static_cast<uint64_t>(o.demote_ahead_bytes);
  return o.hbm_bytes > 0 && o.dram_bytes > 0 ? o.hbm_bytes / 4 : 0;
}

int64_t truncate_align(const ReplayOptions& o, uint64_t token_bytes) {
  if (o.engine.truncate_align >= 0) return o.engine.truncate_align;
  return token_bytes == 0 ? 1 : static_cast<int64_t>(o.store.chunk_bytes / token_bytes);
}

std::string under_renamed_dir(const std::string& line, const std::string& from,
                              const std::string& to) {
  if (from.empty()) return line;
  const std::string a = from + "/", b = to + "/";
  std::string out;
  size_t i = 0;
  for (size_t at; (at = line.find(a, i)) != std::string::npos; i = at + a.size()) {
    out.append(line, i, at - i).append(b);
  }
  return out.append(line, i, std::string::npos);
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
      {"demote_ahead_bytes", demote_ahead_bytes(o.store)},
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

// The file a --keep-store run writes into its scratch directory as soon as it is made: the
// directory holds a store the user asked to keep, so a later run's sweep keeps it too when
// this run is killed outright (SIGKILL, an OOM kill, a second signal), never removes it.
constexpr const char* kKeepMarker = "cachebench-keep-store";

// Takes the lock a live store holds on its directory (StoreDirLock's flock), without
// waiting. 1: taken, `*fd` holds it until closed; 0: another process holds it (a live run,
// maybe in another PID namespace); -1: no lock to go by (the directory cannot be opened, or
// its file system cannot lock it).
int try_lock_dir(const std::string& dir, int* fd) {
  *fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*fd < 0) return -1;
  int rc;
  do {
    rc = ::flock(*fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return 1;
  const int err = errno;
  ::close(*fd);
  *fd = -1;
  return err == EWOULDBLOCK ? 0 : -1;
}

// Names a directory may take when BASE is taken (a process of the same PID in another
// container, an older kept store): BASE, BASE-2, ... BASE-kMaxNames.
constexpr int kMaxNames = 1000;
std::string nth_name(const std::string& base, int n) {
  return n == 1 ? base : base + "-" + std::to_string(n);
}

// Renames `from` to the first of BASE, BASE-2, ... BASE-1000 that does not exist: never over
// an existing directory (an older kept store, maybe of a process of the same PID in another
// container). Returns the new path, or "" with `*err` saying why.
std::string rename_to_fresh(const std::string& from, const std::string& base, std::string* err) {
  for (int n = 1; n <= kMaxNames; ++n) {
    const std::string to = nth_name(base, n);
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(to, ec))) continue;
#ifdef RENAME_NOREPLACE
    int rc = ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
    // A file system without RENAME_NOREPLACE: plain rename, which would replace an empty
    // directory made under that name since the check above.
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) rc = ::rename(from.c_str(), to.c_str());
#else
    const int rc = ::rename(from.c_str(), to.c_str());  // over an empty directory made meanwhile
#endif
    if (rc == 0) {
      std::filesystem::remove(to + "/" + kKeepMarker, ec);  // a kept store, like any other
      return to;
    }
    if (errno == EEXIST || errno == ENOTEMPTY) continue;  // taken meanwhile
    *err = std::strerror(errno);
    return "";
  }
  *err = "it and its -2 to -1000 variants all exist";
  return "";
}

// Scratch directories that runs killed outright (SIGKILL, a crash) left under `parent`:
// cachebench-replay-MODE-PID[-N] whose process is gone (no such PID here) and whose store
// lock no process holds (a PID of another PID namespace's live run is not seen here, its
// lock is). Their stores are removed (store::remove_scratch_dir), with a note; one of a
// --keep-store run (its keep marker) whose store was made (its store marker) is kept as
// cachebench-store-MODE-PID[-N] instead, also with a note.
void sweep_stale(const std::string& parent) {
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = d.path().filename().string();
    const std::string prefix = "cachebench-replay-";
    if (name.rfind(prefix, 0) != 0 || !d.is_directory(ec)) continue;
    // Exactly the names ScratchDir makes: MODE one of the engine's, PID digits, a -N suffix.
    const size_t dash = name.find('-', prefix.size());  // after MODE
    if (dash == std::string::npos) continue;
    const std::string mode_part = name.substr(prefix.size(), dash - prefix.size());
    if (mode_part != engine::mode_name(engine::Mode::CA) &&
        mode_part != engine::mode_name(engine::Mode::RE) &&
        mode_part != engine::mode_name(engine::Mode::OF)) {
      continue;
    }
    const std::string rest = name.substr(dash + 1);
    const size_t suffix = rest.find('-');
    const std::string pid_part = rest.substr(0, suffix);
    const auto digits_only = [](const std::string& x) {
      return !x.empty() && x.size() <= 9 && x[0] != '0' &&
             x.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits_only(pid_part) ||
        (suffix != std::string::npos && !digits_only(rest.substr(suffix + 1)))) {
      continue;
    }
    const long pid = std::stol(pid_part);
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) {
      continue;  // a live process's (or not ours to judge)
    }
    const std::string path = d.path().string();
    int lock = -1;
    if (try_lock_dir(path, &lock) == 0) continue;  // a live store
    // Kept only once its store was made (the marker is written last): a run killed while it
    // made its data files leaves nothing a store tool could open or verify (`store clear`
    // recognises it by its journal, written first, and so does remove_scratch_dir).
    if (std::filesystem::exists(path + "/" + kKeepMarker, ec) &&
        std::filesystem::exists(store::marker_path(path), ec)) {
      std::string err;
      const std::string kept = rename_to_fresh(
          path, parent + "/cachebench-store-" + mode_part + "-" + std::to_string(pid), &err);
      if (!kept.empty()) {
        std::fprintf(stderr,
                     "cachebench: %s, left by an earlier --keep-store run that did not finish, "
                     "is kept as %s (`cachebench store verify --store-dir %s` checks what it "
                     "holds)\n",
                     path.c_str(), kept.c_str(), kept.c_str());
      } else {
        std::fprintf(stderr,
                     "cachebench: %s, left by an earlier --keep-store run that did not finish, "
                     "could not be renamed to a kept store's name (%s); left as it is: rename it "
                     "yourself (or remove it)\n",
                     path.c_str(), err.c_str());
      }
    } else {
      // A name proves nothing (a user may have made or used a directory so named): what is
      // not the store's stays.
      if (store::remove_scratch_dir(
              path, "named like the scratch directory of an earlier run that did not finish",
              {path + "/" + kKeepMarker})) {
        std::fprintf(stderr, "cachebench: removed %s, left by an earlier run that did not finish\n",
                     path.c_str());
      }
    }
    if (lock >= 0) ::close(lock);
  }
}

// A fresh SSD directory per run under the user's --store-dir, removed afterwards (or, kept,
// renamed to cachebench-store-MODE-PID once the run has ended, also when it was interrupted
// or failed after its store opened: its journal recovers what was committed). Neither name
// ever replaces an existing directory: a name that is taken (a process of the same PID in
// another container) gets a -N suffix.
struct ScratchDir {
  std::string parent, path;
  std::string kept_base;    ///< cachebench-store-MODE-PID under parent, with --keep-store
  std::string kept;         ///< where the store was kept (once it was)
  bool opened = false;      ///< a store was made in it (only such a directory is kept)
  bool keep_tried = false;  ///< keep() ran (a failed keep leaves the directory as it is)
  int lock_fd = -1;         ///< the store lock, held while no store holds it

  explicit ScratchDir(const std::string& dir, engine::Mode mode, bool keep) : parent(dir) {
    if (parent.empty()) return;
    std::error_code ec;
    if (!std::filesystem::is_directory(parent, ec)) {
      throw make_error("--store-dir", parent + " is not a directory",
                       "create it (on the SSD to measure) or pass another");
    }
    // The command line's error (exit 2), as a --store-dir that is no directory is, not a
    // failure of the run's store directory below.
    if (::access(parent.c_str(), W_OK | X_OK) != 0) {
      throw make_error("--store-dir", parent + " is not writable (" + std::strerror(errno) + ")",
                       "fix its permissions or pass a writable --store-dir");
    }
    sweep_stale(parent);
    const std::string stem =
        engine::mode_name(mode) + std::string("-") + std::to_string(::getpid());
    const std::string base = parent + "/cachebench-replay-" + stem;
    for (int n = 1; path.empty(); ++n) {
      const std::string p = nth_name(base, n);
      if (std::filesystem::create_directory(p, ec)) {
        path = p;
      } else if (ec || n >= kMaxNames) {
        // A failure of the run (a full or read-only file system), not of the command line.
        throw make_error(p,
                         "cannot create the run's store directory: " +
                             (ec ? ec.message() : std::string("it exists")),
                         "check the file system under --store-dir");
      }
    }
    lock();  // until the store takes it: a sweep in another PID namespace keeps off
    if (keep) {
      kept_base = parent + "/cachebench-store-" + stem;
      const std::string marker = path + "/" + kKeepMarker;
      std::FILE* f = std::fopen(marker.c_str(), "w");
      const bool written =
          f != nullptr &&
          std::fputs("a --keep-store run's store: a later run keeps it, never removes it\n", f) >=
              0;
      if (f == nullptr || std::fclose(f) != 0 || !written) {
        const std::string why = std::strerror(errno);
        unlock();
        ::unlink(marker.c_str());  // the directory was made just now: nothing else is there
        ::rmdir(path.c_str());
        throw make_error(marker, "cannot write: " + why,
                         "check that --store-dir " + parent + " is writable");
      }
    }
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  void lock() {
    if (lock_fd < 0 && try_lock_dir(path, &lock_fd) != 1) lock_fd = -1;
  }
  void unlock() {
    if (lock_fd >= 0) ::close(lock_fd);
    lock_fd = -1;
  }

  /// Renames the directory (its store closed) to a kept store's name; "" with `*err` set
  /// when it cannot, the directory left as it is (its keep marker says to keep it).
  std::string keep(std::string* err) {
    keep_tried = true;
    kept = rename_to_fresh(path, kept_base, err);
    return kept;
  }

  ~ScratchDir() {
    if (path.empty()) return;
    if (keep_tried) {  // kept at the end of the run, or left for the user (an error said so)
      unlock();
      return;
    }
    if (!kept_base.empty() && opened) {  // the run did not finish
      lock();
      std::string err;
      if (!keep(&err).empty()) {
        std::fprintf(stderr,
                     "cachebench: the run did not finish; its store is kept as %s (--keep-store; "
                     "`cachebench store verify --store-dir %s` checks what it holds)\n",
                     kept.c_str(), kept.c_str());
      } else {
        std::fprintf(stderr,
                     "cachebench: the run did not finish, and its store could not be kept as %s "
                     "(%s); it is left as %s (--keep-store): rename it yourself, or the next "
                     "replay with --store-dir %s keeps it\n",
                     kept_base.c_str(), err.c_str(), path.c_str(), parent.c_str());
      }
      unlock();
      return;
    }
    // By the same rules: a file put there meanwhile is not the store's.
    store::remove_scratch_dir(path, "this run's store directory", {path + "/" + kKeepMarker});
    unlock();
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
    sc.clean_ahead_bytes = clean_ahead_bytes(opts.store);    // the store ignores it without an SSD
    sc.demote_ahead_bytes = demote_ahead_bytes(opts.store);  // and this without HBM over DRAM
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
    dir.unlock();  // the store takes its directory's lock itself
    st = std::make_unique<store::AttentionStore>(sc);
    dir.opened = true;
    run.store_lines = st->describe();
    run.store_warnings = st->describe(true);
  }
  engine::EngineConfig ec = opts.engine;
  ec.mode = mode;
  // The store's tokens per chunk, of the engine's entries (fp32 or the model's native type).
  ec.truncate_align = truncate_align(opts, engine::entry_row_bytes(model, ec));
  engine::Engine eng(model, st.get(), ec);
  const CpuTicks ticks0 = cpu_ticks();
  run.result = eng.run(sessions, progress);
  const double steal = steal_share(ticks0, cpu_ticks());
  run.result.totals.gpus = opts.gpus;
  run.summary = metrics::summarize(run.result.records, run.result.totals, opts.prices);
  // The hypervisor's share of the machine's CPU time during the run: its wall clocks measured
  // the other guests too (README, replay's --out).
  if (steal >= 0) run.summary["cpu_steal"] = steal;
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
    st.reset();  // closed before its directory is renamed
    if (!dir.kept_base.empty()) {
      dir.lock();
      std::string err;
      if (!dir.keep(&err).empty()) {
        run.summary["store_dir_kept"] = dir.kept;
        // The first I/O error names a data file or the journal: where it is now.
        nlohmann::json& stats = run.summary["store"];
        if (stats.contains("first_io_error")) {
          stats["first_io_error"] =
              under_renamed_dir(stats["first_io_error"].get<std::string>(), dir.path, dir.kept);
        }
      } else {  // the run's results stand; the command fails once it has reported them
        // Gone: a replay's sweep in another PID namespace took it for an unfinished run's
        // (its store lock is released while the store closes) and kept it itself.
        std::error_code gone_ec;
        const bool gone = !std::filesystem::exists(dir.path, gone_ec);
        run.keep_error =
            make_error(dir.kept_base,
                       "could not keep the run's store (--keep-store) under this name: " + err,
                       gone ? "it is no longer at " + dir.path +
                                  ": another replay under --store-dir " + dir.parent +
                                  " may have kept it as cachebench-store-MODE-PID there (it "
                                  "said so on its stderr)"
                            : "it is left as " + dir.path +
                                  ": rename it yourself (the next replay with --store-dir " +
                                  dir.parent + " tries again once this one has ended)")
                .what();
      }
    }
  }
  return run;
}

}  // namespace cb::eval
