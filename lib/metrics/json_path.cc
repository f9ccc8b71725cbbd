#include "lib/metrics/json_path.h"

namespace cb::metrics {

const nlohmann::json* json_at(const nlohmann::json& root, const std::string& dotted_path) {
  const nlohmann::json* node = &root;
  size_t begin = 0;
  while (true) {
    const size_t dot = dotted_path.find('.', begin);
    const std::string key =
        dotted_path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (key.empty() || !node->is_object()) return nullptr;
    const auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string::npos) return node;
    begin = dot + 1;
  }
}

}  // namespace cb::metrics
