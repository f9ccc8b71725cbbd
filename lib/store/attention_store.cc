#include "lib/store/attention_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <utility>

#include "lib/core/error.h"
#include "lib/core/sysinfo.h"
#include "lib/store/bandwidth_limiter.h"
#include "lib/store/journal.h"
#include "lib/store/memory_tier.h"
#include "lib/store/size_parse.h"
#include "lib/store/ssd_tier.h"
#include "lib/store/store_dir.h"
#include "lib/store/store_internal.h"
#include "lib/store/thread_pool.h"
#include "lib/store/tier.h"

namespace cb::store {

const char* lookup_status_name(LookupStatus s) {
  switch (s) {
    case LookupStatus::Hit: return "hit";
    case LookupStatus::NotFound: return "not_found";
    case LookupStatus::FingerprintMismatch: return "fingerprint_mismatch";
    case LookupStatus::HistoryMismatch: return "history_mismatch";
    case LookupStatus::Expired: return "expired";
  }
  return "unknown";
}

AttentionStore::AttentionStore(StoreConfig cfg) : cfg_(std::move(cfg)) {
  if (!cfg_.clock) {
    const auto t0 = std::chrono::steady_clock::now();
    cfg_.clock = [t0] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
  }
  if (!cfg_.advisor) cfg_.advisor = std::make_shared<LruAdvisor>();
  if (cfg_.store_dir.empty() && cfg_.ssd_bytes > 0) {
    throw make_error("--ssd", "an SSD budget needs a store directory", "pass --store-dir DIR");
  }
  journal_compact_bytes_ = cfg_.journal_compact_bytes;  // open_ssd may lower it
  if (!cfg_.store_dir.empty()) open_ssd();              // may adopt the store's chunk size
  check_chunk_bytes(cfg_.chunk_bytes);
  check_tier_budget("--hbm", cfg_.hbm_bytes, cfg_.chunk_bytes);
  check_tier_budget("--dram", cfg_.dram_bytes, cfg_.chunk_bytes);
  // Both memory tiers live in host memory (the HBM tier too: design.md); compared without
  // adding them, which could wrap past 2^64.
  const uint64_t phys = physical_memory_bytes();
  if (phys > 0 && (cfg_.dram_bytes > phys || cfg_.hbm_bytes > phys - cfg_.dram_bytes)) {
    // The option whose budget alone is too large, else both (each fits, the sum does not).
    const bool alone = cfg_.dram_bytes > phys || cfg_.hbm_bytes > phys;
    const char* name = !alone ? "--dram/--hbm" : cfg_.dram_bytes > phys ? "--dram" : "--hbm";
    const uint64_t one = cfg_.dram_bytes > phys ? cfg_.dram_bytes : cfg_.hbm_bytes;
    const std::string what = alone ? "the budget (" + format_size(one) + ") exceeds"
                                   : "the DRAM and HBM budgets together (" +
                                         format_size(cfg_.dram_bytes + cfg_.hbm_bytes) + ") exceed";
    throw make_error(
        name, what + " this machine's memory (" + format_size(phys) + "), which holds both tiers",
        alone ? std::string("lower ") + name : "lower --dram or --hbm");
  }
  if (cfg_.dram_reserve_bytes > cfg_.dram_bytes) {
    throw make_error("--dram-reserve", "reserve " + format_size(cfg_.dram_reserve_bytes) +
                                           " exceeds the DRAM budget " +
                                           format_size(cfg_.dram_bytes));
  }
  if (cfg_.hbm_bytes > 0) {
    tiers_[0] = std::make_unique<MemoryTier>(TierKind::Hbm, cfg_.hbm_bytes, cfg_.chunk_bytes);
  }
  if (cfg_.dram_bytes > 0) {
    tiers_[1] = std::make_unique<MemoryTier>(TierKind::Dram, cfg_.dram_bytes, cfg_.chunk_bytes);
    reserve_chunks_ = (cfg_.dram_reserve_bytes + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes;
  }
  if (!tiers_[0] && !tiers_[1] && !tiers_[2]) {
    throw make_error("store", "no tier has a budget", "give --dram and/or --ssd with --store-dir");
  }
  pool_ = std::make_unique<ThreadPool>(cfg_.io_threads);
  load_pool_ = std::make_unique<ThreadPool>(cfg_.io_threads);
  compact_pool_ = std::make_unique<ThreadPool>(1);
  for (int t = 0; t < kNumTiers; ++t) {
    if (cfg_.read_gbps[t] < 0 || cfg_.write_gbps[t] < 0) {
      throw make_error("AttentionStore",
                       "negative emulated bandwidth for tier " +
                           std::string(tier_name(static_cast<TierKind>(t))),
                       "use 0 for an unthrottled tier");
    }
    limit_[t][0] = std::make_unique<BandwidthLimiter>(cfg_.read_gbps[t]);
    limit_[t][1] = std::make_unique<BandwidthLimiter>(cfg_.write_gbps[t]);
  }
}

AttentionStore::~AttentionStore() {
  load_pool_.reset();  // finishes queued work first
  pool_.reset();
  compact_pool_.reset();  // last: the write pool's commits may start a compaction
  std::lock_guard<std::mutex> g(mu_);
  if (journal_stale_) compact_journal_locked(nullptr);  // a last try for a missing erase
}

void AttentionStore::open_ssd() {
  const std::string& dir = cfg_.store_dir;
  check_store_dir(dir);
  dir_lock_ = StoreDirLock(dir);
  StoreDirInfo info;
  bool created = false;
  // Any marker there is read, one that is not a regular file (a FIFO) too, which reading
  // refuses: taken for no marker, it would have a new store's marker written into it (and
  // block).
  struct stat marker {};
  if (::stat(marker_path(dir).c_str(), &marker) == 0) {
    info = read_store_marker(dir);
    if (cfg_.ssd_bytes != 0) {
      const StoreDirInfo want = plan_store(cfg_.ssd_bytes, cfg_.chunk_bytes);
      if (want.ssd_bytes != info.ssd_bytes || want.chunk_bytes != info.chunk_bytes) {
        throw make_error(
            dir,
            "store was created with --ssd " + format_size(info.ssd_bytes) + " and chunk " +
                format_size(info.chunk_bytes) + ", not " + format_size(want.ssd_bytes) + " and " +
                format_size(want.chunk_bytes),
            "reuse the original sizes or run `cachebench store clear --store-dir " + dir + "`");
      }
    }
    cfg_.chunk_bytes = info.chunk_bytes;
    check_store_files(dir, info);
  } else {
    if (cfg_.ssd_bytes == 0) {
      throw make_error(dir, "not a cachebench store", "give --ssd SIZE to create one here");
    }
    // A journal or data file without the marker is a store whose marker was lost: creating
    // one here would wipe its index.
    for (const std::string& f : {journal_path(dir), data_file_path(dir, 0)}) {
      if (::access(f.c_str(), F_OK) == 0) {
        throw make_error(dir, "holds a store's " + f + " but no marker (cachebench_store.json)",
                         "run `cachebench store clear --store-dir " + dir +
                             "` to start over, or restore the marker");
      }
    }
    info = plan_store(cfg_.ssd_bytes, cfg_.chunk_bytes);
    if (info.n_slots() == 0) {
      throw make_error("--ssd", "SSD budget " + format_size(cfg_.ssd_bytes) +
                                    " is smaller than one chunk (" + format_size(cfg_.chunk_bytes) +
                                    ")");
    }
    // The journal grows beside the data files until it is compacted, and a compaction writes
    // the new one before the old goes: on a file system with little left, saves would fail
    // for the journal's room, not the data's.
    const uint64_t room = check_free_space(dir, info.ssd_bytes) - info.ssd_bytes;
    journal_compact_bytes_ =
        fit_journal_compaction(dir, room, info.ssd_bytes, journal_compact_bytes_);
    if (info.n_slots() > kMaxStoreSlots) {  // read_store_marker would refuse it
      throw make_error("--ssd",
                       "SSD budget " + format_size(info.ssd_bytes) + " is " +
                           std::to_string(info.n_slots()) + " chunks of " +
                           format_size(info.chunk_bytes) + ", more than the " +
                           std::to_string(kMaxStoreSlots) + " a store holds",
                       "use a larger --chunk-size");
    }
    created = true;
  }
  std::shared_ptr<IoBackend> io = cfg_.io_backend;
  if (!io) {
    std::string why;
    if (cfg_.io_mode != IoMode::Pread) io = make_uring_backend(64, &why);
    if (!io && cfg_.io_mode == IoMode::Uring) {
      throw make_error("--io uring", "io_uring is unavailable: " + why, "use --io pread");
    }
    if (!io) io = make_pread_backend();
  }
  bool journal_made = false;
  try {
    // The journal (its start record) first: a store with a marker always has one, so a later
    // one missing or emptied is loss, not a store that never saved; and before the data files,
    // so that a process killed while it preallocates them leaves a store `store clear` (and a
    // later replay's sweep of its scratch directory) recognises by its journal.
    if (created) Journal::rewrite(journal_path(dir), {});
    journal_made = created;
    tiers_[2] = std::make_unique<SsdTier>(dir, info, io, cfg_.direct_io, created);
    if (created) write_store_marker(dir, info);
  } catch (...) {
    // Only what this store made goes (a failed SsdTier removed the files it made).
    if (created && tiers_[2]) {
      tiers_[2].reset();
      for (uint64_t i = 0; i < info.n_files; ++i) ::unlink(data_file_path(dir, i).c_str());
    }
    if (journal_made) ::unlink(journal_path(dir).c_str());
    throw;
  }
  recover(info.version);
  if (info.version < kStoreVersion) {  // its journal is now rewritten: start and end records
    info.version = kStoreVersion;
    write_store_marker(dir, info);
  }
}

void AttentionStore::recover(int marker_version) {
  const std::string path = journal_path(cfg_.store_dir);
  ReplayResult r = Journal::replay(path);
  stats_.add(Counter::DiscardedRecords, r.discarded_records);
  stats_.add(Counter::CorruptJournalBytes, r.corrupt_bytes);
  if (journal_lost(r, marker_version)) stats_.add(Counter::JournalLost);
  if (journal_cut(r, marker_version)) stats_.add(Counter::JournalCut);
  if (r.corrupt_bytes > 0) {
    // Records were lost (not a torn tail): keep the journal as it was before compacting it,
    // for whoever investigates (`store verify` reports it).
    std::error_code ec;
    std::filesystem::copy_file(path, free_corrupt_journal_path(cfg_.store_dir), ec);
    if (ec) {
      throw make_error(path, "journal is corrupt and a copy could not be kept: " + ec.message(),
                       "check free space and permissions of the store directory");
    }
  }
  uint64_t dropped = 0;
  std::map<SessionId, EntryMeta> live =
      recoverable_entries(&r, cfg_.chunk_bytes, &tier(TierKind::Ssd)->allocator(), &dropped);
  stats_.add(Counter::DiscardedEntries, dropped);
  // The journal's times are the clock of the process that wrote them (steady time since its
  // store opened, by default): shift them onto this one's, the newest access now, so that
  // TTLs and the LRU/FIFO order go on from where they were instead of from the old uptime.
  // (Time while no process had the store open does not count.)
  if (!live.empty()) {
    double newest = -HUGE_VAL;
    for (const auto& [id, m] : live) newest = std::max({newest, m.last_access, m.created});
    const double shift = now() - newest;
    for (auto& [id, m] : live) {
      m.last_access += shift;
      m.created += shift;
    }
  }
  Journal::rewrite(path, live);           // compaction: one commit per live entry
  ::unlink((path + ".compact").c_str());  // an online compaction's, cut short by a crash
  journal_ = std::make_unique<Journal>(path, cfg_.journal_sync);
  next_generation_ = r.max_generation + 1;
  for (auto& [id, m] : live) {
    auto e = std::make_shared<StoreEntry>();
    e->meta = std::move(m);
    e->tier = TierKind::Ssd;
    index_[id] = e;
  }
  stats_.add(Counter::RecoveredEntries, index_.size());
}

double AttentionStore::now() const {
  return cfg_.clock() + skipped_s_.load(std::memory_order_relaxed);
}

void AttentionStore::skip_time(double seconds) {
  if (!(seconds > 0)) return;
  double cur = skipped_s_.load(std::memory_order_relaxed);
  while (!skipped_s_.compare_exchange_weak(cur, cur + seconds, std::memory_order_relaxed)) {
  }
}

LookupStatus AttentionStore::classify(const StoreEntry& e, const LookupKey& key,
                                      int64_t* matched) const {
  *matched = 0;
  if (e.meta.fingerprint != key.fingerprint || e.meta.encoding != key.encoding ||
      (key.shape.n_layers > 0 && !(e.meta.shape == key.shape))) {
    return LookupStatus::FingerprintMismatch;
  }
  if (e.meta.ttl > 0 && now() - e.meta.last_access > e.meta.ttl) return LookupStatus::Expired;
  *matched = e.meta.matching_prefix(key.history);
  return *matched > 0 ? LookupStatus::Hit : LookupStatus::HistoryMismatch;
}

AttentionStore::EntryPtr AttentionStore::visible_locked(SessionId session,
                                                        std::shared_ptr<SaveState>* save) const {
  auto fl = in_flight_.find(session);
  if (fl != in_flight_.end()) {
    if (save) *save = fl->second;
    return fl->second->entry;
  }
  auto it = index_.find(session);
  return it == index_.end() ? nullptr : it->second;
}

LookupResult AttentionStore::lookup(const LookupKey& key) {
  std::lock_guard<std::mutex> g(mu_);
  LookupResult r;
  const EntryPtr ep = visible_locked(key.session, nullptr);
  if (!ep) return r;
  const StoreEntry& e = *ep;
  r.status = classify(e, key, &r.matched_tokens);
  r.tier = e.tier;
  r.entry_tokens = e.meta.n_tokens();
  r.shape = e.meta.shape;
  return r;
}

void AttentionStore::release_locked(const EntryPtr& e, TierKind t, std::vector<uint64_t> slots) {
  if (slots.empty()) return;
  if (e->pins > 0) {
    e->retired.emplace_back(t, std::move(slots));
  } else {
    free_slots_locked(&e->lender, t, std::move(slots));
  }
}

void AttentionStore::free_slots_locked(EntryPtr* lender, TierKind t, std::vector<uint64_t> slots) {
  skip_idle_lenders(lender);
  if (*lender) {
    (*lender)->retired.emplace_back(t, std::move(slots));
  } else {
    // An erase record a power loss took would bring the erased entry back over the bytes a
    // save writes into its slots (its checksums would catch that, but verify would report
    // corruption): the records appended without a sync are synced before the slots go.
    // A broken journal (a sync failed) is rewritten from the index first.
    if (t == TierKind::Ssd && journal_ != nullptr) {
      if (journal_->broken()) {
        journal_stale_ = !compact_journal_locked(nullptr);
      } else if (!journal_->sync_appended()) {
        stats_.add(Counter::IoErrors);
        note_io_error(journal_->last_error());
        journal_stale_ = !compact_journal_locked(nullptr);
      }
      if (journal_stale_) {  // the journal cannot be made to forget their entry yet
        quarantined_ssd_.insert(quarantined_ssd_.end(), slots.begin(), slots.end());
        return;
      }
    }
    tier(t)->allocator().release(slots);
    ++changes_;  // room: a fetch that found none may find it now (prefetch_retry_due)
  }
}

void AttentionStore::drop_copy_locked(const EntryPtr& e) {
  if (e->ssd_copy.empty()) return;
  release_locked(e, TierKind::Ssd, std::move(e->ssd_copy));
  e->ssd_copy.clear();
  e->copy_nt = e->copy_valid = 0;
}

void AttentionStore::unlink_locked(const EntryPtr& e) {
  ++changes_;
  drop_copy_locked(e);
  if (e->in_flight) {  // its save owns the slots: the commit sees `doomed` and frees them
    auto fl = in_flight_.find(e->meta.session);
    if (fl != in_flight_.end() && fl->second->entry == e) in_flight_.erase(fl);
    e->doomed = true;
    e->in_flight = false;
    e->meta.slots.clear();  // still the save's (finish_save frees them): never released here
    return;
  }
  auto it = index_.find(e->meta.session);
  if (it != index_.end() && it->second == e) index_.erase(it);
  e->doomed = true;
  if (e->tier == TierKind::Ssd) journal_erase_locked(e->meta.session);
  release_locked(e, e->tier, std::move(e->meta.slots));
  e->meta.slots.clear();
}

void AttentionStore::unpin(const EntryPtr& e) {
  std::lock_guard<std::mutex> g(mu_);
  unpin_locked(e);
}

void AttentionStore::unpin_locked(const EntryPtr& e) {
  if (e->pins <= 0) {  // a bug: an unpin without its pin (counted; the count stays at 0)
    ++pin_errors_;
    return;
  }
  if (--e->pins == 0) {
    auto retired = std::move(e->retired);
    e->retired.clear();
    for (auto& [t, slots] : retired) free_slots_locked(&e->lender, t, std::move(slots));
  }
  move_cv_.notify_all();
}

void AttentionStore::drop_corrupt(const EntryPtr& e, const std::string& why) {
  std::lock_guard<std::mutex> g(mu_);
  if (e->doomed) return;
  std::fprintf(stderr, "cachebench store: session %llu failed verification in %s%s%s%s; dropped\n",
               static_cast<unsigned long long>(e->meta.session), tier_name(e->tier),
               why.empty() ? "" : " (", why.c_str(), why.empty() ? "" : ")");
  stats_.add(e->tier, TierCounter::Drops);
  unlink_locked(e);
}

std::string AttentionStore::chunk_problem(const EntryMeta& m, TierKind t, uint64_t index,
                                          const std::string& what) const {
  const uint64_t nt = m.n_token_chunks();
  std::string s = "chunk " + std::to_string(index);
  if (nt > 0) {
    s += " (layer " + std::to_string(index / (2 * nt)) + ", " + ((index / nt) % 2 ? "V" : "K") +
         ", token chunk " + std::to_string(index % nt) + ")";
  }
  if (index < m.slots.size() && tier(t) != nullptr) s += " at " + tier(t)->locate(m.slots[index]);
  return s + ": " + what;
}

std::string AttentionStore::failed_op_problem(const EntryMeta& m, TierKind t, const ChunkIo* ops,
                                              size_t n,
                                              const std::function<uint64_t(size_t)>& index) const {
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].error != 0) {
      return chunk_problem(m, t, index(i),
                           std::string("cannot read it: ") + std::strerror(ops[i].error));
    }
  }
  return "cannot read it";
}

void AttentionStore::note_io_error(const std::string& what) {
  std::lock_guard<std::mutex> g(io_error_mu_);
  if (first_io_error_.empty()) first_io_error_ = what;
}

std::string AttentionStore::first_io_error() const {
  std::lock_guard<std::mutex> g(io_error_mu_);
  return first_io_error_;
}

bool AttentionStore::sync_ssd(const std::vector<uint64_t>& slots) {
  std::string why;
  if (tier(TierKind::Ssd)->sync(slots, &why)) return true;
  stats_.add(Counter::IoErrors);
  note_io_error(why);
  return false;
}

bool AttentionStore::journal_commit(EntryMeta* m) {
  m->generation = next_generation_++;
  // A journal left broken by a failed sync refuses appends until it is rewritten from the
  // index (Journal::commit): that rewrite, with this commit in it, is the commit.
  if (journal_->broken()) {
    journal_stale_ = !compact_journal_locked(m);  // a failure counted there
    return !journal_stale_;
  }
  if (!journal_->commit(*m, true)) {
    stats_.add(Counter::IoErrors);  // the compaction below, its retry, counts its own failure
    note_io_error(journal_->last_error());
    if (!journal_->broken()) return false;  // cut off cleanly: the journal is as it was
    journal_stale_ = !compact_journal_locked(m);
    return !journal_stale_;
  }
  if (journal_stale_) {
    journal_stale_ = !compact_journal_locked(m);
  } else if (journal_->appended_bytes() > std::max(journal_compact_bytes_, compact_after_)) {
    start_compaction_locked(*m);
  }
  return true;
}

void AttentionStore::start_compaction_locked(const EntryMeta& extra) {
  if (compacting_) return;
  compacting_ = true;
  // The SSD entries the records so far must hold, each at the generation of its last commit,
  // with the access times the index has for them (loads change those without a record): a
  // compaction from the index would write these.
  struct Want {
    uint64_t generation;
    double last_access, created;
  };
  auto want = std::make_shared<std::unordered_map<SessionId, Want>>();
  for (const auto& [id, e] : index_) {
    if (e->tier == TierKind::Ssd) {
      (*want)[id] = {e->meta.generation, e->meta.last_access, e->meta.created};
    }
  }
  (*want)[extra.session] = {extra.generation, extra.last_access, extra.created};
  const Journal::Mark at = journal_->mark();
  compact_pool_->post([this, at, want] {
    std::string why;
    Journal::Compaction r;
    try {
      r = journal_->compact_from(
          at,
          [&](std::map<SessionId, EntryMeta>* live) {
            if (live->size() != want->size()) return false;
            for (auto& [id, m] : *live) {
              auto it = want->find(id);
              if (it == want->end() || it->second.generation != m.generation) return false;
              m.last_access = it->second.last_access;
              m.created = it->second.created;
            }
            return true;
          },
          &why);
    } catch (const std::exception& e) {  // out of memory for a large journal
      r = Journal::Compaction::Failed;
      why = journal_path(cfg_.store_dir) + ": cannot compact: " + e.what();
    }
    std::lock_guard<std::mutex> g(mu_);
    compacting_ = false;
    compact_after_ = 0;
    if (r == Journal::Compaction::Done) {
      stats_.add(Counter::JournalCompactions);
    } else if (r == Journal::Compaction::Failed) {
      stats_.add(Counter::IoErrors);
      note_io_error(why);
      // Not again before another quarter of the threshold was appended: each try reads,
      // replays and writes the whole journal.
      compact_after_ = journal_->appended_bytes() + journal_compact_bytes_ / 4;
    } else if (r == Journal::Compaction::Unclean && !journal_stale_) {
      // The records are unreadable, damaged on the disk since they were written, or not what
      // the index holds: only a compaction from the index makes the journal whole again.
      journal_stale_ = !compact_journal_locked(nullptr);
    }
  });
}

bool AttentionStore::compact_journal_locked(const EntryMeta* extra) {
  // The live SSD set: entries on SSD now, plus `extra`, which the caller is about to publish.
  std::map<SessionId, EntryMeta> live;
  for (const auto& [id, e] : index_) {
    if (e->tier == TierKind::Ssd) live[id] = e->meta;
  }
  if (extra != nullptr) live[extra->session] = *extra;
  if (!journal_->compact(live)) {
    stats_.add(Counter::IoErrors);
    note_io_error(journal_->last_error());
    return false;
  }
  stats_.add(Counter::JournalCompactions);
  stats_.add(Counter::JournalIndexCompactions);
  // The journal now names the live entries alone: slots held back while it named erased ones
  // may be reused.
  if (!quarantined_ssd_.empty()) {
    tier(TierKind::Ssd)->allocator().release(quarantined_ssd_);
    quarantined_ssd_.clear();
    ++changes_;
  }
  return true;
}

void AttentionStore::journal_erase_locked(SessionId session) {
  // The record first (a few bytes may fit where a rewrite of the journal does not); a
  // compaction when it failed, or when an earlier record is still missing.
  const bool refused = journal_->broken();  // no I/O: appends wait for a compaction
  // Not synced here: free_slots_locked syncs it before the entry's SSD slots are reused.
  const bool appended = journal_->erase(session, next_generation_++, false);
  if (!appended && !refused) {
    stats_.add(Counter::IoErrors);
    note_io_error(journal_->last_error());
  }
  if (appended && !journal_stale_) return;
  journal_stale_ = !compact_journal_locked(nullptr);
}

bool AttentionStore::erase(SessionId session) {
  std::lock_guard<std::mutex> g(mu_);
  bool found = false;
  auto fl = in_flight_.find(session);
  if (fl != in_flight_.end()) {
    unlink_locked(EntryPtr(fl->second->entry));
    found = true;
  }
  auto it = index_.find(session);
  if (it != index_.end()) {
    unlink_locked(EntryPtr(it->second));
    found = true;
  }
  if (!found) return false;
  stats_.add(Counter::Erases);
  move_cv_.notify_all();
  return true;
}

size_t AttentionStore::expire() {
  std::lock_guard<std::mutex> g(mu_);
  const double t = now();
  std::vector<EntryPtr> dead;
  for (auto& [id, e] : index_) {
    if (e->meta.ttl > 0 && t - e->meta.last_access > e->meta.ttl) dead.push_back(e);
  }
  for (auto& e : dead) unlink_locked(e);
  stats_.add(Counter::Expirations, dead.size());
  return dead.size();
}

void AttentionStore::wait_idle() {
  load_pool_->wait_idle();
  pool_->wait_idle();
  compact_pool_->wait_idle();
}

bool AttentionStore::wait_idle_until(std::chrono::steady_clock::time_point deadline) {
  return load_pool_->wait_idle_until(deadline) && pool_->wait_idle_until(deadline) &&
         compact_pool_->wait_idle_until(deadline);
}

void AttentionStore::set_recompute_estimate(std::function<double(int64_t tokens)> seconds) {
  std::lock_guard<std::mutex> g(mu_);
  recompute_s_ = std::move(seconds);
}

StatsSnapshot AttentionStore::stats() const {
  StatsSnapshot s = stats_.snapshot();
  std::lock_guard<std::mutex> g(mu_);
  for (int t = 0; t < kNumTiers; ++t) {
    if (!tiers_[t]) continue;
    s.tier_present[t] = true;
    s.used_bytes[t] = tiers_[t]->allocator().used() * tiers_[t]->slot_bytes();
    s.capacity_bytes[t] = tiers_[t]->capacity_bytes();
  }
  for (const auto& [id, e] : index_) ++s.entries[static_cast<int>(e->tier)];
  s.first_io_error = first_io_error();
  return s;
}

bool AttentionStore::has_tier(TierKind t) const {
  return tier(t) != nullptr;
}

uint64_t AttentionStore::used_bytes(TierKind t) const {
  std::lock_guard<std::mutex> g(mu_);
  return tier(t) ? tier(t)->allocator().used() * tier(t)->slot_bytes() : 0;
}

uint64_t AttentionStore::ssd_copy_bytes() const {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t chunks = 0;
  for (const auto& [id, e] : index_) chunks += e->ssd_copy.size();
  return chunks * cfg_.chunk_bytes;
}

uint64_t AttentionStore::capacity_bytes(TierKind t) const {
  return tier(t) ? tier(t)->capacity_bytes() : 0;
}

bool AttentionStore::where(SessionId session, TierKind* t) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = index_.find(session);
  if (it == index_.end()) return false;
  if (t) *t = it->second->tier;
  return true;
}

std::vector<SessionId> AttentionStore::sessions() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<SessionId> out;
  for (const auto& [id, e] : index_) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

bool AttentionStore::entry_meta(SessionId session, EntryMeta* out) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = index_.find(session);
  if (it == index_.end()) return false;
  *out = it->second->meta;
  return true;
}

double AttentionStore::inserted_at(SessionId session) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = index_.find(session);
  return it == index_.end() ? std::numeric_limits<double>::quiet_NaN() : it->second->meta.created;
}

std::vector<std::string> AttentionStore::describe(bool degraded_only) const {
  std::vector<std::string> out;
  for (const auto& t : tiers_) {
    if (t && (!degraded_only || t->degraded())) out.push_back(t->describe());
  }
  return out;
}

uint64_t AttentionStore::accounting_errors() const {
  std::lock_guard<std::mutex> g(mu_);
  uint64_t n = pin_errors_;
  for (const auto& t : tiers_) {
    if (t) n += t->allocator().double_frees();
  }
  return n;
}

}  // namespace cb::store
