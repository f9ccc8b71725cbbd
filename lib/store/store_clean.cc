// Write-back ahead of eviction (StoreConfig::clean_ahead_bytes): SSD copies of the DRAM
// entries the advisor would evict next, written while nothing waits for them, so that their
// demotion writes little and a save that must make room waits for little. And demotion ahead
// of need (StoreConfig::demote_ahead_bytes): the HBM entries it would evict next, moved to
// DRAM while nothing waits for them, so that a save into HBM finds room.
#include <algorithm>

#include "lib/store/attention_store.h"
#include "lib/store/store_internal.h"
#include "lib/store/thread_pool.h"
#include "lib/store/tier.h"

namespace cb::store {

bool AttentionStore::evictable(const StoreEntry& e) {
  return e.pins == (e.cleaning ? 1 : 0) && !e.moving;
}

std::vector<std::pair<AttentionStore::EntryPtr, bool>> AttentionStore::first_victims_locked(
    TierKind t, uint64_t bytes) {
  std::vector<std::pair<EntryPtr, bool>> out;
  const Tier* T = tier(t);
  std::vector<EntryInfo> cands;
  for (const auto& [id, e] : index_) {
    if (e->tier != t || !evictable(*e)) continue;
    cands.push_back(entry_info(id, *e, e->meta.n_chunks(), T->slot_bytes()));
  }
  if (cands.empty()) return out;
  for (const Victim& v : cfg_.advisor->choose_victims(t, bytes, cands, lookahead_, now())) {
    auto it = index_.find(v.session);
    if (it == index_.end()) continue;
    const EntryPtr& e = it->second;
    if (e->tier != t || !evictable(*e)) continue;  // not a candidate: ignored
    out.emplace_back(e, v.drop);
  }
  return out;
}

std::vector<AttentionStore::EntryPtr> AttentionStore::plan_cleaning_locked() {
  std::vector<EntryPtr> out;
  if (cfg_.clean_ahead_bytes == 0 || !tier(TierKind::Dram) || !tier(TierKind::Ssd)) return out;
  for (const auto& [e, drop] : first_victims_locked(TierKind::Dram, cfg_.clean_ahead_bytes)) {
    if (drop) continue;  // dropped, not demoted: nothing to write ahead
    if (e->cleaning || e->clean_queued || e->copy_valid >= e->meta.n_token_chunks()) continue;
    e->clean_queued = true;
    out.push_back(e);
  }
  return out;
}

std::vector<AttentionStore::Demotion> AttentionStore::plan_demotions_locked() {
  std::vector<Demotion> out;
  Tier* hbm = tier(TierKind::Hbm);
  if (cfg_.demote_ahead_bytes == 0 || hbm == nullptr || !tier(TierKind::Dram)) return out;
  const uint64_t have = (hbm->allocator().free() + demoting_chunks_) * hbm->slot_bytes();
  if (have >= cfg_.demote_ahead_bytes) return out;
  for (const auto& [e, drop] :
       first_victims_locked(TierKind::Hbm, cfg_.demote_ahead_bytes - have)) {
    e->moving = true;
    ++e->pins;
    demoting_chunks_ += e->meta.n_chunks();
    out.push_back({e, drop, e->meta.n_chunks()});
  }
  return out;
}

void AttentionStore::demote_ahead(const std::vector<Demotion>& demotions) {
  for (const Demotion& d : demotions) {
    evict(d.entry, d.drop, false);  // a demotion, or a drop, as reserve()'s
    std::lock_guard<std::mutex> g(mu_);
    if (!d.drop && !d.entry->doomed && d.entry->tier != TierKind::Hbm) {
      stats_.add(Counter::DemotionsAhead);
    }
    demoting_chunks_ -= d.chunks;
    move_cv_.notify_all();  // a save short of HBM room waits for these (reserve())
  }
}

size_t AttentionStore::write_back() {
  std::vector<EntryPtr> cleans;
  std::vector<Demotion> demotions;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!write_back_due_) return 0;
    write_back_due_ = false;
    demotions = plan_demotions_locked();
    cleans = plan_cleaning_locked();
  }
  // The demotions first: a save may be waiting for the room they make.
  if (!demotions.empty()) {
    pool_->post([this, demotions] { demote_ahead(demotions); });
  }
  if (!cleans.empty()) pool_->post([this, cleans] { clean(cleans); });
  return cleans.size() + demotions.size();
}

void AttentionStore::clean(const std::vector<EntryPtr>& entries) {
  bool room = true;
  for (const EntryPtr& e : entries) {
    if (room) {
      room = clean_one(e);
    } else {
      std::lock_guard<std::mutex> g(mu_);
      e->clean_queued = false;
    }
  }
}

bool AttentionStore::clean_one(const EntryPtr& e) {
  Tier* ssd = tier(TierKind::Ssd);
  EntryMeta m;
  std::vector<uint64_t> old_copy, fresh;
  uint64_t old_nt = 0, old_valid = 0, reuse = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    e->clean_queued = false;
    // Demoted, erased, replaced or being moved since it was planned: nothing to do.
    if (e->doomed || e->tier != TierKind::Dram || e->moving) return true;
    // A save below is taking its copy (save_below): a new copy would make that save fall
    // back to an append in DRAM, and the DRAM entry goes at once if it does not.
    if (e->copy_lent > 0) return true;
    m = e->meta;
    const uint64_t nt = m.n_token_chunks();
    // Every token chunk, the last partial one too: an append that grows it in place leaves
    // the copy's chunks below it valid (finish_save).
    reuse = std::min(e->copy_valid, nt);
    if (reuse == nt) return true;
    const uint64_t need = (nt - reuse) * 2ull * static_cast<uint64_t>(m.shape.n_layers);
    // Free slots only: a write-back never evicts, and gives up when the SSD is full.
    if (ssd->allocator().free() < need || !ssd->allocator().allocate(need, &fresh)) return false;
    old_copy = e->ssd_copy;
    old_nt = e->copy_nt;
    old_valid = e->copy_valid;
    e->cleaning = true;
    ++e->pins;  // its DRAM slots stay readable; eviction ignores this pin (evictable())
    ++cleaning_;
  }
  const uint64_t nt = m.n_token_chunks();
  std::vector<uint64_t> slots(m.n_chunks()), stale;
  splice_copy(nt, reuse, old_copy, old_nt, fresh, &slots, &stale);
  bool ok = copy_chunks(TierKind::Dram, TierKind::Ssd, m, slots, reuse) == MoveResult::Ok;
  if (ok && !sync_ssd(fresh)) ok = false;  // a demotion journals these slots as they are
  std::lock_guard<std::mutex> g(mu_);
  --cleaning_;
  e->cleaning = false;
  // Installed only if the entry and its copy are as they were: a truncation, an append's
  // commit, an erase or a dropped copy meanwhile makes this copy stale.
  if (ok && !e->doomed && e->tier == TierKind::Dram && e->meta.slots == m.slots &&
      e->ssd_copy == old_copy && e->copy_valid == old_valid) {
    e->ssd_copy = std::move(slots);
    e->copy_nt = nt;
    e->copy_valid = nt;
    release_locked(e, TierKind::Ssd, std::move(stale));  // after this pin goes
    stats_.add(Counter::SsdChunksCleaned, fresh.size());
  } else {
    ssd->allocator().release(fresh);
  }
  unpin_locked(e);
  move_cv_.notify_all();  // a demotion of it, or an SSD reservation, may be waiting
  return true;
}

}  // namespace cb::store
