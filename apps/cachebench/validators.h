#pragma once
/// Option checks with messages a user can act on. CLI11 2.1's PositiveNumber and Range print
/// their bounds with %f (DBL_MAX as 309 digits) and let nan and inf through.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/store/size_parse.h"

namespace cb::app {

namespace detail {
inline std::string bound(double v) {
  char b[32];
  // Whole numbers in full (1048576, not 1.04858e+06), others in %g.
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(b, sizeof b, "%.0f", v);
  } else {
    std::snprintf(b, sizeof b, "%g", v);
  }
  return b;
}

/// A number `ok` accepts: "'x' is not a number", else "must be <rule>, got x".
inline CLI::Validator number(const std::string& desc, const std::string& rule,
                             std::function<bool(double)> ok) {
  return CLI::Validator(
      [rule, ok](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end == s.c_str() || *end != '\0') return "'" + s + "' is not a number";
        return ok(v) ? "" : "must be " + rule + ", got " + s;
      },
      desc);
}
}  // namespace detail

/// A finite number in [lo, hi] (integers or decimals, as the option's type reads them).
inline CLI::Validator in_range(double lo, double hi) {
  const std::string desc = "in " + detail::bound(lo) + ".." + detail::bound(hi);
  return detail::number(desc, desc, [lo, hi](double v) { return v >= lo && v <= hi; });
}

/// A number in the open interval (lo, hi).
inline CLI::Validator in_open_range(double lo, double hi) {
  const std::string desc = "in (" + detail::bound(lo) + ", " + detail::bound(hi) + ")";
  return detail::number(desc, desc, [lo, hi](double v) { return v > lo && v < hi; });
}

/// A number in the half-open interval (lo, hi].
inline CLI::Validator in_left_open_range(double lo, double hi) {
  const std::string desc = "in (" + detail::bound(lo) + ", " + detail::bound(hi) + "]";
  return detail::number(desc, desc, [lo, hi](double v) { return v > lo && v <= hi; });
}

/// A size store::parse_size reads (512MiB, 10TiB, 0), or `keyword` (e.g. "auto") when given.
inline CLI::Validator size_value(const std::string& keyword = "") {
  return CLI::Validator(
      [keyword](std::string& s) -> std::string {
        if (!keyword.empty() && s == keyword) return "";
        try {
          (void)store::parse_size(s, "");
          return "";
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      keyword.empty() ? "SIZE" : "SIZE|" + keyword);
}

/// `keyword` (e.g. "auto") or a whole number in [lo, hi], for an option read as text.
inline CLI::Validator count_or(const std::string& keyword, long long lo, long long hi) {
  const std::string range =
      detail::bound(static_cast<double>(lo)) + ".." + detail::bound(static_cast<double>(hi));
  return CLI::Validator(
      [keyword, lo, hi, range](std::string& s) -> std::string {
        if (s == keyword) return "";
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || end == s.c_str() || *end != '\0') {
          return "'" + s + "' is neither a whole number nor " + keyword;
        }
        if (errno == ERANGE || v < lo || v > hi) {
          return "must be " + keyword + " or in " + range + ", got " + s;
        }
        return "";
      },
      keyword + "|INT in " + range);
}

/// A finite number >= lo.
inline CLI::Validator at_least(double lo) {
  const std::string desc = ">= " + detail::bound(lo);
  return detail::number(desc, "a finite number " + desc,
                        [lo](double v) { return std::isfinite(v) && v >= lo; });
}

/// A finite number > lo.
inline CLI::Validator above(double lo) {
  const std::string desc = "> " + detail::bound(lo);
  return detail::number(desc, "a finite number " + desc,
                        [lo](double v) { return std::isfinite(v) && v > lo; });
}

/// The name of existing_dir()'s validator: a directory the command reads files from, in which
/// check_output_paths refuses an output that would overwrite one of them.
inline constexpr const char* kInputDir = "input-dir";

/// The name of output_file()'s validator, by which check_output_paths finds the outputs.
inline constexpr const char* kOutputFile = "output-file";

/// Why a file or directory without write permission is refused although root could write it.
inline constexpr const char* kReadOnly =
    " is read-only (no write permission, which root would override)";

namespace detail {
inline std::string output_file_problem(std::string& s) {
  if (s.empty()) return "an empty path; name the file to write";
  // The file written: a symbolic link's target, which is replaced (lib/core atomic_file), so
  // its directory is the one checked.
  std::string path = s;
  struct stat st {};
  if (::lstat(s.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char* real = ::realpath(s.c_str(), nullptr)) {
      path = real;
      std::free(real);
    }
  }
  bool stream = false;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "'" + s + "' is a directory; name a file";
    // Written whole through a temporary file renamed over it, or straight to a character
    // device or pipe; a result is never meant to go onto a disk (lib/core atomic_file).
    if (S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
      return "'" + s + "' is a block device or a socket; name a file";
    }
    if (::access(path.c_str(), W_OK) != 0) return "'" + s + "' exists and is not writable";
    // Root may write anything: a file without write permission (a dataset, a model) is
    // refused all the same.
    if (S_ISREG(st.st_mode) && (st.st_mode & 0222) == 0) {
      return "'" + s + "'" + kReadOnly + "; name another file, or chmod u+w it first";
    }
    stream = S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode);
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return "the directory of '" + s + "' does not exist; create it first";
  }
  if (!stream && (st.st_mode & 0222) == 0) {
    return "the directory of '" + s + "'" + kReadOnly + "; write elsewhere";
  }
  // Results are written to a temporary file beside the output, then renamed: the directory
  // must take a new file. Tried, not asked of access(), which says yes to root everywhere
  // (/sys, /proc).
  const std::string probe = dir + "/.cachebench-probe." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return "cannot create a file in the directory of '" + s + "' (" + std::strerror(errno) + ")";
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}
}  // namespace detail

/// A file the command will write: checked before any work (a run that cannot save its
/// result should not take an hour first). Not empty, not a directory; its directory exists
/// and is writable, or the file itself is. check_output_paths (run before every command)
/// also refuses an output that is one of the command's input files or another output.
inline CLI::Validator output_file() {
  return CLI::Validator(detail::output_file_problem, "FILE").name(kOutputFile);
}

/// A directory the command writes scratch files in: exists, is a directory, is writable
/// (never created: a typo would otherwise make a directory anywhere). Empty passes (the
/// option's "skip").
inline CLI::Validator writable_dir() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return "";
        struct stat st {};
        if (::stat(s.c_str(), &st) != 0) return "'" + s + "' does not exist; create it first";
        if (!S_ISDIR(st.st_mode)) return "'" + s + "' is not a directory";
        if (::access(s.c_str(), W_OK | X_OK) != 0) return "'" + s + "' is not writable";
        // Root may write anything: a directory without write permission is refused all the
        // same, as output_file() refuses one to write a result in.
        if ((st.st_mode & 0222) == 0) return "'" + s + "'" + kReadOnly + "; write elsewhere";
        return "";
      },
      "DIR");
}

/// A dataset directory the command reads: exists and is a directory (`what` says what it
/// should hold, for the message when a file was given instead).
inline CLI::Validator existing_dir(const std::string& what) {
  return CLI::Validator(
             [what](std::string& s) -> std::string {
               struct stat st {};
               if (s.empty()) return "an empty path; pass the directory holding " + what;
               if (::stat(s.c_str(), &st) != 0) return "'" + s + "' does not exist";
               if (!S_ISDIR(st.st_mode)) {
                 return "'" + s + "' is a file; pass the directory holding " + what;
               }
               return "";
             },
             "DIR")
      .name(kInputDir);
}

/// The context-overflow study's --truncate-ratio and --sink (perplexity and mmlu).
struct OverflowOptions {
  CLI::Option* truncate_ratio;
  CLI::Option* sink;
};
inline OverflowOptions add_overflow_options(CLI::App* sub, double* truncate_ratio, int* sink) {
  return {sub->add_option("--truncate-ratio", *truncate_ratio,
                          "overflow study: fraction of the window dropped on overflow")
              ->capture_default_str()
              ->check(in_open_range(0.0, 1.0)),
          sub->add_option("--sink", *sink,
                          "overflow study: first tokens of the window that are never dropped")
              ->capture_default_str()
              ->check(at_least(0))};
}

/// Throws cb::Error naming the first of `opts` that was given: it applies to the overflow
/// study only, which this run is not, and a user who set it expects it to count.
inline void refuse_outside_overflow_study(std::initializer_list<const CLI::Option*> opts) {
  for (const CLI::Option* o : opts) {
    if (o->count() > 0) {
      throw cb::make_error(o->get_name(),
                           "applies to the overflow study only (--method tt|ca|nkvt|all)",
                           "drop " + o->get_name() + " or pick an overflow --method");
    }
  }
}

/// Whether `sub` has an option `name` and the command line gave it.
inline bool was_given(const CLI::App& sub, const char* name) {
  const CLI::Option* o = sub.get_option_no_throw(name);
  return o != nullptr && o->count() > 0;
}

/// Throws cb::Error naming the first of `names` (options of `sub`) that was given: `why` it
/// would have no effect in this run, whose user set it expecting it to count.
inline void refuse_given(CLI::App& sub, const std::vector<const char*>& names,
                         const std::string& why, const std::string& fix) {
  for (const char* n : names) {
    if (was_given(sub, n)) throw cb::make_error(n, why, fix);
  }
}

/// Throws cb::Error naming the first option of a ShareGPT file's text (`--tokenizer`,
/// `--no-join-split`, `--max-message-chars`) that `sub` was given, when the trace it read is a
/// length trace (`trace_kind` "lengths"), whose token counts are given: it had no effect.
inline void refuse_text_options_on_lengths(CLI::App& sub, const std::string& trace_kind) {
  if (trace_kind != "lengths") return;
  refuse_given(sub, {"--tokenizer", "--no-join-split", "--max-message-chars"},
               "has no effect on a length trace, whose token counts are given",
               "drop it (it applies to a ShareGPT file's text)");
}

}  // namespace cb::app
