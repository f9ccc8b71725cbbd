#pragma once
/// A MODEL argument resolved: a GGUF file, a Hugging Face directory (config.json +
/// safetensors, single or sharded), or "preset:NAME". Opening validates that every
/// tensor the config implies is present with the right shape and a loadable dtype.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/formats/gguf.h"
#include "lib/formats/safetensors.h"
#include "lib/formats/tensor_ref.h"
#include "lib/model/config.h"
#include "lib/model/tensor_specs.h"

namespace cb::model {

enum class SourceKind : uint8_t { Gguf, HuggingFace, Preset };
const char* source_kind_name(SourceKind k);

class ModelSource {
 public:
  /// Resolves and validates `arg`; throws cb::Error naming the file, tensor or field.
  static std::unique_ptr<ModelSource> open(const std::string& arg);

  SourceKind kind() const { return kind_; }
  /// The file, directory or "preset:NAME" this came from.
  const std::string& location() const { return location_; }
  const ModelConfig& config() const { return config_; }
  /// True for a GGUF that carries a vocabulary but no tensors (llama.cpp vocab files).
  bool vocab_only() const { return vocab_only_; }

  /// The tensor with canonical name `name`, or nullptr (always nullptr for presets).
  const formats::TensorRef* tensor(const std::string& name) const;
  /// Canonical name -> tensor, in the order of expected_tensors().
  const std::vector<std::pair<std::string, formats::TensorRef>>& tensors() const {
    return tensors_;
  }
  /// Bytes of weights: as stored in the file(s), or numel x preset dtype for presets.
  uint64_t weight_bytes() const { return weight_bytes_; }
  /// The GGUF file when kind() == Gguf (its vocabulary feeds the tokenizer), else nullptr.
  const formats::GgufFile* gguf() const { return gguf_.get(); }

 private:
  ModelSource() = default;
  void open_gguf(const std::string& path);
  void open_hf(const std::string& dir);
  void open_preset(const std::string& name);
  void bind_and_validate(const std::map<std::string, formats::TensorRef>& by_canonical,
                         const std::string& where);
  /// The error for two tensors of the checkpoint that map to one canonical name.
  Error twice_mapped(const std::string& canonical, const formats::TensorRef& a,
                     const formats::TensorRef& b) const;
  /// The error for a tensor of the file that the model does not use.
  Error unused_tensor(const formats::TensorRef& t) const;

  SourceKind kind_ = SourceKind::Preset;
  std::string location_;
  ModelConfig config_;
  bool vocab_only_ = false;
  uint64_t weight_bytes_ = 0;
  std::unique_ptr<formats::GgufFile> gguf_;
  std::unique_ptr<formats::SafetensorsCheckpoint> st_;
  std::vector<std::pair<std::string, formats::TensorRef>> tensors_;
  std::map<std::string, size_t> index_;
};

}  // namespace cb::model
