#pragma once
/// Eviction policies by name, for configs and the CLI.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lib/policy/eviction.h"

namespace cb::policy {

/// Names accepted by make_eviction_policy, in a stable order.
std::vector<std::string> eviction_policy_names();

/// A new policy named `name` ("scheduler-aware", "lru", "fifo", "belady"); throws
/// cb::Error listing the valid names otherwise.
std::unique_ptr<EvictionPolicy> make_eviction_policy(std::string_view name);

}  // namespace cb::policy
