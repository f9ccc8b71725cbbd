#include "lib/metrics/json_path.h"

#include <string>

namespace cb::metrics {

const nlohmann::json* json_at(const nlohmann::json& root, const std::string& dotted_path) {
  const nlohmann::json* node = &root;
  size_t begin = 0;
  while (true) {
    const size_t dot = dotted_path.find('.', begin);
    const std::string key =
        dotted_path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (key.empty()) return nullptr;
    if (node->is_array()) {  // "results.0.ppl": a list's element by its index
      if (key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
        return nullptr;
      const size_t i = std::stoul(key);
      if (i >= node->size()) return nullptr;
      node = &(*node)[i];
    } else {
      if (!node->is_object()) return nullptr;
      const auto it = node->find(key);
      if (it == node->end()) return nullptr;
      node = &*it;
    }
    if (dot == std::string::npos) return node;
    begin = dot + 1;
  }
}

}  // namespace cb::metrics
