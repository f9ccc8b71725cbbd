#include "lib/policy/belady.h"

#include <algorithm>
#include <limits>

namespace cb::policy {

std::vector<size_t> Belady::order(const std::vector<EntryMeta>& entries,
                                  std::vector<size_t> candidates, const Capacity& /*capacity*/,
                                  const LookAhead& ahead) const {
  const auto pos = first_positions(ahead.queue, ahead.queue.size());
  const auto next_use = [&](size_t i) {
    const auto it = pos.find(entries[i].session);
    return it == pos.end() ? std::numeric_limits<size_t>::max() : it->second;
  };
  std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
    const size_t na = next_use(a), nb = next_use(b);
    if (na != nb) return na > nb;
    return lru_before(entries[a], entries[b]);
  });
  return candidates;
}

}  // namespace cb::policy
