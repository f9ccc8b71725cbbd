#include "lib/policy/placement.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <unordered_set>

#include "lib/core/error.h"

namespace cb::policy {

Windows window_lengths(const Capacity& capacity, uint64_t skv) {
  if (skv == 0) {
    throw make_error("policy", "average KV-cache size per session (Skv) is 0",
                     "pass the mean entry size in bytes, or leave LookAhead::skv at 0 to "
                     "derive it from the entries");
  }
  const uint64_t total = capacity.dram > std::numeric_limits<uint64_t>::max() - capacity.ssd
                             ? std::numeric_limits<uint64_t>::max()
                             : capacity.dram + capacity.ssd;
  const auto jobs = [&](uint64_t bytes) {
    const uint64_t n = bytes / skv;
    return static_cast<size_t>(std::max<uint64_t>(1, std::min<uint64_t>(n, SIZE_MAX)));
  };
  return {jobs(capacity.dram), jobs(total)};
}

uint64_t effective_skv(const std::vector<EntryMeta>& entries, const LookAhead& ahead) {
  if (ahead.skv != 0) return ahead.skv;
  uint64_t sum = 0, n = 0;
  for (const EntryMeta& e : entries) {
    if (e.tier == Tier::kDram || e.tier == Tier::kSsd) {
      sum += e.bytes;
      ++n;
    }
  }
  return mean_skv(sum, n);
}

uint64_t mean_skv(uint64_t bytes, uint64_t count) {
  if (count == 0 || bytes == 0) return 1;
  return bytes / count + (bytes % count != 0 ? 1 : 0);
}

std::vector<size_t> SchedulerAware::order(const std::vector<EntryMeta>& entries,
                                          std::vector<size_t> candidates, const Capacity& capacity,
                                          const LookAhead& ahead) const {
  const size_t window = window_lengths(capacity, effective_skv(entries, ahead)).eviction;
  // Sort keys computed once per candidate (not per comparison): the window position, or
  // SIZE_MAX for entries outside the window.
  const std::vector<size_t> key = next_uses(entries, candidates, ahead.queue, window);
  std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
    const bool wa = key[a] != SIZE_MAX, wb = key[b] != SIZE_MAX;
    if (wa != wb) return !wa;                            // outside the window first
    if (!wa) return lru_before(entries[a], entries[b]);  // LRU among those outside
    return key[a] > key[b];                              // inside: tail first (positions unique)
  });
  return candidates;
}

OrderSpec SchedulerAware::order_spec(const Capacity& capacity, uint64_t skv,
                                     size_t /*queue_len*/) const {
  return {OrderSpec::Base::kLru, window_lengths(capacity, skv).eviction};
}

std::vector<Move> plan_prefetch(const std::vector<EntryMeta>& entries, const Capacity& capacity,
                                const LookAhead& ahead) {
  validate_entries(entries);
  std::vector<EntryMeta> work = entries;
  LookAhead step = ahead;
  step.skv = effective_skv(entries, ahead);  // fixed for the whole plan
  const size_t window = window_lengths(capacity, step.skv).prefetch;
  const std::unordered_set<uint64_t> pinned(ahead.pinned.begin(), ahead.pinned.end());
  const SchedulerAware policy;
  std::vector<Move> out;
  const size_t n = std::min(window, ahead.queue.size());
  for (size_t p = 0; p < n; ++p) {
    const uint64_t session = ahead.queue[p];
    step.pinned.push_back(session);  // jobs up to p are at least as urgent as this one
    if (pinned.count(session) != 0) continue;
    const auto it = std::find_if(work.begin(), work.end(),
                                 [&](const EntryMeta& e) { return e.session == session; });
    if (it == work.end() || it->tier != Tier::kSsd) continue;  // absent, already close, or repeat
    const Move fetch{session, Tier::kSsd, Tier::kDram, it->bytes};
    const Plan room = policy.make_room(work, capacity, Tier::kDram, fetch.bytes, step);
    if (!room.ok) break;
    apply_moves(work, room.moves);
    apply_moves(work, {fetch});
    out.insert(out.end(), room.moves.begin(), room.moves.end());
    out.push_back(fetch);
  }
  return out;
}

}  // namespace cb::policy
