#pragma once
/// Adapts lib/policy's pure placement policies (scheduler-aware, LRU, FIFO, Belady) to the
/// store's PlacementAdvisor hook. It lives in lib/engine because the store may not depend
/// on lib/policy (policies never do I/O, the store never decides).

#include <memory>
#include <string>

#include "lib/policy/eviction.h"
#include "lib/policy/types.h"
#include "lib/store/advisor.h"

namespace cb::engine {

/// The store's clock (seconds) as the integer ticks (microseconds) the policies compare.
int64_t policy_ticks(double seconds);

class PolicyAdvisor final : public store::PlacementAdvisor {
 public:
  /// `policy_name`: one of policy::eviction_policy_names() ("scheduler-aware", "lru",
  /// "fifo", "belady"). `capacity` sizes the look-ahead windows (Cmem, Cdisk); `skv` is the
  /// average KV bytes of a session (0: the mean of the entries seen). Throws cb::Error for
  /// an unknown name.
  PolicyAdvisor(const std::string& policy_name, policy::Capacity capacity, uint64_t skv = 0);

  /// Ranks `candidates` with the policy (the look-ahead as the job queue, its head pinned)
  /// and returns the first ones until `bytes_needed` are freed. SSD victims are dropped.
  std::vector<store::Victim> choose_victims(store::TierKind tier, uint64_t bytes_needed,
                                            const std::vector<store::EntryInfo>& candidates,
                                            const std::vector<store::SessionId>& lookahead,
                                            double now) override;

  /// Scheduler-aware fetching: the SSD entries of the sessions in the prefetch window
  /// (Cmem / Skv jobs of the look-ahead), in queue order. The store fetches them while they
  /// fit, making room through choose_victims. Empty for policies that ignore the look-ahead
  /// (LRU, FIFO): they load hits from SSD on demand.
  std::vector<store::SessionId> choose_prefetch(const std::vector<store::SessionId>& lookahead,
                                                const std::vector<store::EntryInfo>& on_ssd,
                                                uint64_t dram_free_bytes, double now) override;

  /// choose_prefetch with Skv given: `on_ssd` then only needs the look-ahead's SSD entries
  /// (sim mode keeps the SSD entries' mean size as a running sum instead of a scan).
  /// `mean_ssd_bytes` is what choose_prefetch would compute: the rounded-up mean size.
  std::vector<store::SessionId> choose_prefetch_with_mean(
      const std::vector<store::SessionId>& lookahead, const std::vector<store::EntryInfo>& on_ssd,
      uint64_t mean_ssd_bytes) const;

  /// How many look-ahead sessions choose_prefetch_with_mean considers (Cmem / Skv jobs; 0 for
  /// LRU and FIFO): callers need not scan further.
  size_t prefetch_window(uint64_t mean_ssd_bytes) const;

  /// choose_victims' order as a policy::OrderSpec, for candidates whose DRAM and SSD entries
  /// (HBM entries count for nothing, as in policy::effective_skv) hold `dram_ssd_bytes` bytes in
  /// `dram_ssd_count` entries, and a look-ahead of `lookahead_len` sessions. With it a store
  /// that keeps its candidates sorted in the spec's base order (by policy_ticks of their access
  /// times) draws the same victims as choose_victims without ranking every candidate (sim mode).
  policy::OrderSpec order_spec(uint64_t dram_ssd_bytes, uint64_t dram_ssd_count,
                               size_t lookahead_len) const;

  const policy::EvictionPolicy& policy() const { return *policy_; }

 private:
  std::unique_ptr<policy::EvictionPolicy> policy_;
  policy::Capacity capacity_;
  uint64_t skv_;
};

}  // namespace cb::engine
