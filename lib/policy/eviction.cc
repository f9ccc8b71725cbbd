#include "lib/policy/eviction.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>

#include "lib/core/error.h"

namespace cb::policy {

std::string_view tier_name(Tier tier) {
  switch (tier) {
    case Tier::kHbm: return "hbm";
    case Tier::kDram: return "dram";
    case Tier::kSsd: return "ssd";
    case Tier::kDrop: return "drop";
  }
  return "unknown";
}

uint64_t used_bytes(const std::vector<EntryMeta>& entries, Tier tier) {
  uint64_t sum = 0;
  for (const EntryMeta& e : entries) {
    if (e.tier == tier) sum += e.bytes;
  }
  return sum;
}

uint64_t capacity_of(const Capacity& capacity, Tier tier) {
  switch (tier) {
    case Tier::kDram: return capacity.dram;
    case Tier::kSsd: return capacity.ssd;
    default: break;
  }
  throw make_error("policy", "no managed capacity for tier '" + std::string(tier_name(tier)) + "'",
                   "placement policies manage only the dram and ssd tiers");
}

void validate_entries(const std::vector<EntryMeta>& entries) {
  std::vector<uint64_t> ids;
  ids.reserve(entries.size());
  for (const EntryMeta& e : entries) {
    if (e.tier == Tier::kDrop) {
      throw make_error("policy",
                       "entry of session " + std::to_string(e.session) + " is in tier 'drop'",
                       "remove dropped entries from the list passed to the policy");
    }
    ids.push_back(e.session);
  }
  std::sort(ids.begin(), ids.end());
  const auto dup = std::adjacent_find(ids.begin(), ids.end());
  if (dup != ids.end()) {
    throw make_error("policy", "session " + std::to_string(*dup) + " has more than one entry",
                     "a session has one entry in exactly one tier");
  }
}

void apply_moves(std::vector<EntryMeta>& entries, const std::vector<Move>& moves) {
  for (const Move& m : moves) {
    const auto it = std::find_if(entries.begin(), entries.end(),
                                 [&](const EntryMeta& e) { return e.session == m.session; });
    if (it == entries.end() || it->tier != m.from) {
      throw make_error("policy",
                       "move of session " + std::to_string(m.session) + " from '" +
                           std::string(tier_name(m.from)) + "' does not match the entries",
                       "apply a plan only to the entries it was computed from");
    }
    if (m.to == Tier::kDrop) {
      entries.erase(it);
    } else {
      it->tier = m.to;
    }
  }
}

std::vector<size_t> next_uses(const std::vector<EntryMeta>& entries,
                              const std::vector<size_t>& candidates,
                              const std::vector<uint64_t>& queue, size_t limit) {
  std::vector<size_t> key(entries.size(), SIZE_MAX);
  std::vector<std::pair<uint64_t, size_t>> by_session;  // (session, entry index), sorted
  by_session.reserve(candidates.size());
  for (size_t i : candidates) by_session.emplace_back(entries[i].session, i);
  std::sort(by_session.begin(), by_session.end());
  size_t unseen = by_session.size();
  const size_t n = std::min(limit, queue.size());
  for (size_t p = 0; p < n && unseen > 0; ++p) {
    auto it =
        std::lower_bound(by_session.begin(), by_session.end(), std::make_pair(queue[p], size_t{0}));
    for (; it != by_session.end() && it->first == queue[p]; ++it) {
      if (key[it->second] == SIZE_MAX) {
        key[it->second] = p;
        --unseen;
      }
    }
  }
  return key;
}

bool lru_before(const EntryMeta& a, const EntryMeta& b) {
  if (a.last_access != b.last_access) return a.last_access < b.last_access;
  if (a.inserted != b.inserted) return a.inserted < b.inserted;
  return a.session < b.session;
}

Plan EvictionPolicy::make_room(const std::vector<EntryMeta>& entries, const Capacity& capacity,
                               Tier tier, uint64_t bytes_needed, const LookAhead& ahead) const {
  const uint64_t cap = capacity_of(capacity, tier);
  validate_entries(entries);
  const Plan fail{false, {}};
  if (bytes_needed > cap) return fail;
  const uint64_t used = used_bytes(entries, tier);
  const uint64_t allowed = cap - bytes_needed;  // what may stay in the tier
  if (used <= allowed) return {};

  std::unordered_set<uint64_t> pinned(ahead.pinned.begin(), ahead.pinned.end());
  if (!ahead.queue.empty()) pinned.insert(ahead.queue.front());
  const auto movable = [&](size_t i, Tier t) {
    return entries[i].tier == t && pinned.count(entries[i].session) == 0;
  };

  // 1. Victims of `tier`, in policy order, until what stays fits.
  std::vector<size_t> cands;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (movable(i, tier)) cands.push_back(i);
  }
  cands = order(entries, std::move(cands), capacity, ahead);
  std::vector<size_t> victims;
  uint64_t left = used;
  for (size_t i : cands) {
    if (left <= allowed) break;
    victims.push_back(i);
    left -= entries[i].bytes;
  }
  if (left > allowed) return fail;

  Plan plan;
  if (tier == Tier::kSsd) {
    for (size_t i : victims) {
      plan.moves.push_back({entries[i].session, Tier::kSsd, Tier::kDrop, entries[i].bytes});
    }
    return plan;
  }

  // 2. Cascade: DRAM victims go to SSD; make room there by ranking SSD entries and the
  //    victims together, dropping from the front.
  uint64_t demoted = 0;
  for (size_t i : victims) demoted += entries[i].bytes;
  const uint64_t ssd_used = used_bytes(entries, Tier::kSsd);
  std::vector<char> drop_victim(entries.size(), 0);
  std::vector<size_t> ssd_drops;
  if (ssd_used + demoted > capacity.ssd) {
    std::vector<size_t> pool = victims;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (movable(i, Tier::kSsd)) pool.push_back(i);
    }
    pool = order(entries, std::move(pool), capacity, ahead);
    uint64_t excess = ssd_used + demoted - capacity.ssd;
    for (size_t i : pool) {
      if (excess == 0) break;
      if (entries[i].tier == Tier::kSsd) {
        ssd_drops.push_back(i);
      } else {
        drop_victim[i] = 1;
      }
      excess -= std::min(excess, entries[i].bytes);
    }
    if (excess > 0) return fail;  // SSD was over capacity before the call
  }
  for (size_t i : ssd_drops) {
    plan.moves.push_back({entries[i].session, Tier::kSsd, Tier::kDrop, entries[i].bytes});
  }
  for (size_t i : victims) {
    const Tier to = drop_victim[i] ? Tier::kDrop : Tier::kSsd;
    plan.moves.push_back({entries[i].session, Tier::kDram, to, entries[i].bytes});
  }
  return plan;
}

}  // namespace cb::policy
