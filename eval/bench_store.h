#pragma once
/// `cachebench bench store`: AttentionStore throughput and policy decision rates, each
/// against a reference measured in the same run: DRAM save/load GB/s against memcpy of
/// the same bytes, SSD write/read GB/s against plain O_DIRECT writes/reads of the same
/// directory (one 4 MiB request at a time, and chunk-sized requests `ref_depth` at once through
/// `ref_threads` io_urings of its own, as deep a queue from as many threads as the store's I/O;
/// the faster is the ceiling), XXH3 GB/s (the
/// checksum on every chunk), and placement decisions per second over 100K entries. Everything
/// written goes to a subdirectory of the store directory that the bench creates and removes.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cb::eval {

struct BenchStoreOptions {
  std::string store_dir;                ///< where SSD files go (created if missing)
  uint64_t entry_bytes = 256ull << 20;  ///< one entry: K and V of every layer
  uint64_t traffic_bytes = 1ull << 30;  ///< bytes saved (and loaded) per repetition and tier
  int n_layers = 32;                    ///< llama-2-7b-like shape: 32 layers
  uint32_t token_bytes = 4096 * 2;      ///< one token's K (or V) of one layer: 4096 fp16
  uint64_t chunk_bytes = 1ull << 20;    ///< store chunk size
  size_t io_threads = 4;                ///< store I/O threads
  int ref_depth = 32;                   ///< the parallel reference's requests in flight
  int ref_threads = 0;                  ///< its rings, a thread each (0: io_threads, the store's)
  std::string io = "auto";              ///< auto | uring | pread
  int reps = 5;                         ///< timed repetitions (after one warm-up)
  size_t policy_entries = 100000;       ///< entries the policies rank
  size_t policy_queue = 100000;         ///< job-queue length (look-ahead)
  size_t policy_dram_entries = 32;      ///< host memory holds about this many entries (Cmem/Skv)
  int policy_calls = 5;                 ///< decisions timed per repetition
  bool run_dram = true, run_ssd = true, run_policy = true;
  uint64_t seed = 1;
  /// Called before every timed round; may throw (an interrupt) to stop the run, whose
  /// scratch directory is then removed as the stack unwinds.
  std::function<void()> poll;
};

/// One policy operation's rate.
struct PolicyRate {
  std::string policy;  ///< "scheduler-aware", "lru", "fifo", "belady"
  std::string op;      ///< "make_room", "order", "plan_prefetch"
  double per_s = 0;    ///< median decisions per second
  double ms_per = 0;   ///< median milliseconds per decision
};

struct BenchStoreResult {
  int reps = 0;
  uint64_t entry_bytes = 0, traffic_bytes = 0;  ///< traffic rounded to whole entries
  int entries_per_rep = 0;
  int n_layers = 0;
  uint32_t token_bytes = 0;
  int64_t tokens_per_entry = 0;
  uint64_t chunk_bytes = 0;
  size_t io_threads = 0;
  std::vector<std::string> store_notes;  ///< the store's tier descriptions

  double memcpy_gbs = 0;  ///< single-thread memcpy of the same bytes (median)
  double dram_save_gbs = 0, dram_load_gbs = 0;
  double dram_save_ratio = 0, dram_load_ratio = 0;  ///< store / memcpy

  bool ssd_direct = false;                         ///< the store's data files use O_DIRECT
  bool plain_direct = false;                       ///< the baseline file used O_DIRECT
  std::string io_backend;                          ///< "io_uring" or "pread"
  double ssd_write_gbs = 0, ssd_read_gbs = 0;      ///< through the store (commit incl. fsync)
  double plain_write_gbs = 0, plain_read_gbs = 0;  ///< 4 MiB O_DIRECT loop (write incl. fsync)
  double ssd_write_ratio = 0, ssd_read_ratio = 0;  ///< store / plain
  /// Chunk-sized O_DIRECT requests, `ref_depth` in flight, over a preallocated file, as the
  /// store's data files are (write incl. fdatasync).
  int ref_depth = 0;
  int ref_threads = 0;     ///< rings (threads) the requests were spread over
  std::string ref_engine;  ///< "io_uring" (its own ring), or "threads" where that is unavailable
  double parallel_write_gbs = 0, parallel_read_gbs = 0;
  /// store / the faster of the two references, the most this device gave in the same run
  double ssd_write_ceiling_ratio = 0, ssd_read_ceiling_ratio = 0;

  double xxh3_gbs = 0;  ///< single-thread XXH3-64 over an entry

  size_t policy_entries = 0, policy_queue = 0;
  std::vector<PolicyRate> policy;
};

/// Runs the benchmark; progress lines go to stderr. Throws cb::Error for an unusable
/// store directory, too little free space for the requested traffic, or bad sizes.
BenchStoreResult bench_store(const BenchStoreOptions& opt);

}  // namespace cb::eval
