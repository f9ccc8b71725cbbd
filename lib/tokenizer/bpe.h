#pragma once
/// Byte-level BPE (GPT-2 style, as used by Falcon): text is split by the model's
/// pre-tokenizer, each piece's bytes are mapped to GPT-2's printable code points, and
/// merges are applied by rank within each piece, exactly as Hugging Face `tokenizers`
/// does. Added tokens (GGUF control/user-defined, tokenizer.json added_tokens) are
/// matched in the raw text first, leftmost-longest, as Hugging Face does by default.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lib/tokenizer/pretokenize.h"
#include "lib/tokenizer/tokenizer.h"

namespace cb::formats {
class GgufFile;
}

namespace cb::tokenizer {

class BpeTokenizer : public Tokenizer {
 public:
  /// Loads a GGUF vocabulary with tokenizer.ggml.model "gpt2"; tokenizer.ggml.pre picks
  /// the pre-tokenizer ("falcon", or "default"/"gpt2" for the plain GPT-2 regex).
  static std::unique_ptr<BpeTokenizer> from_gguf(const cb::formats::GgufFile& f);
  /// Loads a Hugging Face tokenizer.json whose model is BPE and whose pre-tokenizer is
  /// ByteLevel or Falcon's sequence. bos/eos come from a sibling tokenizer_config.json
  /// when present, else eos is "<|endoftext|>" when the vocabulary has it.
  static std::unique_ptr<BpeTokenizer> from_tokenizer_json(const std::string& path);

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string piece(int32_t id) const override;
  size_t vocab_size() const override { return pieces_.size(); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  bool add_bos_default() const override { return add_bos_; }
  std::string kind() const override { return kind_; }

  /// The pre-tokenizer this model uses.
  PreTokenizer pre_tokenizer() const { return pre_; }
  /// Number of merge rules.
  size_t merge_count() const { return merges_.size(); }
  /// Id of vocabulary piece `p` (byte-level form, e.g. "Ġworld"); -1 when absent.
  int32_t find_piece(const std::string& p) const;

 private:
  /// How a token takes part in encoding and decoding.
  enum class TokenKind : uint8_t {
    kNormal,   ///< produced by BPE; decoded through the byte map
    kAdded,    ///< matched verbatim in text; decoded verbatim
    kSpecial,  ///< matched verbatim in text; skipped when decoding
  };
  struct Merge {
    uint32_t rank;
    int32_t id;
  };

  BpeTokenizer() = default;
  /// Sets the vocabulary and token kinds; `where` prefixes error messages.
  void set_vocab(std::vector<std::string> pieces, std::vector<TokenKind> kinds,
                 const std::string& where);
  /// Adds merge `rank` of pieces `a`, `b`; throws naming `where` when a piece is unknown.
  void add_merge(const std::string& a, const std::string& b, uint32_t rank,
                 const std::string& where);
  /// Appends the ids of one pre-tokenized piece.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  /// Appends the ids of text containing no added token.
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  /// Id of the longest added token starting at text[pos]; -1 when none, else `*len`.
  int32_t match_added(std::string_view text, size_t pos, size_t* len) const;

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::vector<std::string> pieces_;
  std::vector<TokenKind> kinds_;
  std::unordered_map<std::string, int32_t> piece_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};
  /// Added-token ids by first byte, longest content first.
  std::array<std::vector<int32_t>, 256> added_by_byte_;
  PreTokenizer pre_ = PreTokenizer::kGpt2;
  bool ignore_merges_ = false;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  std::string kind_;
};

}  // namespace cb::tokenizer
