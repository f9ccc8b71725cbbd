#include "lib/store/advisor.h"

#include <algorithm>
#include <unordered_map>

namespace cb::store {

std::vector<Victim> LruAdvisor::choose_victims(TierKind tier, uint64_t bytes_needed,
                                               const std::vector<EntryInfo>& candidates,
                                               const std::vector<SessionId>& lookahead,
                                               double now) {
  std::unordered_map<SessionId, size_t> upcoming;
  for (size_t i = 0; i < lookahead.size(); ++i) upcoming.emplace(lookahead[i], i);
  std::vector<const EntryInfo*> order;
  for (const auto& c : candidates) order.push_back(&c);
  std::sort(order.begin(), order.end(), [&](const EntryInfo* a, const EntryInfo* b) {
    const bool ua = upcoming.count(a->session) > 0, ub = upcoming.count(b->session) > 0;
    if (ua != ub) return ub;                                     // sessions about to run go last
    if (ua) return upcoming[a->session] > upcoming[b->session];  // latest in the window first
    if (a->last_access != b->last_access) return a->last_access < b->last_access;
    return a->session < b->session;
  });
  std::vector<Victim> out;
  uint64_t freed = 0;
  for (const EntryInfo* e : order) {
    if (freed >= bytes_needed) break;
    out.push_back(Victim{e->session, false});
    freed += e->bytes;
  }
  return out;
}

std::vector<SessionId> LruAdvisor::choose_prefetch(const std::vector<SessionId>& lookahead,
                                                   const std::vector<EntryInfo>& on_ssd,
                                                   uint64_t dram_free_bytes, double now) {
  std::unordered_map<SessionId, uint64_t> size;
  for (const auto& e : on_ssd) size[e.session] = e.bytes;
  std::vector<SessionId> out;
  uint64_t used = 0;
  for (SessionId s : lookahead) {
    auto it = size.find(s);
    if (it == size.end()) continue;
    if (used + it->second > dram_free_bytes) break;
    used += it->second;
    out.push_back(s);
    size.erase(it);
  }
  return out;
}

}  // namespace cb::store
