// Placement: making room through the advisor, demotion, promotion (prefetch), drops.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <unordered_set>

#include "lib/store/attention_store.h"
#include "lib/store/bandwidth_limiter.h"
#include "lib/store/journal.h"
#include "lib/store/store_internal.h"
#include "lib/store/thread_pool.h"
#include "lib/store/tier.h"

namespace cb::store {

namespace {
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
constexpr uint64_t kCopyBatch = 16;
}  // namespace

bool AttentionStore::timed_io(TierKind t, bool write, ChunkIo* ops, size_t n) {
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t moved = 0;
  for (size_t i = 0; i < n; ++i) moved += ops[i].len;
  // The emulated link's interval is taken before the transfer: the link serves transfers in
  // the order they were issued (a thread preempted mid-copy does not let a later one pass).
  const auto paced_until = limit_[static_cast<int>(t)][write ? 1 : 0]->reserve(moved, t0);
  const bool meter = write && t == TierKind::Ssd;
  if (meter) ssd_writes_.io_begin(t0);
  const bool ok = write ? tier(t)->write(ops, n) : tier(t)->read(ops, n);
  uint64_t bytes = 0;  // those that reached the device
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].error == 0) bytes += ops[i].len;
  }
  std::this_thread::sleep_until(paced_until);
  if (meter) ssd_writes_.io_end(bytes);
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  stats_.add(t, write ? TierCounter::BytesWritten : TierCounter::BytesRead, bytes);
  stats_.add(t, write ? TierCounter::WriteNs : TierCounter::ReadNs, static_cast<uint64_t>(ns));
  if (!ok) {
    stats_.add(Counter::IoErrors);
    for (size_t i = 0; i < n; ++i) {
      if (ops[i].error == 0) continue;
      note_io_error(tier(t)->locate(ops[i].slot) + ": cannot " + (write ? "write" : "read") +
                    " a chunk: " + std::strerror(ops[i].error));
      break;
    }
  }
  return ok;
}

void splice_copy(uint64_t nt, uint64_t reuse, const std::vector<uint64_t>& copy, uint64_t copy_nt,
                 const std::vector<uint64_t>& fresh, std::vector<uint64_t>* slots,
                 std::vector<uint64_t>* stale) {
  for (uint64_t idx = 0, f = 0; idx < slots->size(); ++idx) {
    const uint64_t c = idx % nt;
    (*slots)[idx] = c < reuse ? copy[idx / nt * copy_nt + c] : fresh[f++];
  }
  for (uint64_t idx = 0; idx < copy.size(); ++idx) {
    if (idx % copy_nt >= reuse) stale->push_back(copy[idx]);
  }
}

bool AttentionStore::lower_tier(TierKind t, TierKind* lower) const {
  for (int i = static_cast<int>(t) + 1; i < kNumTiers; ++i) {
    if (tiers_[i]) {
      *lower = static_cast<TierKind>(i);
      return true;
    }
  }
  return false;
}

bool AttentionStore::reserve(TierKind t, uint64_t n, bool use_reserve, std::vector<uint64_t>* slots,
                             bool settle) {
  Tier* T = tier(t);
  if (T == nullptr) return false;
  const uint64_t keep = (t == TierKind::Dram && !use_reserve) ? reserve_chunks_ : 0;
  if (n + keep > T->allocator().capacity()) return false;
  for (int round = 0; round < 8; ++round) {
    std::vector<std::pair<EntryPtr, bool>> victims;
    bool copies = false;  // SSD copies dropped this round
    {
      std::unique_lock<std::mutex> g(mu_);
      if (T->allocator().free() >= n + keep) return T->allocator().allocate(n, slots);
      if (settle && !settled_locked(t)) {
        move_cv_.wait(g, [&] { return settled_locked(t); });
        if (T->allocator().free() >= n + keep) return T->allocator().allocate(n, slots);
      }
      if (t == TierKind::Hbm && demoting_chunks_ > 0) {
        // Demotions ahead of need are making room: wait for them before choosing victims, so
        // which entries go does not depend on how far they have got (and SimStore agrees).
        move_cv_.wait(g, [&] { return demoting_chunks_ == 0; });
        if (T->allocator().free() >= n + keep) return T->allocator().allocate(n, slots);
      }
      const uint64_t needed = (n + keep - T->allocator().free()) * T->slot_bytes();
      std::vector<EntryInfo> cands;
      for (const auto& [id, e] : index_) {
        if (e->tier == t && evictable(*e)) {
          cands.push_back(entry_info(id, *e, e->meta.n_chunks(), T->slot_bytes()));
        } else if (t == TierKind::Ssd && !e->ssd_copy.empty() && e->copy_lent == 0 &&
                   (id & kCopyCandidate) == 0) {
          // The copies compete with the SSD's entries (kCopyCandidate).
          cands.push_back(entry_info(id | kCopyCandidate, *e, e->ssd_copy.size(), T->slot_bytes()));
          cands.back().tier = t;
        }
      }
      for (const Victim& v : cfg_.advisor->choose_victims(t, needed, cands, lookahead_, now())) {
        auto it = index_.find(v.session);
        const bool copy = t == TierKind::Ssd && (v.session & kCopyCandidate) != 0 &&
                          (it == index_.end() || it->second->tier != t);
        if (copy) it = index_.find(v.session & ~kCopyCandidate);
        if (it == index_.end()) continue;
        const EntryPtr& e = it->second;
        if (copy) {
          if (e->tier != t && !e->ssd_copy.empty()) {
            drop_copy_locked(e);  // freed once its loads end (release_locked)
            copies = true;
          }
          continue;
        }
        if (e->tier != t || !evictable(*e)) continue;
        e->moving = true;
        ++e->pins;
        victims.emplace_back(e, v.drop);
      }
      if (victims.empty() && !copies && t == TierKind::Ssd && cleaning_ > 0) {
        // Write-backs hold slots that are about to be copies: wait for them, then rank again.
        move_cv_.wait(g, [&] { return cleaning_ == 0; });
        continue;
      }
    }
    if (victims.empty() && !copies) return false;
    for (auto& [e, drop] : victims) evict(e, drop, settle);
  }
  return false;
}

bool AttentionStore::slow_demotion_locked(const StoreEntry& e) const {
  if (!cfg_.drop_slow_demotions || !recompute_s_) return false;
  const uint64_t nt = e.meta.n_token_chunks();
  const uint64_t lanes = 2ull * static_cast<uint64_t>(e.meta.shape.n_layers);
  // A write-back of it under way leaves a whole copy: move_entry waits for it and writes
  // nothing more, and a drop would free nothing sooner (the write-back's pin keeps the DRAM
  // slots until it ends). Never dropped.
  if (e.cleaning) return false;
  // What move_entry would write: the token chunks past those its SSD copy holds.
  uint64_t bytes = 0;
  for (uint64_t c = e.ssd_copy.empty() ? 0 : std::min(e.copy_valid, nt); c < nt; ++c) {
    bytes += e.meta.chunk_len(c);
  }
  if (bytes == 0) return false;  // a whole copy: the demotion is a journal record
  const double wait = ssd_writes_.drain_seconds(bytes * lanes);
  return wait >= 0 && wait > recompute_s_(e.meta.n_tokens());
}

void AttentionStore::evict(const EntryPtr& e, bool drop, bool blocking) {
  const TierKind src = e->tier;
  TierKind lower;
  MoveResult r = MoveResult::NoRoom;
  const bool has_lower = lower_tier(src, &lower);
  if (!drop && has_lower && blocking && lower == TierKind::Ssd) {
    std::lock_guard<std::mutex> g(mu_);
    if (slow_demotion_locked(*e)) {
      drop = true;
      stats_.add(Counter::SlowDemotionsDropped);
    }
  }
  // A save's victim demoted to DRAM makes its room there as the save does, after the saves in
  // flight that DRAM depends on have landed: which DRAM entries go (and whether the victim
  // finds room or is dropped) then does not depend on how far their writes have got. Not on
  // the SSD, whose saves in flight the caller does not wait for (settled_locked).
  if (!drop && has_lower) {
    r = move_entry(e, lower, false, nullptr, blocking && lower != TierKind::Ssd);
  }
  if (r == MoveResult::Ok) {
    stats_.add(src, TierCounter::Evictions);
    std::lock_guard<std::mutex> g(mu_);
    write_back_due_ = true;  // the next entries in line may have no copy
    ++changes_;
  } else if (r == MoveResult::Gone) {
    std::lock_guard<std::mutex> g(mu_);
    e->moving = false;
  } else {
    std::lock_guard<std::mutex> g(mu_);
    if (!e->doomed) {
      stats_.add(src, TierCounter::Drops);
      unlink_locked(e);
    }
    e->moving = false;
  }
  unpin(e);
}

AttentionStore::MoveResult AttentionStore::copy_chunks(TierKind src, TierKind dst,
                                                       const EntryMeta& m,
                                                       const std::vector<uint64_t>& dst_slots,
                                                       uint64_t skip_chunks, std::string* why) {
  const uint64_t sb = cfg_.chunk_bytes;
  const uint64_t nt = m.n_token_chunks();
  std::vector<uint64_t> copied;  // chunk indices to copy: token chunks >= skip_chunks
  for (uint64_t idx = 0; idx < m.n_chunks(); ++idx) {
    if (idx % nt >= skip_chunks) copied.push_back(idx);
  }
  const uint64_t total = copied.size();
  if (total == 0) return MoveResult::Ok;
  const uint64_t batch = std::min<uint64_t>(kCopyBatch, total);
  // A demotion or write-back is SSD backlog until written (the demotion budget's wait).
  uint64_t bytes = 0;
  for (uint64_t idx : copied) bytes += m.chunk_len(idx % nt);
  PendingWrite pending(dst == TierKind::Ssd ? &ssd_writes_ : nullptr, bytes);
  std::unique_ptr<void, FreeDeleter> buf(std::aligned_alloc(4096, batch * sb));
  char* b = static_cast<char*>(buf.get());
  const uint64_t seed = chunk_seed(m.session);
  std::vector<ChunkIo> ops;
  for (uint64_t first = 0; first < total; first += batch) {
    const uint64_t cnt = std::min(batch, total - first);
    std::vector<uint64_t> got(cnt);  // checksums taken as the chunks are read
    ops.assign(cnt, ChunkIo{});
    for (uint64_t i = 0; i < cnt; ++i) {
      const uint64_t idx = copied[first + i];
      ops[i].slot = m.slots[idx];
      ops[i].buf = b + i * sb;
      ops[i].len = m.chunk_len(idx % nt);
      ops[i].sum = &got[i];
      ops[i].sum_seed = seed;
    }
    if (!timed_io(src, false, ops.data(), cnt)) {
      if (why != nullptr) {
        *why =
            failed_op_problem(m, src, ops.data(), cnt, [&](size_t i) { return copied[first + i]; });
      }
      return MoveResult::SourceBad;
    }
    for (uint64_t i = 0; i < cnt; ++i) {
      const uint64_t idx = copied[first + i];
      if (got[i] != m.checksums[idx]) {
        stats_.add(Counter::ChecksumFailures);
        if (why != nullptr) *why = chunk_problem(m, src, idx, "checksum mismatch");
        return MoveResult::SourceBad;
      }
      ops[i].slot = dst_slots[idx];
      ops[i].sum = nullptr;  // the write moves verified bytes
    }
    if (!timed_io(dst, true, ops.data(), cnt)) return MoveResult::DestFailed;
    for (uint64_t i = 0; i < cnt; ++i) pending.done(ops[i].len);
  }
  return MoveResult::Ok;
}

AttentionStore::MoveResult AttentionStore::move_entry(const EntryPtr& e, TierKind dst,
                                                      bool use_reserve, std::string* why,
                                                      bool settle) {
  EntryMeta m;
  TierKind src;
  // A demotion to the SSD takes the entry's SSD copy: its valid chunks stay where they are.
  std::vector<uint64_t> copy;
  uint64_t copy_nt = 0, copy_valid = 0, reuse = 0;
  {
    std::unique_lock<std::mutex> g(mu_);
    // A write-back of it that is running ends soon (it waits for nothing) and leaves a copy.
    move_cv_.wait(g, [&] { return !e->cleaning; });
    if (e->doomed) return MoveResult::Gone;  // erased after it was chosen
    m = e->meta;
    src = e->tier;
    if (dst == TierKind::Ssd && !e->ssd_copy.empty()) {
      copy = std::move(e->ssd_copy);
      copy_nt = e->copy_nt;
      copy_valid = e->copy_valid;
      reuse = std::min(copy_valid, m.n_token_chunks());
      e->ssd_copy.clear();
      e->copy_nt = e->copy_valid = 0;
    }
  }
  const uint64_t nt = m.n_token_chunks();
  const uint64_t lanes = 2ull * static_cast<uint64_t>(m.shape.n_layers);  // layer x K/V
  const auto give_copy_back = [&] {  // the entry is unchanged, so is its copy (mu_ held)
    if (copy.empty()) return;
    if (e->doomed) {
      release_locked(e, TierKind::Ssd, std::move(copy));
    } else {
      e->ssd_copy = std::move(copy);
      e->copy_nt = copy_nt;
      e->copy_valid = copy_valid;
    }
  };
  std::vector<uint64_t> fresh;
  if (!reserve(dst, m.n_chunks() - reuse * lanes, use_reserve, &fresh, settle)) {
    std::lock_guard<std::mutex> g(mu_);
    give_copy_back();
    return MoveResult::NoRoom;
  }
  std::vector<uint64_t> slots(m.n_chunks()), stale;
  splice_copy(nt, reuse, copy, copy_nt, fresh, &slots, &stale);
  MoveResult r = copy_chunks(src, dst, m, slots, reuse, why);
  if (r == MoveResult::Ok && dst == TierKind::Ssd && !sync_ssd(fresh)) r = MoveResult::DestFailed;
  std::lock_guard<std::mutex> g(mu_);
  if (r == MoveResult::Ok && e->doomed) {
    // Erased (or replaced by a newer save) while it moved: the copy is garbage and must not
    // reach the journal, where it would outrank the newer entry.
    tier(dst)->allocator().release(fresh);
    give_copy_back();
    e->moving = false;
    return MoveResult::Ok;
  }
  if (r == MoveResult::Ok && dst == TierKind::Ssd) {
    m.slots = slots;
    if (!journal_commit(&m)) r = MoveResult::DestFailed;
  }
  if (r != MoveResult::Ok) {
    tier(dst)->allocator().release(fresh);
    give_copy_back();
    return r;
  }
  std::vector<uint64_t> old = std::move(e->meta.slots);
  e->meta.slots = std::move(slots);
  e->meta.generation = m.generation;
  e->tier = dst;
  if (reuse > 0) stats_.add(Counter::SsdCopyChunksReused, reuse * lanes);
  release_locked(e, TierKind::Ssd, std::move(stale));
  if (src == TierKind::Ssd) {
    // Promoted: the SSD slots stay as the entry's copy (not journaled: the record goes).
    journal_erase_locked(m.session);
    e->ssd_copy = std::move(old);
    e->copy_nt = e->copy_valid = nt;
  } else {
    release_locked(e, src, std::move(old));
  }
  e->moving = false;
  move_cv_.notify_all();
  return MoveResult::Ok;
}

AttentionStore::MoveResult AttentionStore::promote(const EntryPtr& e) {
  std::string why;
  const MoveResult r = move_entry(e, TierKind::Dram, true, &why);
  if (r == MoveResult::Ok) {
    stats_.add(Counter::Prefetches);
    std::lock_guard<std::mutex> g(mu_);
    ++changes_;  // movable again (see prefetch_retry_due)
  } else if (r == MoveResult::Gone) {
    std::lock_guard<std::mutex> g(mu_);
    e->moving = false;
  } else {
    stats_.add(Counter::PrefetchFailures);
    if (r == MoveResult::SourceBad) drop_corrupt(e, why);
    std::lock_guard<std::mutex> g(mu_);
    e->moving = false;
  }
  return r;
}

void AttentionStore::restore_reserve() {
  if (!tier(TierKind::Dram) || reserve_chunks_ == 0) return;
  std::vector<uint64_t> none;
  reserve(TierKind::Dram, 0, false, &none);
}

size_t AttentionStore::prefetch(const std::vector<SessionId>& lookahead) {
  {
    std::lock_guard<std::mutex> g(mu_);
    lookahead_ = lookahead;
    write_back_due_ = true;
    fetch_blocked_ = false;
  }
  write_back();  // on the write pool before the fetches (store_clean.cc)
  return start_fetches(lookahead);
}

bool AttentionStore::prefetch_retry_due() const {
  std::lock_guard<std::mutex> g(mu_);
  return fetch_blocked_ && changes_ != changes_at_block_;
}

size_t AttentionStore::retry_prefetch() {
  std::vector<SessionId> lookahead;
  {
    std::lock_guard<std::mutex> g(mu_);
    lookahead = lookahead_;
  }
  return prefetch(lookahead);
}

size_t AttentionStore::start_fetches(const std::vector<SessionId>& lookahead) {
  // Fetches run in queue order on one pool task. A fetch may evict only entries needed after
  // it (lib/policy plan_prefetch's rule, mirrored by sim::SimStore): while it makes room, the
  // entries of the look-ahead sessions up to it are pinned and those after it are not, so a
  // nearer job's entry never leaves for it, and a later job's may (tail first, after entries
  // outside the window) when DRAM holds nothing else. Every look-ahead entry up to the last
  // fetch is pinned from the plan until the task reaches it, so nothing else evicts them
  // meanwhile. After a fetch that finds no room the later ones are skipped.
  std::vector<EntryPtr> held;  // the look-ahead's entries in queue order, up to the last fetch
  std::vector<char> fetch;     // whether held[i] is fetched
  {
    std::lock_guard<std::mutex> g(mu_);
    Tier* dram = tier(TierKind::Dram);
    if (dram == nullptr || tier(TierKind::Ssd) == nullptr) return 0;
    std::vector<EntryInfo> on_ssd;
    for (const auto& [id, e] : index_) {
      if (e->tier != TierKind::Ssd || e->pins > 0 || e->moving) continue;
      on_ssd.push_back(entry_info(id, *e, e->meta.n_chunks(), dram->slot_bytes()));
    }
    if (on_ssd.empty()) return 0;
    const uint64_t free_bytes = dram->allocator().free() * dram->slot_bytes();
    const std::vector<SessionId> order =
        cfg_.advisor->choose_prefetch(lookahead, on_ssd, free_bytes, now());
    const std::unordered_set<SessionId> wanted(order.begin(), order.end());
    size_t left = wanted.size(), fetches = 0;
    for (SessionId s : lookahead) {
      if (left == 0) break;
      auto it = index_.find(s);
      if (it == index_.end()) continue;
      const EntryPtr& e = it->second;
      const bool is_wanted = wanted.count(s) != 0;
      const bool f = is_wanted && e->tier == TierKind::Ssd && e->pins == 0 && !e->moving;
      ++e->pins;
      held.push_back(e);
      fetch.push_back(f ? 1 : 0);
      if (is_wanted) --left;
      if (!f) continue;
      e->moving = true;
      ++fetches;
    }
    if (fetches == 0) {
      for (const EntryPtr& e : held) unpin_locked(e);
      return 0;
    }
    while (!fetch.back()) {  // nothing after the last fetch needs holding
      unpin_locked(held.back());
      held.pop_back();
      fetch.pop_back();
    }
  }
  const size_t n = static_cast<size_t>(std::count(fetch.begin(), fetch.end(), 1));
  pool_->post([this, held, fetch] {
    std::vector<char> pinned(held.size(), 1);
    bool room = true;
    uint64_t changes = 0;  // changes_ before the fetch: one during it makes a retry due
    for (size_t i = 0; i < held.size(); ++i) {
      if (!fetch[i]) continue;
      if (!room) {
        std::lock_guard<std::mutex> g(mu_);
        held[i]->moving = false;
        continue;
      }
      {
        std::lock_guard<std::mutex> g(mu_);
        changes = changes_;
        for (size_t j = 0; j < held.size(); ++j) {
          const bool want = j <= i;  // the jobs up to this one keep their entries
          if (want && !pinned[j] && !held[j]->doomed) {
            ++held[j]->pins;
            pinned[j] = 1;
          } else if (!want && pinned[j]) {
            unpin_locked(held[j]);
            pinned[j] = 0;
          }
        }
      }
      room = promote(held[i]) != MoveResult::NoRoom;
      if (!room) {
        std::lock_guard<std::mutex> g(mu_);
        fetch_blocked_ = true;
        changes_at_block_ = changes;
      }
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      for (size_t j = 0; j < held.size(); ++j)
        if (pinned[j]) unpin_locked(held[j]);
    }
    restore_reserve();
  });
  return n;
}

}  // namespace cb::store
