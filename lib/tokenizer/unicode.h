#pragma once
/// UTF-8 decoding and the Unicode character classes the byte-level BPE pre-tokenizer
/// needs (general categories L*, N*, P* and the White_Space property; Unicode version in
/// unicode_tables.inc), plus GPT-2's
/// reversible byte <-> code point map. Invalid UTF-8 never loses bytes: each invalid
/// byte decodes to its own unit with a code point outside Unicode (kInvalidCodepointBase
/// + byte) that belongs to no class.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cb::tokenizer {

/// An inclusive code point range, as stored in the generated tables.
struct CodepointRange {
  uint32_t first;
  uint32_t last;
};

/// Code point given to an invalid UTF-8 byte b: kInvalidCodepointBase + b.
inline constexpr uint32_t kInvalidCodepointBase = 0x110000;

/// One decoded unit of a UTF-8 string: its code point and byte span.
struct Utf8Unit {
  uint32_t cp;
  uint32_t offset;
  uint32_t len;
};

/// Decodes the unit starting at `s[pos]` (pos < s.size()) and stores its byte length
/// in `*len` (1 for an invalid byte). Rejects overlong forms, surrogates and > U+10FFFF.
uint32_t utf8_next(std::string_view s, size_t pos, size_t* len);

/// All units of `s`, in order; their byte spans tile `s` exactly.
std::vector<Utf8Unit> utf8_decode(std::string_view s);

/// Appends the UTF-8 encoding of `cp` (an invalid-byte code point appends that byte).
void utf8_append(std::string& out, uint32_t cp);

/// General category L* (Lu, Ll, Lt, Lm, Lo): regex \p{L}.
bool is_letter(uint32_t cp);
/// General category N* (Nd, Nl, No): regex \p{N}.
bool is_number(uint32_t cp);
/// General category P* (Pc, Pd, Ps, Pe, Pi, Pf, Po).
bool is_punctuation(uint32_t cp);
/// The White_Space property, which is what \s matches in Oniguruma and Rust's
/// char::is_whitespace (unlike Python's str.isspace it excludes U+001C..U+001F).
bool is_whitespace(uint32_t cp);
/// Rust char::is_ascii_punctuation: the 32 ASCII symbols and punctuation marks.
bool is_ascii_punctuation(uint32_t cp);
/// What Hugging Face's Punctuation pre-tokenizer splits on: ASCII punctuation or P*
/// as of Unicode 8.0 (the tables of the unicode_categories crate it uses).
bool is_hf_punctuation(uint32_t cp);

/// GPT-2 bytes_to_unicode: the printable code point that stands for byte `b`.
uint32_t byte_to_codepoint(uint8_t b);
/// Inverse of byte_to_codepoint; -1 for a code point that stands for no byte.
int codepoint_to_byte(uint32_t cp);

/// How much of `text`, the decoding of a token sequence that is still growing, is settled: all
/// but a trailing incomplete UTF-8 sequence and trailing U+FFFD characters. A character spelled
/// in byte tokens decodes as raw bytes (the GGUF tokenizers) or as one U+FFFD a byte (the
/// SentencePiece library) until its last byte comes, so the text up to here is what streamed
/// output (generate, chat) may print.
size_t settled_length(std::string_view text);

/// Streaming a decoded text that grows token by token: what `text` adds to `*shown` (what was
/// printed so far, extended by the result) up to its settled length, or all of it when
/// `last`. Empty while `text` does not extend `*shown` (a decoder may rewrite the end of an
/// unfinished character).
std::string stream_increment(const std::string& text, std::string* shown, bool last = false);

}  // namespace cb::tokenizer
