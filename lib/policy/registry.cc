#include "lib/policy/registry.h"

#include "lib/core/error.h"
#include "lib/policy/baselines.h"
#include "lib/policy/belady.h"
#include "lib/policy/placement.h"

namespace cb::policy {

std::vector<std::string> eviction_policy_names() {
  return {"scheduler-aware", "lru", "fifo", "belady"};
}

std::unique_ptr<EvictionPolicy> make_eviction_policy(std::string_view name) {
  if (name == "scheduler-aware") return std::make_unique<SchedulerAware>();
  if (name == "lru") return std::make_unique<Lru>();
  if (name == "fifo") return std::make_unique<Fifo>();
  if (name == "belady") return std::make_unique<Belady>();
  std::string valid;
  for (const std::string& n : eviction_policy_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw make_error("policy", "unknown eviction policy '" + std::string(name) + "'",
                   "use one of: " + valid);
}

}  // namespace cb::policy
