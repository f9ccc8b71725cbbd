#include "lib/tokenizer/spm.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "lib/core/error.h"
#include "lib/formats/gguf.h"
#include "lib/tokenizer/load.h"

namespace cb::tokenizer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";         // U+2581 LOWER ONE EIGHTH BLOCK
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";   // U+FFFD
constexpr std::string_view kUnkSurface = " \xE2\x81\x87 ";  // " ⁇ ", SentencePiece's default

constexpr const char* kKeyModel = "tokenizer.ggml.model";
constexpr const char* kKeyTokens = "tokenizer.ggml.tokens";
constexpr const char* kKeyScores = "tokenizer.ggml.scores";
constexpr const char* kKeyTypes = "tokenizer.ggml.token_type";
constexpr const char* kKeyBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kKeyEos = "tokenizer.ggml.eos_token_id";
constexpr const char* kKeyUnk = "tokenizer.ggml.unknown_token_id";
constexpr const char* kKeyAddBos = "tokenizer.ggml.add_bos_token";
constexpr const char* kKeyAddSpace = "tokenizer.ggml.add_space_prefix";

bool is_trail(uint8_t b) {
  return (b & 0xC0) == 0x80;
}
bool valid_codepoint(uint32_t c) {
  return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF);
}

/// Length of the well-formed UTF-8 character at the start of `s`, or 0 when malformed
/// (the rules of SentencePiece's DecodeUTF8: no overlongs, surrogates or > U+10FFFF).
size_t valid_utf8_len(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const size_t n = s.size();
  if (b(0) < 0x80) return 1;
  if (n >= 2 && (b(0) & 0xE0) == 0xC0 && is_trail(b(1))) {
    const uint32_t c = ((b(0) & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    return c >= 0x80 ? 2 : 0;
  }
  if (n >= 3 && (b(0) & 0xF0) == 0xE0 && is_trail(b(1)) && is_trail(b(2))) {
    const uint32_t c = ((b(0) & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    return (c >= 0x800 && valid_codepoint(c)) ? 3 : 0;
  }
  if (n >= 4 && (b(0) & 0xF8) == 0xF0 && is_trail(b(1)) && is_trail(b(2)) && is_trail(b(3))) {
    const uint32_t c =
        ((b(0) & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    return (c >= 0x10000 && valid_codepoint(c)) ? 4 : 0;
  }
  return 0;
}

/// Byte length of the UTF-8 character led by `lead` (1 for stray continuation bytes).
size_t utf8_char_len(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

/// Parses "<0xXX>" into 0..255, or -1.
int parse_byte_piece(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = p[i];
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

template <typename T>
T require(const std::optional<T>& v, const cb::formats::GgufFile& f, const char* key) {
  if (!v) {
    throw make_error(f.path(), std::string("missing metadata key ") + key,
                     "the llama (SentencePiece) vocabulary needs tokens, scores and token_type");
  }
  return *v;
}

}  // namespace

struct SpmTokenizer::Symbol {
  int32_t prev;
  int32_t next;
  uint32_t begin;  ///< byte offset into the normalized text
  uint32_t len;    ///< bytes; 0 once merged into its left neighbour
  bool freeze;     ///< a user-defined piece: never merged
};

SpmTokenizer::SpmTokenizer(std::vector<std::string> pieces, std::vector<float> scores,
                           std::vector<int32_t> types, const SpmOptions& options,
                           std::string source)
    : source_(std::move(source)),
      pieces_(std::move(pieces)),
      scores_(std::move(scores)),
      options_(options) {
  if (pieces_.empty())
    throw make_error(source_, std::string(kKeyTokens) + " is empty", kDamagedVocabFix);
  if (scores_.size() != pieces_.size()) {
    throw make_error(source_,
                     std::string(kKeyScores) + " has " + std::to_string(scores_.size()) +
                         " entries but " + kKeyTokens + " has " + std::to_string(pieces_.size()),
                     kDamagedVocabFix);
  }
  if (types.size() != pieces_.size()) {
    throw make_error(source_,
                     std::string(kKeyTypes) + " has " + std::to_string(types.size()) +
                         " entries but " + kKeyTokens + " has " + std::to_string(pieces_.size()),
                     kDamagedVocabFix);
  }
  types_.reserve(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] < 0 || types[i] > static_cast<int32_t>(SpmTokenType::kByte)) {
      throw make_error(source_,
                       std::string(kKeyTypes) + "[" + std::to_string(i) + "] is " +
                           std::to_string(types[i]) + ", expected 0..6",
                       kDamagedVocabFix);
    }
    types_.push_back(static_cast<SpmTokenType>(types[i]));
  }
  validate_and_index();
}

void SpmTokenizer::validate_and_index() {
  const auto n = static_cast<int64_t>(pieces_.size());
  if (n > std::numeric_limits<int32_t>::max()) {
    throw make_error(source_, std::string(kKeyTokens) + " has too many entries", kDamagedVocabFix);
  }
  const auto check_special = [&](int32_t id, const char* key) {
    if (id < -1 || id >= n) {
      throw make_error(source_,
                       std::string(key) + " is " + std::to_string(id) +
                           ", outside the vocabulary of " + std::to_string(n) + " pieces",
                       kDamagedVocabFix);
    }
  };
  check_special(options_.bos_id, kKeyBos);
  check_special(options_.eos_id, kKeyEos);
  check_special(options_.unk_id, kKeyUnk);

  byte_ids_.fill(-1);
  byte_value_.assign(pieces_.size(), -1);
  std::vector<size_t> lengths;
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) {
    const std::string& p = pieces_[id];
    switch (types_[id]) {
      case SpmTokenType::kByte: {
        const int b = parse_byte_piece(p);
        if (b < 0) {
          throw make_error(source_,
                           std::string(kKeyTokens) + "[" + std::to_string(id) + "] is '" + p +
                               "' but " + kKeyTypes + " marks it a byte piece (expected <0xXX>)",
                           kDamagedVocabFix);
        }
        if (byte_ids_[b] < 0) byte_ids_[b] = id;
        byte_value_[id] = static_cast<int16_t>(b);
        byte_fallback_ = true;
        break;
      }
      case SpmTokenType::kUnknown:
        if (options_.unk_id < 0) options_.unk_id = id;
        break;
      case SpmTokenType::kControl: break;
      case SpmTokenType::kUserDefined:
        if (!p.empty() && user_defined_.insert(p).second) lengths.push_back(p.size());
        [[fallthrough]];
      case SpmTokenType::kUndefined:
      case SpmTokenType::kNormal:
      case SpmTokenType::kUnused:
        if (types_[id] == SpmTokenType::kUnused) has_unused_ = true;
        if (!p.empty()) mergeable_.emplace(p, id);  // first occurrence wins
        break;
    }
  }
  std::sort(lengths.begin(), lengths.end(), std::greater<size_t>());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  user_defined_lengths_ = std::move(lengths);
}

std::unique_ptr<SpmTokenizer> SpmTokenizer::from_gguf(const cb::formats::GgufFile& f) {
  const std::string model = require(f.get_string(kKeyModel), f, kKeyModel);
  if (model != "llama") {
    throw make_error(f.path(),
                     std::string(kKeyModel) + " is '" + model + "', not 'llama' (SentencePiece)",
                     "use the tokenizer for that vocabulary type");
  }
  std::vector<std::string> pieces = require(f.get_string_array(kKeyTokens), f, kKeyTokens);
  std::vector<float> scores = require(f.get_f32_array(kKeyScores), f, kKeyScores);
  std::vector<int32_t> types = require(f.get_i32_array(kKeyTypes), f, kKeyTypes);

  SpmOptions opt;
  const auto n = static_cast<int64_t>(pieces.size());
  const auto special = [&](const char* key) -> int32_t {
    const int64_t id = gguf_token_id(f, key);
    if (id >= n) {
      throw make_error(f.path(),
                       std::string(key) + " is " + std::to_string(id) +
                           ", outside the vocabulary of " + std::to_string(n) + " pieces",
                       kDamagedVocabFix);
    }
    return static_cast<int32_t>(id);
  };
  opt.bos_id = special(kKeyBos);
  opt.eos_id = special(kKeyEos);
  opt.unk_id = special(kKeyUnk);
  opt.add_bos = f.get_bool(kKeyAddBos).value_or(true);
  opt.add_space_prefix = f.get_bool(kKeyAddSpace).value_or(true);
  return std::make_unique<SpmTokenizer>(std::move(pieces), std::move(scores), std::move(types), opt,
                                        f.path());
}

void SpmTokenizer::check_id(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) {
    throw make_error(source_, "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                  std::to_string(pieces_.size()) + " pieces");
  }
}

SpmTokenType SpmTokenizer::type(int32_t id) const {
  check_id(id);
  return types_[id];
}

std::string SpmTokenizer::piece(int32_t id) const {
  check_id(id);
  return pieces_[id];
}

std::string SpmTokenizer::normalize(std::string_view text) const {
  std::string out;
  if (text.empty()) return out;
  out.reserve(text.size() + text.size() / 2 + 3);
  if (options_.add_space_prefix) out += kSpace;
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = valid_utf8_len(text.substr(i));
    if (len == 0) {
      out += kReplacement;  // SentencePiece's normalizer replaces malformed bytes one by one
      i += 1;
    } else if (text[i] == ' ') {
      out += kSpace;
      i += 1;
    } else {
      out.append(text.data() + i, len);
      i += len;
    }
  }
  return out;
}

void SpmTokenizer::split(const std::string& norm, std::vector<Symbol>* symbols) const {
  const std::string_view s(norm);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    bool freeze = false;
    for (size_t ul : user_defined_lengths_) {
      if (ul <= s.size() - pos && user_defined_.count(s.substr(pos, ul)) != 0) {
        len = ul;
        freeze = true;
        break;
      }
    }
    if (len == 0) len = std::min(s.size() - pos, utf8_char_len(static_cast<uint8_t>(s[pos])));
    const auto idx = static_cast<int32_t>(symbols->size());
    symbols->push_back(
        Symbol{idx - 1, -1, static_cast<uint32_t>(pos), static_cast<uint32_t>(len), freeze});
    if (idx > 0) (*symbols)[idx - 1].next = idx;
    pos += len;
  }
}

int32_t SpmTokenizer::lookup(std::string_view piece) const {
  const auto it = mergeable_.find(piece);
  return it == mergeable_.end() ? -1 : it->second;
}

void SpmTokenizer::emit_unknown(std::string_view piece, std::vector<int32_t>* out) const {
  if (byte_fallback_) {
    for (char c : piece) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      out->push_back(id >= 0 ? id : options_.unk_id);
      if (id < 0 && options_.unk_id < 0) break;
    }
  } else {
    out->push_back(options_.unk_id);
  }
  if (out->back() < 0) {
    out->pop_back();
    throw make_error(source_, "text contains '" + std::string(piece) +
                                  "', which is not in the vocabulary, and the vocabulary has "
                                  "neither byte pieces nor an unknown piece");
  }
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos && options_.bos_id >= 0) out.push_back(options_.bos_id);
  const std::string norm = normalize(text);
  if (norm.empty()) return out;
  if (norm.size() > std::numeric_limits<uint32_t>::max()) {
    throw make_error(source_, "text of " + std::to_string(text.size()) + " bytes is too long");
  }

  std::vector<Symbol> symbols;
  symbols.reserve(norm.size());
  split(norm, &symbols);

  struct Pair {
    float score;
    int32_t left;
    int32_t right;
    uint32_t size;
  };
  // Highest score first; on ties the leftmost pair.
  const auto lower = [](const Pair& a, const Pair& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower)> agenda(lower);
  // Merges that produced an unused piece, to be split again afterwards (as SentencePiece).
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> rev_merge;
  const std::string_view s(norm);
  const auto text_of = [&](const Symbol& sym) { return s.substr(sym.begin, sym.len); };

  const auto add_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (l.freeze || r.freeze) return;
    const std::string_view merged = s.substr(l.begin, l.len + r.len);
    const int32_t id = lookup(merged);
    if (id < 0) return;
    agenda.push(Pair{scores_[id], left, right, l.len + r.len});
    if (has_unused_ && types_[id] == SpmTokenType::kUnused) {
      rev_merge[merged] = {text_of(l), text_of(r)};
    }
  };

  for (size_t i = 1; i < symbols.size(); ++i) {
    add_pair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol& l = symbols[top.left];
    Symbol& r = symbols[top.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != top.size) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = top.left;
    add_pair(l.prev, top.left);
    add_pair(top.left, l.next);
  }

  std::function<void(std::string_view)> resegment = [&](std::string_view w) {
    const int32_t id = lookup(w);
    if (id < 0) {
      emit_unknown(w, &out);
      return;
    }
    if (types_[id] == SpmTokenType::kUnused) {
      const auto it = rev_merge.find(w);
      if (it != rev_merge.end()) {
        resegment(it->second.first);
        resegment(it->second.second);
        return;
      }
    }
    out.push_back(id);
  };
  for (int32_t i = 0; i >= 0 && !symbols.empty(); i = symbols[i].next) {
    resegment(text_of(symbols[i]));
  }
  return out;
}

std::string SpmTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool at_start = true;  // the next visible piece may carry the dummy-prefix space
  for (int32_t id : ids) {
    check_id(id);
    const SpmTokenType t = types_[id];
    if (t == SpmTokenType::kControl) continue;
    if (t == SpmTokenType::kByte) {
      out.push_back(static_cast<char>(byte_value_[id]));
    } else if (t == SpmTokenType::kUnknown) {
      out += kUnkSurface;
    } else {
      std::string_view p = pieces_[id];
      if (at_start && options_.add_space_prefix && p.substr(0, kSpace.size()) == kSpace) {
        p.remove_prefix(kSpace.size());
      }
      for (size_t pos = 0; pos < p.size();) {
        if (p.compare(pos, kSpace.size(), kSpace) == 0) {
          out.push_back(' ');
          pos += kSpace.size();
        } else {
          out.push_back(p[pos++]);
        }
      }
    }
    at_start = false;
  }
  return out;
}

}  // namespace cb::tokenizer
