// cachebench bench store --store-dir D [--entry-size 256MiB] [--traffic 1GiB] [--reps 5]
// [--io auto|uring|pread] [--io-threads 4] [--ref-depth 32] [--ref-threads 0]
// [--policy-entries 100000] [--journal-entries 10000] [--out F.json]
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/cachebench/format.h"
#include "apps/cachebench/progress.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "eval/bench_journal.h"
#include "eval/bench_store.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/store/io_backend.h"
#include "lib/store/size_parse.h"

namespace cb::app {
namespace {

struct BenchStoreArgs {
  eval::BenchStoreOptions opt;
  std::string entry_size = "256MiB";
  std::string traffic = "1GiB";
  std::string chunk = "1MiB";
  size_t journal_entries = 10000;
  std::string out;
};

void print_journal(const eval::JournalBenchResult& j) {
  std::printf("journal              %zu entries, %s compacted; commit records of %llu B\n",
              j.entries, store::format_size(j.journal_bytes).c_str(),
              static_cast<unsigned long long>(j.record_bytes));
  std::printf("  %-34s %10.1f us   bare append + fdatasync %.1f us, bare/commit %.2f\n",
              "durable commit", j.commit_us, j.append_sync_us, j.commit_ratio);
  std::printf("  %-34s %10.3f s    online %.3f s\n", "compaction from the index", j.index_compact_s,
              j.online_compact_s);
  std::printf("  %-34s %10.2f ms   online %.2f ms, index/online %.1f\n",
              "longest commit during compaction", j.index_wait_ms, j.online_wait_ms, j.wait_ratio);
}

nlohmann::json journal_json(const eval::JournalBenchResult& j) {
  return {{"entries", j.entries},
          {"record_bytes", j.record_bytes},
          {"journal_bytes", j.journal_bytes},
          {"commit_us", j.commit_us},
          {"append_sync_us", j.append_sync_us},
          {"append_sync_to_commit", j.commit_ratio},
          {"index_compaction_s", j.index_compact_s},
          {"online_compaction_s", j.online_compact_s},
          {"index_compaction_longest_commit_ms", j.index_wait_ms},
          {"online_compaction_longest_commit_ms", j.online_wait_ms},
          {"longest_commit_index_to_online", j.wait_ratio}};
}

void print_table(const eval::BenchStoreResult& r) {
  using store::format_size;
  std::printf(
      "entry                %s: %d layers x K,V x %lld tokens x %u B; %d per round "
      "(%s)\n",
      format_size(r.entry_bytes).c_str(), r.n_layers, static_cast<long long>(r.tokens_per_entry),
      r.token_bytes, r.entries_per_rep, format_size(r.traffic_bytes).c_str());
  std::printf("store                chunk %s, %zu I/O threads\n",
              format_size(r.chunk_bytes).c_str(), r.io_threads);
  for (const auto& n : r.store_notes) std::printf("  %s\n", n.c_str());
  std::printf("%-20s %10s %12s %10s %8s\n", "measure", "store GB/s", "reference", "ref GB/s",
              "ratio");
  if (r.dram_save_gbs > 0) {
    std::printf("%-20s %10.2f %12s %10.2f %8.2f\n", "dram save", r.dram_save_gbs, "memcpy",
                r.memcpy_gbs, r.dram_save_ratio);
    std::printf("%-20s %10.2f %12s %10.2f %8.2f\n", "dram load", r.dram_load_gbs, "memcpy",
                r.memcpy_gbs, r.dram_load_ratio);
  }
  if (r.ssd_write_gbs > 0) {
    // Against each reference; the target (0.9) is against the faster, the device's ceiling.
    const std::string ref = r.plain_direct ? "O_DIRECT" : "buffered";
    const std::string par = ref + " x" + std::to_string(r.ref_depth);
    const auto line = [](const char* what, double store, const std::string& name, double gbs) {
      const double q = gbs > 0 ? store / gbs : 0;
      std::printf("%-20s %10.2f %12s %10.2f %8.2f\n", what, store, name.c_str(), gbs, q);
    };
    line("ssd write", r.ssd_write_gbs, ref, r.plain_write_gbs);
    line("ssd write", r.ssd_write_gbs, par, r.parallel_write_gbs);
    line("ssd read", r.ssd_read_gbs, ref, r.plain_read_gbs);
    line("ssd read", r.ssd_read_gbs, par, r.parallel_read_gbs);
    std::printf("ssd to ceiling       write %.2f, read %.2f (target 0.9%s)\n",
                r.ssd_write_ceiling_ratio, r.ssd_read_ceiling_ratio,
                r.ssd_write_ceiling_ratio >= 0.9 && r.ssd_read_ceiling_ratio >= 0.9 ? ", met"
                                                                                    : ", not met");
    std::printf(
        "ssd references       %s: one 4 MiB request at a time; %s: %s requests, %d in "
        "flight from %s (%s), preallocated file\n",
        ref.c_str(), par.c_str(), format_size(r.chunk_bytes).c_str(), r.ref_depth,
        count_of(r.ref_threads, "thread").c_str(), r.ref_engine.c_str());
    std::printf("ssd I/O              %s, %s\n", r.io_backend.c_str(),
                r.ssd_direct ? "O_DIRECT" : "buffered (O_DIRECT unavailable)");
  }
  std::printf("%-20s %10.2f   (single thread, per chunk on every save and load)\n", "xxh3 GB/s",
              r.xxh3_gbs);
  if (!r.policy.empty()) {
    std::printf("policy decisions     %zu entries, %zu-job queue\n", r.policy_entries,
                r.policy_queue);
    std::printf("  %-18s %-14s %14s %10s\n", "policy", "operation", "decisions/s", "ms each");
    for (const auto& p : r.policy)
      std::printf("  %-18s %-14s %14.1f %10.3f\n", p.policy.c_str(), p.op.c_str(), p.per_s,
                  p.ms_per);
  }
  std::printf("repetitions          %d (median; one warm-up round excluded)\n", r.reps);
}

nlohmann::json to_json(const eval::BenchStoreResult& r, const std::string& io) {
  nlohmann::json pol = nlohmann::json::array();
  for (const auto& p : r.policy)
    pol.push_back({{"policy", p.policy},
                   {"op", p.op},
                   {"decisions_per_s", p.per_s},
                   {"ms_per_decision", p.ms_per}});
  return {{"bench", "store"},
          {"git", git_revision()},
          {"mode", "real"},
          {"reps", r.reps},
          {"entry_bytes", r.entry_bytes},
          {"traffic_bytes", r.traffic_bytes},
          {"entries_per_rep", r.entries_per_rep},
          {"n_layers", r.n_layers},
          {"token_bytes", r.token_bytes},
          {"tokens_per_entry", r.tokens_per_entry},
          {"chunk_bytes", r.chunk_bytes},
          {"io_threads", r.io_threads},
          {"io", io},
          {"io_backend", r.io_backend},
          {"store_notes", r.store_notes},
          {"memcpy_gbs", r.memcpy_gbs},
          {"dram_save_gbs", r.dram_save_gbs},
          {"dram_load_gbs", r.dram_load_gbs},
          {"dram_save_to_memcpy", r.dram_save_ratio},
          {"dram_load_to_memcpy", r.dram_load_ratio},
          {"ssd_direct_io", r.ssd_direct},
          {"plain_direct_io", r.plain_direct},
          {"ssd_write_gbs", r.ssd_write_gbs},
          {"ssd_read_gbs", r.ssd_read_gbs},
          {"plain_write_gbs", r.plain_write_gbs},
          {"plain_read_gbs", r.plain_read_gbs},
          {"ssd_write_to_plain", r.ssd_write_ratio},
          {"ssd_read_to_plain", r.ssd_read_ratio},
          {"parallel_ref_depth", r.ref_depth},
          {"parallel_ref_threads", r.ref_threads},
          {"parallel_ref_engine", r.ref_engine},
          {"parallel_write_gbs", r.parallel_write_gbs},
          {"parallel_read_gbs", r.parallel_read_gbs},
          {"ssd_write_to_ceiling", r.ssd_write_ceiling_ratio},
          {"ssd_read_to_ceiling", r.ssd_read_ceiling_ratio},
          {"ssd_target_ratio", 0.9},
          {"ssd_target_met", r.ssd_write_ceiling_ratio >= 0.9 && r.ssd_read_ceiling_ratio >= 0.9},
          {"xxh3_gbs", r.xxh3_gbs},
          {"policy_entries", r.policy_entries},
          {"policy_queue", r.policy_queue},
          {"policy", pol}};
}

}  // namespace

void register_bench_store(CLI::App* bench) {
  auto a = std::make_shared<BenchStoreArgs>();
  CLI::App* cmd = bench->add_subcommand(
      "store",
      "AttentionStore: DRAM save/load vs memcpy, SSD O_DIRECT write/read vs plain O_DIRECT "
      "I/O in the same directory (one request at a time, and --ref-depth at once), XXH3 GB/s, "
      "policy decisions/s, journal commits and compactions");
  cmd->add_option("--store-dir", a->opt.store_dir,
                  "directory for the SSD files (created if missing; the bench works in its own "
                  "subdirectory and removes it)")
      ->required();
  cmd->add_option("--entry-size", a->entry_size, "bytes per entry (32 layers x K,V x 4096 fp16)")
      ->capture_default_str()
      ->check(size_value());
  cmd->add_option("--traffic", a->traffic, "bytes saved and loaded per round and tier")
      ->capture_default_str()
      ->check(size_value());
  cmd->add_option("--chunk-size,--chunk", a->chunk, "store chunk size")
      ->capture_default_str()
      ->check(size_value());
  cmd->add_option("--reps", a->opt.reps, "timed repetitions (after one warm-up)")
      ->capture_default_str()
      ->check(in_range(1, 1000));
  cmd->add_option("--io", a->opt.io, "SSD I/O backend: auto, uring or pread")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "uring", "pread"}));
  cmd->add_option("--io-threads", a->opt.io_threads, "store I/O threads")
      ->capture_default_str()
      ->check(in_range(1, 256));
  cmd->add_option(
         "--ref-depth", a->opt.ref_depth,
         "requests in flight in the parallel SSD reference (chunk-sized, through io_urings "
         "of its own)")
      ->capture_default_str()
      ->check(in_range(1, 256));
  cmd->add_option("--ref-threads", a->opt.ref_threads,
                  "io_urings (a thread each) the parallel reference spreads its requests over "
                  "(0: as many as --io-threads, the store's)")
      ->capture_default_str()
      ->check(in_range(0, 64));
  cmd->add_option("--policy-entries", a->opt.policy_entries,
                  "entries the policies rank (0: skip the policy benchmark)")
      ->capture_default_str()
      ->check(in_range(0, 10'000'000));
  cmd->add_option("--policy-queue", a->opt.policy_queue, "job-queue length the policies see")
      ->capture_default_str()
      ->check(in_range(0, 10'000'000));
  cmd->add_option("--journal-entries", a->journal_entries,
                  "entries of the journal whose compactions are timed, from the index and "
                  "online, with commits beside them (0: skip the journal benchmark)")
      ->capture_default_str()
      ->check(in_range(0, 1'000'000));
  cmd->add_option("--out", a->out, "also write the result as JSON to this file")
      ->check(output_file());
  set_action(cmd, [a] {
    eval::BenchStoreOptions opt = a->opt;
    opt.entry_bytes = store::parse_size(a->entry_size, "--entry-size");
    opt.traffic_bytes = store::parse_size(a->traffic, "--traffic");
    if (opt.traffic_bytes == 0) {
      throw make_error("--traffic", "0 moves nothing",
                       "give the bytes to save and load per round, at least one entry "
                       "(--entry-size)");
    }
    opt.chunk_bytes = store::parse_size(a->chunk, "--chunk-size");
    store::parse_io_mode(opt.io);  // reject a bad --io before any work
    // SIGINT/SIGTERM/SIGHUP: stop at the next round, the scratch store removed.
    install_interrupt_handlers("no result was written; its scratch store directories were removed");
    opt.poll = check_interrupted;
    const eval::BenchStoreResult r = eval::bench_store(opt);
    if (r.traffic_bytes != opt.traffic_bytes) {  // whole entries, at least one
      std::fprintf(stderr,
                   "bench store: note: --traffic %s moved as %s, whole entries of %s (%d a "
                   "round)\n",
                   store::format_size(opt.traffic_bytes).c_str(),
                   store::format_size(r.traffic_bytes).c_str(),
                   store::format_size(r.entry_bytes).c_str(), r.entries_per_rep);
    }
    print_table(r);  // before the journal's run, which may fail
    eval::JournalBenchResult j;
    if (a->journal_entries > 0) {
      eval::JournalBenchOptions jo;
      jo.dir = opt.store_dir;
      jo.entries = a->journal_entries;
      jo.n_layers = opt.n_layers;
      jo.token_bytes = opt.token_bytes;
      jo.entry_bytes = opt.entry_bytes;
      jo.chunk_bytes = opt.chunk_bytes;
      jo.reps = opt.reps;
      jo.poll = opt.poll;
      j = eval::bench_journal(jo);
    }
    if (a->journal_entries > 0) print_journal(j);
    if (!a->out.empty()) {
      nlohmann::json out = to_json(r, opt.io);
      if (a->journal_entries > 0) out["journal"] = journal_json(j);
      write_json(a->out, out);
    }
    return 0;
  });
}

}  // namespace cb::app
