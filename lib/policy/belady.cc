#include "lib/policy/belady.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace cb::policy {

std::vector<size_t> Belady::order(const std::vector<EntryMeta>& entries,
                                  std::vector<size_t> candidates, const Capacity& /*capacity*/,
                                  const LookAhead& ahead) const {
  // Next use computed once per candidate, not per comparison (never used again: SIZE_MAX).
  const std::vector<size_t> next_use =
      next_uses(entries, candidates, ahead.queue, ahead.queue.size());
  std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
    const size_t na = next_use[a], nb = next_use[b];
    if (na != nb) return na > nb;
    return lru_before(entries[a], entries[b]);
  });
  return candidates;
}

}  // namespace cb::policy
