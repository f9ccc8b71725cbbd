#include "lib/tokenizer/sentencepiece.h"

#include <sentencepiece_processor.h>

#include <exception>
#include <string>

#include "lib/core/error.h"
#include "lib/core/regular_file.h"

namespace cb::tokenizer {

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::open(
    const std::string& model_path) {
  // Read here, not by the library's Load, which opens a FIFO and waits for a writer.
  const std::string bytes =
      read_regular_file(model_path, "pass the tokenizer.model file shipped with the checkpoint");
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status st;
  try {
    st = sp->LoadFromSerializedProto(bytes);
  } catch (const std::exception& e) {
    // Not every malformed model fails Load with a status: the trie builder the library
    // bundles (darts-clone) throws, e.g. for a unigram piece that starts with a NUL byte.
    throw make_error(model_path, std::string("cannot load SentencePiece model: ") + e.what(),
                     "pass the tokenizer.model file shipped with the checkpoint");
  }
  if (!st.ok()) {
    // The library's own words for the two common cases name its source lines, not the file's
    // fault ("Internal: unk is not defined." for an empty file, "...(1101) [model_proto->
    // ParseFromArray(...)]" for a cut-short one).
    const std::string msg = st.ToString();
    std::string what = "cannot load SentencePiece model: " + msg;
    if (bytes.empty()) {
      what = "is empty (0 bytes), not a SentencePiece model";
    } else if (msg.find("ParseFromArray") != std::string::npos) {
      what = "is not a SentencePiece model: its " + std::to_string(bytes.size()) +
             " bytes do not parse as one (a truncated or damaged file, or another format)";
    }
    throw make_error(model_path, what, "pass the tokenizer.model file shipped with the checkpoint");
  }
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(model_path, std::move(sp)));
}

SentencePieceTokenizer::SentencePieceTokenizer(
    std::string path, std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
    : path_(std::move(path)), sp_(std::move(sp)) {
  const int n = sp_->GetPieceSize();
  const int bos = sp_->bos_id();
  const int eos = sp_->eos_id();
  bos_id_ = (bos >= 0 && bos < n) ? bos : -1;
  eos_id_ = (eos >= 0 && eos < n) ? eos : -1;
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> ids;
  const sentencepiece::util::Status st = sp_->Encode(text, &ids);
  if (!st.ok()) throw make_error(path_, "SentencePiece encode failed: " + st.ToString());
  std::vector<int32_t> out;
  out.reserve(ids.size() + 1);
  if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  const int n = sp_->GetPieceSize();
  std::vector<int> in;
  in.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= n) {
      throw make_error(path_, "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                  std::to_string(n) + " pieces");
    }
    in.push_back(id);
  }
  std::string text;
  const sentencepiece::util::Status st = sp_->Decode(in, &text);
  if (!st.ok()) throw make_error(path_, "SentencePiece decode failed: " + st.ToString());
  return text;
}

std::string SentencePieceTokenizer::piece(int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) {
    throw make_error(path_, "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(sp_->GetPieceSize()) + " pieces");
  }
  return sp_->IdToPiece(id);
}

size_t SentencePieceTokenizer::vocab_size() const {
  return static_cast<size_t>(sp_->GetPieceSize());
}

}  // namespace cb::tokenizer
