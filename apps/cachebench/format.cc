#include "apps/cachebench/format.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lib/core/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/json_depth.h"
#include "lib/metrics/gate.h"
#include "lib/tokenizer/unicode.h"

namespace cb::app {

std::string human_count(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) {
    std::snprintf(buf, sizeof buf, "%.2fB", static_cast<double>(n) / 1e9);
  } else if (n >= 1000000ull) {
    std::snprintf(buf, sizeof buf, "%.2fM", static_cast<double>(n) / 1e6);
  } else if (n >= 1000ull) {
    std::snprintf(buf, sizeof buf, "%.1fK", static_cast<double>(n) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  }
  return buf;
}

std::string human_bytes(uint64_t n) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0 || v == static_cast<double>(static_cast<uint64_t>(v))) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

void write_json(const std::string& path, const nlohmann::json& j) {
  write_file_atomically(path, j.dump(2) + "\n", "the JSON result");
}

nlohmann::json load_json_document(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw make_error(path, "is a directory", "pass a JSON result file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw make_error(path, "cannot be opened", "check the path (no such file?)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw make_error(path, "cannot be read", "check the file's permissions");
  // A model or other binary file is named as such, not parsed as broken JSON.
  if (text.str().find('\0') != std::string::npos) {
    throw make_error(path, "holds a NUL byte, so it is not a JSON result (a binary file?)",
                     "pass a result written with --out");
  }
  // Results nest a few levels; rendering or copying a value recurses once per level.
  if (json_nesting_depth(text.str()) > 64) {
    throw make_error(path, "nests JSON deeper than 64 levels", "pass a result written with --out");
  }
  return metrics::parse_document(text.str(), path);
}

void stream_text(const std::string& text, std::string* shown, bool last) {
  const std::string add = tokenizer::stream_increment(text, shown, last);
  if (add.empty()) return;
  std::fwrite(add.data(), 1, add.size(), stdout);  // NUL bytes too
  std::fflush(stdout);
}

}  // namespace cb::app
