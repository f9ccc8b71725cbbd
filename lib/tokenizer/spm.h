#pragma once
/// LLaMA's SentencePiece BPE tokenizer reimplemented over a vocabulary embedded in GGUF
/// (tokenizer.ggml.model == "llama"), so that GGUF checkpoints need no tokenizer.model.
/// Encoding follows SentencePiece's bpe_model: score-ordered pair merges with byte
/// fallback; it gives the same ids as the library on the same vocabulary.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lib/tokenizer/tokenizer.h"

namespace cb::formats {
class GgufFile;
}  // namespace cb::formats

namespace cb::tokenizer {

/// Vocabulary entry types, numbered as GGUF's tokenizer.ggml.token_type and SentencePiece's
/// ModelProto piece types (0 is llama.cpp's "undefined", treated as normal).
enum class SpmTokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

/// Special ids (-1 when absent) and flags of an SPM vocabulary.
struct SpmOptions {
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;           ///< -1: the first piece of type kUnknown, if any
  bool add_bos = true;           ///< tokenizer.ggml.add_bos_token
  bool add_space_prefix = true;  ///< tokenizer.ggml.add_space_prefix (SentencePiece's dummy prefix)
};

class SpmTokenizer : public Tokenizer {
 public:
  /// Builds the tokenizer from parallel arrays (piece text, merge score, SpmTokenType value).
  /// Throws cb::Error naming `source` and the GGUF key when the arrays differ in length, a
  /// type is out of range, a byte piece is not "<0xXX>" or a special id is out of range.
  SpmTokenizer(std::vector<std::string> pieces, std::vector<float> scores,
               std::vector<int32_t> types, const SpmOptions& options,
               std::string source = "<spm vocab>");
  /// Reads the llama vocabulary of `f` (tokens, scores, token_type, special ids, flags).
  static std::unique_ptr<SpmTokenizer> from_gguf(const cb::formats::GgufFile& f);

  SpmTokenizer(const SpmTokenizer&) = delete;
  SpmTokenizer& operator=(const SpmTokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  /// Pieces concatenated with "▁" as space and byte pieces as raw bytes; control ids are
  /// skipped, unknown ids give " ⁇ " and the dummy-prefix space of the first piece is dropped.
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string piece(int32_t id) const override;
  size_t vocab_size() const override { return pieces_.size(); }
  int32_t bos_id() const override { return options_.bos_id; }
  int32_t eos_id() const override { return options_.eos_id; }
  int32_t unk_id() const { return options_.unk_id; }
  bool add_bos_default() const override { return options_.add_bos; }
  bool add_space_prefix() const { return options_.add_space_prefix; }
  std::string kind() const override { return "spm (gguf)"; }

  /// The type of `id`; throws cb::Error when out of range.
  SpmTokenType type(int32_t id) const;
  /// True when unknown characters are encoded as <0xXX> byte pieces.
  bool byte_fallback() const { return byte_fallback_; }

 private:
  struct Symbol;

  void validate_and_index();
  void check_id(int32_t id) const;
  std::string normalize(std::string_view text) const;
  void split(const std::string& norm, std::vector<Symbol>* symbols) const;
  int32_t lookup(std::string_view piece) const;
  void emit_unknown(std::string_view piece, std::vector<int32_t>* out) const;

  std::string source_;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<SpmTokenType> types_;
  SpmOptions options_;
  /// Normal, user-defined and unused pieces (the ones merges can produce), keyed into pieces_.
  std::unordered_map<std::string_view, int32_t> mergeable_;
  /// User-defined pieces: matched whole before merging and never merged further.
  std::unordered_set<std::string_view> user_defined_;
  std::vector<size_t> user_defined_lengths_;  ///< distinct lengths, longest first
  std::array<int32_t, 256> byte_ids_{};       ///< id of <0xXX>, -1 when absent
  std::vector<int16_t> byte_value_;           ///< per id: byte of a kByte piece, else -1
  bool byte_fallback_ = false;
  bool has_unused_ = false;
};

}  // namespace cb::tokenizer
