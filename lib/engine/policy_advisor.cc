#include "lib/engine/policy_advisor.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "lib/policy/placement.h"
#include "lib/policy/registry.h"

namespace cb::engine {
namespace {

policy::Tier to_policy(store::TierKind t) {
  switch (t) {
    case store::TierKind::Hbm: return policy::Tier::kHbm;
    case store::TierKind::Dram: return policy::Tier::kDram;
    case store::TierKind::Ssd: return policy::Tier::kSsd;
  }
  return policy::Tier::kDram;
}

std::vector<policy::EntryMeta> to_meta(const std::vector<store::EntryInfo>& infos) {
  std::vector<policy::EntryMeta> out;
  out.reserve(infos.size());
  for (const auto& e : infos) {
    policy::EntryMeta m;
    m.session = e.session;
    m.tier = to_policy(e.tier);
    m.bytes = e.bytes;
    m.last_access = policy_ticks(e.last_access);
    m.inserted = policy_ticks(e.created);
    out.push_back(m);
  }
  return out;
}

}  // namespace

int64_t policy_ticks(double seconds) {
  return static_cast<int64_t>(std::llround(seconds * 1e6));
}

PolicyAdvisor::PolicyAdvisor(const std::string& policy_name, policy::Capacity capacity,
                             uint64_t skv)
    : policy_(policy::make_eviction_policy(policy_name)), capacity_(capacity), skv_(skv) {}

std::vector<store::Victim> PolicyAdvisor::choose_victims(
    store::TierKind tier, uint64_t bytes_needed, const std::vector<store::EntryInfo>& candidates,
    const std::vector<store::SessionId>& lookahead, double /*now*/) {
  const std::vector<policy::EntryMeta> entries = to_meta(candidates);
  policy::LookAhead ahead;
  ahead.queue.assign(lookahead.begin(), lookahead.end());
  ahead.skv = skv_;
  std::vector<size_t> idx(entries.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::vector<store::Victim> out;
  uint64_t freed = 0;
  for (size_t i : policy_->order(entries, idx, capacity_, ahead)) {
    if (freed >= bytes_needed) break;
    if (!ahead.queue.empty() && entries[i].session == ahead.queue.front())
      continue;  // about to run
    out.push_back({entries[i].session, tier == store::TierKind::Ssd});
    freed += entries[i].bytes;
  }
  return out;
}

std::vector<store::SessionId> PolicyAdvisor::choose_prefetch(
    const std::vector<store::SessionId>& lookahead, const std::vector<store::EntryInfo>& on_ssd,
    uint64_t /*dram_free_bytes*/, double /*now*/) {
  if (!policy_->uses_lookahead()) return {};
  policy::LookAhead ahead;
  ahead.skv = skv_;
  return choose_prefetch_with_mean(lookahead, on_ssd,
                                   policy::effective_skv(to_meta(on_ssd), ahead));
}

policy::OrderSpec PolicyAdvisor::order_spec(uint64_t dram_ssd_bytes, uint64_t dram_ssd_count,
                                            size_t lookahead_len) const {
  // policy::effective_skv of the candidates.
  const uint64_t skv = skv_ != 0 ? skv_ : policy::mean_skv(dram_ssd_bytes, dram_ssd_count);
  return policy_->order_spec(capacity_, skv, lookahead_len);
}

size_t PolicyAdvisor::prefetch_window(uint64_t mean_ssd_bytes) const {
  if (!policy_->uses_lookahead()) return 0;
  const uint64_t skv = skv_ > 0 ? skv_ : std::max<uint64_t>(mean_ssd_bytes, 1);
  return policy::window_lengths(capacity_, skv).prefetch;
}

std::vector<store::SessionId> PolicyAdvisor::choose_prefetch_with_mean(
    const std::vector<store::SessionId>& lookahead, const std::vector<store::EntryInfo>& on_ssd,
    uint64_t mean_ssd_bytes) const {
  const size_t window = prefetch_window(mean_ssd_bytes);
  std::unordered_set<store::SessionId> ssd;
  for (const auto& e : on_ssd) ssd.insert(e.session);
  std::vector<store::SessionId> out;
  std::unordered_set<store::SessionId> seen;
  for (size_t i = 0; i < lookahead.size() && i < window; ++i) {
    if (ssd.count(lookahead[i]) != 0 && seen.insert(lookahead[i]).second)
      out.push_back(lookahead[i]);
  }
  return out;
}

}  // namespace cb::engine
