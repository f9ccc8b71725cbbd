#pragma once
/// The AttentionStore of sim mode: the same tiers, chunk-granular sizes, placement advisor
/// (lib/policy through engine::PolicyAdvisor), reserve/evict cascade, read-buffer reserve,
/// prefetching and TTL as lib/store, but no bytes move: every transfer is a reservation on
/// a Link (bandwidth + latency, queueing around the transfers already booked) of the virtual clock.
/// Mirrors lib/store's decisions so that a real and a simulated replay of the same trace
/// see the same hits and misses (docs/sim.md).

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lib/engine/policy_advisor.h"
#include "lib/metrics/turn_record.h"
#include "lib/store/advisor.h"
#include "lib/store/types.h"

namespace cb::sim {

/// A transfer server with back-filling: a transfer issued at `at` runs in the link's idle time
/// from `at` on, around the transfers already reserved (which may start later: a fetch or a
/// load booked after an earlier one lands), split over the gaps until its bytes are through. On
/// the virtual clock transfers are booked in the order the simulation reaches them, not the
/// order they start; a strict FIFO would make an early transfer wait behind one booked for
/// later, which the device would have served first.
class Link {
 public:
  Link() = default;
  Link(double gbps, double latency_s) : bps_(gbps * 1e9), lat_(latency_s) {}
  /// Reserves a transfer of `bytes` issued at `at`; returns when it completes.
  double transfer(double at, double bytes);
  /// When the last transfer() started moving (its first idle moment from `at` on).
  double last_start() const { return last_start_; }
  /// When a transfer of `bytes` issued at `at` would complete; reserves nothing.
  double completion(double at, double bytes) const;
  /// Forgets the reservations that end by `now`: the simulation issues nothing before its
  /// clock (a transfer issued before `now` is taken as issued at `now`).
  void retire(double now);
  /// Seconds the link spent transferring, and bytes moved.
  double busy_s() const { return busy_s_; }
  double bytes() const { return bytes_; }
  /// Seconds a transfer of `bytes` takes on an idle link.
  double duration(double bytes) const { return lat_ + bytes / bps_; }

 private:
  /// Walks the idle time from `at` for `d` seconds; calls take(start, end) for each piece.
  template <class Take>
  double fill(double at, double d, Take take) const;
  double bps_ = 1e12, lat_ = 0;
  std::map<double, double> busy_;  ///< reserved intervals [start, end), disjoint, not touching
  double floor_ = 0, last_start_ = 0, busy_s_ = 0, bytes_ = 0;
};

struct SimStoreConfig {
  uint64_t hbm_bytes = 0, dram_bytes = 0, dram_reserve_bytes = 0, ssd_bytes = 0;
  uint64_t chunk_bytes = 1ull << 20;
  double ttl = 0;  ///< seconds since last access (0: never expire)
  /// lib/store's StoreConfig::clean_ahead_bytes: when write_back() or prefetch() plans, the
  /// DRAM entries the advisor would evict first, for this many bytes, get SSD copies of all their
  /// chunks written in the background, so that their demotion writes only what was appended since
  /// (0: off).
  uint64_t clean_ahead_bytes = 0;
  /// lib/store's StoreConfig::demote_ahead_bytes (HBM over DRAM): when write_back() or
  /// prefetch() plans and the HBM tier has less than this free (counting the demotions under
  /// way), the HBM entries the advisor would evict first are moved to DRAM in the background,
  /// on the device-to-host link; their HBM chunks are free once the copy lands, and a save
  /// short of HBM room waits for the demotions under way before it evicts (0: off).
  uint64_t demote_ahead_bytes = 0;
  /// lib/store's StoreConfig::save_admission: an append save that must make room in its base's
  /// tier, where the advisor would evict the base itself first, demotes the base and appends
  /// there.
  bool save_admission = false;
  /// lib/store's StoreConfig::drop_slow_demotions: a save's victim whose demotion to the SSD
  /// would keep the caller waiting (behind the SSD writes queued and its own) longer than
  /// recomputing it (set_recompute_estimate()) is dropped instead.
  bool drop_slow_demotions = false;
  std::shared_ptr<store::PlacementAdvisor> advisor;
  /// With an engine::PolicyAdvisor, draw victims from per-tier indexes kept in the policy's base
  /// order (policy::OrderSpec) instead of handing the advisor every candidate of the tier: a
  /// decision then costs O(look-ahead + victims), not O(entries). Same victims either way.
  bool indexed_decisions = true;
  /// Check every indexed decision against the advisor's (and the indexes against a scan of the
  /// entries); a difference throws cb::Error. For tests (eval's CACHEBENCH_SIM_VERIFY=1).
  bool verify_decisions = false;
  Link d2d, h2d, d2h, ssd_read, ssd_write;  ///< hbm, dram reads, saves, ssd reads, ssd writes
};

class SimStore {
 public:
  /// Entry shape: `layers` layers of `token_bytes` bytes per token for K (and as much for V).
  SimStore(SimStoreConfig cfg, int layers, uint64_t token_bytes);
  // Entries hold iterators into the candidate sets: a copy would point into this store's.
  SimStore(const SimStore&) = delete;
  SimStore& operator=(const SimStore&) = delete;

  struct Hit {
    bool hit = false;
    store::TierKind tier = store::TierKind::Dram;
    int64_t tokens = 0;
    double ready_at = 0;  ///< the entry's bytes are in place (a prefetch may be in flight)
    /// A save in flight writes its layers in order, from `ready_from` to `ready_at` (lib/store
    /// loads each layer once that layer is written); otherwise ready_from == ready_at.
    double ready_from = 0;
    /// When layer `layer` of `layers` is in place: the save's span shared evenly by its layers.
    double layer_ready(int layer, int layers) const {
      return ready_from + (ready_at - ready_from) * (layer + 1) / layers;
    }
  };
  /// Looks `session` up for a history of `history` tokens; a hit pins the entry until unpin().
  /// A save in flight counts (lib/store's SaveHandle::commit): `ready_at` is its commit time,
  /// `ready_from` when its last stage (the DRAM or the SSD write) starts moving bytes.
  Hit lookup(store::SessionId session, int64_t history, double now);
  void unpin(store::SessionId session);
  /// Layer transfer of `tokens` tokens from `tier` issued at `at`: completion time.
  double load_layer(store::TierKind tier, int64_t tokens, double at);
  /// Seconds one layer of `tokens` tokens takes from `tier` on an idle link.
  double layer_seconds(store::TierKind tier, int64_t tokens) const;
  /// Drops the entry and a save in flight (no-op when absent).
  void erase(store::SessionId session);
  /// Drops the oldest `drop` tokens (lib/store's rules: whole chunks in place, else a rewrite;
  /// nothing while a save of the session is in flight; an expired entry is dropped).
  void truncate(store::SessionId session, int64_t drop, double now);
  /// Saves `tokens` tokens issued at `now`, replacing the session's entry; returns the commit
  /// time, or a negative value when no tier had room. Until commit() the new entry's space is
  /// reserved but the entry is invisible, and the replaced one stays (lib/store's rule). `created`
  /// is when the session's entry first entered the store (FIFO's order); < 0: the replaced entry's,
  /// or `now` when there is none (lib/store's SaveRequest). As lib/store's SaveRequest::append,
  /// a save that extends the session's committed entry in the fastest tier reserves and writes
  /// only the chunks from the entry's last partial one on (the engines' histories always extend
  /// the entry); `replace_now` drops the entry first when the save does not append to it.
  /// Throws cb::Error for a session id with store::kCopyCandidate's bit set.
  double save(store::SessionId session, int64_t tokens, double now, double created = -1,
              bool replace_now = false, bool append = true);
  /// When the caller of the last save() or truncate() gets its thread back: lib/store's
  /// begin_save lets the saves in flight land before it evicts and copies its victims to the
  /// lower tier on the caller's thread, and an unaligned truncate rewrites the entry and waits
  /// for its commit. The engines count the wait as save stall.
  double caller_blocked_until() const { return blocked_until_; }
  /// Tokens the session's save in flight did not write (what an append shares).
  int64_t shared_tokens(store::SessionId session) const;
  /// Makes a saved entry visible (its commit time has passed).
  void commit(store::SessionId session);
  /// The scheduler's look-ahead changed: plan and start prefetches (SSD -> DRAM).
  void prefetch(const std::vector<store::SessionId>& lookahead, double now);
  /// The last prefetch() plan had a fetch that found no room, and since then a save landed, an
  /// entry left or a move landed, so room may be found now: the engines plan again with the
  /// same look-ahead, retry_prefetch() (lib/store's prefetch_retry_due).
  bool prefetch_retry_due() const { return fetch_blocked_ && changes_ != changes_at_block_; }
  /// prefetch() again with the last look-ahead.
  void retry_prefetch(double now) { prefetch(std::vector<store::SessionId>(lookahead_), now); }
  /// The last prefetch() plan had a fetch that found no room.
  bool prefetch_blocked() const { return fetch_blocked_; }
  /// lib/store's write_back(): plans write-backs ahead of eviction when an entry was saved or
  /// demoted since the last plan (prefetch() plans too).
  void write_back(double now);
  /// Retires in-flight moves finished by `now`.
  void advance(double now);
  /// Seconds a prefill of `tokens` tokens from nothing takes (lib/store's
  /// set_recompute_estimate; SimEngine installs its cost model's). Empty: nothing is dropped.
  void set_recompute_estimate(std::function<double(int64_t tokens)> seconds) {
    recompute_s_ = std::move(seconds);
  }

  /// Per-tier totals for the run's summary.
  std::vector<metrics::TierTotals> tier_totals() const;
  uint64_t entry_bytes(int64_t tokens) const { return chunks_for(tokens) * cfg_.chunk_bytes; }
  int64_t entries() const { return static_cast<int64_t>(index_.size()); }
  /// SSD chunks held by prefetched entries' copies, and chunks demotions did not rewrite
  /// because a copy held them (lib/store's ssd_copy_bytes and ssd_copy_chunks_reused).
  uint64_t ssd_copy_chunks() const;
  uint64_t copy_reused_chunks() const { return copy_reused_chunks_; }
  /// SSD chunks written ahead of eviction (lib/store's ssd_chunks_cleaned).
  uint64_t cleaned_chunks() const { return cleaned_chunks_; }
  /// Append saves whose base save admission demoted (lib/store's saves_admitted_below).
  uint64_t admitted_below() const { return admitted_below_; }
  /// Victims the demotion budget dropped (lib/store's slow_demotions_dropped).
  uint64_t slow_dropped() const { return slow_dropped_; }
  /// Entries fetched from the SSD into DRAM, and prefetch plans one of whose fetches found no
  /// room, the rest of the plan skipped (lib/store's prefetches and prefetch_failures).
  uint64_t prefetches() const { return prefetches_; }
  /// HBM entries demoted ahead of need (lib/store's demotions_ahead).
  uint64_t demoted_ahead() const { return demoted_ahead_; }
  uint64_t prefetch_failures() const { return prefetch_failures_; }

 private:
  /// A candidate in a tier's index: an entry that may move, or (SSD) an entry's copy under
  /// its id | store::kCopyCandidate. Ordered by the policy's base order, then the id.
  struct Cand {
    int64_t a = 0, b = 0;  ///< LRU: last access, creation; FIFO: creation, 0 (policy ticks)
    store::SessionId id = 0;
    uint64_t chunks = 0;
    bool operator<(const Cand& o) const {
      if (a != o.a) return a < o.a;
      if (b != o.b) return b < o.b;
      return id < o.id;
    }
  };
  struct Entry {
    store::SessionId session = 0;
    store::TierKind tier = store::TierKind::Dram;
    int64_t tokens = 0;
    uint64_t chunks = 0;
    double created = 0;      ///< first insertion of the session's entry (kept by re-saves)
    double last_access = 0;  ///< last save or lookup
    uint64_t accesses = 0;
    int pins = 0;
    double moving_until = -1;  ///< a move (prefetch) in flight until then
    bool demoting = false;     ///< the move is a demotion ahead of need (from HBM), not a fetch
    double commit_at = 0;      ///< a save in flight: when its commit lands
    double write_from = 0;     ///< and when its last stage starts moving bytes
    /// A save in flight: leading tokens it shares with the entry it extends (it takes over
    /// that entry's chunks_for(shared_tokens) chunks) and does not write.
    int64_t shared_tokens = 0;
    /// lib/store's StoreEntry::ssd_copy: a prefetched entry keeps `copy_chunks` SSD chunks,
    /// of which token chunks [0, copy_valid) (of every layer, K and V) still hold its bytes.
    uint64_t copy_chunks = 0, copy_valid = 0;
    double clean_until = -1;  ///< a copy written ahead of eviction lands then
    double clean_start = -1;  ///< and starts being written then (queued behind others before)
    /// A save in flight admitted to the SSD (save_below): its `shared_tokens` are chunks it
    /// took from the base's SSD copy and owns, not the base's.
    bool from_copy = false;
    bool copy_lent = false;  ///< save_below's base while it makes room: its copy stays
    /// What sync() last put in the indexes for this entry (indexed decisions).
    bool in_cands = false, copy_in_cands = false;
    int cand_tier = 0;
    std::set<Cand>::iterator cand, copy_cand;
  };
  /// save() once the caller is blocked (from blocked_until_).
  double save_blocking(store::SessionId session, int64_t tokens, double created, bool replace_now,
                       bool append);
  /// save()'s append attempt (lib/store's try_append): the commit time, or < 0.
  double try_append(store::SessionId session, int64_t tokens, double now, double t_access,
                    double created);
  /// try_append's admission (lib/store's admits_below): whether `session`'s DRAM entry, pinned
  /// by the append, is the advisor's first victim when DRAM lacks room for the `new_chunks`
  /// chunks the append would reserve (saves in flight land first, as reserve() settles).
  bool admits_below(store::SessionId session, uint64_t new_chunks, double now);
  /// The admitted save (lib/store's save_below): written to the SSD (making room there as a
  /// demotion does, without settling), taking the whole chunks the base's SSD copy holds; the
  /// base and the rest of its copy go at once. The commit time, or < 0 (no room: nothing changed).
  double save_below(store::SessionId session, int64_t tokens, double created, double t_access);
  /// A save in flight whose space is reserved: its write of the tokens past `shared_tokens`
  /// starts when the caller is back (blocked_until_); returns its commit time.
  double start_pending(store::SessionId session, store::TierKind tk, int64_t tokens,
                       int64_t shared_tokens, double created, double t_access);
  /// Reserves the write of `bytes` to tier `t` issued at `now`; returns its completion time,
  /// and in `*started` when its last stage (the SSD write of an SSD save) starts moving.
  double write(store::TierKind t, double bytes, double now, double* started);
  uint64_t chunks_for(int64_t tokens) const;
  double payload_bytes(int64_t tokens) const;  ///< K and V of every layer, unpadded
  /// payload_bytes of the tokens past the first `chunks` token chunks (what a copy lacks).
  double payload_past(int64_t tokens, uint64_t chunks) const;
  store::EntryInfo info(const Entry& e) const;
  bool present(store::TierKind t) const { return cap_[static_cast<int>(t)] > 0; }
  /// `settle`: lib/store's begin_save lets the saves in flight land before it chooses victims
  /// (here they commit at once; a save's caller waits until the last of them lands).
  bool reserve(store::TierKind t, uint64_t n, bool use_reserve, double now, bool settle = false);
  /// Commits the saves in flight that tier `t`'s candidates or room depend on: those writing to
  /// `t`, and those replacing an entry in `t` (lib/store's settle in reserve()).
  void settle(store::TierKind t);
  /// `blocking`: a save's victim (reserve()'s `settle`), where the demotion budget holds and
  /// whose room in DRAM is reserved settling DRAM first (lib/store's evict).
  void evict(store::SessionId s, bool drop, double now, bool blocking);
  Link& read_link(store::TierKind t);
  void erase_committed(store::SessionId session);
  void drop_pending(store::SessionId session);  ///< a save in flight, its space freed  ///< the
                                                ///< visible entry only
  /// `tier`: where the load reads from (the entry's tier, or the SSD for an entry whose
  /// prefetch is still in flight).
  Hit pin_hit(Entry& e, double now, double ready_at, store::TierKind tier, double ready_from = -1);
  /// An access time for now, at least a microsecond (the policies' tick) after every earlier
  /// one: on the virtual clock several operations share a time, while lib/store's clock
  /// orders them as they happen (LRU and FIFO ties).
  double stamp(double now);  ///< pins and counts a hit on `e`
  bool movable(const Entry& e) const { return e.pins == 0 && e.moving_until < 0; }
  /// Frees `e`'s SSD copy (lib/store's drop_copy_locked).
  void drop_copy(Entry& e);
  /// lib/store's plan_cleaning_locked and clean_one: copies of the DRAM entries the advisor
  /// would evict first, for clean_ahead_bytes, into free SSD space (never evicting for it),
  /// issued now on the SSD write link.
  void clean_ahead(double now);
  /// lib/store's plan_demotions_locked and demote_ahead: the HBM entries the advisor would
  /// evict first, until demote_ahead_bytes of HBM are free or being freed, moved to DRAM
  /// (or dropped) from now on.
  void demote_ahead(double now);
  /// Frees the HBM chunks of the demotions ahead of need that land by `until` (all of them
  /// when `until` is infinite).
  void land_demotions(double until);

  // The decisions (sim_store_index.cc).
  /// The advisor's victims among tier `t`'s candidates (its movable entries; on the SSD also the
  /// copies, store::kCopyCandidate; `force`, pinned or not, as well) for `needed` bytes.
  std::vector<store::Victim> choose_victims(store::TierKind t, uint64_t needed, double now,
                                            const Entry* force = nullptr);
  /// choose_victims from the indexes (the advisor's order_spec).
  std::vector<store::Victim> indexed_victims(store::TierKind t, uint64_t needed,
                                             const Entry* force);
  /// The candidates choose_victims hands the advisor without indexes.
  std::vector<store::EntryInfo> scan_candidates(store::TierKind t, const Entry* force) const;
  /// Throws cb::Error unless tier `t`'s index holds exactly what scan_candidates finds.
  void verify_index(store::TierKind t) const;
  Cand make_cand(const Entry& e, bool copy) const;
  /// The position of `session`'s first job in lookahead_, or SIZE_MAX.
  size_t first_pos(store::SessionId session);
  /// Puts the committed entry `e` (no-op for a save in flight) in the indexes as it is now;
  /// called after every change of its tier, pins, move, access times, chunks or copy.
  void sync(Entry& e);
  /// Takes `e` out of the indexes.
  void unindex(Entry& e);

  SimStoreConfig cfg_;
  int layers_;
  uint64_t token_bytes_, tpc_;
  uint64_t cap_[3] = {0, 0, 0}, free_[3] = {0, 0, 0}, reserve_chunks_ = 0;
  void set_tier(Entry& e, store::TierKind t);
  std::unordered_map<store::SessionId, Entry> index_;
  std::unordered_map<store::SessionId, Entry> pending_;  // saved, not yet committed
  std::unordered_set<store::SessionId> in_tier_[3];      // so a tier's decision scans only it
  std::unordered_set<store::SessionId> with_copy_;       // entries holding an SSD copy
  std::vector<store::SessionId> lookahead_, moving_;
  engine::PolicyAdvisor* indexed_ = nullptr;  ///< the advisor, when decisions use the indexes
  policy::OrderSpec::Base base_ = policy::OrderSpec::Base::kLru;
  std::set<Cand> cands_[3];
  uint64_t cand_chunks_[3] = {0, 0, 0};
  /// The copy candidates' share of cands_[2] (their chunks, their number): the SSD's entries
  /// are the rest (the prefetch window's mean entry size).
  uint64_t copy_cand_chunks_ = 0, copy_cands_ = 0;
  /// first_pos()'s table of lookahead_, built on the first windowed decision after the
  /// look-ahead changes.
  struct PosSlot {
    uint64_t epoch = 0;
    store::SessionId session = 0;
    size_t pos = 0;
  };
  std::vector<PosSlot> pos_table_;
  size_t pos_mask_ = 0;
  uint64_t pos_epoch_ = 0;
  bool first_pos_stale_ = true;
  double last_stamp_ = -HUGE_VAL;
  bool blocking_ = false;        ///< inside a save() or truncate() call: evictions block it
  bool write_back_due_ = false;  ///< see write_back()
  double blocked_until_ = 0;     ///< see caller_blocked_until()
  /// When the demotions evict() issued since prefetch() reset it are written: a fetch reads
  /// the SSD only once the room it made is free (lib/store's fetch task demotes its victims,
  /// then copies).
  double room_at_ = 0;
  uint64_t hits_[3] = {0, 0, 0};
  double bytes_read_[3] = {0, 0, 0}, bytes_written_[3] = {0, 0, 0};
  uint64_t copy_reused_chunks_ = 0, cleaned_chunks_ = 0, admitted_below_ = 0, slow_dropped_ = 0;
  uint64_t prefetches_ = 0, prefetch_failures_ = 0, demoted_ahead_ = 0;
  /// Saves landed or dropped, entries erased or evicted, moves landed (prefetch_retry_due()).
  uint64_t changes_ = 0, changes_at_block_ = 0;
  bool fetch_blocked_ = false;  ///< the last prefetch plan stopped at a fetch without room
  /// Demotions ahead of need in flight: when each lands, and the HBM chunks it then frees.
  std::vector<std::pair<double, uint64_t>> demoting_;
  std::function<double(int64_t)> recompute_s_;
  double read_s_[3] = {0, 0, 0}, write_s_[3] = {0, 0, 0};
};

}  // namespace cb::sim
