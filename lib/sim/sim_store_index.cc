// SimStore's eviction decisions. Without indexes every decision hands the advisor all the
// candidates of a tier, which ranks them all: at paper scale (thousands of SSD entries) that
// was most of a replay's time. With an engine::PolicyAdvisor the store keeps each tier's
// candidates sorted in the policy's base order (policy::OrderSpec: LRU or FIFO) and draws the
// victims the advisor would choose from the front of that order, skipping the look-ahead
// window's sessions, which come last, latest first: O(window + victims) per decision.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "lib/core/error.h"
#include "lib/sim/sim_store.h"

namespace cb::sim {

using store::TierKind;

SimStore::Cand SimStore::make_cand(const Entry& e, bool copy) const {
  Cand c;
  const int64_t created = engine::policy_ticks(e.created);
  if (base_ == policy::OrderSpec::Base::kLru) {
    c.a = engine::policy_ticks(e.last_access);
    c.b = created;
  } else {
    c.a = created;
  }
  c.id = copy ? e.session | store::kCopyCandidate : e.session;
  c.chunks = copy ? e.copy_chunks : e.chunks;
  return c;
}

size_t SimStore::first_pos(store::SessionId session) {
  // An open-addressing table over lookahead_ (first occurrence kept), rebuilt without
  // allocating once per look-ahead change: slots of an older build read as empty.
  const auto slot_of = [](store::SessionId s, size_t mask) {
    uint64_t z = s + 0x9e3779b97f4a7c15ull;  // splitmix64's finalizer
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<size_t>(z ^ (z >> 31)) & mask;
  };
  if (first_pos_stale_) {
    size_t cap = 16;
    while (cap < 2 * lookahead_.size()) cap *= 2;
    if (pos_table_.size() < cap) pos_table_.assign(cap, PosSlot{});
    pos_mask_ = cap - 1;
    ++pos_epoch_;
    for (size_t i = 0; i < lookahead_.size(); ++i) {
      for (size_t k = slot_of(lookahead_[i], pos_mask_);; k = (k + 1) & pos_mask_) {
        PosSlot& sl = pos_table_[k];
        if (sl.epoch != pos_epoch_) {
          sl = {pos_epoch_, lookahead_[i], i};
          break;
        }
        if (sl.session == lookahead_[i]) break;  // keeps the first position
      }
    }
    first_pos_stale_ = false;
  }
  for (size_t k = slot_of(session, pos_mask_);; k = (k + 1) & pos_mask_) {
    const PosSlot& sl = pos_table_[k];
    if (sl.epoch != pos_epoch_) return SIZE_MAX;
    if (sl.session == session) return sl.pos;
  }
}

void SimStore::unindex(Entry& e) {
  if (e.in_cands) {
    cand_chunks_[e.cand_tier] -= e.cand->chunks;
    cands_[e.cand_tier].erase(e.cand);
    e.in_cands = false;
  }
  if (e.copy_in_cands) {
    cand_chunks_[2] -= e.copy_cand->chunks;
    copy_cand_chunks_ -= e.copy_cand->chunks;
    --copy_cands_;
    cands_[2].erase(e.copy_cand);
    e.copy_in_cands = false;
  }
}

void SimStore::sync(Entry& e) {
  if (indexed_ == nullptr) return;
  auto it = index_.find(e.session);
  if (it == index_.end() || &it->second != &e) return;  // a save in flight: not a candidate
  unindex(e);
  if (movable(e)) {
    e.cand_tier = static_cast<int>(e.tier);
    e.cand = cands_[e.cand_tier].insert(make_cand(e, false)).first;
    cand_chunks_[e.cand_tier] += e.cand->chunks;
    e.in_cands = true;
  }
  // reserve()'s copy candidates: every entry listed with a copy, unless save_below lent it.
  // Not while its entry's prefetch is in flight: those SSD chunks are still the entry's own in
  // lib/store (its tier changes when the move lands), which nothing evicts while it moves.
  if ((e.session & store::kCopyCandidate) == 0 && !e.copy_lent && e.moving_until < 0 &&
      with_copy_.count(e.session)) {
    e.copy_cand = cands_[2].insert(make_cand(e, true)).first;
    cand_chunks_[2] += e.copy_cand->chunks;
    copy_cand_chunks_ += e.copy_cand->chunks;
    ++copy_cands_;
    e.copy_in_cands = true;
  }
}

std::vector<store::EntryInfo> SimStore::scan_candidates(TierKind t, const Entry* force) const {
  const int ti = static_cast<int>(t);
  std::vector<store::EntryInfo> cands;
  if (force != nullptr) cands.push_back(info(*force));
  for (store::SessionId id : in_tier_[ti]) {
    const Entry& e = index_.at(id);
    if (movable(e) && (force == nullptr || id != force->session)) cands.push_back(info(e));
  }
  if (t == TierKind::Ssd) {  // lib/store's reserve: copies compete (store::kCopyCandidate)
    for (store::SessionId id : with_copy_) {
      const Entry& e = index_.at(id);
      if ((id & store::kCopyCandidate) != 0 || e.copy_lent || e.moving_until >= 0) continue;
      store::EntryInfo ci = info(e);
      ci.session = id | store::kCopyCandidate;
      ci.tier = TierKind::Ssd;
      ci.bytes = e.copy_chunks * cfg_.chunk_bytes;
      cands.push_back(ci);
    }
  }
  return cands;
}

void SimStore::verify_index(TierKind t) const {
  const int ti = static_cast<int>(t);
  std::set<Cand> want;
  uint64_t chunks = 0;
  for (const store::EntryInfo& c : scan_candidates(t, nullptr)) {
    const store::SessionId id = c.session & ~store::kCopyCandidate;
    const Cand k = make_cand(index_.at(id), c.session != id);
    want.insert(k);
    chunks += k.chunks;
  }
  bool same = want.size() == cands_[ti].size() && chunks == cand_chunks_[ti];
  for (auto a = want.begin(), b = cands_[ti].begin(); same && a != want.end(); ++a, ++b) {
    same = a->a == b->a && a->b == b->b && a->id == b->id && a->chunks == b->chunks;
  }
  if (!same) {
    throw make_error("sim store",
                     "the " + std::string(store::tier_name(t)) + " index holds " +
                         std::to_string(cands_[ti].size()) + " candidates where " +
                         std::to_string(want.size()) + " can move",
                     "a change of an entry was not synced (a SimStore bug)");
  }
}

std::vector<store::Victim> SimStore::indexed_victims(TierKind t, uint64_t needed,
                                                     const Entry* force) {
  const int ti = static_cast<int>(t);
  const uint64_t cb = cfg_.chunk_bytes;
  const bool force_extra = force != nullptr && !force->in_cands;  // a pinned base (admission)
  uint64_t chunks = cand_chunks_[ti], count = cands_[ti].size();
  if (force_extra) {
    chunks += force->chunks;
    ++count;
  }
  const bool counted = t != TierKind::Hbm;  // policy::effective_skv counts DRAM and SSD entries
  const policy::OrderSpec spec =
      indexed_->order_spec(counted ? chunks * cb : 0, counted ? count : 0, lookahead_.size());
  const size_t window = std::min(spec.window, lookahead_.size());
  std::vector<store::Victim> out;
  uint64_t freed = 0;
  // PolicyAdvisor::choose_victims: stop once enough is freed; the job about to run never goes.
  const auto take = [&](store::SessionId id, uint64_t c) {
    if (freed >= needed) return true;
    if (!lookahead_.empty() && id == lookahead_.front()) return false;
    out.push_back({id, t == TierKind::Ssd});
    freed += c * cb;
    return false;
  };
  // Outside the window, in base order (the forced entry merged in at its place); those inside
  // it are put aside.
  std::vector<std::pair<size_t, Cand>> inside;
  Cand fc;
  if (force_extra) fc = make_cand(*force, false);
  bool fc_left = force_extra;
  for (auto it = cands_[ti].begin();;) {
    Cand c;
    if (fc_left && (it == cands_[ti].end() || fc < *it)) {
      c = fc;
      fc_left = false;
    } else if (it != cands_[ti].end()) {
      c = *it++;
    } else {
      break;
    }
    const size_t p = window > 0 ? first_pos(c.id) : SIZE_MAX;  // a copy's id is in no look-ahead
    if (p < window) {
      inside.emplace_back(p, c);
      continue;
    }
    if (take(c.id, c.chunks)) return out;
  }
  // Then those inside, the session whose first job comes last first (positions are unique).
  std::sort(inside.begin(), inside.end(),
            [](const auto& x, const auto& y) { return x.first > y.first; });
  for (const auto& [p, c] : inside) {
    if (take(c.id, c.chunks)) break;
  }
  return out;
}

std::vector<store::Victim> SimStore::choose_victims(TierKind t, uint64_t needed, double now,
                                                    const Entry* force) {
  std::vector<store::Victim> got;
  if (indexed_ != nullptr) {
    got = indexed_victims(t, needed, force);
    if (!cfg_.verify_decisions) return got;
    verify_index(t);
  }
  const std::vector<store::EntryInfo> cands = scan_candidates(t, force);
  std::vector<store::Victim> want;
  if (!cands.empty()) want = cfg_.advisor->choose_victims(t, needed, cands, lookahead_, now);
  if (indexed_ == nullptr) return want;
  const auto same = [](const store::Victim& a, const store::Victim& b) {
    return a.session == b.session && a.drop == b.drop;
  };
  const auto diff = std::mismatch(got.begin(), got.end(), want.begin(), want.end(), same);
  if (diff.first != got.end() || diff.second != want.end()) {
    const auto name = [](auto it, auto end) {
      return it == end ? std::string("none") : std::to_string(it->session);
    };
    throw make_error("sim store",
                     "indexed decision for the " + std::string(store::tier_name(t)) +
                         " tier differs from the advisor's at victim " +
                         std::to_string(diff.first - got.begin()) + ": session " +
                         name(diff.first, got.end()) + " where the advisor takes " +
                         name(diff.second, want.end()),
                     "a SimStore bug: SimStoreConfig::indexed_decisions off avoids it");
  }
  return got;
}

}  // namespace cb::sim
