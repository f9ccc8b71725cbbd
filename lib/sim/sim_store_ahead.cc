// SimStore's placement ahead of need, mirroring lib/store's store_clean.cc and prefetch:
// write-backs of the DRAM entries the advisor would evict first, demotions of HBM entries
// ahead of need, and fetches of the look-ahead's SSD entries into DRAM.
#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <utility>
#include <vector>

#include "lib/core/error.h"
#include "lib/engine/policy_advisor.h"
#include "lib/policy/placement.h"
#include "lib/sim/sim_store.h"

namespace cb::sim {

using store::TierKind;

void SimStore::write_back(double now) {
  if (!write_back_due_) return;
  // lib/store plans both under one lock, the write-backs against DRAM as it is before the
  // demotions (its pool moves them later), and clears the flag first: a demotion's sets it again.
  clean_ahead(now);
  demote_ahead(now);
}

void SimStore::demote_ahead(double now) {
  if (cfg_.demote_ahead_bytes == 0 || !present(TierKind::Hbm) || !present(TierKind::Dram)) return;
  uint64_t demoting = 0;  // HBM chunks the demotions in flight will free
  for (const auto& d : demoting_) demoting += d.second;
  const uint64_t have = (free_[0] + demoting) * cfg_.chunk_bytes;
  if (have >= cfg_.demote_ahead_bytes) return;
  std::vector<std::pair<store::SessionId, bool>> victims;
  for (const store::Victim& v :
       choose_victims(TierKind::Hbm, cfg_.demote_ahead_bytes - have, now)) {
    auto it = index_.find(v.session);
    if (it == index_.end() || it->second.tier != TierKind::Hbm || !movable(it->second)) continue;
    it->second.pins++;  // chosen: not chosen again while the cascade runs (as reserve())
    sync(it->second);
    victims.emplace_back(v.session, v.drop);
  }
  // lib/store's pool task takes them in order, each making its room in DRAM, then copying.
  double at = now;
  for (auto& [s, drop] : victims) {
    if (drop) {
      evict(s, true, now, false);
      continue;
    }
    Entry& e = index_.at(s);
    --e.pins;
    sync(e);
    const uint64_t chunks = e.chunks;
    const double room_before = room_at_;
    room_at_ = at;
    if (!reserve(TierKind::Dram, chunks, false, at)) {
      room_at_ = std::max(room_before, room_at_);
      erase_committed(s);  // lib/store's evict drops a victim the lower tier has no room for
      continue;
    }
    ++demoted_ahead_;
    Entry& m = index_.at(s);
    const double bytes = payload_bytes(m.tokens);
    const double before = cfg_.d2h.busy_s();
    at = cfg_.d2h.transfer(room_at_, bytes);  // once the room it made is free
    room_at_ = std::max(room_before, room_at_);
    write_s_[1] += cfg_.d2h.busy_s() - before;
    bytes_written_[1] += bytes;
    set_tier(m, TierKind::Dram);  // its HBM chunks stay taken until the copy lands
    m.moving_until = at;
    m.demoting = true;
    sync(m);
    moving_.push_back(s);
    demoting_.emplace_back(at, chunks);
    write_back_due_ = true;  // as evict(): the next DRAM entries in line may have no copy
  }
}

void SimStore::land_demotions(double until) {
  for (auto it = demoting_.begin(); it != demoting_.end();) {
    if (it->first <= until) {
      free_[0] += it->second;
      ++changes_;
      it = demoting_.erase(it);
    } else {
      ++it;
    }
  }
}

void SimStore::clean_ahead(double now) {
  write_back_due_ = false;
  if (cfg_.clean_ahead_bytes == 0 || !present(TierKind::Dram) || !present(TierKind::Ssd)) return;
  const uint64_t lanes = 2ull * static_cast<uint64_t>(layers_);
  const std::vector<store::Victim> order =
      choose_victims(TierKind::Dram, cfg_.clean_ahead_bytes, now);
  for (const store::Victim& v : order) {
    if (v.drop) continue;  // dropped, not demoted: nothing to write ahead
    auto it = index_.find(v.session);
    if (it == index_.end()) continue;
    Entry& e = it->second;
    // Only candidates (the advisor's contract ignores other ids); a clean in flight is not
    // repeated (lib/store: the entry is pinned while it runs).
    if (e.tier != TierKind::Dram || !movable(e) || e.clean_until > now) continue;
    const uint64_t nt = e.chunks / lanes;  // the last partial chunk too: an append that
    const uint64_t reuse = std::min(e.copy_valid, nt);  // grows it in place invalidates it
    if (reuse == nt) continue;
    const uint64_t fresh = (nt - reuse) * lanes;
    if (free_[2] < fresh) break;  // free SSD space only: cleaning never evicts
    free_[2] -= fresh;
    free_[2] += e.copy_chunks - reuse * lanes;  // the old copy's stale chunks
    e.copy_chunks = nt * lanes;
    e.copy_valid = nt;
    with_copy_.insert(e.session);
    sync(e);
    const double bytes = payload_past(e.tokens, reuse);
    const double before = cfg_.ssd_write.busy_s();
    e.clean_until = cfg_.ssd_write.transfer(now, bytes);
    e.clean_start = cfg_.ssd_write.last_start();
    write_s_[2] += cfg_.ssd_write.busy_s() - before;
    bytes_written_[2] += bytes;
    cleaned_chunks_ += fresh;
  }
}

void SimStore::prefetch(const std::vector<store::SessionId>& lookahead, double now) {
  fetch_blocked_ = false;
  lookahead_ = lookahead;
  first_pos_stale_ = true;
  clean_ahead(now);  // lib/store's prefetch() plans its write_back() first (see write_back())
  demote_ahead(now);
  if (!present(TierKind::Dram) || !present(TierKind::Ssd)) return;
  auto* pa = dynamic_cast<engine::PolicyAdvisor*>(cfg_.advisor.get());
  // Skv from the running sums, as lib/store takes it: the mean size of the SSD's entries that
  // can move (not pinned, not moving), copies of DRAM entries and saves in flight left out.
  // The advisor looks only at the prefetch window's sessions.
  uint64_t mean = 0;
  if (pa != nullptr) {
    const auto scanned_mean = [&] {  // the reference: every SSD entry's size
      uint64_t sum = 0, n = 0;
      for (store::SessionId id : in_tier_[2]) {
        const Entry& e = index_.at(id);
        if (!movable(e)) continue;
        sum += e.chunks * cfg_.chunk_bytes;
        ++n;
      }
      return policy::mean_skv(sum, n);
    };
    if (indexed_ == nullptr) {
      mean = scanned_mean();
    } else {
      const uint64_t n_ssd = cands_[2].size() - copy_cands_;
      mean = policy::mean_skv((cand_chunks_[2] - copy_cand_chunks_) * cfg_.chunk_bytes, n_ssd);
      if (cfg_.verify_decisions && scanned_mean() != mean) {
        throw make_error("sim store",
                         "the prefetch window's mean SSD entry is " + std::to_string(mean) +
                             " bytes by the running sums, " + std::to_string(scanned_mean()) +
                             " by a scan",
                         "a change of an entry was not synced (a SimStore bug)");
      }
    }
  }
  const size_t scan =
      pa != nullptr ? std::min(lookahead.size(), pa->prefetch_window(mean)) : lookahead.size();
  std::vector<store::EntryInfo> on_ssd;
  std::vector<store::SessionId> order;
  if (pa != nullptr) {
    for (size_t i = 0; i < scan; ++i) {
      auto it = index_.find(lookahead[i]);
      if (it == index_.end() || it->second.tier != TierKind::Ssd || !movable(it->second)) continue;
      on_ssd.push_back(info(it->second));
    }
    if (on_ssd.empty()) return;  // only look-ahead sessions on SSD are fetched
    order = pa->choose_prefetch_with_mean(lookahead, on_ssd, mean);
  } else {
    // Another advisor gets every movable SSD entry: skip that scan when no look-ahead
    // session is on SSD.
    bool any = false;
    for (size_t i = 0; i < scan && !any; ++i) {
      auto it = index_.find(lookahead[i]);
      if (it != index_.end() && it->second.tier == TierKind::Ssd && movable(it->second)) any = true;
    }
    if (!any) return;
    for (store::SessionId id : in_tier_[2]) {
      const Entry& e = index_.at(id);
      if (!movable(e)) continue;
      on_ssd.push_back(info(e));
    }
    order = cfg_.advisor->choose_prefetch(lookahead, on_ssd, free_[1] * cfg_.chunk_bytes, now);
  }
  // Fetch in queue order. A fetch may evict only entries needed after it: the entries of every
  // session ahead of it in the look-ahead stay pinned while it makes room (the pure planner's
  // rule in lib/policy plan_prefetch), and once one does not fit, none further is tried.
  // Without that, a fetch could evict a nearer job's entry that a later plan fetches back.
  const std::unordered_set<store::SessionId> wanted(order.begin(), order.end());
  std::vector<store::SessionId> held;
  size_t left = wanted.size();
  // lib/store runs the fetches one after another on one pool task, each demoting its victims
  // before it copies: a fetch starts when the previous one has landed and its room is free.
  double fetch_at = now;
  for (store::SessionId s : lookahead) {
    if (left == 0) break;
    auto it = index_.find(s);
    if (it == index_.end()) continue;
    const bool is_wanted = wanted.count(s) != 0;
    const bool fetch = is_wanted && it->second.tier == TierKind::Ssd && movable(it->second);
    it->second.pins++;
    sync(it->second);
    held.push_back(s);
    if (is_wanted) --left;
    if (!fetch) continue;
    // The fetch task makes its room when it gets to this fetch, after the previous one landed.
    room_at_ = fetch_at;
    const uint64_t changes = changes_;  // lib/store takes it before the fetch's evictions
    if (!reserve(TierKind::Dram, it->second.chunks, true, fetch_at)) {
      ++prefetch_failures_;
      fetch_blocked_ = true;
      changes_at_block_ = changes;
      break;
    }
    ++prefetches_;
    Entry& e = index_.at(s);
    const double bytes = payload_bytes(e.tokens);
    const double before = cfg_.ssd_read.busy_s();
    e.moving_until = cfg_.ssd_read.transfer(room_at_, bytes);
    fetch_at = e.moving_until;
    read_s_[2] += cfg_.ssd_read.busy_s() - before;
    bytes_read_[2] += bytes;
    bytes_written_[1] += bytes;
    // The SSD chunks stay as the entry's copy (lib/store's inclusive tiers).
    e.copy_chunks = e.chunks;
    e.copy_valid = e.chunks / (2ull * static_cast<uint64_t>(layers_));
    with_copy_.insert(s);
    set_tier(e, TierKind::Dram);
    moving_.push_back(s);
  }
  for (store::SessionId s : held) {  // the committed entries pinned above, not a save in flight
    auto it = index_.find(s);
    if (it != index_.end() && it->second.pins > 0) {
      --it->second.pins;
      sync(it->second);
    }
  }
}

}  // namespace cb::sim
