#pragma once
/// The reference tokenizer of LLaMA/Mistral checkpoints: Google's SentencePiece library
/// loading a tokenizer.model file. The library stays behind this header (linked privately).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lib/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace cb::tokenizer {

class SentencePieceTokenizer : public Tokenizer {
 public:
  /// Loads `model_path` (a serialized SentencePiece ModelProto); throws cb::Error naming
  /// the file and the library's message when it cannot be loaded.
  static std::unique_ptr<SentencePieceTokenizer> open(const std::string& model_path);
  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string piece(int32_t id) const override;
  size_t vocab_size() const override;
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  /// LLaMA and Mistral prepend BOS by default.
  bool add_bos_default() const override { return true; }
  std::string kind() const override { return "sentencepiece (tokenizer.model)"; }

  /// The file the model was loaded from.
  const std::string& path() const { return path_; }

 private:
  SentencePieceTokenizer(std::string path,
                         std::unique_ptr<sentencepiece::SentencePieceProcessor> sp);

  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
};

}  // namespace cb::tokenizer
