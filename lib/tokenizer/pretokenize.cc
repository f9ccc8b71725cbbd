#include "lib/tokenizer/pretokenize.h"

#include <cstdint>

#include "lib/tokenizer/unicode.h"

namespace cb::tokenizer {

namespace {

bool is_ascii_digit(char c) {
  return c >= '0' && c <= '9';
}

/// Appends the maximal runs of units sharing the same value of `key` as pieces.
template <typename Key>
void split_runs(std::string_view piece, Key key, std::vector<std::string_view>& out) {
  size_t start = 0;
  bool start_key = false;
  for (size_t pos = 0; pos < piece.size();) {
    size_t len = 0;
    const bool k = key(utf8_next(piece, pos, &len));
    if (pos == 0) {
      start_key = k;
    } else if (k != start_key) {
      out.push_back(piece.substr(start, pos - start));
      start = pos;
      start_key = k;
    }
    pos += len;
  }
  if (start < piece.size()) out.push_back(piece.substr(start));
}

/// Character class of one unit for the GPT-2 regex.
enum class Cls : uint8_t { kLetter, kNumber, kSpace, kOther };

Cls classify(uint32_t cp) {
  if (is_letter(cp)) return Cls::kLetter;
  if (is_number(cp)) return Cls::kNumber;
  if (is_whitespace(cp)) return Cls::kSpace;
  return Cls::kOther;
}

/// Length in units of the GPT-2 regex match starting at unit `i` (always >= 1).
size_t gpt2_match(const std::vector<Utf8Unit>& u, const std::vector<Cls>& cls, size_t i) {
  const size_t n = u.size();
  const auto cp_at = [&](size_t k) { return k < n ? u[k].cp : 0xFFFFFFFFu; };
  const uint32_t c = u[i].cp;
  // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive, as in the reference regex)
  if (c == '\'' && i + 1 < n) {
    const uint32_t c1 = cp_at(i + 1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    const uint32_t c2 = cp_at(i + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  }
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
  size_t j = i;
  if (c == ' ' && i + 1 < n && cls[i + 1] != Cls::kSpace) ++j;
  if (cls[j] != Cls::kSpace) {
    const Cls k = cls[j];
    while (j < n && cls[j] == k) ++j;
    return j - i;
  }
  // '\s+(?!\S)' backs off one unit when the run is followed by a non-space; a lone
  // space before a non-space falls through to '\s+'.
  while (j < n && cls[j] == Cls::kSpace) ++j;
  if (j < n && j - i > 1) --j;
  return j - i;
}

}  // namespace

const char* pre_tokenizer_name(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::kGpt2: return "gpt2";
    case PreTokenizer::kFalcon: return "falcon";
  }
  return "?";
}

std::vector<std::string_view> split_punctuation(const std::vector<std::string_view>& pieces) {
  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (std::string_view p : pieces) {
    split_runs(p, is_hf_punctuation, out);
  }
  return out;
}

std::vector<std::string_view> split_gpt2(const std::vector<std::string_view>& pieces) {
  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  std::vector<Cls> cls;
  for (std::string_view p : pieces) {
    const std::vector<Utf8Unit> u = utf8_decode(p);
    cls.resize(u.size());
    for (size_t k = 0; k < u.size(); ++k) cls[k] = classify(u[k].cp);
    for (size_t i = 0; i < u.size();) {
      const size_t len = gpt2_match(u, cls, i);
      const size_t end = i + len < u.size() ? u[i + len].offset : p.size();
      out.push_back(p.substr(u[i].offset, end - u[i].offset));
      i += len;
    }
  }
  return out;
}

std::vector<std::string_view> split_digit_runs(const std::vector<std::string_view>& pieces) {
  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (std::string_view p : pieces) {
    size_t start = 0;
    for (size_t i = 1; i <= p.size(); ++i) {
      if (i == p.size() || is_ascii_digit(p[i]) != is_ascii_digit(p[i - 1])) {
        out.push_back(p.substr(start, i - start));
        start = i;
      }
    }
  }
  return out;
}

std::vector<std::string_view> split_digit_triples(const std::vector<std::string_view>& pieces) {
  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (std::string_view p : pieces) {
    size_t start = 0;
    size_t i = 0;
    while (i + 3 <= p.size()) {
      if (is_ascii_digit(p[i]) && is_ascii_digit(p[i + 1]) && is_ascii_digit(p[i + 2])) {
        if (i > start) out.push_back(p.substr(start, i - start));
        out.push_back(p.substr(i, 3));
        i += 3;
        start = i;
      } else {
        ++i;
      }
    }
    if (start < p.size()) out.push_back(p.substr(start));
  }
  return out;
}

std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizer p) {
  if (text.empty()) return {};
  std::vector<std::string_view> pieces{text};
  switch (p) {
    case PreTokenizer::kGpt2: return split_gpt2(pieces);
    case PreTokenizer::kFalcon:
      return split_digit_triples(split_digit_runs(split_gpt2(split_punctuation(pieces))));
  }
  return pieces;
}

}  // namespace cb::tokenizer
