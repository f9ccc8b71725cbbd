#pragma once
/// AttentionStore: keeps each conversation's KV cache between turns in the fastest tier
/// with room (HBM budget, pinned DRAM, SSD files), so the next turn loads it instead of
/// recomputing it. Saves and loads stream layer by layer on a pool of I/O threads;
/// placement decisions come from an injected PlacementAdvisor; every chunk is checksummed
/// and the SSD index is journaled, so nothing wrong is ever served and a restart recovers
/// every completed SSD entry. Misses and full tiers are return values, not exceptions.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/store/advisor.h"
#include "lib/store/io_backend.h"
#include "lib/store/stats.h"
#include "lib/store/store_dir.h"
#include "lib/store/types.h"
#include "lib/store/write_meter.h"

namespace cb::store {

class Tier;
class Journal;
class ThreadPool;
class BandwidthLimiter;
struct EntryMeta;
struct StoreEntry;
struct SaveState;
struct LoadState;
struct ChunkIo;

/// Budgets and knobs; a budget of 0 leaves that tier out.
struct StoreConfig {
  uint64_t hbm_bytes = 0;             ///< HBM tier budget (host-backed, see memory_tier.h)
  uint64_t dram_bytes = 0;            ///< DRAM tier budget (pinned arena)
  uint64_t dram_reserve_bytes = 0;    ///< DRAM kept free for prefetches (host memory buffer)
  uint64_t ssd_bytes = 0;             ///< SSD budget; 0 with a store_dir adopts the existing store
  std::string store_dir;              ///< where SSD files live ("" = no SSD tier)
  uint64_t chunk_bytes = 1ull << 20;  ///< allocation and I/O unit (multiple of 4096)
  size_t io_threads = 4;              ///< I/O worker threads
  IoMode io_mode = IoMode::Auto;      ///< io_uring, pread, or io_uring with pread fallback
  bool direct_io = true;              ///< O_DIRECT on data files (falls back if refused)
  double default_ttl = 0;             ///< seconds since last access; 0 = never expire
  /// Write-back ahead of eviction: at each write_back() or prefetch() after an entry was
  /// saved or demoted or the look-ahead changed (the engines ask every step), the DRAM
  /// entries the advisor would evict first, for this many bytes, get SSD copies of all their
  /// chunks written on the write pool, into free SSD space only (like a prefetched entry's
  /// copy: not journaled, ranked with the SSD's entries when it needs room). Demoting such an entry
  /// then writes only what its session appended since (often nothing), so a save that must
  /// make room waits for little. 0 = off.
  uint64_t clean_ahead_bytes = 0;
  /// Demotion ahead of need (HBM over DRAM): at each write_back() or prefetch() after an
  /// entry was saved or demoted or the look-ahead changed, when the HBM tier has less than
  /// this many bytes free (counting the demotions under way), the HBM entries the advisor
  /// would evict first are demoted (or dropped, as it says) on the write pool until that much
  /// is free or on its way. A save that then finds HBM short of room waits for the demotions
  /// under way before it evicts anything itself, so it usually finds room without demoting on
  /// its caller's thread. Counted as demotions_ahead. 0 = off.
  uint64_t demote_ahead_bytes = 0;
  /// Save-time admission (DRAM over SSD, no HBM tier): an append save whose new chunks do not
  /// fit in DRAM asks the advisor which DRAM entry it would evict first, the one the save
  /// extends included. When that is the saving session's own entry (the policy values it
  /// least), the save goes to the SSD instead of evicting entries ranked above it: written
  /// from the caller's buffers on the write pool, taking the whole chunks the entry's SSD copy
  /// (write-back, prefetch) already holds, so its caller waits for no demotion. The DRAM entry
  /// is dropped at once: should the save then fail, the session misses. Counted as
  /// saves_admitted_below.
  bool save_admission = false;
  /// Demotion budget: when a save must make room in DRAM (its caller's thread waits for the
  /// demotions), a victim whose demotion to the SSD would take longer than recomputing it
  /// is dropped instead. The wait is predicted as the SSD writes under way plus the victim's
  /// own chunks (less those its SSD copy holds) over the SSD's measured write rate
  /// (WriteMeter); the recompute time comes from set_recompute_estimate() (the engines
  /// install their prefill rate). Off without an estimate or before the SSD has written
  /// anything. Counted as slow_demotions_dropped (and as a DRAM drop).
  bool drop_slow_demotions = false;
  /// Journal growth that triggers compaction; a new store on a file system with less than
  /// four times that left beside its data files compacts at a quarter of what is left (and
  /// one with less than kMinJournalRoom left is refused).
  uint64_t journal_compact_bytes = 64ull << 20;
  Clock clock;                                ///< seconds; default: steady clock
  std::shared_ptr<PlacementAdvisor> advisor;  ///< default: LruAdvisor
  std::shared_ptr<IoBackend> io_backend;      ///< overrides io_mode (fault injection)
  /// Stands in for the journal's fdatasync (fault injection): 0 or -errno; empty: fdatasync.
  std::function<int(int fd)> journal_sync;
  /// Emulated read / write bandwidth per tier in GB/s (0 = as fast as the hardware): a
  /// tier slowed on purpose, for overlap tests and ablations.
  double read_gbps[kNumTiers] = {0, 0, 0};
  double write_gbps[kNumTiers] = {0, 0, 0};
};

/// What the engine asks for: a session whose history, model and key encoding must match.
struct LookupKey {
  SessionId session = 0;
  ModelFingerprint fingerprint;
  KeyEncoding encoding = KeyEncoding::PreRope;
  std::vector<TokenId> history;  ///< the conversation so far (token ids)
  /// The geometry the caller's load targets hold. An entry of another shape misses
  /// (FingerprintMismatch): its layers would not fit them. Callers that load must set it;
  /// n_layers 0 accepts any shape (lookups that only inspect).
  EntryShape shape;
};

/// Why a lookup missed (or Hit).
enum class LookupStatus { Hit, NotFound, FingerprintMismatch, HistoryMismatch, Expired };
/// "hit", "not_found", ...
const char* lookup_status_name(LookupStatus s);

/// Result of a lookup: on a hit, the servable prefix of the history.
struct LookupResult {
  LookupStatus status = LookupStatus::NotFound;
  TierKind tier = TierKind::Dram;
  int64_t matched_tokens = 0;  ///< prefix of the history the entry can serve
  int64_t entry_tokens = 0;
  EntryShape shape;
  bool hit() const { return status == LookupStatus::Hit; }
};

/// A new entry to save.
struct SaveRequest {
  SessionId session = 0;
  ModelFingerprint fingerprint;
  KeyEncoding encoding = KeyEncoding::PreRope;
  EntryShape shape;
  std::vector<TokenId> tokens;  ///< the history the KV covers (one per token)
  double ttl = -1;              ///< seconds; < 0 = config default
  /// When the session's entry first entered the store (store clock; FIFO's order; may be
  /// negative: recovered entries' times are moved before the new process's clock). NaN: the
  /// created time of the session's entry this save replaces, or now when it has none. A
  /// caller that erases the old entry before saving passes inserted_at() from before the erase.
  double created = std::numeric_limits<double>::quiet_NaN();
  /// Append to the session's entry when it is a prefix of `tokens` (same fingerprint,
  /// encoding and shape), committed, and in the fastest tier: its whole chunks are shared,
  /// and in a memory tier its last partial chunk too, extended in place (one append at a time
  /// per entry), so only the tokens past the shared ones are reserved and written (the
  /// caller's buffers must still hold K and V for every token). When the tier has no room
  /// for the new chunks, the save falls back to a full one.
  bool append = true;
  /// Drop the session's entry at once unless this save appends to it, so the replaced
  /// entry's space is free for the save's reservation (a serving engine's choice: the old
  /// entry is stale once the turn is done). Otherwise it stays until the commit lands.
  bool replace_now = false;
};

class AttentionStore;

/// An in-progress save ("write buffer"): layers are streamed in, the entry becomes visible
/// only when commit() succeeds. Destroying an uncommitted handle aborts the save. A handle
/// must not outlive the store that made it.
class SaveHandle {
 public:
  SaveHandle() = default;
  ~SaveHandle();
  SaveHandle(SaveHandle&&) noexcept;
  SaveHandle& operator=(SaveHandle&&) noexcept;

  /// True when space was reserved and the save can proceed.
  bool ok() const;
  /// Tier the entry is being written to (meaningful when ok()).
  TierKind tier() const;
  /// Leading tokens an append save shares with the entry it extends and does not write
  /// (0 for a full save); see SaveRequest::append.
  int64_t shared_tokens() const;
  /// Queues layer `layer`'s K and V (each tokens * token_bytes bytes). The buffers must
  /// stay valid until the returned future is ready; it yields false on an I/O error.
  std::shared_future<bool> write_layer(int layer, LayerSource src);
  /// Completes asynchronously: waits for all layers, makes the entry durable (SSD) and
  /// visible, replacing any older entry of the session. False when the save was dropped.
  /// Once every layer has been queued, commit() makes the entry *in flight*: lookups and
  /// loads of the session see it at once (a load waits, layer by layer, for that layer's
  /// write), so a session's next turn need not wait for its last save. An erase or a newer
  /// save of the session while the entry is in flight drops it (its commit yields false).
  std::shared_future<bool> commit();
  /// Abandons the save and frees its space (also done by the destructor).
  void abort();

 private:
  friend class AttentionStore;
  std::shared_ptr<SaveState> st_;
  std::shared_future<bool> commit_;
};

/// An in-progress load into caller buffers, layer by layer. The entry stays pinned (never
/// evicted or freed) for the handle's whole life, so what a load pins depends only on when
/// the caller drops the handle, not on I/O timing. Like SaveHandle, it must not outlive the
/// store that made it.
class LoadHandle {
 public:
  LoadHandle() = default;
  /// Waits for outstanding layers (the target buffers are written until then).
  ~LoadHandle();
  LoadHandle(LoadHandle&&) noexcept = default;
  LoadHandle& operator=(LoadHandle&&) noexcept;

  /// The lookup outcome; layers are loaded only on a hit.
  const LookupResult& lookup() const { return result_; }
  /// True on a hit (loading started).
  bool ok() const { return st_ != nullptr; }
  /// Tokens being loaded (the matched prefix, possibly capped by the request).
  int64_t tokens() const { return tokens_; }
  /// Blocks until layer `layer` is in its buffer (starting it first if it was held back);
  /// false if it failed verification or I/O (the data must not be used: recompute).
  bool wait_layer(int layer);
  /// Lets layers [0, n) start loading (those held back by load()'s `start_layers`).
  void start_layers(int n);
  /// Layers started so far.
  int started_layers() const;
  /// Blocks until every layer is done; true when all succeeded.
  bool wait_all();

 private:
  friend class AttentionStore;
  void cancel_unstarted();
  std::shared_ptr<LoadState> st_;
  LookupResult result_;
  int64_t tokens_ = 0;
};

/// The store. Thread-safe: any number of threads may save, load, truncate and erase.
class AttentionStore {
 public:
  /// Opens the tiers; recovers the SSD index from the journal. Throws cb::Error with an
  /// actionable message on bad budgets, a missing or read-only store directory, a store
  /// created with another geometry, or too little disk space.
  explicit AttentionStore(StoreConfig cfg);
  ~AttentionStore();
  AttentionStore(const AttentionStore&) = delete;
  AttentionStore& operator=(const AttentionStore&) = delete;

  /// Whether `key` would hit, and how much of its history; counts nothing, moves nothing.
  /// An entry in flight (SaveHandle::commit) counts as the session's entry.
  LookupResult lookup(const LookupKey& key);
  /// Starts loading up to `max_tokens` (-1 = all) of the matched prefix into `targets`
  /// (one per layer). Only layers [0, start_layers) start now (-1 = all): the rest wait for
  /// LoadHandle::start_layers, which models a read buffer of that many layers. A miss is
  /// counted by reason and returns a handle with !ok().
  LoadHandle load(const LookupKey& key, const std::vector<LayerTarget>& targets,
                  int64_t max_tokens = -1, int start_layers = -1);
  /// Reserves space for a new entry (evicting through the advisor as needed). Throws
  /// cb::Error only for malformed requests; a full store gives a handle with !ok().
  SaveHandle begin_save(const SaveRequest& req);
  /// Drops tokens per `spec`; true when the entry now holds the truncated history (false:
  /// missing, expired (then dropped, as a lookup finds it), invalid spec, or the rewrite failed
  /// and the entry was dropped). Aligned to
  /// chunks it only edits metadata; otherwise it rewrites the entry. A session whose save is
  /// in flight (see SaveHandle::commit) is not truncated (false): wait for the commit first;
  /// nor is one whose save lands or starts while the rewrite reads the entry (false; the
  /// newer entry stands).
  bool truncate(SessionId session, const TruncateSpec& spec);
  /// Removes an entry, and drops a save of the session in flight; true when either existed.
  /// A dropped save's space is freed when its writes finish, not at once.
  bool erase(SessionId session);
  /// Removes every entry idle longer than its TTL; returns how many.
  size_t expire();
  /// Records the scheduler's look-ahead window, starts the write-backs ahead of eviction
  /// (StoreConfig::clean_ahead_bytes) and fetching SSD entries of upcoming sessions into
  /// DRAM as the advisor decides; returns the number of fetches started.
  size_t prefetch(const std::vector<SessionId>& lookahead);
  /// The last prefetch() plan had a fetch that found no room, and since it began a save landed,
  /// an entry left or moved, so room may be found now: the engines plan again with the same
  /// look-ahead, retry_prefetch(). Without that, a turn whose fetch met a save still in
  /// flight would read the SSD unless its look-ahead changed first.
  bool prefetch_retry_due() const;
  /// prefetch() again with the last look-ahead; returns the fetches started.
  size_t retry_prefetch();
  /// Plans and starts write-backs ahead of eviction (StoreConfig::clean_ahead_bytes) and
  /// demotions ahead of need (StoreConfig::demote_ahead_bytes) when an entry was saved or
  /// demoted, or the look-ahead changed, since the last plan (prefetch() plans too); returns
  /// how many were queued. Cheap otherwise: engines call it every step.
  size_t write_back();
  /// Blocks until background work (prefetches, commits, loads) is done.
  void wait_idle();
  /// As wait_idle, but gives up at `deadline`; true when the background work is done.
  bool wait_idle_until(std::chrono::steady_clock::time_point deadline);
  /// Counts `seconds` the caller skipped instead of waiting them (an engine jumping its clock
  /// over an idle gap) as elapsed on the store's clock from now on: access times, TTLs and
  /// LRU/FIFO ages then span the gap as they do on the caller's clock (and in sim mode).
  void skip_time(double seconds);
  /// Seconds a prefill of `tokens` tokens from nothing takes (StoreConfig::
  /// drop_slow_demotions); called on a saving thread with the store's lock held, so it must
  /// be cheap and must not call the store. Empty: no estimate (nothing is dropped).
  void set_recompute_estimate(std::function<double(int64_t tokens)> seconds);

  /// Counters and occupancy (and first_io_error()).
  StatsSnapshot stats() const;
  /// The first I/O error the store met (a counted io_error), as a line naming the file and
  /// the system's reason ("DIR/journal.cbj: cannot append a record: No space left on
  /// device", "DIR/data_0.cbd at byte 65536: cannot write a chunk: Input/output error");
  /// "" when none. Thread-safe.
  std::string first_io_error() const;
  /// Whether tier `t` is configured.
  bool has_tier(TierKind t) const;
  /// Bytes in use in tier `t` (slots * chunk size).
  uint64_t used_bytes(TierKind t) const;
  /// SSD bytes held by the copies that prefetched entries keep of their SSD chunks (so that
  /// demoting them again writes only what changed); part of used_bytes(TierKind::Ssd), and
  /// the first thing given up when the SSD needs room.
  uint64_t ssd_copy_bytes() const;
  /// Budget of tier `t`.
  uint64_t capacity_bytes(TierKind t) const;
  /// Where `session` is, if stored.
  bool where(SessionId session, TierKind* tier) const;
  /// Ids of all visible entries (sorted).
  std::vector<SessionId> sessions() const;
  /// A copy of an entry's metadata (false when absent).
  bool entry_meta(SessionId session, EntryMeta* out) const;
  /// When `session`'s entry first entered the store (EntryMeta::created, kept across
  /// re-saves of the session), or NaN when it has no entry.
  double inserted_at(SessionId session) const;
  /// Reads and verifies every chunk of every entry; returns the number of bad entries
  /// (they are dropped). `chunks_checked` receives the number of chunks of the entries read. An
  /// entry whose read failed (an I/O error, not a checksum) is not known to be bad: with
  /// `unreadable` it is kept and listed there (a line naming it, the file and the error), else
  /// dropped.
  uint64_t verify_all(uint64_t* chunks_checked, std::vector<std::string>* unreadable = nullptr);
  /// The chunk size in use.
  uint64_t chunk_bytes() const { return cfg_.chunk_bytes; }
  /// One line per tier describing how it runs; with `degraded_only`, only those of tiers that
  /// run other than asked (Tier::degraded).
  std::vector<std::string> describe(bool degraded_only = false) const;
  /// Slot accounting errors seen (double frees, unpins of unpinned entries); 0 unless there
  /// is a bug.
  uint64_t accounting_errors() const;
  /// Checks that every slot each tier has allocated belongs to exactly one entry, SSD copy,
  /// save in flight or list of slots retired until an entry's loads end, and that each of
  /// those slots is allocated. Returns one line per finding, empty when all is consistent.
  /// Meant for an idle store (wait_idle(), no SaveHandle or LoadHandle open): then no entry
  /// is pinned or moving and no slots wait for loads, and those are reported too.
  std::string audit_slots() const;

 private:
  friend class SaveHandle;
  friend class LoadHandle;
  using EntryPtr = std::shared_ptr<StoreEntry>;

  double now() const;
  Tier* tier(TierKind t) const { return tiers_[static_cast<int>(t)].get(); }
  void open_ssd();
  /// Replays the journal into the index and compacts it; `marker_version` says whether the
  /// journal must begin with a start record (2), and its rewrite end with an end record (3),
  /// or may not (1).
  void recover(int marker_version);
  LookupStatus classify(const StoreEntry& e, const LookupKey& key, int64_t* matched) const;

  // placement (store_placement.cc)
  /// `settle`: before choosing victims, wait for the saves in flight that tier `t` depends
  /// on to land (settled_locked), so the candidates are every visible entry whatever the I/O
  /// timing (only on a caller's thread: a pool thread waiting for commits queued behind it
  /// could deadlock).
  bool reserve(TierKind t, uint64_t n, bool use_reserve, std::vector<uint64_t>* slots,
               bool settle = false);
  /// No save in flight writes to tier `t` or replaces an entry in it (store_admit.cc).
  bool settled_locked(TierKind t) const;
  bool lower_tier(TierKind t, TierKind* lower) const;
  enum class MoveResult { Ok, Gone, NoRoom, SourceBad, DestFailed };
  /// `blocking`: on a save's thread (reserve()'s `settle`), where the demotion budget holds and
  /// a demotion to DRAM makes its room there settled (move_entry's `settle`).
  void evict(const EntryPtr& e, bool drop, bool blocking);
  /// drop_slow_demotions: would demoting `e` to the SSD take longer than recomputing it?
  bool slow_demotion_locked(const StoreEntry& e) const;
  /// `why`: on SourceBad, what was wrong with the source (chunk_problem()). `settle`: the room
  /// in `dst` is reserved as reserve()'s `settle` says (a save's victim demoted to a memory
  /// tier, see evict()).
  MoveResult move_entry(const EntryPtr& e, TierKind dst, bool use_reserve,
                        std::string* why = nullptr, bool settle = false);
  /// Copies `m`'s chunks to `dst_slots` (indexed as m.slots), except token chunks
  /// [0, skip_chunks) of every layer and K/V, which the destination already holds.
  MoveResult copy_chunks(TierKind src, TierKind dst, const EntryMeta& m,
                         const std::vector<uint64_t>& dst_slots, uint64_t skip_chunks = 0,
                         std::string* why = nullptr);
  MoveResult promote(const EntryPtr& e);
  /// May `e` be chosen for eviction (no pins but a running write-back's, not moving)?
  static bool evictable(const StoreEntry& e);

  // write-back ahead of eviction (store_clean.cc)
  /// The DRAM entries the advisor would evict first, for clean_ahead_bytes, that lack a
  /// whole SSD copy; marks them queued.
  std::vector<EntryPtr> plan_cleaning_locked();
  /// Writes SSD copies of `entries`, in order, into free SSD slots (stops at the first that
  /// does not fit); runs on the write pool.
  void clean(const std::vector<EntryPtr>& entries);
  /// One entry's copy: false when the SSD had no free room for it.
  bool clean_one(const EntryPtr& e);
  /// A demotion ahead of need: the entry, whether the advisor drops it instead, and its
  /// chunks as planned (counted in demoting_chunks_ until it is done).
  struct Demotion {
    EntryPtr entry;
    bool drop = false;
    uint64_t chunks = 0;
  };
  /// The advisor's first victims in tier `t` for `bytes`, among its evictable entries, each
  /// with whether it is to be dropped (caller holds mu_).
  std::vector<std::pair<EntryPtr, bool>> first_victims_locked(TierKind t, uint64_t bytes);
  /// The HBM entries (over DRAM) the advisor would evict first until demote_ahead_bytes of
  /// HBM are free or being freed, marked moving and pinned; the caller hands them to
  /// demote_ahead() on the write pool.
  std::vector<Demotion> plan_demotions_locked();
  void demote_ahead(const std::vector<Demotion>& demotions);
  void restore_reserve();
  /// prefetch()'s fetches, planned against `lookahead`.
  size_t start_fetches(const std::vector<SessionId>& lookahead);

  // entry life cycle (attention_store.cc); callers hold mu_
  void unlink_locked(const EntryPtr& e);
  void release_locked(const EntryPtr& e, TierKind t, std::vector<uint64_t> slots);
  /// Releases `e`'s SSD copy (StoreEntry::ssd_copy), if any.
  void drop_copy_locked(const EntryPtr& e);
  /// A whole-chunk truncation removed token chunks [c0, c1): `e`'s SSD copy loses the same
  /// chunks and keeps the rest (store_save.cc).
  void cut_copy_locked(const EntryPtr& e, uint64_t c0, uint64_t c1);
  void unpin(const EntryPtr& e);
  void unpin_locked(const EntryPtr& e);
  void unpin_load(const LoadState& st);  ///< a load's pins (its entry, and an append's base)
  /// Frees `slots`, unless a load of `lender` (or of a lender further up its chain) may still
  /// read them: then they join the nearest pinned lender's retired slots.
  void free_slots_locked(EntryPtr* lender, TierKind t, std::vector<uint64_t> slots);
  // save-time admission (store_admit.cc, StoreConfig::save_admission)
  /// The session's DRAM entry that `m` would extend, when DRAM lacks room for what the append
  /// would reserve and the advisor ranks that entry its first victim (after the saves in
  /// flight DRAM depends on have landed); else null.
  EntryPtr admits_below_locked(std::unique_lock<std::mutex>& g, const EntryMeta& m);
  /// begin_save's admission: true when `st` was admitted to the SSD, taking the whole chunks
  /// the entry's SSD copy holds (the entry and the rest of its copy are dropped).
  bool save_below(SaveState* st);
  /// The session's committed entry that `m` can extend (SaveRequest::append): no save of the
  /// session in flight, in the fastest tier, not moving, same fingerprint, encoding, shape and
  /// chunking, its tokens a prefix of `m`'s, not expired; else null.
  EntryPtr append_base_locked(const EntryMeta& m) const;
  /// begin_save's append attempt: true when `st` was admitted as an append to the session's
  /// entry (see SaveRequest::append).
  bool try_append(SaveState* st);
  /// Ends an append save's hold on its base, and its in-place extension of the base's last
  /// chunk unless loads of the save are still to read it (caller holds mu_).
  void release_base_locked(SaveState* st);
  /// Drops `e`, which failed verification or could not be read, saying so on stderr with
  /// `why` (which chunk, where, what: chunk_problem()).
  void drop_corrupt(const EntryPtr& e, const std::string& why);
  /// "chunk I (layer L, K|V, token chunk C) at <where it is in tier t>: <what>".
  std::string chunk_problem(const EntryMeta& m, TierKind t, uint64_t index,
                            const std::string& what) const;
  /// chunk_problem() of the first failed op of `ops` (`index(i)`: op i's chunk index).
  std::string failed_op_problem(const EntryMeta& m, TierKind t, const ChunkIo* ops, size_t n,
                                const std::function<uint64_t(size_t)>& index) const;
  /// Keeps `what` as first_io_error() unless one is kept already.
  void note_io_error(const std::string& what);
  /// Makes the SSD's writes to `slots` durable; a failure is counted and noted.
  bool sync_ssd(const std::vector<uint64_t>& slots);
  /// Journals `m` (a new generation) durably; false when that failed (counted as an
  /// io_error, noted as first_io_error()). While the journal is broken (a failed sync,
  /// Journal::commit) the commit is a compaction with `m` in it, tried at once.
  bool journal_commit(EntryMeta* m);
  /// Records that `session`'s SSD entry is gone (caller holds mu_, the index no longer has it
  /// on the SSD). When the record cannot be appended (disk full, a torn append cut off), the
  /// journal is compacted from the index instead; until that succeeds, later erases and
  /// commits retry it, so an erased entry never comes back at the next open.
  void journal_erase_locked(SessionId session);
  /// Rewrites the journal from the index's SSD entries, plus `extra` (a commit about to be
  /// published); true when it succeeded (caller holds mu_).
  bool compact_journal_locked(const EntryMeta* extra);
  /// Starts a compaction of the journal on compact_pool_, off mu_ (Journal::compact_from),
  /// unless one is under way: the index's SSD entries now, plus `extra`, are what it must
  /// find in the records so far, at their generations, given the index's access times
  /// (caller holds mu_).
  void start_compaction_locked(const EntryMeta& extra);

  // save / load internals (store_save.cc, store_load.cc)
  bool write_layer_now(SaveState& st, int layer, LayerSource src);
  bool finish_save(const std::shared_ptr<SaveState>& st);
  void publish_in_flight(const std::shared_ptr<SaveState>& st);
  /// The session's entry as lookups see it: the save in flight, else the committed entry
  /// (null when neither); `save` receives the save in flight, if that is what was found.
  EntryPtr visible_locked(SessionId session, std::shared_ptr<SaveState>* save) const;
  void abort_save(SaveState& st);
  void load_layer(const std::shared_ptr<LoadState>& st, int layer);
  void start_layers(const std::shared_ptr<LoadState>& st, int n);
  void settle_layer(const std::shared_ptr<LoadState>& st, int layer, bool ok, bool attempted);
  /// `why`: on failure, which chunk and what (chunk_problem()).
  bool read_entry(const EntryMeta& m, TierKind t, std::vector<char>* k, std::vector<char>* v,
                  std::string* why);
  /// Reads every chunk of `m` in `t`, in batches of up to 64 MiB through one buffer, and checks
  /// its checksum: verify_all's check, whose memory does not grow with the entry. `why`: as
  /// read_entry's.
  bool verify_entry(const EntryMeta& m, TierKind t, std::string* why, bool* io_failed = nullptr);
  bool timed_io(TierKind t, bool write, struct ChunkIo* ops, size_t n);

  StoreDirLock dir_lock_;  ///< first: released after everything else has closed its files
  StoreConfig cfg_;
  std::unique_ptr<Tier> tiers_[kNumTiers];
  std::unique_ptr<Journal> journal_;
  uint64_t reserve_chunks_ = 0;
  mutable std::mutex mu_;
  std::condition_variable move_cv_;
  std::unordered_map<SessionId, EntryPtr> index_;
  /// Saves whose commit() was called and has not landed, by session (the newest only).
  std::unordered_map<SessionId, std::shared_ptr<SaveState>> in_flight_;
  std::vector<SessionId> lookahead_;
  uint64_t next_generation_ = 1;
  uint64_t journal_compact_bytes_ = 0;  ///< StoreConfig::journal_compact_bytes, as fitted
  std::atomic<double> skipped_s_{0};    ///< skip_time's total, added to cfg_.clock
  uint64_t pin_errors_ = 0;             ///< unpins of an entry with no pins (accounting_errors())
  int cleaning_ = 0;  ///< write-backs running (they hold SSD slots not yet anyone's copy)
  uint64_t demoting_chunks_ = 0;  ///< HBM chunks of demotions ahead of need not yet done
  bool write_back_due_ = false;   ///< see write_back()
  bool fetch_blocked_ = false;    ///< a fetch of the last prefetch plan found no room
  uint64_t changes_ = 0;  ///< saves landed, entries unlinked, evicted or fetched, slots freed
  uint64_t changes_at_block_ = 0;  ///< changes_ when that fetch began
  bool journal_stale_ = false;     ///< an erase record is missing (journal_erase_locked)
  /// SSD slots freed while journal_stale_: the journal may still name them as an erased
  /// entry's, which the next open would bring back over whatever a save wrote there, so they
  /// are not reused until a compaction from the index (compact_journal_locked) succeeds.
  std::vector<uint64_t> quarantined_ssd_;
  bool compacting_ = false;     ///< a start_compaction_locked() compaction is under way
  uint64_t compact_after_ = 0;  ///< after a failed one: journal bytes before the next try
  StoreStats stats_;
  mutable std::mutex io_error_mu_;  ///< guards first_io_error_ (a leaf: taken under mu_ too)
  std::string first_io_error_;
  std::unique_ptr<ThreadPool> pool_;          ///< writes, commits, tier moves ("write stream")
  std::unique_ptr<ThreadPool> load_pool_;     ///< loads into caller buffers ("read stream")
  std::unique_ptr<ThreadPool> compact_pool_;  ///< journal compactions (one thread)
  std::unique_ptr<BandwidthLimiter> limit_[kNumTiers][2];  // [tier][write]
  WriteMeter ssd_writes_;                                  ///< SSD writes under way, rate
  std::function<double(int64_t)> recompute_s_;             ///< set_recompute_estimate()
};

}  // namespace cb::store
