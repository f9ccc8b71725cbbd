#pragma once
/// Errors a user can act on: library code throws cb::Error with a message that says
/// what is wrong, which file/field/argument, and what to do. `main` prints it on one
/// line and exits non-zero. Expected outcomes (a miss, a full tier) are return values.

#include <stdexcept>
#include <string>

namespace cb {

/// The one exception type of cachebench; the message is complete and user-facing.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Builds "<where>: <what>; <fix>" (the fix part is omitted when empty).
inline Error make_error(const std::string& where, const std::string& what,
                        const std::string& fix = "") {
  std::string m = where.empty() ? what : where + ": " + what;
  if (!fix.empty()) m += "; " + fix;
  return Error(m);
}

}  // namespace cb
