#pragma once
/// Errors a user can act on: library code throws cb::Error with a message that says
/// what is wrong, which file/field/argument, and what to do. `main` prints it on one
/// line and exits non-zero. Expected outcomes (a miss, a full tier) are return values.

#include <stdexcept>
#include <string>

namespace cb {

/// `message` with each NUL byte written as \x00: what() is a C string, which would end at the
/// first one, cutting off the rest of a message that quotes a damaged name from a file.
inline std::string without_nul(const std::string& message) {
  if (message.find('\0') == std::string::npos) return message;
  std::string out;
  for (const char c : message) {
    if (c == '\0') {
      out += "\\x00";
    } else {
      out += c;
    }
  }
  return out;
}

/// The one exception type of cachebench; the message is complete and user-facing.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(without_nul(message)) {}
};

/// An Error in what the user asked for (an option's value, a study's name), found once the
/// command line was read: the CLI exits 2 for it, as for its parser's own refusals.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// "<where>: <what>; <fix>" (the fix part is omitted when empty).
inline std::string error_message(const std::string& where, const std::string& what,
                                 const std::string& fix) {
  std::string m = where.empty() ? what : where + ": " + what;
  if (!fix.empty()) m += "; " + fix;
  return m;
}

/// Builds "<where>: <what>; <fix>" (the fix part is omitted when empty).
inline Error make_error(const std::string& where, const std::string& what,
                        const std::string& fix = "") {
  return Error(error_message(where, what, fix));
}

/// make_error's message as a UsageError.
inline UsageError make_usage_error(const std::string& where, const std::string& what,
                                   const std::string& fix = "") {
  return UsageError(error_message(where, what, fix));
}

}  // namespace cb
