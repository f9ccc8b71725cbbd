#include "lib/tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace cb::tokenizer {

#include "lib/tokenizer/unicode_tables.inc"

namespace {

template <size_t N>
bool in_ranges(const CodepointRange (&table)[N], uint32_t cp) {
  const CodepointRange* end = std::end(table);
  const CodepointRange* it = std::upper_bound(
      std::begin(table), end, cp, [](uint32_t v, const CodepointRange& r) { return v < r.first; });
  return it != std::begin(table) && cp <= std::prev(it)->last;
}

struct ByteMap {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // byte_to_codepoint never exceeds 0x143

  ByteMap() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? b : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

uint32_t utf8_next(std::string_view s, size_t pos, size_t* len) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(pos);
  *len = 1;
  if (b0 < 0x80) return b0;
  size_t n = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1Fu, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0Fu, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07u, min = 0x10000;
  } else {
    return kInvalidCodepointBase + b0;
  }
  if (pos + n > s.size()) return kInvalidCodepointBase + b0;
  for (size_t i = 1; i < n; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return kInvalidCodepointBase + b0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return kInvalidCodepointBase + b0;
  }
  *len = n;
  return cp;
}

std::vector<Utf8Unit> utf8_decode(std::string_view s) {
  std::vector<Utf8Unit> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    const uint32_t cp = utf8_next(s, pos, &len);
    out.push_back({cp, static_cast<uint32_t>(pos), static_cast<uint32_t>(len)});
    pos += len;
  }
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp >= kInvalidCodepointBase) {
    out.push_back(static_cast<char>(cp - kInvalidCodepointBase));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(kLetterRanges, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumberRanges, cp);
}

bool is_punctuation(uint32_t cp) {
  return in_ranges(kPunctuationRanges, cp);
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return in_ranges(kWhitespaceRanges, cp);
}

bool is_ascii_punctuation(uint32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}

bool is_hf_punctuation(uint32_t cp) {
  if (cp < 0x80) return is_ascii_punctuation(cp);
  return in_ranges(kHfPunctuationRanges, cp);
}

uint32_t byte_to_codepoint(uint8_t b) {
  return byte_map().to_cp[b];
}

int codepoint_to_byte(uint32_t cp) {
  const auto& m = byte_map();
  return cp < m.from_cp.size() ? m.from_cp[cp] : -1;
}

size_t settled_length(std::string_view text) {
  size_t n = text.size();
  // An incomplete sequence at the end: a lead byte within the last three bytes whose sequence
  // runs past the end (continuation bytes only after it).
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(text[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    if (b >= 0xC0 && need > back) n -= back;
    break;
  }
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  while (n >= kReplacement.size() && text.substr(n - kReplacement.size(), 3) == kReplacement) {
    n -= kReplacement.size();
  }
  return n;
}

std::string stream_increment(const std::string& text, std::string* shown, bool last) {
  const size_t end = last ? text.size() : settled_length(text);
  if (end <= shown->size() || text.compare(0, shown->size(), *shown) != 0) return "";
  std::string add = text.substr(shown->size(), end - shown->size());
  shown->append(add);
  return add;
}

}  // namespace cb::tokenizer
