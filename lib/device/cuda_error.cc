#include "lib/device/cuda_error.h"

#include <cstring>

namespace cb::device {

std::string cuda_error_message(const std::string& call, const char* file, int line,
                               const std::string& error_name, const std::string& error_text,
                               const std::string& fix) {
  // The path from the source root on: __FILE__ is absolute in most builds.
  std::string where = file != nullptr ? file : "?";
  for (const char* root : {"/lib/", "/kernels/", "/eval/", "/apps/", "/tests/"}) {
    const size_t at = where.rfind(root);
    if (at != std::string::npos) {
      where = where.substr(at + 1);
      break;
    }
  }
  std::string m = where + ":" + std::to_string(line) + ": " + call + " failed: " + error_name;
  if (!error_text.empty()) m += " (" + error_text + ")";
  if (!fix.empty()) m += "; " + fix;
  return m;
}

}  // namespace cb::device
