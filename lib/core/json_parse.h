#pragma once
/// What the parsers of user files check beyond nlohmann's parse, and how they say why a parse
/// failed. Duplicate keys: nlohmann's parser keeps the last value of a key an object
/// holds twice, silently, so a file that says `"gemm_tflops": 218.4, "gemm_tflops": 0.001`
/// would run with whichever came last; parsers of user files refuse it instead. One linear SAX
/// pass: a parser callback that could see the keys makes every object's end scan its parent
/// (quadratic in a safetensors header's tensors).

#include <cstddef>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/error.h"

namespace cb {

/// A key some object holds twice: the key, and the key of the object holding it ("" for the
/// top-level object, or an object in an array).
struct DuplicateJsonKey {
  std::string key;
  std::string in;
};

namespace detail {

struct DuplicateKeyFinder : nlohmann::json_sax<nlohmann::json> {
  struct Level {
    bool object;
    std::string name;  // the key this object is the value of
    std::set<std::string> keys;
  };
  size_t max_depth;
  std::vector<Level> open;
  std::string last_key;
  bool found = false;
  DuplicateJsonKey twice;

  explicit DuplicateKeyFinder(size_t depth) : max_depth(depth) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    const bool in_object = !open.empty() && open.back().object;
    open.push_back({true, in_object ? last_key : std::string(), {}});
    return true;
  }
  bool end_object() override { return open.pop_back(), true; }
  bool start_array(std::size_t) override { return open.push_back({false, "", {}}), true; }
  bool end_array() override { return open.pop_back(), true; }
  bool key(string_t& k) override {
    last_key = k;
    if (open.size() <= max_depth && !open.back().keys.insert(k).second) {
      found = true;
      twice = {k, open.back().name};
      return false;  // the first is enough: stop
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // the caller's parse reports malformed text
  }
};

}  // namespace detail

/// nlohmann's reason for a failed parse, for a message: its text after the
/// "[json.exception.parse_error.101] " tag ("parse error at line L, column C: syntax error while
/// parsing object - unexpected ','; expected '}'"; a number too large for a double is an
/// out_of_range error, "number overflow parsing '1E400'"), on one line, at most 200 characters.
inline std::string json_error_reason(const nlohmann::json::exception& e) {
  std::string why = e.what();
  const size_t tag = why.find("] ");
  if (tag != std::string::npos) why = why.substr(tag + 2);
  for (char& c : why) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (why.size() > 200) why = why.substr(0, 200) + "...";
  return why;
}

/// Throws cb::Error naming `path` (with `fix`) when `text` holds a NUL byte: nlohmann's parser
/// takes one for the end of its input, so what follows it (another document, garbage) would go
/// unread, and JSON has no raw NUL (a string escapes it).
inline void refuse_json_nul(std::string_view text, const std::string& path,
                            const std::string& fix) {
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return;
  throw make_error(path, "holds a NUL byte at offset " + std::to_string(nul) + ", not JSON text",
                   fix);
}

/// Whether an object nested at most `max_depth` levels deep in `text` (1: the top-level object
/// alone) holds a key twice; `*twice` gets the first such key. Parse `text` first: in malformed
/// text it looks only at what comes before the fault.
inline bool find_duplicate_json_key(std::string_view text, size_t max_depth,
                                    DuplicateJsonKey* twice) {
  detail::DuplicateKeyFinder finder(max_depth);
  nlohmann::json::sax_parse(text.begin(), text.end(), &finder);
  if (finder.found && twice != nullptr) *twice = finder.twice;
  return finder.found;
}

}  // namespace cb
