// Save-time admission (StoreConfig::save_admission): an append save that would have to make
// room in DRAM, where the advisor would evict the saving conversation's own entry first, goes
// to the SSD instead, from the caller's buffers, taking the whole chunks the entry's SSD copy
// already holds; the DRAM entry goes at once. Nothing is evicted for it and its caller waits
// for no demotion: the entries the policy values more stay in DRAM.
#include <algorithm>

#include "lib/store/attention_store.h"
#include "lib/store/store_internal.h"
#include "lib/store/tier.h"

namespace cb::store {

bool AttentionStore::settled_locked(TierKind t) const {
  for (const auto& [id, st] : in_flight_) {
    if (st->tier == t) return false;
    auto it = index_.find(id);
    if (it != index_.end() && it->second->tier == t) return false;  // its commit frees room in t
  }
  return true;
}

AttentionStore::EntryPtr AttentionStore::admits_below_locked(std::unique_lock<std::mutex>& g,
                                                             const EntryMeta& m) {
  Tier* dram = tier(TierKind::Dram);
  if (!cfg_.save_admission || tier(TierKind::Hbm) || !dram || !tier(TierKind::Ssd)) return nullptr;
  for (int round = 0; round < 2; ++round) {
    const EntryPtr base = append_base_locked(m);  // in DRAM, the fastest tier here
    if (!base) return nullptr;
    const EntryMeta& b = base->meta;
    // What the append would reserve in DRAM: the chunks past the base's whole ones, and past
    // its last partial one, which it extends in place.
    const uint64_t tpc = m.tokens_per_chunk, nb = static_cast<uint64_t>(b.n_tokens());
    const uint64_t shared = nb / tpc + (nb % tpc != 0 && !base->appending ? 1 : 0);
    if (shared == 0) return nullptr;  // try_append would not append either
    const uint64_t n = m.n_chunks() - 2ull * m.shape.n_layers * shared;
    if (dram->allocator().free() >= n + reserve_chunks_) return nullptr;
    if (round == 0 && !settled_locked(TierKind::Dram)) {  // as reserve() settles, then again
      move_cv_.wait(g, [&] { return settled_locked(TierKind::Dram); });
      continue;
    }
    // The base competes with the tier's candidates, as if it were not pinned.
    std::vector<EntryInfo> cands{entry_info(m.session, *base, b.n_chunks(), dram->slot_bytes())};
    for (const auto& [id, e] : index_) {
      if (e->tier == TierKind::Dram && e != base && evictable(*e)) {
        cands.push_back(entry_info(id, *e, e->meta.n_chunks(), dram->slot_bytes()));
      }
    }
    const uint64_t needed = (n + reserve_chunks_ - dram->allocator().free()) * dram->slot_bytes();
    const std::vector<Victim> v =
        cfg_.advisor->choose_victims(TierKind::Dram, needed, cands, lookahead_, now());
    if (v.empty() || v.front().session != m.session || v.front().drop) return nullptr;
    return base;
  }
  return nullptr;
}

bool AttentionStore::save_below(SaveState* st) {
  EntryMeta& m = st->meta;
  const uint64_t lanes = 2ull * static_cast<uint64_t>(m.shape.n_layers);
  const uint64_t nt = m.n_token_chunks();
  EntryPtr base;
  std::vector<uint64_t> copy;
  uint64_t copy_nt = 0, share = 0;
  {
    std::unique_lock<std::mutex> g(mu_);
    base = admits_below_locked(g, m);
    if (!base) return false;
    // A write-back of it that is running ends soon and leaves a copy to take (as a demotion).
    move_cv_.wait(g, [&] { return !base->cleaning; });
    // Anything may have happened meanwhile: a truncation cuts the base and its copy, so the
    // chunks below would no longer be the save's first ones.
    if (append_base_locked(m) != base) return false;
    copy = base->ssd_copy;
    copy_nt = base->copy_nt;
    // The copy's whole chunks of the base (a partial last one grows: written anew).
    const uint64_t whole = static_cast<uint64_t>(base->meta.n_tokens()) / m.tokens_per_chunk;
    if (!copy.empty()) share = std::min(base->copy_valid, whole);
    ++base->pins;       // neither evicted nor moved while the SSD makes room,
    ++base->copy_lent;  // nor its copy dropped for it (reserve()) or replaced (clean_one())
  }
  std::vector<uint64_t> fresh;
  const bool room = reserve(TierKind::Ssd, m.n_chunks() - share * lanes, false, &fresh);
  std::lock_guard<std::mutex> g(mu_);
  --base->copy_lent;
  unpin_locked(base);
  auto it = index_.find(m.session);
  // The entry may have changed meanwhile (erased, truncated, saved): the append path then
  // decides as usual.
  if (!room || base->doomed || it == index_.end() || it->second != base || base->moving ||
      base->ssd_copy != copy || in_flight_.count(m.session)) {
    if (room) tier(TierKind::Ssd)->allocator().release(fresh);
    return false;
  }
  std::vector<uint64_t> stale;
  m.slots.assign(m.n_chunks(), 0);
  splice_copy(nt, share, copy, copy_nt, fresh, &m.slots, &stale);
  const uint64_t bnt = base->meta.n_token_chunks();
  for (uint64_t i = 0; i < m.checksums.size(); ++i) {  // the taken chunks hold the base's bytes
    if (i % nt < share) m.checksums[i] = base->meta.checksums[i / nt * bnt + i % nt];
  }
  // The save owns the chunks it took (freed if it fails); the base and the rest of its copy go.
  st->own = fresh;
  for (uint64_t i = 0; i < m.slots.size(); ++i) {
    if (i % nt < share) st->own.push_back(m.slots[i]);
  }
  base->ssd_copy = std::move(stale);
  base->copy_nt = base->copy_valid = 0;
  unlink_locked(base);
  st->copy_owner = base;
  st->tier = TierKind::Ssd;
  st->first_chunk = share;
  st->tail_offset = 0;
  stats_.add(Counter::SavesAdmittedBelow);
  if (share > 0) stats_.add(Counter::SsdCopyChunksReused, share * lanes);
  return true;
}

}  // namespace cb::store
