#pragma once
/// Pre-tokenization for byte-level BPE: splitting text into the pieces that BPE merges
/// within, with Hugging Face `tokenizers` semantics. Each stage splits every piece the
/// previous stage produced; pieces are views into the input and tile it exactly.

#include <string_view>
#include <vector>

namespace cb::tokenizer {

/// Which pre-tokenizer a BPE model uses.
enum class PreTokenizer {
  kGpt2,    ///< ByteLevel only (the GPT-2 regex)
  kFalcon,  ///< Punctuation(Contiguous), ByteLevel, Digits, Split [0-9]{3} Isolated
};

/// Name as in llama.cpp's tokenizer.ggml.pre ("gpt2", "falcon").
const char* pre_tokenizer_name(PreTokenizer p);

/// The pieces of `text` under pre-tokenizer `p`.
std::vector<std::string_view> pretokenize(std::string_view text, PreTokenizer p);

/// Punctuation, behavior Contiguous: runs of punctuation (is_hf_punctuation: ASCII
/// punctuation or Unicode 8.0 P*) become their own pieces.
std::vector<std::string_view> split_punctuation(const std::vector<std::string_view>& pieces);

/// ByteLevel's GPT-2 regex, matched by hand:
/// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<std::string_view> split_gpt2(const std::vector<std::string_view>& pieces);

/// Digits with individual_digits=false: runs of ASCII digits become their own pieces.
std::vector<std::string_view> split_digit_runs(const std::vector<std::string_view>& pieces);

/// Split with regex [0-9][0-9][0-9], behavior Isolated: each match is its own piece.
std::vector<std::string_view> split_digit_triples(const std::vector<std::string_view>& pieces);

}  // namespace cb::tokenizer
