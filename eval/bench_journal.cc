#include "eval/bench_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "lib/core/error.h"
#include "lib/metrics/stats.h"
#include "lib/store/entry.h"
#include "lib/store/journal.h"
#include "lib/store/store_dir.h"

namespace cb::eval {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The bench's own directory (a fresh one: never one that exists) and its parent, when the
// bench made it, removed at the end: the journal's files and the bare file, then each
// directory once empty.
struct Scratch {
  std::filesystem::path parent_made, path;
  ~Scratch() {
    if (!path.empty()) {
      store::remove_scratch_dir(path.string(), "the journal bench's directory",
                                {(path / "bare.bin").string()});
    }
    if (!parent_made.empty()) ::rmdir(parent_made.c_str());
  }
};

store::EntryMeta entry(store::SessionId id, const JournalBenchOptions& o, int64_t tokens) {
  store::EntryMeta m;
  m.session = id;
  m.generation = id;
  m.shape.n_layers = o.n_layers;
  m.shape.token_bytes = o.token_bytes;
  m.tokens_per_chunk = static_cast<uint32_t>(o.chunk_bytes / o.token_bytes);
  m.tokens.resize(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) m.tokens[t] = static_cast<store::TokenId>((id + t) % 32000);
  m.slots.resize(m.n_chunks());
  m.checksums.resize(m.n_chunks());
  for (size_t i = 0; i < m.slots.size(); ++i) {
    m.slots[i] = id * m.slots.size() + i;
    m.checksums[i] = (id << 20) ^ i;
  }
  return m;
}

// Commits of small entries on another thread while `compact` runs: the longest of those that
// overlapped it, in ms.
double longest_commit_during(store::Journal& j, store::SessionId* next,
                             const std::function<void()>& compact) {
  std::atomic<bool> stop{false}, started{false}, failed{false};
  std::vector<std::pair<Clock::time_point, Clock::time_point>> commits;
  std::thread t([&] {
    while (!stop.load() && !failed.load()) {
      store::EntryMeta m;
      m.session = m.generation = (*next)++;
      m.shape.n_layers = 1;
      m.shape.token_bytes = 2;
      m.tokens_per_chunk = 1;
      m.tokens = {1};
      m.slots = {0, 1};
      m.checksums = {0, 0};
      const auto t0 = Clock::now();
      try {
        failed = !j.commit(m, true);
        commits.emplace_back(t0, Clock::now());
      } catch (const std::exception&) {  // out of memory: reported as a failed commit
        failed = true;
      }
      started = true;
    }
    started = true;
  });
  while (!started.load()) std::this_thread::yield();
  const auto c0 = Clock::now();
  try {
    compact();
  } catch (...) {
    stop = true;
    t.join();
    throw;
  }
  const auto c1 = Clock::now();
  stop = true;
  t.join();
  if (failed) throw make_error("bench store", "a journal commit failed: " + j.last_error());
  double longest = 0;
  for (const auto& [a, b] : commits) {
    if (b >= c0 && a <= c1) {
      longest = std::max(longest, std::chrono::duration<double, std::milli>(b - a).count());
    }
  }
  return longest;
}

}  // namespace

JournalBenchResult bench_journal(const JournalBenchOptions& opt) {
  if (opt.token_bytes == 0 || opt.chunk_bytes / opt.token_bytes == 0) {
    throw make_error("--chunk-size", "a chunk is smaller than one token of one layer");
  }
  Scratch scratch;
  std::error_code ec;
  if (!std::filesystem::exists(opt.dir, ec)) {
    std::filesystem::create_directories(opt.dir, ec);
    if (ec) throw make_error(opt.dir, "cannot create the directory: " + ec.message());
    scratch.parent_made = opt.dir;
  }
  scratch.path =
      store::make_scratch_dir(opt.dir, "cachebench-bench-journal.", "pass a writable --store-dir");
  const std::string path = (scratch.path / "journal.cbj").string();

  JournalBenchResult r;
  r.entries = opt.entries;
  const int64_t tokens = std::max<int64_t>(
      1, static_cast<int64_t>(opt.entry_bytes /
                              (2ull * static_cast<uint64_t>(opt.n_layers) * opt.token_bytes)));
  std::map<store::SessionId, store::EntryMeta> live;
  for (size_t i = 1; i <= opt.entries; ++i) live[i] = entry(i, opt, tokens);
  const store::EntryMeta probe = entry(opt.entries + 1, opt, tokens);
  r.record_bytes = store::encode_entry(probe).size() + 20;  // + the record's header
  std::fprintf(stderr, "bench store: journal of %zu entries (commit records of %llu B)\n",
               opt.entries, static_cast<unsigned long long>(r.record_bytes));

  // A durable commit against a bare append + fdatasync of as many bytes, alternately.
  store::Journal::rewrite(path, {});
  {
    store::Journal j(path);
    const std::string bare_path = (scratch.path / "bare.bin").string();
    const int fd = ::open(bare_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) throw make_error(bare_path, std::string("cannot create: ") + std::strerror(errno));
    const std::string bytes(r.record_bytes, 'x');
    std::vector<double> bare, commit, ratio;
    for (int i = 0; i < opt.commits; ++i) {
      auto t0 = Clock::now();
      if (::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()) ||
          ::fdatasync(fd) != 0) {
        const int err = errno;
        ::close(fd);
        throw make_error(bare_path, std::string("cannot append and sync: ") + std::strerror(err));
      }
      bare.push_back(since(t0) * 1e6);
      t0 = Clock::now();
      if (!j.commit(probe, true)) {
        ::close(fd);
        throw make_error(path, "a timed commit failed: " + j.last_error());
      }
      commit.push_back(since(t0) * 1e6);
      ratio.push_back(bare.back() / commit.back());  // per pair: this machine drifts
    }
    ::close(fd);
    r.append_sync_us = metrics::median(bare);
    r.commit_us = metrics::median(commit);
    r.commit_ratio = metrics::median(ratio);
  }

  // Compactions of the entries, from the index and online, each with commits beside it.
  store::Journal::rewrite(path, live);
  r.journal_bytes = std::filesystem::file_size(path);
  store::Journal j(path);
  store::SessionId next = opt.entries + 2;
  std::vector<double> index_s, online_s, index_wait, online_wait, wait_ratio;
  for (int rep = 0; rep <= opt.reps; ++rep) {  // rep 0: warm-up
    if (opt.poll) opt.poll();
    double took = 0;
    const double iw = longest_commit_during(j, &next, [&] {
      const auto t0 = Clock::now();
      if (!j.compact(live)) throw make_error(path, "compaction failed: " + j.last_error());
      took = since(t0);
    });
    if (rep > 0) {
      index_s.push_back(took);
      index_wait.push_back(iw);
    }
    const double ow = longest_commit_during(j, &next, [&] {
      const auto t0 = Clock::now();
      std::string why;
      if (j.compact_from(j.mark(), nullptr, &why) != store::Journal::Compaction::Done) {
        throw make_error(path, "online compaction failed: " + why);
      }
      took = since(t0);
    });
    if (rep > 0) {
      online_s.push_back(took);
      online_wait.push_back(ow);
      if (ow > 0) wait_ratio.push_back(index_wait.back() / ow);
    }
  }
  r.index_compact_s = metrics::median(index_s);
  r.online_compact_s = metrics::median(online_s);
  r.index_wait_ms = metrics::median(index_wait);
  r.online_wait_ms = metrics::median(online_wait);
  r.wait_ratio = wait_ratio.empty() ? 0 : metrics::median(wait_ratio);
  return r;
}

}  // namespace cb::eval
