#pragma once
/// Runs a tokenizer loaded from fuzzed bytes (or over fuzzed text) through everything its
/// users do: encode with and without BOS, decode, pieces of ids. cb::Error is an accepted
/// outcome; ids outside the vocabulary are a bug (the model would index out of bounds).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/error.h"
#include "lib/tokenizer/tokenizer.h"

namespace cb::fuzz {

inline void check_ids(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size()) {
      std::fprintf(stderr, "encode returned id %d outside the vocabulary of %zu (%s)\n", id,
                   tok.vocab_size(), tok.kind().c_str());
      std::abort();
    }
  }
}

/// Encodes and decodes `text`.
inline void exercise_text(const tokenizer::Tokenizer& tok, std::string_view text) {
  for (bool bos : {true, false}) {
    try {
      const std::vector<int32_t> ids = tok.encode(text, bos);
      check_ids(tok, ids);
      (void)tok.decode(ids);
      for (int32_t id : ids) (void)tok.piece(id);
    } catch (const Error&) {
    }
  }
}

/// Fixed probes (ASCII, spaces, multi-byte and malformed UTF-8, digits, special-token
/// look-alikes), `extra` text, and the decoding of the first ids of the vocabulary.
inline void exercise_tokenizer(const tokenizer::Tokenizer& tok, std::string_view extra = {}) {
  static const char* const kProbes[] = {
      "Hello world",
      " leading  and  double  spaces\n\ttabs",
      "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82",
      "\xFF\xFE\xC0\x80 malformed \xED\xA0\x80",
      "1234567 89.5 don't it's",
      "<s></s><unk><|endoftext|>",
      "",
  };
  for (const char* p : kProbes) exercise_text(tok, p);
  if (!extra.empty()) exercise_text(tok, extra);
  std::vector<int32_t> first;
  for (size_t id = 0; id < tok.vocab_size() && id < 64; ++id)
    first.push_back(static_cast<int32_t>(id));
  try {
    (void)tok.decode(first);
  } catch (const Error&) {
  }
  (void)tok.kind();
  (void)tok.add_bos_default();
  for (int32_t id : {tok.bos_id(), tok.eos_id()}) {
    if (id >= 0) (void)tok.piece(id);
  }
}

}  // namespace cb::fuzz
