#include "lib/policy/baselines.h"

#include <algorithm>

namespace cb::policy {

std::vector<size_t> Lru::order(const std::vector<EntryMeta>& entries,
                               std::vector<size_t> candidates, const Capacity& /*capacity*/,
                               const LookAhead& /*ahead*/) const {
  std::sort(candidates.begin(), candidates.end(),
            [&](size_t a, size_t b) { return lru_before(entries[a], entries[b]); });
  return candidates;
}

std::vector<size_t> Fifo::order(const std::vector<EntryMeta>& entries,
                                std::vector<size_t> candidates, const Capacity& /*capacity*/,
                                const LookAhead& /*ahead*/) const {
  std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
    const EntryMeta& x = entries[a];
    const EntryMeta& y = entries[b];
    if (x.inserted != y.inserted) return x.inserted < y.inserted;
    return x.session < y.session;
  });
  return candidates;
}

}  // namespace cb::policy
