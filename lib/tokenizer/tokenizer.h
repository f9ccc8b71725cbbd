#pragma once
/// The tokenizer interface: text <-> token ids, exactly as the reference implementation
/// of each model family does it (SentencePiece for LLaMA/Mistral, byte-level BPE for Falcon).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cb::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// Token ids of `text`; a BOS id is prepended when `add_bos` and the model has one.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;
  /// Text of `ids` (special tokens such as BOS/EOS are skipped).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  /// The vocabulary piece of one id, as stored (e.g. "▁Hello", "<0x0A>", "Ġworld").
  virtual std::string piece(int32_t id) const = 0;
  virtual size_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  ///< -1 when the model has none
  virtual int32_t eos_id() const = 0;  ///< -1 when the model has none
  /// True when the model's reference tokenizer prepends BOS by default.
  virtual bool add_bos_default() const = 0;
  /// "sentencepiece (tokenizer.model)", "spm (gguf)", "bpe (gguf, falcon)", ...
  virtual std::string kind() const = 0;
};

/// What to do about a vocabulary file (a GGUF's tokenizer metadata, a tokenizer.json) that
/// contradicts itself or the format.
inline constexpr const char* kDamagedVocabFix =
    "the vocabulary is damaged or was written by a broken converter: re-download or re-convert "
    "it, or pass the model's own tokenizer with --tokenizer";

}  // namespace cb::tokenizer
